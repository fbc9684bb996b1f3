"""The blocking adapter's listener: an iterator over blocking sockets that any thread can stop.

``blocking.listen`` returns a :class:`Listener`. Its loop performs the
actions of the sans-IO :class:`ListenDriver`, which takes every decision;
what this module adds is the thread safety of :meth:`Listener.close`: it
may be called while another thread is inside ``next()``, blocked in a read,
a connection attempt or a backoff sleep, and that thread then stops without
reporting the shut-down socket to the driver as the server's doing.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Generator, Iterator

from ..sansio.actions import ClientDriver, Connect, Deliver, Disconnect, Receive, Send, Sleep
from ..sansio.events import Event
from ..sansio.mcp import Notification
from . import tls as _tls
from ._common import READ_SIZE, ClosedOnExit, describe_error

__all__ = ["Listener"]


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
                if type(action) is Deliver:
                    for item in action.items:
                        if self._closed:
                            return
                        yield item
                elif type(action) is Receive:
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
                elif type(action) is Send:
                    assert sock is not None
                    try:
                        sock.sendall(action.data)
                    except OSError as error:
                        if stop.is_set():
                            return
                        driver.connection_lost(time.monotonic(), describe_error(error))
                elif type(action) is Connect:
                    try:
                        sock = _tls.connect(action.host, action.port, action.timeout, self._tls)
                    except OSError as error:
                        driver.connect_failed(time.monotonic(), describe_error(error))
                    else:
                        self._set_socket(sock)
                        if stop.is_set():
                            return
                        driver.connected(time.monotonic())
                elif type(action) is Sleep:
                    stop.wait(action.delay)
                elif type(action) is Disconnect:
                    self._set_socket(None)
                    sock = None
                else:  # Stop
                    return
        finally:
            self._set_socket(None)
