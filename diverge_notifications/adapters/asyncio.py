"""The asyncio adapter: :func:`listen` and :func:`serve`.

Both perform the actions of the sans-IO drivers (``sansio.listening`` and
``sansio.serving``), which take every decision; this module moves bytes and
owns the event loop's clock. The hub is not thread-safe: publish from the
event loop's thread; from another, ``loop.call_soon_threadsafe(hub.publish, item)``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

from ..sansio.actions import (
    ClientDriver,
    Close,
    Connect,
    Deliver,
    Disconnect,
    ExchangeHandler,
    Receive,
    RunHandler,
    Send,
    Sleep,
    WaitUntil,
    Write,
)
from ..sansio.events import Event
from ..sansio.hub import Hub
from ..sansio.mcp import Notification
from ..sansio.serve_settings import ServeSettings
from ._asyncio_parts import answer_within, asyncio_receive, drained, linger, within
from ._common import (
    READ_SIZE,
    AsyncServerBase,
    Starting,
    accepted,
    describe_error,
    listen_driver,
    reset_on_close,
)
from .tls import asyncio_server_options

if TYPE_CHECKING:
    import ssl

    from typing_extensions import Unpack

    from ._common import ListenOptions, ServeOptions

__all__ = ["Server", "listen", "serve"]

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
            if type(action) is Deliver:
                for item in action.items:
                    yield item
            elif type(action) is Receive:
                assert reader is not None
                await asyncio_receive(driver, reader, action.timeout, loop.time)
            elif type(action) is Send:
                assert writer is not None
                # A write never blocks here; a failure shows up on the next read.
                writer.write(action.data)
            elif type(action) is Connect:
                # Over TLS, the certificate is verified for action.host, the URL's.
                opening = asyncio.open_connection(action.host, action.port, limit=_LIMIT, ssl=tls)
                try:
                    reader, writer = await within(opening, action.timeout)
                except (OSError, asyncio.TimeoutError) as error:
                    driver.connect_failed(loop.time(), describe_error(error))
                else:
                    driver.connected(loop.time())
            elif type(action) is Sleep:
                await asyncio.sleep(action.delay)
            elif type(action) is Disconnect:
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


# --- the server ----------------------------------------------------------------


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
            if type(action) is Write:
                writer.write(action.data)
                try:
                    if not await drained(writer, self._server._settings.stall_timeout):
                        serving.write_stalled(self._loop.time())
                except OSError:
                    serving.connection_lost()
            elif type(action) is WaitUntil:
                at = action.deadline
                timer = None if at is None else self._loop.call_at(at, self._ready.set)
                await self._ready.wait()
                if timer is not None:
                    timer.cancel()
            elif type(action) is RunHandler:
                answering = answer_within(serving, self._server._settings, action.ask)
                self._handler = self._loop.create_task(answering)
                await asyncio.wait([self._handler])  # not raising if it was cancelled
            else:
                assert type(action) is Close
                if action.abort:  # a reset: nothing more goes to a stalled peer
                    reset_on_close(writer.get_extra_info("socket"))
                    writer.transport.abort()
                elif action.linger:
                    await linger(self._reader, writer, action.linger)
                return


class Server(AsyncServerBase):
    """A running asyncio server of a hub; see :func:`serve`. ``async with`` closes it on exit."""

    _settings: ServeSettings[ExchangeHandler]
    _event = asyncio.Event

    def __init__(self, hub: Hub, handler: ExchangeHandler | None, options: ServeOptions) -> None:
        super().__init__(hub, handler, options)
        self._server: asyncio.Server | None = None
        self._closed: asyncio.Task[None] | None = None

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
