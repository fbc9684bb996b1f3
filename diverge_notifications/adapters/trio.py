"""The trio adapter: :func:`listen`, :func:`serve` and :class:`Proxy` (needs the ``trio`` extra).

The trio counterparts of :mod:`.asyncio`'s, with the same options and
behaviour: :func:`listen` asks for notifications, asks again with backoff
and jitter and yields what arrives; :func:`serve` runs a :class:`Server` of
a hub while an ``async with`` block runs; :class:`Proxy` makes the
exchanges of kinds 0-3 and keeps open the notification ask they unlock
(in the background inside ``async with``), raising :class:`ExchangeError`,
:class:`ExchangeFailed` and :class:`ProxyClosed` (re-exported here).

All three are loops that perform the actions of the sans-IO drivers
(:mod:`diverge_notifications.sansio.drivers.listen`,
:mod:`~diverge_notifications.sansio.drivers.serve` and
:mod:`~diverge_notifications.sansio.drivers.proxy`), which take every
decision; this module moves bytes and owns trio's clock. Importing
:mod:`diverge_notifications` does not import this module or trio.

The hub is not thread-safe: publish from the trio thread (``hub.publish`` or
:meth:`Server.publish`); from another, ``trio.from_thread.run_sync(hub.publish, item)``.

The module reads top-down: the listener's loop, the server and its
connections, the proxy, then the trio helpers they share: TLS on trio
streams (:func:`connect`, :func:`secure_accepted`), sending with a stall
deadline, lingering after a refusal and the exchange handler's deadline.
"""

from __future__ import annotations

import contextlib
import ssl
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from ..sansio.drivers import actions
from ..sansio.drivers.actions import ClientDriver, ExchangeHandler
from ..sansio.drivers.proxy import ExchangeError, ExchangeFailed
from ..sansio.drivers.serve import ServingConnection
from ..sansio.drivers.settings import ServeSettings
from ..sansio.errors import ProxyClosed
from ..sansio.events import Event
from ..sansio.mcp.model import Notification
from ..sansio.server.hub import Hub
from ..sansio.wire.asks import Ask
from ._common import (
    READ_AT_ONCE,
    READ_SIZE,
    AsyncServerBase,
    ServerBase,
    WriteProgress,
    accepted,
    describe_error,
    handler_timed_out,
    handshake_failure,
    listen_driver,
    read_pieces,
    reset_on_close,
    run_exchange_handler,
    sweep_period,
)
from ._proxy import AsyncProxy

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._common import ListenOptions, ServeOptions
    from ._proxy import ProxyOptions

__all__ = [
    "ExchangeError",
    "ExchangeFailed",
    "Proxy",
    "ProxyClosed",
    "Server",
    "listen",
    "serve",
]


# --- listen ---------------------------------------------------------------------------


def listen(
    url: str, **options: Unpack[ListenOptions]
) -> AsyncGenerator[Notification | Event, None]:
    """Listen to the notifications of the server at ``url``; see the asyncio ``listen``.

    An async generator with the same options, items and behaviour. Iterate
    it inside ``contextlib.aclosing(...)`` (trio finalizes abandoned async
    generators late); leaving that block, or cancelling the surrounding
    scope, closes the connection and asks no more. As there, the options
    (the ``token`` included) are checked when ``listen`` is called, before
    any connection: :class:`ValueError` from the call itself.
    """
    return _listen(*listen_driver(url, **options))


async def _listen(
    driver: ClientDriver, tls: ssl.SSLContext | None
) -> AsyncGenerator[Notification | Event, None]:
    stream: trio.abc.Stream | None = None
    reads: _Reads | None = None
    try:
        while True:
            action = driver.next_action(trio.current_time())
            if type(action) is actions.Deliver:
                for item in action.items:
                    yield item
            elif type(action) is actions.Receive:
                assert reads is not None
                if reads.pieces:  # the rest of a read: no wait, no turn of the loop
                    driver.data_received(trio.current_time(), reads.pieces.popleft())
                    continue
                data: bytes | None = None
                failure: BaseException | None = None
                with trio.move_on_after(action.timeout):
                    try:
                        data = await reads.receive()
                    except STREAM_ERRORS as error:
                        failure = error
                if failure is not None:
                    driver.connection_lost(trio.current_time(), describe_error(failure))
                elif data is None:
                    driver.timed_out(trio.current_time())
                else:
                    driver.data_received(trio.current_time(), data)
            elif type(action) is actions.Send:
                assert stream is not None
                try:
                    await stream.send_all(action.data)
                except STREAM_ERRORS as error:
                    driver.connection_lost(trio.current_time(), describe_error(error))
            elif type(action) is actions.Connect:
                try:
                    with trio.fail_after(action.timeout):  # the TLS handshake included
                        stream = await connect(action.host, action.port, tls)
                except (*STREAM_ERRORS, trio.TooSlowError) as error:
                    reason = "timed out" if isinstance(error, trio.TooSlowError) else None
                    driver.connect_failed(trio.current_time(), reason or describe_error(error))
                else:
                    reads = _Reads(stream)
                    driver.connected(trio.current_time())
            elif type(action) is actions.Sleep:
                await trio.sleep(action.delay)
            elif type(action) is actions.Disconnect:
                if stream is not None:
                    await trio.aclose_forcefully(stream)
                stream = reads = None
            else:  # Stop
                return
    finally:
        if stream is not None:
            await trio.aclose_forcefully(stream)


class _Reads:
    """A listener's reads of its stream, handed on READ_SIZE bytes at most at a time.

    A plain TCP stream is read READ_AT_ONCE bytes at a time into one buffer
    kept for the connection's life, and each read is handed on in pieces
    (:func:`read_pieces`), those after the first without a turn of the
    loop; a TLS stream is read READ_SIZE bytes at a time.
    """

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        #: What was read and not handed on yet.
        self.pieces: deque[bytes] = deque()
        self._socket = stream.socket if isinstance(stream, trio.SocketStream) else None
        self._buffer = memoryview(bytearray(READ_AT_ONCE if self._socket is not None else 0))

    async def receive(self) -> bytes:
        """The next piece read (``b""`` at end of file), waiting for it."""
        if self._socket is None:
            return bytes(await self.stream.receive_some(READ_SIZE))
        nbytes = await self._socket.recv_into(self._buffer)
        if not nbytes:
            return b""
        first, *rest = read_pieces(self._buffer, nbytes)
        self.pieces.extend(rest)
        return first


# --- serve ----------------------------------------------------------------------------


@asynccontextmanager
async def serve(
    hub: Hub,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    exchange_handler: ExchangeHandler | None = None,
    **options: Unpack[ServeOptions],
) -> AsyncIterator[Server]:
    """Serve ``hub`` on ``host``:``port`` while the ``async with`` block runs.

    ``async with serve(hub) as server:`` starts it; leaving the block ends
    every open path cleanly and closes (see :meth:`Server.close`). The
    options are those of the asyncio ``serve``, and are checked the same
    way: a bad ``token`` or option raises :class:`ValueError` when the
    block is entered, before anything listens.
    """
    server = Server(hub, exchange_handler, options)
    backlog = server._settings.backlog
    server._listeners = await trio.open_tcp_listeners(port, host=host, backlog=backlog)
    name = server._listeners[0].socket.getsockname()
    server.host = str(name[0])
    server.port = int(name[1])
    async with trio.open_nursery() as nursery:
        for listener in server._listeners:
            nursery.start_soon(server._accept, listener, nursery)
        nursery.start_soon(server._sweep)
        try:
            yield server
        finally:
            # Bounded by close_timeout, so shielding cannot hang a cancellation.
            with trio.CancelScope(shield=True):
                await server.close()


class Server(AsyncServerBase):
    """A running trio server of a hub; see :func:`serve`.

    ``url`` is its base URL (give it to :func:`listen`). :meth:`close` ends
    every open path cleanly and closes; leaving ``serve``'s block does it.
    """

    _settings: ServeSettings[ExchangeHandler]
    _event = trio.Event

    def __init__(self, hub: Hub, handler: ExchangeHandler | None, options: ServeOptions) -> None:
        super().__init__(hub, handler, options)
        self._listeners: list[trio.SocketListener] = []
        self._closed = trio.Event()
        # The deadlines the sweep wakes the connections at (_sweep).
        self._deadlines: dict[_Connection, float] = {}
        self._sweeping = trio.CancelScope()

    async def _sweep(self) -> None:
        """Wake the connections whose deadline passed, until the server is closed.

        One timer for the whole server rather than a cancel scope with a
        deadline per wait (see :func:`sweep_period`).
        """
        period = sweep_period(self._settings)
        deadlines = self._deadlines
        with self._sweeping:
            while True:
                await trio.sleep(period)
                now = trio.current_time()
                for connection in [c for c, at in deadlines.items() if at <= now]:
                    del deadlines[connection]
                    connection.wake()

    def _clock(self) -> float:
        return trio.current_time()

    async def _wait_at_most(self, event: Any, seconds: float) -> None:
        with trio.move_on_after(seconds):
            await event.wait()

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
                self._sweeping.cancel()
                self._closed.set()


class _Connection:
    """One accepted connection: a reader task, and a loop performing the driver's actions."""

    def __init__(self, server: Server, stream: trio.abc.Stream) -> None:
        self._server = server
        self._stream = stream
        # Made when the connection is accepted: the ask's deadline starts now.
        peer = accepted(getattr(stream, "socket", None), server._settings)
        # The event is replaced before each action: the wake-up sets the current one.
        self.serving = server._serving(lambda: self._ready.set(), trio.current_time(), peer)
        self._ready = trio.Event()
        self.finished = trio.Event()
        self.cancel_scope = trio.CancelScope()

    def shutdown(self) -> None:
        """The server is closing: end the path cleanly."""
        self.serving.shutdown()
        self._ready.set()

    def wake(self) -> None:
        """A deadline of the connection passed (the server's sweep): take the next action."""
        self._ready.set()

    async def run(self) -> None:
        try:
            with self.cancel_scope:
                secured = await secure_accepted(self._stream, self._server)
                if isinstance(secured, str):  # the TLS handshake failed, or took too long
                    self.serving.handshake_failed(trio.current_time(), secured)
                    return
                self._stream = secured
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._read)
                    await self._serve()
                    nursery.cancel_scope.cancel()
        finally:
            self.serving.connection_lost()
            self._server._connections.discard(self)
            await trio.aclose_forcefully(self._stream)
            self.finished.set()

    async def _read(self) -> None:
        serving = self.serving
        try:
            while serving.wants_read:
                data = bytes(await self._stream.receive_some(READ_SIZE))
                serving.data_received(trio.current_time(), data)
                self._ready.set()
        except STREAM_ERRORS:
            serving.connection_lost()
            self._ready.set()

    async def _serve(self) -> None:
        serving = self.serving
        stream = self._stream
        settings = self._server._settings
        progress = WriteProgress(_socket(stream), settings.stall_timeout)
        deadlines = self._server._deadlines
        while True:
            # A fresh event before the next action: whatever is published
            # from here on sets it, and whatever came before is taken now.
            self._ready = trio.Event()
            action = serving.next_action(trio.current_time())
            if type(action) is actions.Write:
                try:
                    if not await sent(stream, action.data, progress):
                        serving.write_stalled(trio.current_time())
                except STREAM_ERRORS:
                    serving.connection_lost()
            elif type(action) is actions.WaitUntil:
                deadline = action.deadline
                if deadline is None:
                    await self._ready.wait()
                elif deadline <= trio.current_time():
                    # More is queued: the others run first, without a cancel scope
                    # whose deadline has passed (bench/bench_fanout.py --servers).
                    await trio.lowlevel.checkpoint()
                else:
                    deadlines[self] = deadline  # the server's sweep wakes the connection then
                    try:
                        await self._ready.wait()
                    finally:
                        deadlines.pop(self, None)
            elif type(action) is actions.RunHandler:
                await answer_within(serving, settings, action.ask)
            else:
                assert type(action) is actions.Close
                await close_as(stream, action)
                return


# --- the proxy ------------------------------------------------------------------------


class Proxy(AsyncProxy):
    """A proxy of the server at ``url`` (``http://host:port[/base]``), on trio.

    The methods of the asyncio ``Proxy``, with the same behaviour inside
    ``async with Proxy(url) as proxy:``: the block's nursery runs the
    notification ask in the background, kept open from the first answered
    exchange until the block ends (or ``await proxy.aclose()``), whether
    or not ``notifications()`` is iterated. trio runs no task without a
    nursery, so a proxy used without ``async with`` asks only while
    ``notifications()`` is iterated, as the reader's own loop, and a
    reader that stops ends the ask (the next one asks again after the
    policy's backoff). Iterate ``notifications()`` inside
    ``contextlib.aclosing(...)``, as trio's ``listen``. The proxy may be
    made outside ``trio.run``.
    """

    def __init__(self, url: str, **options: Unpack[ProxyOptions]) -> None:
        super().__init__(url, trio.Event, **options)
        self._nursery: trio.Nursery | None = None
        self._nursery_manager: contextlib.AbstractAsyncContextManager[trio.Nursery] | None = None

    def _drive(self, driver: ClientDriver) -> AsyncGenerator[Notification | Event, None]:
        return _listen(driver, self._tls)

    def _now(self) -> float:
        return trio.current_time()

    def _background(self) -> bool:
        return self._nursery is not None

    def _spawn(self, run: Coroutine[Any, Any, None]) -> Callable[[], object]:
        assert self._nursery is not None
        scope = trio.CancelScope()

        async def cancellable() -> None:
            with scope:
                await run

        self._nursery.start_soon(cancellable)
        return scope.cancel

    async def __aenter__(self) -> Proxy:
        if self._nursery_manager is not None:
            raise RuntimeError("the proxy's async with is entered already")
        manager = self._nursery_manager = trio.open_nursery()
        self._nursery = await manager.__aenter__()
        self._start_listening()  # an exchange may have been answered before
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        manager = self._nursery_manager
        assert manager is not None
        try:
            await self.aclose()
        finally:
            self._nursery = self._nursery_manager = None
            # The background ask is over: the nursery ends with nothing to wrap,
            # and what the block raised goes on as it was.
            await manager.__aexit__(None, None, None)


# --- trio helpers ---------------------------------------------------------------------

#: What a broken or closed stream raises.
STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)
#: Bytes sent at a time: a peer that takes none of a piece for stall_timeout is stalled.
_PIECE = 64 * 1024


async def connect(host: str, port: int, context: ssl.SSLContext | None) -> trio.abc.Stream:
    """A connection to ``host``:``port``, inside TLS (verified for ``host``) with ``context``.

    The caller bounds the time it takes; a stream whose handshake fails is
    closed. Raises ``OSError`` or ``trio.BrokenResourceError`` (caused by
    the :class:`ssl.SSLError`).
    """
    stream = await trio.open_tcp_stream(host, port)
    if context is None:
        return stream
    # https_compatible: a peer may end without a TLS close, as HTTP servers do.
    secured = trio.SSLStream(stream, context, server_hostname=host, https_compatible=True)
    try:
        await secured.do_handshake()
    except BaseException:
        await trio.aclose_forcefully(secured)
        raise
    return secured


async def secure_accepted(stream: trio.abc.Stream, server: ServerBase) -> trio.abc.Stream | str:
    """``stream`` inside the TLS of ``server``, or as it is if the server has none.

    Why not, in one line, if the handshake fails or takes longer than the
    server's ``ask_timeout``: the caller closes the connection.
    """
    if server.tls is None:
        return stream
    secured = trio.SSLStream(stream, server.tls, server_side=True, https_compatible=True)
    with trio.move_on_after(server.ask_timeout):
        try:
            await secured.do_handshake()
        except STREAM_ERRORS as error:
            return handshake_failure(error)
        return secured
    return handshake_failure(None)


async def sent(stream: trio.abc.Stream, data: bytes, progress: WriteProgress) -> bool:
    """Send ``data``; False if the peer took no byte for ``stall_timeout`` seconds.

    On a plain socket, ``progress`` says whether the peer took any
    (:class:`WriteProgress`), looked at each time a ``send()`` finds no room
    for ``progress.step`` seconds: trio's socket ``send()`` sends nothing
    when it is cancelled, so the send is simply made again. Inside TLS
    (whose ``send_all()`` cannot be taken up again once cancelled),
    progress is seen a piece (``_PIECE`` bytes) at a time.
    """
    view = memoryview(data)
    if type(stream) is not trio.SocketStream:
        for start in range(0, len(view), _PIECE):
            with trio.move_on_after(progress.stall_timeout):
                await stream.send_all(view[start : start + _PIECE])
                continue
            return False
        return True
    sock = stream.socket
    handed = 0
    progress.waiting(trio.current_time(), handed)
    while view:
        with trio.move_on_after(progress.step):
            count = await sock.send(view)
            view = view[count:]
            handed += count
            continue
        if progress.stalled(trio.current_time(), handed):
            return False
    return True


def _socket(stream: trio.abc.Stream) -> object:
    """The socket under ``stream``, inside TLS or not (``None`` if it has none)."""
    while isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    return getattr(stream, "socket", None)


async def close_as(stream: trio.abc.Stream, close: actions.Close) -> None:
    """Before ``stream`` is closed: make it a reset (``abort``), or linger (``linger`` seconds)."""
    if close.abort:
        reset_on_close(_socket(stream))
    elif close.linger:
        await linger(stream, close.linger)


async def linger(stream: trio.abc.Stream, seconds: float) -> None:
    """Half-close, then read and discard until the peer closes or ``seconds`` pass.

    TLS has no half-close: inside it the stream is only read and discarded
    (the refusal has a ``Content-Length``, so the peer knows where it ends).
    """
    with trio.move_on_after(seconds), contextlib.suppress(*STREAM_ERRORS):
        if isinstance(stream, trio.abc.HalfCloseableStream):
            await stream.send_eof()
        while await stream.receive_some(READ_SIZE):
            pass  # discarded: the peer reads its refusal, not a reset


async def answer_within(
    serving: ServingConnection, settings: ServeSettings[ExchangeHandler], ask: Ask
) -> None:
    """Perform ``RunHandler(ask)``, cancelling the handler past ``exchange_timeout``."""
    assert settings.exchange_handler is not None
    with trio.move_on_after(settings.exchange_timeout) as scope:
        await run_exchange_handler(serving, settings.exchange_handler, ask)
    if scope.cancelled_caught:
        handler_timed_out(serving, ask, settings.exchange_timeout)
