"""The human view of ``listen`` and ``demo`` on a terminal.

Progress notifications become live bars, one per progress token, redrawn in
place at the bottom of the screen; log messages become lines whose level is
coloured by severity; list changes, resource updates and everything else
become short lines; connection events become dim status lines, except the
troubles (a failed connection, a refusal, an error, an abrupt end), which
stand out in colour.

Colours follow the ``NO_COLOR`` convention (set and not empty: no colour).
On ``TERM=dumb`` nothing is redrawn: each progress update is its own line.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from typing import IO, Any, Final

import attrs

from ..sansio import (
    AttemptsExhausted,
    Cancelled,
    ElicitationComplete,
    Event,
    ListChanged,
    LogLevel,
    LogMessage,
    MessageRejected,
    Notification,
    NotificationKind,
    NotificationReceived,
    NotServed,
    Progress,
    ResourceUpdated,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
    SubscriptionsAcknowledged,
    TaskStatus,
)
from ..sansio._json import dumps

__all__ = ["LEVEL_STYLES", "HumanView", "color_wanted"]

_RESET: Final = "\x1b[0m"
_DIM: Final = "2"
_BOLD: Final = "1"

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

_BAR_WIDTH: Final = 24
_TEXT_LIMIT: Final = 160


def color_wanted(environ: Mapping[str, str] | None = None) -> bool:
    """False when ``NO_COLOR`` is set to anything, or the terminal is ``dumb``."""
    env = os.environ if environ is None else environ
    return not env.get("NO_COLOR") and env.get("TERM") != "dumb"


def _shorten(text: str, limit: int = _TEXT_LIMIT) -> str:
    text = " ".join(text.split())  # one line, whatever the data held
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


class HumanView:
    """Renders notifications and events for a person at a terminal.

    ``color`` turns ANSI colours on; ``live`` redraws progress bars in
    place with cursor movements (otherwise each update is a new line).
    Call :meth:`close` at the end to leave the bars on screen, finished or
    not, and the cursor below them.
    """

    def __init__(
        self, stream: IO[str], *, color: bool = True, live: bool = True, width: int = 80
    ) -> None:
        self._stream = stream
        self._color = color
        self._live = live
        self._width = max(width, 40)
        self._bars: dict[tuple[str, int | str], _Bar] = {}
        self._drawn = 0
        encoding = (getattr(stream, "encoding", None) or "ascii").lower().replace("-", "")
        self._unicode = encoding.startswith("utf")
        self._glyphs = (
            {"full": "█", "empty": "░", "bullet": "•", "ok": "✓", "cut": "✗", "arrow": "→"}
            if self._unicode
            else {"full": "#", "empty": "-", "bullet": "*", "ok": "+", "cut": "x", "arrow": "->"}
        )

    @classmethod
    def for_stream(cls, stream: IO[str]) -> HumanView:
        """A view sized for the terminal behind ``stream``, honouring ``NO_COLOR`` and ``TERM``."""
        width = shutil.get_terminal_size((80, 24)).columns
        return cls(
            stream,
            color=color_wanted(),
            live=os.environ.get("TERM") != "dumb",
            width=width,
        )

    # --- styling -------------------------------------------------------

    def _style(self, text: str, sgr: str) -> str:
        return f"\x1b[{sgr}m{text}{_RESET}" if self._color else text

    def glyph(self, name: str) -> str:
        """A symbol (``bullet``, ``ok``, ``cut``, ``arrow``), ASCII if the stream is not UTF-8."""
        return self._glyphs[name]

    # --- output --------------------------------------------------------

    def line(self, text: str) -> None:
        """Print a permanent line above the live bars."""
        self._clear_live()
        self._stream.write(text + "\n")
        self._draw_live()
        self._stream.flush()

    def note(self, text: str) -> None:
        """Print a dim status line (connection events, narration)."""
        self.line(self._style(text, _DIM))

    def heading(self, text: str) -> None:
        """Print a bold line."""
        self.line(self._style(text, _BOLD))

    def _clear_live(self) -> None:
        if self._live and self._drawn:
            # The cursor sits below the bars: go up over them and clear the rest.
            self._stream.write(f"\x1b[{self._drawn}A\r\x1b[J")
            self._drawn = 0

    def _draw_live(self) -> None:
        if not self._live:
            return
        for bar in self._bars.values():
            self._stream.write(self._render_bar(bar) + "\n")
        self._drawn = len(self._bars)

    def _render_bar(self, bar: _Bar) -> str:
        label = _shorten(bar.label, 16).ljust(16)
        if bar.total is not None and bar.total > 0:
            fraction = min(max(bar.progress / bar.total, 0.0), 1.0)
            filled = round(fraction * _BAR_WIDTH)
            cells = self.glyph("full") * filled + self.glyph("empty") * (_BAR_WIDTH - filled)
            amount = f"{fraction * 100:3.0f}% {_number(bar.progress)}/{_number(bar.total)}"
        else:
            cells = self.glyph("empty") * _BAR_WIDTH
            amount = f"{_number(bar.progress)}"
        done = bar.total is not None and bar.progress >= bar.total
        cells = self._style(cells, "32" if done else "36")
        text = f"{label} {cells} {amount}"
        if bar.message:
            budget = self._width - len(label) - _BAR_WIDTH - len(amount) - 4
            if budget > 3:
                text += " " + _shorten(bar.message, budget)
        return text

    # --- notifications ---------------------------------------------------

    def notification(self, notification: Notification) -> None:
        """Show one notification."""
        view = notification.view
        if isinstance(view, Progress):
            self._progress(view)
        elif isinstance(view, LogMessage):
            self._log(view)
        elif isinstance(view, ListChanged):
            self.line(f"{self.glyph('bullet')} {_LIST_NAMES[view.kind]} list changed")
        elif isinstance(view, ResourceUpdated):
            self.line(f"{self.glyph('bullet')} resource updated: {_shorten(view.uri)}")
        elif isinstance(view, Cancelled):
            why = f": {_shorten(view.reason)}" if view.reason else ""
            self.line(f"{self.glyph('cut')} request {view.request_id} cancelled{why}")
        elif isinstance(view, ElicitationComplete):
            self.line(f"{self.glyph('ok')} elicitation {view.elicitation_id} complete")
        elif isinstance(view, TaskStatus):
            said = f": {_shorten(view.status_message)}" if view.status_message else ""
            self.line(f"{self.glyph('bullet')} task {view.task_id} {view.status}{said}")
        elif isinstance(view, SubscriptionsAcknowledged):
            granted = _shorten(_as_text(view.notifications))
            self.line(f"{self.glyph('ok')} subscriptions acknowledged: {granted}")
        else:
            params = notification.params
            shown = f" {_shorten(_as_text(params))}" if params else ""
            method = self._style(notification.method, "35")
            self.line(f"{self.glyph('bullet')} {method}{shown}")

    def _progress(self, progress: Progress) -> None:
        key = (type(progress.token).__name__, progress.token)
        label = progress.token if isinstance(progress.token, str) else f"#{progress.token}"
        bar = self._bars.get(key)
        if bar is None:
            bar = self._bars[key] = _Bar(label=label)
        bar.progress = progress.progress
        bar.total = progress.total
        if progress.message is not None:
            bar.message = progress.message
        finished = bar.total is not None and bar.progress >= bar.total
        if not self._live:
            self._stream.write(self._render_bar(bar) + "\n")
            self._stream.flush()
            if finished:
                del self._bars[key]
            return
        self._clear_live()
        if finished:
            # A finished bar stops being live and stays where it is.
            del self._bars[key]
            self._stream.write(self._render_bar(bar) + "\n")
        self._draw_live()
        self._stream.flush()

    def _log(self, message: LogMessage) -> None:
        level = self._style(message.level.wire.ljust(9), LEVEL_STYLES[message.level])
        logger = f"{message.logger}: " if message.logger else ""
        self.line(f"{level} {logger}{_shorten(_as_text(message.data), 400)}")

    # --- events ----------------------------------------------------------

    def event(self, event: Event) -> None:
        """Show one event: a notification, or a change of the connection."""
        if isinstance(event, NotificationReceived):
            self.notification(event.notification)
        elif isinstance(event, StreamOpened):
            self.note(f"{self.glyph('arrow')} listening on channel {event.channel}")
        elif isinstance(event, StreamEnded):
            self.note(f"{self.glyph('ok')} the path ended cleanly")
        elif isinstance(event, StreamBroken):
            self.line(self._style(f"{self.glyph('cut')} the path broke: {event.reason}", "33"))
        elif isinstance(event, StreamErrored):
            error = event.error
            self.line(
                self._style(f"{self.glyph('cut')} server error {error.code}: {error.message}", "31")
            )
        elif isinstance(event, NotServed):
            status = f" ({event.status})" if event.status is not None else ""
            text = f"{self.glyph('cut')} not served{status}: {event.reason}"
            if event.status is None or 200 <= event.status < 300:
                self.note(text)  # a clean end with nothing: the re-ask follows
            else:
                self.line(self._style(text, "33"))  # refused: the wrong token, path...
        elif isinstance(event, MessageRejected):
            self.note(f"{self.glyph('cut')} a message was rejected: {event.error.detail}")
        elif isinstance(event, AttemptsExhausted):
            self.note(f"{self.glyph('cut')} gave up after {event.attempts} attempts")
        else:
            self._other_event(event)

    def _other_event(self, event: Event) -> None:
        name = type(event).__name__
        if name == "RetryScheduled":
            delay = getattr(event, "delay", 0.0)
            attempt = getattr(event, "attempt", "?")
            self.note(f"  asking again in {delay:.2f} s (attempt {attempt})")
        elif name == "ConnectionFailed":
            reason = getattr(event, "reason", "")
            self.line(self._style(f"{self.glyph('cut')} could not connect: {reason}", "33"))
        # ReaskNeeded and anything else: nothing a person needs to see.

    def close(self) -> None:
        """Leave the live bars on screen as they are and stop redrawing them."""
        self._clear_live()
        if self._live:
            for bar in self._bars.values():
                self._stream.write(self._render_bar(bar) + "\n")
        self._bars.clear()
        self._stream.flush()
