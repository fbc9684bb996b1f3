"""The proxy side of one ask: bytes in, events out.

One ask travels on one HTTP/1.1 connection. :class:`ProxyConnection` asks
for notifications (kind 4) and turns the answer into a path's events;
:class:`ExchangeConnection` asks one of the four one-shot exchanges (kinds
0-3) and turns the answer into its result. Both are thin front-ends on one
core, which reads the answer layer by layer: its heads (:mod:`.heads`, by
h11), its body (:mod:`.bodies`), the body's frames (:mod:`..wire.framing`), and
hands the messages to the front-end's rules (:mod:`.sequence` for a path,
:mod:`.answer` for an exchange). A non-2xx head is a refusal, whose body
is read for a short reason. Whatever the peer does wrong ends the path as
``StreamBroken`` with a reason a person can act on; no outcome depends on
how the bytes were split into reads, and no exception from h11 ever leaves
``next_event()``.

What each step does to the ask is one table, :data:`PROXY_TRANSITIONS`:
the core names what the bytes are (a :class:`ProxyInput`) and makes that
input's move (:class:`~..transitions.TableMachine`): the pair of state and
input is looked up, the state found there entered and the handler of the
outcome found there run. Every path produces exactly one terminal event; a
:class:`ProxyConnection` follows it with exactly one
:class:`~..events.ReaskNeeded`. Bytes that arrive after it are discarded.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar, Final, Generic, Protocol, TypeVar

import h11

from ..errors import LocalProtocolError
from ..events import NEED_DATA, Event, EventOrNeedData
from ..transitions import Handler, TableEnum, TableMachine
from ..wire.asks import Ask, Exchange, encode_ask
from ..wire.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    KEEPALIVE,
    FrameDecoder,
    FrameOrMarker,
    FrameTooLarge,
)
from ..wire.http import DEFAULT_MAX_HEAD_SIZE, check_token
from ..wire.profiles import Profile
from .answer import AnswerMachine, AnswerState
from .bodies import END, Bad, BodyReader, body_reader
from .heads import HeadReader, Refusal, path_channel
from .sequence import PathState, SequenceMachine

__all__ = [
    "MAX_INFORMATIONAL_HEADS",
    "PROXY_TRANSITIONS",
    "AnswerState",
    "ExchangeConnection",
    "ProxyConnection",
    "ProxyInput",
    "ProxyOutcome",
    "ProxyState",
]


class ProxyState(TableEnum):
    """Where one ask on one connection is."""

    # Hashed on every move (bench/bench_proxy.py): a member equals only
    # itself, so identity hashing is exact, and unlike Enum's own (which
    # hashes the name) it makes no Python call.

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


class ProxyInput(TableEnum):
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


class ProxyOutcome(TableEnum):
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
#: :class:`~.sequence.SequenceMachine` for a
#: :class:`ProxyConnection`, those of :class:`~.answer.AnswerMachine`
#: for an :class:`ExchangeConnection`. Inputs in ``DONE`` are
#: discarded and are not in the table; neither is anything a state cannot
#: receive.
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


# How many complete frames one step of next_event() hands to the rules, and
# how many bytes of them: a run of short messages at once, a large one alone.
#: Informational (1xx) heads an answer may have before its own; one more breaks the ask.
MAX_INFORMATIONAL_HEADS: Final = 4

# What is decoded ahead of the caller stays alive until it is taken, and a
# few large messages alive at once make each allocation dearer.
_FRAMES_PER_STEP: Final = 64
_BYTES_PER_STEP: Final = 6 * 1024
#: The keep-alive's row where a batch skips it: skipped, still streaming.
_KEEPALIVE: Final = (ProxyState.STREAMING, ProxyInput.KEEPALIVE)
_SKIPPED_STREAMING: Final = (ProxyState.STREAMING, ProxyOutcome.SKIPPED)


class _Step(enum.Enum):
    """What one read of the body did."""

    FED = "fed the frame decoder"
    STARVED = "needs more bytes"
    ENDED = "ended the path"


# Enum members by module names: on Python before 3.12 reading one from its
# class goes through the enum type's __getattr__, several times a global.
_FED, _STARVED, _ENDED = _Step
_STREAMING: Final = ProxyState.STREAMING
_DONE: Final = ProxyState.DONE
_MESSAGE: Final = ProxyInput.MESSAGE


class _Rules(Protocol):
    """A front-end's rules: what the messages of the answer mean."""

    @property
    def state(self) -> enum.Enum: ...
    def open(self, channel: str) -> None: ...
    def receive_payloads(self, payloads: Iterable[bytes]) -> None: ...
    def receive_finish(self, *, status: int | None = None) -> None: ...
    def refused(self, status: int | None, reason: str) -> None: ...
    def connection_lost(self, reason: str = ...) -> None: ...
    @property
    def queued(self) -> deque[Event]: ...


_R = TypeVar("_R", bound=_Rules)


class _AskConnection(TableMachine[ProxyState, ProxyInput], Generic[_R]):
    """One ask on one HTTP/1.1 connection: the layers both front-ends share.

    The heads are read by a :class:`~.heads.HeadReader` (and h11), the body
    by a :class:`~.bodies.BodyReader` and its frames by a
    :class:`~..wire.framing.FrameDecoder`; this class says which input each step
    is and makes its move in :data:`PROXY_TRANSITIONS`. A front-end
    supplies its rules, which are given the path's opening, its messages in
    order (a batch at a time; those after the one that ended the path are
    theirs to discard), its clean end, its abrupt end or the refusal, and
    which queue the events.

    What an input brings to its outcome's handler is one value: the channel
    of a head that opened the path, the status of a skipped head, the
    payloads of frames, the reason of an end; ``None`` for the others.
    """

    __slots__ = (
        "_body",
        "_channel",
        "_decoder",
        "_eof",
        "_heads",
        "_informational",
        "_lost",
        "_max_head_size",
        "_queued",
        "_refusal_reader",
        "_request",
        "_rules",
        "_state",
        "_status",
    )

    #: The state of the rules in which the path is over.
    _RULES_DONE: ClassVar[enum.Enum]

    def __init__(
        self,
        authority: str,
        body: bytes,
        rules: _R,
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
        heads = HeadReader(max_head_size)
        self._request = heads.request(authority, body, token=token, target=target)
        self._heads: HeadReader | None = heads
        self._rules = rules
        self._queued = rules.queued
        self._state = ProxyState.SENDING_ASK
        self._eof = False
        self._lost: str | None = None
        self._body: BodyReader | None = None
        self._status: int | None = None
        #: Informational (1xx) heads read so far.
        self._informational = 0
        self._channel: str | None = None
        self._refusal_reader: Refusal | None = None

    # --- the public surface ------------------------------------------------

    @property
    def state(self) -> ProxyState:
        """Where the ask is (see :data:`PROXY_TRANSITIONS`)."""
        return self._state

    @property
    def status(self) -> int | None:
        """The answer's final status code, once its head has arrived."""
        return self._status

    @property
    def channel(self) -> str | None:
        """The answer's channel, once a head opened the path."""
        return self._channel

    @property
    def events_decoded(self) -> int:
        """How many events :meth:`next_event` returns before it reads any further.

        The answer is read a step at a time (a path's messages a bounded
        batch at a time, at most a few KB of them or one message): a caller
        that hands events on as they come may stop taking them when this is
        0, so that what is decoded ahead of whoever takes them stays small.
        """
        return len(self._queued)

    def data_to_send(self) -> bytes:
        """The ask's request bytes the first time; ``b""`` afterwards."""
        if self._state is not ProxyState.SENDING_ASK:
            return b""
        request, self._request = self._request, b""
        self._move(ProxyInput.ASK_TAKEN)
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
            assert self._heads is not None
            self._heads.feed(data)
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
            self._move(ProxyInput.CONNECTION_LOST, reason)

    def next_event(self) -> EventOrNeedData:
        """The next event, or :data:`NEED_DATA` until more bytes (or end of file) arrive."""
        # The rules' queue, popped here rather than through their
        # next_event(): a call less per event, worth 2 % on the short
        # messages of bench/bench_proxy.py.
        queued = self._queued
        while not queued:
            if not self._advance():
                return NEED_DATA
        return queued.popleft()

    # --- the machine -----------------------------------------------------------

    def _move(self, what: ProxyInput, value: str | Sequence[bytes] | None = None) -> None:
        """The move of ``what``, bringing ``value``; once the ask is over, its buffers go."""
        self._fire(PROXY_TRANSITIONS, _ON_OUTCOME, what, value)
        if self._state is _DONE:
            # Nothing more is read (the refusal's body is let go once its
            # reason is written).
            self._request = b""
            self._heads = None
            self._decoder = None
            self._body = None

    def _advance(self) -> bool:
        """Do one step of work; false when nothing can be done until more bytes arrive."""
        state = self._state
        if state is _STREAMING:
            return self._read_frames()
        if state is ProxyState.AWAITING_HEAD:
            return self._read_head()
        if state is ProxyState.REFUSED:
            return self._read_refusal()
        return False

    # --- the outcomes' handlers: one per ProxyOutcome, named in _ON_OUTCOME ---------

    def _nothing(self, value: object) -> None:
        pass

    def _open(self, channel: str) -> None:
        self._channel = channel
        self._rules.open(channel)

    def _to_rules(self, payloads: Sequence[bytes]) -> None:
        rules = self._rules
        rules.receive_payloads(payloads)
        if rules.state is self._RULES_DONE:
            self._move(ProxyInput.PATH_OVER)

    def _finish(self, value: None) -> None:
        self._rules.receive_finish(status=self._status)

    def _not_served(self, value: str | None) -> None:
        # What the end brings (a refusal cut short) is not the refusal's reason.
        refusal, self._refusal_reader = self._refusal_reader, None
        assert refusal is not None
        self._rules.refused(self._status, refusal.reason)

    def _broken(self, reason: str) -> None:
        self._rules.connection_lost(reason)

    # --- the head --------------------------------------------------------------

    def _read_head(self) -> bool:
        heads = self._heads
        assert heads is not None
        head = heads.read()
        if head is None:
            if self._lost is not None:
                self._move(ProxyInput.CONNECTION_LOST, self._lost)
            elif self._eof:
                self._move(ProxyInput.ABRUPT_END, heads.eof_reason())
            else:
                return False
            return True
        if isinstance(head, Bad):
            self._move(ProxyInput.ABRUPT_END, head.reason)
            return True
        if type(head) is h11.InformationalResponse:
            self._informational += 1
            if self._informational > MAX_INFORMATIONAL_HEADS:
                # An endless run of them would hold the ask with no answer for ever.
                self._move(
                    ProxyInput.ABRUPT_END,
                    f"more than {MAX_INFORMATIONAL_HEADS} informational (1xx) heads "
                    "before the answer",
                )
            else:
                self._move(ProxyInput.INFORMATIONAL, str(head.status_code))
            return True
        assert type(head) is h11.Response
        self._status = head.status_code
        # From here on the body is read here, not by h11.
        self._heads = None
        body = self._body = body_reader(head, self._max_head_size)
        body.feed(heads.rest())
        if 200 <= head.status_code < 300:
            channel = path_channel(head)
            if isinstance(channel, Bad):
                self._move(ProxyInput.UNUSABLE_HEAD, channel.reason)
            else:
                self._move(ProxyInput.PATH_HEAD, channel)
        else:
            self._refusal_reader = Refusal(head)
            self._move(ProxyInput.REFUSAL_HEAD)
        return True

    # --- the body of a path ---------------------------------------------------

    def _read_frames(self) -> bool:
        """Hand the rules the next frames already complete; false if none are, yet.

        Where the table skips a keep-alive and goes on streaming, the
        messages are taken a bounded batch at a time
        (:meth:`~..wire.framing.FrameDecoder.next_payloads`, which skips the
        keep-alives between them), one move for the batch, and what is
        decoded ahead of the caller stays small. Otherwise each frame is a
        move of its own: the short messages of bench/bench_proxy.py then
        take 1.6 times as long.
        """
        decoder = self._decoder
        assert decoder is not None
        in_batches = PROXY_TRANSITIONS.get(_KEEPALIVE) == _SKIPPED_STREAMING
        while True:
            frame: FrameOrMarker
            if in_batches:
                payloads = decoder.next_payloads(_FRAMES_PER_STEP, _BYTES_PER_STEP)
                if payloads:
                    self._move(_MESSAGE, payloads)
                    return True
                # None: an oversized frame, which next_frame() returns.
                frame = None if payloads is not None else decoder.next_frame()
            else:
                frame = decoder.next_frame()
                if type(frame) is bytes:
                    self._move(_MESSAGE, [frame])
                    return True
                if frame is KEEPALIVE:
                    self._move(ProxyInput.KEEPALIVE, [b""])
                    return True
            if isinstance(frame, FrameTooLarge):
                self._move(ProxyInput.ABRUPT_END, frame.reason)
                return True
            # The next frame needs more of the body.
            step = self._read_body()
            if step is not _FED:
                return step is _ENDED

    def _read_body(self) -> _Step:
        """Move the next piece of the body to the frame decoder, or end the path."""
        body = self._body
        decoder = self._decoder
        assert body is not None and decoder is not None
        piece = body.read()
        if type(piece) is bytes:
            decoder.feed(piece)
            return _FED
        if piece is None:
            if not self._eof:
                return _STARVED
            if self._lost is not None:
                self._move(ProxyInput.CONNECTION_LOST, self._lost)
                return _ENDED
            if not body.ends_at_eof:
                where = "" if decoder.at_boundary else f", {decoder.inside_frame()}"
                self._move(
                    ProxyInput.ABRUPT_END,
                    f"the connection closed before the answer's body ended{where}",
                )
                return _ENDED
            piece = END
        if isinstance(piece, Bad):
            self._move(ProxyInput.ABRUPT_END, piece.reason)
        elif decoder.at_boundary:
            self._move(ProxyInput.BODY_END)
        else:
            self._move(ProxyInput.ABRUPT_END, f"the answer's body ended {decoder.inside_frame()}")
        return _ENDED

    # --- a refusal ---------------------------------------------------------------

    def _read_refusal(self) -> bool:
        body = self._body
        refusal = self._refusal_reader
        assert body is not None and refusal is not None
        piece = body.read()
        if type(piece) is bytes:
            if refusal.take(piece):
                return True
            # Enough for people: the rest is not waited for.
        elif piece is None:
            if not self._eof:
                return False
            if self._lost is not None:
                self._move(ProxyInput.CONNECTION_LOST, self._lost)
                return True
            if not body.ends_at_eof:
                self._move(ProxyInput.ABRUPT_END, "the refusal's body was cut short")
                return True
        elif isinstance(piece, Bad):
            self._move(ProxyInput.ABRUPT_END, piece.reason)
            return True
        self._move(ProxyInput.REFUSAL_READ)
        return True


#: What each outcome of :data:`PROXY_TRANSITIONS` does with what its input
#: brought. The rules queue the events: :data:`ProxyOutcome.RULES_TERMINAL`
#: adds none to theirs (the rules' own terminal stands), and neither does a
#: step that is skipped (a 1xx head, a keep-alive) or that does nothing.
_ON_OUTCOME: Final[Mapping[ProxyOutcome, Handler[None]]] = {
    ProxyOutcome.NOTHING: _AskConnection._nothing,
    ProxyOutcome.SKIPPED: _AskConnection._nothing,
    ProxyOutcome.OPENED: _AskConnection._open,
    ProxyOutcome.MESSAGE: _AskConnection._to_rules,
    ProxyOutcome.FINISH: _AskConnection._finish,
    ProxyOutcome.RULES_TERMINAL: _AskConnection._nothing,
    ProxyOutcome.NOT_SERVED: _AskConnection._not_served,
    ProxyOutcome.BROKEN: _AskConnection._broken,
}


class ProxyConnection(_AskConnection[SequenceMachine]):
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

    ``profile`` picks the sequence rules. ``max_frame_size`` bounds one
    frame (a larger one ends the path, unbuffered); ``max_head_size``
    bounds each head of the answer, and each chunk-size line and the
    trailer section of a chunked body. ``target`` is the request target
    (``/requests``, or a base path's ``/base/requests``).
    A ``token`` the server could never match (see
    :func:`~..wire.http.check_token`) or a ``target`` that does not start with
    ``/`` is a :class:`ValueError`.
    """

    __slots__ = ()

    _RULES_DONE = PathState.DONE

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
        super().__init__(
            authority,
            encode_ask(Ask(exchange=Exchange.NOTIFICATIONS)),
            SequenceMachine(profile, reask=True),
            token=token,
            max_frame_size=max_frame_size,
            max_head_size=max_head_size,
            target=target,
        )

    @property
    def profile(self) -> Profile:
        """The sequence rules in force."""
        return self._rules.profile

    @property
    def messages(self) -> int:
        """How many messages (decodable or not) the path delivered so far."""
        return self._rules.messages


class ExchangeConnection(_AskConnection[AnswerMachine]):
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

    __slots__ = ("_ask",)

    _RULES_DONE = AnswerState.DONE

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
        super().__init__(
            authority,
            encode_ask(ask),
            AnswerMachine(),
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
        """Where the answer is (see :data:`~.answer.ANSWER_TRANSITIONS`)."""
        return self._rules.state
