"""What the three adapters share on the I/O side.

Every decision is taken by the sans-IO drivers,
:class:`~diverge_notifications.sansio.listening.ListenDriver` and
:class:`~diverge_notifications.sansio.serving.ServingConnection`; what is
left here needs the world outside: the read size, the random source
(:func:`listen_driver`), describing an :class:`OSError`, calling the user's
exchange handler; and what the three modules' signatures and ``Server``
classes have in common (the options' types, :class:`ServerBase`,
:class:`ClosedOnExit`).
"""

from __future__ import annotations

import errno
import inspect
import random as _random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, cast

from ..sansio.actions import ExchangeHandler, ExchangeResult
from ..sansio.asks import Ask
from ..sansio.hub import Hub
from ..sansio.listening import ListenDriver
from ..sansio.policy import ProxyPolicy
from ..sansio.sequence import Profile
from ..sansio.serving import ServeSettings, ServingConnection
from ..sansio.urls import format_url

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "READ_SIZE",
    "ClosedOnExit",
    "ListenOptions",
    "ServeOptions",
    "ServerBase",
    "call_exchange_handler",
    "describe_error",
    "listen_driver",
    "run_exchange_handler",
]

#: Bytes asked of the socket per read: large, so that a busy path costs few calls.
READ_SIZE = 256 * 1024


class ListenOptions(TypedDict, total=False):
    """The options of the three ``listen()``; see the asyncio ``listen`` and ``ListenDriver``."""

    #: Sent as ``Authorization: Bearer <token>``.
    token: str | None
    #: Yield every event, not just notifications.
    events: bool
    #: When to ask again (default ``ProxyPolicy(require_exchange=False)``).
    policy: ProxyPolicy | None
    #: The server's keep-alive interval; three times that much silence is a broken path.
    keepalive_interval: float
    #: The sequence rules the path follows.
    profile: Profile
    #: A longer frame breaks the path.
    max_frame_size: int
    #: The jitter source, a uniform float in ``[0, 1)`` (default :func:`random.random`).
    random: Callable[[], float] | None
    #: Seconds a TCP connection may take.
    connect_timeout: float


class ServeOptions(TypedDict, total=False):
    """The options of the three ``serve()`` but the exchange handler; see ``ServeSettings``."""

    #: Require ``Authorization: Bearer <token>`` (401 otherwise).
    token: str | None
    #: Seconds without output before a keep-alive frame.
    keepalive_interval: float
    #: The sequence rules the writes follow.
    profile: Profile
    #: Each subscriber's queue (default the hub's).
    queue_size: int | None
    #: Notifications per HTTP chunk at most.
    max_batch: int
    #: How long ``close()`` waits for peers to take the end of their paths.
    close_timeout: float
    #: How long a new connection has to complete its ask.
    ask_timeout: float


def listen_driver(url: str, **options: Unpack[ListenOptions]) -> ListenDriver:
    """The :class:`ListenDriver` of a ``listen(url, ...)`` call: its arguments, checked now.

    The jitter source is :func:`random.random` unless ``random`` is given.
    """
    if options.get("random") is None:
        options["random"] = _random.random
    return ListenDriver(url, **options)


def describe_error(error: BaseException) -> str:
    """A short, stable description of a socket error, for ``ConnectionFailed``."""
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


def _report(serving: ServingConnection, result: object) -> None:
    # An exception, raised or returned, is answered as an internal error.
    if isinstance(result, BaseException):
        serving.handler_failed(describe_error(result))
    else:
        serving.handler_answered(cast(ExchangeResult, result))


def call_exchange_handler(
    serving: ServingConnection, handler: Callable[[Ask], ExchangeResult], ask: Ask
) -> None:
    """Perform ``RunHandler(ask)`` with a handler that returns its answer (the blocking adapter)."""
    try:
        result: object = handler(ask)
    except Exception as error:
        result = error
    _report(serving, result)


async def run_exchange_handler(
    serving: ServingConnection, handler: ExchangeHandler, ask: Ask
) -> None:
    """Perform ``RunHandler(ask)`` for the async adapters: an awaitable answer is awaited.

    The handler's exception (not a cancellation) becomes the internal error answered.
    """
    try:
        result: object = handler(ask)
        if inspect.isawaitable(result):
            result = await result
    except Exception as error:
        result = error
    _report(serving, result)


_Closing = TypeVar("_Closing", bound="ClosedOnExit")


class ClosedOnExit:
    """A ``with`` block around it calls :meth:`close` on exit (the blocking adapter's objects)."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self: _Closing) -> _Closing:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ServerBase:
    """What the adapters' ``Server`` classes share: the hub, the options, the address.

    ``host`` and ``port`` are set once the server listens.
    """

    def __init__(self, hub: Hub, settings: ServeSettings[Any]) -> None:
        self.hub = hub
        self.host = ""
        self.port = 0
        self._settings = settings
        self._connections: set[Any] = set()
        #: Set by close(): from then on, what is accepted is closed at once.
        self._closing = False

    @property
    def connections(self) -> int:
        """How many connections are open."""
        return len(self._connections)

    @property
    def keepalive_interval(self) -> float:
        """Seconds without output after which a path gets a keep-alive."""
        return self._settings.keepalive_interval

    @property
    def url(self) -> str:
        """The base URL, ``http://host:port``."""
        return format_url(self.host, self.port)

    def publish(self, item: object) -> int:
        """``hub.publish(item)``: call it from the thread that runs the server."""
        return self.hub.publish(item)
