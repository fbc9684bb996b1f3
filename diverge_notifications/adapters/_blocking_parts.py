"""The blocking adapter's server-side I/O helpers: sockets, threads, deadlines.

A wake-up a selector can wait on, sending with a stall deadline, lingering
after a refusal, and the one thread that lingers on the connections refused
as busy: what ``adapters/blocking.py`` does for the serving driver's
actions, kept here so that the adapter stays a loop.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time

from ..sansio.actions import Close, Write
from ..sansio.serving import ServingConnection
from ._common import READ_SIZE, reset_on_close

__all__ = ["Lingerer", "Wakeup", "close_as", "linger", "sent"]

#: Connections refused as busy that the lingering thread holds at most;
#: beyond, the oldest is closed at once.
_MAX_LINGERING = 1024


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


def sent(sock: socket.socket, data: bytes, stall_timeout: float) -> bool:
    """Send all of ``data``; False if the peer took no byte for ``stall_timeout`` seconds."""
    view = memoryview(data)
    sock.settimeout(stall_timeout)  # for each send: a byte taken starts the wait again
    try:
        while view:
            view = view[sock.send(view) :]
    except TimeoutError:
        return False
    finally:
        sock.settimeout(None)
    return True


def close_as(sock: socket.socket, close: Close) -> None:
    """Before ``sock`` is closed: make it a reset (``abort``), or linger (``linger`` seconds)."""
    if close.abort:
        reset_on_close(sock)
    elif close.linger:
        linger(sock, close.linger)


def linger(sock: socket.socket, seconds: float) -> None:
    """Half-close, then read and discard until the peer closes or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    with contextlib.suppress(OSError):  # a timeout included
        sock.shutdown(socket.SHUT_WR)
        while (left := deadline - time.monotonic()) > 0:
            sock.settimeout(left)
            if not sock.recv(READ_SIZE):
                return


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
        self._added: list[tuple[socket.socket, float]] = []
        self._deadlines: dict[socket.socket, float] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="diverge-linger", daemon=True)
        self._thread.start()

    def refuse(self, serving: ServingConnection, sock: socket.socket, seconds: float) -> None:
        """Write what ``serving`` says (a refusal: it fits in any socket buffer), then linger."""
        with contextlib.suppress(OSError):
            sock.setblocking(False)
            while type(action := serving.next_action(time.monotonic())) is Write:
                sock.send(action.data)
        serving.connection_lost()
        self.add(sock, seconds)

    def add(self, sock: socket.socket, seconds: float) -> None:
        """Half-close ``sock`` and linger on it for ``seconds`` at most, then close it."""
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
        with self._lock:
            if self._closed:
                sock.close()
                return
            self._added.append((sock, time.monotonic() + seconds))
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
                for sock, deadline in added:
                    if len(deadlines) >= _MAX_LINGERING:
                        self._drop(next(iter(deadlines)))
                    sock.setblocking(False)
                    self._selector.register(sock, selectors.EVENT_READ)
                    deadlines[sock] = deadline
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
                    try:
                        if peer.recv(READ_SIZE):
                            continue  # discarded
                    except BlockingIOError:
                        continue
                    except OSError:
                        pass
                    self._drop(peer)  # the peer closed: it has read its answer
        finally:
            for sock in list(deadlines):
                self._drop(sock)
            self._selector.close()
            self._wakeup.close()

    def _drop(self, sock: socket.socket) -> None:
        self._deadlines.pop(sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(sock)
        sock.close()
