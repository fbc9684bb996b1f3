"""The human view: a terminal the wire cannot control, live bars that fit the screen.

In process, every control character (C0, DEL, C1) and every character that
reorders text is put into every field the view prints, and must come out as
a visible escape. The live bars are followed through a small model of a
terminal (lines, cursor, a screen of so many rows whose top the cursor
cannot pass) to check that a redraw moves up exactly over what it drew,
never more than fits, and that nothing piles up in the scrollback.

Under a pseudo-terminal, ``python -m diverge_notifications listen`` runs
against a server in this process that publishes escape sequences in every
field; none may reach the terminal raw. Another run sends fifty progress
tokens to a twelve-row window, and two more show progress, coloured log
levels and a list change from ``serve --stdin``, with and without colour.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import pty
import re
import struct
import subprocess
import termios
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.cli import EXIT_ERRORED, EXIT_OK
from diverge_notifications.cli.terminal import (
    ESCAPED,
    LEVEL_STYLES,
    HumanView,
    color_wanted,
    fit,
    terminal_size,
    visible,
)
from diverge_notifications.sansio import (
    ErrorData,
    Event,
    FrameError,
    FrameErrorReason,
    LogLevel,
    MessageRejected,
    Notification,
    NotServed,
    ReaskNeeded,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
    encode_frame,
    encode_message,
)
from diverge_notifications.sansio.events import ConnectionFailed, RetryScheduled
from diverge_notifications.sansio.server.hub import Hub
from tests.interop import (
    HANG_GUARD,
    LAST_CHUNK,
    PATH_HEAD,
    ROOT,
    ScriptedServer,
    ServeProcess,
    chunk,
    cli_command,
    cli_env,
    kill_if_running,
)

#: Every control character: C0, DEL and C1.
CONTROLS = [chr(code) for code in (*range(0x20), *range(0x7F, 0xA0))]
#: The characters that reorder text, and the line and paragraph separators.
REORDERING = [
    chr(code) for code in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
] + ["\u2028", "\u2029"]

#: The view's own control sequences: colours, up and erase the line (live lines taken back),
#: automatic wrap off and on.
OWN_SEQUENCES = re.compile(r"\x1b\[[0-9;]*m|(?:\x1b\[A\x1b\[2K)+\r|\x1b\[\?7[lh]")


class _Stream(io.StringIO):
    """What the view writes to, as to a UTF-8 terminal."""

    encoding = "utf-8"


def _show(item: Notification | Event, *, live: bool, color: bool) -> str:
    stream = _Stream()
    view = HumanView(stream, color=color, live=live, width=120)
    if isinstance(item, Notification):
        view.notification(item)
    else:
        view.event(item)
    view.close()
    return stream.getvalue()


def _raw(text: str) -> list[str]:
    """The characters :func:`visible` escapes that are in ``text`` beyond line ends."""
    return [char for char in text if ord(char) in ESCAPED and char != "\n"]


# --- the view in process -------------------------------------------------------------------


def test_human_view_in_process() -> None:
    stream = _Stream()
    view = HumanView(stream, color=False, live=False, width=100)
    view.event(StreamOpened(channel="c1"))
    for step in (1, 3):
        view.notification(_progress(9, step, total=3))
    view.notification(_message("notifications/message", level="notice", data={"a": 1}))
    view.notification(_message("notifications/cancelled", requestId=4, reason="late"))
    view.notification(_message("vendor/thing", x=[1, 2]))
    view.event(StreamBroken(reason="reset by peer"))
    view.event(RetryScheduled(delay=0.5, attempt=1))
    view.event(ConnectionFailed(reason="refused"))
    view.close()
    text = stream.getvalue()
    assert "\x1b" not in text
    assert "#9" in text and "1/3" in text and "100% 3/3" in text
    assert 'notice    {"a":1}' in text
    assert "request 4 cancelled: late" in text
    assert 'vendor/thing {"x":[1,2]}' in text
    assert "the path broke: reset by peer" in text
    assert "asking again in 0.50 s (attempt 1)" in text
    assert "could not connect: refused" in text


def test_human_view_makes_troubles_stand_out() -> None:
    stream = _Stream()
    view = HumanView(stream, color=True, live=False)
    view.event(ConnectionFailed(reason="refused"))
    view.event(NotServed(status=401, reason="a valid bearer token is required"))
    view.event(NotServed(status=200, reason="a clean end with nothing"))
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("\x1b[33m") and "could not connect: refused" in lines[0]
    assert lines[1].startswith("\x1b[33m") and "not served (401)" in lines[1]
    assert lines[2].startswith("\x1b[2m") and "not served (200)" in lines[2]  # dim: not trouble


def test_color_wanted() -> None:
    assert color_wanted({"TERM": "xterm"})
    assert color_wanted({"TERM": "xterm", "NO_COLOR": ""})
    assert not color_wanted({"TERM": "xterm", "NO_COLOR": "1"})
    assert not color_wanted({"TERM": "dumb"})


# --- the escaping -----------------------------------------------------------------------


@pytest.mark.parametrize("char", CONTROLS + REORDERING, ids=lambda char: f"U+{ord(char):04X}")
def test_visible_writes_a_json_escape(char: str) -> None:
    short = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
    shown = visible(f"a{char}b")
    assert shown == "a" + short.get(char, f"\\u{ord(char):04x}") + "b"
    assert json.loads(f'"{shown}"') == f"a{char}b"  # the escape JSON reads back


def test_visible_forms() -> None:
    assert visible("\x1b[2J") == "\\u001b[2J"
    assert visible("\x1b]0;pwned\x07") == "\\u001b]0;pwned\\u0007"
    assert visible("\x9b6n\x7f") == "\\u009b6n\\u007f"
    assert visible("a\nb\tc\rd\be\ff") == "a\\nb\\tc\\rd\\be\\ff"
    assert visible("\u202eevil\u2069") == "\\u202eevil\\u2069"
    assert visible("\ud800") == "\\ud800"  # a lone surrogate, which no encoding carries


def test_visible_keeps_what_cannot_control_a_terminal() -> None:
    kept = "plain ascii, café, 日本語, back\\slash, 👩\u200d💻, ❤\ufe0f, soft\u00adhyphen"
    assert visible(kept) == kept


def test_visible_ascii_only_escapes_everything_else() -> None:
    shown = visible("café 😀\x1b", ascii_only=True)
    assert shown == "caf\\u00e9 \\ud83d\\ude00\\u001b"
    assert json.loads(f'"{shown}"') == "café 😀\x1b"


@given(st.text())
def test_visible_leaves_nothing_raw(text: str) -> None:
    assert _raw(visible(text)) == [] and "\n" not in visible(text)
    assert visible(text, ascii_only=True).isascii()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


@given(JSON_VALUES)
def test_visible_json_is_the_same_json(value: Any) -> None:
    # Log data and custom params are shown as JSON: escaped, they still read back.
    text = json.dumps(value, ensure_ascii=False)
    assert json.loads(visible(text)) == value
    assert json.loads(visible(text, ascii_only=True)) == value


@given(st.text(), st.integers(min_value=1, max_value=60))
def test_fit_is_visible_and_cut_to_the_columns(text: str, columns: int) -> None:
    shown = fit(text, columns)
    assert _raw(shown) == [] and "\n" not in shown
    if not shown.endswith("…"):
        assert shown == visible(text)
    ascii_shown = fit(text, columns, ascii_only=True)
    assert ascii_shown.isascii() and len(ascii_shown) <= max(columns, 3)


def test_fit_never_cuts_an_escape_and_counts_wide_characters() -> None:
    assert fit("ab\x1bcdef", 8) == "ab…"  # not "ab\\u00…"
    assert fit("\x1b\x1b", 12) == "\\u001b\\u001b"
    assert fit("日本語日本語", 7) == "日本語…"
    assert fit("short", 5) == "short"


# --- every field, every control character ------------------------------------------------------


def _message(method: str, **params: Any) -> Notification:
    return Notification(method, params)


#: Each field the view prints, as a notification or an event with ``text`` in that field.
FIELDS: dict[str, Callable[[str], Notification | Event]] = {
    "method": lambda text: Notification(f"notifications/acme/{text}"),
    "custom params": lambda text: _message("notifications/acme/thing", k=text),
    "custom param name": lambda text: _message("notifications/acme/thing", **{text: 1}),
    "logger": lambda text: _message("notifications/message", level="info", logger=text, data=1),
    "log text": lambda text: _message("notifications/message", level="error", data=text),
    "log object": lambda text: _message("notifications/message", level="info", data={"k": [text]}),
    "log key": lambda text: _message("notifications/message", level="info", data={text: 1}),
    "progress token": lambda text: _message(
        "notifications/progress", progressToken=text, progress=1, total=2
    ),
    "progress message": lambda text: _message(
        "notifications/progress", progressToken="t", progress=1, total=2, message=text
    ),
    "finished progress": lambda text: _message(
        "notifications/progress", progressToken=text, progress=2, total=2, message=text
    ),
    "resource uri": lambda text: _message("notifications/resources/updated", uri=text),
    "cancelled request": lambda text: _message("notifications/cancelled", requestId=text),
    "cancel reason": lambda text: _message("notifications/cancelled", requestId=1, reason=text),
    "elicitation id": lambda text: _message(
        "notifications/elicitation/complete", elicitationId=text
    ),
    "task id": lambda text: _message("notifications/tasks/status", taskId=text, status="working"),
    "task message": lambda text: _message(
        "notifications/tasks/status", taskId="t", status="failed", statusMessage=text
    ),
    "subscriptions": lambda text: _message(
        "notifications/subscriptions/acknowledged", notifications={"k": text}
    ),
    "channel": lambda text: StreamOpened(channel=text),
    "broken reason": lambda text: StreamBroken(reason=text),
    "server error": lambda text: StreamErrored(error=ErrorData(code=-32603, message=text)),
    "refusal": lambda text: NotServed(status=401, reason=text),
    "clean end with nothing": lambda text: NotServed(status=200, reason=text),
    "rejected message": lambda text: MessageRejected(
        error=FrameError(FrameErrorReason.BODY, text, tag=1), payload=b"\x01"
    ),
    "connection failure": lambda text: ConnectionFailed(reason=text),
}


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_every_control_character_is_escaped_in_every_field(field: str) -> None:
    for char in CONTROLS + REORDERING:
        text = f"<{char}>"
        item = FIELDS[field](text)
        if isinstance(item, Notification):
            assert item.kind.value == "custom" or item.view is not None, field
        expected = f"<{visible(char)}>"

        plain = _show(item, live=False, color=False)
        assert expected in plain, (field, char, plain)
        assert _raw(plain) == [] and plain.count("\n") == 1, (field, char, plain)  # one line

        styled = _show(item, live=True, color=True)
        assert expected in styled, (field, char, styled)
        assert _raw(OWN_SEQUENCES.sub("", styled)) == [], (field, char, styled)


def test_public_lines_are_escaped_too() -> None:
    stream = _Stream()
    view = HumanView(stream, color=False, live=False)
    view.line("a\x1b[2J")
    view.note("b\x07")
    view.heading("c\x9b")
    assert stream.getvalue() == "a\\u001b[2J\nb\\u0007\nc\\u009b\n"


def test_an_ascii_terminal_gets_only_ascii() -> None:
    class _Latin1(io.StringIO):
        encoding = "latin-1"

    stream = _Latin1()
    view = HumanView(stream, color=False, live=True)
    view.notification(_message("notifications/message", level="info", data="café ☕ \x1b"))
    view.notification(
        _message("notifications/progress", progressToken="日本", progress=1, total=2, message="…")
    )
    view.close()
    shown = OWN_SEQUENCES.sub("", stream.getvalue())
    assert shown.isascii() and "caf\\u00e9 \\u2615 \\u001b" in shown and "\\u65e5" in shown


# --- a model of the terminal ---------------------------------------------------------------


_PIECES = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|(\r)|(\n)|([^\x1b\r\n]+)|(\x1b)")


class _Terminal:
    """The lines a terminal of ``rows`` rows keeps, scrollback included.

    It follows what the view writes (text, CR, LF, cursor up, erase line,
    colours and automatic wrap, which do not move anything) and records
    what would go wrong: a cursor up past the screen's top (the terminal
    stops there, so lines above stay behind in the scrollback), going up by
    another number of rows than the live lines last drawn before writing
    again, output right after live lines that does not first go back over
    them, and any erase in display (``ESC [ J``), which terminals such as
    tmux copy into the scrollback. :attr:`ups` has the rows gone up before
    each write.
    """

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.lines = [""]
        self.row = 0
        self.column = 0
        self.ups: list[int] = []
        self.faults: list[str] = []
        self._live: int | None = None  # lines of the last live block, until gone over
        self._block: int | None = None  # lines of the live block being drawn
        self._climb = 0  # rows gone up since the last write

    def feed(self, text: str) -> None:
        for match in _PIECES.finditer(text):
            params, final, cr, lf, plain, lone = match.groups()
            if lone is not None:
                self.faults.append("a lone ESC")
            elif final is not None:
                self._control(params, final)
            elif cr is not None:
                self.column = 0
            elif lf is not None:
                self._after_live("a line")
                if self._block is not None:
                    self._block += 1
                self.row += 1
                self.column = 0  # the terminal's ONLCR, or a CR before it
                if self.row == len(self.lines):
                    self.lines.append("")
            else:
                self._after_live("text")
                line = self.lines[self.row]
                self.lines[self.row] = line[: self.column] + plain
                self.column += len(plain)

    def _after_live(self, what: str) -> None:
        if self._climb:
            self.ups.append(self._climb)
            if self._live != self._climb:
                self.faults.append(f"up {self._climb} over {self._live} live lines")
            self._live, self._climb = None, 0
        elif self._live:
            self.faults.append(f"{what} below live lines that were not gone over")
            self._live = None

    def _control(self, params: str, final: str) -> None:
        if final == "A":
            count = int(params or "1")
            self._climb += count
            top = max(0, len(self.lines) - self.rows)
            if self.row - count < top:
                self.faults.append(f"up {count} past the top of a {self.rows}-row screen")
            self.row = max(self.row - count, top)
        elif final == "K" and params == "2":
            self.lines[self.row] = ""
        elif final == "J":
            self.faults.append("an erase in display")
        elif params == "?7" and final == "l":
            self._after_live("a live block")
            self._block = 0
        elif params == "?7" and final == "h":
            self._live, self._block = self._block, None
        elif final != "m":
            self.faults.append(f"unexpected control {params}{final}")

    def count(self, pattern: str) -> int:
        """How many lines kept contain ``pattern`` (a regular expression)."""
        return sum(1 for line in self.lines if re.search(pattern, line))


def _progress(token: str | int, progress: float, total: float = 4, **more: Any) -> Notification:
    return _message(
        "notifications/progress", progressToken=token, progress=progress, total=total, **more
    )


def _cells(text: str) -> int:
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


# --- the row limit -------------------------------------------------------------------------


def test_fifty_tokens_on_a_24_row_screen_do_not_flood_the_scrollback() -> None:
    stream = _Stream()
    view = HumanView(stream, color=True, live=True, width=80, height=24)
    terminal = _Terminal(rows=24)
    for step in (1, 2, 3):
        for token in range(50):
            view.notification(_progress(f"tok-{token:02d}", step, message=f"step {step}"))
            assert 0 < view.drawn <= 12  # half the screen: the other half shows the log
            terminal.feed(stream.getvalue())
            stream.seek(0)
            stream.truncate()
        view.notification(_message("notifications/message", level="info", data=f"log {step}"))
        terminal.feed(stream.getvalue())
        stream.seek(0)
        stream.truncate()
        screen = terminal.lines[-24:]
        assert any(line.endswith(f"log {step}") for line in screen[:12])  # above the bars
    assert terminal.faults == []
    assert max(terminal.ups) == 12
    assert len(terminal.lines) < 24 + 10  # the log lines and nothing else went up
    assert terminal.count(r"… and 39 more in progress") == 1  # 11 bars and the summary
    assert terminal.count(r"tok-\d\d") == 11
    view.notification(_message("notifications/message", level="info", data="a log line"))
    view.close()
    terminal.feed(stream.getvalue())
    assert terminal.faults == []
    for token in range(50):
        assert terminal.count(f"tok-{token:02d}") == (1 if token < 11 else 0)
    assert terminal.count(r"… and 39 more unfinished") == 1
    assert terminal.count("a log line") == 1
    assert terminal.lines[-1] == ""


def test_the_screen_size_is_read_at_every_redraw() -> None:
    sizes = [(80, 24)]
    stream = _Stream()
    view = HumanView(stream, color=False, live=True, size=lambda: sizes[-1])
    for token in range(30):
        view.notification(_progress(token, 1))
    assert view.drawn == 12
    sizes.append((60, 10))
    stream.seek(0)
    stream.truncate()
    view.notification(_progress(0, 2))
    assert view.drawn == 5
    assert "… and 26 more in progress" in stream.getvalue()
    assert all(_cells(line) <= 59 for line in OWN_SEQUENCES.sub("", stream.getvalue()).split("\n"))


@pytest.mark.parametrize(
    ("rows", "bars", "drawn"), [(1, 1, 0), (2, 1, 1), (2, 5, 1), (3, 5, 1), (5, 5, 2)]
)
def test_tiny_screens(rows: int, bars: int, drawn: int) -> None:
    stream = _Stream()
    view = HumanView(stream, color=False, live=True, width=40, height=rows)
    terminal = _Terminal(rows=rows)
    for token in range(bars):
        view.notification(_progress(token, 1))
        assert view.drawn <= rows // 2
    assert view.drawn == drawn
    view.close()
    terminal.feed(stream.getvalue())
    assert terminal.faults == []


def test_wide_and_long_text_stays_on_one_row() -> None:
    stream = _Stream()
    view = HumanView(stream, color=False, live=True, width=50, height=10)
    view.notification(_progress("日本語の長いトークンの名前", 1, message="長い" * 40))
    view.notification(_progress(10**15, 1e300, total=1e301, message="x" * 200))
    lines = OWN_SEQUENCES.sub("", stream.getvalue()).split("\n")
    assert all(_cells(line) <= 49 for line in lines), lines
    assert any("日本語" in line for line in lines) and any("#1000" in line for line in lines)


def test_tokens_beyond_max_bars_are_counted_not_kept() -> None:
    stream = _Stream()
    view = HumanView(stream, color=False, live=True, height=24, max_bars=3)
    for token in range(5):
        view.notification(_progress(token, 1))
    assert view.drawn == 4  # the three tracked bars and the summary line
    text = stream.getvalue()
    assert "2 updates of tokens beyond 3 not tracked" in text
    view.notification(_progress(7, 4))  # finished at once: shown, though not tracked
    assert "#7" in stream.getvalue()
    view.event(StreamEnded())
    assert view.drawn == 0
    stream.seek(0)
    stream.truncate()
    view.notification(_progress(9, 1))  # a new path: counting starts again
    assert "not tracked" not in stream.getvalue()


# --- bars when a path ends ---------------------------------------------------------------------


PATH_ENDS: list[Event] = [
    StreamEnded(),
    StreamErrored(error=ErrorData(code=-32603, message="gone")),
    StreamBroken(reason="reset by peer"),
    NotServed(status=200, reason="a clean end with nothing"),
    ReaskNeeded(),
    StreamOpened(channel="c2"),
]


@pytest.mark.parametrize("end", PATH_ENDS, ids=lambda event: type(event).__name__)
def test_bars_are_finished_when_the_path_ends(end: Event) -> None:
    stream = _Stream()
    view = HumanView(stream, color=False, live=True, height=24)
    terminal = _Terminal(rows=24)
    view.event(StreamOpened(channel="c1"))
    view.notification(_progress("build", 1, message="compiling"))
    view.notification(_progress("test", 3))
    view.notification(_progress("lint", 4))  # finished: permanent already
    assert view.drawn == 2
    view.event(end)
    assert view.drawn == 0
    view.notification(_message("notifications/message", level="info", data="later"))
    view.event(RetryScheduled(delay=0.5, attempt=1))
    view.close()
    terminal.feed(stream.getvalue())
    assert terminal.faults == []
    for label in ("build", "test", "lint"):
        assert terminal.count(label) == 1  # drawn a last time, and left alone
    kept = [line for line in terminal.lines if line]
    assert "listening on channel c1" in kept[0]
    assert "lint" in kept[1] and "100%" in kept[1]  # finished before the end
    assert "build" in kept[2] and "25%" in kept[2] and "compiling" in kept[2]
    assert "test" in kept[3] and "75%" in kept[3]
    assert kept[-2].endswith("later") and "asking again" in kept[-1]


def test_a_token_continued_on_the_next_path_gets_a_new_bar() -> None:
    stream = _Stream()
    view = HumanView(stream, color=False, live=False)
    view.notification(_progress("build", 1, message="first path"))
    view.event(StreamBroken(reason="reset by peer"))
    view.notification(_progress("build", 2))
    lines = stream.getvalue().splitlines()
    assert "first path" in lines[0] and "first path" not in lines[-1]


def test_terminal_size_of_something_that_is_not_a_terminal() -> None:
    assert terminal_size(io.StringIO()) >= (1, 1)
    master, slave = pty.openpty()
    try:
        with os.fdopen(os.dup(slave), "w") as stream:
            assert terminal_size(stream) == (80, 24)  # a fresh pty reports 0 by 0
            _set_size(slave, rows=7, columns=33)
            assert terminal_size(stream) == (33, 7)
    finally:
        os.close(slave)
        os.close(master)


# --- under a pseudo-terminal ------------------------------------------------------------------


def _set_size(fd: int, *, rows: int, columns: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


class _PtyListen:
    """``listen URL --once`` on a ``rows`` by ``columns`` pseudo-terminal, read on a thread."""

    def __init__(self, url: str, *, rows: int, columns: int, color: bool) -> None:
        master, slave = pty.openpty()
        self._master = master
        _set_size(slave, rows=rows, columns=columns)
        env = cli_env(
            TERM="xterm-256color", NO_COLOR=None if color else "1", COLUMNS=None, LINES=None
        )
        try:
            self.process = subprocess.Popen(
                cli_command("listen", url, "--once"),
                stdin=slave,
                stdout=slave,
                stderr=subprocess.PIPE,
                env=env,
                cwd=ROOT,
            )
        finally:
            os.close(slave)
        self._output = bytearray()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self._master, 65536)
            except OSError:  # EIO once the other side is closed
                return
            if not data:
                return
            with self._lock:
                self._output += data

    def output(self) -> bytes:
        with self._lock:
            return bytes(self._output)

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + HANG_GUARD
        while text.encode("utf-8") not in self.output():
            assert self.process.poll() is None, self.output()
            assert time.monotonic() < deadline, self.output()
            time.sleep(0.02)

    def wait(self) -> int:
        status = self.process.wait(HANG_GUARD)
        self._reader.join(HANG_GUARD)
        return status

    def close(self) -> None:
        kill_if_running(self.process)
        assert self.process.stderr is not None
        self.process.stderr.close()
        self._reader.join(HANG_GUARD)
        os.close(self._master)


@contextlib.contextmanager
def _listening(
    url: str, *, rows: int = 24, columns: int = 100, color: bool = True
) -> Iterator[_PtyListen]:
    listen = _PtyListen(url, rows=rows, columns=columns, color=color)
    try:
        yield listen
    finally:
        listen.close()


def _run_human_listen(*, color: bool) -> str:
    """What ``listen --once`` shows on a terminal of progress, logs and a list change."""
    progress = [_progress("build", step, message=f"step {step}") for step in (1, 2, 4)]
    logs = [
        _message("notifications/message", level=level, data=f"{level} text")
        for level in ("info", "warning", "error")
    ]
    changed = Notification("notifications/resources/list_changed")
    with ServeProcess("--stdin") as serve, _listening(serve.url, color=color) as listen:
        listen.wait_for("listening on channel")
        for notification in (
            progress[0],
            logs[0],
            progress[1],
            logs[1],
            changed,
            logs[2],
            progress[2],
        ):
            serve.send_line(notification.to_bytes())
        listen.wait_for("100%")
        assert serve.interrupt() == EXIT_OK
        assert listen.wait() == EXIT_OK
        return listen.output().decode("utf-8")


def test_human_view_on_a_terminal() -> None:
    text = _run_human_listen(color=True)
    assert "build" in text and "█" in text  # the progress bar
    assert "1/4" in text and "2/4" in text and "100% 4/4" in text
    assert "\x1b[A\x1b[2K\r" in text  # redrawn in place
    warning = f"\x1b[{LEVEL_STYLES[LogLevel.WARNING]}mwarning"
    error = f"\x1b[{LEVEL_STYLES[LogLevel.ERROR]}merror"
    assert warning in text and "warning text" in text
    assert error in text and "error text" in text
    assert "resources list changed" in text
    assert "the path ended cleanly" in text
    assert "{" not in text  # no JSON lines on a terminal


def test_human_view_respects_no_color() -> None:
    text = _run_human_listen(color=False)
    assert "warning text" in text and "error text" in text and "100% 4/4" in text
    assert "\x1b[3" not in text and "\x1b[1;" not in text and "\x1b[2m" not in text


#: What a hostile server puts in every field: clear the screen, retitle the
#: window, a C1 CSI asking for the cursor position, a raw bell.
ATTACK = "\x1b[2J\x1b]0;pwned\x07\x9b6n\x07"
ATTACK_SHOWN = visible(ATTACK)


def _hostile_notifications() -> list[Notification]:
    return [
        Notification(f"notifications/{ATTACK}"),
        _message("notifications/acme/x", **{ATTACK: ATTACK}),
        _message("notifications/message", level="warning", logger=ATTACK, data=ATTACK),
        _message("notifications/message", level="error", data={ATTACK: [ATTACK]}),
        _progress(ATTACK, 1, message=ATTACK),
        _progress("other", 4, message=ATTACK),
        _message("notifications/resources/updated", uri=f"file:///{ATTACK}"),
        _message("notifications/cancelled", requestId=ATTACK, reason=ATTACK),
        _message("notifications/elicitation/complete", elicitationId=ATTACK),
        _message(
            "notifications/tasks/status", taskId=ATTACK, status="failed", statusMessage=ATTACK
        ),
        _message("notifications/subscriptions/acknowledged", notifications={ATTACK: True}),
    ]


def _assert_nothing_raw(output: bytes, *, color: bool) -> str:
    text = output.decode("utf-8")  # the view writes UTF-8; a raw C1 byte would not decode
    assert "\x1b[2J" not in text and "\x1b]" not in text and "]0;pwned\x07" not in text
    assert "\x07" not in text and "\x9b" not in text
    assert not any(0x80 <= ord(char) <= 0x9F for char in text)
    own = OWN_SEQUENCES if color else re.compile(r"(?:\x1b\[A\x1b\[2K)+\r|\x1b\[\?7[lh]")
    rest = own.sub("", text)
    assert "\x1b" not in rest, rest  # every ESC that arrived is one of the view's own
    assert not [char for char in rest if ord(char) in ESCAPED and char not in "\r\n"], rest
    return rest


@pytest.mark.parametrize("color", [True, False], ids=["color", "no-color"])
def test_escape_sequences_from_the_wire_never_reach_the_terminal(color: bool) -> None:
    notifications = _hostile_notifications()
    with blocking_adapter.serve(Hub()) as server, _listening(server.url, color=color) as listen:
        listen.wait_for("listening on channel")
        for notification in notifications:
            assert server.publish(notification) == 1
        assert server.publish(_message("notifications/message", level="info", data="the end"))
        listen.wait_for("the end")
        server.close()  # the path ends cleanly: --once exits 0
        assert listen.wait() == EXIT_OK
        shown = _assert_nothing_raw(listen.output(), color=color)
    assert shown.count(ATTACK_SHOWN) >= 12  # logger, data, keys, ids, reasons, messages...
    assert f"notifications/{ATTACK_SHOWN}" in shown
    assert f'{{"{ATTACK_SHOWN}":["{ATTACK_SHOWN}"]}}' in shown  # the JSON data, escaped
    assert "the path ended cleanly" in shown


def test_a_server_error_message_cannot_control_the_terminal() -> None:
    error = ErrorData(code=-32603, message=f"gone {ATTACK}")
    answer = PATH_HEAD + chunk(encode_frame(encode_message(error))) + LAST_CHUNK
    with ScriptedServer(answer) as server, _listening(server.url) as listen:
        assert listen.wait() == EXIT_ERRORED
        shown = _assert_nothing_raw(listen.output(), color=True)
    assert f"server error -32603: gone {ATTACK_SHOWN}" in shown


def test_fifty_tokens_on_a_twelve_row_window() -> None:
    rows = 12
    server = blocking_adapter.serve(Hub())
    with server, _listening(server.url, rows=rows, columns=80) as listen:
        listen.wait_for("listening on channel")
        for step in (1, 2):
            for token in range(50):
                server.publish(_progress(f"tok-{token:02d}", step, message=f"step {step}"))
        for token in range(5):
            server.publish(_progress(f"tok-{token:02d}", 4))  # finished
        server.publish(_message("notifications/message", level="info", data="published"))
        listen.wait_for("published")
        server.close()
        assert listen.wait() == EXIT_OK
        output = listen.output().decode("utf-8")
    assert "more in progress" in output
    terminal = _Terminal(rows=rows)
    terminal.feed(output)
    assert terminal.faults == []
    assert max(terminal.ups) <= rows // 2
    for token in range(50):
        # Finished ones once, the rest at most once (what was on screen at the end).
        assert terminal.count(f"tok-{token:02d} ") <= 1, token
    for token in range(5):
        assert terminal.count(f"tok-{token:02d} .*100% 4/4") == 1
    assert terminal.count(r"tok-\d\d ") <= 5 + rows - 1
    assert terminal.count(r"more unfinished") == 1
    kept = [line for line in terminal.lines if line]
    assert "the path ended cleanly" in kept[-1]
