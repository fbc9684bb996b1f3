"""Generate ``docs/states.md``: Mermaid state diagrams drawn from the transition tables.

Every state machine in the library keeps its rules in one module-level
``*TRANSITIONS`` table. This script draws each registered table as a
Mermaid ``stateDiagram-v2`` and lists its rows, so the pictures in the
documentation cannot drift from the code (``tests/test_docs_diagrams.py``
fails when ``docs/states.md`` is stale).

Usage::

    python docs/state_diagrams.py --write    # rewrite docs/states.md (the default)
    python docs/state_diagrams.py --check    # exit 1 if it is out of date

A table may have any of these shapes (enum members read best: their names
become the states, their values the labels):

* ``(state, input) -> next state``;
* ``(state, input) -> (next state, outcome, ...)``, any number of outcomes,
  each a value or a collection of values (a tuple, a named tuple or an
  attrs or dataclass instance works as the row);
* ``(profile, state, input) -> ...`` or ``profile -> {(state, input): ...}``,
  a table of several profiles, drawn one profile at a time.

To draw another machine, add a :class:`Diagram` to :data:`DIAGRAMS`: a title
and where the table lives, as ``"module:ATTRIBUTE"``, or
``"module:ATTRIBUTE[PROFILE]"`` for one profile of a table of several. A
diagram may list several places, tried in order, so that a table can move
to a new module and still be found in the old one meanwhile: the first
place whose module and attribute exist and whose shape fits is drawn. A
place ``"package.*:ATTRIBUTE"`` is whichever module directly under
``package`` has the table (an error if different modules have different
tables of that name); the diagrams list it last, so that a table found
nowhere else is still drawn wherever it moved.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import importlib
import pkgutil
import re
import sys
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

STATES_MD = Path(__file__).resolve().parent / "states.md"
COMMAND = "python docs/state_diagrams.py --write"

_SOURCE = re.compile(
    r"(?P<module>\w+(?:\.\w+)*(?:\.\*)?):(?P<attribute>\w+)(?:\[(?P<select>\w+)\])?\Z"
)


class Diagram(NamedTuple):
    """One registered table: what to call it and where it may live."""

    title: str
    #: ``"module:ATTRIBUTE"`` or ``"module:ATTRIBUTE[PROFILE]"``, tried in order.
    sources: tuple[str, ...]


class Row(NamedTuple):
    """One transition, whatever the shape of the table it came from."""

    state: object
    input: object
    next_state: object
    #: Empty for a table that gives only the next state.
    outcomes: tuple[object, ...]


class Unfit(LookupError):
    """A place that holds no table of the expected shape."""


_CORE = "diverge_notifications.sansio"


def _places(attribute: str, *modules: str, select: str | None = None) -> tuple[str, ...]:
    """``attribute`` in each of ``modules`` (newest place first), then anywhere in the core."""
    suffix = "" if select is None else f"[{select}]"
    return tuple(f"{_CORE}.{module}:{attribute}{suffix}" for module in (*modules, "*"))


#: The diagrams of docs/states.md, in order.
DIAGRAMS: list[Diagram] = [
    Diagram(
        "ProxyConnection: one ask on one HTTP/1.1 connection",
        _places("PROXY_TRANSITIONS", "proxy_table", "proxy"),
    ),
    Diagram(
        "ExchangeConnection: the answer of a one-shot exchange",
        _places("ANSWER_TRANSITIONS", "exchange", "proxy"),
    ),
    Diagram(
        "Sequence rules: provider profile",
        _places("TRANSITIONS", "sequence", select="PROVIDER"),
    ),
    Diagram(
        "Sequence rules: container profile",
        _places("TRANSITIONS", "sequence", select="CONTAINER"),
    ),
    Diagram(
        "ServerConnection: one ask on one HTTP/1.1 connection (provider profile)",
        (
            *_places("SERVER_TRANSITIONS_BY_PROFILE", "server_states", "server", select="PROVIDER"),
            *_places("SERVER_TRANSITIONS", "server_states", "server", select="PROVIDER"),
            *_places("SERVER_TRANSITIONS", "server_states", "server"),
        ),
    ),
    Diagram(
        "ServerConnection: container profile",
        (
            *_places(
                "SERVER_TRANSITIONS_BY_PROFILE", "server_states", "server", select="CONTAINER"
            ),
            *_places("SERVER_TRANSITIONS", "server_states", "server", select="CONTAINER"),
            *_places("CONTAINER_SERVER_TRANSITIONS", "server_states", "server"),
        ),
    ),
    Diagram(
        "ContainerWriter: container profile",
        _places("WRITER_TRANSITIONS", "writer", "server", select="CONTAINER"),
    ),
    Diagram(
        "ContainerWriter: provider profile",
        _places("WRITER_TRANSITIONS", "writer", "server", select="PROVIDER"),
    ),
    Diagram("ProxyPolicy: when the proxy may ask", _places("POLICY_TRANSITIONS", "policy")),
    Diagram(
        "ListenDriver: a listener asking again and again",
        _places("LISTEN_TRANSITIONS", "listening"),
    ),
    Diagram(
        "ServingConnection: one accepted connection of a server",
        _places("SERVING_TRANSITIONS", "serving_table", "serving"),
    ),
    Diagram(
        "ExchangeDriver: one exchange of a proxy",
        _places("EXCHANGE_DRIVER_TRANSITIONS", "proxying"),
    ),
]

_HEADER = f"""\
# State machines

<!-- Generated by docs/state_diagrams.py from the transition tables; do not edit by hand. -->

Each diagram below is drawn from the table the code runs on; regenerate
this page with (`--check` instead exits 1 when it is stale):

    {COMMAND}

An arrow is one row of the table, labelled *input / outcome* (just *input*
for a table that gives only the next state); `[*]` marks where a machine
starts and where it ends. Inputs a state does not list are not in the
table: in a final state everything is discarded. See [proxy.md](proxy.md),
[server.md](server.md), [policy.md](policy.md) and [adapters.md](adapters.md)
for what the states and events mean.
"""


def _name(value: object) -> str:
    """A value's identifier-like name: an enum member's name, else its text."""
    return value.name if isinstance(value, enum.Enum) else str(value)


def _label(value: object) -> str:
    """A value as people read it: an enum member's text value, else its text.

    A collection of outcomes reads as its labels, in order (sorted when the
    collection has no order of its own).
    """
    if isinstance(value, enum.Enum):
        return value.value if isinstance(value.value, str) else value.name
    if isinstance(value, (tuple, list)):
        return ", ".join(_label(item) for item in value)
    if isinstance(value, (set, frozenset)):
        return ", ".join(sorted(_label(item) for item in value))
    return str(value)


def _node(state: object) -> str:
    return re.sub(r"\W", "_", _name(state))


def _mermaid_text(text: str) -> str:
    # Characters that end or redirect a Mermaid statement inside a label.
    return text.replace(";", ",").replace("#", "no. ").replace(":", " -")


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|")


def _fields(value: object) -> tuple[object, ...] | None:
    """A row value's parts, when it is a tuple or a record; ``None`` for a bare state."""
    if isinstance(value, tuple):
        return value
    record: Sequence[Any] | None = getattr(type(value), "__attrs_attrs__", None)
    if record is not None:  # an attrs class: its fields in order
        return tuple(getattr(value, field.name) for field in record)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(getattr(value, field.name) for field in dataclasses.fields(value))
    return None


def rows_of(table: Mapping[Any, Any]) -> list[Row]:
    """The rows of a table keyed ``(state, input)``, whatever its values are."""
    rows = []
    for key, value in table.items():
        if not (isinstance(key, tuple) and len(key) == 2):
            raise Unfit(f"the key {key!r} is not (state, input)")
        parts = _fields(value)
        if parts is None:
            rows.append(Row(key[0], key[1], value, ()))
        elif not parts:
            raise Unfit(f"the row of {key!r} is empty")
        else:
            rows.append(Row(key[0], key[1], parts[0], tuple(parts[1:])))
    return rows


def select(table: Mapping[Any, Any], profile: str) -> Mapping[Any, Any]:
    """One profile of a table of several, as a table keyed ``(state, input)``.

    ``table`` is keyed ``(profile, state, input)``, or maps each profile to
    its own table; ``profile`` is a profile's name (an enum member's name,
    or its ``str()``).
    """
    values = list(table.values())
    if values and all(isinstance(value, Mapping) for value in values):
        for key, value in table.items():
            if _name(key) == profile:
                return value  # type: ignore[no-any-return]
        raise Unfit(f"no profile is named {profile!r}")
    if not all(isinstance(key, tuple) and len(key) == 3 for key in table):
        raise Unfit("not a table of several profiles")
    selected = {
        (state, what): row for (which, state, what), row in table.items() if _name(which) == profile
    }
    if not selected:
        raise Unfit(f"no row is selected by {profile!r}")
    return selected


def _module(name: str) -> ModuleType:
    """Import ``name``; :class:`Unfit` if there is no such module."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is not None and name.startswith(error.name):
            raise Unfit(f"there is no module {name}") from None
        raise  # the module exists and is broken: say so, do not draw another table


def _table_in_package(package_name: str, attribute: str) -> Mapping[Any, Any]:
    """The one table named ``attribute`` in the modules directly under a package."""
    package = _module(package_name)
    # Keyed by identity: a module that imports the table from another holds the same one.
    found: dict[int, tuple[list[str], Mapping[Any, Any]]] = {}
    for info in pkgutil.iter_modules(getattr(package, "__path__", [])):
        name = f"{package_name}.{info.name}"
        table = getattr(importlib.import_module(name), attribute, None)
        if isinstance(table, Mapping):
            found.setdefault(id(table), ([], table))[0].append(name)
    if not found:
        raise Unfit(f"no module of {package_name} has a table {attribute}")
    if len(found) > 1:
        places = "; ".join(", ".join(names) for names, _ in found.values())
        raise ValueError(f"several different tables named {attribute}: {places}")
    return next(iter(found.values()))[1]


def _from(source: str) -> list[Row]:
    """The rows at one place, or :class:`Unfit` saying why there are none there."""
    match = _SOURCE.match(source)
    if match is None:
        raise ValueError(f"{source!r} is not 'module:ATTRIBUTE' or 'module:ATTRIBUTE[PROFILE]'")
    module_name, attribute = match["module"], match["attribute"]
    if module_name.endswith(".*"):
        table = _table_in_package(module_name[:-2], attribute)
    else:
        found = getattr(_module(module_name), attribute, None)
        if not isinstance(found, Mapping):
            raise Unfit(f"{module_name} has no table {attribute}")
        table = found
    profile = match["select"]
    return rows_of(table if profile is None else select(table, profile))


def load_rows(diagram: Diagram) -> list[Row]:
    """The rows of the first of a diagram's places that holds a fitting table."""
    reasons = []
    for source in diagram.sources:
        try:
            rows = _from(source)
        except Unfit as why:
            reasons.append(f"{source}: {why}")
            continue
        if not rows:
            raise ValueError(f"the table at {source} is empty")
        return rows
    raise ValueError(f"no table for {diagram.title!r}: " + "; ".join(reasons))


def _arrow_label(row: Row) -> str:
    if not row.outcomes:
        return _label(row.input)
    return f"{_label(row.input)} / {_label(row.outcomes)}"


def draw(rows: Sequence[Row], title: str) -> str:
    """One Markdown section: ``title``, the Mermaid diagram of ``rows``, and the rows.

    The first state that has a row is the start; a state with no rows of its
    own is final.
    """
    if not rows:
        raise ValueError(f"the table of {title!r} is empty")
    sources: list[object] = []
    for row in rows:
        if row.state not in sources:
            sources.append(row.state)
    finals: list[object] = []
    for row in rows:
        if row.next_state not in sources and row.next_state not in finals:
            finals.append(row.next_state)
    lines = [f"## {title}", "", "```mermaid", "stateDiagram-v2", "    direction LR"]
    lines.append(f"    [*] --> {_node(sources[0])}")
    for row in rows:
        label = _mermaid_text(_arrow_label(row))
        lines.append(f"    {_node(row.state)} --> {_node(row.next_state)}: {label}")
    lines.extend(f"    {_node(state)} --> [*]" for state in finals)
    with_outcomes = any(row.outcomes for row in rows)
    header = ["state", "input", "next state", *(["outcome"] if with_outcomes else [])]
    lines += ["```", "", "| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for row in rows:
        cells = [_name(row.state), _label(row.input), _name(row.next_state)]
        if with_outcomes:
            cells.append(_label(row.outcomes))
        lines.append("| " + " | ".join(_markdown_cell(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def state_diagram(table: Mapping[Any, Any], title: str) -> str:
    """:func:`draw` for a table keyed ``(state, input)``, of any of the shapes above."""
    return draw(rows_of(table), title)


def render(diagrams: Collection[Diagram] = DIAGRAMS) -> str:
    """The whole text of docs/states.md."""
    sections = [draw(load_rows(diagram), diagram.title) for diagram in diagrams]
    return _HEADER + "\n" + "\n".join(sections)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="rewrite states.md (the default)")
    mode.add_argument("--check", action="store_true", help="exit 1 if states.md is stale")
    arguments = parser.parse_args(argv)
    text = render()
    if arguments.check:
        current = STATES_MD.read_text(encoding="utf-8") if STATES_MD.exists() else ""
        if current != text:
            print(f"{STATES_MD} is out of date: run {COMMAND}")
            return 1
        return 0
    STATES_MD.write_text(text, encoding="utf-8")
    print(f"wrote {STATES_MD}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
