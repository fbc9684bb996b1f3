"""The README's examples run, so they cannot rot.

Every ```python block in README.md is executed in a fresh interpreter, in
order, each on its own. The two set-up commands at the top are checked to be
the ones ``.ci/run`` and the demo actually use. The shell commands run the
venv's interpreter those make, and the ``serve --mcp-stdio`` line runs as
written from the checkout when that venv is there (as in ``.ci/run``).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

from tests.interop import HANG_GUARD, LineReader, kill_if_running, python_blocks, run_python_block

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = python_blocks(README)


def test_readme_has_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int) -> None:
    result = run_python_block(BLOCKS[index])
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


#: The ```sh blocks: commands a reader types.
SHELL_BLOCKS = re.findall(r"^```sh\n(.*?)^```", README, flags=re.MULTILINE | re.DOTALL)
#: The venv the README's install commands make, and its interpreter.
VENV_PYTHON = ".venv/bin/python"


def test_shell_commands_run_the_venvs_interpreter() -> None:
    """After the README's own install command, only ``.venv/bin/python`` has the package."""
    assert SHELL_BLOCKS
    for block in SHELL_BLOCKS:
        for line in block.splitlines():
            bare = re.sub(r"python3 -m venv|\.venv/bin/python", "", line)
            assert not re.search(r"\bpython3?\b", bare), f"not the venv's interpreter: {line}"


def test_the_mcp_stdio_example_relays_as_written() -> None:
    """The README's ``serve --mcp-stdio`` line, typed in the checkout with no ``PYTHONPATH``."""
    if not (ROOT / VENV_PYTHON).exists():
        pytest.skip(f"no {VENV_PYTHON} in the checkout (made by the README's install command)")
    pytest.importorskip("mcp", reason="the 'mcp' extra is not installed")
    (line,) = [
        line for block in SHELL_BLOCKS for line in block.splitlines() if "--mcp-stdio" in line
    ]
    command = [*shlex.split(line.split("#", 1)[0]), "--port", "0"]
    env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert process.stderr is not None
    stderr = LineReader(process.stderr, "stderr")
    try:
        stderr.wait_for_text('"event":"McpConnected"')
        process.send_signal(signal.SIGINT)
        assert process.wait(HANG_GUARD) == 0
    finally:
        kill_if_running(process)
        stderr.join()
    assert "Traceback" not in stderr.text()
