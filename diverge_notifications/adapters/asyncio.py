"""The asyncio adapter: :func:`listen` and :func:`serve`.

Both are thin loops around :mod:`._common`, which holds every decision;
this module moves bytes and owns the event loop's clock.

The hub is not thread-safe: publish from the event loop's thread (with
``hub.publish(...)`` or :meth:`Server.publish`); from another thread use
``loop.call_soon_threadsafe(hub.publish, item)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from types import TracebackType

from ..sansio.events import Event
from ..sansio.framing import DEFAULT_MAX_FRAME_SIZE
from ..sansio.hub import Hub
from ..sansio.mcp import Notification
from ..sansio.policy import ProxyPolicy
from ..sansio.sequence import Profile
from ._common import (
    DEFAULT_ASK_TIMEOUT,
    DEFAULT_CLOSE_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_KEEPALIVE_INTERVAL,
    DEFAULT_MAX_BATCH,
    READ_SIZE,
    Connect,
    Deliver,
    Disconnect,
    ExchangeHandler,
    ListenDriver,
    Receive,
    Send,
    ServeSettings,
    Sleep,
    Stop,
    describe_error,
    format_url,
    run_exchange_handler,
)

__all__ = ["Server", "listen", "serve"]

#: A listener stops reading (and so slows its server down) past this many
#: unread bytes; the server then drops what its queue cannot hold.
_CLIENT_HIGH_WATER = 4 * READ_SIZE


# --- the listener --------------------------------------------------------------


class _ClientProtocol(asyncio.Protocol):
    """Buffers what the server sends until :meth:`read` takes it all at once."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._chunks: list[bytes] = []
        self._buffered = 0
        self._eof = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._chunks.append(data)
        self._buffered += len(data)
        if self._buffered > _CLIENT_HIGH_WATER and self.transport is not None:
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._error = exc
        self._eof = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def read(self, timeout: float) -> bytes | None:
        """Everything buffered, ``b""`` at the end, ``None`` after ``timeout`` seconds.

        Raises the connection's error if it ended with one.
        """
        if not self._chunks and not self._eof:
            waiter = self._waiter = self._loop.create_future()
            timer = self._loop.call_later(timeout, self._wake)
            try:
                await waiter
            finally:
                timer.cancel()
                self._waiter = None
        if self._chunks:
            data = b"".join(self._chunks) if len(self._chunks) > 1 else self._chunks[0]
            self._chunks.clear()
            if self._buffered > _CLIENT_HIGH_WATER and self.transport is not None:
                self.transport.resume_reading()
            self._buffered = 0
            return data
        if self._eof:
            if isinstance(self._error, OSError):
                raise self._error
            return b""
        return None


def listen(
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
) -> AsyncGenerator[Notification | Event, None]:
    """Listen to the notifications of the server at ``url`` (``http://host:port[/base]``).

    An async generator: it yields each :class:`Notification`, or with
    ``events=True`` every event (``StreamOpened``, ``NotificationReceived``,
    ``MessageRejected``, the terminal event, ``ReaskNeeded``,
    :class:`ConnectionFailed`, ``RetryScheduled``, ``AttemptsExhausted``).
    It asks again after every end of a path, after the policy's delay
    (default ``ProxyPolicy(require_exchange=False)``), and treats
    ``3 * keepalive_interval`` seconds of silence as a broken path. It
    returns only after ``AttemptsExhausted``; stop it with ``aclose()`` or
    by cancelling the task that iterates it, which closes the connection
    and asks no more.

    The arguments are checked when ``listen`` is called, before any
    connection: a bad URL, a non-positive interval or a ``token`` that
    cannot go into a request (empty, non-ASCII, a control character...)
    raises :class:`ValueError` from the call itself.
    """
    driver = ListenDriver(
        url,
        token=token,
        events=events,
        policy=policy,
        keepalive_interval=keepalive_interval,
        profile=profile,
        max_frame_size=max_frame_size,
        random=random,
        connect_timeout=connect_timeout,
    )
    return _listen(driver)


async def _listen(driver: ListenDriver) -> AsyncGenerator[Notification | Event, None]:
    loop = asyncio.get_running_loop()
    protocol: _ClientProtocol | None = None
    try:
        while True:
            action = driver.next_action(loop.time())
            if type(action) is Deliver:
                for item in action.items:
                    yield item
            elif type(action) is Receive:
                assert protocol is not None
                try:
                    data = await protocol.read(action.timeout)
                except OSError as error:
                    driver.connection_lost(loop.time(), describe_error(error))
                else:
                    if data is None:
                        driver.timed_out(loop.time())
                    else:
                        driver.data_received(loop.time(), data)
            elif type(action) is Send:
                assert protocol is not None and protocol.transport is not None
                # A write never blocks here; a failure shows up on the next read.
                protocol.transport.write(action.data)
            elif type(action) is Connect:
                try:
                    _, protocol = await asyncio.wait_for(
                        loop.create_connection(
                            lambda: _ClientProtocol(loop), action.host, action.port
                        ),
                        action.timeout,
                    )
                except (OSError, asyncio.TimeoutError) as error:
                    driver.connect_failed(loop.time(), describe_error(error))
                else:
                    driver.connected(loop.time())
            elif type(action) is Sleep:
                await asyncio.sleep(action.delay)
            elif type(action) is Disconnect:
                _close_client(protocol)
                protocol = None
            else:
                assert type(action) is Stop
                return
    finally:
        _close_client(protocol)


def _close_client(protocol: _ClientProtocol | None) -> None:
    if protocol is not None and protocol.transport is not None:
        # abort(), not close(): nothing is left to send, and an unread
        # path must not keep the socket around.
        protocol.transport.abort()


# --- the server ----------------------------------------------------------------


class _ServeProtocol(asyncio.Protocol):
    """One accepted connection: a :class:`ServingConnection` driven by callbacks."""

    def __init__(self, server: Server) -> None:
        self._server = server
        self._loop = server._loop
        # Made when the connection is accepted: the ask's deadline starts now.
        self._serving = server._settings.serving_connection(
            server.hub, wake=self._wake, now=self._loop.time()
        )
        self._transport: asyncio.Transport | None = None
        self._paused = False
        self._scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._ask_timer: asyncio.TimerHandle | None = None
        self._exchange_task: asyncio.Task[None] | None = None
        self.closed: asyncio.Future[None] = self._loop.create_future()

    # -- asyncio callbacks --------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._server._connections.add(self)
        if self._server._closing:
            self._serving.shutdown()
        self._flush()

    def data_received(self, data: bytes) -> None:
        self._serving.receive(data, self._loop.time())
        self._flush()

    def eof_received(self) -> bool:
        self._serving.receive(b"", self._loop.time())
        self._flush()
        return True  # the serving connection decides when to close

    def connection_lost(self, exc: Exception | None) -> None:
        self._serving.connection_lost()
        self._transport = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._ask_timer is not None:
            self._ask_timer.cancel()
            self._ask_timer = None
        if self._exchange_task is not None:
            self._exchange_task.cancel()
        self._server._connections.discard(self)
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._flush()

    # -- driving the serving connection ------------------------------------------------------

    def _wake(self) -> None:
        # Called from hub.publish: write on the next loop iteration, so that
        # everything published meanwhile goes out as one chunk.
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._scheduled = False
        self._flush()

    def _flush(self, *, force: bool = False) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        serving = self._serving
        if self._paused and not force and not serving.done:
            return  # resume_writing() flushes; the subscriber's queue takes the wait
        out = serving.take_output(self._loop.time())
        if out:
            transport.write(out)
        if serving.done:
            transport.close()
            return
        self._arm_ask_deadline()
        if serving.exchange is not None and self._exchange_task is None:
            self._exchange_task = self._loop.create_task(self._answer_exchange())
        if serving.path_open:
            if self._timer is None:
                self._arm_keepalive()
            if serving.has_backlog and not self._paused:
                self._wake()

    def _arm_ask_deadline(self) -> None:
        at = self._serving.ask_deadline
        if at is None:
            if self._ask_timer is not None:
                self._ask_timer.cancel()  # the ask is complete
                self._ask_timer = None
        elif self._ask_timer is None:
            self._ask_timer = self._loop.call_at(at, self._ask_deadline_passed)

    def _ask_deadline_passed(self) -> None:
        # The loop may run a timer a little early (its clock's resolution):
        # if the deadline is not passed yet, _flush() arms it again.
        self._ask_timer = None
        self._serving.check_ask_deadline(self._loop.time())
        self._flush()

    def _arm_keepalive(self) -> None:
        at = self._serving.keepalive_at
        if at is not None:
            self._timer = self._loop.call_at(at, self._keepalive)

    def _keepalive(self) -> None:
        self._timer = None
        transport = self._transport
        if transport is None or transport.is_closing() or self._paused:
            return  # resume_writing() re-arms through _flush()
        out = self._serving.keepalive(self._loop.time())
        if out:
            transport.write(out)
        self._arm_keepalive()

    async def _answer_exchange(self) -> None:
        await run_exchange_handler(self._serving, self._server._settings.exchange_handler)
        self._flush()

    def shutdown(self) -> None:
        """The server is closing: end the path cleanly, even past flow control."""
        self._serving.shutdown()
        self._flush(force=True)

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()


class Server:
    """A running asyncio server of a hub; see :func:`serve`.

    ``url`` is its base URL (give it to :func:`listen`). :meth:`close` ends
    every open path cleanly and closes; ``async with`` closes on exit.
    """

    def __init__(
        self,
        hub: Hub,
        *,
        token: str | None,
        keepalive_interval: float,
        profile: Profile,
        exchange_handler: ExchangeHandler | None,
        queue_size: int | None,
        max_batch: int,
        close_timeout: float,
        ask_timeout: float = DEFAULT_ASK_TIMEOUT,
    ) -> None:
        self._settings: ServeSettings[ExchangeHandler] = ServeSettings(
            token=token,
            keepalive_interval=keepalive_interval,
            profile=profile,
            exchange_handler=exchange_handler,
            queue_size=queue_size,
            max_batch=max_batch,
            close_timeout=close_timeout,
            ask_timeout=ask_timeout,
        )
        self.hub = hub
        self.host = ""
        self.port = 0
        self._loop = asyncio.get_running_loop()
        self._server: asyncio.Server | None = None
        self._connections: set[_ServeProtocol] = set()
        self._closing = False
        self._closed: asyncio.Task[None] | None = None

    @property
    def keepalive_interval(self) -> float:
        """Seconds without output after which a path gets a keep-alive."""
        return self._settings.keepalive_interval

    @property
    def url(self) -> str:
        """The base URL, ``http://host:port``."""
        return format_url(self.host, self.port)

    @property
    def connections(self) -> int:
        """How many connections are open."""
        return len(self._connections)

    def publish(self, item: object) -> int:
        """``hub.publish(item)``: call it from the event loop's thread."""
        return self.hub.publish(item)

    async def _start(self, host: str, port: int) -> None:
        self._server = await self._loop.create_server(
            lambda: _ServeProtocol(self), host, port, reuse_address=True
        )
        name = self._server.sockets[0].getsockname()
        self.host = str(name[0])
        self.port = int(name[1])

    async def close(self) -> None:
        """End every open path cleanly, stop accepting, and close every connection.

        Connections whose peer does not take the end within
        ``close_timeout`` seconds (a stalled listener) are aborted. Every
        call returns when the server is closed, a second one included; a
        cancelled call leaves the closing to go on (any call waits for it).
        """
        if self._closed is None:
            self._closing = True
            if self._server is not None:
                self._server.close()
            connections = list(self._connections)
            for connection in connections:
                connection.shutdown()
            self._closed = self._loop.create_task(self._finish_closing(connections))
        # Shielded: a caller that is cancelled does not stop the closing.
        await asyncio.shield(self._closed)

    async def _finish_closing(self, connections: list[_ServeProtocol]) -> None:
        if connections:
            waiters = [connection.closed for connection in connections]
            _, pending = await asyncio.wait(waiters, timeout=self._settings.close_timeout)
            if pending:
                for connection in connections:
                    if not connection.closed.done():
                        connection.abort()
                await asyncio.wait(pending, timeout=self._settings.close_timeout)
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> Server:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


async def serve(
    hub: Hub,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    token: str | None = None,
    keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL,
    profile: Profile = Profile.PROVIDER,
    exchange_handler: ExchangeHandler | None = None,
    queue_size: int | None = None,
    max_batch: int = DEFAULT_MAX_BATCH,
    close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
    ask_timeout: float = DEFAULT_ASK_TIMEOUT,
) -> Server:
    """Serve ``hub`` on ``host``:``port`` (0 picks a free port) and return the running server.

    Each notification ask subscribes to the hub (``queue_size`` per
    subscriber, default the hub's) and gets what is published from then on,
    in batches of at most ``max_batch`` per HTTP chunk, with a keep-alive
    after ``keepalive_interval`` seconds without output. A listener that
    does not read loses what its queue cannot hold, and nobody else waits
    for it. Asks of kinds 0-3 are declined ("not served") unless an
    ``exchange_handler`` answers them (it may be a coroutine function).
    A connection that has not completed its ask ``ask_timeout`` seconds
    after it was accepted is closed without an answer.

    The options are checked before anything listens: a ``token`` that the
    server could not compare (it must be one or more visible ASCII
    characters) or a non-positive interval, timeout or size raises
    :class:`ValueError`.
    """
    server = Server(
        hub,
        token=token,
        keepalive_interval=keepalive_interval,
        profile=profile,
        exchange_handler=exchange_handler,
        queue_size=queue_size,
        max_batch=max_batch,
        close_timeout=close_timeout,
        ask_timeout=ask_timeout,
    )
    await server._start(host, port)
    return server
