"""Each fuzz harness's seeds reach the logic of the module it fuzzes.

A harness names the module it targets in ``TARGET`` (taken from the class
or function it drives, so that it follows the code when a module is
split). Its ``SEEDS`` are replayed, in a fresh interpreter under
``coverage`` (started before the library is imported, so that definitions
count as run, as they would for any user), and the line coverage of the
target must be at least :data:`REQUIRED`: fuzzing starts from inputs that
already reach most of the code, and a seed set that stops doing so (a
refactoring moved the logic, a harness lost its way) fails here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FUZZ_DIR = ROOT / "fuzz"
HARNESSES = sorted(FUZZ_DIR.glob("fuzz_*.py"))
#: The least line coverage of its target a harness's seeds must give, in percent.
REQUIRED = 85.0

_MEASURE = textwrap.dedent(
    """
    import importlib.util, json, sys
    import coverage

    harness_path, package_dir = sys.argv[1], sys.argv[2]
    cov = coverage.Coverage(
        data_file=None, config_file=False, branch=False, include=[package_dir + "/*"]
    )
    cov.start()
    sys.path.insert(0, str(__import__("pathlib").Path(harness_path).parent))
    spec = importlib.util.spec_from_file_location("harness", harness_path)
    harness = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    for seed in harness.SEEDS:
        harness.TestOneInput(seed)
    cov.stop()
    target = sys.modules[harness.TARGET].__file__
    _, statements, _, missing, _ = cov.analysis2(target)
    print(json.dumps({
        "target": harness.TARGET,
        "seeds": len(harness.SEEDS),
        "statements": len(statements),
        "missing": missing,
    }))
    """
)


def harness_id(path: Path) -> str:
    return path.stem


def measure(path: Path) -> dict[str, object]:
    """Replay ``path``'s seeds under coverage in a fresh interpreter; what it measured."""
    result = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), str(ROOT / "diverge_notifications")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    measured: dict[str, object] = json.loads(result.stdout.strip().splitlines()[-1])
    return measured


@pytest.mark.parametrize("path", HARNESSES, ids=harness_id)
def test_seeds_cover_the_target_module(path: Path) -> None:
    pytest.importorskip("coverage", reason="coverage is not installed (the dev extra has it)")
    measured = measure(path)
    statements = measured["statements"]
    missing = measured["missing"]
    assert isinstance(statements, int) and isinstance(missing, list)
    assert measured["seeds"], f"{path.name} has no seeds"
    percent = 100.0 * (statements - len(missing)) / statements
    assert percent >= REQUIRED, (
        f"{path.name}'s {measured['seeds']} seeds cover {percent:.1f} % of "
        f"{measured['target']} (at least {REQUIRED} % required); lines not run: {missing}"
    )
