"""The sans-IO line: nothing under ``diverge_notifications/sansio`` does I/O.

Two checks. Statically, no module there imports a module that opens
sockets, runs event loops, starts threads, reads clocks or draws random
numbers, in any spelling (``import x``, ``import x.y``, ``from x import``,
``from x.y import``, ``__import__("x")``, ``importlib.import_module("x")``).
At run time, importing the package in a fresh interpreter loads none of
them beyond what the interpreter and the runtime dependencies (attrs, h11)
load by themselves, and no sansio module is the importer of one.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TypedDict

import pytest

import diverge_notifications.sansio

FORBIDDEN = frozenset(
    {"socket", "asyncio", "trio", "threading", "time", "random", "select", "selectors"}
)
SANSIO = Path(diverge_notifications.sansio.__file__).parent
MODULES = sorted(SANSIO.rglob("*.py"))
RUNTIME_DEPENDENCIES = ("attrs", "h11")


def forbidden_imports(source: str, filename: str = "<source>") -> list[tuple[int, str]]:
    """(line, module) for every import of a forbidden module in ``source``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source, filename)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0 and node.module is not None:
                names = [node.module]
        elif isinstance(node, ast.Call):
            names = _dynamic_import_names(node)
        line: int = getattr(node, "lineno", 0)
        found.extend((line, name) for name in names if name.split(".", 1)[0] in FORBIDDEN)
    return found


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


def test_there_are_modules_to_check() -> None:
    names = {path.name for path in MODULES}
    assert {"__init__.py", "_json.py", "mcp.py", "messages.py", "asks.py"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(SANSIO)))
def test_module_imports_nothing_that_does_io(path: Path) -> None:
    assert forbidden_imports(path.read_text(encoding="utf-8"), str(path)) == []


@pytest.mark.parametrize(
    ("source", "module"),
    [
        ("import socket", "socket"),
        ("import os, asyncio.events", "asyncio.events"),
        ("from time import monotonic", "time"),
        ("from selectors import DefaultSelector", "selectors"),
        ("from trio.lowlevel import current_clock", "trio.lowlevel"),
        ("import threading as t", "threading"),
        ("def f():\n    import random", "random"),
        ("if True:\n    from select import poll", "select"),
        ("__import__('socket')", "socket"),
        ("import importlib\nimportlib.import_module('asyncio')", "asyncio"),
    ],
)
def test_checker_catches_every_spelling(source: str, module: str) -> None:
    assert [name for _, name in forbidden_imports(source)] == [module]


@pytest.mark.parametrize(
    "source",
    [
        "import os",
        "from . import time",  # a sibling module, not the standard library's
        "from .random import x",
        "import timeit",
        "import sockets_extra",
        "from datetime import time",
    ],
)
def test_checker_allows_innocent_names(source: str) -> None:
    assert forbidden_imports(source) == []


# --- at run time ---------------------------------------------------------------------------

_PROBE = textwrap.dedent(
    """
    import json, sys

    FORBIDDEN = set(json.loads(sys.argv[1]))
    importers = []


    class Recorder:
        # Notes who imports a forbidden module; imports nothing itself.
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name.split(".", 1)[0] in FORBIDDEN:
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
    loaded = sorted(m for m in sys.modules if m.split(".", 1)[0] in FORBIDDEN)
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
    sansio = _probe("diverge_notifications.sansio")
    added = set(sansio["loaded"]) - bare - dependencies
    assert added == set(), f"importing the sans-IO core loaded {sorted(added)}"
    ours = [
        (name, importer)
        for [name, importer] in sansio["importers"]
        if importer.startswith("diverge_notifications")
    ]
    assert ours == []


def test_runtime_probe_sees_imports() -> None:
    # The probe must be able to see a forbidden import, or the test above proves nothing.
    result = _probe("socket")
    assert "socket" in result["loaded"]
    assert ["socket", "__main__"] in result["importers"]
