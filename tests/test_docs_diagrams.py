"""docs/states.md is what docs/state_diagrams.py draws from the tables today."""

from __future__ import annotations

import enum
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("state_diagrams", DOCS / "state_diagrams.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = load_script()


def test_states_md_is_up_to_date() -> None:
    current = (DOCS / "states.md").read_text(encoding="utf-8")
    assert current == SCRIPT.render(), "run: python docs/state_diagrams.py"


def test_check_mode_agrees() -> None:
    assert SCRIPT.main(["--check"]) == 0


def test_the_proxy_and_sequence_tables_are_registered() -> None:
    tables = {diagram.table for diagram in SCRIPT.DIAGRAMS}
    assert "diverge_notifications.sansio.proxy:PROXY_TRANSITIONS" in tables
    assert "diverge_notifications.sansio.sequence:TRANSITIONS" in tables


def test_every_row_of_every_registered_table_is_drawn() -> None:
    text = SCRIPT.render()
    for diagram in SCRIPT.DIAGRAMS:
        table = SCRIPT.load_table(diagram)
        section = text.split(f"## {diagram.title}\n", 1)[1].split("\n## ", 1)[0]
        arrows = [line for line in section.splitlines() if "-->" in line and "[*]" not in line]
        assert len(arrows) == len(table)
        for (state, _), (next_state, _) in table.items():
            arrow = f"    {state.name} --> {next_state.name}: "
            assert any(line.startswith(arrow) for line in arrows)


class Light(enum.Enum):
    OFF = "off"
    ON = "on"
    BROKEN = "broken"


class Switch(enum.Enum):
    FLIP = "flip"
    SURGE = "surge: 300V; #1"


class Effect(enum.Enum):
    LIT = "lit"
    DARK = "dark"
    FUSED = "fused"


def test_the_generic_drawing_of_any_table() -> None:
    table = {
        (Light.OFF, Switch.FLIP): (Light.ON, Effect.LIT),
        (Light.ON, Switch.FLIP): (Light.OFF, Effect.DARK),
        (Light.ON, Switch.SURGE): (Light.BROKEN, Effect.FUSED),
    }
    text = SCRIPT.state_diagram(table, "A lamp")
    lines = text.splitlines()
    assert lines[0] == "## A lamp"
    assert "```mermaid" in lines and "stateDiagram-v2" in lines
    assert "    [*] --> OFF" in lines
    assert "    OFF --> ON: flip / lit" in lines
    assert "    ON --> BROKEN: surge - 300V, no. 1 / fused" in lines
    assert "    BROKEN --> [*]" in lines
    assert "| ON | surge: 300V; #1 | BROKEN | fused |" in lines


def test_plain_values_work_too_and_empty_tables_do_not() -> None:
    text = SCRIPT.state_diagram({("idle", 1): ("busy", None)}, "Plain")
    assert "    idle --> busy: 1 / None" in text.splitlines()
    with pytest.raises(ValueError):
        SCRIPT.state_diagram({}, "Empty")


def test_select_picks_one_profile() -> None:
    diagram = SCRIPT.Diagram(
        "x", "diverge_notifications.sansio.sequence:TRANSITIONS", select="NO_SUCH_PROFILE"
    )
    with pytest.raises(ValueError):
        SCRIPT.load_table(diagram)
