"""The proxy side of one ask: bytes in, events out (DESIGN §4, §5).

One ask travels on one HTTP/1.1 connection. :class:`ProxyConnection` asks
for notifications (kind 4) and turns the answer into a path's events;
:class:`ExchangeConnection` asks one of the four one-shot exchanges (kinds
0-3) and turns the answer into its result. Both are thin front-ends on one
shared implementation of the HTTP and framing layers, which is driven by
one table, :data:`PROXY_TRANSITIONS`:

* the ask is built once, up front, and handed out by ``data_to_send()``;
* each head of the answer is found by this module and handed whole to
  ``h11``, which parses and validates it;
* a 2xx ``application/vnd.diverge.messages`` head opens the path; its body
  (chunked, ``Content-Length`` or close-delimited) is read by this module,
  split into frames by :class:`~.framing.FrameDecoder`, and each message
  goes to the front-end's rules: the profile rules of
  :class:`~.sequence.SequenceMachine` for a path, :data:`ANSWER_TRANSITIONS`
  for an exchange. Reading heads and bodies here keeps every limit exact:
  no outcome depends on how the bytes were split into reads;
* a non-2xx head is a refusal: its body is read for a short reason, and the
  ask was not served;
* anything else the peer does wrong ends the path as ``StreamBroken`` with a
  reason a person can act on. No exception from ``h11`` ever leaves
  ``next_event()``.

Every path produces exactly one terminal event; a :class:`ProxyConnection`
follows it with exactly one :class:`~.events.ReaskNeeded`. Bytes that
arrive after the terminal event are discarded.
"""

from __future__ import annotations

import enum
import re
from collections import deque
from collections.abc import Mapping
from http import HTTPStatus
from typing import ClassVar, Final, Literal

import h11

from ._errors import FrameError, LocalProtocolError
from ._json import JsonError, parse
from .asks import Ask, Exchange, encode_ask
from .events import (
    NEED_DATA,
    Event,
    EventOrNeedData,
    NotServed,
    ResultReceived,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
)
from .framing import (
    DEFAULT_MAX_FRAME_SIZE,
    PREFIX_SIZE,
    FrameDecoder,
    FrameTooLarge,
    OffsetBuffer,
)
from .http import (
    ASK_CONTENT_TYPE,
    DEFAULT_MAX_HEAD_SIZE,
    HEAD_END,
    MESSAGES_CONTENT_TYPE,
    channel_from_location,
    check_token,
)
from .mcp import ErrorData
from .messages import ERROR_TAG, NOTIFICATION_TAG
from .sequence import PathState, Profile, SequenceMachine

__all__ = [
    "ANSWER_TRANSITIONS",
    "PROXY_TRANSITIONS",
    "REFUSAL_BODY_LIMIT",
    "AnswerInput",
    "AnswerOutcome",
    "AnswerState",
    "ExchangeConnection",
    "ProxyConnection",
    "ProxyInput",
    "ProxyOutcome",
    "ProxyState",
]

#: How many bytes of a refusal's body are kept for :attr:`NotServed.reason`.
REFUSAL_BODY_LIMIT: Final = 200

_STATUS_LINE_START: Final = b"HTTP/"
_REASON_CLIP: Final = 160
_CRLF: Final = b"\r\n"
# RFC 9112 §7.1: chunk-size [chunk-ext] CRLF (the extensions are ignored).
_CHUNK_SIZE_LINE: Final = re.compile(rb"([0-9A-Fa-f]{1,16})[ \t]*(?:;[^\r\n]*)?")
# The common chunk-size line: digits only, with its CRLF; at most 18 bytes.
_PLAIN_SIZE_LINE: Final = re.compile(rb"([0-9A-Fa-f]{1,16})\r\n")
_PLAIN_SIZE_LINE_MAX: Final = 18
# A field line of the trailer section: a token, a colon, visible text.
_TRAILER_FIELD: Final = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+:[\t\x20-\x7e\x80-\xff]*")
_BROKEN_CHUNKS: Final = "the answer's chunked encoding is broken"
_UNLIMITED: Final = 2**63
# How many complete frames one step of next_event() hands to the rules.
_FRAMES_PER_STEP: Final = 32


class ProxyState(enum.Enum):
    """Where one ask on one connection is."""

    #: Built; the ask's bytes have not been taken with ``data_to_send()``.
    SENDING_ASK = "sending ask"
    #: The ask is out; waiting for the answer's head (1xx heads are skipped).
    AWAITING_HEAD = "awaiting head"
    #: A 2xx messages head opened the path; frames are read from the body.
    STREAMING = "streaming"
    #: A non-2xx head refused the ask; its body is read for the reason.
    REFUSED = "reading refusal"
    #: The terminal event is queued; whatever arrives now is discarded.
    DONE = "done"


class ProxyInput(enum.Enum):
    """What can happen to one ask on one connection."""

    ASK_TAKEN = "ask taken"
    INFORMATIONAL = "1xx head"
    PATH_HEAD = "2xx messages head"
    REFUSAL_HEAD = "non-2xx head"
    UNUSABLE_HEAD = "unusable 2xx head"
    KEEPALIVE = "keep-alive frame"
    MESSAGE = "message frame"
    PATH_OVER = "rules ended the path"
    BODY_END = "clean end of body"
    REFUSAL_READ = "refusal read"
    ABRUPT_END = "abrupt end"
    CONNECTION_LOST = "connection lost"


class ProxyOutcome(enum.Enum):
    """What a transition of :data:`PROXY_TRANSITIONS` does."""

    NOTHING = "nothing"
    SKIPPED = "skipped"
    OPENED = "StreamOpened"
    MESSAGE = "message to the rules"
    FINISH = "clean end to the rules"
    RULES_TERMINAL = "terminal from the rules"
    NOT_SERVED = "NotServed"
    BROKEN = "StreamBroken"


_S, _I, _O = ProxyState, ProxyInput, ProxyOutcome

#: (state, input) -> (next state, outcome) for the HTTP and framing layers
#: of one ask. "The rules" are the front-end's: the profile rules of
#: :class:`SequenceMachine` for :class:`ProxyConnection`,
#: :data:`ANSWER_TRANSITIONS` for :class:`ExchangeConnection`. Inputs in
#: ``DONE`` are discarded and are not in the table; neither is anything a
#: state cannot receive.
PROXY_TRANSITIONS: Final[
    Mapping[tuple[ProxyState, ProxyInput], tuple[ProxyState, ProxyOutcome]]
] = {
    (_S.SENDING_ASK, _I.ASK_TAKEN): (_S.AWAITING_HEAD, _O.NOTHING),
    (_S.SENDING_ASK, _I.CONNECTION_LOST): (_S.DONE, _O.BROKEN),
    (_S.AWAITING_HEAD, _I.INFORMATIONAL): (_S.AWAITING_HEAD, _O.SKIPPED),
    (_S.AWAITING_HEAD, _I.PATH_HEAD): (_S.STREAMING, _O.OPENED),
    (_S.AWAITING_HEAD, _I.REFUSAL_HEAD): (_S.REFUSED, _O.NOTHING),
    (_S.AWAITING_HEAD, _I.UNUSABLE_HEAD): (_S.DONE, _O.BROKEN),
    (_S.AWAITING_HEAD, _I.ABRUPT_END): (_S.DONE, _O.BROKEN),
    (_S.AWAITING_HEAD, _I.CONNECTION_LOST): (_S.DONE, _O.BROKEN),
    (_S.STREAMING, _I.KEEPALIVE): (_S.STREAMING, _O.SKIPPED),
    (_S.STREAMING, _I.MESSAGE): (_S.STREAMING, _O.MESSAGE),
    (_S.STREAMING, _I.PATH_OVER): (_S.DONE, _O.RULES_TERMINAL),
    (_S.STREAMING, _I.BODY_END): (_S.DONE, _O.FINISH),
    (_S.STREAMING, _I.ABRUPT_END): (_S.DONE, _O.BROKEN),
    # connection_lost(): abrupt whatever the body's framing, even where the
    # end of file would have ended a close-delimited body cleanly.
    (_S.STREAMING, _I.CONNECTION_LOST): (_S.DONE, _O.BROKEN),
    (_S.REFUSED, _I.REFUSAL_READ): (_S.DONE, _O.NOT_SERVED),
    # A refusal whose body is cut short is still a refusal: its status is
    # what matters, and it is known.
    (_S.REFUSED, _I.ABRUPT_END): (_S.DONE, _O.NOT_SERVED),
    (_S.REFUSED, _I.CONNECTION_LOST): (_S.DONE, _O.NOT_SERVED),
}


class AnswerState(enum.Enum):
    """Where the answer of a one-shot exchange is."""

    #: Nothing but keep-alives yet.
    AWAITING = "awaiting answer"
    #: The one message arrived; only the clean end may follow.
    ANSWERED = "answered"
    #: The terminal event is queued.
    DONE = "done"


class AnswerInput(enum.Enum):
    """What can arrive on the answer of a one-shot exchange."""

    RESULT = "result message"
    ERROR = "error message"
    UNDECODABLE = "undecodable message"
    FINISH = "clean end"
    LOST = "abrupt end"


class AnswerOutcome(enum.Enum):
    """The event a transition of :data:`ANSWER_TRANSITIONS` produces."""

    RESULT = "ResultReceived"
    ERRORED = "StreamErrored"
    NOT_SERVED = "NotServed"
    ENDED = "StreamEnded"
    VIOLATION = "StreamBroken (violation)"
    BROKEN = "StreamBroken"


_AS, _AI, _AO = AnswerState, AnswerInput, AnswerOutcome

#: (state, input) -> (next state, outcome): the rules of a one-shot answer,
#: one message (a result or an error) and then the clean end.
ANSWER_TRANSITIONS: Final[
    Mapping[tuple[AnswerState, AnswerInput], tuple[AnswerState, AnswerOutcome]]
] = {
    (_AS.AWAITING, _AI.RESULT): (_AS.ANSWERED, _AO.RESULT),
    (_AS.AWAITING, _AI.ERROR): (_AS.DONE, _AO.ERRORED),
    (_AS.AWAITING, _AI.UNDECODABLE): (_AS.DONE, _AO.VIOLATION),
    (_AS.AWAITING, _AI.FINISH): (_AS.DONE, _AO.NOT_SERVED),
    (_AS.AWAITING, _AI.LOST): (_AS.DONE, _AO.BROKEN),
    (_AS.ANSWERED, _AI.RESULT): (_AS.DONE, _AO.VIOLATION),
    (_AS.ANSWERED, _AI.ERROR): (_AS.DONE, _AO.VIOLATION),
    (_AS.ANSWERED, _AI.UNDECODABLE): (_AS.DONE, _AO.VIOLATION),
    (_AS.ANSWERED, _AI.FINISH): (_AS.DONE, _AO.ENDED),
    (_AS.ANSWERED, _AI.LOST): (_AS.DONE, _AO.BROKEN),
}


_ANSWER_INPUT_BY_TAG: Final = {NOTIFICATION_TAG: AnswerInput.RESULT, ERROR_TAG: AnswerInput.ERROR}


def _clip(text: str, limit: int = _REASON_CLIP) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _printable(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())


def _header_text(value: bytes) -> str:
    return _clip(value.decode("latin-1"))


class _Step(enum.Enum):
    """What one read of the body did."""

    FED = "fed the frame decoder"
    STARVED = "needs more bytes"
    ENDED = "ended the path"


class _End(enum.Enum):
    END = "END"


#: Returned by a body reader at the body's clean end.
_END: Final = _End.END


class _Bad:
    """Returned by a body reader whose body breaks HTTP/1.1: why, for people."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


_BodyPiece = bytes | Literal[_End.END] | _Bad | None


class _BodyReader(OffsetBuffer):
    """Reads one HTTP/1.1 body out of the bytes that follow its head.

    :meth:`read` returns the next piece of the body's content, ``_END`` at
    its clean end, a ``_Bad`` when the body breaks HTTP/1.1, or ``None``
    when more bytes are needed. The end of file is the caller's to judge:
    it is the clean end only of a body that :attr:`ends_at_eof`.
    """

    __slots__ = ()

    #: Whether the end of file is this body's clean end (a close-delimited body).
    ends_at_eof: ClassVar[bool] = False

    def read(self) -> _BodyPiece:
        raise NotImplementedError


class _CloseDelimitedBody(_BodyReader):
    """A body with neither length nor chunks: it ends when the connection does."""

    __slots__ = ()

    ends_at_eof = True

    def read(self) -> _BodyPiece:
        return self._take(_UNLIMITED)


class _LengthBody(_BodyReader):
    """A ``Content-Length`` body."""

    __slots__ = ("_remaining",)

    def __init__(self, length: int) -> None:
        super().__init__()
        self._remaining = length

    def read(self) -> _BodyPiece:
        if not self._remaining:
            return _END
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


class _ChunkedBody(_BodyReader):
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
        self._state = _Chunked.SIZE_LINE
        self._remaining = 0
        self._scan = 0
        self._trailer_size = 0

    def read(self) -> _BodyPiece:
        while True:
            state = self._state
            if state is _Chunked.SIZE_LINE and self._whole_chunks_fit:
                whole = self._whole_chunks()
                if whole is not None:
                    return whole
            if state is _Chunked.DATA:
                piece = self._take(self._remaining)
                if piece is not None:
                    self._remaining -= len(piece)
                    if not self._remaining:
                        self._state = _Chunked.DATA_END
                return piece
            if state is _Chunked.DATA_END:
                start = self._start
                tail = self._buffer[start : start + 2]
                if tail != _CRLF:
                    if not _CRLF.startswith(tail):
                        return _Bad(f"{_BROKEN_CHUNKS}: a chunk is not followed by CRLF")
                    self._keep_partial_only()
                    return None
                self._consume(start + 2)
                self._state = _Chunked.SIZE_LINE
                continue
            if state is _Chunked.DONE:
                return _END
            line = self._next_line()
            if line is None or isinstance(line, _Bad):
                return line
            if state is _Chunked.SIZE_LINE:
                match = _CHUNK_SIZE_LINE.fullmatch(line)
                if match is None:
                    return _Bad(f"{_BROKEN_CHUNKS}: a chunk-size line is not valid: {_show(line)}")
                self._remaining = int(match[1], 16)
                self._state = _Chunked.DATA if self._remaining else _Chunked.TRAILER
            elif not line:
                self._state = _Chunked.DONE
            elif _TRAILER_FIELD.fullmatch(line) is None:
                return _Bad(f"{_BROKEN_CHUNKS}: a trailer line is not a field: {_show(line)}")

    def _whole_chunks(self) -> bytes | None:
        """The data of the whole chunks held at the front, or ``None`` if there are none.

        A whole chunk is a plain chunk-size line (hex digits only, no
        extensions), all of its data and the CRLF after it. Taking those
        here in one call gives exactly what the step-by-step reading gives,
        which handles everything else (and every error) where this stops.
        """
        buffer = self._buffer
        if type(buffer) is not bytes:
            return None
        start = self._start
        match_size_line = _PLAIN_SIZE_LINE.match
        pieces: list[bytes] = []
        while True:
            match = match_size_line(buffer, start)
            if match is None:
                break
            data_start = match.end()
            data_end = data_start + int(match[1], 16)
            if data_end == data_start or buffer[data_end : data_end + 2] != _CRLF:
                break  # the last chunk (the trailer section follows), or not whole
            pieces.append(buffer[data_start:data_end])
            start = data_end + 2
        if not pieces:
            return None
        self._consume(start)
        self._scan = 0
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def _next_line(self) -> bytes | _Bad | None:
        """The next line without its CRLF, within the limit; ``None`` if it is incomplete."""
        buffer, start = self._buffer, self._start
        end = buffer.find(_CRLF, start + self._scan)
        trailer = self._state is _Chunked.TRAILER
        used = self._trailer_size if trailer else 0
        # A line too long is refused as soon as that is certain, complete or
        # not, so that the outcome does not depend on where reads end.
        size = (end + 2 if end >= 0 else len(buffer) + 1) - start
        if used + size > self._max_line:
            what = "trailer section" if trailer else "chunk-size line"
            return _Bad(
                f"the answer's {what} is larger than max_head_size ({self._max_line} bytes)"
            )
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


def _show(line: bytes) -> str:
    return repr(line if len(line) <= 40 else line[:40] + b"...")


def _body_reader(response: h11.Response, max_line: int) -> _BodyReader:
    """How the body after ``response`` is framed (RFC 9112 §6.3, as h11 decides it)."""
    if response.status_code in (204, 304):
        return _LengthBody(0)
    length: int | None = None
    for name, value in response.headers:
        if name == b"transfer-encoding":
            # h11 accepts no transfer coding but chunked, and it beats a length.
            return _ChunkedBody(max_line)
        if name == b"content-length":
            length = int(value)  # h11 checked it is one plain number
    return _CloseDelimitedBody() if length is None else _LengthBody(length)


class _AskConnection:
    """One ask on one HTTP/1.1 connection: the layers both front-ends share.

    h11 builds the request and parses each head; the heads' boundaries and
    the body are read here, so that every limit is exact and no outcome
    depends on how the bytes were split. A front-end supplies the rules:
    what messages mean (:meth:`_on_messages`, given them in order a batch
    at a time, true when one ended the path; those after it are then
    discarded), and the events of the path's opening, clean end, abrupt end and
    refusal.
    """

    __slots__ = (
        "_body",
        "_decoder",
        "_eof",
        "_head",
        "_head_scan",
        "_http",
        "_lost",
        "_max_head_size",
        "_refusal",
        "_refusal_head",
        "_request",
        "_state",
        "_status",
    )

    def __init__(
        self,
        authority: str,
        body: bytes,
        *,
        token: str | None,
        max_frame_size: int,
        max_head_size: int,
        target: str,
    ) -> None:
        if max_head_size < 1:
            raise ValueError("max_head_size must be at least 1")
        if not authority:
            raise LocalProtocolError("the authority (host[:port]) must not be empty")
        check_token(token)
        if not target.startswith("/"):
            raise ValueError("target must start with '/'")
        self._decoder: FrameDecoder | None = FrameDecoder(max_frame_size)
        self._max_head_size = max_head_size
        http = h11.Connection(h11.CLIENT, max_incomplete_event_size=max_head_size)
        headers = [
            ("Host", authority),
            ("Content-Type", ASK_CONTENT_TYPE),
            ("Content-Length", str(len(body))),
        ]
        if token is not None:
            headers.append(("Authorization", f"Bearer {token}"))
        try:
            request = http.send(h11.Request(method="POST", target=target, headers=headers))
            request += http.send(h11.Data(data=body))
            http.send(h11.EndOfMessage())
        except (h11.ProtocolError, ValueError) as error:
            # A caller's value that cannot go into a request (a newline in
            # the token, a non-ASCII authority...): the caller's mistake.
            raise LocalProtocolError(f"cannot build the ask: {error}") from None
        self._http: h11.Connection | None = http
        self._request = request
        self._state = ProxyState.SENDING_ASK
        self._eof = False
        self._lost: str | None = None
        self._head: bytearray | None = bytearray()
        self._head_scan = 0
        self._body: _BodyReader | None = None
        self._status: int | None = None
        self._refusal: bytearray | None = None
        self._refusal_head = ""

    # --- the public surface ------------------------------------------------

    @property
    def state(self) -> ProxyState:
        """Where the ask is (see :data:`PROXY_TRANSITIONS`)."""
        return self._state

    @property
    def status(self) -> int | None:
        """The answer's final status code, once its head has arrived."""
        return self._status

    def data_to_send(self) -> bytes:
        """The ask's request bytes the first time; ``b""`` afterwards."""
        if self._state is not ProxyState.SENDING_ASK:
            return b""
        self._apply(ProxyInput.ASK_TAKEN)
        request, self._request = self._request, b""
        return request

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes read from the connection; ``b""`` means end of file.

        End of file may be reported more than once. Data after end of file,
        or before the ask was taken with :meth:`data_to_send`, raises
        :class:`LocalProtocolError`. Once the path is over, data is
        discarded.
        """
        if self._eof:
            if data:
                raise LocalProtocolError("data received after end of file")
            return
        state = self._state
        if state is ProxyState.SENDING_ASK:
            raise LocalProtocolError("take the ask with data_to_send() before receiving the answer")
        if not data:
            self._eof = True
        elif state is ProxyState.AWAITING_HEAD:
            assert self._head is not None
            self._head += data
        elif state is not ProxyState.DONE:
            assert self._body is not None
            self._body.feed(data)

    def connection_lost(self, reason: str) -> None:
        """The connection ended abruptly (a reset, an idle timeout...): ``reason`` says how.

        Unlike end of file, this is never a clean end, whatever the body's
        framing: the messages already received are still delivered, and
        then, unless a body with a length or chunks had already ended
        properly, the path ends as :class:`StreamBroken` with ``reason``
        (a refusal is still :class:`NotServed`). May be called more than
        once; only the first call counts. Afterwards :meth:`receive_data`
        raises :class:`LocalProtocolError` for data, as after end of file.
        """
        if self._lost is not None:
            return
        self._lost = reason
        self._eof = True
        if self._state is ProxyState.SENDING_ASK:
            # Nothing was asked: nothing will be read either.
            self._request = b""
            self._end_lost()

    def next_event(self) -> EventOrNeedData:
        """The next event, or :data:`NEED_DATA` until more bytes (or end of file) arrive."""
        event = self._next_queued()
        while event is NEED_DATA and self._advance():
            event = self._next_queued()
        return event

    # --- what a front-end supplies ------------------------------------------

    def _next_queued(self) -> EventOrNeedData:
        raise NotImplementedError

    def _on_opened(self, channel: str) -> None:
        raise NotImplementedError

    def _on_messages(self, payloads: list[bytes]) -> bool:
        raise NotImplementedError

    def _on_finish(self, status: int) -> None:
        raise NotImplementedError

    def _on_broken(self, reason: str) -> None:
        raise NotImplementedError

    def _on_refused(self, status: int, reason: str) -> None:
        raise NotImplementedError

    # --- the machine -----------------------------------------------------------

    def _apply(self, what: ProxyInput) -> ProxyOutcome:
        state, outcome = PROXY_TRANSITIONS[(self._state, what)]
        self._state = state
        if state is ProxyState.DONE:
            # Nothing more is read: let go of the buffers now (the refusal's
            # body is let go once its reason is written).
            self._http = None
            self._decoder = None
            self._head = None
            self._body = None
        return outcome

    def _advance(self) -> bool:
        """Do one step of work; false when nothing can be done until more bytes arrive."""
        if self._state is ProxyState.STREAMING:
            decoder = self._decoder
            assert decoder is not None
            # The frames already complete are handed on a bounded batch at a
            # time: cheaper per message than one step each, and what is
            # decoded ahead of the caller stays small. MESSAGE and KEEPALIVE
            # keep the state (PROXY_TRANSITIONS says so, and a test holds the
            # two together), so they are not looked up for every frame.
            handed = 0
            while handed < _FRAMES_PER_STEP:
                payloads = decoder.next_payloads(_FRAMES_PER_STEP - handed)
                if payloads:
                    handed += len(payloads)
                    if self._on_messages(payloads):
                        self._apply(ProxyInput.PATH_OVER)
                        return True
                    continue
                if payloads is None:
                    too_large = decoder.next_frame()
                    assert isinstance(too_large, FrameTooLarge)
                    self._end_abruptly(
                        f"a frame of {too_large.length} bytes is larger than max_frame_size "
                        f"({too_large.limit} bytes)"
                    )
                    return True
                # The next frame needs more of the body.
                step = self._read_body()
                if step is not _Step.FED:
                    # Frames already handed on are progress even when no
                    # more of the body is to be had.
                    return step is _Step.ENDED or handed > 0
            return True
        if self._state is ProxyState.AWAITING_HEAD:
            return self._read_head()
        if self._state is ProxyState.REFUSED:
            return self._read_refusal()
        return False

    def _end_abruptly(self, reason: str) -> None:
        if self._apply(ProxyInput.ABRUPT_END) is ProxyOutcome.NOT_SERVED:
            self._refuse()
        else:
            self._on_broken(reason)

    def _end_lost(self) -> None:
        """End where the bytes run out after :meth:`connection_lost`."""
        reason = self._lost
        assert reason is not None
        if self._apply(ProxyInput.CONNECTION_LOST) is ProxyOutcome.NOT_SERVED:
            self._refuse()
        else:
            self._on_broken(reason)

    # --- the head --------------------------------------------------------------

    def _read_head(self) -> bool:
        head = self._head
        assert head is not None
        if not _STATUS_LINE_START.startswith(head[: len(_STATUS_LINE_START)]):
            self._end_abruptly(
                "the answer does not start with an HTTP/1.x status line: "
                "is this the Diverge server's address?"
            )
            return True
        match = HEAD_END.search(head, self._head_scan)
        if match is None:
            if len(head) > self._max_head_size:
                self._end_abruptly(self._head_too_large())
            elif self._lost is not None:
                self._end_lost()
            elif self._eof:
                self._end_abruptly(
                    "the connection closed before any answer arrived"
                    if not head
                    else "the connection closed in the middle of the answer's head"
                )
            else:
                self._head_scan = max(0, len(head) - 2)
                return False
            return True
        end = match.end()
        if end > self._max_head_size:
            self._end_abruptly(self._head_too_large())
            return True
        self._head_scan = 0
        http = self._http
        assert http is not None
        # h11 gets exactly one complete head, so what it says about it does
        # not depend on how the bytes were split.
        http.receive_data(bytes(head[:end]))
        del head[:end]
        try:
            event = http.next_event()
        except h11.RemoteProtocolError as error:
            self._end_abruptly(f"the answer's head is not valid HTTP/1.1: {_clip(str(error))}")
            return True
        if type(event) is h11.InformationalResponse:
            self._apply(ProxyInput.INFORMATIONAL)
            return True
        if type(event) is not h11.Response:  # pragma: no cover - h11 was given a whole head
            self._end_abruptly("the answer's head could not be read")
            return True
        self._status = event.status_code
        # From here on the body is read here, not by h11.
        self._http = None
        self._head = None
        body = self._body = _body_reader(event, self._max_head_size)
        body.feed(head)
        if 200 <= event.status_code < 300:
            channel_or_problem = self._check_path_head(event)
            if isinstance(channel_or_problem, _Problem):
                self._apply(ProxyInput.UNUSABLE_HEAD)
                self._on_broken(channel_or_problem.reason)
                return True
            self._apply(ProxyInput.PATH_HEAD)
            self._on_opened(channel_or_problem)
        else:
            self._apply(ProxyInput.REFUSAL_HEAD)
            self._refusal = bytearray()
            self._refusal_head = self._describe_refusal(event)
        return True

    def _head_too_large(self) -> str:
        return f"the answer's head is larger than max_head_size ({self._max_head_size} bytes)"

    def _check_path_head(self, response: h11.Response) -> str | _Problem:
        content_types: list[bytes] = []
        locations: list[bytes] = []
        encodings: list[bytes] = []
        for name, value in response.headers:
            if name == b"content-type":
                content_types.append(value)
            elif name == b"content-location":
                locations.append(value)
            elif name == b"content-encoding":
                encodings.append(value)
        status = response.status_code
        if not content_types:
            return _Problem(
                f"the answer has status {status} but no Content-Type; "
                f"a path is {MESSAGES_CONTENT_TYPE}"
            )
        if len(content_types) > 1:
            return _Problem("the answer has more than one Content-Type")
        media_type = content_types[0].split(b";", 1)[0].strip().lower()
        if media_type != MESSAGES_CONTENT_TYPE.encode("ascii"):
            return _Problem(
                f"the answer has status {status} and Content-Type "
                f"{_header_text(content_types[0])!r}, not {MESSAGES_CONTENT_TYPE}: "
                "is this the Diverge server's address?"
            )
        for encoding in encodings:
            if encoding.strip().lower() not in (b"", b"identity"):
                return _Problem(
                    f"the answer's body is content-encoded ({_header_text(encoding)}), "
                    "which the ask did not allow"
                )
        if not locations:
            return _Problem("the answer has no Content-Location, so the path has no channel")
        if len(locations) > 1:
            return _Problem("the answer has more than one Content-Location")
        location = locations[0].decode("latin-1")
        channel = channel_from_location(location)
        if channel is None:
            return _Problem(
                f"the answer's Content-Location {_clip(location)!r} does not end in a channel "
                "id (1-64 of A-Z a-z 0-9 - _)"
            )
        return channel

    # --- the body of a path ---------------------------------------------------

    def _read_body(self) -> _Step:
        """Move the next piece of the body to the frame decoder, or end the path."""
        body = self._body
        decoder = self._decoder
        assert body is not None and decoder is not None
        piece = body.read()
        if type(piece) is bytes:
            decoder.feed(piece)
            return _Step.FED
        if piece is None:
            if not self._eof:
                return _Step.STARVED
            if self._lost is not None:
                self._end_lost()
                return _Step.ENDED
            if not body.ends_at_eof:
                where = "" if decoder.at_boundary else f", {self._inside_frame()}"
                self._end_abruptly(f"the connection closed before the answer's body ended{where}")
                return _Step.ENDED
            piece = _END
        if isinstance(piece, _Bad):
            self._end_abruptly(piece.reason)
        elif decoder.at_boundary:
            self._apply(ProxyInput.BODY_END)
            status = self._status
            assert status is not None
            self._on_finish(status)
        else:
            self._end_abruptly(f"the answer's body ended {self._inside_frame()}")
        return _Step.ENDED

    def _inside_frame(self) -> str:
        decoder = self._decoder
        assert decoder is not None
        held, size = decoder.partial_frame()
        if size is None:
            return f"inside a frame's length prefix ({held} of {PREFIX_SIZE} bytes)"
        return f"inside a frame ({held} of {size} bytes)"

    # --- a refusal ---------------------------------------------------------------

    def _describe_refusal(self, response: h11.Response) -> str:
        status = response.status_code
        phrase = response.reason.decode("latin-1").strip()
        if not phrase:
            try:
                phrase = HTTPStatus(status).phrase
            except ValueError:
                phrase = ""
        text = f"{status} {_clip(phrase)}".strip()
        if 300 <= status < 400:
            for name, value in response.headers:
                if name == b"location":
                    text += f" (Location: {_header_text(value)})"
                    break
        return text

    def _read_refusal(self) -> bool:
        body = self._body
        refusal = self._refusal
        assert body is not None and refusal is not None
        piece = body.read()
        if type(piece) is bytes:
            refusal += piece[: REFUSAL_BODY_LIMIT + 1 - len(refusal)]
            if len(refusal) <= REFUSAL_BODY_LIMIT:
                return True
            # Enough for people: the rest is not waited for.
        elif piece is None:
            if not self._eof:
                return False
            if self._lost is not None:
                self._end_lost()
                return True
            if not body.ends_at_eof:
                self._end_abruptly("the refusal's body was cut short")
                return True
        elif isinstance(piece, _Bad):
            self._end_abruptly(piece.reason)
            return True
        self._apply(ProxyInput.REFUSAL_READ)
        self._refuse()
        return True

    def _refuse(self) -> None:
        refusal = self._refusal or b""
        status = self._status
        assert status is not None
        reason = self._refusal_head
        body = _printable(bytes(refusal[:REFUSAL_BODY_LIMIT]))
        if body.startswith(reason):
            # Many servers' bodies begin by repeating the status line.
            body = body[len(reason) :].lstrip(" :-")
        if body:
            reason += f": {body}" + ("…" if len(refusal) > REFUSAL_BODY_LIMIT else "")
        self._refusal = None
        self._on_refused(status, reason)


class _Problem:
    """Why a 2xx head cannot open a path (a private result type)."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class ProxyConnection(_AskConnection):
    """One notifications ask (kind 4) on one HTTP/1.1 connection.

    Send what :meth:`data_to_send` returns, feed what is read to
    :meth:`receive_data` (``b""`` at end of file) and take events from
    :meth:`next_event` until it returns :data:`NEED_DATA`. The events are
    :class:`StreamOpened`, then any number of :class:`NotificationReceived`
    and :class:`MessageRejected`, then exactly one terminal event
    (:class:`StreamErrored`, :class:`NotServed`, :class:`StreamEnded` or
    :class:`StreamBroken`), then exactly one :class:`ReaskNeeded`, then
    :data:`NEED_DATA` forever. A refusal or a broken head produces the
    terminal event and :class:`ReaskNeeded` without :class:`StreamOpened`.

    ``profile`` picks the sequence rules (DESIGN §5). ``max_frame_size``
    bounds one frame (a larger one ends the path, unbuffered);
    ``max_head_size`` bounds each head of the answer, and each chunk-size
    line and the trailer section of a chunked body. ``target`` is the
    request target (``/requests``, or a base path's ``/base/requests``).
    A ``token`` the server could never match (see
    :func:`~.server.check_token`) or a ``target`` that does not start with
    ``/`` is a :class:`ValueError`.
    """

    __slots__ = ("_channel", "_machine")

    def __init__(
        self,
        authority: str,
        *,
        token: str | None = None,
        profile: Profile = Profile.PROVIDER,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_head_size: int = DEFAULT_MAX_HEAD_SIZE,
        target: str = "/requests",
    ) -> None:
        self._machine = SequenceMachine(profile, reask=True)
        self._channel: str | None = None
        super().__init__(
            authority,
            encode_ask(Ask(exchange=Exchange.NOTIFICATIONS)),
            token=token,
            max_frame_size=max_frame_size,
            max_head_size=max_head_size,
            target=target,
        )

    @property
    def profile(self) -> Profile:
        """The sequence rules in force."""
        return self._machine.profile

    @property
    def channel(self) -> str | None:
        """The path's channel, once it is open."""
        return self._channel

    @property
    def messages(self) -> int:
        """How many messages (decodable or not) the path delivered so far."""
        return self._machine.messages

    def next_event(self) -> EventOrNeedData:
        """The next event, or :data:`NEED_DATA` until more bytes (or end of file) arrive."""
        # _AskConnection.next_event(), with the rules' queue read directly:
        # one call less for every event.
        next_queued = self._machine.next_event
        event = next_queued()
        while event is NEED_DATA and self._advance():
            event = next_queued()
        return event

    def _next_queued(self) -> EventOrNeedData:
        return self._machine.next_event()

    def _on_opened(self, channel: str) -> None:
        self._channel = channel
        self._machine.open(channel)

    def _on_messages(self, payloads: list[bytes]) -> bool:
        machine = self._machine
        machine.receive_payloads(payloads)
        return machine.state is PathState.DONE

    def _on_finish(self, status: int) -> None:
        self._machine.receive_finish(status=status)

    def _on_broken(self, reason: str) -> None:
        self._machine.connection_lost(reason)

    def _on_refused(self, status: int, reason: str) -> None:
        self._machine.refused(status, reason)


class ExchangeConnection(_AskConnection):
    """One one-shot exchange (kinds 0-3) on one HTTP/1.1 connection.

    Driven like :class:`ProxyConnection`. The events are
    :class:`StreamOpened`, then either :class:`ResultReceived` (the result
    object) followed by :class:`StreamEnded`, or one other terminal event:
    :class:`StreamErrored` (the server's ``ErrorData``), :class:`NotServed`
    (a clean end with no message, or a non-2xx answer) or
    :class:`StreamBroken`. There is no :class:`ReaskNeeded`: an exchange is
    asked once. A result followed by an abrupt end gives
    :class:`ResultReceived` then :class:`StreamBroken`.
    """

    __slots__ = ("_answer_state", "_ask", "_channel", "_events")

    def __init__(
        self,
        authority: str,
        ask: Ask,
        *,
        token: str | None = None,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        max_head_size: int = DEFAULT_MAX_HEAD_SIZE,
        target: str = "/requests",
    ) -> None:
        if not isinstance(ask, Ask):
            raise TypeError(f"ask must be an Ask, not {type(ask).__name__}")
        if ask.exchange is Exchange.NOTIFICATIONS:
            raise LocalProtocolError(
                "the notifications ask (kind 4) opens a path: use ProxyConnection"
            )
        self._ask = ask
        self._events: deque[Event] = deque()
        self._answer_state = AnswerState.AWAITING
        self._channel: str | None = None
        super().__init__(
            authority,
            encode_ask(ask),
            token=token,
            max_frame_size=max_frame_size,
            max_head_size=max_head_size,
            target=target,
        )

    @property
    def ask(self) -> Ask:
        """The ask this connection carries."""
        return self._ask

    @property
    def answer_state(self) -> AnswerState:
        """Where the answer is (see :data:`ANSWER_TRANSITIONS`)."""
        return self._answer_state

    @property
    def channel(self) -> str | None:
        """The answer's channel, once its head has arrived."""
        return self._channel

    def _next_queued(self) -> EventOrNeedData:
        events = self._events
        return events.popleft() if events else NEED_DATA

    def _answer(self, what: AnswerInput, event: Event | None = None, *, detail: str = "") -> bool:
        """Apply the answer rules; true when the answer is over."""
        state, outcome = ANSWER_TRANSITIONS[(self._answer_state, what)]
        self._answer_state = state
        if outcome is AnswerOutcome.ENDED:
            event = StreamEnded()
        elif outcome is AnswerOutcome.VIOLATION:
            event = StreamBroken(reason=detail)
        elif outcome is AnswerOutcome.NOT_SERVED and event is None:
            event = NotServed(status=self._status, reason="the exchange ended with no answer")
        assert event is not None
        self._events.append(event)
        return state is AnswerState.DONE

    def _on_opened(self, channel: str) -> None:
        self._channel = channel
        self._events.append(StreamOpened(channel=channel))

    def _on_messages(self, payloads: list[bytes]) -> bool:
        on_message = self._on_message
        return any(on_message(payload) for payload in payloads)

    def _on_message(self, payload: bytes) -> bool:
        tag = payload[0]  # never empty: a frame of length 0 is a keep-alive
        if self._answer_state is AnswerState.ANSWERED:
            return self._answer(
                _ANSWER_INPUT_BY_TAG.get(tag, AnswerInput.UNDECODABLE),
                detail="the exchange was answered with more than one message",
            )
        body = memoryview(payload)[1:]
        if tag == NOTIFICATION_TAG:
            try:
                result = parse(body)
            except JsonError as error:
                return self._undecodable(f"the result is not valid JSON: {error}")
            if not isinstance(result, dict):
                return self._undecodable("the result is not a JSON object")
            return self._answer(AnswerInput.RESULT, ResultReceived(result=result, raw=bytes(body)))
        if tag == ERROR_TAG:
            try:
                error_data = ErrorData.from_bytes(body)
            except FrameError as error:
                return self._undecodable(error.detail)
            return self._answer(AnswerInput.ERROR, StreamErrored(error=error_data))
        return self._undecodable(f"unknown message tag {tag} (0 is a result, 1 an error)")

    def _undecodable(self, detail: str) -> bool:
        return self._answer(
            AnswerInput.UNDECODABLE, detail=f"the exchange's answer did not decode: {_clip(detail)}"
        )

    def _on_finish(self, status: int) -> None:
        self._answer(AnswerInput.FINISH)

    def _on_broken(self, reason: str) -> None:
        if self._answer_state is not AnswerState.DONE:
            self._answer(AnswerInput.LOST, StreamBroken(reason=reason))

    def _on_refused(self, status: int, reason: str) -> None:
        self._answer(AnswerInput.FINISH, NotServed(status=status, reason=reason))
