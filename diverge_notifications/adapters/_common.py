"""What the three adapters share on the I/O side.

Every decision is taken by the sans-IO drivers,
:class:`~diverge_notifications.sansio.listening.ListenDriver` and
:class:`~diverge_notifications.sansio.serving.ServingConnection`; what is
left here needs the world outside: the read size, the random source and
the TLS context (:func:`listen_driver`, :func:`serve_settings`), describing
an :class:`OSError` (a TLS failure included), calling the user's exchange
handler; and what the three modules' signatures and ``Server`` classes have
in common (the options' types, :class:`ServerBase`, :class:`ClosedOnExit`).
"""

from __future__ import annotations

import errno
import inspect
import random as _random
import ssl
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, cast

from ..sansio.actions import ExchangeHandler, ExchangeResult
from ..sansio.asks import Ask
from ..sansio.hub import Hub
from ..sansio.listening import ListenDriver
from ..sansio.policy import ProxyPolicy
from ..sansio.sequence import Profile
from ..sansio.serving import ServeSettings, ServingConnection
from ..sansio.suspension import SuspensionCounts
from ..sansio.urls import Endpoint, format_url
from .tls import client_context, describe_tls_error

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "READ_SIZE",
    "ClosedOnExit",
    "ListenOptions",
    "ServeOptions",
    "ServerBase",
    "Starting",
    "call_exchange_handler",
    "describe_error",
    "listen_driver",
    "run_exchange_handler",
    "serve_settings",
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
    #: Seconds a connection may take, its TLS handshake included.
    connect_timeout: float
    #: The TLS context of an ``https://`` URL (default ``tls.client_context()``).
    ssl: ssl.SSLContext | None
    #: Send the token over plain ``http://`` to a host that is not loopback.
    allow_plaintext_token: bool


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
    #: How long a new connection has to complete its ask (its TLS handshake included).
    ask_timeout: float
    #: Serve TLS with this context (``tls.server_context(...)``); ``None`` for plain HTTP.
    ssl: ssl.SSLContext | None


def listen_driver(
    url: str, **options: Unpack[ListenOptions]
) -> tuple[ListenDriver, ssl.SSLContext | None]:
    """The :class:`ListenDriver` of a ``listen(url, ...)`` call, and its TLS context.

    The arguments are checked now. The jitter source is
    :func:`random.random` unless ``random`` is given. The context is
    ``None`` for an ``http://`` URL, ``ssl`` or else
    :func:`~.tls.client_context` for an ``https://`` one; ``ssl`` with an
    ``http://`` URL is a :class:`ValueError`, since nothing would be
    encrypted.
    """
    context = options.pop("ssl", None)
    if options.get("random") is None:
        options["random"] = _random.random
    driver = ListenDriver(url, **cast("dict[str, Any]", options))  # without ssl, now
    return driver, _listen_context(driver.endpoint, context)


def _check_context(context: object) -> None:
    if context is not None and not isinstance(context, ssl.SSLContext):
        raise TypeError(f"ssl must be an ssl.SSLContext, not {type(context).__name__}")


def _listen_context(endpoint: Endpoint, context: ssl.SSLContext | None) -> ssl.SSLContext | None:
    _check_context(context)
    if not endpoint.tls:
        if context is not None:
            raise ValueError("ssl= is for https:// URLs: over http:// nothing is encrypted")
        return None
    return context if context is not None else client_context()


def serve_settings(
    exchange_handler: Any, options: ServeOptions
) -> tuple[ServeSettings[Any], ssl.SSLContext | None]:
    """The checked options of a ``serve(...)`` call, and its TLS context (``ssl``)."""
    context = options.pop("ssl", None)
    _check_context(context)
    settings = ServeSettings(exchange_handler=exchange_handler, **cast("dict[str, Any]", options))
    return settings, context


def describe_error(error: BaseException) -> str:
    """A short, stable description of a socket or TLS error, for ``ConnectionFailed``.

    A TLS failure (an :class:`ssl.SSLError`, or an error it caused, as
    trio's ``BrokenResourceError``) is said by
    :func:`~.tls.describe_tls_error`.
    """
    if not isinstance(error, OSError) and isinstance(error.__cause__, OSError):
        error = error.__cause__  # trio wraps what the socket or TLS layer raised
    if isinstance(error, ssl.SSLError):
        return describe_tls_error(error)
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

    Made with the ``serve()`` call's exchange handler and options
    (:func:`serve_settings`). ``host`` and ``port`` are set once the
    server listens; ``tls`` is the TLS context it serves with, ``None``
    for plain HTTP.
    """

    def __init__(self, hub: Hub, exchange_handler: Any, options: ServeOptions) -> None:
        # Checked here, before anything listens: a bad option is the caller's ValueError.
        self._settings, self.tls = serve_settings(exchange_handler, options)
        self.hub = hub
        self.host = ""
        self.port = 0
        self._connections: set[Any] = set()
        #: Set by close(): from then on, what is accepted is closed at once.
        self._closing = False

    @property
    def connections(self) -> int:
        """How many connections are open."""
        return len(self._connections)

    @property
    def ask_timeout(self) -> float:
        """Seconds a new connection has to complete its ask, its TLS handshake included."""
        return self._settings.ask_timeout

    @property
    def suspension(self) -> SuspensionCounts:
        """What the connections did while the hub was suspended (asks refused, paths ended)."""
        return self._settings.suspension

    @property
    def keepalive_interval(self) -> float:
        """Seconds without output after which a path gets a keep-alive."""
        return self._settings.keepalive_interval

    @property
    def url(self) -> str:
        """The base URL, ``http://host:port`` (``https://`` over TLS)."""
        return format_url(self.host, self.port, tls=self.tls is not None)

    def publish(self, item: object) -> int:
        """``hub.publish(item)``: call it from the thread that runs the server."""
        return self.hub.publish(item)


_Started = TypeVar("_Started")


class Starting(Coroutine[Any, Any, _Started]):
    """What the asyncio ``serve()`` returns: ``async with`` it, or await it for the server.

    ``starting`` is the coroutine that starts ``server`` and returns it;
    leaving the ``async with`` block closes the server.
    """

    def __init__(self, server: Any, starting: Coroutine[Any, Any, _Started]) -> None:
        self._server = server
        self._starting = starting

    def __await__(self) -> Generator[Any, None, _Started]:
        return self._starting.__await__()

    def send(self, value: Any) -> Any:
        return self._starting.send(value)

    def throw(self, *error: Any) -> Any:
        return self._starting.throw(*error)

    def close(self) -> None:
        self._starting.close()

    async def __aenter__(self) -> _Started:
        return await self._starting

    async def __aexit__(self, *exc_info: object) -> None:
        await self._server.close()
