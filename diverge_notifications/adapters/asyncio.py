"""The asyncio adapter: :func:`listen`, :func:`serve` and :class:`Proxy`.

* :func:`listen` is a client: an async generator that asks for
  notifications, asks again with backoff and jitter, and yields what
  arrives.
* :func:`serve` runs a :class:`Server` of a :class:`~diverge_notifications.sansio.Hub`.
* :class:`Proxy` makes the exchanges of kinds 0-3 (``list_tools()``,
  ``call_tool()``...) and keeps open the notification ask they unlock; it
  raises :class:`ExchangeError`, :class:`ExchangeFailed` and, once closed,
  :class:`ProxyClosed`, re-exported here.

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
one read of the listener, the exchange
handler's deadline and the linger after a refusal.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from ..sansio.drivers import actions
from ..sansio.drivers.actions import ClientDriver, ExchangeHandler
from ..sansio.drivers.proxy import ExchangeError, ExchangeFailed
from ..sansio.drivers.serve import ServingConnection, ServingState
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
    Starting,
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
from .tls import asyncio_tls_options

if TYPE_CHECKING:
    import ssl

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
    "within",
]


# --- listen ---------------------------------------------------------------------------

#: A listener stops reading (and so slows its server down) past this many unread bytes.
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
    received: Received | None = None
    try:
        while True:
            action = driver.next_action(loop.time())
            if type(action) is actions.Deliver:
                for item in action.items:
                    yield item
            elif type(action) is actions.Receive:
                assert received is not None
                await received.receive(driver, action.timeout)
            elif type(action) is actions.Send:
                assert received is not None
                # A write never blocks here; a failure shows up on the next read.
                received.transport.write(action.data)
            elif type(action) is actions.Connect:
                # Over TLS, the certificate is verified for action.host, the URL's.
                opening = loop.create_connection(
                    lambda: Received(loop), action.host, action.port, ssl=tls
                )
                try:
                    _, received = await within(opening, action.timeout)
                except (OSError, asyncio.TimeoutError) as error:
                    driver.connect_failed(loop.time(), describe_error(error))
                else:
                    driver.connected(loop.time())
            elif type(action) is actions.Sleep:
                await asyncio.sleep(action.delay)
            elif type(action) is actions.Disconnect:
                # abort(), not close(): nothing is left to send, and an unread
                # path must not keep the socket around.
                if received is not None:
                    received.transport.abort()
                received = None
            else:  # Stop
                return
    finally:
        if received is not None:
            received.transport.abort()


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
        # The server's sweep (_sweep) wakes the connections waiting for a
        # deadline and watches those whose output waits for a stall.
        self._deadlines: dict[_Connection, float] = {}
        self._writing: set[_Connection] = set()
        self._sweeper: asyncio.TimerHandle | None = None

    def _clock(self) -> float:
        return asyncio.get_running_loop().time()

    async def _wait_at_most(self, event: Any, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await within(event.wait(), seconds)

    async def _start(self, host: str, port: int) -> Server:
        self._loop = loop = asyncio.get_running_loop()
        settings = self._settings
        if self.tls is None:
            self._server = await asyncio.start_server(
                self._accepted, host, port, reuse_address=True, backlog=settings.backlog
            )
        else:
            # Not start_server(ssl=...): it drops a failed handshake without a
            # word. Each connection does its own (_Connection.run_secured).
            tls = self.tls
            self._server = await loop.create_server(
                lambda: _Accepting(self, tls),
                host,
                port,
                reuse_address=True,
                backlog=settings.backlog,
            )
        name = self._server.sockets[0].getsockname()
        self.host = str(name[0])
        self.port = int(name[1])
        self._sweeper = self._loop.call_later(sweep_period(self._settings), self._sweep)
        return self

    def _sweep(self) -> None:
        """Wake the connections whose deadline passed; cut off those whose peer stalled.

        One timer for the whole server rather than one per wait (see
        :func:`sweep_period`).
        """
        now = self._loop.time()
        due = [connection for connection, at in self._deadlines.items() if at <= now]
        for connection in due:
            del self._deadlines[connection]
            connection.wake()
        for connection in list(self._writing):
            connection.check_stall(now)
        self._sweeper = self._loop.call_later(sweep_period(self._settings), self._sweep)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _Connection(self, writer.transport).run(reader, writer)

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
        if self._sweeper is not None:
            self._sweeper.cancel()

    async def __aenter__(self) -> Server:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


class _Connection:
    """One accepted connection: a reader task, and a loop performing the driver's actions.

    Made on ``transport`` as it is accepted; :meth:`run` is given its
    streams (on a TLS server, :meth:`run_secured` makes them once the
    handshake is done).
    """

    _reader: asyncio.StreamReader
    _writer: asyncio.StreamWriter

    def __init__(self, server: Server, transport: asyncio.WriteTransport) -> None:
        self._server = server
        self._loop = loop = server._loop
        # What abort() cuts off: the accepted socket's, until run() has the streams'.
        self._transport = transport
        # Set by hub.publish too: the loop writes on its next iteration, so
        # that everything published meanwhile goes out as one chunk.
        self._ready = asyncio.Event()
        # Made when the connection is accepted: the ask's deadline starts now.
        sock = transport.get_extra_info("socket")
        peer = accepted(sock, server._settings)
        self.serving = server._serving(self._ready.set, loop.time(), peer)
        self._handler: asyncio.Task[None] | None = None
        self._secured: asyncio.Task[None] | None = None  # held: the loop keeps only a weak one
        self._handshaking = False
        self.finished: asyncio.Future[None] = loop.create_future()
        # What the stall check needs: the bytes written, and the transport's
        # low-water mark, at or under which it is never paused (set by run()).
        self._written = 0
        self._low_water = 0
        self._progress = WriteProgress(sock, server._settings.stall_timeout)
        server._connections.add(self)
        if server._closing:
            self.shutdown()

    def shutdown(self) -> None:
        """The server is closing: end the path cleanly."""
        self.serving.shutdown()
        self._ready.set()
        if self._handshaking:  # no ask yet: closed at once, as one still being read
            self._transport.abort()

    def abort(self) -> None:
        self._transport.abort()

    def wake(self) -> None:
        """A deadline of the connection passed (the server's sweep): take the next action."""
        self._ready.set()

    def _handed(self) -> int:
        """The bytes that left the transport's buffer for the socket so far."""
        return self._written - self._writer.transport.get_write_buffer_size()

    def check_stall(self, now: float) -> None:
        """Output waits (the server's sweep): cut the path off if its peer took no byte for long."""
        if self._progress.stalled(now, self._handed()):
            self._server._writing.discard(self)
            self.serving.write_stalled(now)
            # A reset: nothing more goes to a stalled peer, and the wait for
            # room ends (the transport is lost).
            reset_on_close(self._writer.get_extra_info("socket"))
            self._writer.transport.abort()

    async def _drain(self) -> None:
        """Wait until the transport takes more, watched by the server's sweep for a stall."""
        writing = self._server._writing
        self._progress.waiting(self._loop.time(), self._handed())
        writing.add(self)
        try:
            await self._writer.drain()
        except OSError:
            self.serving.connection_lost()
        finally:
            writing.discard(self)

    async def run(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve the connection through ``reader`` and ``writer``, then close it."""
        self._reader = reader
        self._writer = writer
        self._transport = transport = writer.transport
        self._low_water = transport.get_write_buffer_limits()[0]
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
            self._forget()

    def secure(self, transport: asyncio.Transport, context: ssl.SSLContext) -> None:
        """Do the TLS handshake with ``context`` on a task of its own, then serve (TLS server)."""
        self._handshaking = not self._server._closing
        self._secured = self._loop.create_task(self.run_secured(transport, context))

    async def run_secured(self, transport: asyncio.Transport, context: ssl.SSLContext) -> None:
        """Do the TLS handshake, then :meth:`run`; a failed one is reported to the driver.

        The handshake has ``ask_timeout`` (the ask's deadline started at the
        accept), and holds up no other connection: each has its own task.
        """
        # The peer's first bytes are the handshake's: nothing is read before
        # it. This first step of the task runs before the loop first reads
        # the socket (queued by connection_made, before the loop polls
        # again). Not paused in connection_made: Python 3.10 registers the
        # socket's reader after it, pause or not.
        transport.pause_reading()
        try:
            secured = await self._handshake(context)
        except BaseException:
            self._transport.abort()
            self.serving.connection_lost()
            self._forget()
            raise
        finally:
            self._handshaking = False
        if isinstance(secured, tuple):
            await self.run(*secured)
            return
        # Not if the server closed it meanwhile, or refused it as busy (its
        # driver went past the ask): that end is told as the driver's own.
        if secured is not None and self.serving.state is ServingState.ASKING:
            self.serving.handshake_failed(self._loop.time(), secured)
        # Aborted: a close would wait for a slow peer to read what is left.
        self._transport.abort()
        self.serving.connection_lost()
        self._forget()

    async def _handshake(
        self, context: ssl.SSLContext
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | str | None:
        """The streams of the connection inside TLS; else why the handshake failed.

        ``None`` if the connection was closed on our side meanwhile (the
        server closes).
        """
        if not self._handshaking:  # the server closed before the handshake began
            return None
        loop = self._loop
        settings = self._server._settings
        # The streams start_server would make, over the TLS transport.
        reader = asyncio.StreamReader(loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        timeout = settings.ask_timeout
        options = asyncio_tls_options(timeout, settings.close_timeout)
        # Both deadlines are the same: ours (within) is set first, so it is
        # the one that fires, and a handshake too slow is said to be so.
        upgrading = loop.start_tls(self._transport, protocol, context, **options)
        try:
            transport = await within(upgrading, timeout)
        except (OSError, asyncio.TimeoutError) as error:
            return handshake_failure(error)
        if transport is None:  # the connection was lost, by our abort()
            return None
        # start_tls() leaves connection_made() to its caller.
        protocol.connection_made(transport)
        return reader, asyncio.StreamWriter(transport, protocol, reader, loop)

    def _forget(self) -> None:
        """The connection is closed: the server no longer waits for it."""
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
        deadlines = self._server._deadlines
        while True:
            # Whatever wakes the connection from here on ends the next wait;
            # whatever came before is taken by the next action.
            self._ready.clear()
            action = serving.next_action(self._loop.time())
            if type(action) is actions.Write:
                writer.write(action.data)
                self._written += len(action.data)
                # Fast path (bench/bench_fanout.py, issue 26): a transport at or
                # under its low-water mark is not paused, so drain() would return
                # at once; waiting in it under a deadline made and cancelled a
                # timer per write, 21 % of the server's time at N = 1,000. (A
                # closing transport is drained too: drain() says it is lost.)
                transport = writer.transport
                if transport.get_write_buffer_size() > self._low_water or transport.is_closing():
                    await self._drain()
            elif type(action) is actions.WaitUntil:
                at = action.deadline
                if at is None:
                    await self._ready.wait()
                elif at <= self._loop.time():
                    await asyncio.sleep(0)  # more is queued: the others run first
                else:
                    deadlines[self] = at  # the server's sweep wakes the connection then
                    await self._ready.wait()
                    deadlines.pop(self, None)
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


class _Accepting(asyncio.Protocol):
    """A connection accepted by a TLS server, until its handshake takes it over.

    Nothing is read before (see :meth:`_Connection.run_secured`): the
    peer's first bytes are the handshake's, which ``loop.start_tls`` reads.
    """

    def __init__(self, server: Server, context: ssl.SSLContext) -> None:
        self._server = server
        self._context = context

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        _Connection(self._server, transport).secure(transport, self._context)


# --- the proxy ------------------------------------------------------------------------


class Proxy(AsyncProxy):
    """A proxy of the server at ``url`` (``http://host:port[/base]``), on asyncio.

    ``list_tools()``, ``list_resources()``, ``call_tool(name, arguments,
    progress_token=...)`` and ``read_resource(uri)`` make one exchange each
    and return its result (:class:`ExchangeError`, :class:`ExchangeFailed`
    otherwise). Once the first exchange was answered, a task of the event
    loop makes the notification ask and keeps it open, whether or not
    ``notifications()`` is iterated; what arrives waits in the proxy's
    buffer. ``async with Proxy(url) as proxy:`` closes it on exit, as
    ``await proxy.aclose()`` does; a proxy used without ``async with``
    keeps its task until ``aclose()`` or the end of its event loop. See
    ``AsyncProxy``.
    """

    def __init__(self, url: str, **options: Unpack[ProxyOptions]) -> None:
        super().__init__(url, asyncio.Event, **options)
        self._task: asyncio.Task[None] | None = None  # held: the loop keeps only a weak one
        self._loop: asyncio.AbstractEventLoop | None = None

    def _drive(self, driver: ClientDriver) -> AsyncGenerator[Notification | Event, None]:
        return _listen(driver, self._tls)

    def _now(self) -> float:
        # The loop of the ask's task once there is one: its end may run when the loop stops.
        return (self._loop or asyncio.get_running_loop()).time()

    def _background(self) -> bool:
        return True

    def _spawn(self, run: Coroutine[Any, Any, None]) -> Callable[[], object]:
        loop = self._loop = asyncio.get_running_loop()
        task = self._task = loop.create_task(run)
        # A task cancelled before its first step never runs its coroutine's finally.
        task.add_done_callback(self._listen_over)
        return task.cancel

    async def __aenter__(self) -> Proxy:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


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


class Received(asyncio.BufferedProtocol):
    """The listener's connection: what arrived, taken whole by the next ``Receive``.

    In place of a ``StreamReader``, whose copies (into its buffer, out of
    it) and pause/resume made most of what the listener paid above
    ``json.loads`` at 8 KB and 64 KB notifications (``bench/bench_floor.py``,
    section 2, issue 26): here each read is handed on as one ``bytes`` (a
    ``Receive`` that finds several joins them). Reading pauses past
    ``_LIMIT`` bytes not taken. The deadline of a ``Receive`` is one timer
    per listener, moved on only when it fires, rather than one made and
    cancelled per read.

    The transport reads into one buffer of ``READ_AT_ONCE`` bytes, kept
    for the connection's life, and each read is handed on in pieces of
    ``READ_SIZE`` bytes at most (:func:`read_pieces`), one a ``Receive``,
    those after the first without a turn of the loop. Left to itself the
    transport reads 256 KB at a time into new ``bytes``, whose page faults
    cost the listener up to 15 % at 64 KB notifications (same bench).
    """

    #: Set once connected (``connection_made``).
    transport: asyncio.Transport

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._paused = False
        self._ended = False
        self._error: Exception | None = None
        self._waiter: asyncio.Future[bool] | None = None
        self._deadline = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._buffer = memoryview(bytearray(READ_AT_ONCE))

    # -- the transport's calls ----------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        for piece in read_pieces(self._buffer, nbytes):
            self.data_received(piece)

    def data_received(self, data: bytes) -> None:
        """What was read (``buffer_updated``), taken by the next ``Receive``."""
        self._chunks.append(data)
        self._size += len(data)
        if self._size > _LIMIT and not self._paused:
            self._paused = True
            self.transport.pause_reading()
        self._wake(True)

    def eof_received(self) -> None:
        self._ended = True
        self._wake(True)

    def connection_lost(self, exc: Exception | None) -> None:
        self._ended = True
        self._error = exc
        self._wake(True)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _wake(self, arrived: bool) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(arrived)

    def _check_deadline(self) -> None:
        self._timer = None
        if self._waiter is None:
            return  # nobody waits: the next receive() sets a timer again
        if self._loop.time() >= self._deadline:
            self._wake(False)
        else:
            self._timer = self._loop.call_at(self._deadline, self._check_deadline)

    # -- the listener's -----------------------------------------------------------------

    async def receive(self, driver: ClientDriver, timeout: float) -> None:
        """``Receive``: what arrived, reported to ``driver``, waiting ``timeout`` at most."""
        loop = self._loop
        if not self._chunks and not self._ended:
            self._deadline = deadline = loop.time() + timeout
            timer = self._timer
            if timer is None or timer.when() > deadline:
                if timer is not None:
                    timer.cancel()
                self._timer = loop.call_at(deadline, self._check_deadline)
            self._waiter = waiter = loop.create_future()
            try:
                arrived = await waiter
            finally:
                self._waiter = None
            if not arrived:
                driver.timed_out(loop.time())
                return
        chunks = self._chunks
        if chunks:
            data = chunks.popleft()
            self._size -= len(data)
            if self._paused and self._size <= _LIMIT:
                self._paused = False
                self.transport.resume_reading()
            driver.data_received(loop.time(), data)
        elif self._error is not None:
            driver.connection_lost(loop.time(), describe_error(self._error))
        else:
            driver.data_received(loop.time(), b"")


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
