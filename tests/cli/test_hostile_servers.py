"""``listen`` against hostile servers: a head that never ends, a poison stream.

Each server is a real socket server on a thread, written to misbehave; the
listener is ``python -m diverge_notifications listen`` as a subprocess. The
waits run concurrently, in one test, to keep the wall time short. Every
bound is a generous deadline that only catches a hang, or the issue's
count; no test measures how long anything took.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Final

from diverge_notifications.cli import EXIT_BROKEN, EXIT_OK
from tests.interop import cli_command, cli_env

#: The issue's bound on ``listen --once`` against a head that never ends.
ENDS_WITHIN: Final = 40.0
#: How long the listener runs against the poison stream, and how many connections it may make.
POISON_FOR: Final = 12.0
POISON_CONNECTIONS: Final = 10

Behaviour = Callable[[socket.socket, threading.Event], None]


class HostileServer:
    """A socket server on a thread that answers every connection with ``behaviour``."""

    def __init__(self, behaviour: Behaviour) -> None:
        self._behaviour = behaviour
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self.connections = 0
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while not self._stop.is_set():
                sock, _ = self._listener.accept()
                self.connections += 1
                threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        with sock, contextlib.suppress(OSError):
            read_ask(sock)
            self._behaviour(sock, self._stop)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()


def read_ask(sock: socket.socket) -> None:
    """Read the ask's head and its one-byte body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return
        data += chunk


def continue_every_3_s(sock: socket.socket, stop: threading.Event) -> None:
    while not stop.wait(3.0):
        sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")


def a_header_byte_a_second(sock: socket.socket, stop: threading.Event) -> None:
    sock.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
    while not stop.wait(1.0):
        sock.sendall(b"a")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def one_good_notification_then_4_gib(sock: socket.socket, stop: threading.Event) -> None:
    message = b'\x00{"method":"notifications/progress","params":{"progressToken":1,"progress":1}}'
    sock.sendall(
        b"HTTP/1.1 200 OK\r\n"
        b"Content-Type: application/vnd.diverge.messages\r\n"
        b"Content-Location: /mcp/notifications/poison\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
        + chunk(struct.pack(">I", len(message)) + message)
        + chunk(struct.pack(">I", 0xFFFFFFFF))
    )
    # Held open: the listener is the one to give up on the path.
    while sock.recv(4096) and not stop.is_set():
        pass


def listen(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        cli_command("listen", *args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )


def test_heads_that_never_end_and_a_poison_stream_hold_no_listener() -> None:
    servers = [
        HostileServer(continue_every_3_s),
        HostileServer(a_header_byte_a_second),
        HostileServer(one_good_notification_then_4_gib),
    ]
    heads = [listen(server.url, "--once") for server in servers[:2]]
    poisoned = listen(servers[2].url)
    try:
        time.sleep(POISON_FOR)
        poisoned.terminate()
        poisoned.communicate(timeout=30)
        connections = servers[2].connections
        ended = [process.communicate(timeout=ENDS_WITHIN) for process in heads]
    finally:
        for process in [*heads, poisoned]:
            if process.poll() is None:
                process.kill()
                process.communicate()
        for server in servers:
            server.close()
    # The backoff grows: the good notification before each break resets nothing.
    assert 1 < connections <= POISON_CONNECTIONS
    for process, (_out, err) in zip(heads, ended, strict=True):
        assert process.returncode == EXIT_BROKEN, err
        assert b"listen: the path broke: head timeout: " in err


def frame(message: bytes) -> bytes:
    return struct.pack(">I", len(message)) + message


def three_bad_messages_then_a_good_one(sock: socket.socket, stop: threading.Event) -> None:
    good = b'\x00{"method":"notifications/progress","params":{"progressToken":1,"progress":1}}'
    sock.sendall(
        b"HTTP/1.1 200 OK\r\n"
        b"Content-Type: application/vnd.diverge.messages\r\n"
        b"Content-Location: /mcp/notifications/bad\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
        + chunk(frame(b"\x09{}") * 3 + frame(good))
        + b"0\r\n\r\n"
    )


def test_messages_listen_rejects_are_said_on_standard_error_without_events() -> None:
    server = HostileServer(three_bad_messages_then_a_good_one)
    try:
        process = listen(server.url, "--once")
        out, err = process.communicate(timeout=30)
    finally:
        server.close()
    assert process.returncode == EXIT_OK, err
    assert out.count(b"notifications/progress") == 1
    said = [line for line in err.splitlines() if b"rejected" in line]
    assert said == [
        b"listen: a message was rejected (3 bytes): unknown message tag 9 "
        b"(0 is a notification, 1 an error)",
        b"listen: 3 messages rejected on this path in all",
    ]
