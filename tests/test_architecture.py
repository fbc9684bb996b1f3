"""The module map in docs/architecture.md is true: all listed, all there, all in budget."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "diverge_notifications"
MAP = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| `([^`]+\.py)` \| ([^|]+) \| ([^|]+) \| (\d+) \|$", re.MULTILINE)
ROWS = {match[1]: int(match[4]) for match in ROW.finditer(MAP)}


def _modules() -> set[str]:
    return {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")}


def test_the_map_has_rows() -> None:
    assert len(ROWS) >= 40


def test_every_module_of_the_package_is_in_the_map() -> None:
    missing = _modules() - set(ROWS)
    assert not missing, f"add these modules to docs/architecture.md: {sorted(missing)}"


def test_every_module_in_the_map_exists() -> None:
    gone = set(ROWS) - _modules()
    assert not gone, f"docs/architecture.md lists modules that do not exist: {sorted(gone)}"


def test_every_module_fits_its_line_budget() -> None:
    over = {
        name: lines
        for name, budget in ROWS.items()
        if (PACKAGE / name).exists()
        and (lines := len((PACKAGE / name).read_text(encoding="utf-8").splitlines())) > budget
    }
    assert not over, f"modules over their budget in docs/architecture.md: {over}"


def test_no_module_has_a_budget_over_600_and_adapters_300() -> None:
    assert max(ROWS.values()) <= 600
    for adapter in ("adapters/asyncio.py", "adapters/trio.py", "adapters/blocking.py"):
        assert ROWS[adapter] <= 300
