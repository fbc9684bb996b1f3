"""A listener that reads slowly but steadily is never cut off as stalled (issue 23, point 1).

"Stalled" means that the peer took no byte for ``stall_timeout`` while
output waited, measured at the socket (``WriteProgress``): not that the
application's buffer stayed full, which it does for a slow reader as long
as the kernel's send buffer is not drained far. The three servers run at
once, each with a raw reader taking about 100 KB/s while 8 KB
notifications are published as fast as the server takes them; no time is
measured, the test asserts that no path was cut off.
"""

from __future__ import annotations

import socket
import threading
import time
from functools import partial
from typing import Final

from diverge_notifications.adapters import parse_url
from diverge_notifications.sansio import Hub, ProxyConnection
from tests.adapters.test_adapters import HANG, AsyncioRunner, TrioRunner, wait_until
from tests.adapters.test_pressure import (
    Served,
    loops,  # noqa: F401 - the fixture
    numbered,
    serve_asyncio,
    serve_blocking,
    serve_trio,
)

#: How long the readers read, and the servers' stall_timeout (the issue's numbers).
READING: Final = 15.0
STALL_TIMEOUT: Final = 5.0
#: The reader takes PIECE bytes every PAUSE seconds: about 100 KB/s.
PIECE: Final = 8192
PAUSE: Final = 0.08
PAD: Final = 8000


class SlowReader:
    """A raw notification path read at about 100 KB/s on a thread, until ``stop``."""

    def __init__(self, url: str) -> None:
        endpoint = parse_url(url)
        self.sock = socket.create_connection((endpoint.host, endpoint.port), timeout=HANG)
        self.sock.sendall(ProxyConnection(endpoint.authority).data_to_send())
        self.taken = 0
        self.cut_off: str | None = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while not self.stop.is_set():
                data = self.sock.recv(PIECE)
                if not data:
                    self.cut_off = "closed by the server"
                    return
                self.taken += len(data)
                time.sleep(PAUSE)
        except OSError as error:
            self.cut_off = repr(error)
        finally:
            self.sock.close()


def paths_open(served: Served) -> bool:
    return served.stats().open_paths == 1


def feed_until(served: Served, stop: threading.Event) -> None:
    """Publish 8 KB notifications with ``wait=True``, as fast as the server takes them."""
    index = 0
    while not stop.is_set():
        served.feed([numbered(index, pad=PAD) for index in range(index, index + 8)])
        index += 8


def test_a_slow_steady_reader_is_never_cut_off_on_any_server(
    loops: tuple[AsyncioRunner, TrioRunner],  # noqa: F811 - the fixture
) -> None:
    asyncio_runner, trio_runner = loops
    servers = {
        "asyncio": serve_asyncio(asyncio_runner, Hub(), stall_timeout=STALL_TIMEOUT),
        "trio": serve_trio(trio_runner, Hub(), stall_timeout=STALL_TIMEOUT),
        "blocking": serve_blocking(Hub(), stall_timeout=STALL_TIMEOUT),
    }
    stop = threading.Event()
    try:
        readers = {name: SlowReader(served.url) for name, served in servers.items()}
        for served in servers.values():
            wait_until(partial(paths_open, served), "the path to open")
        feeders = [
            threading.Thread(target=feed_until, args=(served, stop), daemon=True)
            for served in servers.values()
        ]
        for feeder in feeders:
            feeder.start()
        stop.wait(READING)
        cut = {name: reader.cut_off for name, reader in readers.items() if reader.cut_off}
        stalled = {name: served.stats().paths_stalled for name, served in servers.items()}
        stop.set()
        for reader in readers.values():
            reader.stop.set()
            reader.thread.join(HANG)
        assert cut == {}
        assert stalled == {"asyncio": 0, "trio": 0, "blocking": 0}
        # Output waited all along: each reader took far more than its kernel buffers hold.
        assert all(reader.taken > 200_000 for reader in readers.values())
    finally:
        stop.set()
        for served in servers.values():
            served.close()
