"""The package uses the MCP SDK's public names only.

A name with a leading underscore anywhere in its dotted path (a private
module such as ``mcp.shared._context_streams``, or a private name imported
from a public module) can change in any SDK release. This test reads every
module of the package with :mod:`ast` and fails on any import of one from
``mcp`` or ``mcp_types``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Final

PACKAGE: Final = Path(__file__).resolve().parents[2] / "diverge_notifications"
SDK: Final = ("mcp", "mcp_types")


def _is_sdk(module: str) -> bool:
    return module.split(".")[0] in SDK


def _private(dotted: str) -> bool:
    return any(part.startswith("_") for part in dotted.split("."))


def private_sdk_imports(source: str, filename: str) -> list[str]:
    """``file:line name`` for each import of a private SDK name in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _is_sdk(alias.name) and _private(alias.name):
                    found.append(f"{filename}:{node.lineno} {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not _is_sdk(node.module):
                continue
            for alias in node.names:
                dotted = f"{node.module}.{alias.name}"
                if _private(dotted):
                    found.append(f"{filename}:{node.lineno} {dotted}")
    return found


def test_no_module_imports_a_private_sdk_name() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert any(path.parent.name == "bridge" for path in modules)
    found = [
        hit
        for path in modules
        for hit in private_sdk_imports(path.read_text(encoding="utf-8"), str(path))
    ]
    assert found == []


def test_the_check_finds_what_it_looks_for() -> None:
    source = (
        "import mcp.shared._context_streams\n"
        "from mcp.client.streamable_http import _unfollowed_redirect\n"
        "from mcp_types import _types\n"
        "from mcp_types._v2025_11_25 import Tool\n"
        "from mcp.client import Client\n"
        "from ._link import Link\n"
        "import mcp_types as types\n"
        "from mcpx._x import y\n"
    )
    assert private_sdk_imports(source, "m.py") == [
        "m.py:1 mcp.shared._context_streams",
        "m.py:2 mcp.client.streamable_http._unfollowed_redirect",
        "m.py:3 mcp_types._types",
        "m.py:4 mcp_types._v2025_11_25.Tool",
    ]
