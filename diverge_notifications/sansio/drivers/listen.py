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

from collections.abc import Callable, Mapping
from typing import Any, Final

from ..client.connection import ProxyConnection
from ..client.policy import ProxyPolicy
from ..client.urls import Endpoint, check_token_transport, parse_url
from ..errors import LocalProtocolError
from ..events import (
    NEED_DATA,
    AttemptsExhausted,
    ConnectionFailed,
    Event,
    NotificationReceived,
    ReaskNeeded,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
)
from ..mcp.model import Notification
from ..transitions import TableEnum
from .actions import ClientDriver, Connect, Deliver, ListenAction, Receive, Rules, Sleep
from .settings import DEFAULT_CONNECT_TIMEOUT, ClientSettings

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "LISTEN_TRANSITIONS",
    "TLS_HINT",
    "ListenDriver",
    "ListenInput",
    "ListenOutcome",
    "ListenState",
    "head_timeout_reason",
    "idle_timeout_reason",
]


def idle_timeout_reason(seconds: float) -> str:
    """The ``StreamBroken`` reason of a path that stayed silent too long."""
    return f"idle timeout: no data for {seconds:g} s"


def head_timeout_reason(seconds: float) -> str:
    """The ``StreamBroken`` reason of an answer whose head was not complete in time."""
    return f"head timeout: the answer's head was not complete within {seconds:g} s"


#: Added to the ``StreamBroken`` reason of a plain ``http://`` connection that ended before
#: any byte of an answer: what a TLS server does with a request that is not TLS.
TLS_HINT: Final = "; if the server speaks TLS, use an https:// URL"


# --- the table -------------------------------------------------------------------------------


class ListenState(TableEnum):
    """Where a listener is."""

    #: No ask open: the next action is a sleep or a new ask.
    IDLE = "idle"
    #: :class:`Connect` was returned; waiting for its outcome.
    CONNECTING = "connecting"
    #: Connected; the ask is sent and the path is read.
    OPEN = "open"
    #: The policy gave up: nothing more to do.
    STOPPED = "stopped"


class ListenInput(TableEnum):
    """What happens to a listener.

    ``next_action()`` is one of six inputs, chosen by the policy and by
    what waits (see ``_next_input``); ``data_received()`` is one of two,
    chosen by whether the data ended the path.
    """

    ASK_DUE = "next_action(), the next ask may start"
    ASK_LATER = "next_action(), the next ask starts later"
    GIVE_UP = "next_action(), the policy gave up"
    READ = "next_action(), an ask is open"
    MORE = "next_action(), more of what was read waits"
    CONNECTED = "connected()"
    CONNECT_FAILED = "connect_failed()"
    DATA = "data_received(), the path goes on"
    DATA_ENDS = "data_received(), the path ended"
    LOST = "connection_lost()"
    TIMED_OUT = "timed_out()"
    HEAD_LATE = "next_action() or timed_out(), past the head's deadline"


class ListenOutcome(TableEnum):
    """What a transition does besides changing the state."""

    CONNECT = "ask started; Connect"
    SLEEP = "Sleep until the next ask"
    STOP = "Stop"
    RECEIVE = "Receive"
    SEND_ASK = "Send the ask"
    FAIL = "ConnectionFailed; the policy's answer"
    DELIVER = "Deliver what arrived"
    DELIVER_MORE = "Deliver more of what was read; Receive once it is all delivered"
    END = "Deliver; Disconnect; the policy's answer"
    CUT = "StreamBroken (connection lost); Disconnect; the policy's answer"
    SILENCE = "StreamBroken (idle timeout); Disconnect; the policy's answer"
    LATE = "StreamBroken (head timeout); Disconnect; the policy's answer"


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
    # What a read brought is delivered a step of the connection at a time
    # (at most a few KB of messages, or one message), each before the next
    # is decoded: a read of 256 KB of 8 KB notifications decoded whole
    # before any of it is let go costs 7 % more or worse, for the memory its
    # values hold at once (bench/bench_floor.py, section 1, "256 KiB reads").
    (_OPEN, _In.MORE): (_OPEN, _Out.DELIVER_MORE),
    (_OPEN, _In.DATA_ENDS): (_IDLE, _Out.END),
    # A reset, and a silence longer than three keep-alive intervals, are abrupt ends.
    (_OPEN, _In.LOST): (_IDLE, _Out.CUT),
    (_OPEN, _In.TIMED_OUT): (_IDLE, _Out.SILENCE),
    # An answer's head has head_timeout, however its bytes trickle in: a
    # byte a second, or a 1xx head now and then, holds nobody for ever.
    (_OPEN, _In.HEAD_LATE): (_IDLE, _Out.LATE),
}


class ListenDriver(ClientDriver):
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
    So is an answer whose head is not complete ``head_timeout`` seconds
    after the ask was sent (:func:`head_timeout_reason`), however its bytes
    trickle in.

    ``url`` is the server's base URL, or its :class:`~..client.urls.Endpoint`
    already parsed (a proxy's readers). The options come whole, as
    :class:`~.settings.ClientSettings`
    (:attr:`settings`; the defaults when omitted), checked once when they
    were made. The first ask is built here, as every attempt
    builds it: a ``token`` (or an authority) that cannot go into a request
    (empty, non-ASCII, a control character, trailing white space...) is a
    :class:`ValueError` now, not a failure of the first attempt. So is a
    ``token`` that would go in cleartext (an ``http://`` URL) to a host
    that is not loopback, unless ``allow_plaintext_token``
    (:func:`~..client.urls.check_token_transport`). An ``https://`` URL is the
    adapters' to wrap in TLS: the driver sees the same bytes, and connects
    to port 443 unless told another.
    """

    _state: ListenState
    _INPUTS = ListenInput
    _NAME = "listener"

    def __init__(
        self,
        url: str | Endpoint,
        settings: ClientSettings | None = None,
        *,
        policy: ProxyPolicy | None = None,
    ) -> None:
        endpoint = parse_url(url) if isinstance(url, str) else url
        if settings is None:
            settings = ClientSettings()
        check_token_transport(
            endpoint, settings.token, allow_plaintext_token=settings.allow_plaintext_token
        )
        self.policy = policy if policy is not None else ProxyPolicy(require_exchange=False)
        if self.policy.ask_at() is None and not self.policy.exhausted:
            raise ValueError(
                "the policy does not allow an ask now; a listener asks without a first "
                "exchange: pass ProxyPolicy(require_exchange=False)"
            )
        #: The options, checked once.
        self.settings = settings
        self.idle_timeout = 3.0 * settings.keepalive_interval
        super().__init__(
            endpoint,
            ListenState.IDLE,
            connect_timeout=settings.connect_timeout,
            receive_timeout=self.idle_timeout,
        )
        self._random = settings.random if settings.random is not None else _middle
        self._connection: ProxyConnection | None = None
        #: True while a plain HTTP connection got nothing back and was not
        #: given up for silence: if it ends now, the server may speak TLS.
        self._tls_unsaid = False
        #: The path of the ask ended by the server's word (its end or its error), not a break.
        self._ended_cleanly = False
        #: When the answer's head must be complete; ``None`` once it is, or with no ask open.
        self._head_deadline: float | None = None
        #: Events of the last read may wait in the connection, not yet delivered.
        self._more = False
        #: The policy was told that the path delivered, since the last read.
        self._told = False
        # The first attempt's connection, made now, so that what no ask could carry is
        # refused here; the first Connect takes it.
        try:
            self._first_connection: ProxyConnection | None = self._new_connection()
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

    # -- what the base asks of a driver ---------------------------------------------

    def _rules(self) -> Rules:
        return LISTEN_TRANSITIONS, _HANDLERS

    def _next_input(self, now: float) -> ListenInput:
        """Which input ``next_action(now)`` is: the policy's say on the next ask."""
        if self._more:
            # Only while an ask is open and its path delivers, where the
            # policy has no say (ask_at() is None): asked first, it spares
            # each step of a read the policy's two questions.
            return _In.MORE
        policy = self.policy
        if policy.exhausted:
            return _In.GIVE_UP
        ask_at = policy.ask_at()
        if ask_at is None:
            return self._read_or_late(now)
        return _In.ASK_LATER if ask_at > now else _In.ASK_DUE

    def _read_or_late(self, now: float) -> ListenInput:
        deadline = self._head_deadline
        if deadline is not None and now >= deadline and self._state is _OPEN:
            return _In.HEAD_LATE
        return _In.READ

    def next_action(self, now: float) -> ListenAction:
        """What the adapter does next."""
        action: ListenAction | None = super().next_action(now)
        # A move that only queued actions (the end of an answer too slow to
        # complete its head) gives the first of them.
        return action if action is not None else self._actions.popleft()

    def timed_out(self, now: float) -> None:
        """``Receive`` waited its ``timeout`` and got nothing."""
        late = self._read_or_late(now) is _In.HEAD_LATE
        self._move(_In.HEAD_LATE if late else _In.TIMED_OUT, now)

    def _received(self, data: bytes) -> tuple[list[Notification | Event], bool]:
        connection = self._connection
        assert connection is not None  # an ask is open in every state that takes data
        if data:
            self._tls_unsaid = False
        self._told = False
        connection.receive_data(data)
        return self._drain(connection, stepwise=True)

    # -- the outcomes -----------------------------------------------------------------

    def _send_ask(self, value: object) -> None:
        self._head_deadline = self._now + self.settings.head_timeout
        super()._send_ask(value)

    def _receive_next(self, value: object) -> Receive:
        deadline = self._head_deadline
        if deadline is None or deadline - self._now >= self.idle_timeout:
            return self._receive_action
        # Not longer than the head has left (the table's HEAD_LATE comes next).
        return Receive(timeout=max(deadline - self._now, _LEAST_WAIT))

    def _connect(self, value: object) -> Connect:
        self.policy.ask_started(self._now)
        first, self._first_connection = self._first_connection, None
        self._connection = first if first is not None else self._new_connection()
        self._tls_unsaid = not self.endpoint.tls
        self._ended_cleanly = False
        return self._connect_action

    def _sleep(self, value: object) -> Sleep:
        ask_at = self.policy.ask_at()
        assert ask_at is not None
        return Sleep(delay=ask_at - self._now)

    def _fail(self, reason: str) -> None:
        self._connection = None
        delivered: list[Notification | Event] = []
        if self.settings.events:
            delivered.append(ConnectionFailed(reason=reason))
        self._end_ask(delivered)

    def _deliver(self, delivered: list[Notification | Event]) -> None:
        if delivered:
            self._actions.append(Deliver(items=tuple(delivered)))

    def _deliver_more(self, value: object) -> ListenAction:
        connection = self._connection
        assert connection is not None  # an ask is open in every state that reads
        delivered, ended = self._drain(connection, stepwise=True)
        if ended:
            # The path ended in what was read: what data_received() does then.
            self._move(self._data_inputs[1], self._now, delivered)
            return self._actions.popleft()
        if not delivered:
            return self._receive_next(value)  # all of the read is delivered
        return Deliver(items=tuple(delivered))

    def _end(self, delivered: list[Notification | Event]) -> None:
        self._connection = None
        self._head_deadline = None
        self._more = False
        self._disconnect()
        self._end_ask(delivered)

    def _cut(self, reason: str) -> None:
        connection = self._connection
        assert connection is not None
        # The reason replaces the connection's own, whatever the body's framing.
        connection.connection_lost(reason)
        delivered, _ = self._drain(connection, stepwise=False)
        self._end(delivered)

    def _silence(self, value: object) -> None:
        self._tls_unsaid = False  # a TLS server answers a request that is not TLS at once
        self._cut(idle_timeout_reason(self.idle_timeout))

    def _late(self, value: object) -> None:
        self._tls_unsaid = False
        self._cut(head_timeout_reason(self.settings.head_timeout))

    # -- internals ----------------------------------------------------------------------

    def _new_connection(self) -> ProxyConnection:
        endpoint = self.endpoint
        settings = self.settings
        return ProxyConnection(
            endpoint.authority,
            token=settings.token,
            profile=settings.profile,
            max_frame_size=settings.max_frame_size,
            target=endpoint.target,
        )

    def _drain(
        self, connection: ProxyConnection, *, stepwise: bool
    ) -> tuple[list[Notification | Event], bool]:
        """What the connection has for the caller, and whether the path ended.

        ``stepwise``: only the notifications of the connection's next step
        (and the events before them), if the path does not end there; the
        rest waits for the next ``MORE``.
        """
        self._more = False
        delivered: list[Notification | Event] = []
        append = delivered.append
        next_event = connection.next_event
        events = self.settings.events
        policy = self.policy
        # What the policy weighs is whether the path delivered, not how much
        # (a path that delivered is a healthy one): it is told once per read,
        # at the read's first notification, rather than for every one.
        while True:
            event = next_event()
            if event is NEED_DATA:
                return delivered, False
            if type(event) is NotificationReceived:
                if not self._told:
                    policy.notification_received()
                    self._told = True
                append(event if events else event.notification)
                if stepwise and not connection.events_decoded:
                    self._more = True
                    return delivered, False
                continue
            if isinstance(event, StreamOpened):
                self._head_deadline = None
                policy.path_opened(self._now)
            elif type(event) is StreamEnded or type(event) is StreamErrored:
                self._ended_cleanly = True
            elif type(event) is StreamBroken and self._tls_unsaid:
                # Over http://, an end before any byte of an answer is what a
                # TLS server does with a request that is not TLS: say so.
                event = StreamBroken(reason=event.reason + TLS_HINT)
            if events:
                delivered.append(event)
            if isinstance(event, ReaskNeeded):
                return delivered, True

    def _end_ask(self, delivered: list[Notification | Event]) -> None:
        outcome = self.policy.ask_ended(self._now, self._random(), clean=self._ended_cleanly)
        if self.settings.events:
            delivered.append(outcome)
        if delivered:
            self._actions.append(Deliver(items=tuple(delivered)))
        # After AttemptsExhausted the next next_action() is GIVE_UP: Stop.
        assert isinstance(outcome, AttemptsExhausted) is self.policy.exhausted


#: The shortest Receive timeout the head's deadline asks for (a zero one may mean "no wait").
_LEAST_WAIT: Final = 0.001


def _middle() -> float:
    """The jitter draw without a random source: the middle of the range."""
    return 0.5


_HANDLERS: Final[Mapping[ListenOutcome, Callable[[ListenDriver, Any], Any]]] = {
    _Out.CONNECT: ListenDriver._connect,
    _Out.SLEEP: ListenDriver._sleep,
    _Out.STOP: ListenDriver._stop,
    _Out.RECEIVE: ListenDriver._receive_next,
    _Out.SEND_ASK: ListenDriver._send_ask,
    _Out.FAIL: ListenDriver._fail,
    _Out.DELIVER: ListenDriver._deliver,
    _Out.DELIVER_MORE: ListenDriver._deliver_more,
    _Out.END: ListenDriver._end,
    _Out.CUT: ListenDriver._cut,
    _Out.SILENCE: ListenDriver._silence,
    _Out.LATE: ListenDriver._late,
}
