"""The plain lines of ``listen`` on a terminal: trouble lines and ``--events`` JSON lines.

The human view (``tests/cli/test_terminal.py``) is not the only output a terminal
sees: without the view, ``listen`` says why it has no path in one plain
line on standard error, and with ``--events`` it prints JSON lines on both
streams. The wire's text in them (reasons, error messages, every string of
a notification) must not control the terminal either: on a terminal every
character :func:`visible` escapes is escaped, and a JSON line stays a JSON
line of the same value. Piped, the JSON lines are the exact record.
"""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
import threading
from typing import Any

import pytest

from diverge_notifications.cli import EXIT_ERRORED, trouble_line
from diverge_notifications.cli.output import write_json_line
from diverge_notifications.cli.terminal import ESCAPED, visible
from diverge_notifications.sansio import (
    ErrorData,
    Event,
    Notification,
    NotServed,
    StreamBroken,
    StreamErrored,
    encode_frame,
    encode_message,
)
from diverge_notifications.sansio.events import ConnectionFailed
from tests.interop import (
    HANG_GUARD,
    LAST_CHUNK,
    PATH_HEAD,
    ROOT,
    ScriptedServer,
    chunk,
    cli_command,
    cli_env,
    kill_if_running,
)

#: Clear the screen, a C1 CSI, DEL, a right-to-left override, a line separator, a bell.
ATTACK = "\x1b[2J\x9b6n\x7f\u202eevil\u2028\x07"


def _raw(text: str) -> list[str]:
    """The characters of ``text`` that :func:`visible` would have escaped."""
    return [char for char in text if ord(char) in ESCAPED]


@pytest.mark.parametrize(
    "event",
    [
        ConnectionFailed(reason=f"certificate verify failed: {ATTACK}"),
        NotServed(status=401, reason=ATTACK),
        StreamBroken(reason=ATTACK),
        StreamErrored(error=ErrorData(code=-32603, message=ATTACK)),
    ],
    ids=lambda event: type(event).__name__,
)
def test_trouble_lines_escape_the_wire_text(event: Event) -> None:
    line = trouble_line(event)
    assert line is not None
    assert _raw(line) == []
    assert visible(ATTACK) in line


class _TerminalText(io.TextIOWrapper):
    """A text stream over bytes that says it is a terminal."""

    def __init__(self, encoding: str = "utf-8") -> None:
        super().__init__(io.BytesIO(), encoding=encoding, errors="strict", write_through=True)

    def isatty(self) -> bool:
        return True

    def text(self) -> str:
        buffer = self.buffer
        assert isinstance(buffer, io.BytesIO)
        return buffer.getvalue().decode(self.encoding)


RECORD: dict[str, Any] = {"event": "StreamBroken", "reason": ATTACK, "more": [ATTACK, {ATTACK: 1}]}


@pytest.mark.parametrize("encoding", ["utf-8", "ascii"])
def test_event_lines_on_a_terminal_are_escaped_and_the_same_json(
    encoding: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = _TerminalText(encoding)
    monkeypatch.setattr(sys, "stderr", terminal)
    write_json_line(RECORD)
    line = terminal.text()
    assert line.endswith("\n") and line.count("\n") == 1
    assert _raw(line[:-1]) == []
    if encoding == "ascii":
        assert line.isascii()
    assert json.loads(line) == RECORD


def test_event_lines_piped_are_the_exact_record(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_json_line(RECORD)
    line = capsys.readouterr().err
    assert "\x9b" in line and "\u202e" in line  # raw: nothing between the wire and a program
    assert json.loads(line) == RECORD


# --- under pseudo-terminals ---------------------------------------------------------------

#: A notification whose JSON strings hold, raw, what JSON allows raw (DEL, C1, bidi, U+2028).
HOSTILE = (
    '{"method":"notifications/message","params":{"level":"error",'
    '"logger":"\x9b6n\u202e","data":{"\x7fkey\u2028":"\\u001b[2J\x9b0;pwned\x07"}}}'
).replace("\x07", "\\u0007")


def _read_all(fd: int, into: bytearray) -> None:
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO once the other side is closed
            return
        if not data:
            return
        into += data


def test_listen_events_on_terminals_shows_nothing_raw() -> None:
    notification = Notification.from_bytes(HOSTILE.encode("utf-8"))
    error = ErrorData(code=-32603, message=ATTACK)
    frames = encode_frame(encode_message(notification)) + encode_frame(encode_message(error))
    answer = PATH_HEAD + chunk(frames) + LAST_CHUNK
    out_master, out_slave = pty.openpty()
    err_master, err_slave = pty.openpty()
    outputs = {"stdout": bytearray(), "stderr": bytearray()}
    with ScriptedServer(answer) as server:
        try:
            process = subprocess.Popen(
                cli_command("listen", server.url, "--once", "--events"),
                stdin=subprocess.DEVNULL,
                stdout=out_slave,
                stderr=err_slave,
                env=cli_env(TERM="xterm-256color"),
                cwd=ROOT,
            )
        finally:
            os.close(out_slave)
            os.close(err_slave)
        readers = [
            threading.Thread(target=_read_all, args=(fd, outputs[name]), daemon=True)
            for name, fd in (("stdout", out_master), ("stderr", err_master))
        ]
        for reader in readers:
            reader.start()
        try:
            status = process.wait(HANG_GUARD)
        finally:
            kill_if_running(process)
            for reader in readers:
                reader.join(HANG_GUARD)
            os.close(out_master)
            os.close(err_master)
    assert status == EXIT_ERRORED
    stdout = outputs["stdout"].decode("utf-8").splitlines()
    stderr = outputs["stderr"].decode("utf-8").splitlines()
    for line in stdout + stderr:
        assert _raw(line) == [], line
    assert [json.loads(line) for line in stdout] == [json.loads(HOSTILE)]
    records = [json.loads(line) for line in stderr]
    assert [record["event"] for record in records] == [
        "StreamOpened",
        "NotificationReceived",
        "StreamErrored",
    ]
    assert records[-1]["error"] == {"code": -32603, "message": ATTACK}
