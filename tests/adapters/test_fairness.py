"""One peer cannot keep the others out: fair admission on the three servers.

A flood of slow connections from one address (bound to 127.0.0.2), each
sending its ask a byte a second and coming straight back when it is
closed, against ``max_connections``: a listener from 127.0.0.1 is still
served, and what the share refused is counted and logged with the address.

Every wait has a generous deadline that only guards against a hang; no test
asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import selectors
import socket
import threading
import time
from typing import Final, cast

import pytest
import trio

from diverge_notifications.adapters import parse_url
from diverge_notifications.sansio import (
    Ask,
    Exchange,
    ExchangeConnection,
    Hub,
    ProxyConnection,
    StreamOpened,
)
from tests.adapters import test_pressure
from tests.adapters.test_adapters import HANG, wait_until
from tests.adapters.test_pressure import LOGGER, Listening, ServeFactory, read_all

# The three servers, as tests/adapters/test_pressure.py makes them.
loops = test_pressure.loops
serve = test_pressure.serve

FLOOD_ADDRESS: Final = "127.0.0.2"
#: The issue's bound on a listener from another address being served.
SERVED_WITHIN: Final = 15.0


def loopback_alias_works() -> bool:
    try:
        with socket.socket() as sock:
            sock.bind((FLOOD_ADDRESS, 0))
    except OSError:
        return False
    return True


class Flood:
    """``count`` connections from ``FLOOD_ADDRESS`` sending their ask a byte a second.

    One that is closed (at its ask deadline, or refused) is made again at
    once, so that the flood keeps ``count`` connections at the server.
    """

    def __init__(self, url: str, count: int) -> None:
        endpoint = parse_url(url)
        self._target = (endpoint.host, endpoint.port)
        self._ask = ProxyConnection(endpoint.authority).data_to_send()
        self._count = count
        self._stop = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._sent: dict[socket.socket, int] = {}
        #: Connections the server closed (each was made again).
        self.closed = 0
        #: Of those, the ones refused with 503.
        self.refused = 0
        self._answers: dict[socket.socket, bytes] = {}
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _connect(self) -> None:
        sock = socket.socket()
        sock.bind((FLOOD_ADDRESS, 0))
        sock.setblocking(False)
        sock.connect_ex(self._target)
        self._sent[sock] = 0
        self._answers[sock] = b""
        self._selector.register(sock, selectors.EVENT_READ)

    def _drop(self, sock: socket.socket) -> None:
        self._selector.unregister(sock)
        answer = self._answers.pop(sock)
        del self._sent[sock]
        sock.close()
        self.closed += 1
        if answer.startswith(b"HTTP/1.1 503 "):
            self.refused += 1

    def _run(self) -> None:
        for _ in range(self._count):
            self._connect()
        next_byte = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_byte:
                next_byte = now + 1.0
                for sock, sent in list(self._sent.items()):
                    if sent < len(self._ask) - 1:  # never quite complete
                        with contextlib.suppress(OSError):
                            self._sent[sock] += sock.send(self._ask[sent : sent + 1])
            for key, _events in self._selector.select(timeout=max(0.0, next_byte - now)):
                sock = cast(socket.socket, key.fileobj)
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    self._answers[sock] += data
                else:
                    self._drop(sock)
                    self._connect()
        for sock in list(self._sent):
            self._selector.unregister(sock)
            sock.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def served_within(listening: Listening, seconds: float) -> bool:
    """Whether the listener's path opened within ``seconds`` (a bound that catches a hang)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            item = listening.received._queue.get(timeout=left)
        except queue.Empty:
            return False
        if isinstance(item, StreamOpened):
            return True
    return False


@pytest.mark.skipif(not loopback_alias_works(), reason=f"cannot bind to {FLOOD_ADDRESS}")
def test_a_flood_from_one_address_leaves_room_for_a_listener_from_another(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    served = serve(Hub(), max_connections=400)
    flood = Flood(served.url, 600)
    try:
        # The flood holds its share (200 of 400) and is refused beyond.
        deadline = time.monotonic() + 30
        while flood.refused < 100 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert flood.refused >= 100, (flood.closed, flood.refused)
        listening = Listening(served.url)
        assert served_within(listening, SERVED_WITHIN)
        listening.stop()
    finally:
        flood.stop()
    stats = served.stats()
    assert stats.connections_crowded >= 100
    assert stats.refusals[503] >= stats.connections_crowded
    crowded = [
        record.getMessage()
        for record in caplog.records
        if "its share of the 400 served at once" in record.getMessage()
    ]
    assert crowded
    assert crowded[0].startswith(f"ask from {FLOOD_ADDRESS}:")
    assert f"503 ({FLOOD_ADDRESS} holds 200 connections" in crowded[0]


# --- nothing dropped unseen ---------------------------------------------------------------


def test_a_connection_closed_at_the_ask_deadline_is_counted_and_logged(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    served = serve(Hub(), ask_timeout=0.3)
    endpoint = parse_url(served.url)
    with socket.create_connection((endpoint.host, endpoint.port), timeout=HANG) as silent:
        assert read_all(silent) == b""  # closed without an answer
    wait_until(lambda: served.stats().asks_expired == 1, "the expired ask to be counted")
    lines = [r.getMessage() for r in caplog.records if "no complete ask within" in r.getMessage()]
    assert lines == [f"connection from {silent_peer(lines)} closed: no complete ask within 0.3 s"]


def silent_peer(lines: list[str]) -> str:
    """The peer a log line names (its port is the client's)."""
    assert lines
    return lines[0].split("connection from ", 1)[1].split(" ", 1)[0]


def test_an_exchange_whose_caller_hung_up_is_counted_and_logged(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    adapter = request.node.callspec.params["serve"]

    def slow_blocking(ask: Ask) -> None:
        time.sleep(0.5)

    async def slow_asyncio(ask: Ask) -> None:
        await asyncio.sleep(0.5)

    async def slow_trio(ask: Ask) -> None:
        await trio.sleep(0.5)

    handler = {"asyncio": slow_asyncio, "trio": slow_trio, "blocking": slow_blocking}
    served = serve(Hub(), exchange_handler=handler[adapter])
    endpoint = parse_url(served.url)
    with socket.create_connection((endpoint.host, endpoint.port), timeout=HANG) as caller:
        ask = Ask(exchange=Exchange.LIST_TOOLS)
        caller.sendall(ExchangeConnection(endpoint.authority, ask).data_to_send())
        caller.shutdown(socket.SHUT_WR)  # hangs up while the handler runs
    wait_until(lambda: served.stats().exchanges_abandoned == 1, "the abandoned exchange")
    assert served.stats().exchanges_answered == 0
    lines = [r.getMessage() for r in caplog.records if "caller hung up" in r.getMessage()]
    assert len(lines) == 1 and "(list_tools)" in lines[0]
