"""What the sans-IO drivers ask their adapter to do, and the reports that answer it.

A driver does no I/O: its ``next_action(now)`` returns one of these, the
adapter performs it, reports what happened with the driver's methods (named
on each action), and asks for the next one.

- The listener (:class:`~.listen.ListenDriver`): :class:`Connect`,
  :class:`Send`, :class:`Receive`, :class:`Sleep`, :class:`Deliver`,
  :class:`Disconnect`, :class:`Stop` (:data:`ListenAction`). A proxy's
  exchange (:class:`~.proxy.ExchangeDriver`) asks for the same ones and
  takes the same reports: both are a :class:`ClientDriver`, which answers
  those reports once for both, so one adapter loop performs both.
- A served connection (:class:`~.serve.ServingConnection`): :class:`Write`,
  :class:`WaitUntil`, :class:`RunHandler`, :class:`Close`
  (:data:`ServeAction`).

Like events, actions are frozen, slotted, keyword-only attrs classes.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

import attrs

from ..errors import LocalProtocolError
from ..events import Event
from ..mcp.model import ErrorData, Notification
from ..transitions import Handler, TableMachine
from ..wire.asks import Ask

if TYPE_CHECKING:
    from ..client.connection import ExchangeConnection, ProxyConnection
    from ..client.urls import Endpoint

__all__ = [
    "ClientDriver",
    "Close",
    "Connect",
    "Deliver",
    "Disconnect",
    "ExchangeHandler",
    "ExchangeResult",
    "ListenAction",
    "Receive",
    "Rules",
    "RunHandler",
    "Send",
    "ServeAction",
    "Sleep",
    "Stop",
    "WaitUntil",
    "Write",
]

# --- the listener ----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Connect:
    """Open a TCP connection to ``host``:``port`` within ``timeout`` seconds.

    Report :meth:`ClientDriver.connected` or :meth:`ClientDriver.connect_failed`.
    """

    host: str
    port: int
    timeout: float


@attrs.frozen(kw_only=True)
class Send:
    """Write ``data``; on a socket error report :meth:`ClientDriver.connection_lost`."""

    data: bytes


@attrs.frozen(kw_only=True)
class Receive:
    """Read what the socket has (one large read), waiting at most ``timeout`` seconds.

    Report :meth:`ClientDriver.data_received` (``b""`` at end of file),
    :meth:`ClientDriver.timed_out` or :meth:`ClientDriver.connection_lost`.
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
    """The driver is finished: close everything and return."""


ListenAction = Connect | Send | Receive | Sleep | Deliver | Disconnect | Stop


_DISCONNECT: Final = Disconnect()
_STOP: Final = Stop()

#: A driver's table, ``(state, input) -> (next state, outcome)``, and its outcomes' handlers.
Rules = tuple[Mapping[Any, tuple[enum.Enum, enum.Enum]], Mapping[Any, Handler[Any]]]


class ClientDriver(TableMachine[enum.Enum, enum.Enum]):
    """A driver of outgoing connections: the actions above, and the reports they name.

    :class:`~.listen.ListenDriver` and :class:`~.proxy.ExchangeDriver` are
    both; an adapter's loop that performs one performs the other. Each ask
    is one connection: ``Connect``, the ask sent (``Send``), its answer read
    (``Receive``) until it ends (``Disconnect``). The reports are answered
    here, once for both: each is an input of the subclass's table, and its
    input enum names them ``CONNECTED``, ``CONNECT_FAILED``, ``DATA``,
    ``DATA_ENDS``, ``LOST`` and ``TIMED_OUT``. A move's value is what the
    call brought (``None`` when nothing); its time, the adapter's clock at
    the call, is ``_now`` while the handler runs.

    A subclass calls ``__init__`` with where to connect and how long
    ``Connect`` and ``Receive`` may wait, sets ``_INPUTS`` (its input enum) and
    ``_NAME`` (what the refusals call it), and says which table it follows
    (:meth:`_rules`), which input ``next_action()`` is (:meth:`_next_input`)
    and what the bytes that arrive bring (:meth:`_received`).
    """

    #: Where the connections go.
    endpoint: Endpoint
    _INPUTS: ClassVar[type[enum.Enum]]
    _NAME: ClassVar[str]
    #: The connection of the ask in progress.
    _connection: ProxyConnection | ExchangeConnection | None

    def __init__(
        self,
        endpoint: Endpoint,
        state: enum.Enum,
        *,
        connect_timeout: float,
        receive_timeout: float,
    ) -> None:
        self.endpoint = endpoint
        self._state = state
        self._connect_action = Connect(
            host=endpoint.host, port=endpoint.port, timeout=connect_timeout
        )
        self._receive_action = Receive(timeout=receive_timeout)
        #: The adapter's clock at the call being answered: the time of its move.
        self._now = 0.0
        inputs = self._INPUTS
        #: What bytes that arrive are: the answer goes on, or it ended (looked up once, as
        #: every read is one of them).
        self._data_inputs = (inputs["DATA"], inputs["DATA_ENDS"])
        #: What the moves queued for the adapter, given out before the next move.
        self._actions: deque[ListenAction] = deque()

    # -- the adapter's calls --------------------------------------------------------------------

    def next_action(self, now: float) -> ListenAction:
        """What the adapter does next."""
        if self._actions:
            return self._actions.popleft()
        action: ListenAction = self._move(self._next_input(now), now)
        return action

    def connected(self, now: float) -> None:
        """The connection of the ask is made: send the ask."""
        self._move(self._INPUTS["CONNECTED"], now)

    def connect_failed(self, now: float, reason: str) -> None:
        """No connection could be made for the ask; ``reason`` says why."""
        self._move(self._INPUTS["CONNECT_FAILED"], now, reason)

    def data_received(self, now: float, data: bytes) -> None:
        """Bytes of the answer arrived; ``b""`` is the end of file."""
        goes_on, ends = self._data_inputs
        table, handlers = self._rules()
        state = self._state
        if (state, goes_on) not in table and (state, ends) not in table:
            # Refused before the connection takes the bytes: a refusal changes nothing.
            raise LocalProtocolError(self._refusal(goes_on))
        self._now = now
        brought, ended = self._received(data)
        self._fire(table, handlers, ends if ended else goes_on, brought)

    def connection_lost(self, now: float, reason: str) -> None:
        """Sending or receiving failed (reset, broken pipe): the answer ends abruptly.

        ``reason`` (for people) says how; the answer ends as ``StreamBroken``
        whatever its body's framing.
        """
        self._move(self._INPUTS["LOST"], now, f"the connection was lost: {reason}")

    def timed_out(self, now: float) -> None:
        """``Receive`` waited its ``timeout`` and got nothing."""
        self._move(self._INPUTS["TIMED_OUT"], now)

    # -- what a subclass says -------------------------------------------------------------------

    def _rules(self) -> Rules:
        """The table and the handlers, as the subclass's module holds them now."""
        raise NotImplementedError

    def _next_input(self, now: float) -> enum.Enum:
        """Which input ``next_action(now)`` is."""
        raise NotImplementedError

    def _received(self, data: bytes) -> tuple[object, bool]:
        """Give ``data`` to the connection: what the move carries, and whether the answer ended."""
        raise NotImplementedError

    # -- the moves and the outcomes both drivers share ------------------------------------------

    def _refusal(self, what: enum.Enum) -> str:
        call = what.value.split(",")[0]  # the call of "next_action(), an ask is open"
        return f"{call} is not allowed now: the {self._NAME} is {self._state.value}"

    def _move(self, what: enum.Enum, now: float, value: object = None) -> Any:
        """Make the move the table gives ``what`` at ``now``, and return its result."""
        self._now = now
        table, handlers = self._rules()
        return self._fire(table, handlers, what, value)

    def _send_ask(self, value: object) -> None:
        connection = self._connection
        assert connection is not None  # made when the connection was asked for
        self._actions.append(Send(data=connection.data_to_send()))

    def _receive_next(self, value: object) -> Receive:
        return self._receive_action

    def _stop(self, value: object) -> Stop:
        return _STOP

    def _disconnect(self) -> None:
        self._actions.append(_DISCONNECT)


# --- a served connection ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Write:
    """Write ``data`` to the socket (all of it), then ask for the next action.

    If the peer takes no byte of it for the server's ``stall_timeout``
    seconds, stop and report :meth:`~.serve.ServingConnection.write_stalled`
    instead (the connection is then cut off).
    """

    data: bytes


@attrs.frozen(kw_only=True)
class WaitUntil:
    """Wait until ``deadline`` (``None``: no deadline), the ``wake`` callback, or data.

    While waiting, read the socket if ``wants_read`` and report what comes
    with :meth:`~.serve.ServingConnection.data_received`; then ask for the
    next action. A deadline already past (more of the path is queued) means
    no waiting, only a turn for the rest of the program: the other
    connections, and a listener in the same process.
    """

    deadline: float | None
    wants_read: bool


@attrs.frozen(kw_only=True)
class RunHandler:
    """Call the exchange handler with ``ask``.

    Report its answer with :meth:`~.serve.ServingConnection.handler_answered`, or
    :meth:`~.serve.ServingConnection.handler_failed` if it raised. The connection
    may go on meanwhile (an async adapter keeps reading and asking for
    actions).
    """

    ask: Ask


@attrs.frozen(kw_only=True)
class Close:
    """Close the socket: everything there was to write has been written.

    With ``abort``, close it abruptly (a reset: nothing more may be written,
    and what is unsent is thrown away). With ``linger`` seconds, close
    lingering: shut the sending side down, then read and discard what the
    peer still sends, until it closes or ``linger`` seconds pass, so that it
    reads the refusal it was sent rather than a reset.
    """

    abort: bool = False
    linger: float = 0.0


ServeAction = Write | WaitUntil | RunHandler | Close

#: What an exchange handler returns: a result object (or its JSON bytes),
#: an :class:`ErrorData` to answer with an error, or ``None`` to decline.
ExchangeResult = Mapping[str, Any] | bytes | ErrorData | None
#: Answers one exchange of kinds 0-3 (:class:`RunHandler`). The async
#: adapters also accept a handler that returns an awaitable.
ExchangeHandler = Callable[[Ask], ExchangeResult | Awaitable[ExchangeResult]]
