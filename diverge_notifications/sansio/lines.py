"""Newline-delimited lines from a byte stream arriving in pieces: bytes in, lines out, bounded.

``serve --stdin`` reads one JSON notification per line of its standard
input, and the bridge one JSON-RPC message per line of an MCP server's
standard output; both split with :class:`LineSplitter`. Each line they keep
becomes one message, so one frame (its tag byte, then the JSON): a line
whose frame would be larger than the frame limit is too large. With the
default limit, :data:`DEFAULT_MAX_LINE_SIZE` bytes is the longest line kept,
one byte less than :data:`~.framing.DEFAULT_MAX_FRAME_SIZE`.

A line that is too long is not kept: it is reported once, in its place, and
its bytes are dropped as they arrive up to its newline, so memory stays
bounded whatever the stream holds. The search for a newline resumes where
the last one stopped, so the work is linear in the input however it is
split, even one byte at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from .framing import DEFAULT_MAX_FRAME_SIZE

__all__ = ["DEFAULT_MAX_LINE_SIZE", "LineSplitter", "PlainLineSplitter"]

#: The longest line kept by default, in bytes (its newline not counted): a
#: line this long, sent on as one message, fills a frame of the default
#: limit with its tag byte.
DEFAULT_MAX_LINE_SIZE: Final = DEFAULT_MAX_FRAME_SIZE - 1


class LineSplitter:
    """Splits a byte stream into numbered lines, each at most ``max_size`` bytes.

    Lines are numbered from 1 in the order they end, the ones too long
    included. A line longer than ``max_size`` comes out once, as
    ``(number, None)``, as soon as it is known to be too long, and is
    counted in :attr:`dropped`; the rest of it, up to its newline, is
    dropped as it arrives.
    """

    __slots__ = ("_buffer", "_max_size", "_number", "_scanned", "_skipping", "dropped")

    def __init__(self, max_size: int = DEFAULT_MAX_LINE_SIZE) -> None:
        if max_size < 1:
            raise ValueError(f"max_size must be positive, got {max_size!r}")
        self._max_size = max_size
        self._buffer = bytearray()
        # Where the search for the next newline resumes: the bytes before it hold none.
        self._scanned = 0
        self._number = 0
        # Dropping the rest of a line already reported as too long.
        self._skipping = False
        #: How many lines were too long, so not kept.
        self.dropped = 0

    @property
    def max_size(self) -> int:
        """The longest line kept, in bytes, its newline not counted."""
        return self._max_size

    def feed(self, data: bytes) -> list[tuple[int, bytes | None]]:
        """Add ``data``; return the lines it completed, as ``(number, line)``.

        ``line`` is without its ``\\n``, or ``None`` for a line too long.
        """
        buffer = self._buffer
        buffer += data
        lines: list[tuple[int, bytes | None]] = []
        start = 0
        while True:
            end = buffer.find(b"\n", max(start, self._scanned))
            if end < 0:
                break
            self._number += 1
            if self._skipping:
                self._skipping = False  # reported when it outgrew the limit
            elif end - start > self._max_size:
                self.dropped += 1
                lines.append((self._number, None))
            else:
                lines.append((self._number, bytes(buffer[start:end])))
            start = end + 1
        if start:
            del buffer[:start]
        self._scanned = len(buffer)
        if len(buffer) > self._max_size:
            if not self._skipping:
                self._skipping = True
                self.dropped += 1
                lines.append((self._number + 1, None))
            buffer.clear()
            self._scanned = 0
        return lines

    def close(self) -> list[tuple[int, bytes | None]]:
        """At the end of the stream: the last line, if it had no newline."""
        if self._skipping or not self._buffer:
            return []
        self._number += 1
        line = bytes(self._buffer)
        self._buffer.clear()
        self._scanned = 0
        return [(self._number, line)]


class PlainLineSplitter:
    """The lines of a :class:`LineSplitter` alone, unnumbered, without the ones too long.

    For a reader to which a line is a message and its number means
    nothing. Each line too long is counted in :attr:`dropped` and, if
    ``on_drop`` is given, reported by calling it once. A last line without
    a newline is never complete, so never kept.
    """

    __slots__ = ("_lines", "_on_drop")

    def __init__(
        self,
        max_size: int = DEFAULT_MAX_LINE_SIZE,
        *,
        on_drop: Callable[[], None] | None = None,
    ) -> None:
        self._lines = LineSplitter(max_size)
        self._on_drop = on_drop

    @property
    def max_size(self) -> int:
        """The longest line kept, in bytes, its newline not counted."""
        return self._lines.max_size

    @property
    def dropped(self) -> int:
        """How many lines were too long, so not kept."""
        return self._lines.dropped

    def feed(self, data: bytes) -> list[bytes]:
        """Add ``data``; return the lines it completed, without their ``\\n``."""
        kept: list[bytes] = []
        for _number, line in self._lines.feed(data):
            if line is not None:
                kept.append(line)
            elif self._on_drop is not None:
                self._on_drop()
        return kept
