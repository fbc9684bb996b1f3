"""The listener driver: asking a server for notifications, again and again, without the I/O.

A listening adapter makes one :class:`ListenDriver` and loops: it asks
:meth:`ListenDriver.next_action` what to do, does it, and reports what
happened. The actions:

- :class:`Connect` to ``host``:``port`` within ``timeout`` seconds; report
  :meth:`~ListenDriver.connected` or :meth:`~ListenDriver.connect_failed`;
- :class:`Send` ``data``; on a socket error report
  :meth:`~ListenDriver.connection_lost`;
- :class:`Receive`, waiting at most ``timeout`` seconds; report
  :meth:`~ListenDriver.data_received` (``b""`` at end of file),
  :meth:`~ListenDriver.timed_out` or :meth:`~ListenDriver.connection_lost`;
- :class:`Sleep` ``delay`` seconds (the policy's backoff);
- :class:`Deliver` ``items`` to the caller;
- :class:`Disconnect`: close the connection of the ask that ended;
- :class:`Stop`: the policy gave up; close everything and return.

The driver owns each ask's :class:`ProxyConnection`, the
:class:`ProxyPolicy`, the idle timeout and the choice of what the caller
sees. Its states and what moves it between them are one table,
:data:`LISTEN_TRANSITIONS`; the code looks each (state, input) pair up and
does the outcome found there. A pair the table lacks is a mistake of the
adapter: :class:`LocalProtocolError`.

Nothing here opens sockets, sleeps, reads a clock or draws random numbers:
``now`` and the jitter source are parameters.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Final

from ..client.connection import ProxyConnection
from ..client.policy import ProxyPolicy
from ..client.urls import check_token_transport, parse_url
from ..errors import LocalProtocolError
from ..events import (
    NEED_DATA,
    AttemptsExhausted,
    ConnectionFailed,
    Event,
    NotificationReceived,
    ReaskNeeded,
    StreamBroken,
    StreamOpened,
)
from ..mcp.model import Notification
from ..wire.framing import DEFAULT_MAX_FRAME_SIZE
from ..wire.profiles import Profile
from .actions import Connect, Deliver, Disconnect, ListenAction, Receive, Send, Sleep, Stop
from .settings import DEFAULT_KEEPALIVE_INTERVAL, check_positive

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "LISTEN_TRANSITIONS",
    "TLS_HINT",
    "ListenDriver",
    "ListenInput",
    "ListenOutcome",
    "ListenState",
    "idle_timeout_reason",
]

#: Seconds a listener waits for a TCP connection to be made.
DEFAULT_CONNECT_TIMEOUT: Final = 10.0


def idle_timeout_reason(seconds: float) -> str:
    """The ``StreamBroken`` reason of a path that stayed silent too long."""
    return f"idle timeout: no data for {seconds:g} s"


#: Added to the ``StreamBroken`` reason of a plain ``http://`` connection that ended before
#: any byte of an answer: what a TLS server does with a request that is not TLS.
TLS_HINT: Final = "; if the server speaks TLS, use an https:// URL"


_DISCONNECT: Final = Disconnect()
_STOP: Final = Stop()


# --- the table -------------------------------------------------------------------------------


class ListenState(enum.Enum):
    """Where a listener is."""

    #: No ask open: the next action is a sleep or a new ask.
    IDLE = "idle"
    #: :class:`Connect` was returned; waiting for its outcome.
    CONNECTING = "connecting"
    #: Connected; the ask is sent and the path is read.
    OPEN = "open"
    #: The policy gave up: nothing more to do.
    STOPPED = "stopped"


class ListenInput(enum.Enum):
    """What happens to a listener.

    ``next_action()`` is one of four inputs, chosen by the policy (see
    ``_next_input``); ``data_received()`` is one of two, chosen by whether
    the data ended the path.
    """

    ASK_DUE = "next_action(), the next ask may start"
    ASK_LATER = "next_action(), the next ask starts later"
    GIVE_UP = "next_action(), the policy gave up"
    READ = "next_action(), an ask is open"
    CONNECTED = "connected()"
    CONNECT_FAILED = "connect_failed()"
    DATA = "data_received(), the path goes on"
    DATA_ENDS = "data_received(), the path ended"
    LOST = "connection_lost()"
    TIMED_OUT = "timed_out()"


class ListenOutcome(enum.Enum):
    """What a transition does besides changing the state."""

    CONNECT = "ask started; Connect"
    SLEEP = "Sleep until the next ask"
    STOP = "Stop"
    RECEIVE = "Receive"
    SEND_ASK = "Send the ask"
    FAIL = "ConnectionFailed; the policy's answer"
    DELIVER = "Deliver what arrived"
    END = "Deliver; Disconnect; the policy's answer"
    CUT = "StreamBroken (connection lost); Disconnect; the policy's answer"
    SILENCE = "StreamBroken (idle timeout); Disconnect; the policy's answer"


_IDLE, _CONNECTING, _OPEN, _STOPPED = ListenState
_In = ListenInput
_Out = ListenOutcome

#: (state, input) -> (next state, outcome). A pair that is not here is a
#: mistake of the adapter and raises :class:`LocalProtocolError`.
LISTEN_TRANSITIONS: Final[
    Mapping[tuple[ListenState, ListenInput], tuple[ListenState, ListenOutcome]]
] = {
    # Between asks the policy decides: now, later, or never again.
    (_IDLE, _In.ASK_DUE): (_CONNECTING, _Out.CONNECT),
    (_IDLE, _In.ASK_LATER): (_IDLE, _Out.SLEEP),
    (_IDLE, _In.GIVE_UP): (_STOPPED, _Out.STOP),
    (_STOPPED, _In.GIVE_UP): (_STOPPED, _Out.STOP),
    # One ask: a connection, the request, then the path until it ends.
    (_CONNECTING, _In.CONNECTED): (_OPEN, _Out.SEND_ASK),
    (_CONNECTING, _In.CONNECT_FAILED): (_IDLE, _Out.FAIL),
    (_OPEN, _In.READ): (_OPEN, _Out.RECEIVE),
    (_OPEN, _In.DATA): (_OPEN, _Out.DELIVER),
    (_OPEN, _In.DATA_ENDS): (_IDLE, _Out.END),
    # A reset, and a silence longer than three keep-alive intervals, are abrupt ends.
    (_OPEN, _In.LOST): (_IDLE, _Out.CUT),
    (_OPEN, _In.TIMED_OUT): (_IDLE, _Out.SILENCE),
}

_DATA_STATES: Final = frozenset(
    state for (state, what) in LISTEN_TRANSITIONS if what in (_In.DATA, _In.DATA_ENDS)
)


class ListenDriver:
    """The listener's decisions, with the I/O left to the adapter.

    Each ask is one :class:`ProxyConnection` on a fresh connection; the
    :class:`ProxyPolicy` says when the next ask may start. The adapter calls
    :meth:`next_action` and performs what it returns, reporting the outcome
    of ``Connect`` and ``Receive`` (and a failed ``Send``) with the methods
    named on those actions. ``now`` is the adapter's monotonic clock in
    seconds; ``random`` draws the backoff jitter, a uniform float in
    ``[0, 1)`` (the adapters pass :func:`random.random`). Without it, every
    delay is the middle of its jitter range.

    With ``events`` false only notifications are delivered; with ``events``
    true every event is: the connection's events, :class:`ConnectionFailed`,
    :class:`RetryScheduled` and :class:`AttemptsExhausted`.

    A path that stays silent for ``3 * keepalive_interval`` seconds (not
    even a keep-alive frame) is broken: the driver ends it with
    ``StreamBroken(reason="idle timeout: no data for N s")`` and asks again.

    The ask is built once here, as every attempt builds it: a ``token`` (or
    an authority) that cannot go into a request (empty, non-ASCII, a control
    character, trailing white space...) is a :class:`ValueError` now, not a
    failure of the first attempt. So is a ``token`` that would go in
    cleartext (an ``http://`` URL) to a host that is not loopback, unless
    ``allow_plaintext_token`` (:func:`~.urls.check_token_transport`).
    An ``https://`` URL is the adapters' to wrap in TLS: the driver sees
    the same bytes, and connects to port 443 unless told another.
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
        allow_plaintext_token: bool = False,
    ) -> None:
        check_positive("keepalive_interval", keepalive_interval)
        check_positive("connect_timeout", connect_timeout)
        self.endpoint = parse_url(url)
        check_token_transport(self.endpoint, token, allow_plaintext_token=allow_plaintext_token)
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
        self._random = random if random is not None else _middle
        self._connect_timeout = connect_timeout
        self._receive = Receive(timeout=self.idle_timeout)
        self._state = ListenState.IDLE
        self._connection: ProxyConnection | None = None
        #: True while a plain HTTP connection got nothing back and was not
        #: given up for silence: if it ends now, the server may speak TLS.
        self._tls_unsaid = False
        self._actions: deque[ListenAction] = deque()
        try:
            self._new_connection()
        except LocalProtocolError as error:
            raise ValueError(f"the listener cannot ask: {error}") from None

    @property
    def state(self) -> ListenState:
        """Where the listener is (see :data:`LISTEN_TRANSITIONS`)."""
        return self._state

    @property
    def connection(self) -> ProxyConnection | None:
        """The :class:`ProxyConnection` of the ask in progress, if any."""
        return self._connection

    def next_action(self, now: float) -> ListenAction:
        """What the adapter does next."""
        if self._actions:
            return self._actions.popleft()
        action: ListenAction = self._step(self._next_input(now), now)
        return action

    def connected(self, now: float) -> None:
        """The connection of the current ask is made: send the ask."""
        self._step(_In.CONNECTED, now)

    def connect_failed(self, now: float, reason: str) -> None:
        """No connection could be made for the current ask; ``reason`` says why."""
        self._step(_In.CONNECT_FAILED, now, reason)

    def data_received(self, now: float, data: bytes) -> None:
        """Bytes arrived on the path; ``b""`` is the end of file."""
        connection = self._connection
        if self._state not in _DATA_STATES or connection is None:
            raise LocalProtocolError(self._refusal(_In.DATA))
        if data:
            self._tls_unsaid = False
        connection.receive_data(data)
        delivered, ended = self._drain(now, connection)
        self._step(_In.DATA_ENDS if ended else _In.DATA, now, delivered)

    def connection_lost(self, now: float, reason: str) -> None:
        """Sending or receiving failed (reset, broken pipe): the path ended abruptly.

        ``reason`` (for people) says how; the path ends as ``StreamBroken``
        whatever its body's framing.
        """
        self._step(_In.LOST, now, f"the connection was lost: {reason}")

    def timed_out(self, now: float) -> None:
        """``Receive`` waited :attr:`idle_timeout` seconds and got nothing."""
        self._tls_unsaid = False  # a TLS server answers a request that is not TLS at once
        self._step(_In.TIMED_OUT, now, idle_timeout_reason(self.idle_timeout))

    # -- internals ----------------------------------------------------------------

    def _next_input(self, now: float) -> ListenInput:
        """Which input ``next_action(now)`` is: the policy's say on the next ask."""
        policy = self.policy
        if policy.exhausted:
            return _In.GIVE_UP
        ask_at = policy.ask_at()
        if ask_at is None:
            return _In.READ
        return _In.ASK_LATER if ask_at > now else _In.ASK_DUE

    def _refusal(self, what: ListenInput) -> str:
        call = what.value.split(",")[0]
        return f"{call} is not allowed now: the listener is {self._state.value}"

    def _step(self, what: ListenInput, now: float, value: Any = None) -> Any:
        try:
            state, outcome = LISTEN_TRANSITIONS[(self._state, what)]
        except KeyError:
            raise LocalProtocolError(self._refusal(what)) from None
        self._state = state
        return _HANDLERS[outcome](self, now, value)

    def _connect(self, now: float, value: object) -> Connect:
        self.policy.ask_started(now)
        self._connection = self._new_connection()
        self._tls_unsaid = not self.endpoint.tls
        endpoint = self.endpoint
        return Connect(host=endpoint.host, port=endpoint.port, timeout=self._connect_timeout)

    def _sleep(self, now: float, value: object) -> Sleep:
        ask_at = self.policy.ask_at()
        assert ask_at is not None
        return Sleep(delay=ask_at - now)

    def _stop(self, now: float, value: object) -> Stop:
        return _STOP

    def _receive_next(self, now: float, value: object) -> Receive:
        return self._receive

    def _send_ask(self, now: float, value: object) -> None:
        assert self._connection is not None
        self._actions.append(Send(data=self._connection.data_to_send()))

    def _fail(self, now: float, reason: str) -> None:
        self._connection = None
        delivered: list[Notification | Event] = []
        if self._events:
            delivered.append(ConnectionFailed(reason=reason))
        self._end_ask(now, delivered)

    def _deliver(self, now: float, delivered: list[Notification | Event]) -> None:
        if delivered:
            self._actions.append(Deliver(items=tuple(delivered)))

    def _end(self, now: float, delivered: list[Notification | Event]) -> None:
        self._connection = None
        self._actions.append(_DISCONNECT)
        self._end_ask(now, delivered)

    def _cut(self, now: float, reason: str) -> None:
        connection = self._connection
        assert connection is not None
        # The reason replaces the connection's own, whatever the body's framing.
        connection.connection_lost(reason)
        delivered, _ = self._drain(now, connection)
        self._end(now, delivered)

    def _new_connection(self) -> ProxyConnection:
        endpoint = self.endpoint
        return ProxyConnection(
            endpoint.authority,
            token=self._token,
            profile=self._profile,
            max_frame_size=self._max_frame_size,
            target=endpoint.target,
        )

    def _drain(
        self, now: float, connection: ProxyConnection
    ) -> tuple[list[Notification | Event], bool]:
        """What the connection has for the caller, and whether the path ended."""
        delivered: list[Notification | Event] = []
        append = delivered.append
        next_event = connection.next_event
        events = self._events
        policy = self.policy
        # What the policy weighs is whether the path delivered, not how much
        # (a path that delivered is a healthy one): it is told once per read,
        # at the read's first notification, rather than for every one.
        told = False
        while True:
            event = next_event()
            if event is NEED_DATA:
                return delivered, False
            if type(event) is NotificationReceived:
                if not told:
                    policy.notification_received()
                    told = True
                append(event if events else event.notification)
                continue
            if isinstance(event, StreamOpened):
                policy.path_opened(now)
            elif type(event) is StreamBroken and self._tls_unsaid:
                # Over http://, an end before any byte of an answer is what a
                # TLS server does with a request that is not TLS: say so.
                event = StreamBroken(reason=event.reason + TLS_HINT)
            if events:
                delivered.append(event)
            if isinstance(event, ReaskNeeded):
                return delivered, True

    def _end_ask(self, now: float, delivered: list[Notification | Event]) -> None:
        outcome = self.policy.ask_ended(now, self._random())
        if self._events:
            delivered.append(outcome)
        if delivered:
            self._actions.append(Deliver(items=tuple(delivered)))
        # After AttemptsExhausted the next next_action() is GIVE_UP: Stop.
        assert isinstance(outcome, AttemptsExhausted) is self.policy.exhausted


def _middle() -> float:
    """The jitter draw without a random source: the middle of the range."""
    return 0.5


_HANDLERS: Final[Mapping[ListenOutcome, Callable[[ListenDriver, float, Any], Any]]] = {
    _Out.CONNECT: ListenDriver._connect,
    _Out.SLEEP: ListenDriver._sleep,
    _Out.STOP: ListenDriver._stop,
    _Out.RECEIVE: ListenDriver._receive_next,
    _Out.SEND_ASK: ListenDriver._send_ask,
    _Out.FAIL: ListenDriver._fail,
    _Out.DELIVER: ListenDriver._deliver,
    _Out.END: ListenDriver._end,
    _Out.CUT: ListenDriver._cut,
    _Out.SILENCE: ListenDriver._cut,
}
