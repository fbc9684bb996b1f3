"""The blocking-socket adapter: :func:`listen`, :func:`serve` and :class:`Proxy`.

For scripts and threads, with the options and behaviour of :mod:`.asyncio`'s:

* :func:`listen` returns a :class:`Listener`, a blocking iterator over what
  a server sends, asking again with backoff and jitter; its
  :meth:`~Listener.close` may be called from any thread, even while another
  one is blocked inside ``next()``.
* :func:`serve` runs a :class:`Server` of a hub on background threads, one
  per connection plus one that accepts (and one that lingers on the
  connections refused as busy); it serialises every call into the hub
  (which is not thread-safe) with a lock: publish with
  :meth:`Server.publish`, from any thread.
* :class:`Proxy` makes the exchanges of kinds 0-3, from several threads at
  once, and keeps open, on a thread of its own, the notification ask they
  unlock (read with :class:`Notifications`); it raises
  :class:`ExchangeError`, :class:`ExchangeFailed` and, once closed,
  :class:`ProxyClosed` (all three re-exported here).

All three perform the actions of the sans-IO drivers
(:mod:`diverge_notifications.sansio.drivers.listen`,
:mod:`~diverge_notifications.sansio.drivers.serve` and
:mod:`~diverge_notifications.sansio.drivers.proxy`), which take every
decision; this module moves bytes and owns :func:`time.monotonic`.

The module reads top-down: the listener, the server and its connections,
the proxy, then the socket helpers they share: a wake-up a selector can
wait on, sending with a stall deadline, lingering after a refusal, and the
one thread that lingers on refused connections (doing their TLS handshake
first, on a TLS server).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..sansio.drivers import actions
from ..sansio.drivers.actions import ClientDriver, ExchangeResult
from ..sansio.drivers.proxy import (
    ExchangeError,
    ExchangeFailed,
    call_tool_ask,
    list_resources_ask,
    list_tools_ask,
    read_resource_ask,
    result_object,
)
from ..sansio.drivers.serve import ServingConnection
from ..sansio.drivers.settings import ServeSettings
from ..sansio.errors import ProxyClosed
from ..sansio.events import Event, ResultReceived
from ..sansio.mcp.model import Notification
from ..sansio.server.hub import Hub, as_notification
from ..sansio.wire.asks import Ask
from . import tls as _tls
from ._common import (
    READ_SIZE,
    ClosedOnExit,
    ServerBase,
    WriteProgress,
    accepted,
    call_exchange_handler,
    describe_error,
    handshake_failure,
    listen_driver,
    reset_on_close,
)
from ._proxy import log_overflow, proxy_driver

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._common import ListenOptions, ServeOptions
    from ._proxy import ProxyOptions

__all__ = [
    "BlockingExchangeHandler",
    "ExchangeError",
    "ExchangeFailed",
    "Listener",
    "Notifications",
    "Proxy",
    "ProxyClosed",
    "Server",
    "listen",
    "serve",
]


# --- listen ---------------------------------------------------------------------------


def listen(url: str, **options: Unpack[ListenOptions]) -> Listener:
    """Listen to the notifications of the server at ``url``: a blocking iterator.

    It takes the options of the asyncio ``listen``, yields what it yields and
    behaves the same; ``close()``, from any thread, stops it. The options are
    checked by the call, before any connection: :class:`ValueError`.
    """
    return Listener(*listen_driver(url, **options))


class Listener(ClosedOnExit, Iterator["Notification | Event"]):
    """An iterator over what a server sends; see ``blocking.listen``.

    :meth:`close` stops it, from the iterating thread or from any other
    one: no further ask is made and the connection is closed. A ``for``
    loop that breaks out of it, or a ``with`` block around it, should
    close it.
    """

    def __init__(self, driver: ClientDriver, context: ssl.SSLContext | None = None) -> None:
        self._driver = driver
        self._tls = context
        self._stop = threading.Event()
        # close() was called: read for every item delivered, where
        # ``self._stop.is_set()`` would cost a call each.
        self._closed = False
        # Held for the whole of each next(): close() tries it to learn
        # whether another thread is inside the generator right now.
        self._next_lock = threading.Lock()
        self._socket_lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._items = self._run()

    def __iter__(self) -> Listener:
        return self

    def __next__(self) -> Notification | Event:
        with self._next_lock:
            return next(self._items)

    def close(self) -> None:
        """Stop listening; safe to call from any thread, and more than once.

        No further ask is made and nothing more is yielded. From another
        thread it interrupts a read or a backoff sleep at once; a connection
        attempt ends within ``connect_timeout``. The iterating thread's
        ``next()`` then raises ``StopIteration``.
        """
        self._closed = True
        self._stop.set()
        with self._socket_lock:
            sock = self._socket
        if sock is not None:
            with contextlib.suppress(OSError):
                # The plain socket's shutdown, also under TLS: it wakes a recv()
                # in the other thread without pulling its TLS state away.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        if self._next_lock.acquire(blocking=False):
            try:
                self._items.close()  # nobody is inside it: finish it here
            finally:
                self._next_lock.release()

    def _set_socket(self, sock: socket.socket | None) -> None:
        with self._socket_lock:
            old = self._socket
            self._socket = sock
        if old is not None and old is not sock:
            old.close()

    def _run(self) -> Generator[Notification | Event, None, None]:
        driver = self._driver
        stop = self._stop
        sock: socket.socket | None = None
        try:
            while not stop.is_set():
                action = driver.next_action(time.monotonic())
                if type(action) is actions.Deliver:
                    for item in action.items:
                        if self._closed:
                            return
                        yield item
                elif type(action) is actions.Receive:
                    assert sock is not None
                    try:
                        if sock.gettimeout() != action.timeout:
                            sock.settimeout(action.timeout)
                        data = sock.recv(READ_SIZE)
                    except TimeoutError:
                        driver.timed_out(time.monotonic())
                    except OSError as error:
                        if stop.is_set():
                            return
                        driver.connection_lost(time.monotonic(), describe_error(error))
                    else:
                        if stop.is_set():
                            return  # close() shut the socket down: not the server's end
                        driver.data_received(time.monotonic(), data)
                elif type(action) is actions.Send:
                    assert sock is not None
                    try:
                        sock.sendall(action.data)
                    except OSError as error:
                        if stop.is_set():
                            return
                        driver.connection_lost(time.monotonic(), describe_error(error))
                elif type(action) is actions.Connect:
                    try:
                        sock = _tls.connect(action.host, action.port, action.timeout, self._tls)
                    except OSError as error:
                        driver.connect_failed(time.monotonic(), describe_error(error))
                    else:
                        self._set_socket(sock)
                        if stop.is_set():
                            return
                        driver.connected(time.monotonic())
                elif type(action) is actions.Sleep:
                    stop.wait(action.delay)
                elif type(action) is actions.Disconnect:
                    self._set_socket(None)
                    sock = None
                else:  # Stop
                    return
        finally:
            self._set_socket(None)


# --- serve ----------------------------------------------------------------------------

#: A blocking exchange handler: it returns the answer itself.
BlockingExchangeHandler = Callable[[Ask], ExchangeResult]


def serve(
    hub: Hub,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    exchange_handler: BlockingExchangeHandler | None = None,
    **options: Unpack[ServeOptions],
) -> Server:
    """Serve ``hub`` on ``host``:``port`` (0 picks a free port): ``with serve(hub) as server:``.

    Returns the running :class:`Server`. The options are those of the asyncio
    ``serve``, checked the same way; ``exchange_handler`` returns its answer
    (it runs on the connection's thread).
    """
    return Server(hub, host, port, exchange_handler, options)


#: Seconds the accepting thread waits after a failure to accept or to set a
#: connection up (out of descriptors, out of threads), so that connections
#: can end and give theirs back first.
_ACCEPT_BACKOFF = 0.1


class Server(ServerBase, ClosedOnExit):
    """A blocking server of a hub running on background threads; see :func:`serve`.

    :meth:`publish` is safe from any thread. :meth:`close` ends every open
    path cleanly and closes; ``with`` closes on exit.
    """

    _settings: ServeSettings[BlockingExchangeHandler]

    def __init__(self, hub: Hub, host: str, port: int, handler: Any, options: ServeOptions) -> None:
        super().__init__(hub, handler, options)
        #: Held around every call into the hub; hold it too to call the hub directly.
        self.lock = threading.RLock()
        #: Notified, under the lock, when a full queue makes room (publish(wait=True)).
        self._room = threading.Condition(self.lock)
        self._connections_lock = threading.Lock()
        #: Set once the first close() has finished: later ones wait for it.
        self._closed = threading.Event()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with contextlib.ExitStack() as on_failure:
            backlog = self._settings.backlog
            self._listener = socket.create_server((host, port), family=family, backlog=backlog)
            on_failure.callback(self._listener.close)
            self._lingerer = Lingerer()  # one thread for every connection refused as busy
            on_failure.callback(self._lingerer.close)
            self._listener.setblocking(False)
            self._wakeup = Wakeup()
            on_failure.callback(self._wakeup.close)
            # Made here, not in the thread: a failure is the caller's OSError.
            self._selector = selectors.DefaultSelector()
            on_failure.callback(self._selector.close)
            self._selector.register(self._listener, selectors.EVENT_READ)
            self._selector.register(self._wakeup, selectors.EVENT_READ)
            name = self._listener.getsockname()
            self.host = str(name[0])
            self.port = int(name[1])
            self._accept_thread = threading.Thread(
                target=self._accept, name=f"diverge-accept-{self.port}", daemon=True
            )
            self._accept_thread.start()
            on_failure.pop_all()

    @property
    def connections(self) -> int:
        """How many connections are open."""
        with self._connections_lock:
            return len(self._connections)

    def publish(self, item: object, *, wait: bool = False) -> int:
        """``hub.publish(item)`` under :attr:`lock`: safe from any thread.

        With ``wait=True`` it blocks until every path the notification
        reaches has room for it (see the asyncio ``Server.publish``).
        """
        with self.lock:
            if not wait:
                return self.hub.publish(item)
            notification = as_notification(item) or item  # decoded once, however long the wait
            while (published := self._publish_if_room(notification, self._room.notify_all)) is None:
                # Woken by room, or when a path it waits for may have stopped moving.
                self._room.wait(self._room_wait)
            return published

    def _clock(self) -> float:
        return time.monotonic()

    def _accept(self) -> None:
        selector = self._selector
        try:
            while not self._closing:
                selector.select()
                if self._closing:
                    return
                try:
                    sock, _ = self._listener.accept()
                except BlockingIOError:
                    continue
                except OSError:
                    time.sleep(_ACCEPT_BACKOFF)  # out of descriptors: let connections end first
                    continue
                try:
                    sock.setblocking(True)
                    peer = accepted(sock, self._settings)
                    connection = _Connection(self, sock, peer)  # a socket pair: descriptors too
                except OSError:
                    sock.close()  # this peer is not served; the next one may be
                    time.sleep(_ACCEPT_BACKOFF)
                    continue
                if connection.serving.done:  # beyond max_connections: 503, no thread of its own
                    connection.wakeup.close()
                    tls = (self.tls, self.ask_timeout)  # the lingering thread does the handshake
                    self._lingerer.refuse(connection.serving, sock, self._settings.linger, *tls)
                    continue
                with self._connections_lock:
                    if self._closing:
                        sock.close()
                        connection.wakeup.close()
                        return
                    self._connections.add(connection)
                try:
                    connection.thread.start()
                except RuntimeError:  # out of threads
                    self._forget(connection)
                    connection.serving.connection_lost()
                    sock.close()
                    connection.wakeup.close()
                    time.sleep(_ACCEPT_BACKOFF)
        finally:
            selector.close()

    def _forget(self, connection: _Connection) -> None:
        with self._connections_lock:
            self._connections.discard(connection)

    def close(self) -> None:
        """End every open path cleanly, stop accepting, and close every connection.

        Connections whose peer does not take the end within
        ``close_timeout`` seconds (a stalled listener) are shut down. Every
        call returns when the server is closed: one made while another
        thread closes it waits for that.
        """
        with self._connections_lock:
            closing = self._closing
            self._closing = True
            connections = list(self._connections)
        if closing:
            self._closed.wait()
            return
        try:
            self._wakeup.set()
            self._accept_thread.join()
            self._lingerer.close()
            self._listener.close()
            self._wakeup.close()
            for connection in connections:
                connection.wakeup.set()
            close_timeout = self._settings.close_timeout
            deadline = time.monotonic() + close_timeout
            for connection in connections:
                connection.thread.join(max(0.0, deadline - time.monotonic()))
            for connection in connections:
                if connection.thread.is_alive():
                    connection.force_close()
                    connection.thread.join(close_timeout)
        finally:
            self._closed.set()


class _Connection:
    """One accepted connection, served by its own thread."""

    def __init__(self, server: Server, sock: socket.socket, peer: str) -> None:
        self._server = server
        self.socket = sock
        self.wakeup = Wakeup()  # OSError when out of descriptors: the caller closes sock
        # Made when the connection is accepted: the ask's deadline starts now.
        now = time.monotonic()
        self.serving = server._serving(self.wakeup.set, now, peer, hub_lock=server.lock)
        self.thread = threading.Thread(
            target=self._run, name=f"diverge-serve-{sock.fileno()}", daemon=True
        )

    def _run(self) -> None:
        serving = self.serving
        sock = self.socket
        settings = self._server._settings
        selector: selectors.BaseSelector | None = None
        shut_down = False
        try:
            # TLS on this thread: a slow handshake holds up no other peer.
            server = self._server
            try:
                sock = self.socket = _tls.secure_accepted(sock, server.tls, server.ask_timeout)
            except OSError as error:
                serving.handshake_failed(time.monotonic(), handshake_failure(error))
                return
            progress = WriteProgress(sock, settings.stall_timeout)
            # Inside the try: out of descriptors, the connection is closed
            # and forgotten like any other that fails.
            selector = selectors.DefaultSelector()
            selector.register(sock, selectors.EVENT_READ)
            selector.register(self.wakeup, selectors.EVENT_READ)
            reading = True
            while True:
                if self._server._closing and not shut_down:
                    shut_down = True
                    serving.shutdown()
                action = serving.next_action(time.monotonic())
                if type(action) is actions.Write:
                    if not sent(sock, action.data, progress):
                        serving.write_stalled(time.monotonic())
                elif type(action) is actions.WaitUntil:
                    if reading and not action.wants_read:
                        reading = False  # at end of file the socket stays readable
                        selector.unregister(sock)
                    at = action.deadline
                    timeout = None if at is None else max(0.0, at - time.monotonic())
                    for key, _ in selector.select(timeout):
                        if key.fileobj is sock:
                            data = _tls.receive_ready(sock, READ_SIZE)
                            if data is not None:  # None: a TLS record is not whole yet
                                serving.data_received(time.monotonic(), data)
                        else:
                            self.wakeup.clear()
                elif type(action) is actions.RunHandler:
                    assert settings.exchange_handler is not None
                    handler, timeout = settings.exchange_handler, settings.exchange_timeout
                    call_exchange_handler(
                        serving,
                        handler,
                        action.ask,
                        timeout,
                        before=lambda: _hung_up(serving, sock),
                    )
                else:
                    assert type(action) is actions.Close
                    close_as(sock, action)
                    return
        except OSError:
            pass  # the peer went away, or close() gave up on it
        finally:
            serving.connection_lost()
            if selector is not None:
                selector.close()
            sock.close()
            self.wakeup.close()
            self._server._forget(self)

    def force_close(self) -> None:
        with contextlib.suppress(OSError):
            socket.socket.shutdown(self.socket, socket.SHUT_RDWR)  # not TLS's: from any thread


# --- the proxy ------------------------------------------------------------------------


class Proxy(ClosedOnExit):
    """A proxy of the server at ``url`` (``http://host:port[/base]``), on blocking sockets.

    The methods of the asyncio ``Proxy``, blocking: each exchange returns
    its result (or raises :class:`ExchangeError` or :class:`ExchangeFailed`),
    from any thread. Once the first exchange was answered, a thread of the
    proxy's own makes the notification ask and keeps it open, whether or
    not :meth:`notifications` is iterated; what arrives waits in the
    proxy's buffer, and :meth:`notifications` is a blocking iterator over
    it. :meth:`close` (or leaving a ``with`` block) stops everything from
    any thread: an exchange in progress raises :class:`ExchangeFailed`, the
    ask ends and its thread with it, the notifications iterator stops, and
    later calls raise :class:`ProxyClosed`. A proxy used without ``with``
    keeps its thread (a daemon) until :meth:`close` or the process ends.
    """

    def __init__(self, url: str, **options: Unpack[ProxyOptions]) -> None:
        self.driver, self._tls = proxy_driver(url, **options)
        # The driver is not thread-safe: every call into it is made under
        # this lock, but for the ask's own listener, which only its thread drives.
        self._lock = threading.Lock()
        # Notified when the ask is unlocked, when it brings something, when it
        # stops, and on every close.
        self._changed = threading.Condition(self._lock)
        self._running: set[Listener] = set()
        self._asking: Listener | None = None
        self._thread: threading.Thread | None = None

    @property
    def dropped(self) -> int:
        """How many notifications (events) arrived while the buffer was full, and were dropped."""
        with self._lock:
            return self.driver.dropped

    def _runner(self, driver: ClientDriver) -> Listener:
        """A loop performing ``driver``'s actions, stopped by :meth:`close`; under the lock."""
        runner = Listener(driver, self._tls)
        self._running.add(runner)
        return runner

    def exchange(self, ask: Ask) -> ResultReceived:
        """One exchange of kinds 0-3: the result, as parsed and as its bytes (``raw``)."""
        with self._lock:
            exchange = self.driver.exchange(ask)  # ProxyClosed once closed
            runner = self._runner(exchange)
        try:
            for _ in runner:
                pass  # an exchange delivers nothing: its outcome is its answer
        finally:
            runner.close()
            with self._lock:
                self._running.discard(runner)
                if self.driver.exchange_ended(exchange, time.monotonic()):
                    self._start_listening()
                    self._changed.notify_all()
        return exchange.answer()

    def list_tools(self, cursor: str | None = None) -> dict[str, Any]:
        """``tools/list``: the result, ``{"tools": [...]}`` (and ``nextCursor`` for more)."""
        return result_object(self.exchange(list_tools_ask(cursor)))

    def list_resources(self, cursor: str | None = None) -> dict[str, Any]:
        """``resources/list``: the result, ``{"resources": [...]}``."""
        return result_object(self.exchange(list_resources_ask(cursor)))

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress_token: str | int | None = None,
    ) -> dict[str, Any]:
        """``tools/call``: the result; the progress of ``progress_token`` comes on the path."""
        return result_object(
            self.exchange(call_tool_ask(name, arguments, progress_token=progress_token))
        )

    def read_resource(self, uri: str) -> dict[str, Any]:
        """``resources/read``: the result, ``{"contents": [...]}``."""
        return result_object(self.exchange(read_resource_ask(uri)))

    def notifications(self) -> Notifications:
        """What the one notification ask brings: a blocking iterator (every event with ``events``).

        What arrived since the ask was made and was not read yet comes
        first, in order. It waits for the first answered exchange (made on
        another thread). One reader at a time: a second one raises
        ``LocalProtocolError`` at its first ``next()``. Its ``close()``, from
        any thread, stops it and leaves the ask open; :meth:`close` stops
        it too.
        """
        return Notifications(self)

    def __enter__(self) -> Proxy:
        with self._lock:
            self._start_listening()  # under a policy that requires no exchange
        return self

    def _start_listening(self) -> None:
        """Start the ask's thread if the ask is to start now (the driver says); under the lock."""
        listener = self.driver.start_listening()
        if listener is None:
            return
        runner = self._asking = Listener(listener, self._tls)
        self._thread = threading.Thread(
            target=self._listen, args=(runner,), name="diverge-proxy-ask", daemon=True
        )
        self._thread.start()

    def _listen(self, runner: Listener) -> None:
        """The ask's thread: what it delivers goes into the buffer, until it stops."""
        driver = self.driver
        changed = self._changed
        try:
            for item in runner:
                with changed:
                    report = driver.keep((item,))
                    changed.notify_all()
                log_overflow(report)
        finally:
            runner.close()
            with changed:
                driver.close_notifications(time.monotonic())
                changed.notify_all()

    def _next_buffered(self, reader: Notifications) -> Notification | Event | None:
        """Wait for the next item of the buffer; ``None`` once ``reader`` or the proxy is done."""
        driver = self.driver
        with self._changed:
            while not reader.closed:
                # Under a policy that requires no exchange, the reader starts the ask.
                self._start_listening()
                item = driver.take()
                if item is not None or driver.over:
                    return item
                self._changed.wait()
            return None

    def _wake(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def close(self) -> None:
        """Stop every exchange, the ask and the notifications, from any thread; twice is fine.

        Returns once the ask's thread is over (a connection being made ends
        within ``connect_timeout``), but when called from that thread.
        """
        with self._changed:
            self.driver.close()
            running = list(self._running)
            asking = self._asking
            thread = self._thread
            self._changed.notify_all()
        for runner in running:
            runner.close()
        if asking is not None:
            asking.close()
        if thread is not None and thread is not threading.current_thread():
            thread.join()


class Notifications(ClosedOnExit, Iterator["Notification | Event"]):
    """The blocking iterator of :meth:`Proxy.notifications`.

    :meth:`close` stops it from the iterating thread or any other: a wait
    for the first exchange or for the next item ends at once, and
    ``next()`` then raises ``StopIteration``. The proxy's ask goes on.
    """

    def __init__(self, proxy: Proxy) -> None:
        self._proxy = proxy
        self.closed = False
        # Held for the whole of each next(), as the listener's own lock is.
        self._next_lock = threading.Lock()
        self._items = self._run()

    def __iter__(self) -> Notifications:
        return self

    def __next__(self) -> Notification | Event:
        with self._next_lock:
            return next(self._items)

    def close(self) -> None:
        """Stop reading; safe from any thread, and more than once."""
        self.closed = True
        self._proxy._wake()
        if self._next_lock.acquire(blocking=False):
            try:
                self._items.close()  # nobody is inside it: finish it here
            finally:
                self._next_lock.release()

    def _run(self) -> Generator[Notification | Event, None, None]:
        proxy = self._proxy
        with proxy._lock:
            proxy.driver.open_reader()
        try:
            while (item := proxy._next_buffered(self)) is not None:
                yield item
        finally:
            with proxy._lock:
                proxy.driver.close_reader()


# --- socket helpers -------------------------------------------------------------------


class Wakeup:
    """A socket pair a selector can wait on, set from any thread."""

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)

    def fileno(self) -> int:
        return self._reader.fileno()

    def set(self) -> None:
        # A full pair already holds a wake-up; a closed one has nobody to wake.
        with contextlib.suppress(OSError):
            self._writer.send(b"\0")

    def clear(self) -> None:
        with contextlib.suppress(OSError):
            while self._reader.recv(4096):
                pass

    def close(self) -> None:
        self._reader.close()
        self._writer.close()


def _hung_up(serving: ServingConnection, sock: socket.socket) -> None:
    """Report the peer's end of file if it closed while its handler ran (the thread read nothing).

    A plain socket is peeked at without waiting; over TLS nothing can be
    peeked at, and a caller gone shows only if writing its answer fails.
    """
    flags = socket.MSG_PEEK | getattr(socket, "MSG_DONTWAIT", 0)
    if isinstance(sock, ssl.SSLSocket) or flags == socket.MSG_PEEK:
        return
    try:
        gone = sock.recv(1, flags) == b""
    except (BlockingIOError, InterruptedError):
        return
    except OSError:
        gone = True
    if gone:
        serving.data_received(time.monotonic(), b"")


def sent(sock: socket.socket, data: bytes, progress: WriteProgress) -> bool:
    """Send all of ``data``; False if the peer took no byte for ``stall_timeout`` seconds.

    ``progress`` says whether it took any (:class:`WriteProgress`), looked
    at each time a ``send()`` finds no room for ``progress.step`` seconds.
    """
    view = memoryview(data)
    handed = 0
    progress.waiting(time.monotonic(), handed)
    sock.settimeout(progress.step)
    try:
        while view:
            try:
                count = sock.send(view)
            except TimeoutError:
                if progress.stalled(time.monotonic(), handed):
                    return False
                continue
            view = view[count:]
            handed += count
    finally:
        sock.settimeout(None)
    return True


def close_as(sock: socket.socket, close: actions.Close) -> None:
    """Before ``sock`` is closed: make it a reset (``abort``), or linger (``linger`` seconds)."""
    if close.abort:
        reset_on_close(sock)
    elif close.linger:
        linger(sock, close.linger)


def linger(sock: socket.socket, seconds: float) -> None:
    """Half-close, then read and discard until the peer closes or ``seconds`` pass.

    TLS has no half-close: inside it the socket is only read and discarded
    (the refusal has a ``Content-Length``, so the peer knows where it ends).
    """
    deadline = time.monotonic() + seconds
    with contextlib.suppress(OSError):  # a timeout included
        if not isinstance(sock, ssl.SSLSocket):
            sock.shutdown(socket.SHUT_WR)
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            if not sock.recv(READ_SIZE):
                return


#: Connections refused as busy that the lingering thread holds at most;
#: beyond, the oldest is closed at once.
_MAX_LINGERING = 1024

#: A connection refused as busy whose TLS handshake is under way: its driver, the linger.
_Refusal = tuple[ServingConnection, float]


class Lingerer:
    """One thread that lingers on refused sockets until each closes or its deadline passes.

    So that refusing a flood of connections beyond ``max_connections``
    costs one thread, not one per connection.
    """

    def __init__(self) -> None:
        self._wakeup = Wakeup()
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._wakeup, selectors.EVENT_READ)
        self._lock = threading.Lock()
        self._added: list[tuple[socket.socket, float, _Refusal | None]] = []
        self._deadlines: dict[socket.socket, float] = {}
        #: The TLS sockets whose handshake is under way, and what to say once it is done.
        self._handshaking: dict[socket.socket, _Refusal] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="diverge-linger", daemon=True)
        self._thread.start()

    def refuse(
        self,
        serving: ServingConnection,
        sock: socket.socket,
        seconds: float,
        tls: ssl.SSLContext | None = None,
        handshake_timeout: float = 0.0,
    ) -> None:
        """Write what ``serving`` says (a refusal: it fits in any socket buffer), then linger.

        With ``tls``, the refusal is said inside TLS: the lingering thread
        does the handshake first, without blocking, within
        ``handshake_timeout`` seconds (a peer that does not complete it is
        closed, like one that lingers too long).
        """
        if tls is None:
            _say_refusal(serving, sock)
            self.add(sock, seconds)
            return
        try:
            secured = tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            secured.setblocking(False)
        except OSError:
            serving.connection_lost()
            sock.close()
            return
        self._add(secured, time.monotonic() + handshake_timeout, (serving, seconds))

    def add(self, sock: socket.socket, seconds: float) -> None:
        """Half-close ``sock`` and linger on it for ``seconds`` at most, then close it."""
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
        self._add(sock, time.monotonic() + seconds, None)

    def _add(self, sock: socket.socket, deadline: float, refusal: _Refusal | None) -> None:
        with self._lock:
            if self._closed:
                if refusal is not None:
                    refusal[0].connection_lost()
                sock.close()
                return
            self._added.append((sock, deadline, refusal))
        self._wakeup.set()

    def close(self) -> None:
        """Close every socket still lingered on, and stop the thread."""
        with self._lock:
            self._closed = True
        self._wakeup.set()
        self._thread.join()

    def _run(self) -> None:
        deadlines = self._deadlines
        try:
            while True:
                with self._lock:
                    if self._closed:
                        return
                    added, self._added = self._added, []
                for sock, deadline, refusal in added:
                    if len(deadlines) >= _MAX_LINGERING:
                        self._drop(next(iter(deadlines)))
                    sock.setblocking(False)
                    self._selector.register(sock, selectors.EVENT_READ)
                    deadlines[sock] = deadline
                    if refusal is not None:
                        self._handshaking[sock] = refusal
                now = time.monotonic()
                for sock in [sock for sock, deadline in deadlines.items() if deadline <= now]:
                    self._drop(sock)
                timeout = min(deadlines.values(), default=now + 1.0) - now
                for key, _ in self._selector.select(max(0.0, timeout)):
                    if key.fileobj is self._wakeup:
                        self._wakeup.clear()
                        continue
                    peer = key.fileobj
                    assert isinstance(peer, socket.socket)
                    if peer in self._handshaking:
                        self._shake_hands(peer)
                        continue
                    try:
                        if peer.recv(READ_SIZE):
                            continue  # discarded
                    except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                        continue  # nothing yet, or only part of a TLS record
                    except OSError:
                        pass
                    self._drop(peer)  # the peer closed: it has read its answer
        finally:
            for sock in list(deadlines):
                self._drop(sock)
            self._selector.close()
            self._wakeup.close()

    def _shake_hands(self, peer: socket.socket) -> None:
        """Go on with ``peer``'s TLS handshake; once done, say the refusal and linger."""
        assert isinstance(peer, ssl.SSLSocket)
        try:
            peer.do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return  # the rest of the peer's handshake is yet to come
        except OSError:
            self._drop(peer)
            return
        serving, seconds = self._handshaking.pop(peer)
        _say_refusal(serving, peer)  # then read and discarded, without a half-close (TLS has none)
        self._deadlines[peer] = time.monotonic() + seconds

    def _drop(self, sock: socket.socket) -> None:
        self._deadlines.pop(sock, None)
        refusal = self._handshaking.pop(sock, None)
        if refusal is not None:
            refusal[0].connection_lost()
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(sock)
        sock.close()


def _say_refusal(serving: ServingConnection, sock: socket.socket) -> None:
    """Write what ``serving`` says, without blocking (a refusal is small), and end it."""
    with contextlib.suppress(OSError):
        sock.setblocking(False)
        while type(action := serving.next_action(time.monotonic())) is actions.Write:
            sock.send(action.data)
    serving.connection_lost()
