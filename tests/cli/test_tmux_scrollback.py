"""The human view in a real terminal that keeps a scrollback: tmux.

tmux copies into its history whatever scrolls off the top of a pane, and
also a whole screen erased from its top, which a redraw that went up to the
top and erased to the end of the screen did at every notification once the
bars filled the screen (1,880 lines of history in 5 rounds of 40 tokens in
the report; 5,138 here). Here ``python -m diverge_notifications listen
--once`` runs in a detached 120×30 tmux pane, below a screenful of earlier
output, in a tmux server of the test's own (``-S``, ``-f``); a server in
this process publishes 40 progress tokens updated 5 times with a log line
each round. The pane's history (``#{history_size}``) may grow only by the
lines that really went up, fewer than 150 (20 are expected), and the screen
must show the last log line above the bars, the bars and their summary
within half the pane. Skipped when tmux is not installed.
"""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path

import pytest

from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.sansio import Notification
from diverge_notifications.sansio.server.hub import Hub
from tests.interop import HANG_GUARD, cli_command, cli_env, find_binary

COLUMNS, ROWS = 120, 30
TOKENS, ROUNDS = 40, 5


class _Tmux:
    """A tmux server of its own, on a socket in ``folder``, without the user's configuration."""

    def __init__(self, binary: str, folder: Path) -> None:
        config = folder / "tmux.conf"
        config.write_text("set -g history-limit 50000\n", encoding="utf-8")
        self._command = [binary, "-S", str(folder / "tmux.sock"), "-f", str(config)]
        self._env = cli_env(TERM="xterm-256color")

    def __call__(self, *args: str) -> str:
        done = subprocess.run(
            [*self._command, *args],
            capture_output=True,
            text=True,
            env=self._env,
            timeout=HANG_GUARD,
            check=True,
        )
        return done.stdout

    def screen(self) -> list[str]:
        """The pane's visible rows, as shown."""
        return self("capture-pane", "-p").split("\n")[:ROWS]

    def everything(self) -> list[str]:
        """The pane's history and visible rows."""
        return self("capture-pane", "-p", "-S", "-").split("\n")

    def history(self) -> int:
        """How many lines the pane keeps above its screen."""
        return int(self("display-message", "-p", "#{history_size}"))

    def wait_for(self, text: str) -> None:
        """Wait until ``text`` was shown, on screen or gone up into the history."""
        deadline = time.monotonic() + HANG_GUARD
        while text not in (shown := "\n".join(self.everything())):
            assert time.monotonic() < deadline, f"{text} never showed:\n{shown}"
            time.sleep(0.05)


def _progress(token: int, step: int) -> Notification:
    params = {"progressToken": f"tok-{token:02d}", "progress": step, "total": 10}
    return Notification("notifications/progress", params)


def _log(text: str) -> Notification:
    return Notification("notifications/message", {"level": "info", "data": text})


def test_forty_tokens_in_a_tmux_pane_leave_the_scrollback_alone(tmp_path: Path) -> None:
    binary = find_binary("tmux")
    if binary is None:
        pytest.skip("tmux is not installed")
    tmux = _Tmux(binary, tmp_path)
    with blocking_adapter.serve(Hub()) as server:
        # A full screen first, as after a session's work: the view starts at the bottom.
        listen = shlex.join(cli_command("listen", server.url, "--once"))
        command = f"seq {2 * ROWS}; exec {listen}"
        tmux("new-session", "-d", "-x", str(COLUMNS), "-y", str(ROWS), command)
        try:
            size = tmux("display-message", "-p", "#{pane_width}x#{pane_height}").strip()
            assert size == f"{COLUMNS}x{ROWS}"
            tmux.wait_for("listening on channel")
            before = tmux.history()
            for step in range(1, ROUNDS + 1):
                for token in range(TOKENS):
                    assert server.publish(_progress(token, step)) == 1
                assert server.publish(_log(f"round {step} logged")) == 1
            last = f"round {ROUNDS} logged"
            tmux.wait_for(last)
            grown = tmux.history() - before
            screen = tmux.screen()
        finally:
            tmux("kill-server")
    assert grown < 150, grown
    # The last log line, then the bars of the first tokens at the last step, then the summary.
    (logged,) = [index for index, row in enumerate(screen) if last in row]
    bars = [index for index, row in enumerate(screen) if row.startswith("tok-")]
    summary = [index for index, row in enumerate(screen) if "more in progress" in row]
    assert bars and logged < bars[0] and summary == [bars[-1] + 1]
    assert len(bars) + 1 <= ROWS // 2  # half the screen at most (cli/terminal.py)
    assert all(f"{ROUNDS}/10" in screen[index] for index in bars)
    assert f"and {TOKENS - len(bars)} more in progress" in screen[summary[0]]
    for step in range(1, ROUNDS):  # the earlier log lines are above, or went up into history
        assert not any(f"round {step} logged" in row for row in screen[logged + 1 :])
