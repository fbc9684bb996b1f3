"""The module map in docs/architecture.md is true, and the package is laid out by concept.

The map lists every module and nothing else. The layout stays by concept:
few modules per package, so that a package reads as one part of the
protocol, and no module named as a fragment of another (``proxy_table``
beside ``proxy``, ``serving`` beside ``serve``): what belongs together is
one module.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "diverge_notifications"
SANSIO = PACKAGE / "sansio"
MAP = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| `([^`]+\.py)` \| ([^|]+) \|$", re.MULTILINE)
ROWS = {match[1] for match in ROW.finditer(MAP)}

#: Modules directly under sansio/, and in any other package; ``__init__.py`` is not counted.
MOST_IN_SANSIO = 10
MOST_IN_A_PACKAGE = 12
#: Suffixes that name a part of another module rather than a thing of its own.
FRAGMENT_SUFFIXES = ("table", "states", "parts", "defaults", "settings")


def _modules() -> set[str]:
    return {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")}


def _packages() -> dict[Path, list[str]]:
    """Each package directory and the names of its modules, ``__init__.py`` left out."""
    found: dict[Path, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        modules = found.setdefault(path.parent, [])
        if path.name != "__init__.py":
            modules.append(path.stem)
    return found


def fragments(stems: list[str]) -> list[str]:
    """The modules among ``stems`` (the names in one package) named as a fragment of another.

    A leading underscore does not count: ``_asyncio_parts`` beside ``asyncio``
    is a fragment too. A name is a fragment when it ends in one of
    :data:`FRAGMENT_SUFFIXES` after an underscore (``server_states``), or
    when another module ``X`` of the package is beside it as ``Xing`` or
    ``X_something`` (``proxying`` and ``proxy_table`` beside ``proxy``, and
    ``serving`` beside ``serve``).
    """
    bare = {stem: stem.lstrip("_") for stem in stems if not stem.startswith("__")}
    found = set()
    for stem, name in bare.items():
        if any(name.endswith(f"_{suffix}") for suffix in FRAGMENT_SUFFIXES):
            found.add(stem)
        for other in bare.values():
            if other == name:
                continue
            verb = other[:-1] if other.endswith("e") else other
            if name.startswith((f"{other}_", f"{other}ing", f"{verb}ing")):
                found.add(stem)
    return sorted(found)


def test_the_map_has_rows() -> None:
    assert len(ROWS) >= 40


def test_every_module_of_the_package_is_in_the_map() -> None:
    missing = _modules() - ROWS
    assert not missing, f"add these modules to docs/architecture.md: {sorted(missing)}"


def test_every_module_in_the_map_exists() -> None:
    gone = ROWS - _modules()
    assert not gone, f"docs/architecture.md lists modules that do not exist: {sorted(gone)}"


def test_few_modules_directly_under_sansio() -> None:
    modules = _packages()[SANSIO]
    assert len(modules) <= MOST_IN_SANSIO, f"sansio/ has {len(modules)} modules: {modules}"


def test_few_modules_in_every_other_package() -> None:
    crowded = {
        package.relative_to(PACKAGE).as_posix(): len(modules)
        for package, modules in _packages().items()
        if package != SANSIO and len(modules) > MOST_IN_A_PACKAGE
    }
    assert not crowded, f"packages with more than {MOST_IN_A_PACKAGE} modules: {crowded}"


def test_no_module_is_named_as_a_fragment_of_another() -> None:
    found = {
        package.relative_to(PACKAGE).as_posix() or ".": named
        for package, modules in _packages().items()
        if (named := fragments(modules))
    }
    assert not found, f"merge these modules into the module they are part of: {found}"


@pytest.mark.parametrize(
    ("stems", "caught"),
    [
        (["proxy", "proxying", "proxy_table"], ["proxy_table", "proxying"]),
        (["server", "server_states", "hub"], ["server_states"]),
        (["serve", "serving", "serving_table"], ["serving", "serving_table"]),
        (["demo", "demo_parts", "demo_mcp", "listen"], ["demo_mcp", "demo_parts"]),
        (["asyncio", "_asyncio_parts", "trio"], ["_asyncio_parts"]),
        (["serve_settings", "actions"], ["serve_settings"]),
        (["serving_defaults"], ["serving_defaults"]),
    ],
)
def test_the_fragment_rule_catches(stems: list[str], caught: list[str]) -> None:
    assert fragments(stems) == caught


@pytest.mark.parametrize(
    "stems",
    [
        ["actions", "listen", "proxy", "reports", "serve", "settings"],
        ["_common", "_proxy", "asyncio", "blocking", "tls", "trio"],
        ["ask", "cluster", "demo", "listen", "output", "parser", "relay", "running", "serve"],
        ["__main__", "__init__"],
    ],
)
def test_the_fragment_rule_lets_things_of_their_own_be(stems: list[str]) -> None:
    assert fragments(stems) == []
