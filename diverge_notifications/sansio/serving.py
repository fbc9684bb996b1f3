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
batching (at most ``max_batch`` notifications per HTTP chunk), the ask's
deadline, the keep-alive schedule, the exchange's answer and the end of the
path on shutdown, or when its hub is suspended (:mod:`.suspension`). Its
states and what moves it between them are one table,
:data:`SERVING_TRANSITIONS` (in :mod:`.serving_states`): each (state, input)
pair is looked up there and its outcome done; a pair the table lacks is the
adapter's mistake (:class:`LocalProtocolError`). ``now`` is a parameter:
nothing here reads a clock or does I/O.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any, Final, Generic, TypeVar, cast

import attrs

from ._errors import LocalProtocolError
from .actions import (
    Close,
    ExchangeHandler,
    ExchangeResult,
    RunHandler,
    ServeAction,
    WaitUntil,
    Write,
)
from .asks import Ask
from .events import (
    NEED_DATA,
    AskRefused,
    ConnectionClosed,
    Event,
    ExchangeAsked,
    NotificationsAsked,
)
from .http import ChannelIds
from .hub import Hub, HubSuspended, Subscriber
from .mcp import ErrorCode, ErrorData
from .sequence import Profile
from .server import ServerConnection
from .serving_states import SERVING_TRANSITIONS, ServingInput, ServingOutcome, ServingState
from .suspension import SuspensionCounts, not_served_now, path_end

__all__ = [
    "DEFAULT_ASK_TIMEOUT",
    "DEFAULT_CLOSE_TIMEOUT",
    "DEFAULT_KEEPALIVE_INTERVAL",
    "DEFAULT_MAX_BATCH",
    "SERVING_TRANSITIONS",
    "ServeSettings",
    "ServingConnection",
    "ServingInput",
    "ServingOutcome",
    "ServingState",
]

#: Seconds without output after which a server writes a keep-alive frame.
DEFAULT_KEEPALIVE_INTERVAL: Final = 15.0
#: Notifications a server writes per HTTP chunk at most.
DEFAULT_MAX_BATCH: Final = 1024
#: Seconds a closing server waits for its listeners to take the end of their paths.
DEFAULT_CLOSE_TIMEOUT: Final = 5.0
#: Seconds a server gives a new connection to complete its ask before closing it.
DEFAULT_ASK_TIMEOUT: Final = 10.0


def check_positive(name: str, value: float) -> None:
    """Raise :class:`ValueError` unless ``value`` is a positive number (NaN is not)."""
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")


_CLOSE: Final = Close()

_ASKING, _EXCHANGE, _ANSWERING, _PATH, _ENDING, _FINISHING, _CLOSED = ServingState
_In = ServingInput
_Out = ServingOutcome

#: The input each of the server connection's events is (an exchange is one of two).
_EVENT_INPUTS: Final[Mapping[type[Event], ServingInput]] = {
    AskRefused: _In.ASK_REFUSED,
    ConnectionClosed: _In.PEER_GONE,
}
#: The states in which nothing more is read from the peer: the answer is decided.
_DONE: Final = frozenset({_FINISHING, _CLOSED})
#: The states with a hub subscription.
_SUBSCRIBED: Final = frozenset({_PATH, _ENDING})
#: The states with an exchange waiting for its answer.
_EXCHANGING: Final = frozenset({_EXCHANGE, _ANSWERING})


@attrs.frozen
class _Failure:
    """What :meth:`ServingConnection.handler_failed` passes on: why the handler failed."""

    reason: str


def _internal_error(message: str) -> ErrorData:
    return ErrorData(code=int(ErrorCode.INTERNAL_ERROR), message=message)


# --- the connection --------------------------------------------------------------------------


class ServingConnection:
    """One accepted connection of a serving adapter, without the I/O.

    Made when the adapter accepts the connection, at ``now``: the peer has
    ``ask_timeout`` seconds from then to complete its ask; one that has not
    (it sends nothing, or sends it slowly) holds a connection nobody is
    served by, and is closed without an answer. The adapter drives it with
    :meth:`next_action` and the reports (see the module's documentation).

    ``wake`` (the hub subscriber's ``on_ready``, called from ``hub.publish``
    under ``hub_lock`` if one is given) ends the adapter's :class:`WaitUntil`.
    ``hub_lock`` serialises every call into the hub (the blocking adapter's
    threads). ``suspension`` counts what a suspended hub made it do (the
    server's, shared by its connections). :meth:`receive`, :meth:`take_output`,
    :meth:`keepalive` and :meth:`check_ask_deadline` are the steps
    :meth:`next_action` takes.
    """

    def __init__(
        self,
        hub: Hub,
        *,
        wake: Callable[[], None],
        now: float,
        ask_timeout: float = DEFAULT_ASK_TIMEOUT,
        keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL,
        token: str | None = None,
        profile: Profile = Profile.PROVIDER,
        channel_ids: ChannelIds | None = None,
        answers_exchanges: bool = False,
        queue_size: int | None = None,
        max_batch: int = DEFAULT_MAX_BATCH,
        hub_lock: contextlib.AbstractContextManager[Any] | None = None,
        suspension: SuspensionCounts | None = None,
    ) -> None:
        check_positive("ask_timeout", ask_timeout)
        self._hub = hub
        self._wake = wake
        self._keepalive_interval = keepalive_interval
        self._ask_deadline = now + ask_timeout
        self._connection = ServerConnection(token=token, profile=profile, channel_ids=channel_ids)
        self._answers_exchanges = answers_exchanges
        self._queue_size = queue_size
        self._max_batch = max_batch
        self._lock: contextlib.AbstractContextManager[Any] = (
            hub_lock if hub_lock is not None else contextlib.nullcontext()
        )
        self._state = ServingState.ASKING
        self._subscriber: Subscriber | None = None
        self._outbox = bytearray()
        self._exchange: Ask | None = None
        self._last_output = 0.0
        self._eof = False
        #: The last action was a Write of the path.
        self._wrote = False
        self._suspension = suspension if suspension is not None else SuspensionCounts()
        #: Why the hub took no subscription (a suspended hub's reason).
        self._refusal = ""

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
        return self._state in _SUBSCRIBED

    @property
    def exchange(self) -> Ask | None:
        """The exchange (kinds 0-3) waiting for its handler's answer, if any."""
        return self._exchange if self._state in _EXCHANGING else None

    @property
    def done(self) -> bool:
        """The answer is decided: nothing more is read, and the connection closes."""
        return self._state in _DONE

    @property
    def wants_read(self) -> bool:
        """Whether the peer may still say something that matters (not after end of file)."""
        return not self._eof and self._state not in _DONE

    @property
    def ask_deadline(self) -> float | None:
        """When the connection is closed unless its ask is complete; ``None`` once it is."""
        return self._ask_deadline if self._state is _ASKING else None

    # -- the action loop --------------------------------------------------------

    def next_action(self, now: float) -> ServeAction:
        """What the adapter does next, at ``now`` (its monotonic clock, in seconds)."""
        state = self._state
        if state is _PATH:  # the busy case first: one batch, or a keep-alive when due
            if self._wrote:  # a batch went out; with more queued, let the others run first
                self._wrote = False
                with self._lock:
                    more = len(self._subscriber or ())
                if more:
                    return WaitUntil(deadline=now, wants_read=not self._eof)
            out = self.take_output(now) or self.keepalive(now)
            if out:
                self._wrote = True
                return Write(data=out)
            if self._state is _PATH:  # else the path ended with nothing to write: close
                return WaitUntil(
                    deadline=self._last_output + self._keepalive_interval,
                    wants_read=not self._eof,
                )
        if state is _ASKING:
            self.check_ask_deadline(now)
            if self._state is _ASKING:
                out = self.take_output(now)
                if out:
                    return Write(data=out)
                return WaitUntil(deadline=self._ask_deadline, wants_read=not self._eof)
        elif state is _CLOSED:
            return _CLOSE
        # EXCHANGE, ANSWERING, ENDING, FINISHING, and ASKING past its deadline.
        out = self.take_output(now)
        if out:
            return Write(data=out)
        state = self._state
        if state is _EXCHANGE:
            action: ServeAction = self._step(_In.HANDLER_RUN, now)
            return action
        if state is _FINISHING:
            action = self._step(_In.CLOSING, now)
            return action
        return WaitUntil(deadline=None, wants_read=not self._eof)

    def data_received(self, now: float, data: bytes) -> None:
        """Bytes read from the peer at ``now``; ``b""`` is the end of file."""
        self.receive(data, now)

    def handler_answered(self, result: ExchangeResult) -> None:
        """The exchange handler returned ``result`` (not a JSON object: an internal error)."""
        self._step(_In.ANSWERED, value=result)

    def handler_failed(self, reason: str) -> None:
        """The exchange handler raised: answer an internal error saying ``reason``."""
        self._step(_In.ANSWERED, value=_Failure(reason))

    def shutdown(self) -> None:
        """The server is closing: the path's queue, then its end, go out with the next output.

        (In the container profile, where no finish may follow notifications,
        the connection just closes.) A connection still reading its ask
        closes without an answer; one answering an exchange answers first.
        """
        self._step(_In.SHUTDOWN)

    def connection_lost(self) -> None:
        """The socket is gone: drop the subscription; the next action is :class:`Close`."""
        self._step(_In.LOST)

    # -- the steps ----------------------------------------------------------------

    def receive(self, data: bytes, now: float) -> None:
        """Bytes read from the peer; ``b""`` is the end of file."""
        if self._state in _DONE:
            return  # the answer is written or being written: the rest is noise
        if not data:
            self._eof = True
        connection = self._connection
        connection.receive_data(data)
        while self._state not in _DONE:
            event = connection.next_event()
            if event is NEED_DATA:
                break
            self._step(self._event_input(event), now, event)
        if self._state not in _DONE:
            self._outbox += connection.data_to_send()

    def take_output(self, now: float) -> bytes:
        """Everything there is to write now (``b""`` if nothing): at most one batch of the path."""
        if self._state is _ENDING:
            self._step(_In.PATH_ENDS, now)
        elif self._subscriber is not None and self._subscriber.end_reason is not None:
            self._step(_In.PATH_CUT, now)  # the hub ended it: what it queued, then why
        else:
            subscriber = self._subscriber
            if subscriber is not None:
                with self._lock:
                    batch = subscriber.take(self._max_batch)
                if batch:
                    data = self._connection.send_notifications(batch)
                    if not self._outbox:
                        self._last_output = now
                        return data
                    self._outbox += data
        if not self._outbox:
            return b""
        out = bytes(self._outbox)
        self._outbox.clear()
        self._last_output = now
        return out

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
        """Which input the connection's ``event`` is."""
        if type(event) is ExchangeAsked:
            return _In.EXCHANGE_ASKED if self._answers_exchanges else _In.EXCHANGE_DECLINED
        if type(event) is NotificationsAsked:
            return self._subscribe()
        what = _EVENT_INPUTS.get(type(event))
        if what is None:
            raise LocalProtocolError(f"a server connection does not produce {event!r}")
        return what

    def _step(self, what: ServingInput, now: float = 0.0, value: object = None) -> Any:
        try:
            state, outcome = SERVING_TRANSITIONS[(self._state, what)]
        except KeyError:
            raise LocalProtocolError(
                f"{what.value} is not allowed in state {self._state.name}"
            ) from None
        self._state = state
        return _HANDLERS[outcome](self, now, value)

    def _nothing(self, now: float, value: object) -> None:
        pass

    def _subscribe(self) -> ServingInput:
        """A notification ask: subscribed (a path), or refused by a suspended hub."""
        with self._lock:
            try:
                self._subscriber = self._hub.subscribe(
                    queue_size=self._queue_size, on_ready=self._wake
                )
            except HubSuspended as suspended:
                self._refusal = suspended.reason
                self._suspension.count("refused", suspended.reason)
                return _In.PATH_REFUSED
        return _In.PATH_ASKED

    def _open_path(self, now: float, value: object) -> None:
        self._outbox += self._connection.start_path()
        self._last_output = now

    def _hold(self, now: float, value: object) -> None:
        assert isinstance(value, ExchangeAsked)
        self._exchange = value.ask

    def _decline(self, now: float, value: object) -> None:
        self._outbox += self._connection.decline()

    def _refuse(self, now: float, value: object) -> None:
        self._outbox += not_served_now(self._connection, self._refusal)

    def _finish(self, now: float, value: object) -> None:
        # The peer went away (a path or an exchange has nobody to answer any
        # more), or the ask was refused: the connection says what is left.
        self._drop(now, value)
        self._outbox += self._connection.data_to_send()

    def _run_handler(self, now: float, value: object) -> RunHandler:
        assert self._exchange is not None
        return RunHandler(ask=self._exchange)

    def _answer(self, now: float, value: object) -> None:
        self._exchange = None
        connection = self._connection
        if value is None:
            self._outbox += connection.decline()
        elif isinstance(value, ErrorData):
            self._outbox += connection.answer_error(value)
        elif isinstance(value, _Failure):
            self._outbox += connection.answer_error(_internal_error(value.reason))
        else:
            try:
                answer = connection.answer(cast("Mapping[str, Any] | bytes", value))
            except (LocalProtocolError, TypeError) as error:
                # The connection refused the result and changed nothing.
                answer = connection.answer_error(_internal_error(f"invalid result: {error}"))
            self._outbox += answer

    def _end_path(self, now: float, value: object) -> None:
        subscriber = self._subscriber
        assert subscriber is not None
        connection = self._connection
        # Whatever is queued goes out before the clean end, in batches as always.
        with self._lock:
            batch = subscriber.take(self._max_batch)
            rest = subscriber.take()
            # Set when the hub ended the subscription: then the path ends with why.
            reason = subscriber.end_reason
            if reason is not None:
                self._suspension.count("ended", reason)
        if batch:
            self._outbox += connection.send_notifications(batch)
        if rest:
            self._outbox += connection.send_notifications(rest)
        self._unsubscribe()
        # The container profile allows no end after notifications: there
        # the path ends with the connection.
        self._outbox += path_end(connection, reason)

    def _close(self, now: float, value: object) -> Close:
        return _CLOSE

    def _drop(self, now: float, value: object) -> None:
        self._unsubscribe()
        self._exchange = None

    def _unsubscribe(self) -> None:
        subscriber = self._subscriber
        if subscriber is not None:
            self._subscriber = None
            with self._lock:
                subscriber.close()


_HANDLERS: Final[Mapping[ServingOutcome, Callable[[ServingConnection, float, object], Any]]] = {
    _Out.NOTHING: ServingConnection._nothing,
    _Out.OPEN_PATH: ServingConnection._open_path,
    _Out.HOLD: ServingConnection._hold,
    _Out.DECLINE: ServingConnection._decline,
    _Out.REFUSE: ServingConnection._refuse,
    _Out.FINISH: ServingConnection._finish,
    _Out.SILENCE: ServingConnection._nothing,
    _Out.RUN_HANDLER: ServingConnection._run_handler,
    _Out.ANSWER: ServingConnection._answer,
    _Out.END_PATH: ServingConnection._end_path,
    _Out.CLOSE: ServingConnection._close,
    _Out.DROP: ServingConnection._drop,
}


# --- the settings ----------------------------------------------------------------------------


def _check_positive(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    check_positive(attribute.name, value)


def _check_token(_instance: object, _attribute: attrs.Attribute[Any], token: str | None) -> None:
    # The very check each connection's ServerConnection makes, made once here
    # (ValueError), not by every connection later.
    ServerConnection(token=token)


#: Any :data:`ExchangeHandler` (async adapters), or one returning its answer (blocking).
_Handler = TypeVar("_Handler", bound=ExchangeHandler)


@attrs.frozen(kw_only=True)
class ServeSettings(Generic[_Handler]):
    """The options of a serving adapter's ``Server`` (the defaults of ``serve()``), checked once.

    A ``token`` the :class:`ServerConnection` refuses (it is one or more
    visible ASCII characters), or a timeout, interval or size that is not
    positive, is a :class:`ValueError` here. :meth:`serving_connection` makes
    each accepted connection's driver; ``channel_ids`` mints all their channels.
    """

    token: str | None = attrs.field(default=None, validator=_check_token)
    keepalive_interval: float = attrs.field(
        default=DEFAULT_KEEPALIVE_INTERVAL, validator=_check_positive
    )
    profile: Profile = Profile.PROVIDER
    exchange_handler: _Handler | None = None
    queue_size: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(_check_positive)
    )
    max_batch: int = attrs.field(default=DEFAULT_MAX_BATCH, validator=_check_positive)
    close_timeout: float = attrs.field(default=DEFAULT_CLOSE_TIMEOUT, validator=_check_positive)
    ask_timeout: float = attrs.field(default=DEFAULT_ASK_TIMEOUT, validator=_check_positive)
    channel_ids: ChannelIds = attrs.field(init=False, factory=ChannelIds, eq=False, repr=False)
    #: What the server's connections did while the hub was suspended (docs/cluster.md).
    suspension: SuspensionCounts = attrs.field(init=False, factory=SuspensionCounts, eq=False)

    def serving_connection(
        self,
        hub: Hub,
        *,
        wake: Callable[[], None],
        now: float,
        hub_lock: contextlib.AbstractContextManager[Any] | None = None,
    ) -> ServingConnection:
        """The :class:`ServingConnection` of a connection accepted at ``now``; see its arguments."""
        return ServingConnection(
            hub,
            wake=wake,
            now=now,
            ask_timeout=self.ask_timeout,
            keepalive_interval=self.keepalive_interval,
            token=self.token,
            profile=self.profile,
            channel_ids=self.channel_ids,
            answers_exchanges=self.exchange_handler is not None,
            queue_size=self.queue_size,
            max_batch=self.max_batch,
            hub_lock=hub_lock,
            suspension=self.suspension,
        )
