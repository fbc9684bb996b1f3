"""The blocking-socket adapter: :func:`listen` and :func:`serve`, for scripts and threads.

Both perform the actions of the sans-IO drivers, which take every decision;
this module moves bytes and owns :func:`time.monotonic`. The server runs on
background threads, one per connection plus one that accepts, and
serialises every call into the hub (which is not thread-safe) with a lock:
publish with :meth:`Server.publish`, from any thread.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..sansio.actions import Close, ExchangeResult, RunHandler, WaitUntil, Write
from ..sansio.asks import Ask
from ..sansio.hub import Hub, as_notification
from ..sansio.serve_settings import ServeSettings
from . import tls as _tls
from ._blocking_listener import Listener
from ._blocking_parts import Lingerer, Wakeup, close_as, sent
from ._common import (
    READ_SIZE,
    ClosedOnExit,
    ServerBase,
    accepted,
    call_exchange_handler,
    listen_driver,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._common import ListenOptions, ServeOptions

__all__ = ["Listener", "Server", "listen", "serve"]

#: A blocking exchange handler: it returns the answer itself.
BlockingExchangeHandler = Callable[[Ask], ExchangeResult]

#: Seconds the accepting thread waits after a failure to accept or to set a
#: connection up (out of descriptors, out of threads), so that connections
#: can end and give theirs back first.
_ACCEPT_BACKOFF = 0.1


def listen(url: str, **options: Unpack[ListenOptions]) -> Listener:
    """Listen to the notifications of the server at ``url``: a blocking iterator.

    It takes the options of the asyncio ``listen``, yields what it yields and
    behaves the same; ``close()``, from any thread, stops it. The options are
    checked by the call, before any connection: :class:`ValueError`.
    """
    return Listener(*listen_driver(url, **options))


# --- the server ----------------------------------------------------------------


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
            sock = self.socket = _tls.secure_accepted(sock, server.tls, server.ask_timeout)
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
                if type(action) is Write:
                    if not sent(sock, action.data, settings.stall_timeout):
                        serving.write_stalled(time.monotonic())
                elif type(action) is WaitUntil:
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
                elif type(action) is RunHandler:
                    assert settings.exchange_handler is not None
                    handler, timeout = settings.exchange_handler, settings.exchange_timeout
                    call_exchange_handler(serving, handler, action.ask, timeout)
                else:
                    assert type(action) is Close
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
            self._listener = socket.create_server(
                (host, port), family=family, backlog=self._settings.backlog
            )
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
                self._room.wait()
            return published

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
                # Beyond max_connections: 503, no thread of its own (over TLS the
                # connection's thread does the handshake first, then refuses).
                if connection.serving.done and self.tls is None:
                    connection.wakeup.close()
                    self._lingerer.refuse(connection.serving, sock, self._settings.linger)
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
