"""The asyncio adapter: :func:`listen`, :func:`serve` and :class:`Proxy`.

* :func:`listen` is a client: an async generator that asks for
  notifications, asks again with backoff and jitter, and yields what
  arrives.
* :func:`serve` runs a :class:`Server` of a :class:`~diverge_notifications.sansio.Hub`.
* :class:`Proxy` makes the exchanges of kinds 0-3 (``list_tools()``,
  ``call_tool()``...) and reads the notifications they unlock; it raises
  :class:`ExchangeError` and :class:`ExchangeFailed`, re-exported here.

All three perform the actions of the sans-IO drivers
(:class:`~diverge_notifications.sansio.drivers.listen.ListenDriver`,
:class:`~diverge_notifications.sansio.drivers.serve.ServingConnection`,
:class:`~diverge_notifications.sansio.drivers.proxy.ProxyDriver`), which take
every decision; this module moves bytes and owns the event loop's clock.
The hub is not thread-safe: publish from the event loop's thread; from
another, ``loop.call_soon_threadsafe(hub.publish, item)``.

The module reads top-down: the listener's loop, the server and its
connections, the proxy, then the asyncio helpers they share: :func:`within`
(a deadline that never loses a cancellation, also for other callers),
one read of the listener, the server's flow control, the exchange
handler's deadline and the linger after a refusal.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..sansio.drivers import actions
from ..sansio.drivers.actions import ClientDriver, ExchangeHandler
from ..sansio.drivers.proxy import ExchangeError, ExchangeFailed
from ..sansio.drivers.serve import ServingConnection
from ..sansio.drivers.settings import ServeSettings
from ..sansio.events import Event
from ..sansio.mcp.model import Notification
from ..sansio.server.hub import Hub
from ..sansio.wire.asks import Ask
from ._common import (
    READ_SIZE,
    AsyncServerBase,
    Starting,
    accepted,
    describe_error,
    handler_timed_out,
    listen_driver,
    reset_on_close,
    run_exchange_handler,
)
from ._proxy import AsyncProxy
from .tls import asyncio_server_options

if TYPE_CHECKING:
    import ssl

    from typing_extensions import Unpack

    from ._common import ListenOptions, ServeOptions
    from ._proxy import ProxyOptions

__all__ = [
    "ExchangeError",
    "ExchangeFailed",
    "Proxy",
    "Server",
    "listen",
    "serve",
    "within",
]


# --- listen ---------------------------------------------------------------------------

#: A listener stops reading (and so slows its server down) past twice this many unread bytes.
_LIMIT = 2 * READ_SIZE


def listen(
    url: str, **options: Unpack[ListenOptions]
) -> AsyncGenerator[Notification | Event, None]:
    """Listen to the notifications of the server at ``url`` (``http[s]://host:port[/base]``).

    An async generator of each :class:`Notification` (every event with
    ``events=True``), asking again after every end of a path, until
    ``AttemptsExhausted``; ``aclose()`` or a cancellation stops it. The
    options (``ListenOptions``, docs/adapters.md) are checked by the call.
    """
    return _listen(*listen_driver(url, **options))


async def _listen(
    driver: ClientDriver, tls: ssl.SSLContext | None
) -> AsyncGenerator[Notification | Event, None]:
    loop = asyncio.get_running_loop()
    reader: asyncio.StreamReader | None = None
    writer: asyncio.StreamWriter | None = None
    try:
        while True:
            action = driver.next_action(loop.time())
            if type(action) is actions.Deliver:
                for item in action.items:
                    yield item
            elif type(action) is actions.Receive:
                assert reader is not None
                await asyncio_receive(driver, reader, action.timeout, loop.time)
            elif type(action) is actions.Send:
                assert writer is not None
                # A write never blocks here; a failure shows up on the next read.
                writer.write(action.data)
            elif type(action) is actions.Connect:
                # Over TLS, the certificate is verified for action.host, the URL's.
                opening = asyncio.open_connection(action.host, action.port, limit=_LIMIT, ssl=tls)
                try:
                    reader, writer = await within(opening, action.timeout)
                except (OSError, asyncio.TimeoutError) as error:
                    driver.connect_failed(loop.time(), describe_error(error))
                else:
                    driver.connected(loop.time())
            elif type(action) is actions.Sleep:
                await asyncio.sleep(action.delay)
            elif type(action) is actions.Disconnect:
                # abort(), not close(): nothing is left to send, and an unread
                # path must not keep the socket around.
                if writer is not None:
                    writer.transport.abort()
                reader = writer = None
            else:  # Stop
                return
    finally:
        if writer is not None:
            writer.transport.abort()


# --- serve ----------------------------------------------------------------------------


def serve(
    hub: Hub,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    exchange_handler: ExchangeHandler | None = None,
    **options: Unpack[ServeOptions],
) -> Starting[Server]:
    """Serve ``hub`` on ``host``:``port`` (0 picks a free port): ``async with serve(hub)``.

    Leaving the block closes it; ``await serve(hub)`` returns the running
    server instead (``async with await serve(hub)`` works too). Asks of kinds
    0-3 are declined unless ``exchange_handler`` (a function or a coroutine
    function) answers them. The options (``ServeOptions``, docs/adapters.md)
    are checked by the call, before anything listens.
    """
    server = Server(hub, exchange_handler, options)
    return Starting(server._start(host, port), server.close)


class Server(AsyncServerBase):
    """A running asyncio server of a hub; see :func:`serve`. ``async with`` closes it on exit."""

    _settings: ServeSettings[ExchangeHandler]
    _event = asyncio.Event

    def __init__(self, hub: Hub, handler: ExchangeHandler | None, options: ServeOptions) -> None:
        super().__init__(hub, handler, options)
        self._server: asyncio.Server | None = None
        self._closed: asyncio.Task[None] | None = None

    def _clock(self) -> float:
        return asyncio.get_running_loop().time()

    async def _wait_at_most(self, event: Any, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await within(event.wait(), seconds)

    async def _start(self, host: str, port: int) -> Server:
        self._loop = asyncio.get_running_loop()
        settings = self._settings  # the handshake is part of the time an ask may take
        tls = asyncio_server_options(self.tls, settings.ask_timeout, settings.close_timeout)
        self._server = await asyncio.start_server(
            self._accepted, host, port, reuse_address=True, backlog=settings.backlog, **tls
        )
        name = self._server.sockets[0].getsockname()
        self.host = str(name[0])
        self.port = int(name[1])
        return self

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _Connection(self, reader, writer).run()

    async def close(self) -> None:
        """End every open path cleanly, stop accepting, and close every connection.

        A peer that does not take the end within ``close_timeout`` seconds is
        cut off. Every call returns once the server is closed; a cancelled
        call leaves the closing to go on (any call waits for it).
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

    async def _finish_closing(self, connections: list[_Connection]) -> None:
        if connections:
            waiters = [connection.finished for connection in connections]
            _, pending = await asyncio.wait(waiters, timeout=self._settings.close_timeout)
            if pending:
                for connection in connections:
                    if not connection.finished.done():
                        connection.abort()
                await asyncio.wait(pending, timeout=self._settings.close_timeout)
        if self._server is not None:
            await self._server.wait_closed()

    async def __aenter__(self) -> Server:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class _Connection:
    """One accepted connection: a reader task, and a loop performing the driver's actions."""

    def __init__(
        self, server: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._server = server
        self._loop = loop = server._loop
        self._reader = reader
        self._writer = writer
        # Set by hub.publish too: the loop writes on its next iteration, so
        # that everything published meanwhile goes out as one chunk.
        self._ready = asyncio.Event()
        # Made when the connection is accepted: the ask's deadline starts now.
        peer = accepted(writer.get_extra_info("socket"), server._settings)
        self.serving = server._serving(self._ready.set, loop.time(), peer)
        self._handler: asyncio.Task[None] | None = None
        self.finished: asyncio.Future[None] = loop.create_future()
        server._connections.add(self)
        if server._closing:
            self.shutdown()

    def shutdown(self) -> None:
        """The server is closing: end the path cleanly."""
        self.serving.shutdown()
        self._ready.set()

    def abort(self) -> None:
        self._writer.transport.abort()

    async def run(self) -> None:
        reading = self._loop.create_task(self._read())
        try:
            await self._serve()
        finally:
            reading.cancel()
            if self._handler is not None:
                self._handler.cancel()
            self.serving.connection_lost()
            self._writer.close()
            with contextlib.suppress(OSError):
                await self._writer.wait_closed()  # what is written goes out first
            self._server._connections.discard(self)
            self.finished.set_result(None)

    async def _read(self) -> None:
        serving = self.serving
        try:
            while serving.wants_read:
                serving.data_received(self._loop.time(), await self._reader.read(READ_SIZE))
                if serving.done and self._handler is not None:
                    self._handler.cancel()  # nobody is left to answer
                self._ready.set()
        except OSError:
            serving.connection_lost()
            self._ready.set()

    async def _serve(self) -> None:
        serving = self.serving
        writer = self._writer
        while True:
            # Whatever wakes the connection from here on ends the next wait;
            # whatever came before is taken by the next action.
            self._ready.clear()
            action = serving.next_action(self._loop.time())
            if type(action) is actions.Write:
                writer.write(action.data)
                try:
                    if not await drained(writer, self._server._settings.stall_timeout):
                        serving.write_stalled(self._loop.time())
                except OSError:
                    serving.connection_lost()
            elif type(action) is actions.WaitUntil:
                at = action.deadline
                timer = None if at is None else self._loop.call_at(at, self._ready.set)
                await self._ready.wait()
                if timer is not None:
                    timer.cancel()
            elif type(action) is actions.RunHandler:
                answering = answer_within(serving, self._server._settings, action.ask)
                self._handler = self._loop.create_task(answering)
                await asyncio.wait([self._handler])  # not raising if it was cancelled
            else:
                assert type(action) is actions.Close
                if action.abort:  # a reset: nothing more goes to a stalled peer
                    reset_on_close(writer.get_extra_info("socket"))
                    writer.transport.abort()
                elif action.linger:
                    await linger(self._reader, writer, action.linger)
                return


# --- the proxy ------------------------------------------------------------------------


class Proxy(AsyncProxy):
    """A proxy of the server at ``url`` (``http://host:port[/base]``), on asyncio.

    ``list_tools()``, ``list_resources()``, ``call_tool(name, arguments,
    progress_token=...)`` and ``read_resource(uri)`` make one exchange each
    and return its result (:class:`ExchangeError`, :class:`ExchangeFailed`
    otherwise); ``notifications()`` iterates the one notification ask, made
    once the first exchange was answered. See ``AsyncProxy``.
    """

    def __init__(self, url: str, **options: Unpack[ProxyOptions]) -> None:
        super().__init__(url, asyncio.Event(), **options)

    def _drive(self, driver: ClientDriver) -> AsyncGenerator[Notification | Event, None]:
        return _listen(driver, self._tls)

    def _now(self) -> float:
        return asyncio.get_running_loop().time()


# --- asyncio helpers ------------------------------------------------------------------

_T = TypeVar("_T")

# asyncio.timeout() (Python 3.11) puts the deadline on the awaiting task
# itself. asyncio.wait_for() is not used anywhere: before Python 3.12 it
# loses a cancellation that arrives as the awaited operation finishes
# (CPython gh-86296), so that a listener stopped while a connection is
# being refused would go on asking; it also makes a task of every read,
# which costs a read that carries one notification more than decoding it.
_asyncio_timeout: Any = getattr(asyncio, "timeout", None)


async def within(awaitable: Awaitable[_T], timeout: float) -> _T:
    """``await awaitable``, raising ``asyncio.TimeoutError`` after ``timeout`` seconds.

    What ``asyncio.wait_for`` should be: a cancellation of the caller is
    never lost, even when it arrives as ``awaitable`` finishes, and the
    awaited work is stopped before this returns.
    """
    if _asyncio_timeout is None:  # Python 3.10
        return await _within_by_wait(awaitable, timeout)
    async with _asyncio_timeout(timeout):
        return await awaitable


async def _within_by_wait(awaitable: Awaitable[_T], timeout: float) -> _T:
    """:func:`within` for Python 3.10, which has no ``asyncio.timeout()``."""
    task = asyncio.ensure_future(awaitable)
    try:
        # asyncio.wait() returns at the deadline and never swallows our own
        # cancellation; the task's outcome is read below.
        done, _ = await asyncio.wait((task,), timeout=timeout)
    finally:
        if not task.done():  # past the deadline, or we were cancelled
            task.cancel()
            await asyncio.wait((task,))
    if not done:
        raise asyncio.TimeoutError
    return task.result()


async def asyncio_receive(
    driver: ClientDriver, reader: asyncio.StreamReader, timeout: float, clock: Callable[[], float]
) -> None:
    """The asyncio listener's ``Receive``: one read of ``reader``, reported to ``driver``."""
    try:
        if _asyncio_timeout is None:  # pragma: no cover - Python 3.10
            data = await within(reader.read(READ_SIZE), timeout)
        else:  # inline: the listener's hot path, one coroutine fewer per read
            async with _asyncio_timeout(timeout):
                data = await reader.read(READ_SIZE)
    except (OSError, asyncio.TimeoutError) as error:
        if isinstance(error, asyncio.TimeoutError) and not getattr(error, "errno", 0):
            driver.timed_out(clock())  # the deadline's timeout, not the socket's
        else:
            driver.connection_lost(clock(), describe_error(error))
    else:
        driver.data_received(clock(), data)


async def drained(writer: asyncio.StreamWriter, stall_timeout: float) -> bool:
    """Wait for the socket to take what was written (asyncio's flow control).

    False if the peer took no byte for ``stall_timeout`` seconds: the bytes
    the transport holds did not go down meanwhile. They are looked at a few
    times per ``stall_timeout`` (at least once a second), so that a stall is
    noticed within that much of its deadline.
    """
    transport = writer.transport
    loop = asyncio.get_running_loop()
    step = min(1.0, stall_timeout / 4)
    left = transport.get_write_buffer_size()
    progressed = loop.time()
    while True:
        try:
            await within(writer.drain(), step)
            return True
        except asyncio.TimeoutError:
            now_left = transport.get_write_buffer_size()
            if now_left < left:
                left, progressed = now_left, loop.time()
            elif loop.time() - progressed >= stall_timeout:
                return False


async def answer_within(
    serving: ServingConnection, settings: ServeSettings[ExchangeHandler], ask: Ask
) -> None:
    """Perform ``RunHandler(ask)`` (asyncio), cancelling the handler past ``exchange_timeout``."""
    assert settings.exchange_handler is not None
    running = run_exchange_handler(serving, settings.exchange_handler, ask)
    try:
        await within(running, settings.exchange_timeout)
    except asyncio.TimeoutError:
        handler_timed_out(serving, ask, settings.exchange_timeout)


async def linger(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seconds: float
) -> None:
    """Half-close, then read and discard until the peer closes or ``seconds`` pass (asyncio)."""

    async def discard() -> None:
        if writer.can_write_eof():
            writer.write_eof()
        while await reader.read(READ_SIZE):
            pass

    with contextlib.suppress(OSError, asyncio.TimeoutError):
        await within(discard(), seconds)
