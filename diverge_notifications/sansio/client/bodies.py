"""The body of an HTTP/1.1 answer, read strictly (RFC 9112 §6, §7.1).

The proxy side (:mod:`.connection`) has h11 parse each head of an answer and
reads the body after it here: a close-delimited body, a ``Content-Length``
body or a chunked one, framed as h11 frames it (:func:`body_reader`). Each
reader is an :class:`~..wire.framing.OffsetBuffer`: bytes go in with ``feed()``,
and ``read()`` returns the next piece of the body's content, :data:`END` at
its clean end, a :class:`Bad` when the body breaks HTTP/1.1, or ``None``
when more bytes are needed. The same bytes give the same pieces and the
same verdict however they are split into reads.

Where these readers deliberately differ from h11's (``tests/test_bodies.py``
feeds the same encodings to both, and holds them to this list and to the
same verdict everywhere else):

1. **Chunk sizes** are 1-16 hex digits (a size that fits 64 bits), leading
   zeros included; h11 takes up to 20 digits.
2. **Whitespace before a chunk extension** (``5 ;name=value``, spaces or
   tabs) is accepted, as RFC 9112 §7.1.1 allows; h11 refuses it.
3. **A bare CR inside a chunk extension** is refused; h11 accepts it.
4. **Line ends in the trailer section** are CRLF only; h11 also takes a
   bare LF, at the end of a field line and as the blank line that ends
   the section.
5. **Obsolete line folding in the trailer section** (a line that starts
   with a space or a tab) is refused; h11 joins it to the line before.
6. **Control characters in a trailer field's value** (``\\x01``-``\\x08``,
   ``\\x0e``-``\\x1f``, ``\\x7f``) are refused: a field value is visible
   characters, spaces and tabs (RFC 9110 §5.5); h11 accepts them.
7. **Trailer fields are not interpreted**: they are checked for syntax and
   ignored. h11 checks a ``Content-Length`` or ``Transfer-Encoding`` field
   in the trailer section as if it were in the head, and refuses a value
   it would refuse there.
8. **The line limits are exact.** A chunk-size line, CRLF included, and
   the whole trailer section, its blank line included, may each be at most
   ``max_line`` bytes, whether they arrive whole or a byte at a time. h11
   compares its ``max_incomplete_event_size`` only with what it holds of an
   incomplete line (all of it but the final LF): it accepts an over-long
   line that arrives in one read, and, read piecemeal, one that is exactly
   one byte over.
9. **What follows the body's end is not read.** The body is over at its
   clean end and the bytes after it are left alone (the proxy discards
   them). h11, reading an answer that says ``Connection: close``, refuses
   them.

Everything else (a size that is not hex, a chunk not followed by CRLF, a
field line without a colon, a body cut short...) is refused by both, and a
valid body gives both the same content.
"""

from __future__ import annotations

import enum
import re
from itertools import compress, count
from operator import ne
from typing import ClassVar, Final, Literal

import h11

from ..wire.framing import OffsetBuffer

__all__ = [
    "END",
    "Bad",
    "BodyPiece",
    "BodyReader",
    "ChunkedBody",
    "CloseDelimitedBody",
    "LengthBody",
    "body_reader",
]

_CRLF: Final = b"\r\n"
# RFC 9112 §7.1: chunk-size [chunk-ext] CRLF (the extensions are ignored).
_CHUNK_SIZE_LINE: Final = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?")
# The common chunk-size line: 1-16 hex digits only, with its CRLF; at most 18 bytes.
_PLAIN_SIZE_LINE_MAX: Final = 18
_HEX_DIGITS: Final = b"0123456789abcdefABCDEF"
# A field line of the trailer section: a token, a colon, visible text.
_TRAILER_FIELD: Final = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[\t\x20-\x7e\x80-\xff]*")
_BROKEN_CHUNKS: Final = "the answer's chunked encoding is broken"
_UNLIMITED: Final = 2**63


class End(enum.Enum):
    """The type of :data:`END`."""

    END = "END"


#: Returned by a body reader at the body's clean end.
END: Final = End.END


class Bad:
    """Why the bytes break HTTP/1.1, for people: what a reader returns for a bad body or head."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


#: What :meth:`BodyReader.read` returns.
BodyPiece = bytes | Literal[End.END] | Bad | None


class BodyReader(OffsetBuffer):
    """Reads one HTTP/1.1 body out of the bytes that follow its head.

    :meth:`read` returns the next piece of the body's content, :data:`END`
    at its clean end, a :class:`Bad` when the body breaks HTTP/1.1, or
    ``None`` when more bytes are needed. The end of file is the caller's to
    judge: it is the clean end only of a body that :attr:`ends_at_eof`.
    """

    __slots__ = ()

    #: Whether the end of file is this body's clean end (a close-delimited body).
    ends_at_eof: ClassVar[bool] = False

    def read(self) -> BodyPiece:
        """The next piece of the body, :data:`END`, a :class:`Bad`, or ``None``."""
        raise NotImplementedError


class CloseDelimitedBody(BodyReader):
    """A body with neither length nor chunks: it ends when the connection does."""

    __slots__ = ()

    ends_at_eof = True

    def read(self) -> BodyPiece:
        return self._take(_UNLIMITED)


class LengthBody(BodyReader):
    """A ``Content-Length`` body."""

    __slots__ = ("_remaining",)

    def __init__(self, length: int) -> None:
        super().__init__()
        self._remaining = length

    def read(self) -> BodyPiece:
        if not self._remaining:
            return END
        piece = self._take(self._remaining)
        if piece is not None:
            self._remaining -= len(piece)
        return piece


class _Chunked(enum.Enum):
    SIZE_LINE = "size line"
    DATA = "data"
    DATA_END = "CRLF after data"
    TRAILER = "trailer section"
    DONE = "done"


# The states by module names: on Python before 3.12 an enum member read from
# its class goes through the enum type's __getattr__ hook, several times the
# cost of a global, and the reader looks its state up on every call.
_SIZE_LINE, _DATA, _DATA_END, _TRAILER, _DONE = _Chunked


class ChunkedBody(BodyReader):
    """A chunked body (RFC 9112 §7.1), read strictly.

    Every line ends in CRLF. A chunk-size line is 1-16 hex digits,
    optionally followed by extensions (ignored); it may be at most
    ``max_line`` bytes long, CRLF included, and so may the whole trailer
    section, whose field lines are checked and ignored. The limits are
    exact: the same bytes are accepted or refused however they are split.
    """

    __slots__ = (
        "_max_line",
        "_remaining",
        "_scan",
        "_state",
        "_trailer_size",
        "_whole_chunks_fit",
    )

    def __init__(self, max_line: int) -> None:
        super().__init__()
        self._max_line = max_line
        # Whether every plain chunk-size line is within the limit.
        self._whole_chunks_fit = max_line >= _PLAIN_SIZE_LINE_MAX
        self._state = _SIZE_LINE
        self._remaining = 0
        self._scan = 0
        self._trailer_size = 0

    def read(self) -> BodyPiece:
        while True:
            state = self._state
            if state is _SIZE_LINE and self._whole_chunks_fit:
                whole = self._whole_chunks()
                if whole is not None:
                    return whole
                state = self._state  # it may have read the size line of a chunk in progress
            if state is _DATA:
                piece = self._take(self._remaining)
                if piece is not None:
                    self._remaining -= len(piece)
                    if not self._remaining:
                        self._state = _DATA_END
                return piece
            if state is _DATA_END:
                start = self._start
                tail = self._buffer[start : start + 2]
                if tail != _CRLF:
                    if not _CRLF.startswith(tail):
                        return Bad(f"{_BROKEN_CHUNKS}: a chunk is not followed by CRLF")
                    self._keep_partial_only()
                    return None
                self._consume(start + 2)
                self._state = _SIZE_LINE
                continue
            if state is _DONE:
                return END
            line = self._next_line()
            if line is None or isinstance(line, Bad):
                return line
            if state is _SIZE_LINE:
                match = _CHUNK_SIZE_LINE.fullmatch(line)
                if match is None:
                    return Bad(f"{_BROKEN_CHUNKS}: a chunk-size line is not valid: {_show(line)}")
                self._remaining = int(match[1], 16)
                self._state = _DATA if self._remaining else _TRAILER
            elif not line:
                self._state = _DONE
            elif _TRAILER_FIELD.fullmatch(line) is None:
                return Bad(f"{_BROKEN_CHUNKS}: a trailer line is not a field: {_show(line)}")

    def _whole_chunks(self) -> bytes | None:
        """The data of the whole chunks held at the front, or ``None`` if there are none.

        A whole chunk is a plain chunk-size line (hex digits only, no
        extensions), all of its data and the CRLF after it. Taking those
        here in one call gives exactly what the step-by-step reading gives,
        which handles everything else (and every error) where this stops.
        Where it stops at a plain size line whose chunk is not all held, it
        reads that line too, and leaves the reader in its data.
        """
        buffer = self._buffer
        if type(buffer) is not bytes:
            return None
        start = self._start
        pieces: list[bytes | memoryview] = []
        # Small chunks are taken a window at a time; the loop below takes
        # what remains (or what a window cannot: other spellings of the
        # size, a chunk larger than a window) one chunk at a time. Once a
        # window holds only a few chunks, they are large enough for the
        # loop's cost per chunk not to matter, and windows would only copy.
        while True:
            taken, start = _plain_chunks(buffer, start)
            pieces += taken
            if len(taken) < _FEW_CHUNKS:
                break
        find = buffer.find
        # The loop's chunks are large: they are joined out of views of the
        # buffer, one copy where slices would make two.
        view = memoryview(buffer)
        # No regular expression here: a search for the CRLF, a strip of the
        # hex digits and ``startswith`` cost half as much per chunk as a
        # match, which is most of the cost of a chunk that holds one frame.
        while True:
            # The CRLF of a plain size line is within its first 18 bytes.
            line_end = find(_CRLF, start, start + _PLAIN_SIZE_LINE_MAX)
            if line_end <= start:
                break  # no plain size line here (or an empty size)
            size_text = buffer[start:line_end]
            if size_text.strip(_HEX_DIGITS):
                break  # not digits only: an extension, a space, not hex at all
            data_start = line_end + 2
            data_end = data_start + int(size_text, 16)
            if data_end == data_start:
                break  # the last chunk: the trailer section follows
            if not buffer.startswith(_CRLF, data_end):
                # The chunk goes on past what is held (or its data is not
                # followed by CRLF): its size line is read, and its data
                # and what follows are taken step by step.
                self._remaining = data_end - data_start
                self._state = _DATA
                start = data_start
                break
            pieces.append(view[data_start:data_end])
            start = data_end + 2
        if start != self._start:
            self._consume(start)
            self._scan = 0
        if not pieces:
            return None
        return bytes(pieces[0]) if len(pieces) == 1 else b"".join(pieces)

    def _next_line(self) -> bytes | Bad | None:
        """The next line without its CRLF, within the limit; ``None`` if it is incomplete."""
        buffer, start = self._buffer, self._start
        end = buffer.find(_CRLF, start + self._scan)
        trailer = self._state is _TRAILER
        used = self._trailer_size if trailer else 0
        # A line too long is refused as soon as that is certain, complete or
        # not, so that the outcome does not depend on where reads end.
        size = (end + 2 if end >= 0 else len(buffer) + 1) - start
        if used + size > self._max_line:
            what = "trailer section" if trailer else "chunk-size line"
            return Bad(f"the answer's {what} is larger than max_head_size ({self._max_line} bytes)")
        if end < 0:
            self._keep_partial_only()
            # Searched so far, counted from the line's start (which feeding
            # may move): all but a last byte, which may be the CR of a CRLF.
            self._scan = max(0, len(self._buffer) - self._start - 1)
            return None
        line = bytes(buffer[start:end])
        self._consume(end + 2)
        self._scan = 0
        if trailer:
            self._trailer_size += size
        return line


# What _plain_chunks splits at once: a bounded piece of the buffer, so that
# a chunk larger than it, or one whose data holds many CRLFs, costs no more
# than the window (and each window it takes consumes at least one chunk).
_WINDOW: Final = 16 * 1024
_FEW_CHUNKS: Final = 4
# A chunk of fewer than 16**3 bytes, a quarter of a window.
_SMALL_SIZE_DIGITS: Final = 3
_lower_hex: Final = b"%x".__mod__


def _plain_chunks(buffer: bytes, start: int) -> tuple[list[bytes], int]:
    """The data of the whole chunks at ``start`` within one window, and where they end.

    Only chunks whose size line is the size in lower-case hex without
    leading zeros, as nearly every writer spells it, and not the last
    chunk; an empty list if the first chunk is not one of those. All in a
    few C-level passes: the window is split at every CRLF, and each
    (size line, data) pair must have the size its line says. A CRLF inside
    a chunk's data makes that pair too short, and ends the run there, so
    every pair before it is a whole chunk: the same chunks as the loop of
    :meth:`ChunkedBody._whole_chunks` takes, for a fraction of the cost.
    """
    # Worth a window only if the first chunk is small: a size of at most
    # _SMALL_SIZE_DIGITS hex digits (read from where its CRLF is, not by a
    # search of the data for the next one: a two-byte search is a loop
    # over every byte, a few microseconds per window it scans).
    line_end = buffer.find(_CRLF, start, start + _SMALL_SIZE_DIGITS + 2)
    if line_end <= start:
        return [], start
    parts = buffer[start : start + _WINDOW].split(_CRLF)
    # A data part followed by a CRLF is whole; the last part never is.
    datas = parts[1:-1:2]
    lines = parts[0 : 2 * len(datas) : 2]
    lengths = list(map(len, datas))
    if 0 in lengths:  # the last chunk (or a size line that is no size)
        del lengths[lengths.index(0) :]
    spelled = list(map(_lower_hex, lengths))
    if spelled != lines[: len(spelled)]:
        del spelled[next(compress(count(), map(ne, spelled, lines))) :]
    whole = len(spelled)
    if not whole:
        return [], start
    del datas[whole:]
    # Each chunk: its size line, CRLF, its data, CRLF.
    return datas, start + sum(map(len, spelled)) + sum(lengths[:whole]) + 4 * whole


def _show(line: bytes) -> str:
    return repr(line if len(line) <= 40 else line[:40] + b"...")


def body_reader(response: h11.Response, max_line: int) -> BodyReader:
    """How the body after ``response`` is framed (RFC 9112 §6.3, as h11 decides it).

    ``response`` is a head h11 parsed and validated; ``max_line`` bounds
    each chunk-size line and the trailer section of a chunked body.
    """
    if response.status_code in (204, 304):
        return LengthBody(0)
    length: int | None = None
    for name, value in response.headers:
        if name == b"transfer-encoding":
            # h11 accepts no transfer coding but chunked, and it beats a length.
            return ChunkedBody(max_line)
        if name == b"content-length":
            length = int(value)  # h11 checked it is one plain number
    return CloseDelimitedBody() if length is None else LengthBody(length)
