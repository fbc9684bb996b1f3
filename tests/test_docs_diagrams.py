"""docs/states.md is what docs/state_diagrams.py draws from the tables today.

Besides the drift check, every public ``*TRANSITIONS`` table of the sans-IO
core must be drawn (one profile at a time for a table of several), so a new
machine, or a table moved to a new module, cannot be left out of the page.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import importlib.util
import pkgutil
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest

import diverge_notifications.sansio

DOCS = Path(__file__).resolve().parents[1] / "docs"


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("state_diagrams", DOCS / "state_diagrams.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: dataclasses and NamedTuple look their module up.
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


SCRIPT = load_script()


def test_states_md_is_up_to_date() -> None:
    current = (DOCS / "states.md").read_text(encoding="utf-8")
    assert current == SCRIPT.render(), f"run: {SCRIPT.COMMAND}"


def test_check_mode_agrees() -> None:
    assert SCRIPT.main(["--check"]) == 0


def test_the_page_says_how_to_regenerate_it() -> None:
    head = (DOCS / "states.md").read_text(encoding="utf-8").split("\n## ", 1)[0]
    assert SCRIPT.COMMAND == "python docs/state_diagrams.py --write"
    assert SCRIPT.COMMAND in head


def test_write_then_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    page = tmp_path / "states.md"
    monkeypatch.setattr(SCRIPT, "STATES_MD", page)
    assert SCRIPT.main(["--check"]) == 1  # no page yet
    assert SCRIPT.main(["--write"]) == 0
    assert page.read_text(encoding="utf-8") == SCRIPT.render()
    assert SCRIPT.main(["--check"]) == 0
    page.write_text(page.read_text(encoding="utf-8") + "edited by hand\n", encoding="utf-8")
    assert SCRIPT.main(["--check"]) == 1
    assert SCRIPT.main([]) == 0  # writing is the default
    assert SCRIPT.main(["--check"]) == 0


# -- every machine is drawn ------------------------------------------------------------------


def sansio_tables() -> dict[str, Mapping[Any, Any]]:
    """Every public module-level ``*TRANSITIONS`` mapping of the sans-IO core, by place.

    The sub-packages are walked too: a machine's table lives in its module.
    """
    found: dict[str, Mapping[Any, Any]] = {}
    package = diverge_notifications.sansio
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if re.fullmatch(r"(?:[A-Z][A-Z_]*_)?TRANSITIONS", name) and isinstance(value, Mapping):
                found[f"{info.name}:{name}"] = value
    return found


def profiles(table: Mapping[Any, Any]) -> list[str] | None:
    """The profiles of a table of several, or ``None`` for a table of one."""
    if all(isinstance(value, Mapping) for value in table.values()):
        return [SCRIPT._name(key) for key in table]
    if all(isinstance(key, tuple) and len(key) == 3 for key in table):
        return sorted({SCRIPT._name(key[0]) for key in table})
    return None


def as_drawn(rows: list[Any]) -> frozenset[tuple[str, str, str, str]]:
    """Rows as the page shows them.

    A copy of a table kept at its old place, with its own enums and maybe in
    another order, is drawn when the page has its text.
    """
    name, label = SCRIPT._name, SCRIPT._label
    return frozenset(
        (name(row.state), label(row.input), name(row.next_state), label(row.outcomes))
        for row in rows
    )


def test_every_table_of_the_core_is_drawn() -> None:
    drawn = [as_drawn(SCRIPT.load_rows(diagram)) for diagram in SCRIPT.DIAGRAMS]
    tables = sansio_tables()
    # Wherever they live: tables move between modules.
    names = {place.split(":")[1] for place in tables}
    assert {"PROXY_TRANSITIONS", "ANSWER_TRANSITIONS", "TRANSITIONS"} <= names
    assert {"SERVER_TRANSITIONS", "WRITER_TRANSITIONS", "POLICY_TRANSITIONS"} <= names
    for place, table in tables.items():
        kinds = profiles(table)
        parts = [table] if kinds is None else [SCRIPT.select(table, kind) for kind in kinds]
        for part in parts:
            assert as_drawn(SCRIPT.rows_of(part)) in drawn, f"{place} is not drawn in states.md"


def test_every_row_of_every_registered_table_is_drawn() -> None:
    text = SCRIPT.render()
    for diagram in SCRIPT.DIAGRAMS:
        rows = SCRIPT.load_rows(diagram)
        section = text.split(f"## {diagram.title}\n", 1)[1].split("\n## ", 1)[0]
        arrows = [line for line in section.splitlines() if "-->" in line and "[*]" not in line]
        assert len(arrows) == len(rows)
        for row in rows:
            arrow = f"    {row.state.name} --> {row.next_state.name}: "
            assert any(line.startswith(arrow) for line in arrows)


# -- the drawing, on tables of every shape -----------------------------------------------------


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


class Mains(enum.Enum):
    HOME = "home"
    SITE = "site"


LAMP = {
    (Light.OFF, Switch.FLIP): (Light.ON, Effect.LIT),
    (Light.ON, Switch.FLIP): (Light.OFF, Effect.DARK),
    (Light.ON, Switch.SURGE): (Light.BROKEN, Effect.FUSED),
}


def test_the_generic_drawing_of_any_table() -> None:
    text = SCRIPT.state_diagram(LAMP, "A lamp")
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


def test_a_table_of_next_states_only() -> None:
    table = {(Light.OFF, Switch.FLIP): Light.ON, (Light.ON, Switch.FLIP): Light.OFF}
    lines = SCRIPT.state_diagram(table, "Next only").splitlines()
    assert "    OFF --> ON: flip" in lines
    assert "| state | input | next state |" in lines
    assert "| OFF | flip | ON |" in lines


def test_several_outcomes_and_collections_of_them() -> None:
    table = {
        (Light.OFF, Switch.FLIP): (Light.ON, Effect.LIT, Effect.FUSED),
        (Light.ON, Switch.FLIP): (Light.OFF, frozenset({Effect.LIT, Effect.DARK})),
        (Light.ON, Switch.SURGE): (Light.BROKEN, ()),
    }
    lines = SCRIPT.state_diagram(table, "Several").splitlines()
    assert "    OFF --> ON: flip / lit, fused" in lines
    assert "    ON --> OFF: flip / dark, lit" in lines
    assert "| OFF | flip | ON | lit, fused |" in lines


@attrs.frozen
class AttrsRow:
    next_state: Light
    effect: Effect


@dataclasses.dataclass(frozen=True)
class DataRow:
    next_state: Light
    effect: Effect


@pytest.mark.parametrize("row", [AttrsRow, DataRow])
def test_records_as_rows(row: Any) -> None:
    table = {key: row(*value) for key, value in LAMP.items()}
    assert SCRIPT.state_diagram(table, "A lamp") == SCRIPT.state_diagram(LAMP, "A lamp")


def test_a_table_of_several_profiles_in_either_shape() -> None:
    keyed = {(Mains.HOME, *key): value for key, value in LAMP.items()}
    keyed[(Mains.SITE, Light.OFF, Switch.FLIP)] = (Light.ON, Effect.LIT)
    nested = {Mains.HOME: LAMP, Mains.SITE: {(Light.OFF, Switch.FLIP): (Light.ON, Effect.LIT)}}
    for table in (keyed, nested):
        assert SCRIPT.rows_of(SCRIPT.select(table, "HOME")) == SCRIPT.rows_of(LAMP)
        assert len(SCRIPT.rows_of(SCRIPT.select(table, "SITE"))) == 1
        with pytest.raises(SCRIPT.Unfit):
            SCRIPT.select(table, "NOWHERE")
    with pytest.raises(SCRIPT.Unfit):
        SCRIPT.select(LAMP, "HOME")  # a table of one profile has none to pick


def test_select_picks_one_profile() -> None:
    diagram = SCRIPT.Diagram(
        "x", ("diverge_notifications.sansio.client.sequence:TRANSITIONS[NO_SUCH_PROFILE]",)
    )
    with pytest.raises(ValueError, match="NO_SUCH_PROFILE"):
        SCRIPT.load_rows(diagram)


# -- finding a table that moved -----------------------------------------------------------------


@pytest.fixture
def modules(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A directory on sys.path for throwaway modules."""
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in list(sys.modules):
        if name.startswith("lamp_"):
            monkeypatch.delitem(sys.modules, name)
    return tmp_path


LAMP_MODULE = """
import enum

class Light(enum.Enum):
    OFF = "off"
    ON = "on"

TRANSITIONS = {(Light.OFF, "flip"): (Light.ON, "lit"), (Light.ON, "flip"): (Light.OFF, "%s")}
BY_PROFILE = {"home": TRANSITIONS}
"""


def test_the_first_place_that_holds_the_table_is_drawn(modules: Path) -> None:
    (modules / "lamp_old.py").write_text(LAMP_MODULE % "old", encoding="utf-8")
    moved = SCRIPT.Diagram("Lamp", ("lamp_new:TRANSITIONS", "lamp_old:TRANSITIONS"))
    assert SCRIPT.load_rows(moved)[1].outcomes == ("old",)  # not moved yet
    (modules / "lamp_new.py").write_text(LAMP_MODULE % "new", encoding="utf-8")
    assert SCRIPT.load_rows(moved)[1].outcomes == ("new",)  # moved: the new place wins
    renamed = SCRIPT.Diagram("Lamp", ("lamp_new:LAMP_TRANSITIONS", "lamp_new:TRANSITIONS"))
    assert SCRIPT.load_rows(renamed)[1].outcomes == ("new",)
    # A profile is picked only from a table of several; a table of one is passed over.
    profiled = SCRIPT.Diagram("Lamp", ("lamp_new:TRANSITIONS[home]", "lamp_old:BY_PROFILE[home]"))
    assert SCRIPT.load_rows(profiled)[1].outcomes == ("old",)
    nowhere = SCRIPT.Diagram("Lamp", ("lamp_gone:TRANSITIONS", "lamp_new:NOTHING"))
    with pytest.raises(ValueError, match=r"lamp_gone.*lamp_new"):
        SCRIPT.load_rows(nowhere)


def test_a_broken_module_is_an_error_not_a_reason_to_look_elsewhere(modules: Path) -> None:
    (modules / "lamp_old.py").write_text(LAMP_MODULE % "old", encoding="utf-8")
    (modules / "lamp_broken.py").write_text("import lamp_missing_dependency\n", encoding="utf-8")
    diagram = SCRIPT.Diagram("Lamp", ("lamp_broken:TRANSITIONS", "lamp_old:TRANSITIONS"))
    with pytest.raises(ModuleNotFoundError, match="lamp_missing_dependency"):
        SCRIPT.load_rows(diagram)


def test_a_place_must_be_spelled_module_colon_attribute() -> None:
    with pytest.raises(ValueError, match="module:ATTRIBUTE"):
        SCRIPT.load_rows(SCRIPT.Diagram("x", ("diverge_notifications.sansio.client.policy",)))


def test_a_table_found_wherever_it_moved_in_a_package(modules: Path) -> None:
    package = modules / "lamp_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "lights.py").write_text(LAMP_MODULE % "moved", encoding="utf-8")
    (package / "again.py").write_text("from .lights import TRANSITIONS\n", encoding="utf-8")
    anywhere = SCRIPT.Diagram("Lamp", ("lamp_pkg.old:TRANSITIONS", "lamp_pkg.*:TRANSITIONS"))
    assert SCRIPT.load_rows(anywhere)[1].outcomes == ("moved",)  # one table, re-exported
    (package / "copy.py").write_text(LAMP_MODULE % "copied", encoding="utf-8")
    places = "lamp_pkg.again, lamp_pkg.lights; lamp_pkg.copy"  # the same table; another
    with pytest.raises(ValueError, match=re.escape(f"named TRANSITIONS: {places}")):
        SCRIPT.load_rows(anywhere)
    missing = SCRIPT.Diagram("Lamp", ("lamp_pkg.*:NO_TRANSITIONS",))
    with pytest.raises(ValueError, match="no module of lamp_pkg"):
        SCRIPT.load_rows(missing)
