"""What the three adapters share on the I/O side.

Every decision is taken by the sans-IO drivers,
:class:`~diverge_notifications.sansio.drivers.listen.ListenDriver` and
:class:`~diverge_notifications.sansio.drivers.serve.ServingConnection`; what is
left here needs the world outside: the read size, the random source and
the TLS context (:func:`listen_driver`, :func:`serve_settings`), describing
an :class:`OSError` (a TLS failure included), setting accepted sockets up,
calling the user's exchange handler (logging its failure, bounding its
time); logging what the serving driver reports (:func:`log_report`, logger
``diverge_notifications.server``); and what the three modules' signatures
and ``Server`` classes have in common (the options' types,
:class:`ServerBase` with ``stats()`` and the room a waiting publisher waits
for, :class:`ClosedOnExit`).
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import logging
import random as _random
import socket
import ssl
import struct
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    Literal,
    Protocol,
    TypedDict,
    TypeVar,
    cast,
    overload,
)

from ..sansio.client.policy import ProxyPolicy
from ..sansio.client.urls import Endpoint, format_url
from ..sansio.drivers import reports
from ..sansio.drivers.actions import ExchangeHandler, ExchangeResult
from ..sansio.drivers.listen import ListenDriver
from ..sansio.drivers.reports import ServeReport
from ..sansio.drivers.serve import ServingConnection
from ..sansio.drivers.settings import ClientSettings, ServeSettings
from ..sansio.server.counts import ServerStats
from ..sansio.server.filters import Interest
from ..sansio.server.hub import Hub, as_notification
from ..sansio.wire.asks import Ask
from ..sansio.wire.profiles import Profile
from .tls import client_context, describe_tls_error

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = [
    "READ_AT_ONCE",
    "READ_SIZE",
    "AsyncServerBase",
    "ClosedOnExit",
    "ListenOptions",
    "ServeOptions",
    "ServerBase",
    "Starting",
    "WriteProgress",
    "accepted",
    "call_exchange_handler",
    "client_settings",
    "describe_error",
    "handler_timed_out",
    "handshake_failure",
    "kernel_unsent",
    "listen_driver",
    "log_report",
    "logger",
    "peer_name",
    "read_pieces",
    "reset_on_close",
    "run_exchange_handler",
    "serve_settings",
    "sweep_period",
]

#: Where the servers log: refusals and path ends at info, stalled paths at
#: warning, exchange handlers that fail at error (with the traceback).
logger = logging.getLogger("diverge_notifications.server")

#: Bytes handed to a driver per read, at most: large, so that a busy path
#: costs few calls, and no larger: a new ``bytes`` of 128 KiB or more is one
#: the C library (glibc) may map and unmap afresh each time, and the page
#: faults of that cost a listener up to 15 % at 64 KB notifications
#: (``bench/bench_floor.py``, section 2).
READ_SIZE = 64 * 1024
#: What the async listeners read at once, into a buffer kept for the
#: connection's life, then hand on READ_SIZE at a time (:func:`read_pieces`):
#: a turn of their loop is then paid per 256 KiB, not per 64 KiB, 5 % at
#: 64 KB notifications (same bench).
READ_AT_ONCE = 4 * READ_SIZE


def read_pieces(buffer: memoryview, nbytes: int) -> list[bytes]:
    """The first ``nbytes`` of ``buffer``, as ``bytes`` of their own of READ_SIZE at most each.

    The buffer is read into again next time: what was read is copied out of
    it, in pieces small enough to stay clear of the C library's mapping.
    """
    return [
        buffer[start : min(start + READ_SIZE, nbytes)].tobytes()
        for start in range(0, nbytes, READ_SIZE)
    ]


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
    #: Seconds the answer's head may take to be complete; then the path is broken.
    head_timeout: float


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
    #: Each subscriber's queue in bytes of frames (default the hub's).
    queue_bytes: int | None
    #: Bytes one write of a path carries at most.
    write_buffer: int
    #: Seconds a path's peer may take no byte while output waits before it is cut off.
    stall_timeout: float
    #: Connections served at once (``None``: no limit); beyond, 503 with ``Retry-After``.
    max_connections: int | None
    #: The share of ``max_connections`` one peer address may hold at once.
    address_share: float
    #: Seconds a path may take no byte before a waiting publisher stops waiting for it.
    slow_after: float
    #: The listening socket's backlog.
    backlog: int
    #: Seconds an exchange handler may run before it is cancelled (internal error).
    exchange_timeout: float
    #: Seconds a refused connection is read and discarded before it is closed.
    linger: float
    #: Bytes read and discarded after the ask before the server stops reading.
    max_discard: int
    #: Called with every report (a refusal, a path opened or ended, an exchange answered).
    on_report: Callable[[ServeReport], None] | None
    #: ``SO_SNDBUF`` of each accepted socket (``None``: the system's, which grows as it likes).
    send_buffer: int | None
    #: Serve TLS with this context (``tls.server_context(...)``); ``None`` for plain HTTP.
    ssl: ssl.SSLContext | None
    #: Accept any of these tokens instead of one (each path belongs to the one it was asked with).
    tokens: Sequence[str] | None
    #: What every path carries of the topics a filter narrows (``None``: everything).
    interest: Interest | None


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
    settings, policy, context = client_settings(cast("dict[str, Any]", options))
    driver = ListenDriver(url, settings, policy=policy)
    return driver, listen_context(driver.endpoint, context)


def client_settings(
    options: dict[str, Any],
) -> tuple[ClientSettings, ProxyPolicy | None, ssl.SSLContext | None]:
    """The settings, the policy and the TLS context of a ``listen()`` or ``Proxy()`` call.

    ``options`` are the call's keyword options; the jitter source is
    :func:`random.random` unless ``random`` is given.
    """
    options = dict(options)
    context = options.pop("ssl", None)
    policy = options.pop("policy", None)
    if options.get("random") is None:
        options["random"] = _random.random
    return ClientSettings(**options), policy, context


def _check_context(context: object) -> None:
    if context is not None and not isinstance(context, ssl.SSLContext):
        raise TypeError(f"ssl must be an ssl.SSLContext, not {type(context).__name__}")


def listen_context(endpoint: Endpoint, context: ssl.SSLContext | None) -> ssl.SSLContext | None:
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
    if isinstance(error, TimeoutError) or _is_asyncio_timeout(error):
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


def handshake_failure(error: BaseException | None) -> str:
    """Why an accepted connection's TLS handshake failed, in one line (``None``: too slow)."""
    if error is None or isinstance(error, TimeoutError) or _is_asyncio_timeout(error):
        return "TLS handshake failed: not complete within ask_timeout"
    text = describe_error(error)
    return text if text.startswith("TLS handshake failed") else f"TLS handshake failed: {text}"


def _is_asyncio_timeout(error: BaseException) -> bool:
    """Whether ``error`` is asyncio's ``TimeoutError``, a class of its own on Python 3.10.

    Looked up where asyncio is already imported, so that the blocking
    adapter does not import it.
    """
    loaded = sys.modules.get("asyncio")
    return loaded is not None and isinstance(error, loaded.TimeoutError)


def peer_name(address: object) -> str:
    """``host:port`` of a socket address (``[host]:port`` for IPv6), for logs and reports."""
    if isinstance(address, tuple) and len(address) >= 2:
        host = str(address[0])
        return f"[{host}]:{address[1]}" if ":" in host else f"{host}:{address[1]}"
    return str(address)


def accepted(sock: Any, settings: ServeSettings[Any]) -> str:
    """Set an accepted socket up (no Nagle delay; ``send_buffer``); who is at its other end."""
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if settings.send_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, settings.send_buffer)
    try:
        return peer_name(sock.getpeername())
    except (OSError, AttributeError):
        return ""


def reset_on_close(sock: Any) -> None:
    """Make closing ``sock`` a reset (``SO_LINGER`` 0): what it still holds is thrown away."""
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


# --- stalled paths: no byte taken while output waits ---------------------------------------

try:  # Linux: TIOCOUTQ (SIOCOUTQ) on a TCP socket, the bytes its peer has not taken yet.
    import fcntl
    import termios

    _OUTQ: int | None = termios.TIOCOUTQ if sys.platform == "linux" else None
except ImportError:  # pragma: no cover - Windows
    _OUTQ = None
_OUTQ_BUFFER: Final = bytes(4)


def kernel_unsent(sock: Any) -> int:
    """The bytes the kernel holds for ``sock``'s peer and the peer has not taken (acknowledged).

    Linux's ``TIOCOUTQ`` (``SIOCOUTQ``); ``0`` where it cannot be asked
    (another system, a closed socket): then only the bytes leaving the
    application's buffer show progress.
    """
    if _OUTQ is None or sock is None:
        return 0
    try:
        held: int = struct.unpack("i", fcntl.ioctl(sock.fileno(), _OUTQ, _OUTQ_BUFFER))[0]
    except (OSError, ValueError):
        return 0
    return held


class WriteProgress:
    """Whether the peer of a path takes bytes while output waits: the stall check, once.

    The three servers cut a path off when its peer took no byte for
    ``stall_timeout`` seconds while output waited (:meth:`stalled`). A byte
    is taken when the bytes handed to the socket grow (they left the
    application's buffer, which the kernel allows only once its peer took
    some) or the kernel's count of bytes not taken yet goes down
    (:func:`kernel_unsent`). The kernel's count is what sees a slow reader:
    the kernel lets the application write again only after a third of its
    send buffer is taken, which at 100 KB/s may be longer than
    ``stall_timeout`` (issue 23, "Stalled means no byte taken").
    """

    __slots__ = ("_handed", "_since", "_sock", "_unsent", "stall_timeout", "step")

    def __init__(self, sock: Any, stall_timeout: float) -> None:
        self._sock = sock
        self.stall_timeout = stall_timeout
        #: How often a waiting write looks (:meth:`stalled`): a stall is seen at most this late.
        self.step = min(1.0, stall_timeout / 4)
        self._handed = 0
        self._unsent = 0
        self._since = 0.0

    def waiting(self, now: float, handed: int) -> None:
        """Output starts to wait at ``now``, ``handed`` bytes having gone to the socket so far.

        No system call: this is on every write of the trio and blocking
        servers. The kernel's count is first asked by :meth:`stalled`, at
        least ``step`` seconds later and at most a quarter of
        ``stall_timeout`` before any verdict.
        """
        self._handed = handed
        self._unsent = -1  # not asked yet
        self._since = now

    def stalled(self, now: float, handed: int) -> bool:
        """Looked at ``now`` as output waits: has the peer taken no byte for ``stall_timeout``?"""
        unsent = kernel_unsent(self._sock)
        if handed > self._handed or unsent < self._unsent:
            self._since = now
        self._handed, self._unsent = handed, unsent
        return now - self._since >= self.stall_timeout


def sweep_period(settings: ServeSettings[Any]) -> float:
    """How often an async server's sweep runs: a deadline or a stall is seen at most this late.

    One sweep for the whole server wakes the connections whose keep-alive
    or ask deadline passed, rather than one timer made and cancelled per
    wait (``bench/bench_fanout.py``: 14 % of the asyncio server's time at
    N = 1,000, issue 26).
    """
    shortest = min(settings.keepalive_interval, settings.ask_timeout, settings.stall_timeout)
    return min(1.0, shortest) / 4


def log_report(report: ServeReport) -> None:
    """Log what a served connection reports, at the level an operator expects."""
    if type(report) is reports.PathEndedReport:
        if report.how is reports.PathEnd.STALLED:
            logger.warning(
                "path %s to %s stalled: no byte taken for %g s while output waited; "
                "cut off, %d queued notifications freed",
                report.channel,
                report.peer,
                report.stall_timeout,
                report.freed,
            )
        logger.info(
            "path %s ended (%s): %d sent, %d dropped (peer %s)%s",
            report.channel,
            report.how.value,
            report.sent,
            report.dropped,
            report.peer,
            reports.audience_note(report.audience),
        )
    elif type(report) is reports.RefusalReport:
        logger.info("ask from %s refused: %d (%s)", report.peer, report.status, report.reason)
    elif type(report) is reports.TlsFailedReport:
        logger.info("TLS handshake with %s failed: %s", report.peer, report.reason)
    elif type(report) is reports.PathOpenedReport:
        logger.debug(
            "path %s to %s opened%s",
            report.channel,
            report.peer,
            reports.audience_note(report.audience),
        )
    elif type(report) is reports.AskExpiredReport:
        logger.info(
            "connection from %s closed: no complete ask within %g s",
            report.peer,
            report.ask_timeout,
        )
    elif type(report) is reports.ExchangeReport:
        if report.outcome == reports.CALLER_GONE:
            logger.info(
                "exchange %s (%s) from %s %s",
                report.channel,
                report.exchange,
                report.peer,
                report.outcome,
            )
            return
        level = logging.ERROR if report.outcome.startswith("internal error") else logging.DEBUG
        logger.log(
            level,
            "exchange %s (%s) from %s answered: %s%s",
            report.channel,
            report.exchange,
            report.peer,
            report.outcome,
            reports.audience_note(report.audience),
        )


def _report(serving: ServingConnection, result: object, ask: Ask) -> None:
    # An exception, raised or returned, is answered as an internal error.
    if isinstance(result, BaseException):
        logger.error(
            "the exchange handler failed on %s", ask.exchange.name.lower(), exc_info=result
        )
        serving.handler_failed(describe_error(result))
    else:
        serving.handler_answered(cast(ExchangeResult, result))


def handler_timed_out(serving: ServingConnection, ask: Ask, timeout: float) -> None:
    """The exchange handler ran past ``timeout`` seconds (and was cancelled, if it could be)."""
    logger.error(
        "the exchange handler ran past exchange_timeout (%g s) on %s",
        timeout,
        ask.exchange.name.lower(),
    )
    serving.handler_failed(f"the exchange handler took longer than {timeout:g} s")


def call_exchange_handler(
    serving: ServingConnection,
    handler: Callable[[Ask], ExchangeResult],
    ask: Ask,
    timeout: float,
    *,
    before: Callable[[], None] | None = None,
) -> None:
    """Perform ``RunHandler(ask)`` with a handler that returns its answer (the blocking adapter).

    The handler runs on a thread of its own, so that one that hangs costs
    only that thread: past ``timeout`` seconds it is left behind (a thread
    cannot be cancelled) and the exchange is answered an internal error.
    ``before`` is called before the answer is reported (to report a caller
    that hung up meanwhile).
    """
    results: list[object] = []

    def call() -> None:
        try:
            results.append(handler(ask))
        except Exception as error:
            results.append(error)

    worker = threading.Thread(target=call, name="diverge-exchange-handler", daemon=True)
    worker.start()
    worker.join(timeout)
    if before is not None:
        before()
    if results:
        _report(serving, results[0], ask)
    else:
        handler_timed_out(serving, ask, timeout)


async def run_exchange_handler(
    serving: ServingConnection, handler: ExchangeHandler, ask: Ask
) -> None:
    """Perform ``RunHandler(ask)`` for the async adapters: an awaitable answer is awaited.

    The handler's exception (not a cancellation) is logged with its
    traceback and becomes the internal error answered. The adapter bounds
    its time (:func:`handler_timed_out`).
    """
    try:
        result: object = handler(ask)
        if inspect.isawaitable(result):
            result = await result
    except Exception as error:
        result = error
    _report(serving, result, ask)


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
        #: How long a publisher that found no room waits at most before it asks again.
        self._room_wait = self._settings.slow_after

    @property
    def connections(self) -> int:
        """How many connections are open."""
        return len(self._connections)

    @property
    def ask_timeout(self) -> float:
        """Seconds a new connection has to complete its ask, its TLS handshake included."""
        return self._settings.ask_timeout

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

    def stats(self) -> ServerStats:
        """What the server did so far: :class:`~..sansio.server.counts.ServerStats`."""
        return self._settings.totals.snapshot()

    def _serving(
        self, wake: Callable[[], None], now: float, peer: str, hub_lock: Any = None
    ) -> ServingConnection:
        """The driver of a connection accepted at ``now`` from ``peer``; it reports to the log."""
        return ServingConnection(
            self.hub,
            self._settings,
            wake=wake,
            now=now,
            peer=peer,
            report=self._report,
            hub_lock=hub_lock,
        )

    def _report(self, report: ServeReport) -> None:
        log_report(report)
        on_report = self._settings.on_report
        if on_report is not None:
            on_report(report)

    def _publish_if_room(self, item: object, wake: Callable[[], None]) -> int | None:
        """Publish ``item`` if every queue it reaches has room; else ``None``, and ``wake`` later.

        Only the queues of paths that took bytes within ``slow_after``
        seconds are waited for (:meth:`Hub.room_for`); a path that did not
        drops what does not fit, counted. ``wake`` is called once, when a
        queue that had no room takes notifications out or closes; then, or
        after ``_room_wait`` seconds at most (when a path it waits for may
        have stopped moving), try again.
        """
        hub = self.hub
        now = self._clock()
        slow_after = self._settings.slow_after
        if hub.room_for(item, now=now, slow_after=slow_after):
            return hub.publish(item)
        slow_at = hub.slow_at
        self._room_wait = slow_after if slow_at is None else max(slow_at - now, 0.0)
        hub.when_room(wake)
        return None

    def _clock(self) -> float:
        """The adapter's monotonic clock, the one its connections' drivers are told."""
        raise NotImplementedError


class _Event(Protocol):
    """What asyncio's and trio's ``Event`` have in common."""

    def set(self) -> None: ...

    async def wait(self) -> Any: ...


class AsyncServerBase(ServerBase):
    """The asyncio and trio ``Server``: ``await server.publish(item, wait=True)``."""

    #: The event class of the adapter's framework.
    _event: Callable[[], _Event]

    @overload
    def publish(self, item: object, *, wait: Literal[False] = False) -> int: ...

    @overload
    def publish(self, item: object, *, wait: Literal[True]) -> Coroutine[Any, Any, int]: ...

    def publish(self, item: object, *, wait: bool = False) -> int | Coroutine[Any, Any, int]:
        """Publish ``item`` into the hub; call it from the thread that runs the server.

        Without ``wait`` this is ``hub.publish(item)``: a path whose queue is
        full does not get it (counted as dropped). With ``wait=True`` it
        returns a coroutine: ``await server.publish(item, wait=True)`` waits
        until every path the notification reaches has room for it, so that
        no listener that keeps reading loses it (one that stalls is cut off
        after ``stall_timeout`` and stops holding it up). Both return how
        many paths queued it; a notification too large for a frame raises
        :class:`~diverge_notifications.sansio.NotificationTooLarge` at once,
        and nothing is queued.
        """
        if not wait:
            return self.hub.publish(item)
        return self._publish_waiting(item)

    async def _publish_waiting(self, item: object) -> int:
        notification = as_notification(item) or item  # decoded once, however long the wait
        while True:
            room = self._event()
            published = self._publish_if_room(notification, room.set)
            if published is not None:
                return published
            # Woken by room, or when a path it waits for may have stopped moving.
            await self._wait_at_most(room, self._room_wait)

    async def _wait_at_most(self, event: _Event, seconds: float) -> None:
        """Wait for ``event``, ``seconds`` at most."""
        raise NotImplementedError


_Started = TypeVar("_Started")


class Starting(Coroutine[Any, Any, _Started], Generic[_Started]):
    """What the asyncio ``serve()`` returns: ``async with`` it, or await it for the server."""

    def __init__(
        self, starting: Coroutine[Any, Any, _Started], close: Callable[[], Awaitable[None]]
    ) -> None:
        self._starting = starting
        self._close = close

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
        await self._close()
