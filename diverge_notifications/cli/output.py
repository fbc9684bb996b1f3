"""What the commands print: event records, notification lines, and the standard streams.

``listen`` prints each notification as one compact JSON line on standard
output (:func:`notification_line`): the bytes the server sent with the
whitespace between JSON tokens removed (:func:`compact_json`). With
``--events`` it prints every event as one JSON line on standard error
(:func:`event_record`).

A JSON line written to a terminal goes through
:func:`~.terminal.visible` first (:func:`for_terminal`): the control,
reordering and separator characters a JSON text may hold raw inside its
strings (DEL, C1, the bidi controls, U+2028) become ``\\u`` escapes, which
is the same JSON value, so what the wire sent cannot control the terminal.
Piped, the lines are the bytes as received.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import os
import re
import sys
from collections.abc import Mapping
from typing import IO, Any, Final

import attrs

from ..sansio import (
    ErrorData,
    Event,
    FrameError,
    MessageRejected,
    Notification,
    NotificationReceived,
    StreamErrored,
)
from ..sansio.mcp.json import dumps
from .logs import divert
from .terminal import speaks_unicode, visible

__all__ = [
    "closed_stdout",
    "compact_json",
    "event_record",
    "for_terminal",
    "is_a_terminal",
    "notification_line",
    "say",
    "silence_stdout",
    "stdout_is_a_terminal",
    "write_json_line",
]


# --- records -----------------------------------------------------------------


def _error_record(error: ErrorData) -> dict[str, Any]:
    record: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        record["data"] = error.data
    return record


def _plain(value: Any) -> Any:
    """``value`` as something JSON can carry, for events this module does not know."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, ErrorData):
        return _error_record(value)
    if isinstance(value, Notification):
        return value.members
    if isinstance(value, FrameError):
        return value.detail
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, frozenset, set)):
        return [_plain(item) for item in value]
    return str(value)


def event_record(event: Event) -> dict[str, Any]:
    """The JSON object ``listen --events`` prints for ``event``.

    ``"event"`` is the class name, then the event's fields by name, with
    these shapes: ``NotificationReceived`` shows ``"kind"`` (the kind's
    member name in lower case); ``StreamErrored`` shows ``"error"`` as
    ``{"code", "message", "data"?}``; ``MessageRejected`` shows
    ``"reason"`` (the decoding error's detail). Any other event shows its
    fields as JSON values.
    """
    record: dict[str, Any] = {"event": type(event).__name__}
    if isinstance(event, NotificationReceived):
        record["kind"] = event.notification.kind.value
    elif isinstance(event, StreamErrored):
        record["error"] = _error_record(event.error)
    elif isinstance(event, MessageRejected):
        record["reason"] = event.error.detail
    elif attrs.has(type(event)):
        for field in attrs.fields(type(event)):
            record[field.alias or field.name] = _plain(getattr(event, field.name))
    return record


# --- notification lines ------------------------------------------------------

#: A JSON string (kept as it is), or a run of JSON whitespace (dropped).
_STRING_OR_SPACE: Final = re.compile(rb'("[^"\\]*(?:\\.[^"\\]*)*")|[ \t\r\n]+', re.DOTALL)
_SPACE: Final = re.compile(rb"[ \t\r\n]")


def _keep_string(match: re.Match[bytes]) -> bytes:
    return match[1] or b""


def compact_json(raw: bytes) -> bytes:
    """``raw``, one JSON text, with the insignificant whitespace removed.

    Only the whitespace between tokens goes: strings, numbers, member
    order and escapes stay byte for byte as they were. Bytes without
    whitespace outside their strings come back unchanged.
    """
    if _SPACE.search(raw) is None:
        return raw
    return _STRING_OR_SPACE.sub(_keep_string, raw)


def notification_line(notification: Notification) -> bytes:
    """One line of ``listen``'s standard output: the notification, then a newline.

    The bytes the server sent, compacted by :func:`compact_json`: every
    member in the order received, each string and number as it was sent.
    """
    return compact_json(notification.to_bytes()) + b"\n"


# --- the standard streams ----------------------------------------------------


def say(text: str) -> None:
    """Print one line on standard error, if there is one (``2>&-`` closes it).

    While ``serve`` runs, the line is a log record instead (:mod:`.logs`).
    """
    if divert(text):
        return
    stream = sys.stderr
    if stream is not None:
        stream.write(text + "\n")
        stream.flush()


def for_terminal(text: str, stream: IO[Any]) -> str:
    """``text`` as shown on the terminal ``stream``: with nothing that could control it.

    Every character :func:`~.terminal.visible` escapes is escaped, and
    every non-ASCII one too if the terminal's encoding is not Unicode. A
    JSON text stays a JSON text of the same value.
    """
    return visible(text, ascii_only=not speaks_unicode(stream))


def write_json_line(record: Mapping[str, Any]) -> None:
    """Print ``record`` as one JSON line on standard error (escaped if it is a terminal)."""
    line = dumps(record).decode("utf-8")
    stderr = sys.stderr
    if stderr is not None and is_a_terminal(stderr):
        line = for_terminal(line, stderr)
    say(line)


def closed_stdout() -> BrokenPipeError:
    """The error for writing to a standard output there is none of (``>&-``)."""
    return BrokenPipeError(errno.EPIPE, "standard output is closed")


def silence_stdout() -> None:
    """Point standard output at the null device: its reader went away, nothing more goes out."""
    stdout = sys.stdout
    if stdout is None:
        return
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stdout.fileno())
        os.close(devnull)


def is_a_terminal(stream: IO[Any] | None) -> bool:
    """Whether ``stream`` is open on a terminal."""
    if stream is None:
        return False
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False


def stdout_is_a_terminal() -> bool:
    """Whether standard output is a terminal (then ``listen`` and ``demo`` show the human view)."""
    return is_a_terminal(sys.stdout)
