"""The human view of ``listen`` and ``demo`` on a terminal.

Progress notifications become live bars, one per progress token, redrawn in
place below the lines printed so far; log messages become lines whose level is
coloured by severity; list changes, resource updates and everything else
become short lines; connection events become dim status lines, except the
troubles (a failed connection, a refusal, an error, an abrupt end), which
stand out in colour.

Colours follow the ``NO_COLOR`` convention (set and not empty: no colour).
On ``TERM=dumb`` nothing is redrawn: each progress update is its own line.

What the wire sends never controls the terminal. Every text that came from
the peer (method, logger name, log data, progress token and message, URI,
request, task and elicitation ids, custom parameters, channel id, error
messages and reasons) goes through :func:`visible` before it is printed,
which writes these characters as JSON-style escapes (``\\n``, ``\\t``,
``\\r``, ``\\b``, ``\\f``, else ``\\u`` and four lowercase hex digits, so
``ESC`` shows as ``\\u001b``):

- every control character: C0 (U+0000 to U+001F), DEL (U+007F) and C1
  (U+0080 to U+009F), ESC and BEL included, and line feeds and tabs too:
  one notification is one line;
- the characters that reorder text on screen (Unicode's ``Bidi_Control``
  set: U+061C, U+200E, U+200F, the embeddings and overrides U+202A to
  U+202E, the isolates U+2066 to U+2069), the deprecated format characters
  U+206A to U+206F, and the line and paragraph separators U+2028 and U+2029;
- lone surrogates, which no terminal encoding can carry.

Other format characters (zero-width joiners and spaces, variation
selectors, the soft hyphen) are kept: they join emoji and shape scripts,
and cannot move the cursor or reorder the line. A backslash is kept as it
is, so text that already reads ``\\u001b`` looks like an escaped ESC; the
JSON lines of ``listen`` when piped (or ``--events``) are the exact record.
On a terminal whose encoding is not UTF-8, every non-ASCII character is
escaped the same way (astral ones as a surrogate pair, as JSON does).

The live bars take at most half the screen's rows (rounded down), so that
as many rows above them keep showing the lines printed before (log
messages, status lines), and the cursor's row below them stays on screen:
the screen's size is read at every redraw, and when the bars do not fit the
first ones (in the order their tokens appeared) are drawn and the rest
summarised on one line, ``… and N more in progress``. A redraw rewrites only
the view's own bottom lines: from the row below them it moves the cursor up
one row at a time over exactly the lines the last redraw drew, erasing each
line (``ESC [ 2 K``), then writes the new ones. It never erases the display
(``ESC [ J``): a terminal such as tmux copies a screen erased from its top
into the scrollback, which a redraw at every notification floods. Lines are
cut to the screen's width (counting wide characters as two columns) and
drawn with the terminal's automatic wrap turned off, so that each takes one
row even when a width is misjudged. At most ``max_bars`` tokens are tracked;
updates for further tokens are counted on the summary line, not kept.

When a path ends (``StreamEnded``, ``StreamErrored``, ``StreamBroken``,
``NotServed``, ``ReaskNeeded``, and, should one be missed, the next
``StreamOpened``), its bars are drawn a last time as plain lines, those
unfinished with dim cells, and stop being live: they stay in the scrollback
above the line that says how the path ended.
"""

from __future__ import annotations

import os
import shutil
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from itertools import chain
from typing import IO, Any, Final

import attrs

from ..sansio import Event, LogLevel, Notification, NotificationKind, events
from ..sansio.mcp.json import dumps
from ..sansio.mcp.model import (
    Cancelled,
    ElicitationComplete,
    ListChanged,
    LogMessage,
    Progress,
    ResourceUpdated,
    SubscriptionsAcknowledged,
    TaskStatus,
)

__all__ = [
    "DEFAULT_MAX_BARS",
    "ESCAPED",
    "LEVEL_STYLES",
    "HumanView",
    "color_wanted",
    "fit",
    "live_rows",
    "speaks_unicode",
    "terminal_size",
    "visible",
]

_RESET: Final = "\x1b[0m"
_DIM: Final = "2"
_BOLD: Final = "1"
# DECAWM off and on: a live line longer than the screen is cut, not wrapped,
# so that every line drawn takes exactly one row.
_NO_WRAP: Final = "\x1b[?7l"
_WRAP: Final = "\x1b[?7h"
# Cursor up one row (stopping at the screen's top, never scrolling), then erase
# that whole line: a live line taken back. Never erase-in-display (see above).
_TAKE_BACK: Final = "\x1b[A\x1b[2K"

#: The SGR style of each log level's label.
LEVEL_STYLES: Final[Mapping[LogLevel, str]] = {
    LogLevel.DEBUG: "2",  # dim
    LogLevel.INFO: "34",  # blue
    LogLevel.NOTICE: "36",  # cyan
    LogLevel.WARNING: "33",  # yellow
    LogLevel.ERROR: "31",  # red
    LogLevel.CRITICAL: "1;31",  # bold red
    LogLevel.ALERT: "1;35",  # bold magenta
    LogLevel.EMERGENCY: "1;37;41",  # bold white on red
}

_LIST_NAMES: Final[Mapping[NotificationKind, str]] = {
    NotificationKind.TOOL_LIST_CHANGED: "tools",
    NotificationKind.RESOURCE_LIST_CHANGED: "resources",
    NotificationKind.PROMPT_LIST_CHANGED: "prompts",
}

#: How many progress tokens the view keeps track of at most.
DEFAULT_MAX_BARS: Final = 1000

_BAR_WIDTH: Final = 24
_LABEL_WIDTH: Final = 16
_TEXT_LIMIT: Final = 160
_LOG_LIMIT: Final = 400
_FALLBACK_SIZE: Final = (80, 24)

#: The events after which no bar is live: those that end a path, and a new
#: path (in case the end of the last one was missed).
_BARS_END: Final = (
    events.StreamEnded,
    events.StreamErrored,
    events.StreamBroken,
    events.NotServed,
    events.ReaskNeeded,
    events.StreamOpened,
)

_SHORT_ESCAPES: Final = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}


def _escaped_code_points() -> Iterable[int]:
    return chain(
        range(0x00, 0x20),  # C0
        range(0x7F, 0xA0),  # DEL and C1
        (0x061C, 0x200E, 0x200F),  # the bidi marks
        range(0x202A, 0x202F),  # bidi embeddings and overrides
        range(0x2066, 0x2070),  # bidi isolates, deprecated format characters
        (0x2028, 0x2029),  # line and paragraph separators
        range(0xD800, 0xE000),  # lone surrogates
    )


#: What :func:`visible` writes for each code point it escapes.
ESCAPED: Final[Mapping[int, str]] = {
    code: _SHORT_ESCAPES.get(code, f"\\u{code:04x}") for code in _escaped_code_points()
}


def _u_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # a surrogate pair, as JSON writes it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def visible(text: str, *, ascii_only: bool = False) -> str:
    """``text`` with every character that could control a terminal written as an escape.

    The characters are those of :data:`ESCAPED` (control characters, the
    characters that reorder text, line separators, lone surrogates);
    ``ascii_only`` escapes every non-ASCII character as well, for a
    terminal that cannot show them. Everything else is left as it is.
    """
    if text.isascii() and text.isprintable():
        return text  # the common case: nothing to escape
    shown = text.translate(ESCAPED)
    if ascii_only and not shown.isascii():
        shown = "".join(char if char.isascii() else _u_escape(char) for char in shown)
    return shown


def speaks_unicode(stream: IO[Any]) -> bool:
    """Whether ``stream``'s encoding is a Unicode one (else :func:`visible` is ``ascii_only``)."""
    encoding = (getattr(stream, "encoding", None) or "ascii").lower().replace("-", "")
    return bool(encoding.startswith("utf"))


def _char_cells(char: str) -> int:
    """Columns one shown (already escaped) character takes on a terminal."""
    if char.isascii():
        return 1
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 1 if char == "\u00ad" else 0  # terminals draw the soft hyphen
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def _cells(shown: str) -> int:
    """Columns a shown (already escaped) text takes on a terminal."""
    if shown.isascii():
        return len(shown)
    return sum(map(_char_cells, shown))


def fit(text: str, columns: int, *, ascii_only: bool = False) -> str:
    """:func:`visible` of ``text``, cut to at most ``columns`` columns with an ellipsis.

    An escape is never cut in the middle, and wide characters count as two
    columns.
    """
    shown = visible(text, ascii_only=ascii_only)
    if shown.isascii() and len(shown) <= columns:
        return shown
    ellipsis = "..." if ascii_only else "…"
    room = max(columns - len(ellipsis), 0)
    pieces: list[str] = []
    used = 0
    fitting: int | None = None  # how many pieces fit beside the ellipsis
    for char in text:
        piece = visible(char, ascii_only=ascii_only)
        width = _cells(piece)
        if fitting is None and used + width > room:
            fitting = len(pieces)
        used += width
        pieces.append(piece)
        # Cut where it overflows; a run of zero-width characters is bounded too.
        if used > columns or len(pieces) > 4 * columns:
            kept = len(pieces) - 1 if fitting is None else fitting
            return "".join(pieces[:kept]) + ellipsis[: max(columns, 0)]
    return "".join(pieces)


def _pad(shown: str, columns: int) -> str:
    return shown + " " * max(columns - _cells(shown), 0)


def color_wanted(environ: Mapping[str, str] | None = None) -> bool:
    """False when ``NO_COLOR`` is set to anything, or the terminal is ``dumb``."""
    env = os.environ if environ is None else environ
    return not env.get("NO_COLOR") and env.get("TERM") != "dumb"


def terminal_size(stream: IO[str]) -> tuple[int, int]:
    """``(columns, rows)`` of the terminal behind ``stream``, or the usual 80 by 24.

    A terminal that reports no size (0 by 0, as a fresh pseudo-terminal
    does) counts as 80 by 24.
    """
    try:
        columns, rows = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):  # not a terminal, or closed
        columns, rows = shutil.get_terminal_size(_FALLBACK_SIZE)
    return (columns or _FALLBACK_SIZE[0], rows or _FALLBACK_SIZE[1])


def live_rows(rows: int) -> int:
    """How many lines the live bars may take on a screen of ``rows`` rows: half, rounded down.

    The other half keeps the lines printed before in view above the bars,
    and holds the cursor's row below them.
    """
    return max(rows, 0) // 2


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return dumps(value).decode("utf-8")
    except (TypeError, ValueError):  # pragma: no cover - parsed JSON always dumps
        return repr(value)


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@attrs.define
class _Bar:
    label: str
    progress: float = 0
    total: float | None = None
    message: str | None = None

    @property
    def done(self) -> bool:
        return self.total is not None and self.progress >= self.total


class HumanView:
    """Renders notifications and events for a person at a terminal.

    ``color`` turns ANSI colours on; ``live`` redraws progress bars in
    place with cursor movements (otherwise each update is a new line).
    ``size`` returns the screen's ``(columns, rows)`` and is asked at every
    redraw; without it the screen is ``width`` by ``height``. At most
    ``max_bars`` progress tokens are tracked at once. Every text from the
    wire is shown through :func:`visible`. Call :meth:`close` at the end to
    leave the bars on screen, finished or not, and the cursor below them.
    """

    def __init__(
        self,
        stream: IO[str],
        *,
        color: bool = True,
        live: bool = True,
        width: int = 80,
        height: int = 24,
        size: Callable[[], tuple[int, int]] | None = None,
        max_bars: int = DEFAULT_MAX_BARS,
    ) -> None:
        self._stream = stream
        self._color = color
        self._live = live
        self._fixed_size = (width, height)
        self._size = size
        self._max_bars = max_bars
        self._bars: dict[tuple[str, int | str], _Bar] = {}
        #: Updates for tokens beyond ``max_bars`` since the path began: not kept.
        self._untracked = 0
        #: Lines the last redraw wrote below the permanent ones.
        self._drawn = 0
        self._unicode = speaks_unicode(stream)
        self._glyphs = (
            {"full": "█", "empty": "░", "bullet": "•", "ok": "✓", "cut": "✗", "arrow": "→"}
            if self._unicode
            else {"full": "#", "empty": "-", "bullet": "*", "ok": "+", "cut": "x", "arrow": "->"}
        )
        self._ellipsis = "…" if self._unicode else "..."

    @classmethod
    def for_stream(cls, stream: IO[str]) -> HumanView:
        """A view sized for the terminal behind ``stream``, honouring ``NO_COLOR`` and ``TERM``."""
        return cls(
            stream,
            color=color_wanted(),
            live=os.environ.get("TERM") != "dumb",
            size=lambda: terminal_size(stream),
        )

    @property
    def drawn(self) -> int:
        """How many live lines are on screen below the permanent ones."""
        return self._drawn

    # --- styling -------------------------------------------------------

    def _style(self, shown: str, sgr: str) -> str:
        return f"\x1b[{sgr}m{shown}{_RESET}" if self._color else shown

    def glyph(self, name: str) -> str:
        """A symbol (``bullet``, ``ok``, ``cut``, ``arrow``), ASCII if the stream is not UTF-8."""
        return self._glyphs[name]

    def _field(self, value: Any, limit: int = _TEXT_LIMIT) -> str:
        """A value from the wire as shown: escaped, on one line, at most ``limit`` columns."""
        return fit(_as_text(value), limit, ascii_only=not self._unicode)

    def _screen(self) -> tuple[int, int]:
        return self._fixed_size if self._size is None else self._size()

    # --- output --------------------------------------------------------

    def line(self, text: str) -> None:
        """Print a permanent line above the live bars; ``text`` is shown through :func:`visible`."""
        self._permanent(visible(text, ascii_only=not self._unicode))

    def note(self, text: str) -> None:
        """Print a dim status line (connection events, narration)."""
        self._permanent(self._style(visible(text, ascii_only=not self._unicode), _DIM))

    def heading(self, text: str) -> None:
        """Print a bold line."""
        self._permanent(self._style(visible(text, ascii_only=not self._unicode), _BOLD))

    def _permanent(self, shown: str) -> None:
        """Write a line made only of shown text and the view's own styles."""
        self._clear_live()
        self._stream.write(shown + "\n")
        self._draw_live()
        self._stream.flush()

    def _clear_live(self) -> None:
        if self._live and self._drawn:
            # The cursor sits on the row below the bars: erase them one by one going up,
            # and write the next lines from the first one's row.
            self._stream.write(_TAKE_BACK * self._drawn + "\r")
            self._drawn = 0

    def _draw_live(self) -> None:
        if not self._live:
            return
        lines = self._live_lines(final=False)
        if lines:
            self._stream.write(_NO_WRAP + "".join(line + "\n" for line in lines) + _WRAP)
        self._drawn = len(lines)

    def _live_lines(self, *, final: bool) -> list[str]:
        """The bars that fit on screen, and the summary line of those that do not."""
        columns, rows = self._screen()
        room = live_rows(rows)
        bars = list(self._bars.values())
        summarised = len(bars) > room or self._untracked > 0
        shown = bars[: max(room - 1, 0)] if summarised else bars
        lines = [self._render_bar(bar, columns, final=final) for bar in shown]
        if summarised and room > len(lines):
            lines.append(self._summary(len(bars) - len(shown), columns, final=final))
        return lines

    def _summary(self, hidden: int, columns: int, *, final: bool) -> str:
        text = f"{self._ellipsis} and {hidden} more {'unfinished' if final else 'in progress'}"
        if self._untracked:
            text += f", {self._untracked} updates of tokens beyond {self._max_bars} not tracked"
        return self._style(fit(text, columns - 1, ascii_only=not self._unicode), _DIM)

    def _render_bar(self, bar: _Bar, columns: int, *, final: bool = False) -> str:
        budget = columns - 1  # never the last column: some terminals wrap early there
        if bar.total is not None and bar.total > 0:
            fraction = min(max(bar.progress / bar.total, 0.0), 1.0)
            amount = f"{fraction * 100:3.0f}% {_number(bar.progress)}/{_number(bar.total)}"
        else:
            fraction = 0.0
            amount = _number(bar.progress)
        amount = fit(amount, max(budget // 3, 1))
        label = self._field(bar.label, min(_LABEL_WIDTH, max(budget // 3, 1)))
        label = _pad(label, min(_LABEL_WIDTH, max(budget // 3, 1)))
        width = min(_BAR_WIDTH, max(budget - _cells(label) - len(amount) - 2, 0))
        filled = round(fraction * width)
        cells = self.glyph("full") * filled + self.glyph("empty") * (width - filled)
        cells = self._style(cells, "32" if bar.done else _DIM if final else "36")
        text = f"{label} {cells} {amount}"
        if bar.message:
            room = budget - _cells(label) - width - len(amount) - 3
            if room > 3:
                text += " " + self._field(bar.message, room)
        return text

    # --- notifications ---------------------------------------------------

    def notification(self, notification: Notification) -> None:
        """Show one notification; every text it carries is shown through :func:`visible`."""
        view = notification.view
        bullet, ok, cut = self.glyph("bullet"), self.glyph("ok"), self.glyph("cut")
        if isinstance(view, Progress):
            self._progress(view)
        elif isinstance(view, LogMessage):
            self._log(view)
        elif isinstance(view, ListChanged):
            self._permanent(f"{bullet} {_LIST_NAMES[view.kind]} list changed")
        elif isinstance(view, ResourceUpdated):
            self._permanent(f"{bullet} resource updated: {self._field(view.uri)}")
        elif isinstance(view, Cancelled):
            request = "" if view.request_id is None else f" {self._field(view.request_id)}"
            why = f": {self._field(view.reason)}" if view.reason else ""
            self._permanent(f"{cut} request{request} cancelled{why}")
        elif isinstance(view, ElicitationComplete):
            self._permanent(f"{ok} elicitation {self._field(view.elicitation_id)} complete")
        elif isinstance(view, TaskStatus):
            said = f": {self._field(view.status_message)}" if view.status_message else ""
            task, status = self._field(view.task_id), self._field(view.status)
            self._permanent(f"{bullet} task {task} {status}{said}")
        elif isinstance(view, SubscriptionsAcknowledged):
            granted = self._field(view.notifications)
            self._permanent(f"{ok} subscriptions acknowledged: {granted}")
        else:
            params = notification.params
            shown = f" {self._field(params)}" if params else ""
            method = self._style(self._field(notification.method), "35")
            self._permanent(f"{bullet} {method}{shown}")

    def _progress(self, progress: Progress) -> None:
        key = (type(progress.token).__name__, progress.token)
        bar = self._bars.get(key)
        tracked = bar is not None or len(self._bars) < self._max_bars
        if bar is None:
            label = progress.token if isinstance(progress.token, str) else f"#{progress.token}"
            bar = _Bar(label=label)
            if tracked:
                self._bars[key] = bar
        bar.progress = progress.progress
        bar.total = progress.total
        if progress.message is not None:
            bar.message = progress.message
        if not self._live:
            self._stream.write(self._render_bar(bar, self._screen()[0]) + "\n")
            self._stream.flush()
            if bar.done:
                self._bars.pop(key, None)
            return
        self._clear_live()
        if bar.done:
            # A finished bar stops being live and stays where it is.
            self._bars.pop(key, None)
            self._stream.write(self._render_bar(bar, self._screen()[0]) + "\n")
        elif not tracked:
            self._untracked += 1  # counted on the summary line
        self._draw_live()
        self._stream.flush()

    def _log(self, message: LogMessage) -> None:
        level = self._style(message.level.wire.ljust(9), LEVEL_STYLES[message.level])
        logger = f"{self._field(message.logger)}: " if message.logger else ""
        self._permanent(f"{level} {logger}{self._field(message.data, _LOG_LIMIT)}")

    # --- events ----------------------------------------------------------

    def event(self, event: Event) -> None:
        """Show one event: a notification, or a change of the connection.

        When the event ends a path, the path's bars are finished first.
        """
        if isinstance(event, _BARS_END):
            self._finish_bars()
        if isinstance(event, events.NotificationReceived):
            self.notification(event.notification)
        elif isinstance(event, events.StreamOpened):
            self._note(f"{self.glyph('arrow')} listening on channel {self._field(event.channel)}")
        elif isinstance(event, events.StreamEnded):
            self._note(f"{self.glyph('ok')} the path ended cleanly")
        elif isinstance(event, events.StreamBroken):
            self._trouble(f"{self.glyph('cut')} the path broke: {self._field(event.reason)}")
        elif isinstance(event, events.StreamErrored):
            error = event.error
            message = self._field(error.message)
            self._trouble(f"{self.glyph('cut')} server error {error.code}: {message}", "31")
        elif isinstance(event, events.NotServed):
            status = f" ({event.status})" if event.status is not None else ""
            text = f"{self.glyph('cut')} not served{status}: {self._field(event.reason)}"
            if event.status is None or 200 <= event.status < 300:
                self._note(text)  # a clean end with nothing: the re-ask follows
            else:
                self._trouble(text)  # refused: the wrong token, path...
        elif isinstance(event, events.MessageRejected):
            detail = self._field(event.error.detail)
            self._note(f"{self.glyph('cut')} a message was rejected: {detail}")
        elif isinstance(event, events.AttemptsExhausted):
            self._note(f"{self.glyph('cut')} gave up after {event.attempts} attempts")
        else:
            self._other_event(event)

    def _note(self, shown: str) -> None:
        self._permanent(self._style(shown, _DIM))

    def _trouble(self, shown: str, sgr: str = "33") -> None:
        self._permanent(self._style(shown, sgr))

    def _other_event(self, event: Event) -> None:
        name = type(event).__name__
        if name == "RetryScheduled":
            delay = getattr(event, "delay", 0.0)
            attempt = self._field(getattr(event, "attempt", "?"))
            self._note(f"  asking again in {delay:.2f} s (attempt {attempt})")
        elif name == "ConnectionFailed":
            reason = self._field(getattr(event, "reason", ""))
            self._trouble(f"{self.glyph('cut')} could not connect: {reason}")
        # ReaskNeeded and anything else: nothing a person needs to see.

    def _finish_bars(self) -> None:
        """Draw the live bars a last time as plain lines, and stop tracking them."""
        if self._live and (self._bars or self._untracked):
            self._clear_live()
            for line in self._live_lines(final=True):
                self._stream.write(line + "\n")
            self._stream.flush()
        self._bars.clear()
        self._untracked = 0

    def close(self) -> None:
        """Leave the live bars on screen as they are and stop redrawing them."""
        self._finish_bars()
        self._stream.flush()
