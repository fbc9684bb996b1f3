"""The trio adapter: :func:`listen` and :func:`serve` (needs the ``trio`` extra).

Both are thin loops around :mod:`._common`, which holds every decision;
this module moves bytes and owns trio's clock. Importing
:mod:`diverge_notifications` does not import this module or trio.

The hub is not thread-safe: publish from the trio thread (with
``hub.publish(...)`` or :meth:`Server.publish`); from another thread use
``trio.from_thread.run_sync(hub.publish, item)``.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager

import trio

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

_STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


# --- the listener --------------------------------------------------------------


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
    """Listen to the notifications of the server at ``url``; see the asyncio :func:`listen`.

    An async generator with the same items and behaviour. Iterate it inside
    ``contextlib.aclosing(...)`` (trio finalizes abandoned async generators
    late); leaving that block, or cancelling the surrounding scope, closes
    the connection and asks no more. As there, the arguments (the
    ``token`` included) are checked when ``listen`` is called, before any
    connection: :class:`ValueError` from the call itself.
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
    stream: trio.SocketStream | None = None
    try:
        while True:
            action = driver.next_action(trio.current_time())
            if type(action) is Deliver:
                for item in action.items:
                    yield item
            elif type(action) is Receive:
                assert stream is not None
                data: bytes | None = None
                failure: BaseException | None = None
                with trio.move_on_after(action.timeout):
                    try:
                        data = bytes(await stream.receive_some(READ_SIZE))
                    except _STREAM_ERRORS as error:
                        failure = error
                if failure is not None:
                    driver.connection_lost(trio.current_time(), describe_error(failure))
                elif data is None:
                    driver.timed_out(trio.current_time())
                else:
                    driver.data_received(trio.current_time(), data)
            elif type(action) is Send:
                assert stream is not None
                try:
                    await stream.send_all(action.data)
                except _STREAM_ERRORS as error:
                    driver.connection_lost(trio.current_time(), describe_error(error))
            elif type(action) is Connect:
                try:
                    with trio.fail_after(action.timeout):
                        stream = await trio.open_tcp_stream(action.host, action.port)
                except (OSError, trio.TooSlowError) as error:
                    reason = "timed out" if isinstance(error, trio.TooSlowError) else None
                    driver.connect_failed(trio.current_time(), reason or describe_error(error))
                else:
                    driver.connected(trio.current_time())
            elif type(action) is Sleep:
                await trio.sleep(action.delay)
            elif type(action) is Disconnect:
                if stream is not None:
                    await trio.aclose_forcefully(stream)
                stream = None
            else:
                assert type(action) is Stop
                return
    finally:
        if stream is not None:
            await trio.aclose_forcefully(stream)


# --- the server ----------------------------------------------------------------


class _Connection:
    """One accepted connection: a :class:`ServingConnection`, a reader and a writer task."""

    def __init__(self, server: Server, stream: trio.SocketStream) -> None:
        self._server = server
        self._stream = stream
        # Made when the connection is accepted: the ask's deadline starts now.
        self.serving = server._settings.serving_connection(
            server.hub, wake=self._wake, now=trio.current_time()
        )
        self._ready = trio.Event()
        self.finished = trio.Event()
        self.cancel_scope = trio.CancelScope()

    def _wake(self) -> None:
        self._ready.set()

    def shutdown(self) -> None:
        """The server is closing: end the path cleanly."""
        self.serving.shutdown()
        self._ready.set()

    async def run(self) -> None:
        try:
            with self.cancel_scope:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._read)
                    await self._write()
                    nursery.cancel_scope.cancel()
        finally:
            self.serving.connection_lost()
            self._server._connections.discard(self)
            await trio.aclose_forcefully(self._stream)
            self.finished.set()

    async def _read(self) -> None:
        serving = self.serving
        try:
            while not serving.done:
                data = bytes(await self._stream.receive_some(READ_SIZE))
                serving.receive(data, trio.current_time())
                self._ready.set()
                if not data:
                    return
        except _STREAM_ERRORS:
            serving.connection_lost()
            self._ready.set()

    async def _write(self) -> None:
        serving = self.serving
        stream = self._stream
        while True:
            # A fresh event before taking the output: whatever is published
            # from here on sets it, and whatever came before is taken now.
            self._ready = trio.Event()
            now = trio.current_time()
            serving.check_ask_deadline(now)
            out = serving.take_output(now) + serving.keepalive(now)
            if out:
                try:
                    await stream.send_all(out)
                except _STREAM_ERRORS:
                    serving.connection_lost()
                    return
            if serving.done:
                return
            if serving.exchange is not None:
                await run_exchange_handler(serving, self._server._settings.exchange_handler)
                continue
            if serving.has_backlog:
                await trio.lowlevel.checkpoint()
                continue
            # At most one of the two is set: the ask's deadline is cleared
            # before a path (and its keep-alives) can start.
            ask_deadline = serving.ask_deadline
            keepalive_at = serving.keepalive_at
            at = min(
                math.inf if ask_deadline is None else ask_deadline,
                math.inf if keepalive_at is None else keepalive_at,
            )
            with trio.move_on_at(at):
                await self._ready.wait()


class Server:
    """A running trio server of a hub; see :func:`serve`.

    ``url`` is its base URL (give it to :func:`listen`). :meth:`close` ends
    every open path cleanly and closes; leaving ``serve``'s block does it.
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
        self._listeners: list[trio.SocketListener] = []
        self._connections: set[_Connection] = set()
        self._closing = False
        self._closed = trio.Event()

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
        """``hub.publish(item)``: call it from the trio thread."""
        return self.hub.publish(item)

    async def _accept(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except trio.ClosedResourceError:
                return
            except OSError:
                # Out of descriptors or a connection reset before accept:
                # wait a little, as trio.serve_listeners does, and go on.
                await trio.sleep(0.1)
                continue
            if self._closing:
                await trio.aclose_forcefully(stream)
                continue
            connection = _Connection(self, stream)
            self._connections.add(connection)
            nursery.start_soon(connection.run)

    async def close(self) -> None:
        """End every open path cleanly, stop accepting, and close every connection.

        Connections whose peer does not take the end within
        ``close_timeout`` seconds (a stalled listener) are cancelled. Every
        call returns when the server is closed, a second one included. As
        trio's ``aclose()`` does, a close that is cancelled still closes,
        forcefully: the connections left are cut off at once, then
        ``Cancelled`` goes on.
        """
        if self._closing:
            await self._closed.wait()
            return
        self._closing = True  # from here on _accept closes what it accepts
        try:
            # Shielded, and brief: every listener is closed (so that every
            # _accept task ends) and every connection told, whatever happens.
            with trio.CancelScope(shield=True):
                for listener in self._listeners:
                    await trio.aclose_forcefully(listener)
                for connection in list(self._connections):
                    connection.shutdown()
            with trio.move_on_after(self._settings.close_timeout):
                for connection in list(self._connections):
                    await connection.finished.wait()
        finally:
            try:
                # Timed out or cancelled: cut off what is left. A cancelled
                # connection ends at once, so the shield holds only briefly.
                with trio.CancelScope(shield=True):
                    connections = list(self._connections)
                    for connection in connections:
                        connection.cancel_scope.cancel()
                    for connection in connections:
                        await connection.finished.wait()
            finally:
                self._closed.set()


@asynccontextmanager
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
) -> AsyncIterator[Server]:
    """Serve ``hub`` on ``host``:``port`` while the ``async with`` block runs.

    ``async with serve(hub) as server:`` starts it; leaving the block ends
    every open path cleanly and closes (see :meth:`Server.close`). The
    options are those of the asyncio :func:`serve`, and are checked the
    same way: a bad ``token`` or option raises :class:`ValueError` when the
    block is entered, before anything listens.
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
    server._listeners = await trio.open_tcp_listeners(port, host=host)
    name = server._listeners[0].socket.getsockname()
    server.host = str(name[0])
    server.port = int(name[1])
    async with trio.open_nursery() as nursery:
        for listener in server._listeners:
            nursery.start_soon(server._accept, listener, nursery)
        try:
            yield server
        finally:
            # Bounded by close_timeout, so shielding cannot hang a cancellation.
            with trio.CancelScope(shield=True):
                await server.close()
