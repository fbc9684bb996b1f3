"""What the three adapters share: everything but the I/O.

An adapter is a loop that moves bytes between a socket and the sans-IO
objects and owns the clock. Every decision it takes comes from here:

- :func:`parse_url` turns ``http://host:port[/base]`` into where to connect
  and what to ask for.
- :class:`ListenDriver` is the listener's loop body. The adapter asks it for
  the next :data:`ListenAction` (connect, send, receive with an idle
  timeout, sleep, deliver items, disconnect, stop), performs it, and reports
  what happened. The driver owns the :class:`ProxyConnection` of each ask,
  the :class:`ProxyPolicy`, the idle timeout and the choice of what the
  caller sees.
- :class:`ServingConnection` is one accepted connection of a serving adapter: it
  owns the :class:`ServerConnection`, the hub subscription, batching, the
  deadline of the ask, the keep-alive schedule and the shutdown of the
  path. The adapter feeds it bytes and writes what it returns.
- :class:`ServeSettings` is a server's options, checked once (the token
  included); it makes the :class:`ServingConnection` of each accepted
  connection.
  :func:`run_exchange_handler` answers an exchange for the async adapters.

Nothing here opens sockets, sleeps or reads a clock: ``now`` is a
parameter, as in the sans-IO core.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import inspect
import random as _random
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Generic, TypeVar
from urllib.parse import urlsplit

import attrs

from ..sansio._errors import LocalProtocolError
from ..sansio.asks import Ask
from ..sansio.events import (
    NEED_DATA,
    AskRefused,
    AttemptsExhausted,
    ConnectionClosed,
    ConnectionFailed,
    Event,
    ExchangeAsked,
    NotificationReceived,
    NotificationsAsked,
    ReaskNeeded,
    StreamOpened,
)
from ..sansio.framing import DEFAULT_MAX_FRAME_SIZE
from ..sansio.http import ChannelIds
from ..sansio.hub import Hub, Subscriber
from ..sansio.mcp import ErrorCode, ErrorData, Notification
from ..sansio.policy import ProxyPolicy
from ..sansio.proxy import ProxyConnection
from ..sansio.sequence import Profile
from ..sansio.server import ServerConnection

__all__ = [
    "DEFAULT_ASK_TIMEOUT",
    "DEFAULT_CLOSE_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_KEEPALIVE_INTERVAL",
    "DEFAULT_MAX_BATCH",
    "READ_SIZE",
    "Connect",
    "Deliver",
    "Disconnect",
    "Endpoint",
    "ExchangeHandler",
    "ExchangeResult",
    "ListenAction",
    "ListenDriver",
    "Receive",
    "Send",
    "ServeSettings",
    "ServingConnection",
    "Sleep",
    "Stop",
    "describe_error",
    "format_url",
    "idle_timeout_reason",
    "parse_url",
    "run_exchange_handler",
]

#: Seconds without output after which a server writes a keep-alive frame.
DEFAULT_KEEPALIVE_INTERVAL: Final = 15.0
#: Seconds a listener waits for a TCP connection to be made.
DEFAULT_CONNECT_TIMEOUT: Final = 10.0
#: Bytes asked of the socket per read: large, so that a busy path costs few calls.
READ_SIZE: Final = 256 * 1024
#: Notifications a server writes per HTTP chunk at most.
DEFAULT_MAX_BATCH: Final = 1024
#: Seconds a closing server waits for its listeners to take the end of their paths.
DEFAULT_CLOSE_TIMEOUT: Final = 5.0
#: Seconds a server gives a new connection to complete its ask before closing it.
DEFAULT_ASK_TIMEOUT: Final = 10.0


# --- URLs ----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Endpoint:
    """Where a listener connects and what it sends there.

    ``authority`` is the ``Host`` header (``host:port`` as written in the
    URL), ``target`` the request target of the ask: the URL's path with
    ``/requests`` appended.
    """

    host: str
    port: int
    authority: str
    target: str


def parse_url(url: str) -> Endpoint:
    """Parse a server's base URL, ``http://host[:port][/base]``.

    The ask goes to ``/base/requests``. Only ``http`` is supported; a URL
    with user information, a query or a fragment is refused, because none
    of them could mean anything here. Raises :class:`ValueError`.
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, not {type(url).__name__}")
    parts = urlsplit(url)
    if parts.scheme.lower() != "http":
        raise ValueError(f"only http:// URLs are supported, not {url!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"a URL with user information is not supported: {url!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"a URL with a query or a fragment is not supported: {url!r}")
    host = parts.hostname
    if not host:
        raise ValueError(f"the URL names no host: {url!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"the URL's port is not a port number: {url!r}") from None
    if port is None:
        port = 80
    authority = parts.netloc
    base = parts.path.rstrip("/")
    return Endpoint(host=host, port=port, authority=authority, target=f"{base}/requests")


def format_url(host: str, port: int) -> str:
    """The base URL of a server listening on ``host`` and ``port``."""
    if ":" in host:  # an IPv6 address needs brackets in a URL
        return f"http://[{host}]:{port}"
    return f"http://{host}:{port}"


def describe_error(error: BaseException) -> str:
    """A short, stable description of a socket error, for :class:`ConnectionFailed`."""
    if isinstance(error, TimeoutError):
        return "timed out"
    if isinstance(error, OSError) and error.errno is None:
        # A connection attempt over several addresses (trio) fails with one
        # error caused by a group of the attempts' errors: name the first.
        attempts = getattr(error.__cause__, "exceptions", ())
        for attempt in attempts:
            if isinstance(attempt, OSError) and attempt.errno is not None:
                error = attempt
                break
    if isinstance(error, OSError) and error.errno is not None:
        name = errno.errorcode.get(error.errno, str(error.errno))
        text = error.strerror or str(error)
        return f"{name}: {text}"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def idle_timeout_reason(seconds: float) -> str:
    """The ``StreamBroken`` reason of a path that stayed silent too long."""
    return f"idle timeout: no data for {seconds:g} s"


def _require_positive(name: str, value: float) -> None:
    if not value > 0:  # also refuses NaN
        raise ValueError(f"{name} must be positive, got {value!r}")


# --- the listener --------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Connect:
    """Open a TCP connection to ``host``:``port`` within ``timeout`` seconds.

    Report :meth:`ListenDriver.connected` or :meth:`ListenDriver.connect_failed`.
    """

    host: str
    port: int
    timeout: float


@attrs.frozen(kw_only=True)
class Send:
    """Write ``data``; on a socket error report :meth:`ListenDriver.connection_lost`."""

    data: bytes


@attrs.frozen(kw_only=True)
class Receive:
    """Read up to :data:`READ_SIZE` bytes, waiting at most ``timeout`` seconds.

    Report :meth:`ListenDriver.data_received` (``b""`` at end of file),
    :meth:`ListenDriver.timed_out` or :meth:`ListenDriver.connection_lost`.
    """

    timeout: float


@attrs.frozen(kw_only=True)
class Sleep:
    """Wait ``delay`` seconds (the policy's backoff), then ask for the next action."""

    delay: float


@attrs.frozen(kw_only=True)
class Deliver:
    """Give ``items`` to the caller, in order."""

    items: tuple[Notification | Event, ...]


@attrs.frozen(kw_only=True)
class Disconnect:
    """Close the connection of the ask that just ended."""


@attrs.frozen(kw_only=True)
class Stop:
    """The listener is finished: close everything and return."""


ListenAction = Connect | Send | Receive | Sleep | Deliver | Disconnect | Stop


class _ListenState(enum.Enum):
    #: No ask open: the next action is a sleep or a new ask.
    IDLE = "idle"
    #: Connect was returned; waiting for its outcome.
    CONNECTING = "connecting"
    #: Connected; the ask is sent and the path is read.
    OPEN = "open"
    #: AttemptsExhausted: nothing more to do.
    STOPPED = "stopped"


_DISCONNECT: Final = Disconnect()
_STOP: Final = Stop()


class ListenDriver:
    """The listener's decisions, with the I/O left to the adapter.

    Each ask is one :class:`ProxyConnection` on a fresh connection; the
    :class:`ProxyPolicy` says when the next ask may start. The adapter calls
    :meth:`next_action` and performs what it returns, reporting the outcome
    of ``Connect`` and ``Receive`` (and a failed ``Send``) with the methods
    named on those actions. ``now`` is the adapter's monotonic clock in
    seconds; ``random`` draws the backoff jitter.

    With ``events`` false only notifications are delivered; with ``events``
    true every event is: the connection's events, :class:`ConnectionFailed`,
    :class:`RetryScheduled` and :class:`AttemptsExhausted`.

    A path that stays silent for ``3 * keepalive_interval`` seconds (not
    even a keep-alive frame) is broken: the driver ends it with
    ``StreamBroken(reason="idle timeout: no data for N s")`` and asks again.

    The ask is built once here, as every attempt builds it: a ``token`` (or
    an authority) that cannot go into a request (empty, non-ASCII, a control
    character, trailing white space...) is a :class:`ValueError` now, not a
    failure of the first attempt.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        events: bool = False,
        policy: ProxyPolicy | None = None,
        keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL,
        profile: Profile = Profile.PROVIDER,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        random: Callable[[], float] | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
    ) -> None:
        _require_positive("keepalive_interval", keepalive_interval)
        _require_positive("connect_timeout", connect_timeout)
        self.endpoint = parse_url(url)
        self.policy = policy if policy is not None else ProxyPolicy(require_exchange=False)
        if self.policy.ask_at() is None and not self.policy.exhausted:
            raise ValueError(
                "the policy does not allow an ask now; a listener asks without a first "
                "exchange: pass ProxyPolicy(require_exchange=False)"
            )
        self.idle_timeout = 3.0 * keepalive_interval
        self._token = token
        self._events = events
        self._profile = profile
        self._max_frame_size = max_frame_size
        self._random = random if random is not None else _random.random
        self._connect_timeout = connect_timeout
        self._state = _ListenState.IDLE
        self._connection: ProxyConnection | None = None
        self._actions: deque[ListenAction] = deque()
        try:
            self._new_connection()
        except LocalProtocolError as error:
            raise ValueError(f"the listener cannot ask: {error}") from None

    @property
    def connection(self) -> ProxyConnection | None:
        """The :class:`ProxyConnection` of the ask in progress, if any."""
        return self._connection

    def next_action(self, now: float) -> ListenAction:
        """What the adapter does next."""
        if self._actions:
            return self._actions.popleft()
        state = self._state
        if state is _ListenState.OPEN:
            return Receive(timeout=self.idle_timeout)
        if state is _ListenState.STOPPED:
            return _STOP
        if state is _ListenState.CONNECTING:
            raise RuntimeError("report the outcome of Connect before asking for the next action")
        # IDLE
        if self.policy.exhausted:
            self._state = _ListenState.STOPPED
            return _STOP
        ask_at = self.policy.ask_at()
        if ask_at is None:  # pragma: no cover - only a policy shared with other code
            raise RuntimeError("the policy does not allow an ask now")
        if ask_at > now:
            return Sleep(delay=ask_at - now)
        self.policy.ask_started(now)
        self._connection = self._new_connection()
        self._state = _ListenState.CONNECTING
        endpoint = self.endpoint
        return Connect(host=endpoint.host, port=endpoint.port, timeout=self._connect_timeout)

    def connected(self, now: float) -> None:
        """The connection of the current ask is made: send the ask."""
        connection = self._expect(_ListenState.CONNECTING)
        self._state = _ListenState.OPEN
        self._actions.append(Send(data=connection.data_to_send()))

    def connect_failed(self, now: float, reason: str) -> None:
        """No connection could be made for the current ask."""
        self._expect(_ListenState.CONNECTING)
        self._connection = None
        delivered: list[Notification | Event] = []
        if self._events:
            delivered.append(ConnectionFailed(reason=reason))
        self._end_ask(now, delivered)

    def data_received(self, now: float, data: bytes) -> None:
        """Bytes arrived on the path; ``b""`` is the end of file."""
        connection = self._expect(_ListenState.OPEN)
        connection.receive_data(data)
        self._drain(now, connection)

    def connection_lost(self, now: float, reason: str) -> None:
        """Sending or receiving failed (reset, broken pipe): the path ended abruptly.

        ``reason`` (for people) says how; the path ends as ``StreamBroken``
        whatever its body's framing.
        """
        connection = self._expect(_ListenState.OPEN)
        connection.connection_lost(f"the connection was lost: {reason}")
        self._drain(now, connection)

    def timed_out(self, now: float) -> None:
        """``Receive`` waited :attr:`idle_timeout` seconds and got nothing."""
        connection = self._expect(_ListenState.OPEN)
        connection.connection_lost(idle_timeout_reason(self.idle_timeout))
        self._drain(now, connection)

    def _new_connection(self) -> ProxyConnection:
        endpoint = self.endpoint
        return ProxyConnection(
            endpoint.authority,
            token=self._token,
            profile=self._profile,
            max_frame_size=self._max_frame_size,
            target=endpoint.target,
        )

    def _expect(self, state: _ListenState) -> ProxyConnection:
        connection = self._connection
        if self._state is not state or connection is None:
            raise RuntimeError(f"not expected now: the listener is {self._state.value}")
        return connection

    def _drain(self, now: float, connection: ProxyConnection) -> None:
        delivered: list[Notification | Event] = []
        events = self._events
        policy = self.policy
        ended = False
        while True:
            event = connection.next_event()
            if event is NEED_DATA:
                break
            if type(event) is NotificationReceived:
                policy.notification_received()
                delivered.append(event if events else event.notification)
                continue
            if isinstance(event, StreamOpened):
                policy.path_opened(now)
            elif isinstance(event, ReaskNeeded):
                ended = True
            if events:
                delivered.append(event)
            if ended:
                break
        if ended:
            self._connection = None
            self._actions.append(_DISCONNECT)
            self._end_ask(now, delivered)
        elif delivered:
            self._actions.append(Deliver(items=tuple(delivered)))

    def _end_ask(self, now: float, delivered: list[Notification | Event]) -> None:
        outcome = self.policy.ask_ended(now, self._random())
        if self._events:
            delivered.append(outcome)
        if delivered:
            self._actions.append(Deliver(items=tuple(delivered)))
        if isinstance(outcome, AttemptsExhausted):
            self._state = _ListenState.STOPPED
        else:
            self._state = _ListenState.IDLE


# --- the server ----------------------------------------------------------------

#: What an exchange handler returns: a result object (or its JSON bytes),
#: an :class:`ErrorData` to answer with an error, or ``None`` to decline.
ExchangeResult = Mapping[str, Any] | bytes | ErrorData | None
#: Answers one exchange of kinds 0-3. The async adapters also accept a
#: handler that returns an awaitable.
ExchangeHandler = Callable[[Ask], ExchangeResult | Awaitable[ExchangeResult]]


class ServingConnection:
    """One accepted connection of a serving adapter, without the I/O.

    The adapter makes it when it accepts the connection, at ``now``, feeds
    :meth:`receive` with what it reads and writes what :meth:`take_output`
    returns, whenever ``wake`` was called, after each :meth:`receive`, and
    while :attr:`has_backlog` is true. It calls :meth:`check_ask_deadline`
    at :attr:`ask_deadline` and writes :meth:`keepalive` at
    :attr:`keepalive_at`, calls :meth:`shutdown` when the server closes and
    :meth:`connection_lost` when the socket is gone, and closes the socket
    once :attr:`done` is true and the output is written. When
    :attr:`exchange` is set, the adapter runs the exchange handler and
    passes its result (or exception) to :meth:`answer_exchange`.

    A peer has ``ask_timeout`` seconds from the accept to complete its ask;
    one that has not by then (it sends nothing, or sends it slowly) holds a
    connection nobody is served by, and is closed without an answer.

    ``hub_lock`` serialises every call into the hub and the subscriber
    (the blocking adapter's threads); ``wake`` is the subscriber's
    ``on_ready`` and is called from ``hub.publish``, under that lock.
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
    ) -> None:
        _require_positive("ask_timeout", ask_timeout)
        self._hub = hub
        self._wake = wake
        self._keepalive_interval = keepalive_interval
        #: Until the ask is complete: when the connection is closed if it is not.
        self._ask_deadline: float | None = now + ask_timeout
        self._connection = ServerConnection(token=token, profile=profile, channel_ids=channel_ids)
        self._answers_exchanges = answers_exchanges
        self._queue_size = queue_size
        self._max_batch = max_batch
        self._lock: contextlib.AbstractContextManager[Any] = (
            hub_lock if hub_lock is not None else contextlib.nullcontext()
        )
        self._subscriber: Subscriber | None = None
        self._outbox = bytearray()
        self._exchange: Ask | None = None
        self._last_output = 0.0
        self._shutting_down = False
        self._done = False

    # -- what the adapter reads -------------------------------------------------

    @property
    def connection(self) -> ServerConnection:
        """The sans-IO connection."""
        return self._connection

    @property
    def subscriber(self) -> Subscriber | None:
        """The hub subscription of the open path, if any."""
        return self._subscriber

    @property
    def path_open(self) -> bool:
        """Whether a notification path is being written."""
        return self._subscriber is not None

    @property
    def exchange(self) -> Ask | None:
        """An exchange (kinds 0-3) waiting for :meth:`answer_exchange`."""
        return self._exchange

    @property
    def done(self) -> bool:
        """Nothing more will be written: close after writing :meth:`take_output`."""
        return self._done

    @property
    def has_backlog(self) -> bool:
        """Notifications are still queued after the last :meth:`take_output`."""
        subscriber = self._subscriber
        if subscriber is None:
            return False
        with self._lock:
            return len(subscriber) > 0

    @property
    def ask_deadline(self) -> float | None:
        """When the connection is closed unless its ask is complete; ``None`` once it is."""
        return self._ask_deadline

    @property
    def keepalive_at(self) -> float | None:
        """When a keep-alive is due if nothing else is written, or ``None``."""
        if self._subscriber is None:
            return None
        return self._last_output + self._keepalive_interval

    # -- what the adapter reports -----------------------------------------------

    def receive(self, data: bytes, now: float) -> None:
        """Bytes read from the peer; ``b""`` is the end of file."""
        if self._done:
            return  # the answer is written or being written: the rest is noise
        connection = self._connection
        connection.receive_data(data)
        while not self._done:
            event = connection.next_event()
            if event is NEED_DATA:
                break
            # Whatever the event, the ask is over: read, refused, or abandoned.
            self._ask_deadline = None
            if isinstance(event, NotificationsAsked):
                self._open_path(now)
            elif isinstance(event, ExchangeAsked):
                if self._answers_exchanges and not self._shutting_down:
                    self._exchange = event.ask
                else:
                    # The serving adapters relay notifications; there is no MCP
                    # server here to answer an exchange with.
                    self._finish(connection.decline())
            elif isinstance(event, AskRefused):
                self._finish(connection.data_to_send())
            elif isinstance(event, ConnectionClosed):
                # The peer went away (a path or an exchange has nobody to
                # answer any more), or this side's answer is complete.
                self._unsubscribe()
                self._exchange = None
                self._finish(connection.data_to_send())
        if not self._done:
            self._outbox += connection.data_to_send()

    def take_output(self, now: float) -> bytes:
        """Everything there is to write now (``b""`` if nothing)."""
        subscriber = self._subscriber
        if subscriber is not None:
            with self._lock:
                batch = subscriber.take(self._max_batch)
            if batch:
                self._outbox += self._connection.send_notifications(batch)
            if self._shutting_down:
                # Whatever is still queued goes out before the clean end.
                with self._lock:
                    rest = subscriber.take()
                if rest:
                    self._outbox += self._connection.send_notifications(rest)
                self._unsubscribe()
                try:
                    ending = self._connection.end_path()
                except LocalProtocolError:
                    # The container profile allows no finish after
                    # notifications: there the path ends with the connection.
                    ending = b""
                self._finish(ending)
        out = bytes(self._outbox)
        self._outbox.clear()
        if out:
            self._last_output = now
        return out

    def check_ask_deadline(self, now: float) -> None:
        """Past :attr:`ask_deadline` at ``now``, the connection is :attr:`done`.

        Nothing is written: the peer said nothing to answer. Before the
        deadline, or once the ask is complete, this does nothing.
        """
        due = self._ask_deadline
        if due is not None and now >= due:
            self._finish(b"")

    def keepalive(self, now: float) -> bytes:
        """A keep-alive frame if one is due at ``now``, else ``b""``."""
        due = self.keepalive_at
        if due is None or now < due:
            return b""
        self._last_output = now
        return self._connection.send_keepalive()

    def answer_exchange(self, result: ExchangeResult | BaseException) -> None:
        """Answer the pending :attr:`exchange` with the handler's result.

        A mapping or bytes is the result, an :class:`ErrorData` the error,
        ``None`` declines; an exception, or a result that is not a JSON
        object, becomes an internal error.
        """
        if self._exchange is None:
            return  # the peer went away while the handler ran: nobody to answer
        self._exchange = None
        connection = self._connection
        if result is None:
            self._finish(connection.decline())
        elif isinstance(result, ErrorData):
            self._finish(connection.answer_error(result))
        elif isinstance(result, BaseException):
            self._finish(connection.answer_error(_internal_error(describe_error(result))))
        else:
            try:
                answer = connection.answer(result)
            except (LocalProtocolError, TypeError) as error:
                # The connection refused the result and changed nothing.
                answer = connection.answer_error(_internal_error(f"invalid result: {error}"))
            self._finish(answer)

    def shutdown(self) -> None:
        """The server is closing: end the path cleanly at the next :meth:`take_output`.

        A connection with no path (still reading its ask, or answering an
        exchange) is simply done.
        """
        self._shutting_down = True
        if self._subscriber is None and self._exchange is None:
            self._finish(b"")

    def connection_lost(self) -> None:
        """The socket is gone: drop the subscription."""
        self._unsubscribe()
        self._exchange = None
        self._done = True
        self._ask_deadline = None

    # -- internals ----------------------------------------------------------------

    def _open_path(self, now: float) -> None:
        connection = self._connection
        if self._shutting_down:
            self._finish(connection.decline())
            return
        with self._lock:
            self._subscriber = self._hub.subscribe(queue_size=self._queue_size, on_ready=self._wake)
        self._outbox += connection.start_path()
        self._last_output = now

    def _unsubscribe(self) -> None:
        subscriber = self._subscriber
        if subscriber is not None:
            self._subscriber = None
            with self._lock:
                subscriber.close()

    def _finish(self, data: bytes) -> None:
        self._outbox += data
        self._done = True
        self._ask_deadline = None


def _internal_error(message: str) -> ErrorData:
    return ErrorData(code=int(ErrorCode.INTERNAL_ERROR), message=message)


def _check_positive(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    _require_positive(attribute.name, value)


def _check_token(_instance: object, _attribute: attrs.Attribute[Any], token: str | None) -> None:
    # The very check each accepted connection's ServerConnection makes: a
    # token it refuses is refused once here (ValueError), not by every
    # connection later.
    ServerConnection(token=token)


#: The exchange handler a server takes: :data:`ExchangeHandler` for the async
#: adapters, one that returns its answer itself for the blocking adapter.
_Handler = TypeVar("_Handler", bound=ExchangeHandler)


@attrs.frozen(kw_only=True)
class ServeSettings(Generic[_Handler]):
    """The options of a serving adapter's ``Server``, checked once.

    The server holds one and makes the :class:`ServingConnection` of each
    accepted connection with :meth:`serving_connection`; ``channel_ids``
    mints the channel ids of all its connections. A ``token`` the
    :class:`ServerConnection` refuses (it is one or more visible ASCII
    characters), and a timeout, interval or size that is not positive, are a
    :class:`ValueError` here.
    """

    token: str | None = attrs.field(validator=_check_token)
    keepalive_interval: float = attrs.field(validator=_check_positive)
    profile: Profile
    exchange_handler: _Handler | None
    queue_size: int | None = attrs.field(validator=attrs.validators.optional(_check_positive))
    max_batch: int = attrs.field(validator=_check_positive)
    close_timeout: float = attrs.field(validator=_check_positive)
    ask_timeout: float = attrs.field(default=DEFAULT_ASK_TIMEOUT, validator=_check_positive)
    channel_ids: ChannelIds = attrs.field(init=False, factory=ChannelIds, eq=False, repr=False)

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
        )


async def run_exchange_handler(serving: ServingConnection, handler: ExchangeHandler | None) -> None:
    """Answer the pending :attr:`ServingConnection.exchange` with ``handler``.

    For the async adapters: a handler that returns an awaitable is awaited.
    Its exception (not a cancellation) becomes the internal error answered.
    """
    ask = serving.exchange
    assert ask is not None and handler is not None
    try:
        result = handler(ask)
        if inspect.isawaitable(result):
            result = await result
    except Exception as error:
        serving.answer_exchange(error)
    else:
        serving.answer_exchange(result)
