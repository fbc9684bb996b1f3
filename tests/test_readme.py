"""The README's examples run, so they cannot rot.

Every ```python block in README.md is executed in a fresh interpreter, in
order, each on its own. The two set-up commands at the top are checked to be
the ones ``.ci/run`` and the demo actually use.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```python\n(.*?)^```", README, flags=re.MULTILINE | re.DOTALL)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int) -> None:
    result = subprocess.run(
        [sys.executable, "-c", BLOCKS[index]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"README example {index} failed:\n{result.stderr}"


def test_readme_test_command_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_command = ci.strip().splitlines()[-1]
    assert test_command in README


def test_readme_opens_with_both_commands() -> None:
    first_screen = "\n".join(README.splitlines()[:40])
    assert "python -m diverge_notifications demo" in first_screen
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.strip().splitlines()[-1] in first_screen
