"""The proxy driver: exchanges of kinds 0-3, and the one notification ask, without the I/O.

A proxy of the provider protocol does two things with a server: it asks the
four one-shot exchanges (list tools, list resources, call a tool, read a
resource), each on a connection of its own, and, once its first exchange has
been answered, it asks for notifications and keeps exactly one such ask open,
asking again whenever a path ends (the specification page of kind 4). This
module decides all of it; the adapters' ``Proxy`` classes move the bytes.

- :class:`ExchangeDriver` is one exchange: an :class:`ExchangeConnection` on
  a fresh connection. Its actions are the listener's (:class:`Connect`,
  :class:`Send`, :class:`Receive`, :class:`Disconnect`, :class:`Stop`) and
  it takes the listener's reports: both are a :class:`~.actions.ClientDriver`,
  so the loop an adapter runs for ``listen()`` runs an exchange too. Its states
  and what moves it between them are one table,
  :data:`EXCHANGE_DRIVER_TRANSITIONS`.
- :class:`ProxyDriver` holds the :class:`ProxyPolicy` (by default
  ``require_exchange=True``), makes the exchanges, unlocks the notification
  ask when the first one is answered, and hands out the one
  :class:`~.listen.ListenDriver` of that ask, on that policy
  (:meth:`ProxyDriver.start_listening`). The re-asks, their backoff and
  the idle timeout are the listener driver's, as for ``listen()``. What
  the ask brings waits in the proxy's bounded buffer until the application
  reads it (:meth:`ProxyDriver.keep`, :meth:`ProxyDriver.take`); what
  arrives when the buffer is full is dropped and counted
  (:attr:`ProxyDriver.dropped`).

The ask builders (:func:`call_tool_ask` and the others) make the params of
the four exchanges as MCP spells them. Nothing here opens sockets, sleeps,
reads a clock or draws random numbers: ``now`` and the jitter source are
parameters.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import attrs

from ..client.connection import ExchangeConnection
from ..client.policy import PolicyState, ProxyPolicy
from ..client.urls import Endpoint, check_token_transport, parse_url
from ..errors import LocalProtocolError, ProxyClosed
from ..events import (
    NEED_DATA,
    ConnectionFailed,
    Event,
    NotServed,
    ResultReceived,
    StreamBroken,
    StreamEnded,
    StreamErrored,
)
from ..mcp.model import ErrorData, Notification
from ..transitions import TableEnum
from ..wire.asks import Ask, Exchange
from .actions import ClientDriver, Connect, Rules
from .listen import ListenDriver, ListenState
from .settings import (
    ClientSettings,
)

__all__ = [
    "ABANDONED",
    "EXCHANGE_DRIVER_TRANSITIONS",
    "STOPPED_READING",
    "BufferOverflow",
    "ExchangeDriver",
    "ExchangeDriverInput",
    "ExchangeDriverOutcome",
    "ExchangeDriverState",
    "ExchangeError",
    "ExchangeFailed",
    "ProxyDriver",
    "call_tool_ask",
    "list_resources_ask",
    "list_tools_ask",
    "read_resource_ask",
    "result_object",
]

#: Why the ask in progress ended when its reader stopped reading.
STOPPED_READING: Final = "the proxy stopped reading its notifications"
#: Why an exchange ended that its adapter stopped performing.
ABANDONED: Final = "the proxy stopped the exchange"


# --- the exchanges' params -------------------------------------------------------------------


def _list_ask(exchange: Exchange, cursor: str | None) -> Ask:
    if cursor is None:
        return Ask(exchange=exchange)
    if not isinstance(cursor, str):
        raise TypeError(f"cursor must be a str or None, not {type(cursor).__name__}")
    return Ask(exchange=exchange, params={"cursor": cursor})


def list_tools_ask(cursor: str | None = None) -> Ask:
    """The ask of kind 0: ``tools/list``, from ``cursor`` (a previous page's ``nextCursor``)."""
    return _list_ask(Exchange.LIST_TOOLS, cursor)


def list_resources_ask(cursor: str | None = None) -> Ask:
    """The ask of kind 1: ``resources/list``, from ``cursor``."""
    return _list_ask(Exchange.LIST_RESOURCES, cursor)


def call_tool_ask(
    name: str,
    arguments: Mapping[str, Any] | None = None,
    *,
    progress_token: str | int | None = None,
) -> Ask:
    """The ask of kind 2: ``tools/call`` of ``name`` with ``arguments``.

    With a ``progress_token`` (a string or an integer, as MCP's
    ``ProgressToken``) the params carry ``_meta.progressToken``, and the
    server's progress for the call comes on the notification path.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, not {type(name).__name__}")
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        if not isinstance(arguments, Mapping):
            raise TypeError(f"arguments must be a mapping or None, not {type(arguments).__name__}")
        params["arguments"] = dict(arguments)
    if progress_token is not None:
        if isinstance(progress_token, bool) or not isinstance(progress_token, (str, int)):
            raise TypeError(
                f"progress_token must be a str or an int, not {type(progress_token).__name__}"
            )
        params["_meta"] = {"progressToken": progress_token}
    return Ask(exchange=Exchange.CALL_TOOL, params=params)


def read_resource_ask(uri: str) -> Ask:
    """The ask of kind 3: ``resources/read`` of ``uri``."""
    if not isinstance(uri, str):
        raise TypeError(f"uri must be a str, not {type(uri).__name__}")
    return Ask(exchange=Exchange.READ_RESOURCE, params={"uri": uri})


def result_object(answer: ResultReceived) -> dict[str, Any]:
    """The result of ``answer``: a JSON object, as the rules of an answer make it."""
    result = answer.result
    assert isinstance(result, dict), type(result)
    return result


# --- what an exchange can end with -----------------------------------------------------------


class ExchangeError(Exception):
    """The server answered the exchange with an error: its :class:`ErrorData`, unchanged."""

    def __init__(self, error: ErrorData) -> None:
        super().__init__(f"error {error.code}: {error.message}")
        self.error = error


class ExchangeFailed(Exception):
    """The exchange got no answer: no connection, not served, or the answer broke off.

    ``event`` is what ended it (:class:`ConnectionFailed`, :class:`NotServed`
    or :class:`StreamBroken`) and the message says why, for people.
    """

    def __init__(self, event: ConnectionFailed | NotServed | StreamBroken) -> None:
        if isinstance(event, ConnectionFailed):
            reason = f"could not connect: {event.reason}"
        elif isinstance(event, NotServed):
            reason = f"not served ({event.status}): {event.reason}"
        else:
            reason = f"the answer broke off: {event.reason}"
        super().__init__(reason)
        self.event = event
        self.reason = reason


# --- one exchange: the table -----------------------------------------------------------------


class ExchangeDriverState(TableEnum):
    """Where one exchange is."""

    #: Nothing done yet: the next action connects.
    READY = "ready"
    #: :class:`Connect` was returned; waiting for its outcome.
    CONNECTING = "connecting"
    #: Connected: the ask is sent and the answer read.
    OPEN = "open"
    #: The outcome is known (:meth:`ExchangeDriver.answer`).
    DONE = "done"


class ExchangeDriverInput(TableEnum):
    """What happens to one exchange; ``next_action()`` is one of three, by the state."""

    START = "next_action(), nothing done yet"
    READ = "next_action(), the answer is awaited"
    FINISHED = "next_action(), the outcome is known"
    CONNECTED = "connected()"
    CONNECT_FAILED = "connect_failed()"
    DATA = "data_received(), the answer goes on"
    DATA_ENDS = "data_received(), the answer ended"
    LOST = "connection_lost()"
    TIMED_OUT = "timed_out()"


class ExchangeDriverOutcome(TableEnum):
    """What a transition does besides changing the state."""

    CONNECT = "Connect"
    SEND_ASK = "Send the ask"
    RECEIVE = "Receive"
    NOTHING = "-"
    FAIL = "ConnectionFailed is the outcome"
    END = "the answer is the outcome; Disconnect"
    CUT = "StreamBroken (connection lost); Disconnect"
    SILENCE = "StreamBroken (no answer in time); Disconnect"
    STOP = "Stop"


_READY, _CONNECTING, _OPEN, _DONE = ExchangeDriverState
_In = ExchangeDriverInput
_Out = ExchangeDriverOutcome

#: (state, input) -> (next state, outcome). One connection, one ask, one
#: answer: nothing is retried, whatever happens is the outcome. A pair that
#: is not here is a mistake of the adapter and raises
#: :class:`LocalProtocolError`.
EXCHANGE_DRIVER_TRANSITIONS: Final[
    Mapping[
        tuple[ExchangeDriverState, ExchangeDriverInput],
        tuple[ExchangeDriverState, ExchangeDriverOutcome],
    ]
] = {
    (_READY, _In.START): (_CONNECTING, _Out.CONNECT),
    (_CONNECTING, _In.CONNECTED): (_OPEN, _Out.SEND_ASK),
    (_CONNECTING, _In.CONNECT_FAILED): (_DONE, _Out.FAIL),
    (_OPEN, _In.READ): (_OPEN, _Out.RECEIVE),
    (_OPEN, _In.DATA): (_OPEN, _Out.NOTHING),
    (_OPEN, _In.DATA_ENDS): (_DONE, _Out.END),
    # A reset, and an answer that does not come in time, end it abruptly.
    (_OPEN, _In.LOST): (_DONE, _Out.CUT),
    (_OPEN, _In.TIMED_OUT): (_DONE, _Out.SILENCE),
    (_DONE, _In.FINISHED): (_DONE, _Out.STOP),
}

#: The events of an :class:`ExchangeConnection` after which nothing follows.
_TERMINAL: Final = (StreamEnded, StreamErrored, NotServed, StreamBroken)


class ExchangeDriver(ClientDriver):
    """One exchange of kinds 0-3 on one connection, with the I/O left to the adapter.

    Driven as a :class:`~.listen.ListenDriver` is (the same actions and
    reports), until :class:`Stop`; it delivers nothing. Then
    :meth:`answer` says how it went. Of the ``settings`` (a
    :class:`~.settings.ClientSettings`, a proxy's), ``exchange_timeout``
    bounds the wait for the answer (a server writes nothing until its
    handler answers), ``connect_timeout`` the connection, and ``token`` and
    ``max_frame_size`` go to the :class:`ExchangeConnection`. The ask's
    bytes are built here: what cannot go into a request (an authority that
    is not ASCII...) is a :class:`ValueError` now.
    """

    _state: ExchangeDriverState
    _INPUTS = ExchangeDriverInput
    _NAME = "exchange"

    def __init__(
        self, endpoint: Endpoint, ask: Ask, settings: ClientSettings | None = None
    ) -> None:
        if settings is None:
            settings = ClientSettings()
        super().__init__(
            endpoint,
            ExchangeDriverState.READY,
            connect_timeout=settings.connect_timeout,
            receive_timeout=settings.exchange_timeout,
        )
        self.ask = ask
        #: The options, checked once.
        self.settings = settings
        try:
            self._connection: ExchangeConnection = ExchangeConnection(
                endpoint.authority,
                ask,
                token=settings.token,
                max_frame_size=settings.max_frame_size,
                target=endpoint.target,
            )
        except LocalProtocolError as error:
            raise ValueError(f"the proxy cannot ask: {error}") from None
        self._answer: ResultReceived | StreamErrored | None = None
        self._end: Event | None = None

    @property
    def state(self) -> ExchangeDriverState:
        """Where the exchange is (see :data:`EXCHANGE_DRIVER_TRANSITIONS`)."""
        return self._state

    @property
    def answered(self) -> bool:
        """Whether the server answered: a result, or an error (either completes an exchange)."""
        return self._answer is not None

    def answer(self) -> ResultReceived:
        """The result, once the exchange is over (:class:`Stop`).

        Raises :class:`ExchangeError` when the server answered with an
        error, :class:`ExchangeFailed` when it did not answer, and
        :class:`LocalProtocolError` while the exchange is not over. A result
        followed by an abrupt end is still the result.
        """
        if self._state is not ExchangeDriverState.DONE:
            raise LocalProtocolError(f"the exchange is not over: it is {self._state.value}")
        answer = self._answer
        if isinstance(answer, ResultReceived):
            return answer
        if isinstance(answer, StreamErrored):
            raise ExchangeError(answer.error)
        end = self._end
        assert isinstance(end, (ConnectionFailed, NotServed, StreamBroken)), end
        raise ExchangeFailed(end)

    def abandon(self, now: float, reason: str = ABANDONED) -> None:
        """The adapter stopped performing the exchange (a cancellation, a closed proxy).

        Unless it is over, it ends as the table says of a connection that
        was not made (before or while connecting) or was lost (once made):
        :meth:`answer` then raises :class:`ExchangeFailed` with ``reason``.
        """
        if self._state is ExchangeDriverState.READY:
            self._move(_In.START, now)
        if self._state is ExchangeDriverState.CONNECTING:
            self.connect_failed(now, reason)
        elif self._state is ExchangeDriverState.OPEN:
            self.connection_lost(now, reason)

    # -- what the base asks of a driver ---------------------------------------------

    def _rules(self) -> Rules:
        return EXCHANGE_DRIVER_TRANSITIONS, _EXCHANGE_HANDLERS

    def _next_input(self, now: float) -> ExchangeDriverInput:
        """Which input ``next_action()`` is: it depends on the state alone."""
        if self._state is ExchangeDriverState.READY:
            return _In.START
        if self._state is ExchangeDriverState.DONE:
            return _In.FINISHED
        return _In.READ

    def _received(self, data: bytes) -> tuple[None, bool]:
        self._connection.receive_data(data)
        return None, self._drain()

    # -- the outcomes -----------------------------------------------------------------

    def _connect(self, value: object) -> Connect:
        return self._connect_action

    def _nothing(self, value: object) -> None:
        pass

    def _fail(self, reason: str) -> None:
        self._end = ConnectionFailed(reason=reason)

    def _ended(self, value: object) -> None:
        self._disconnect()

    def _cut(self, reason: str) -> None:
        self._break_off(reason)

    def _silence(self, value: object) -> None:
        self._break_off(f"no answer within {self.settings.exchange_timeout:g} s")

    # -- internals ----------------------------------------------------------------------

    def _drain(self) -> bool:
        """Take the connection's events; whether the answer is over."""
        connection = self._connection
        while self._end is None:
            event = connection.next_event()
            if event is NEED_DATA:
                return False
            if isinstance(event, (ResultReceived, StreamErrored)):
                self._answer = event
            if isinstance(event, _TERMINAL):
                self._end = event
        return True

    def _break_off(self, reason: str) -> None:
        # The reason replaces the connection's own, whatever the body's framing.
        self._connection.connection_lost(reason)
        if not self._drain():  # pragma: no cover - a lost connection always ends the answer
            self._end = StreamBroken(reason=reason)
        self._disconnect()


_EXCHANGE_HANDLERS: Final[Mapping[ExchangeDriverOutcome, Callable[[ExchangeDriver, Any], Any]]] = {
    _Out.CONNECT: ExchangeDriver._connect,
    _Out.SEND_ASK: ExchangeDriver._send_ask,
    _Out.RECEIVE: ExchangeDriver._receive_next,
    _Out.NOTHING: ExchangeDriver._nothing,
    _Out.FAIL: ExchangeDriver._fail,
    _Out.END: ExchangeDriver._ended,
    _Out.CUT: ExchangeDriver._cut,
    _Out.SILENCE: ExchangeDriver._silence,
    _Out.STOP: ExchangeDriver._stop,
}


# --- the proxy -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class BufferOverflow:
    """The proxy's notification buffer was full, and what arrived was dropped: to be logged.

    :meth:`ProxyDriver.keep` returns one at the first drop after the
    buffer was last empty (one per time it filled up, not one per item);
    ``dropped`` is the proxy's total so far, ``capacity`` the buffer's size.
    """

    capacity: int
    dropped: int


class ProxyDriver:
    """A proxy's decisions: its exchanges and its one notification ask, I/O left out.

    :meth:`exchange` makes the driver of one exchange; the adapter runs it
    and reports its end with :meth:`exchange_ended`. The first exchange the
    server answers (a result or an error) unlocks the notification ask
    (:attr:`may_listen`); from then on :meth:`start_listening` hands out the
    ask's :class:`~.listen.ListenDriver`, once, for the adapter to run in
    the background for the proxy's life, and :meth:`close_notifications`
    takes it back when that run ends. Every re-ask, its backoff and jitter
    are the ``policy``'s (default ``ProxyPolicy()``, which requires that
    first exchange; with ``require_exchange=False`` the ask may be made at
    once).

    What the ask delivers goes into a buffer of at most
    ``settings.notification_buffer`` items (:meth:`keep`), whether or not
    the application reads; one reader at a time (:meth:`open_reader`)
    takes it out in order (:meth:`take`). What arrives while the buffer is
    full is dropped and counted (:attr:`dropped`): the items kept are what
    arrived first, the gap is at the end. :meth:`close` ends it all: no
    exchange and no ask after it.

    An adapter that cannot run the ask in the background (trio without
    ``async with``) lets its reader drive it instead:
    :meth:`open_notifications` gives the reader the ask's driver and
    :meth:`close_notifications` ends the ask when the reader stops.

    The options come whole, as :attr:`settings` (a
    :class:`~.settings.ClientSettings`, the defaults when omitted): those of
    ``listen()``, which go to the notification ask, ``exchange_timeout`` and
    ``notification_buffer``. Every exchange and every ask is made with them.
    A ``token`` that would go in cleartext to a host that is not loopback
    is refused here (:class:`~..errors.PlaintextTokenRefused`).
    """

    def __init__(
        self,
        url: str,
        settings: ClientSettings | None = None,
        *,
        policy: ProxyPolicy | None = None,
    ) -> None:
        self.policy = policy if policy is not None else ProxyPolicy()
        if not isinstance(self.policy, ProxyPolicy):
            raise TypeError(f"policy must be a ProxyPolicy, not {type(self.policy).__name__}")
        #: The options, checked once when they were made.
        self.settings = settings if settings is not None else ClientSettings()
        self.endpoint = parse_url(url)
        check_token_transport(
            self.endpoint,
            self.settings.token,
            allow_plaintext_token=self.settings.allow_plaintext_token,
        )
        self._listener: ListenDriver | None = None
        # Whether the background ask was started: it is started once, for the proxy's life.
        self._started = False
        self._closed = False
        self._reading = False
        self._buffer: deque[Notification | Event] = deque()
        self._dropped = 0
        # Set at the first drop after the buffer was last empty: one report per overflow.
        self._overflowing = False

    @property
    def may_listen(self) -> bool:
        """Whether the notification ask may be made: the policy is no longer locked."""
        return self.policy.state is not PolicyState.LOCKED

    @property
    def listener(self) -> ListenDriver | None:
        """The driver of the notification ask while it runs, else ``None``."""
        return self._listener

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def dropped(self) -> int:
        """How many items arrived while the buffer was full, and were dropped."""
        return self._dropped

    @property
    def buffered(self) -> int:
        """How many items wait in the buffer for the application to read them."""
        return len(self._buffer)

    @property
    def over(self) -> bool:
        """Whether nothing more is to be read: the buffer is empty and no ask will come.

        That is, the background ask ended, and will not be made again: the
        proxy was closed, or the policy gave up (``AttemptsExhausted``).
        """
        return (
            not self._buffer
            and self._listener is None
            and (self._closed or (self._started and self.policy.exhausted))
        )

    def exchange(self, ask: Ask) -> ExchangeDriver:
        """The driver of one exchange of kinds 0-3 (``ask``), on a connection of its own.

        Raises :class:`ProxyClosed` once the proxy was closed.
        """
        if self._closed:
            raise ProxyClosed("the proxy is closed")
        return ExchangeDriver(self.endpoint, ask, self.settings)

    def exchange_ended(self, exchange: ExchangeDriver, now: float) -> bool:
        """``exchange`` is over, or its adapter stopped it, at ``now``: may notifications be asked?

        An exchange that is not over is abandoned (:meth:`ExchangeDriver.abandon`).
        An answered exchange is reported to the policy while it is locked:
        the first one unlocks it. Later ones change nothing the policy
        decides (``POLICY_TRANSITIONS`` says so), and they are not reported,
        since the policy is then the listener's, which a threaded adapter
        drives from another thread.
        """
        exchange.abandon(now)
        if exchange.answered and self.policy.state is PolicyState.LOCKED:
            self.policy.exchange_completed()
        return self.may_listen

    def start_listening(self) -> ListenDriver | None:
        """The driver of the background ask, when it is to start now; else ``None``.

        It starts once, as soon as the ask may be made (:attr:`may_listen`)
        and the proxy is open: the adapter runs it until :class:`Stop` (the
        policy gave up) or until the proxy closes, handing what it delivers
        to :meth:`keep`, then calls :meth:`close_notifications`. The adapter
        may call this whenever the ask may have been unlocked (after each
        exchange, when a reader starts): it says ``None`` every other time.
        """
        if self._started or self._closed or not self.may_listen:
            return None
        self._started = True
        return self.open_notifications()

    def open_notifications(self) -> ListenDriver:
        """The driver of the one notification ask.

        Raises :class:`LocalProtocolError` before the first exchange was
        answered (wait for :attr:`may_listen`) and while the ask runs
        already: one ask is kept open.
        """
        if not self.may_listen:
            raise LocalProtocolError(
                "no exchange of kinds 0-3 was answered yet: the proxy asks for "
                "notifications after its first exchange"
            )
        if self._listener is not None:
            raise LocalProtocolError(
                "the proxy's notifications are being read already: it keeps one ask open"
            )
        self._listener = ListenDriver(self.endpoint, self.settings, policy=self.policy)
        return self._listener

    def close_notifications(self, now: float) -> None:
        """The ask's run is over (its adapter closed the connection) at ``now``.

        An ask in progress ends there, as an abrupt end the policy counts
        (:data:`STOPPED_READING`). The driver is let go with whatever it
        still had to do.
        """
        listener, self._listener = self._listener, None
        if listener is None:
            return
        if listener.state is ListenState.CONNECTING:
            listener.connect_failed(now, STOPPED_READING)
        elif listener.state is ListenState.OPEN:
            listener.connection_lost(now, STOPPED_READING)

    # -- the buffer ---------------------------------------------------------------------

    def keep(self, items: Sequence[Notification | Event]) -> BufferOverflow | None:
        """Put what the ask delivered into the buffer, in order, as room allows.

        Past ``settings.notification_buffer`` items, what arrives is
        dropped and counted in :attr:`dropped`. The first drop after the
        buffer was last empty returns a :class:`BufferOverflow` for the
        adapter to log; otherwise ``None``.
        """
        buffer = self._buffer
        room = self.settings.notification_buffer - len(buffer)
        if len(items) <= room:
            buffer.extend(items)
            return None
        if room > 0:
            buffer.extend(items[:room])
        self._dropped += len(items) - max(room, 0)
        if self._overflowing:
            return None
        self._overflowing = True
        return BufferOverflow(capacity=self.settings.notification_buffer, dropped=self._dropped)

    def take(self) -> Notification | Event | None:
        """The oldest item of the buffer, taken out; ``None`` when it is empty."""
        buffer = self._buffer
        if not buffer:
            return None
        item = buffer.popleft()
        if not buffer:
            self._overflowing = False
        return item

    def open_reader(self) -> None:
        """A reader starts taking from the buffer: one at a time (:class:`LocalProtocolError`)."""
        if self._reading:
            raise LocalProtocolError(
                "the proxy's notifications are being read already: one reader at a time"
            )
        self._reading = True

    def close_reader(self) -> None:
        """The reader stopped; the ask goes on, and what it brings is kept for the next one."""
        self._reading = False

    def close(self) -> None:
        """The proxy closes: no exchange and no ask after this.

        The adapter stops the ask's run, which then calls
        :meth:`close_notifications`. What the buffer held is let go: a
        reader finds the proxy :attr:`over`.
        """
        self._closed = True
        self._buffer.clear()
        self._overflowing = False
