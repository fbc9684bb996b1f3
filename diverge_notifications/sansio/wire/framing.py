"""Length-prefixed frames on a byte stream .

A frame is a 4-byte big-endian length ``N`` and ``N`` bytes. ``N = 0`` is a
keep-alive; ``N >= 1`` is one message. Frames may be split across reads or
packed together arbitrarily: the decoder gives the same frames for any
split of the same bytes.
"""

from __future__ import annotations

import enum
import struct
from typing import Final, Literal

from ..errors import FrameTooLarge, LocalProtocolError

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "KEEPALIVE",
    "KEEPALIVE_FRAME",
    "LENGTH_FORMAT",
    "PREFIX_SIZE",
    "FrameDecoder",
    "FrameTooLarge",
    "OffsetBuffer",
    "encode_frame",
    "pack_length",
]

#: Largest frame accepted by default: 16 MiB.
DEFAULT_MAX_FRAME_SIZE: Final = 16 * 1024 * 1024
#: The length prefix as a :mod:`struct` format: 4 bytes, big-endian, unsigned.
LENGTH_FORMAT: Final = ">I"
_LENGTH: Final = struct.Struct(LENGTH_FORMAT)
#: Size of the length prefix in bytes.
PREFIX_SIZE: Final = _LENGTH.size
_PREFIX: Final = PREFIX_SIZE
_MAX_ENCODABLE: Final = 2**32 - 1
_read_length = _LENGTH.unpack_from
#: A frame's length prefix for a payload of so many bytes (at most 2**32 - 1).
pack_length: Final = _LENGTH.pack

#: The bytes of a keep-alive frame.
KEEPALIVE_FRAME: Final = pack_length(0)


class _Marker(enum.Enum):
    KEEPALIVE = "KEEPALIVE"

    def __repr__(self) -> str:
        return self.value


#: Returned by :meth:`FrameDecoder.next_frame` for a keep-alive frame.
KEEPALIVE: Final = _Marker.KEEPALIVE


FrameOrMarker = bytes | Literal[_Marker.KEEPALIVE] | FrameTooLarge | None


def encode_frame(payload: bytes) -> bytes:
    """``payload`` with its 4-byte big-endian length in front."""
    if len(payload) > _MAX_ENCODABLE:
        raise LocalProtocolError(f"a frame holds at most {_MAX_ENCODABLE} bytes")
    return pack_length(len(payload)) + payload


class OffsetBuffer:
    """Bytes received and not yet parsed, read from an offset.

    The base of the parsers that read a byte stream piece by piece (the
    frame decoder here, the HTTP body readers of the proxy side). Costs stay
    linear in the input however it is split:

    * bytes fed while nothing is pending are adopted, not copied, and the
      parser slices straight out of them;
    * bytes fed while fewer are pending are joined to them in new ``bytes``
      (a copy of at most twice what was fed), so that the parser slices
      bytes again, say after a frame that straddled two reads;
    * what straddles many feeds is gathered in a ``bytearray``, which grows
      in amortised constant time per byte;
    * consumed bytes are dropped from its front only once they are at least
      half of it, so feeding one byte at a time is not quadratic;
    * after a miss, only the unparsed tail of an adopted read is kept.
    """

    __slots__ = ("_buffer", "_start")

    _buffer: bytes | bytearray

    def __init__(self) -> None:
        self._buffer = b""
        self._start = 0

    @property
    def buffered(self) -> int:
        """How many bytes are held, not yet parsed."""
        return len(self._buffer) - self._start

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes to the stream."""
        if not data:
            return
        buffer = self._buffer
        start = self._start
        if start == len(buffer):
            # Nothing pending: parse straight out of the caller's bytes.
            self._buffer = data if type(data) is bytes else bytes(data)
            self._start = 0
            return
        if len(buffer) - start <= len(data):
            with memoryview(buffer) as pending:
                self._buffer = b"".join((pending[start:], data))
            self._start = 0
            return
        if type(buffer) is bytes:
            buffer = self._buffer = bytearray(memoryview(buffer)[start:])
            self._start = 0
        assert isinstance(buffer, bytearray)
        buffer += data

    def _take(self, limit: int) -> bytes | None:
        """Up to ``limit`` bytes from the front (``limit >= 1``), or ``None`` if none are held."""
        buffer = self._buffer
        start = self._start
        if start == len(buffer):
            return None
        end = min(len(buffer), start + limit)
        if type(buffer) is bytes:
            # A whole adopted read is handed on as it is, without a copy.
            piece = buffer if start == 0 and end == len(buffer) else buffer[start:end]
        else:
            with memoryview(buffer) as view:
                piece = view[start:end].tobytes()
        self._consume(end)
        return piece

    def _keep_partial_only(self) -> None:
        """After a miss: hold on to the unparsed tail only, not the whole read it ended."""
        if self._start and type(self._buffer) is bytes:
            self._buffer = bytearray(memoryview(self._buffer)[self._start :])
            self._start = 0

    def _consume(self, end: int) -> None:
        buffer = self._buffer
        if end == len(buffer):
            # Everything consumed: let go of the buffer (adopted bytes are
            # the caller's; a bytearray may be large).
            self._buffer = b""
            self._start = 0
        elif type(buffer) is bytearray and end > len(buffer) // 2:
            # Deleting from the front of a bytearray costs the size of what
            # remains; doing it only once half is consumed keeps it linear.
            del buffer[:end]
            self._start = 0
        else:
            self._start = end


class FrameDecoder(OffsetBuffer):
    """Splits a byte stream into frames.

    Feed bytes with :meth:`feed`; take frames with :meth:`next_frame`, which
    returns the frame's payload, :data:`KEEPALIVE`, a :class:`FrameTooLarge`
    (after which the decoder is finished: an oversized frame is never
    buffered, and every later call returns the same value) or ``None`` when
    more bytes are needed. Costs are linear in the input however it is
    split (see :class:`OffsetBuffer`).

    A frame that straddles two feeds is joined on its own when the second
    feed completes it, and the bytes after it are adopted rather than
    copied along with it: a large read then costs one copy of each frame.
    """

    __slots__ = ("_failed", "_max_frame_size", "_ready")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < 1:
            raise ValueError("max_frame_size must be at least 1")
        super().__init__()
        self._max_frame_size = max_frame_size
        self._failed: FrameTooLarge | None = None
        # A straddling frame completed by a feed, ahead of what is buffered.
        self._ready: bytes | None = None

    @property
    def max_frame_size(self) -> int:
        """The largest frame payload accepted, in bytes."""
        return self._max_frame_size

    @property
    def at_boundary(self) -> bool:
        """True when no partial frame is buffered (and no frame was too large)."""
        return self._failed is None and self._ready is None and len(self._buffer) == self._start

    def partial_frame(self) -> tuple[int, int | None]:
        """What is buffered of the frame in progress: ``(bytes held, frame size)``.

        The frame size (prefix included) is ``None`` while the length prefix
        itself is incomplete. Meant for error messages.
        """
        held = self.buffered
        if held < _PREFIX:
            return held, None
        return held, _PREFIX + _read_length(self._buffer, self._start)[0]

    def inside_frame(self) -> str:
        """Where in a frame the stream stopped (:meth:`partial_frame`), said for people."""
        held, size = self.partial_frame()
        if size is None:
            return f"inside a frame's length prefix ({held} of {PREFIX_SIZE} bytes)"
        return f"inside a frame ({held} of {size} bytes)"

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes to the stream. Ignored after an oversized frame."""
        if self._failed is not None:
            return
        buffer = self._buffer
        start = self._start
        held = len(buffer) - start
        if held >= _PREFIX and self._ready is None and type(data) is bytes:
            (length,) = _read_length(buffer, start)
            missing = _PREFIX + length - held
            if 0 < missing <= len(data) and length <= self._max_frame_size:
                # The frame in progress ends in these bytes: it is joined on
                # its own, and the bytes after it are adopted.
                with memoryview(buffer) as pending, memoryview(data) as fresh:
                    self._ready = b"".join((pending[start + _PREFIX :], fresh[:missing]))
                self._buffer = data if missing < len(data) else b""
                self._start = missing if missing < len(data) else 0
                return
        super().feed(data)

    def next_payloads(self, limit: int, max_bytes: int | None = None) -> list[bytes] | None:
        """Up to ``limit`` message payloads (``limit >= 1``) from the complete frames held.

        The same frames, in the same order, as calling :meth:`next_frame`
        until it returns ``None`` or a :class:`FrameTooLarge`, for less per
        frame; keep-alive frames are taken and skipped, and do not count.
        With ``max_bytes``, no payload is taken once those taken hold that
        many bytes (the first always is). An empty list means more bytes
        are needed; ``None``, that an oversized frame finished the decoder
        (:meth:`next_frame` returns it).
        """
        if self._failed is not None:
            return None
        buffer = self._buffer
        start = self._start
        size = len(buffer)
        # (Without max_bytes, room for more than all the buffer holds.)
        room = size + 1 if max_bytes is None else max_bytes
        ready = self._ready
        if ready is None:
            payloads: list[bytes] = []
        else:
            self._ready = None
            payloads = [ready]
            limit -= 1
            room -= len(ready)
            if not limit or room <= 0:
                return payloads
        append = payloads.append
        most = self._max_frame_size
        # Frames are sliced out of bytes directly, and out of a bytearray
        # through a view released before the buffer is consumed.
        if type(buffer) is bytes:
            whole, view = buffer, None
        else:
            whole, view = None, memoryview(buffer)
        try:
            while size - start >= _PREFIX:
                (length,) = _read_length(buffer, start)
                if length > most:
                    self._fail(length)
                    return payloads or None
                end = start + _PREFIX + length
                if end > size:
                    break
                if length:
                    if whole is not None:
                        append(whole[start + _PREFIX : end])
                    else:
                        assert view is not None
                        append(view[start + _PREFIX : end].tobytes())
                    limit -= 1
                    room -= length
                start = end
                if not limit or room <= 0:
                    break
        finally:
            if view is not None:
                view.release()
        if start != self._start:
            if whole is not None and start != size:
                self._start = start  # what _consume() does here, without the call
            else:
                self._consume(start)
        if limit and room > 0 and self._start:
            # Stopped for want of bytes, not at a bound: a partial frame.
            self._keep_partial_only()
        return payloads

    def _fail(self, length: int) -> FrameTooLarge:
        # Checked before any of the frame is gathered: an oversized frame
        # costs nothing, whatever it claims.
        failed = self._failed = FrameTooLarge(length, self._max_frame_size)
        self._buffer = b""
        self._start = 0
        return failed

    def next_frame(self) -> FrameOrMarker:
        """The next complete frame, a marker, or ``None`` if more bytes are needed."""
        if self._failed is not None:
            return self._failed
        ready = self._ready
        if ready is not None:
            self._ready = None
            return ready
        buffer = self._buffer
        start = self._start
        available = len(buffer) - start
        if available < _PREFIX:
            self._keep_partial_only()
            return None
        length: int = _read_length(buffer, start)[0]
        if length > self._max_frame_size:
            return self._fail(length)
        end = start + _PREFIX + length
        if available < _PREFIX + length:
            self._keep_partial_only()
            return None
        if not length:
            self._consume(end)
            return KEEPALIVE
        if type(buffer) is bytes:
            # The common case, spelled out: a frame sliced from adopted bytes.
            frame = buffer[start + _PREFIX : end]
            if end == len(buffer):
                self._buffer = b""
                self._start = 0
            else:
                self._start = end
            return frame
        with memoryview(buffer) as view:
            frame = view[start + _PREFIX : end].tobytes()
        self._consume(end)
        return frame
