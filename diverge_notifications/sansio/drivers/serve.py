"""The serving driver: one accepted connection of a server, with the I/O left out.

A server adapter makes a :class:`ServingConnection` for each connection it
accepts (through its :class:`ServeSettings`), then loops: it asks
:meth:`~ServingConnection.next_action` what to do (:class:`Write`,
:class:`WaitUntil`, :class:`RunHandler`, :class:`Close`: see
:mod:`.actions`), does it, and reports what happened: data received
(``b""`` at end of file), the handler's answer, the server's shutdown, the
socket's loss. Asking for the next action means the previous one is done: a
``Write`` returns once the socket took the data, so a listener that does not
read holds back its own connection and nobody else's.

The connection owns the :class:`ServerConnection`, the hub subscription,
batching (at most ``max_batch`` notifications and ``write_buffer`` bytes per
``Write``: the hub's frames, shared by every path, written as they are), the
ask's deadline, the keep-alive schedule, the exchange's answer, the end of
the path on shutdown or when its hub is suspended
(:func:`~..server.connection.path_end`), the cut-off of a stalled path, the
refusal of a connection over ``max_connections`` and what it counts and
reports (see :mod:`..server.counts`, :mod:`.reports`). Its states and what
moves it between them are one table, :data:`SERVING_TRANSITIONS`, run as
every machine of the core runs its table
(:class:`~..transitions.TableMachine`): each (state, input) pair is looked
up there and its outcome done; a pair the table lacks is the adapter's
mistake (:class:`LocalProtocolError`). ``now`` is a parameter: nothing
here reads a clock or does I/O.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any, Final, cast

import attrs

from ..errors import LocalProtocolError
from ..events import (
    NEED_DATA,
    AskRefused,
    ConnectionClosed,
    Event,
    ExchangeAsked,
    HealthAsked,
    NotificationsAsked,
)
from ..mcp.model import ErrorData
from ..server.admission import Verdict, address_of
from ..server.connection import (
    NOT_SERVED_STATUS,
    RETRY_AFTER,
    ServerConnection,
    internal_error,
    not_served_now,
    path_end,
)
from ..server.hub import Hub, HubSuspended, Subscriber
from ..transitions import Handler, TableEnum, TableMachine
from ..wire.asks import Ask
from ..wire.http import refusal_response
from .actions import Close, ExchangeResult, RunHandler, ServeAction, WaitUntil, Write
from .reports import (
    CALLER_GONE,
    AskExpiredReport,
    ExchangeReport,
    PathEnd,
    PathEndedReport,
    PathOpenedReport,
    RefusalReport,
    ServeReport,
    TlsFailedReport,
)
from .settings import ServeSettings

__all__ = [
    "DONE",
    "EVENT_INPUTS",
    "EXCHANGING",
    "SERVING_TRANSITIONS",
    "SUBSCRIBED",
    "ServingConnection",
    "ServingInput",
    "ServingOutcome",
    "ServingState",
    "event_input",
]


class ServingState(TableEnum):
    """Where a served connection is."""

    #: Reading the ask; the connection is closed if it is not complete by its deadline.
    ASKING = "asking"
    #: An exchange (kinds 0-3) waits for its handler to be run.
    EXCHANGE = "exchange"
    #: The exchange handler runs (:class:`RunHandler` was returned).
    ANSWERING = "answering"
    #: A notification path is written: batches as they come, keep-alives between.
    PATH = "path"
    #: The server closes: the path's queue and then its end go out with the next output.
    ENDING = "ending"
    #: The answer is complete: what is left to write goes out, then :class:`Close`.
    FINISHING = "finishing"
    #: :class:`Close` was returned, or the connection was lost.
    CLOSED = "closed"


class ServingInput(TableEnum):
    """What happens to a served connection: a report, or what the ask turned out to be."""

    PATH_ASKED = "data_received(), a notifications ask"
    PATH_REFUSED = "data_received(), a notifications ask while the hub is suspended"
    EXCHANGE_ASKED = "data_received(), an exchange the server answers"
    EXCHANGE_DECLINED = "data_received(), an exchange without a handler"
    ASK_REFUSED = "data_received(), a refused ask"
    HEALTH_ASKED = "data_received(), a health check"
    PEER_GONE = "data_received(), the peer closed"
    ASK_EXPIRED = "next_action(), past the ask's deadline"
    HANDLER_RUN = "next_action(), the exchange's turn"
    ANSWERED = "handler_answered() or handler_failed()"
    SHUTDOWN = "shutdown()"
    PATH_ENDS = "next_action(), the end of the path"
    PATH_CUT = "next_action(), the hub ended the path's subscription"
    CLOSING = "next_action(), nothing left to write"
    LOST = "connection_lost()"
    BUSY = "made while the server has max_connections already"
    CROWDED = "made while the peer's address holds its share of max_connections"
    STALLED = "write_stalled()"
    HANDSHAKE_FAILED = "handshake_failed()"


class ServingOutcome(TableEnum):
    """What a transition does besides changing the state."""

    NOTHING = "-"
    OPEN_PATH = "write the head (subscribed as the ask was read)"
    REFUSE = "write 'not served now' (503, Retry-After, the hub's reason)"
    ANSWER_HEALTH = "write the health answer (readyz: 503 and why while the hub is suspended)"
    TLS_FAILED = "count and report the failed TLS handshake; Close()"
    HOLD = "keep the exchange for its handler"
    DECLINE = "write 'not served'"
    FINISH = "let the path or exchange go; write what the connection has left"
    SILENCE = "nothing more to write"
    RUN_HANDLER = "RunHandler(ask)"
    ANSWER = "write the handler's answer"
    END_PATH = "write the queue, then the end (the hub's reason, if it ended the path)"
    CLOSE = "Close()"
    DROP = "unsubscribe; forget the exchange"
    REFUSE_BUSY = "write 503 with Retry-After"
    REFUSE_CROWDED = "write 503 with Retry-After, naming the address"
    EXPIRE = "count and report the ask's deadline; nothing to write"
    CUT_OFF = "unsubscribe (the queue freed); Close(abort=True)"


_ASKING, _EXCHANGE, _ANSWERING, _PATH, _ENDING, _FINISHING, _CLOSED = ServingState
_In = ServingInput
_Out = ServingOutcome

#: (state, input) -> (next state, outcome). A pair that is not here is a
#: mistake of the adapter and raises :class:`LocalProtocolError`.
SERVING_TRANSITIONS: Final[
    Mapping[tuple[ServingState, ServingInput], tuple[ServingState, ServingOutcome]]
] = {
    # The ask: one per connection, read or given up on.
    (_ASKING, _In.PATH_ASKED): (_PATH, _Out.OPEN_PATH),
    # A suspended hub (its broker is lost) takes no subscription: not served now.
    (_ASKING, _In.PATH_REFUSED): (_FINISHING, _Out.REFUSE),
    (_ASKING, _In.EXCHANGE_ASKED): (_EXCHANGE, _Out.HOLD),
    # A server with no MCP server behind it to ask declines ("not served").
    (_ASKING, _In.EXCHANGE_DECLINED): (_FINISHING, _Out.DECLINE),
    (_ASKING, _In.ASK_REFUSED): (_FINISHING, _Out.FINISH),
    # A health check needs no token and says only whether an ask would be served.
    (_ASKING, _In.HEALTH_ASKED): (_FINISHING, _Out.ANSWER_HEALTH),
    (_ASKING, _In.PEER_GONE): (_FINISHING, _Out.FINISH),
    # A peer that says nothing to answer holds a connection nobody is served by:
    # closed, counted and reported, never silently.
    (_ASKING, _In.ASK_EXPIRED): (_FINISHING, _Out.EXPIRE),
    (_ASKING, _In.SHUTDOWN): (_FINISHING, _Out.SILENCE),
    # The exchange: its handler runs once, and its answer ends the connection.
    (_EXCHANGE, _In.HANDLER_RUN): (_ANSWERING, _Out.RUN_HANDLER),
    (_EXCHANGE, _In.ANSWERED): (_FINISHING, _Out.ANSWER),
    (_ANSWERING, _In.ANSWERED): (_FINISHING, _Out.ANSWER),
    (_EXCHANGE, _In.PEER_GONE): (_FINISHING, _Out.FINISH),
    (_ANSWERING, _In.PEER_GONE): (_FINISHING, _Out.FINISH),
    # A closing server lets a running handler answer first.
    (_EXCHANGE, _In.SHUTDOWN): (_EXCHANGE, _Out.NOTHING),
    (_ANSWERING, _In.SHUTDOWN): (_ANSWERING, _Out.NOTHING),
    # The peer went away while the handler ran: nobody to answer.
    (_FINISHING, _In.ANSWERED): (_FINISHING, _Out.NOTHING),
    (_CLOSED, _In.ANSWERED): (_CLOSED, _Out.NOTHING),
    # The path: ended cleanly on shutdown, or dropped when its peer goes.
    (_PATH, _In.SHUTDOWN): (_ENDING, _Out.NOTHING),
    (_ENDING, _In.PATH_ENDS): (_FINISHING, _Out.END_PATH),
    # The hub ended the subscription (its broker is lost): the queue, then the reason.
    (_PATH, _In.PATH_CUT): (_FINISHING, _Out.END_PATH),
    (_PATH, _In.PEER_GONE): (_FINISHING, _Out.FINISH),
    (_ENDING, _In.PEER_GONE): (_FINISHING, _Out.FINISH),
    # A TLS handshake that fails (or takes past the ask's deadline) ends the
    # connection before a byte of the ask: counted and reported, with the peer.
    (_ASKING, _In.HANDSHAKE_FAILED): (_CLOSED, _Out.TLS_FAILED),
    # Beyond max_connections the ask is not even read: 503, and a clean close.
    (_ASKING, _In.BUSY): (_FINISHING, _Out.REFUSE_BUSY),
    # One address holds at most its share of max_connections: a flood from
    # one address leaves the rest for the others (see server.admission).
    (_ASKING, _In.CROWDED): (_FINISHING, _Out.REFUSE_CROWDED),
    # The end.
    (_FINISHING, _In.CLOSING): (_CLOSED, _Out.CLOSE),
    **{(state, _In.LOST): (_CLOSED, _Out.DROP) for state in ServingState},
    # A peer that takes no byte for stall_timeout while output waits is cut
    # off, whatever was being written: nothing more can be written to it.
    **{
        (state, _In.STALLED): (_CLOSED, _Out.CUT_OFF)
        for state in ServingState
        if state is not _CLOSED
    },
    # Shutting down twice, or once the answer is decided, changes nothing.
    (_ENDING, _In.SHUTDOWN): (_ENDING, _Out.NOTHING),
    (_FINISHING, _In.SHUTDOWN): (_FINISHING, _Out.NOTHING),
    (_CLOSED, _In.SHUTDOWN): (_CLOSED, _Out.NOTHING),
}

#: The input each of the server connection's events is (an exchange is one of two; a
#: notifications ask is ``PATH_REFUSED`` instead when the hub takes no subscription).
EVENT_INPUTS: Final[Mapping[type[Event], ServingInput]] = {
    NotificationsAsked: _In.PATH_ASKED,
    AskRefused: _In.ASK_REFUSED,
    HealthAsked: _In.HEALTH_ASKED,
    ConnectionClosed: _In.PEER_GONE,
}

#: The states in which nothing more is read from the peer: the answer is decided.
DONE: Final = frozenset({_FINISHING, _CLOSED})
#: The states with a hub subscription.
SUBSCRIBED: Final = frozenset({_PATH, _ENDING})
#: The states with an exchange waiting for its answer.
EXCHANGING: Final = frozenset({_EXCHANGE, _ANSWERING})


def event_input(event: Event, answers_exchanges: bool) -> ServingInput:
    """The input the server connection's ``event`` is, by :data:`EVENT_INPUTS`.

    An exchange is ``EXCHANGE_ASKED`` if the server answers exchanges, else
    ``EXCHANGE_DECLINED``. An event a server connection does not produce is
    the adapter's mistake (:class:`~..errors.LocalProtocolError`).
    """
    if type(event) is ExchangeAsked:
        return _In.EXCHANGE_ASKED if answers_exchanges else _In.EXCHANGE_DECLINED
    what = EVENT_INPUTS.get(type(event))
    if what is None:
        raise LocalProtocolError(f"a server connection does not produce {event!r}")
    return what


_CLOSE: Final = Close()
_ABORT: Final = Close(abort=True)
_ASKING, _EXCHANGE, _ANSWERING, _PATH, _ENDING, _FINISHING, _CLOSED = ServingState


@attrs.frozen
class _Failure:
    """What :meth:`ServingConnection.handler_failed` passes on: why the handler failed."""

    reason: str


# --- the connection --------------------------------------------------------------------------


class ServingConnection(TableMachine[ServingState, ServingInput]):
    """One accepted connection of a serving adapter, without the I/O.

    Made when the adapter accepts the connection, at ``now``: the peer has
    ``ask_timeout`` seconds from then to complete its ask; one that has not
    (it sends nothing, or sends it slowly) holds a connection nobody is
    served by, and is closed without an answer. The adapter drives it with
    :meth:`next_action` and the reports (see the module's documentation).

    ``wake`` (the hub subscriber's ``on_ready``, called from ``hub.publish``
    under ``hub_lock`` if one is given) ends the adapter's :class:`WaitUntil`.
    ``hub_lock`` serialises every call into the hub and into ``totals`` (the
    blocking adapter's threads). :meth:`receive`, :meth:`take_output`,
    :meth:`keepalive` and :meth:`check_ask_deadline` are the steps
    :meth:`next_action` takes.

    ``settings`` (a :class:`~.settings.ServeSettings`, shared by every
    connection of one server; the defaults when omitted) holds the limits,
    the tokens and profile, the channel ids and the totals it counts into
    (:class:`~..server.counts.ServingTotals`). A connection made while
    ``max_connections`` are served already is *busy*: it answers 503 with
    ``Retry-After`` without reading the ask (so is one whose address holds
    its share of them, ``address_share``: see :mod:`..server.admission`),
    as does a notification ask to a suspended hub (its reason the body); a
    path the hub ends writes its queue, then that reason. After a refusal the final :class:`Close`
    lingers ``linger`` seconds. After the ask, at most ``max_discard`` bytes
    more are read (and discarded). ``report`` is called with a
    :mod:`.reports` record, naming ``peer``, whenever an ask is refused, a
    path opens or ends, or an exchange is answered.
    """

    # Slots: a busy path's every turn reads a dozen of these, and past 30
    # attributes an instance's dict no longer shares its keys, which makes
    # each read slower (bench/bench_floor.py, section 3, one at a time).
    __slots__ = (
        "_address",
        "_admission",
        "_answers_exchanges",
        "_ask_deadline",
        "_ask_timeout",
        "_connection",
        "_counted",
        "_discarded",
        "_eof",
        "_exchange",
        "_final",
        "_hub",
        "_hub_lock",
        "_interest",
        "_keepalive_interval",
        "_last_output",
        "_linger",
        "_lock",
        "_max_batch",
        "_max_discard",
        "_now",
        "_outbox",
        "_peer",
        "_queue_bytes",
        "_queue_size",
        "_report",
        "_stall_timeout",
        "_state",
        "_subscriber",
        "_suspended_reason",
        "_totals",
        "_wake",
        "_write_buffer",
        "_wrote",
    )

    def __init__(
        self,
        hub: Hub,
        settings: ServeSettings[Any] | None = None,
        *,
        wake: Callable[[], None],
        now: float,
        peer: str = "",
        report: Callable[[ServeReport], None] | None = None,
        hub_lock: contextlib.AbstractContextManager[Any] | None = None,
    ) -> None:
        if settings is None:
            settings = ServeSettings()
        keepalive_interval = settings.keepalive_interval
        totals = settings.totals
        self._hub = hub
        self._wake = wake
        self._keepalive_interval = keepalive_interval
        self._ask_timeout = settings.ask_timeout
        self._ask_deadline = now + settings.ask_timeout
        self._connection = ServerConnection(
            tokens=settings.accepted or None,
            profile=settings.profile,
            channel_ids=settings.channel_ids,
        )
        self._answers_exchanges = settings.exchange_handler is not None
        self._queue_size = settings.queue_size
        self._queue_bytes = settings.queue_bytes
        self._interest = settings.interest
        # Copied once: the path's every turn reads them.
        self._max_batch = settings.max_batch
        self._write_buffer = settings.write_buffer
        self._stall_timeout = settings.stall_timeout
        self._linger = settings.linger
        self._max_discard = settings.max_discard
        self._peer = peer
        self._totals = totals
        self._report = report if report is not None else lambda _report: None
        self._hub_lock = hub_lock
        self._lock = hub_lock if hub_lock is not None else contextlib.nullcontext()
        self._admission = settings.admission
        self._address = address_of(peer)
        self._state = ServingState.ASKING
        #: When the move being made happens (the time the report that made it carried).
        self._now = now
        self._subscriber: Subscriber | None = None
        self._outbox = bytearray()
        self._exchange: Ask | None = None
        self._last_output = 0.0
        self._eof = False
        #: The last action was a Write of the path.
        self._wrote = False
        #: Bytes received after the ask.
        self._discarded = 0
        #: What the final next_action returns: a plain close, a lingering or an abrupt one.
        self._final = _CLOSE
        self._suspended_reason = ""  # why the hub took no subscription
        with self._lock:
            verdict = self._admission.admit(self._address)
            if verdict is Verdict.ADMITTED:
                self._totals.connections += 1
        #: Counted in totals.connections (and by admission) until the connection closes.
        self._counted = verdict is Verdict.ADMITTED
        if verdict is Verdict.BUSY:
            self._step(_In.BUSY, now)
        elif verdict is Verdict.CROWDED:
            self._step(_In.CROWDED, now)

    # -- what the adapter reads -------------------------------------------------

    @property
    def state(self) -> ServingState:
        """Where the connection is (see :data:`SERVING_TRANSITIONS`)."""
        return self._state

    @property
    def connection(self) -> ServerConnection:
        """The sans-IO connection."""
        return self._connection

    @property
    def path_open(self) -> bool:
        """Whether a notification path is being written."""
        return self._state in SUBSCRIBED

    @property
    def exchange(self) -> Ask | None:
        """The exchange (kinds 0-3) waiting for its handler's answer, if any."""
        return self._exchange if self._state in EXCHANGING else None

    @property
    def done(self) -> bool:
        """The answer is decided: nothing more is read, and the connection closes."""
        return self._state in DONE

    @property
    def wants_read(self) -> bool:
        """Whether to read: not after end of file, nor past ``max_discard`` after the ask."""
        return not self._eof and self._state not in DONE and self._discarded <= self._max_discard

    @property
    def ask_deadline(self) -> float | None:
        """When the connection is closed unless its ask is complete; ``None`` once it is."""
        return self._ask_deadline if self._state is _ASKING else None

    # -- the action loop --------------------------------------------------------

    def next_action(self, now: float) -> ServeAction:
        """What the adapter does next, at ``now`` (its monotonic clock, in seconds)."""
        state = self._state
        if state is _PATH and self._wrote:
            # A batch went out; with more queued, let the others run first.
            self._wrote = False
            with self._lock:
                more = len(self._subscriber or ())
            if more:
                return WaitUntil(deadline=now, wants_read=self.wants_read)
        elif state is _ASKING:
            self.check_ask_deadline(now)
        elif state is _CLOSED:
            return self._final
        out = self.take_output(now)
        if not out and self._state is _PATH:
            out = self.keepalive(now)
        if out:
            self._wrote = state is _PATH
            return Write(data=out)
        state = self._state
        if state is _PATH:
            due = self._last_output + self._keepalive_interval
            return WaitUntil(deadline=due, wants_read=self.wants_read)
        if state is _ASKING:
            return WaitUntil(deadline=self._ask_deadline, wants_read=not self._eof)
        if state is _EXCHANGE:
            action: ServeAction = self._step(_In.HANDLER_RUN, now)
            return action
        if state is _FINISHING:
            action = self._step(_In.CLOSING, now)
            return action
        # ANSWERING: the handler's answer is awaited.
        return WaitUntil(deadline=None, wants_read=self.wants_read)

    def data_received(self, now: float, data: bytes) -> None:
        """Bytes read from the peer at ``now``; ``b""`` is the end of file."""
        self.receive(data, now)

    def handler_answered(self, result: ExchangeResult) -> None:
        """The exchange handler returned ``result`` (not a JSON object: an internal error)."""
        self._step(_In.ANSWERED, value=result)

    def handler_failed(self, reason: str) -> None:
        """The handler raised or ran too long: answer an internal error saying ``reason``."""
        self._step(_In.ANSWERED, value=_Failure(reason))

    def shutdown(self) -> None:
        """The server is closing: the path's queue, then its end, go out with the next output.

        (In the container profile, where no finish may follow notifications,
        the connection just closes.) A connection still reading its ask
        closes without an answer; one answering an exchange answers first.
        """
        self._step(_In.SHUTDOWN)

    def handshake_failed(self, now: float, reason: str) -> None:
        """The connection's TLS handshake failed (``reason`` says how): the next action is Close.

        Only before the ask; counted in ``tls_failures`` and reported.
        """
        self._step(_In.HANDSHAKE_FAILED, now, reason)

    def connection_lost(self) -> None:
        """The socket is gone: drop the subscription; the next action is :class:`Close`."""
        self._step(_In.LOST)

    def write_stalled(self, now: float) -> None:
        """The peer took no byte of a ``Write`` for ``stall_timeout`` seconds: cut it off.

        The subscription is dropped (what is queued is freed, and counted as
        dropped), the path is counted as stalled, and the next action is
        ``Close(abort=True)``: nothing more can be written to it.
        """
        self._step(_In.STALLED, now)

    # -- the steps ----------------------------------------------------------------

    def receive(self, data: bytes, now: float) -> None:
        """Bytes read from the peer; ``b""`` is the end of file."""
        if self._state in DONE:
            return  # the answer is written or being written: the rest is noise
        if not data:
            self._eof = True
        elif self._state is not _ASKING:
            # After the ask nothing the peer sends matters but its end;
            # max_discard bounds what reading for that end may cost.
            self._discarded += len(data)
        connection = self._connection
        connection.receive_data(data)
        while self._state not in DONE:
            event = connection.next_event()
            if event is NEED_DATA:
                break
            self._step(self._event_input(event), now, event)
        if self._state not in DONE:
            self._outbox += connection.data_to_send()

    def take_output(self, now: float) -> bytes:
        """Everything there is to write now (``b""`` if nothing): at most one batch of the path.

        A batch is at most ``max_batch`` notifications and ``write_buffer``
        bytes of frames (a larger frame goes alone), as the hub built them.
        """
        subscriber = self._subscriber
        data = b""
        if subscriber is not None and self._state is not _ENDING and subscriber._end_reason is None:
            # A busy path's every turn, where each call counts (bench/bench_floor.py,
            # section 3, one notification at a time): the end is read off the
            # subscriber's slot rather than through its property, and without a
            # hub lock no (no-op) context is entered for the take. The take
            # marks the path as moving (see Hub.room_for): the last Write was taken.
            hub_lock = self._hub_lock
            if hub_lock is None:
                frames = subscriber.take_frames(self._max_batch, self._write_buffer, now)
            else:
                with hub_lock:
                    frames = subscriber.take_frames(self._max_batch, self._write_buffer, now)
            if frames:
                data = self._connection.send_frames(frames)
                if not self._outbox:
                    self._last_output = now
                    return data
        elif self._state is _ENDING:
            self._step(_In.PATH_ENDS, now)
        elif subscriber is not None:
            self._step(_In.PATH_CUT, now)  # the hub ended it: what it queued, then why
        if self._outbox:
            self._outbox += data
            data = bytes(self._outbox)
            self._outbox.clear()
        if data:
            self._last_output = now
        return data

    def check_ask_deadline(self, now: float) -> None:
        """Past :attr:`ask_deadline` at ``now``, the connection is :attr:`done`, silently."""
        if self._state is _ASKING and now >= self._ask_deadline:
            self._step(_In.ASK_EXPIRED, now)

    def keepalive(self, now: float) -> bytes:
        """A keep-alive frame if one is due at ``now``, else ``b""``."""
        if self._subscriber is None or now < self._last_output + self._keepalive_interval:
            return b""
        self._last_output = now
        return self._connection.send_keepalive()

    # -- internals ----------------------------------------------------------------

    def _event_input(self, event: Event) -> ServingInput:
        """Which input the connection's ``event`` is (a notification ask: once subscribed)."""
        what = event_input(event, self._answers_exchanges)
        return self._subscribe() if what is _In.PATH_ASKED else what

    def _step(self, what: ServingInput, now: float | None = None, value: object = None) -> Any:
        """Make the move the table gives ``what`` (happening at ``now``, if it carries a time)."""
        if now is not None:
            self._now = now
        return self._fire(SERVING_TRANSITIONS, _HANDLERS, what, value)

    def _refusal(self, what: ServingInput) -> str:
        return f"{what.value} is not allowed in state {self._state.name}"

    def _nothing(self, value: object) -> None:
        pass

    def _subscribe(self) -> ServingInput:
        """A notification ask: subscribed (a path), or refused by a suspended hub."""
        with self._lock:
            try:
                self._subscriber = self._hub.subscribe(
                    self._interest,
                    queue_size=self._queue_size,
                    queue_bytes=self._queue_bytes,
                    on_ready=self._wake,
                    audience=self._connection.audience,
                )
            except HubSuspended as suspended:
                self._suspended_reason = suspended.reason
                return _In.PATH_REFUSED
        return _In.PATH_ASKED

    def _open_path(self, value: object) -> None:
        subscriber = self._subscriber
        assert subscriber is not None
        with self._lock:
            self._totals.path_opened(subscriber)
            subscriber.moved(self._now)
        self._outbox += self._connection.start_path()
        self._last_output = self._now
        self._report(
            PathOpenedReport(
                peer=self._peer, channel=self._channel(), audience=self._connection.audience
            )
        )

    def _hold(self, value: object) -> None:
        assert isinstance(value, ExchangeAsked)
        self._exchange = value.ask

    def _decline(self, value: object) -> None:
        self._outbox += self._connection.decline()
        self._answered("declined")

    def _finish(self, value: object) -> None:
        # The peer went away (a path or an exchange has nobody to answer any
        # more), or the ask was refused: the connection says what is left.
        self._unsubscribe(PathEnd.PEER_CLOSED)
        self._abandon()
        self._outbox += self._connection.data_to_send()
        if isinstance(value, AskRefused):
            self._refused(value.status, value.reason)

    def _abandon(self) -> None:
        """The peer went away before its exchange's answer: nobody is answered; counted."""
        if self._exchange is None:
            return
        self._exchange = None
        with self._lock:
            self._totals.abandoned += 1
        self._answered(CALLER_GONE, counted=False)

    def _answer_health(self, value: object) -> None:
        assert isinstance(value, HealthAsked)
        problem = None
        if value.check == "readyz":
            with self._lock:
                problem = self._hub.suspended
        self._outbox += self._connection.answer_health(problem)

    def _tls_failed(self, value: object) -> None:
        with self._lock:
            self._totals.tls_failures += 1
        self._report(TlsFailedReport(peer=self._peer, reason=str(value)))
        self._release()

    def _refuse_busy(self, value: object) -> None:
        reason = "the server is serving as many connections as it may; try again later"
        self._outbox += refusal_response(503, reason, extra=[("Retry-After", str(RETRY_AFTER))])
        self._refused(503, reason)

    def _expire(self, value: object) -> None:
        with self._lock:
            self._totals.expired += 1
        self._report(AskExpiredReport(peer=self._peer, ask_timeout=self._ask_timeout))

    def _refuse_crowded(self, value: object) -> None:
        reason = (
            f"{self._address} holds {self._admission.per_address} connections, its share of "
            f"the {self._admission.max_connections} served at once; try again later"
        )
        self._outbox += refusal_response(503, reason, extra=[("Retry-After", str(RETRY_AFTER))])
        with self._lock:
            self._totals.crowded += 1
        self._refused(503, reason)

    def _refuse_suspended(self, value: object) -> None:
        self._outbox += not_served_now(self._connection, self._suspended_reason)
        with self._lock:
            self._totals.suspended_asks += 1
        self._refused(NOT_SERVED_STATUS, self._suspended_reason)

    def _refused(self, status: int, reason: str) -> None:
        with self._lock:
            self._totals.refused(status)
        # The peer may still be sending (the rest of a large ask): closing now
        # would reset the connection and lose the answer it was sent.
        self._final = Close(linger=self._linger)
        self._report(RefusalReport(peer=self._peer, status=status, reason=reason))

    def _run_handler(self, value: object) -> RunHandler:
        assert self._exchange is not None
        return RunHandler(ask=self._exchange)

    def _answer(self, value: object) -> None:
        self._exchange = None
        connection = self._connection
        if value is None:
            self._outbox += connection.decline()
            self._answered("declined")
        elif isinstance(value, ErrorData):
            self._outbox += connection.answer_error(value)
            self._answered("error")
        elif isinstance(value, _Failure):
            self._outbox += connection.answer_error(internal_error(value.reason))
            with self._lock:
                self._totals.handler_failures += 1
            self._answered(f"internal error: {value.reason}")
        else:
            try:
                answer = connection.answer(cast("Mapping[str, Any] | bytes", value))
                outcome = "result"
            except (LocalProtocolError, TypeError) as error:
                # The connection refused the result and changed nothing.
                answer = connection.answer_error(internal_error(f"invalid result: {error}"))
                outcome = f"internal error: invalid result: {error}"
            self._outbox += answer
            self._answered(outcome)

    def _answered(self, outcome: str, *, counted: bool = True) -> None:
        if counted:
            with self._lock:
                self._totals.exchanges_answered += 1
        ask = self._connection.ask
        exchange = ask.exchange.name.lower() if ask is not None else "exchange"
        self._report(
            ExchangeReport(
                peer=self._peer,
                channel=self._channel(),
                exchange=exchange,
                outcome=outcome,
                audience=self._connection.audience,
            )
        )

    def _end_path(self, value: object) -> None:
        subscriber = self._subscriber
        assert subscriber is not None
        connection = self._connection
        # Whatever is queued goes out before the clean end, in batches as always.
        with self._lock:
            batch = subscriber.take_frames(self._max_batch, self._write_buffer)
            rest = subscriber.take_frames()
            # Set when the hub ended the subscription: then the path ends with why.
            reason = subscriber.end_reason
            if reason is not None:
                self._totals.suspended_paths += 1
        if batch:
            self._outbox += connection.send_frames(batch)
        if rest:
            self._outbox += connection.send_frames(rest)
        self._unsubscribe(PathEnd.CLEAN if reason is None else PathEnd.SUSPENDED, reason)
        # The container profile allows no end after notifications: there the
        # path ends with the connection.
        self._outbox += path_end(connection, reason)

    def _close(self, value: object) -> Close:
        self._release()
        return self._final

    def _drop(self, value: object) -> None:
        self._unsubscribe(PathEnd.LOST)
        self._abandon()
        self._release()

    def _cut_off(self, value: object) -> None:
        if self._subscriber is not None:
            with self._lock:
                self._totals.stalled += 1
        self._unsubscribe(PathEnd.STALLED)
        self._exchange = None
        self._outbox.clear()
        self._final = _ABORT
        self._release()

    def _release(self) -> None:
        """The connection stops counting as one being served (once)."""
        if self._counted:
            self._counted = False
            with self._lock:
                self._totals.connections -= 1
                self._admission.release(self._address)

    def _unsubscribe(self, how: PathEnd, reason: str | None = None) -> None:
        subscriber = self._subscriber
        if subscriber is None:
            return
        self._subscriber = None
        with self._lock:
            freed = subscriber.close()
            self._totals.path_ended(subscriber, how.name.lower())
        self._report(
            PathEndedReport(
                peer=self._peer,
                channel=self._channel(),
                how=how,
                sent=subscriber.sent,
                dropped=subscriber.dropped,
                freed=freed,
                stall_timeout=self._stall_timeout if how is PathEnd.STALLED else None,
                reason=reason,
                audience=self._connection.audience,
            )
        )

    def _channel(self) -> str:
        return self._connection.channel or ""


#: What each outcome of the table does (:meth:`ServingConnection._step`).
_HANDLERS: Final[Mapping[ServingOutcome, Handler[Any]]] = {
    _Out.NOTHING: ServingConnection._nothing,
    _Out.OPEN_PATH: ServingConnection._open_path,
    _Out.HOLD: ServingConnection._hold,
    _Out.DECLINE: ServingConnection._decline,
    _Out.REFUSE: ServingConnection._refuse_suspended,
    _Out.ANSWER_HEALTH: ServingConnection._answer_health,
    _Out.TLS_FAILED: ServingConnection._tls_failed,
    _Out.FINISH: ServingConnection._finish,
    _Out.SILENCE: ServingConnection._nothing,
    _Out.RUN_HANDLER: ServingConnection._run_handler,
    _Out.ANSWER: ServingConnection._answer,
    _Out.END_PATH: ServingConnection._end_path,
    _Out.CLOSE: ServingConnection._close,
    _Out.DROP: ServingConnection._drop,
    _Out.REFUSE_BUSY: ServingConnection._refuse_busy,
    _Out.REFUSE_CROWDED: ServingConnection._refuse_crowded,
    _Out.EXPIRE: ServingConnection._expire,
    _Out.CUT_OFF: ServingConnection._cut_off,
}
