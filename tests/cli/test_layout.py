"""The command line's layout: one concern per module, and no import cycle in the package.

The import graph is read from the source (every ``import`` and ``from ...
import``, those inside functions included, since a deferred import still
ties two modules together); each module of ``diverge_notifications.cli``
is also imported alone in a fresh interpreter, so that none of them works
only when another was imported first.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import diverge_notifications
import diverge_notifications.cli

PACKAGE = Path(diverge_notifications.__file__).parent
ROOT = PACKAGE.parent
CLI = Path(diverge_notifications.cli.__file__).parent
#: The modules of the command line, each with its one concern.
CONCERNS = {
    "diverge_notifications.cli": "main(): the commands and their runners",
    "diverge_notifications.cli.parser": "the arguments",
    "diverge_notifications.cli.output": "event records, notification lines, the standard streams",
    "diverge_notifications.cli.running": "exit statuses, signals",
    "diverge_notifications.cli.logs": "serve's log: timestamped text or JSON lines, -v and -q",
    "diverge_notifications.cli.listen": "the listen command",
    "diverge_notifications.cli.serve": "the serve command",
    "diverge_notifications.cli.relay": "serve relaying MCP servers",
    "diverge_notifications.cli.cluster": "serve --redis",
    "diverge_notifications.cli.ask": "the ask command",
    "diverge_notifications.cli.demo": "the demo command, demo --mcp included",
    "diverge_notifications.cli.terminal": "the human view",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
CLI_MODULES = sorted(name for name in MODULES if name.startswith("diverge_notifications.cli"))


def imported_modules(name: str, path: Path) -> set[str]:
    """The modules of the package that the module ``name`` (at ``path``) imports."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            # ``from package import name`` may import the submodule ``name``.
            targets = [module, *(f"{module}.{alias.name}" for alias in node.names)]
        found.update(target for target in targets if target in MODULES and target != name)
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph``, as the modules along it, or ``None``."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        path.append(start)
        on_path.add(start)
        while stack:
            node, pending = stack[-1]
            if not pending:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
                continue
            successor = pending.pop()
            if successor in on_path:
                return [*path[path.index(successor) :], successor]
            if successor not in done:
                stack.append((successor, sorted(graph[successor])))
                path.append(successor)
                on_path.add(successor)
    return None


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_the_graph_sees_relative_and_deferred_imports() -> None:
    edges = imported_modules("diverge_notifications.cli", CLI / "__init__.py")
    assert "diverge_notifications.cli.parser" in edges
    listen = imported_modules("diverge_notifications.cli.listen", CLI / "listen.py")
    assert "diverge_notifications.adapters.asyncio" in listen  # imported inside a function


def test_no_import_cycle_in_the_package() -> None:
    graph = {name: imported_modules(name, path) for name, path in MODULES.items()}
    assert find_cycle(graph) is None


def test_the_command_line_is_a_package_of_one_module_per_concern() -> None:
    assert set(CLI_MODULES) == set(CONCERNS)
    for name in CLI_MODULES:
        tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
        assert ast.get_docstring(tree), f"{name} does not say what it is for"


@pytest.mark.parametrize("name", CLI_MODULES)
def test_each_module_imports_alone(name: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", f"import {name}"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def _run(*command: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(command, capture_output=True, check=False, cwd=ROOT, timeout=60)


def test_the_console_script_and_python_m_run_main() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    scripts = re.search(r"^\[project\.scripts\]\n(.*?)(?:^\[|\Z)", pyproject, re.M | re.S)
    assert scripts is not None
    assert 'diverge-notifications = "diverge_notifications.__main__:main"' in scripts[1]
    by_module = _run(sys.executable, "-m", "diverge_notifications", "--help")
    assert by_module.returncode == 0, by_module.stderr
    usage = b"usage: python -m diverge_notifications [-h] [--version] COMMAND"
    assert by_module.stdout.startswith(usage)
    script = Path(sys.executable).with_name("diverge-notifications")
    if not script.exists():
        pytest.skip("the diverge-notifications console script is not installed")
    by_script = _run(str(script), "--help")
    # The same help, the script naming itself.
    named = by_module.stdout.replace(b"python -m diverge_notifications", b"diverge-notifications")
    assert (by_script.returncode, by_script.stdout) == (0, named)
