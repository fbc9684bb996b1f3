"""What the sans-IO drivers ask their adapter to do.

A driver does no I/O: its ``next_action(now)`` returns one of these, the
adapter performs it, reports what happened with the driver's methods (named
on each action), and asks for the next one.

- The listener (:class:`~.listening.ListenDriver`): :class:`Connect`,
  :class:`Send`, :class:`Receive`, :class:`Sleep`, :class:`Deliver`,
  :class:`Disconnect`, :class:`Stop` (:data:`ListenAction`). A proxy's
  exchange (:class:`~.proxying.ExchangeDriver`) asks for the same ones and
  takes the same reports (:class:`ClientDriver`), so one adapter loop
  performs both.
- A served connection (:class:`~.serving.ServingConnection`): :class:`Write`,
  :class:`WaitUntil`, :class:`RunHandler`, :class:`Close`
  (:data:`ServeAction`).

Like events, actions are frozen, slotted, keyword-only attrs classes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from ..events import Event
from ..mcp.model import ErrorData, Notification
from ..wire.asks import Ask

if TYPE_CHECKING:
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

    Report :meth:`~.listening.ListenDriver.connected` or
    :meth:`~.listening.ListenDriver.connect_failed`.
    """

    host: str
    port: int
    timeout: float


@attrs.frozen(kw_only=True)
class Send:
    """Write ``data``; on a socket error report :meth:`~.listening.ListenDriver.connection_lost`."""

    data: bytes


@attrs.frozen(kw_only=True)
class Receive:
    """Read what the socket has (one large read), waiting at most ``timeout`` seconds.

    Report :meth:`~.listening.ListenDriver.data_received` (``b""`` at end of file),
    :meth:`~.listening.ListenDriver.timed_out` or :meth:`~.listening.ListenDriver.connection_lost`.
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


class ClientDriver(Protocol):
    """A driver of outgoing connections: the actions above, and the reports they name.

    :class:`~.listening.ListenDriver` and :class:`~.proxying.ExchangeDriver`
    are both; an adapter's loop that performs one performs the other.
    """

    @property
    def endpoint(self) -> Endpoint: ...
    def next_action(self, now: float) -> ListenAction: ...
    def connected(self, now: float) -> None: ...
    def connect_failed(self, now: float, reason: str) -> None: ...
    def data_received(self, now: float, data: bytes) -> None: ...
    def connection_lost(self, now: float, reason: str) -> None: ...
    def timed_out(self, now: float) -> None: ...


# --- a served connection ---------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Write:
    """Write ``data`` to the socket (all of it), then ask for the next action.

    If the peer takes no byte of it for the server's ``stall_timeout``
    seconds, stop and report :meth:`~.serving.ServingConnection.write_stalled`
    instead (the connection is then cut off).
    """

    data: bytes


@attrs.frozen(kw_only=True)
class WaitUntil:
    """Wait until ``deadline`` (``None``: no deadline), the ``wake`` callback, or data.

    While waiting, read the socket if ``wants_read`` and report what comes
    with :meth:`~.serving.ServingConnection.data_received`; then ask for the
    next action. A deadline already past (more of the path is queued) means
    no waiting, only a turn for the rest of the program: the other
    connections, and a listener in the same process.
    """

    deadline: float | None
    wants_read: bool


@attrs.frozen(kw_only=True)
class RunHandler:
    """Call the exchange handler with ``ask``.

    Report its answer with :meth:`~.serving.ServingConnection.handler_answered`, or
    :meth:`~.serving.ServingConnection.handler_failed` if it raised. The connection
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
