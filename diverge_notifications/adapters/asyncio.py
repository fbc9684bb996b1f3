"""The asyncio adapter: :func:`listen` and :func:`serve`.

Both perform the actions of the sans-IO drivers
(:mod:`diverge_notifications.sansio.listening` and
:mod:`~diverge_notifications.sansio.serving`), which take every decision;
this module moves bytes and owns the event loop's clock.

The hub is not thread-safe: publish from the event loop's thread (with
``hub.publish(...)`` or :meth:`Server.publish`); from another thread use
``loop.call_soon_threadsafe(hub.publish, item)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Coroutine, Generator
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..sansio.events import Event
from ..sansio.hub import Hub
from ..sansio.listening import Connect, Deliver, Disconnect, ListenDriver, Receive, Send, Sleep
from ..sansio.mcp import Notification
from ..sansio.serving import ExchangeHandler, RunHandler, ServeSettings, WaitUntil, Write
from ._common import READ_SIZE, ServerBase, describe_error, listen_driver, run_exchange_handler

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._common import ListenOptions, ServeOptions

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

    def close(self) -> None:
        # abort(), not close(): nothing is left to send, and an unread path
        # must not keep the socket around.
        if self.transport is not None:
            self.transport.abort()


def listen(
    url: str, **options: Unpack[ListenOptions]
) -> AsyncGenerator[Notification | Event, None]:
    """Listen to the notifications of the server at ``url`` (``http://host:port[/base]``).

    An async generator: it yields each :class:`Notification`, or with
    ``events=True`` every event (``StreamOpened``, ``NotificationReceived``,
    ``MessageRejected``, the terminal event, ``ReaskNeeded``,
    ``ConnectionFailed``, ``RetryScheduled``, ``AttemptsExhausted``). It
    asks again after every end of a path, after the ``policy``'s delay
    (default ``ProxyPolicy(require_exchange=False)``), and treats
    ``3 * keepalive_interval`` seconds of silence as a broken path. It
    returns only after ``AttemptsExhausted``; stop it with ``aclose()`` or
    by cancelling the task that iterates it, which closes the connection
    and asks no more. The options are those of ``ListenOptions``: ``token``,
    ``events``, ``policy``, ``keepalive_interval``, ``profile``,
    ``max_frame_size``, ``random``, ``connect_timeout``.

    They are checked when ``listen`` is called, before any connection: a
    bad URL, a non-positive interval or a ``token`` that cannot go into a
    request (empty, non-ASCII, a control character...) raises
    :class:`ValueError` from the call itself.
    """
    return _listen(listen_driver(url, **options))


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
                connecting = loop.create_connection(
                    lambda: _ClientProtocol(loop), action.host, action.port
                )
                try:
                    _, protocol = await asyncio.wait_for(connecting, action.timeout)
                except (OSError, asyncio.TimeoutError) as error:
                    driver.connect_failed(loop.time(), describe_error(error))
                else:
                    driver.connected(loop.time())
            elif type(action) is Sleep:
                await asyncio.sleep(action.delay)
            elif type(action) is Disconnect:
                if protocol is not None:
                    protocol.close()
                protocol = None
            else:  # Stop
                return
    finally:
        if protocol is not None:
            protocol.close()


# --- the server ----------------------------------------------------------------


class _ServeProtocol(asyncio.Protocol):
    """One accepted connection: each callback reports to the driver, then performs its actions."""

    def __init__(self, server: Server) -> None:
        self._server = server
        self._loop = server._loop
        # Made when the connection is accepted: the ask's deadline starts now.
        self._serving = server._settings.serving_connection(
            server.hub, wake=self._wake, now=self._loop.time()
        )
        self._transport: asyncio.Transport | None = None
        self._scheduled = False
        self._timer: asyncio.TimerHandle | None = None
        self._exchange_task: asyncio.Task[None] | None = None
        self.closed: asyncio.Future[None] = self._loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._server._connections.add(self)
        if self._server._closing:
            self._serving.shutdown()
        self._perform()

    def data_received(self, data: bytes) -> None:
        self._serving.data_received(self._loop.time(), data)
        self._perform()

    def eof_received(self) -> bool:
        self._serving.data_received(self._loop.time(), b"")
        self._perform()
        return True  # the driver decides when to close

    def connection_lost(self, exc: Exception | None) -> None:
        self._serving.connection_lost()
        self._transport = None
        if self._timer is not None:
            self._timer.cancel()
        if self._exchange_task is not None:
            self._exchange_task.cancel()
        self._server._connections.discard(self)
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self._serving.write_paused()

    def resume_writing(self) -> None:
        self._serving.write_resumed()
        self._perform()

    def _wake(self) -> None:
        # Called from hub.publish: write on the next loop iteration, so that
        # everything published meanwhile goes out as one chunk.
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._scheduled_perform)

    def _scheduled_perform(self) -> None:
        self._scheduled = False
        self._perform()

    def _perform(self) -> None:
        """Perform the driver's actions up to the next wait."""
        transport = self._transport
        serving = self._serving
        while transport is not None and not transport.is_closing():
            action = serving.next_action(self._loop.time())
            if type(action) is Write:
                transport.write(action.data)  # over the high-water mark: write_paused()
            elif type(action) is WaitUntil:
                self._wait_until(action.deadline)
                return
            elif type(action) is RunHandler:
                self._exchange_task = self._loop.create_task(self._run_handler(action))
            else:  # Close
                transport.close()
                return

    def _wait_until(self, deadline: float | None) -> None:
        # One timer, moved only when the deadline comes sooner: one set for a
        # later deadline fires early and sets the next one then.
        timer = self._timer
        if timer is not None:
            if deadline is not None and timer.when() <= deadline:
                return
            timer.cancel()
        self._timer = None if deadline is None else self._loop.call_at(deadline, self._timed_out)

    def _timed_out(self) -> None:
        self._timer = None
        self._perform()

    async def _run_handler(self, action: RunHandler) -> None:
        handler = self._server._settings.exchange_handler
        assert handler is not None
        await run_exchange_handler(self._serving, handler, action.ask)
        self._perform()

    def shutdown(self) -> None:
        """The server is closing: end the path cleanly, past flow control."""
        self._serving.shutdown()
        self._perform()

    def abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()


class Server(ServerBase):
    """A running asyncio server of a hub; see :func:`serve`.

    ``url`` is its base URL (give it to :func:`listen`). :meth:`close` ends
    every open path cleanly and closes; ``async with`` closes on exit.
    """

    _settings: ServeSettings[ExchangeHandler]

    def __init__(self, hub: Hub, settings: ServeSettings[ExchangeHandler]) -> None:
        super().__init__(hub, settings)
        self._loop = asyncio.get_running_loop()
        self._server: asyncio.Server | None = None
        self._connections: set[_ServeProtocol] = set()
        self._closing = False
        self._closed: asyncio.Task[None] | None = None

    @property
    def connections(self) -> int:
        """How many connections are open."""
        return len(self._connections)

    async def _start(self, host: str, port: int) -> Server:
        self._server = await self._loop.create_server(
            lambda: _ServeProtocol(self), host, port, reuse_address=True
        )
        name = self._server.sockets[0].getsockname()
        self.host = str(name[0])
        self.port = int(name[1])
        return self

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
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


class _Serving(Coroutine[Any, Any, Server]):
    """What :func:`serve` returns: ``async with`` it, or await it for the running server.

    Nothing starts before either: the coroutine that starts the server is
    made on the first ``await`` (or ``send``, as an event loop's task does).
    """

    def __init__(self, hub: Hub, host: str, port: int, settings: ServeSettings[Any]) -> None:
        self._arguments = (hub, host, port, settings)
        self._starting: Coroutine[Any, Any, Server] | None = None
        self._server: Server | None = None

    def _start(self) -> Coroutine[Any, Any, Server]:
        if self._starting is None:
            hub, host, port, settings = self._arguments
            self._starting = Server(hub, settings)._start(host, port)
        return self._starting

    def __await__(self) -> Generator[Any, None, Server]:
        return self._start().__await__()

    def send(self, value: Any) -> Any:
        return self._start().send(value)

    def throw(self, *error: Any) -> Any:
        return self._start().throw(*error)

    def close(self) -> None:
        if self._starting is not None:
            self._starting.close()

    async def __aenter__(self) -> Server:
        self._server = await self._start()
        return self._server

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        await self._server.close()


def serve(
    hub: Hub,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    exchange_handler: ExchangeHandler | None = None,
    **options: Unpack[ServeOptions],
) -> _Serving:
    """Serve ``hub`` on ``host``:``port`` (0 picks a free port): ``async with serve(hub)``.

    Leaving the block ends every open path cleanly and closes (see
    :meth:`Server.close`); ``server = await serve(hub)`` returns the running
    server instead (``async with await serve(hub) as server:`` works too).
    Each notification ask subscribes to the hub (``queue_size`` per
    subscriber, default the hub's) and gets what is published from then on,
    in batches of at most ``max_batch`` per HTTP chunk, with a keep-alive
    after ``keepalive_interval`` seconds without output. A listener that
    does not read loses what its queue cannot hold, and nobody else waits
    for it. Asks of kinds 0-3 are declined ("not served") unless an
    ``exchange_handler`` answers them (it may be a coroutine function). A
    connection that has not completed its ask ``ask_timeout`` seconds after
    it was accepted is closed without an answer. The options are those of
    ``ServeOptions``: ``token``, ``keepalive_interval``, ``profile``,
    ``queue_size``, ``max_batch``, ``close_timeout``, ``ask_timeout``.

    They are checked by the call, before anything listens: a ``token`` that
    the server could not compare (it must be one or more visible ASCII
    characters) or a non-positive interval, timeout or size raises
    :class:`ValueError`.
    """
    settings = ServeSettings(exchange_handler=exchange_handler, **options)
    return _Serving(hub, host, port, settings)
