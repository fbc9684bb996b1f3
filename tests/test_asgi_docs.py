"""docs/asgi.md's example runs: a FastAPI application with the hub mounted, on uvicorn.

Each ```python block of docs/asgi.md is executed in a fresh interpreter, as
the README's are; skipped when FastAPI or uvicorn is not installed (the dev
extra).
"""

from __future__ import annotations

import importlib.util

import pytest

from tests.interop import ROOT, python_blocks, run_python_block

DOC = (ROOT / "docs" / "asgi.md").read_text(encoding="utf-8")
BLOCKS = python_blocks(DOC)
MISSING = [name for name in ("fastapi", "uvicorn") if importlib.util.find_spec(name) is None]


def test_the_doc_has_an_example() -> None:
    assert BLOCKS and "FastAPI" in BLOCKS[0]


@pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)} (the dev extra)")
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_the_example_runs(index: int) -> None:
    result = run_python_block(BLOCKS[index])
    assert result.returncode == 0, f"docs/asgi.md example {index} failed:\n{result.stderr}"
    assert "'data': 'hi'" in result.stdout
