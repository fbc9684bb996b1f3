"""Length-prefixed frames on a byte stream (DESIGN §4).

A frame is a 4-byte big-endian length ``N`` and ``N`` bytes. ``N = 0`` is a
keep-alive; ``N >= 1`` is one message. Frames may be split across reads or
packed together arbitrarily.
"""

from __future__ import annotations

import enum
from typing import Final, Literal

from ._errors import LocalProtocolError

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "KEEPALIVE",
    "KEEPALIVE_FRAME",
    "FrameDecoder",
    "FrameTooLarge",
    "encode_frame",
]

#: Largest frame accepted by default: 16 MiB.
DEFAULT_MAX_FRAME_SIZE: Final = 16 * 1024 * 1024
_PREFIX: Final = 4
_MAX_ENCODABLE: Final = 2**32 - 1

#: The bytes of a keep-alive frame.
KEEPALIVE_FRAME: Final = b"\x00\x00\x00\x00"


class _Marker(enum.Enum):
    KEEPALIVE = "KEEPALIVE"

    def __repr__(self) -> str:
        return self.value


#: Returned by :meth:`FrameDecoder.next_frame` for a keep-alive frame.
KEEPALIVE: Final = _Marker.KEEPALIVE


class FrameTooLarge(Exception):
    """Not raised by the decoder: the value it returns for an oversized frame."""

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"frame of {length} bytes is larger than the limit of {limit} bytes")
        self.length = length
        self.limit = limit


FrameOrMarker = bytes | Literal[_Marker.KEEPALIVE] | FrameTooLarge | None


def encode_frame(payload: bytes) -> bytes:
    """``payload`` with its 4-byte big-endian length in front."""
    if len(payload) > _MAX_ENCODABLE:
        raise LocalProtocolError(f"a frame holds at most {_MAX_ENCODABLE} bytes")
    return len(payload).to_bytes(_PREFIX, "big") + payload


class FrameDecoder:
    """Splits a byte stream into frames.

    Feed bytes with :meth:`feed`; take frames with :meth:`next_frame`, which
    returns the frame's payload, :data:`KEEPALIVE`, a :class:`FrameTooLarge`
    (after which the decoder is finished: an oversized frame is never
    buffered) or ``None`` when more bytes are needed.

    Consumed bytes are dropped from the front of the buffer lazily, so
    feeding one byte at a time stays linear in the input.
    """

    __slots__ = ("_buffer", "_failed", "_max_frame_size", "_start")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < 1:
            raise ValueError("max_frame_size must be at least 1")
        self._max_frame_size = max_frame_size
        self._buffer = bytearray()
        self._start = 0
        self._failed: FrameTooLarge | None = None

    @property
    def buffered(self) -> int:
        """How many bytes are held, waiting to complete a frame."""
        return len(self._buffer) - self._start

    @property
    def at_boundary(self) -> bool:
        """True when no partial frame is buffered."""
        return self.buffered == 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes to the stream. Ignored after an oversized frame."""
        if self._failed is None and data:
            self._buffer += data

    def next_frame(self) -> FrameOrMarker:
        """The next complete frame, a marker, or ``None`` if more bytes are needed."""
        if self._failed is not None:
            return self._failed
        buffer = self._buffer
        start = self._start
        available = len(buffer) - start
        if available < _PREFIX:
            return None
        length = int.from_bytes(buffer[start : start + _PREFIX], "big")
        if length > self._max_frame_size:
            self._failed = FrameTooLarge(length, self._max_frame_size)
            self._buffer = bytearray()
            self._start = 0
            return self._failed
        end = start + _PREFIX + length
        if len(buffer) < end:
            return None
        frame = bytes(buffer[start + _PREFIX : end]) if length else KEEPALIVE
        self._consume(end)
        return frame

    def _consume(self, end: int) -> None:
        # Deleting from the front of a bytearray is O(remaining); doing it
        # only once half the buffer is consumed keeps the total linear.
        if end == len(self._buffer):
            self._buffer.clear()
            self._start = 0
        elif end > len(self._buffer) // 2:
            del self._buffer[:end]
            self._start = 0
        else:
            self._start = end
