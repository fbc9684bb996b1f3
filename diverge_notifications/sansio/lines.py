"""Newline-delimited lines from a byte stream arriving in pieces: bytes in, lines out, bounded.

``serve --stdin`` reads one JSON notification per line of its standard
input, and the bridge one JSON-RPC message per line of an MCP server's
standard output. Both split with one scanner: ``serve`` through
:class:`LineSplitter`, whose lines are numbered so that a report can say
which line it was, the bridge through :class:`PlainLineSplitter`, the lines
alone. Each line they keep becomes one message, so one frame (its tag
byte, then the JSON): a line whose frame would be larger than the frame
limit is too large. With the default limit, :data:`DEFAULT_MAX_LINE_SIZE`
bytes is the longest line kept, one byte less than
:data:`~.wire.framing.DEFAULT_MAX_FRAME_SIZE`.

A line that is too long is not kept: it is reported once, in its place, and
its bytes are dropped as they arrive up to its newline, so memory stays
bounded whatever the stream holds. The search for a newline resumes where
the last one stopped, so the work is linear in the input however it is
split, even one byte at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, cast

from .wire.framing import DEFAULT_MAX_FRAME_SIZE

__all__ = ["DEFAULT_MAX_LINE_SIZE", "LineSplitter", "PlainLineSplitter"]

#: The longest line kept by default, in bytes (its newline not counted): a
#: line this long, sent on as one message, fills a frame of the default
#: limit with its tag byte.
DEFAULT_MAX_LINE_SIZE: Final = DEFAULT_MAX_FRAME_SIZE - 1


class _LineScanner:
    """The splitting itself, shared by :class:`LineSplitter` and :class:`PlainLineSplitter`.

    :meth:`_scan` returns the lines ``data`` completed in order, ``None``
    for one too long, and the number of the first. The lines one call
    returns are numbered one after the other: only the first newline found
    can be the end of a line already reported (reported when it outgrew the
    limit, at the end of an earlier call), which is counted without being
    returned.
    """

    __slots__ = ("_buffer", "_max_size", "_number", "_scanned", "_skipping", "dropped")

    def __init__(self, max_size: int) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be positive, got {max_size!r}")
        self._max_size = max_size
        self._buffer = bytearray()
        # Where the search for the next newline resumes: the bytes before it hold none.
        self._scanned = 0
        # The number of the last line that ended.
        self._number = 0
        # Dropping the rest of a line already reported as too long.
        self._skipping = False
        #: How many lines were too long, so not kept.
        self.dropped = 0

    @property
    def max_size(self) -> int:
        """The longest line kept, in bytes, its newline not counted."""
        return self._max_size

    def _scan(self, data: bytes) -> tuple[int, list[bytes | None]]:
        buffer = self._buffer
        buffer += data
        max_size = self._max_size
        lines: list[bytes | None] = []
        append = lines.append
        first = self._number + 1
        start = 0
        end = buffer.find(b"\n", self._scanned)
        if end >= 0 and self._skipping:
            # The end of a line reported when it outgrew the limit.
            self._skipping = False
            first += 1
            start = end + 1
            end = buffer.find(b"\n", start)
        while end >= 0:
            if end - start > max_size:
                self.dropped += 1
                append(None)
            else:
                append(bytes(buffer[start:end]))
            start = end + 1
            end = buffer.find(b"\n", start)
        self._number = first - 1 + len(lines)
        if start:
            del buffer[:start]
        self._scanned = len(buffer)
        if len(buffer) > max_size:
            if not self._skipping:
                self._skipping = True
                self.dropped += 1
                append(None)
            buffer.clear()
            self._scanned = 0
        return first, lines


class LineSplitter(_LineScanner):
    """Splits a byte stream into numbered lines, each at most ``max_size`` bytes.

    Lines are numbered from 1 in the order they end, the ones too long
    included. A line longer than ``max_size`` comes out once, as
    ``(number, None)``, as soon as it is known to be too long, and is
    counted in :attr:`dropped`; the rest of it, up to its newline, is
    dropped as it arrives.
    """

    __slots__ = ()

    def __init__(self, max_size: int = DEFAULT_MAX_LINE_SIZE) -> None:
        super().__init__(max_size)

    def feed(self, data: bytes) -> list[tuple[int, bytes | None]]:
        """Add ``data``; return the lines it completed, as ``(number, line)``.

        ``line`` is without its ``\\n``, or ``None`` for a line too long.
        """
        first, lines = self._scan(data)
        return list(enumerate(lines, first))

    def close(self) -> list[tuple[int, bytes | None]]:
        """At the end of the stream: the last line, if it had no newline."""
        if self._skipping or not self._buffer:
            return []
        self._number += 1
        line = bytes(self._buffer)
        self._buffer.clear()
        self._scanned = 0
        return [(self._number, line)]


class PlainLineSplitter(_LineScanner):
    """The lines of a :class:`LineSplitter` alone, unnumbered, without the ones too long.

    For a reader to which a line is a message and its number means
    nothing. Each line too long is counted in :attr:`dropped` and, if
    ``on_drop`` is given, reported by calling it once. A last line without
    a newline is never complete, so never kept.
    """

    __slots__ = ("_on_drop",)

    def __init__(
        self,
        max_size: int = DEFAULT_MAX_LINE_SIZE,
        *,
        on_drop: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(max_size)
        self._on_drop = on_drop

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return the lines it completed, without their ``\\n``."""
        dropped = self.dropped
        _first, lines = self._scan(data)
        if self.dropped == dropped:
            return cast("list[bytes]", lines)  # nothing was dropped: no None among them
        if self._on_drop is not None:
            for _ in range(self.dropped - dropped):
                self._on_drop()
        return [line for line in lines if line is not None]
