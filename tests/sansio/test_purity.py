"""The sans-IO line: nothing under ``diverge_notifications/sansio`` does I/O.

Two checks. Statically, on the syntax tree of every module there, in every
sub-package (new modules are picked up as they appear): no import of a module that opens
sockets or files, runs event loops, starts threads or processes, handles
signals, reads clocks or the environment, or draws random numbers, in any
spelling (``import x``, ``import x.y``, ``from x import y``, ``from x.y
import z``, ``from x import y`` where ``x.y`` is the forbidden one,
``__import__("x")``, ``importlib.import_module("x")``); no import of the
rest of the package (the adapters, the command line) from inside the core,
absolute or relative; no import machinery at all (``importlib``,
``__import__``), since a dynamic import would hide from this check; and no
reference, called or not, to the builtins that do I/O or run code
(``open``, ``print``, ``input``, ``exec``, ``eval``, ``breakpoint``,
``__builtins__``). A failure names the file, the line and the name.

At run time, importing the package in a fresh interpreter loads none of the
forbidden modules beyond what the interpreter and the runtime dependencies
(attrs, h11) load by themselves, and no sansio module is the importer of one.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple, TypedDict

import pytest

import diverge_notifications.sansio

#: Modules the core may not import, with everything beneath them.
FORBIDDEN = frozenset(
    {
        # sockets, event loops, networking
        "socket",
        "asyncio",
        "trio",
        "select",
        "selectors",
        "ssl",
        "http.client",
        "http.server",
        "socketserver",
        "urllib.request",
        # threads, processes, signals, the environment
        "threading",
        "_thread",
        "concurrent",
        "multiprocessing",
        "subprocess",
        "signal",
        "os",
        # clocks and randomness
        "time",
        "datetime",
        "random",
        "secrets",
        "uuid",
        # files
        "io",
        "pathlib",
        "shutil",
        "tempfile",
        # what would hide an import or a builtin from this check
        "importlib",
        "builtins",
    }
)
#: Builtins the core may not name: I/O, and running code that could import.
FORBIDDEN_BUILTINS = frozenset(
    {"open", "print", "input", "exec", "eval", "breakpoint", "__import__", "__builtins__"}
)
PACKAGE = "diverge_notifications"
CORE = "diverge_notifications.sansio"
SANSIO = Path(diverge_notifications.sansio.__file__).parent
MODULES = sorted(SANSIO.rglob("*.py"))
RUNTIME_DEPENDENCIES = ("attrs", "h11")


class Violation(NamedTuple):
    line: int
    name: str


def forbidden_as(module: str) -> str | None:
    """The forbidden name ``module`` (absolute, dotted) falls under, or ``None``.

    A module of the rest of the package (the adapters, the command line) is
    reported as itself; any other as the entry of :data:`FORBIDDEN` it is in.
    """
    if module == PACKAGE or (module.startswith(PACKAGE + ".") and not _in_core(module)):
        return module
    for name in FORBIDDEN:
        if module == name or module.startswith(name + "."):
            return name
    return None


def _in_core(module: str) -> bool:
    return module == CORE or module.startswith(CORE + ".")


def _from_base(node: ast.ImportFrom, package: str) -> str | None:
    """The absolute module a ``from`` import reads, relative ones resolved in ``package``.

    ``None`` for a relative import that climbs out of every package.
    """
    if node.level == 0:
        return node.module or ""
    parts = package.split(".")
    if node.level - 1 >= len(parts):
        return None
    base = ".".join(parts[: len(parts) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def _imports_in(node: ast.AST, package: str) -> list[str]:
    """The forbidden names one node imports (see :func:`forbidden_as`)."""
    if isinstance(node, ast.Import):
        found = [forbidden_as(alias.name) for alias in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = _from_base(node, package)
        if base is None:
            return ["." * node.level + (node.module or "")]
        reported = forbidden_as(base)
        if reported is not None:
            return [reported]
        # `from http import client` imports the module http.client.
        found = [forbidden_as(f"{base}.{alias.name}") for alias in node.names]
    elif isinstance(node, ast.Call):
        found = [forbidden_as(name) for name in _dynamic_import_names(node)]
    else:
        return []
    return [name for name in found if name is not None]


def _dynamic_import_names(call: ast.Call) -> list[str]:
    function = call.func
    called = (
        function.id
        if isinstance(function, ast.Name)
        else function.attr
        if isinstance(function, ast.Attribute)
        else None
    )
    if called not in ("__import__", "import_module") or not call.args:
        return []
    first = call.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return [first.value]
    return []


def violations(source: str, filename: str = "<source>", package: str = CORE) -> list[Violation]:
    """(line, name) for every forbidden import or builtin in ``source``, in order.

    ``package`` is the package the source is a module of, for relative imports.
    """
    found: set[Violation] = set()
    for node in ast.walk(ast.parse(source, filename)):
        line: int = getattr(node, "lineno", 0)
        found.update(Violation(line, name) for name in _imports_in(node, package))
        # Any reference by name, called or not: `write = print` is a use too.
        if isinstance(node, ast.Name) and node.id in FORBIDDEN_BUILTINS:
            found.add(Violation(line, node.id))
    return sorted(found)


def package_of(path: Path) -> str:
    """The dotted package a file under ``sansio/`` belongs to."""
    inside = path.relative_to(SANSIO).parent.parts
    return ".".join((CORE, *inside))


def check_file(path: Path) -> None:
    """Raise AssertionError naming ``path``, the line and the name of each violation."""
    found = violations(path.read_text(encoding="utf-8"), str(path), package_of(path))
    assert not found, "the sans-IO core must not use these:\n" + "\n".join(
        f"{path}:{line}: {name}" for line, name in found
    )


def test_there_are_modules_to_check() -> None:
    # Every sub-package is walked, not only the modules directly under sansio/.
    names = {path.relative_to(SANSIO).as_posix() for path in MODULES}
    expected = {"__init__.py", "events.py", "transitions.py", "mcp/json.py", "mcp/model.py"}
    expected |= {"wire/messages.py", "wire/asks.py", "client/policy.py", "server/hub.py"}
    expected |= {"drivers/serve.py"}
    assert expected <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(SANSIO)))
def test_module_does_no_io(path: Path) -> None:
    check_file(path)


# --- the checker itself ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("import socket", "socket"),
        ("import os", "os"),
        ("import os.path", "os"),
        ("from os import environ", "os"),
        ("import re, asyncio.events", "asyncio"),
        ("from time import monotonic", "time"),
        ("from datetime import time", "datetime"),
        ("import datetime as dt", "datetime"),
        ("from selectors import DefaultSelector", "selectors"),
        ("from trio.lowlevel import current_clock", "trio"),
        ("import threading as t", "threading"),
        ("import _thread", "_thread"),
        ("from concurrent.futures import ThreadPoolExecutor", "concurrent"),
        ("from concurrent import futures", "concurrent"),
        ("import multiprocessing.pool", "multiprocessing"),
        ("import subprocess", "subprocess"),
        ("from signal import SIGINT", "signal"),
        ("import ssl", "ssl"),
        ("import http.client", "http.client"),
        ("from http.client import HTTPConnection", "http.client"),
        ("from http import client", "http.client"),
        ("from urllib import request", "urllib.request"),
        ("from pathlib import Path", "pathlib"),
        ("def f():\n    import random", "random"),
        ("if True:\n    from select import poll", "select"),
        ("try:\n    import secrets\nexcept ImportError:\n    pass", "secrets"),
        ("import builtins", "builtins"),
        ("from diverge_notifications.adapters import asyncio", "diverge_notifications.adapters"),
        ("import diverge_notifications", "diverge_notifications"),
        ("from .. import adapters", "diverge_notifications"),
        ("from ..adapters._common import ListenDriver", "diverge_notifications.adapters._common"),
        ("from ...outside import anything", "...outside"),
        ("open('f')", "open"),
        ("print('x')", "print"),
        ("answer = input()", "input"),
        ("writer = print", "print"),
        ("handle = open", "open"),
        ("def f(reader=open):\n    pass", "open"),
        ("exec(code)", "exec"),
        ("eval('1')", "eval"),
        ("breakpoint()", "breakpoint"),
        ("__builtins__['open']", "__builtins__"),
    ],
)
def test_checker_catches_every_spelling(source: str, name: str) -> None:
    assert [found for _, found in violations(source)] == [name]


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ("__import__('socket')", ["__import__", "socket"]),
        ("__import__(name)", ["__import__"]),
        ("import importlib\nimportlib.import_module('asyncio')", ["importlib", "asyncio"]),
        ("from importlib import import_module\nimport_module('os')", ["importlib", "os"]),
        ("import os\nimport time\nprint(os)", ["os", "time", "print"]),
    ],
)
def test_checker_catches_dynamic_imports_and_reports_each_line(
    source: str, names: list[str]
) -> None:
    assert [found for _, found in violations(source)] == names


def test_checker_reports_lines() -> None:
    source = "import re\n\n\ndef f():\n    return open('x')\n"
    assert violations(source) == [Violation(5, "open")]


@pytest.mark.parametrize(
    "source",
    [
        "from . import time",  # a sibling module, not the standard library's
        "from .random import x",
        "from .events import ConnectionClosed",
        "from . import http",
        "import timeit",
        "import sockets_extra",
        "import osmium",
        "from http import HTTPStatus",
        "import http",
        "import iolib",
        "step.input",  # attributes and keywords are not the builtins
        "f(input=1, print=2)",
        "re.compile('x')",
        "vars(decoder)",
    ],
)
def test_checker_allows_innocent_names(source: str) -> None:
    assert violations(source) == []


def test_relative_imports_resolve_in_their_package() -> None:
    # From a module of sansio/sub/, `..` is sansio itself: allowed; `...` is not.
    package = CORE + ".sub"
    assert violations("from .. import events", package=package) == []
    assert violations("from ..events import Event", package=package) == []
    assert violations("from ... import cli", package=package) == [Violation(1, PACKAGE)]


def test_a_small_forbidden_module_is_caught() -> None:
    source = "from __future__ import annotations\n\nimport os\n\nprint(os.environ)\n"
    assert violations(source) == [Violation(3, "os"), Violation(5, "print")]


def test_check_file_names_the_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # check_file itself, on a stand-in sansio/ directory holding one bad module.
    core = tmp_path / "sansio"
    (core / "drivers").mkdir(parents=True)
    bad = core / "drivers" / "listen.py"
    bad.write_text("import re\nfrom random import random as draw\n", encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "SANSIO", core)
    with pytest.raises(AssertionError, match=re.escape(f"{bad}:2: random")):
        check_file(bad)


# --- at run time ---------------------------------------------------------------------------

_PROBE = textwrap.dedent(
    """
    import json, sys

    FORBIDDEN = json.loads(sys.argv[1])
    importers = []


    def forbidden(name):
        return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


    class Recorder:
        # Notes who imports a forbidden module; imports nothing itself.
        @staticmethod
        def find_spec(name, path=None, target=None):
            if forbidden(name):
                frame = sys._getframe(1)
                while frame is not None:
                    module = frame.f_globals.get("__name__", "")
                    if not module.startswith(("importlib", "_frozen_importlib")):
                        break
                    frame = frame.f_back
                importers.append([name, module if frame is not None else ""])
            return None


    sys.meta_path.insert(0, Recorder)
    for name in sys.argv[2:]:
        __import__(name)
    loaded = sorted(m for m in sys.modules if forbidden(m))
    print(json.dumps({"loaded": loaded, "importers": importers}))
    """
)


class ProbeResult(TypedDict):
    loaded: list[str]  # forbidden modules in sys.modules at the end
    importers: list[list[str]]  # [forbidden module, the module that imported it]


def _probe(*imports: str) -> ProbeResult:
    completed = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(sorted(FORBIDDEN)), *imports],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    result: ProbeResult = json.loads(completed.stdout)
    return result


def test_importing_sansio_loads_no_io_module_of_its_own() -> None:
    bare = set(_probe()["loaded"])
    dependencies = set(_probe(*RUNTIME_DEPENDENCIES)["loaded"])
    sansio = _probe(CORE)
    added = set(sansio["loaded"]) - bare - dependencies
    assert added == set(), f"importing the sans-IO core loaded {sorted(added)}"
    ours = [
        (name, importer) for [name, importer] in sansio["importers"] if importer.startswith(PACKAGE)
    ]
    assert ours == []


def test_runtime_probe_sees_imports() -> None:
    # The probe must be able to see a forbidden import, or the test above proves nothing.
    result = _probe("socket", "http.client")
    assert "socket" in result["loaded"]
    assert ["socket", "__main__"] in result["importers"]
    assert "http.client" in result["loaded"]
