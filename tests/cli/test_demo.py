"""``python -m diverge_notifications demo`` runs by itself, exits 0 and shows every part.

Piped, the demo prints JSON lines: the demo's steps and every event the
listener saw. Under a pseudo-terminal it prints the human view. ``demo
--mcp`` does the same on the notifications of the example MCP server,
relayed by the bridge, and needs the ``mcp`` extra.
"""

from __future__ import annotations

import errno
import io
import os
import pty
import subprocess
import sys
from typing import Any

import pytest

from diverge_notifications.cli import EXIT_OK, EXIT_USAGE, main
from diverge_notifications.cli.demo import MCP_MISSING_MESSAGE, run_demo, scripted_notifications
from tests.interop import (
    HANG_GUARD,
    cli_command,
    cli_env,
    json_lines,
    kill_if_running,
    run_cli,
    run_without_mcp,
)

# The demo stops itself after DEMO_TIMEOUT; this only guards against a hang.
DEMO_GUARD = 3 * HANG_GUARD


def _run_piped(*options: str) -> list[dict[str, Any]]:
    result = run_cli(cli_command("demo", *options), timeout=DEMO_GUARD)
    assert result.returncode == 0, result.stderr.decode()
    return json_lines(result.stdout.splitlines())


def test_demo_piped_shows_every_part() -> None:
    records = _run_piped()
    listener = [record for record in records if record.get("side") == "listener"]
    steps = [record["step"] for record in records if record.get("side") == "server"]
    assert steps == ["serving", "publish", "cut", "lost", "reask", "shutdown", "done"]

    events = [record["event"] for record in listener]
    kinds = [record["kind"] for record in listener if record["event"] == "NotificationReceived"]
    assert "progress" in kinds
    assert {"tool_list_changed", "resource_list_changed", "prompt_list_changed"} <= set(kinds)
    assert "resource_updated" in kinds and "custom" in kinds
    levels = {
        record["notification"]["params"]["level"]
        for record in listener
        if record.get("kind") == "logging_message"
    }
    assert {"debug", "info", "notice", "warning", "error"} <= levels

    # The cut: the first path breaks; the re-ask: a second path opens and carries more.
    first_broken = events.index("StreamBroken")
    assert events.count("StreamOpened") == 2
    second_open = len(events) - 1 - events[::-1].index("StreamOpened")
    assert first_broken < events.index("RetryScheduled") < second_open
    after = [
        record for record in listener[second_open:] if record["event"] == "NotificationReceived"
    ]
    script = scripted_notifications()
    assert [record["notification"] for record in after] == [n.members for n in script["second"]]
    assert events[-1] == "StreamEnded"

    # Nothing published while the path was down arrives later.
    lost = [record for record in records if record.get("step") == "lost"]
    assert lost[0]["paths"] == 0
    received = [record["notification"] for record in listener if "notification" in record]
    assert all(n.members not in received for n in script["lost"])
    assert len(received) == len(script["first"]) + len(script["second"])


def test_demo_on_a_terminal_shows_the_human_view() -> None:
    master, slave = pty.openpty()
    try:
        process = subprocess.Popen(
            cli_command("demo"),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=cli_env(TERM="xterm-256color"),
        )
    finally:
        os.close(slave)
    output = bytearray()
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the demo closed the terminal
                break
            if not data:
                break
            output += data
        assert process.wait(DEMO_GUARD) == 0
    finally:
        kill_if_running(process)
        os.close(master)
    text = output.decode("utf-8")
    assert "100% 5/5" in text and "█" in text
    assert "\x1b[33mwarning" in text and "\x1b[31merror" in text
    assert "tools list changed" in text
    assert "the path broke" in text
    assert "asking again in" in text
    assert text.count("listening on channel") == 2
    assert "the path ended cleanly" in text


def _mcp_installed() -> bool:
    try:
        import mcp  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _mcp_installed(), reason="the 'mcp' extra is not installed")
def test_demo_mcp_relays_the_example_server() -> None:
    records = _run_piped("--mcp")
    listener = [record for record in records if record.get("side") == "listener"]
    steps = [record["step"] for record in records if record.get("side") == "server"]
    assert steps[:2] == ["serving", "mcp"]
    assert steps[-6:] == ["cut", "lost", "reask", "stop", "shutdown", "done"]
    bridge = [record["event"] for record in records if record.get("step") == "bridge"]
    assert bridge == ["McpConnected", "McpSubscribed"]

    notifications = [record for record in listener if record["event"] == "NotificationReceived"]
    kinds = {record["kind"] for record in notifications}
    assert {"progress", "logging_message", "tool_list_changed", "resource_updated"} <= kinds
    assert "custom" in kinds
    levels = {
        record["notification"]["params"]["level"]
        for record in notifications
        if record["kind"] == "logging_message"
    }
    assert {"debug", "info", "warning", "error"} <= levels

    # The cut and the re-ask, as in the scripted demo.
    events = [record["event"] for record in listener]
    first_broken = events.index("StreamBroken")
    assert events.count("StreamOpened") == 2
    second_open = len(events) - 1 - events[::-1].index("StreamOpened")
    assert first_broken < events.index("RetryScheduled") < second_open
    assert events[-1] == "StreamEnded"

    # A whole burst on each path; the one sent while the path was down is
    # not replayed.
    def bursts(part: list[dict[str, Any]]) -> set[int]:
        return {
            record["notification"]["params"]["burst"]
            for record in part
            if record.get("kind") == "custom"
        }

    before, after = bursts(listener[:first_broken]), bursts(listener[second_open:])
    assert before and after and max(before) < min(after)
    lost = [record for record in records if record.get("step") == "lost"]
    assert lost[0]["paths"] == 0 and lost[0]["count"] > 0
    missed = set(range(1, max(after) + 1)) - before - after
    assert missed, "a burst was sent while the path was down"
    after_kinds = {record.get("kind") for record in listener[second_open:]}
    assert {"progress", "logging_message", "tool_list_changed", "resource_updated"} <= after_kinds


def test_demo_mcp_without_mcp_exits_2() -> None:
    result = run_without_mcp(["demo", "--mcp"])
    assert result.returncode == EXIT_USAGE
    assert result.stderr.decode().strip() == MCP_MISSING_MESSAGE
    assert result.stdout == b""


# --- the reader goes away, the listener fails ------------------------------------------------


def _run_into_head(*options: str, lines: int = 2) -> tuple[int, list[bytes], bytes]:
    """``demo OPTIONS | head -LINES``: the exit status, the lines read and standard error."""
    process = subprocess.Popen(
        cli_command("demo", *options),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    try:
        assert process.stdout is not None and process.stderr is not None
        read = [process.stdout.readline() for _ in range(lines)]
        process.stdout.close()  # the reader goes away
        status = process.wait(DEMO_GUARD)
        return status, read, process.stderr.read()
    finally:
        kill_if_running(process)
        assert process.stderr is not None
        process.stderr.close()


def test_demo_into_head_exits_0_quietly() -> None:
    status, read, stderr = _run_into_head()
    assert all(line.endswith(b"\n") for line in read)
    assert stderr == b""
    assert status == EXIT_OK


@pytest.mark.skipif(not _mcp_installed(), reason="the 'mcp' extra is not installed")
def test_demo_mcp_into_head_exits_0_quietly() -> None:
    status, _read, stderr = _run_into_head("--mcp", lines=3)
    assert stderr == b""
    assert status == EXIT_OK


class _ListenerOutputFails(io.StringIO):
    """A stream whose reader goes away (or which fails) at the listener's first line."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    def write(self, text: str) -> int:
        if '"side":"listener"' in text:
            raise self.error
        return super().write(text)


def test_demo_ends_at_once_when_the_listener_finds_the_reader_gone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    stream = _ListenerOutputFails(BrokenPipeError(errno.EPIPE, "Broken pipe"))
    assert run_demo(human=False, stream=stream) == EXIT_OK
    assert capsys.readouterr().err == ""
    assert [record["step"] for record in json_lines(stream.getvalue().encode().splitlines())] == [
        "serving"
    ]


def test_demo_ends_at_once_when_the_listener_fails(capsys: pytest.CaptureFixture[str]) -> None:
    stream = _ListenerOutputFails(RuntimeError("the listener cannot show this"))
    assert run_demo(human=False, stream=stream) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "demo: the listener failed: RuntimeError('the listener cannot show this')"
    ]


def test_demo_without_stdout_exits_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdout", None)
    assert main(["demo"]) == EXIT_OK
    assert capsys.readouterr().err == ""
