"""``serve`` under pressure: stalled listeners beside an ordinary one.

``python -m diverge_notifications serve --stdin`` runs as a subprocess. 50
listeners ask and then never read (small receive buffers); one ordinary
listener reads everything. 8 KB notifications are written to serve's
standard input as fast as it takes them for ``--duration`` seconds (20 by
default). Printed:

* serve's memory (VmRSS, sampled every 0.1 s): the growth from before the
  listeners connected to the peak, against the documented bound for so many
  paths (docs/server.md, "Memory under pressure"), as a ratio;
* for every stalled listener, how long after it stopped reading the server
  cut it off (it sees a reset or an end), against ``stall_timeout + 1 s``:
  measured from its ask, this is an upper bound of the server's own delay,
  which starts only once the buffers between them are full;
* what the ordinary listener received: every notification written, in order.

Run: ``python bench/bench_pressure.py [--duration S] [--stalled N] [--stall-timeout S]``.
Needs Linux (``/proc`` and ``POLLRDHUP``).

With ``--latency``, another scene: one listener that asks and never reads
beside one that reads, ``serve --stdin`` with its default stall timeout,
``--rate`` (200) notifications of 8 KB a second for ``--duration`` (12) s.
Each line carries the time it was written (the monotonic clock, which the
processes of one machine share); the reader notes when it arrived. Printed:
the reader's latency (median, p99, max) and losses, with the listener that
never reads and, in the same run, without it (the comparison), and the
ratio of the two p99s; the issue's bound on the p99 is 0.5 s.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from diverge_notifications.adapters import blocking, parse_url
from diverge_notifications.sansio import (
    Notification,
    NotificationReceived,
    ProxyConnection,
    StreamOpened,
)
from diverge_notifications.sansio.client.policy import Backoff, ProxyPolicy
from diverge_notifications.sansio.drivers.settings import DEFAULT_WRITE_BUFFER
from diverge_notifications.sansio.server.hub import DEFAULT_QUEUE_BYTES

ROOT = Path(__file__).resolve().parent.parent
#: Bytes of one notification line.
LINE_SIZE = 8 * 1024
#: What the transport may hold on top of one write, per path (asyncio's high-water mark).
TRANSPORT_HIGH_WATER = 64 * 1024
#: Per-path bookkeeping allowed on top of the buffers (objects, the channel, the task).
PER_PATH_OVERHEAD = 64 * 1024
#: serve's fixed allowance: standard input read ahead (4 MiB) and its lines in flight.
FIXED_OVERHEAD = 8 * 1024 * 1024


def documented_bound(paths: int) -> int:
    """The most serve's memory may grow by with ``paths`` open paths (docs/server.md)."""
    per_path = DEFAULT_QUEUE_BYTES + DEFAULT_WRITE_BUFFER + TRANSPORT_HIGH_WATER + PER_PATH_OVERHEAD
    return FIXED_OVERHEAD + paths * per_path


def rss(pid: int) -> int:
    """Resident memory of ``pid`` in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


def line(index: int) -> bytes:
    head = (
        b'{"method":"notifications/progress","params":{"progressToken":"b","progress":%d,"p":"'
        % (index)
    )
    tail = b'"}}\n'
    return head + b"x" * (LINE_SIZE - len(head) - len(tail)) + tail


class Stalled:
    """A listener that asks and never reads; notes when the server cut it off."""

    def __init__(self, url: str) -> None:
        endpoint = parse_url(url)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect((endpoint.host, endpoint.port))
        self.sock.sendall(ProxyConnection(endpoint.authority).data_to_send())
        self.asked = time.monotonic()
        self.cut: float | None = None


def watch(stalled: list[Stalled], stop: threading.Event) -> None:
    """Note when each stalled listener's connection is reset or ended by the server."""
    poller = select.poll()
    by_fd = {}
    for peer in stalled:
        poller.register(peer.sock, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
        by_fd[peer.sock.fileno()] = peer
    ended = select.POLLRDHUP | select.POLLHUP | select.POLLERR
    while not stop.is_set() and any(peer.cut is None for peer in stalled):
        for fd, flags in poller.poll(100):
            peer = by_fd[fd]
            if flags & ended and peer.cut is None:
                peer.cut = time.monotonic()
                poller.unregister(fd)


def timed_line(index: int) -> bytes:
    """A line of LINE_SIZE bytes that carries its index and the time it is written."""
    head = (
        b'{"method":"notifications/progress","params":{"progressToken":"b","progress":%d,'
        b'"at":%r,"p":"' % (index, time.monotonic())
    )
    tail = b'"}}\n'
    return head + b"x" * (LINE_SIZE - len(head) - len(tail)) + tail


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def start_serve(*options: str) -> tuple[subprocess.Popen[bytes], str]:
    """``serve --stdin`` on a free port with ``options``: the process and its URL."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    serve = subprocess.Popen(
        [sys.executable, "-m", "diverge_notifications", "serve", "--stdin", "--port", "0",
         *options],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )  # fmt: skip
    assert serve.stdin is not None and serve.stderr is not None
    url = serve.stderr.readline().decode().split("serving on ", 1)[1].strip()
    return serve, url


def read_in_background(url: str, take: Callable[[Notification], None]) -> blocking.Listener:
    """A blocking listener on ``url`` giving ``take`` each notification, from a thread.

    Returned once its path is open; ``close()`` it when done.
    """
    listener = blocking.listen(
        url, events=True, policy=ProxyPolicy(require_exchange=False, backoff=Backoff(base=0.05))
    )
    opened = threading.Event()

    def read() -> None:
        for item in listener:
            if isinstance(item, NotificationReceived):
                take(item.notification)
            elif isinstance(item, StreamOpened):
                opened.set()

    threading.Thread(target=read, daemon=True).start()
    assert opened.wait(10), "the reader did not get a path"
    return listener


def latency_run(rate: int, duration: float, never_reading: bool) -> tuple[list[float], int, int]:
    """The reader's latencies, what it received and what was written, in one scene."""
    serve, url = start_serve()
    assert serve.stdin is not None
    threading.Thread(target=lambda: list(serve.stderr or ()), daemon=True).start()
    latencies: list[float] = []

    def take(notification: Notification) -> None:
        params = notification.params or {}
        latencies.append(time.monotonic() - float(params["at"]))

    listener = read_in_background(url, take)
    other = Stalled(url) if never_reading else None
    time.sleep(0.2)
    total = int(rate * duration)
    start = time.monotonic()
    for index in range(total):
        ahead = start + index / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
        serve.stdin.write(timed_line(index))
        serve.stdin.flush()
    settle = time.monotonic() + 60
    while len(latencies) < total and time.monotonic() < settle:
        time.sleep(0.1)
    received = len(latencies)
    listener.close()
    serve.send_signal(signal.SIGINT)
    serve.wait(30)
    if other is not None:
        other.sock.close()
    return latencies, received, total


def latency_main(rate: int, duration: float) -> None:
    print(f"serve --stdin, {rate} x {LINE_SIZE} B lines a second for {duration:g} s,")
    print("default --stall-timeout; one reader, beside a listener that never reads or alone")
    print()
    print(f"{'scene':<22}{'received':>16}{'median s':>10}{'p99 s':>10}{'max s':>10}")
    p99s = []
    for label, never_reading in (("alone", False), ("beside a non-reader", True)):
        latencies, received, total = latency_run(rate, duration, never_reading)
        p99 = percentile(latencies, 0.99)
        p99s.append(p99)
        print(
            f"{label:<22}{f'{received}/{total}':>16}{percentile(latencies, 0.5):>10.4f}"
            f"{p99:>10.4f}{max(latencies):>10.4f}"
        )
    print()
    print(f"p99 beside a non-reader / p99 alone: {p99s[1] / p99s[0]:.2f}")
    print(f"p99 beside a non-reader: {p99s[1]:.3f} s (bound 0.5 s): ", end="")
    print("PASS" if p99s[1] < 0.5 else "FAIL")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=None)
    parser.add_argument("--stalled", type=int, default=50)
    parser.add_argument("--stall-timeout", type=float, default=5.0)
    parser.add_argument("--latency", action="store_true", help="the latency scene (see above)")
    parser.add_argument("--rate", type=int, default=200)
    args = parser.parse_args()
    if args.latency:
        latency_main(args.rate, 12.0 if args.duration is None else args.duration)
        return
    if args.duration is None:
        args.duration = 20.0

    serve, url = start_serve("--stall-timeout", str(args.stall_timeout))
    errors: list[bytes] = []
    threading.Thread(target=lambda: errors.extend(serve.stderr or ()), daemon=True).start()
    time.sleep(0.5)
    baseline = rss(serve.pid)

    received: list[int] = []
    listener = read_in_background(
        url, lambda notification: received.append(int((notification.params or {})["progress"]))
    )
    stalled = [Stalled(url) for _ in range(args.stalled)]
    stop = threading.Event()
    watcher = threading.Thread(target=watch, args=(stalled, stop), daemon=True)
    watcher.start()

    peak = baseline
    written = 0
    writing_done = threading.Event()

    def write() -> None:
        nonlocal written
        deadline = time.monotonic() + args.duration
        assert serve.stdin is not None
        while time.monotonic() < deadline:
            serve.stdin.write(b"".join(line(written + i) for i in range(16)))
            written += 16
        serve.stdin.flush()
        writing_done.set()

    threading.Thread(target=write, daemon=True).start()
    while not writing_done.is_set():
        peak = max(peak, rss(serve.pid))
        time.sleep(0.1)
    settle = time.monotonic() + 30
    while len(received) < written and time.monotonic() < settle:
        peak = max(peak, rss(serve.pid))
        time.sleep(0.1)
    stop.set()
    watcher.join()
    listener.close()
    serve.send_signal(signal.SIGINT)
    serve.wait(30)
    for peer in stalled:
        peer.sock.close()

    bound = documented_bound(args.stalled + 1)
    growth = peak - baseline
    print(f"serve --stdin, {args.stalled} stalled listeners + 1 reading, {LINE_SIZE} B lines,")
    print(f"written for {args.duration:g} s, --stall-timeout {args.stall_timeout:g}")
    print()
    print(f"{'memory':<28}{'MiB':>10}")
    print(f"{'  before the listeners':<28}{baseline / 2**20:>10.1f}")
    print(f"{'  peak':<28}{peak / 2**20:>10.1f}")
    print(f"{'  growth':<28}{growth / 2**20:>10.1f}")
    print(f"{'  documented bound':<28}{bound / 2**20:>10.1f}")
    print(f"{'  growth / bound':<28}{growth / bound:>10.2f}")
    print()
    delays = [peer.cut - peer.asked for peer in stalled if peer.cut is not None]
    limit = args.stall_timeout + 1.0
    print(f"stalled listeners cut off: {len(delays)} of {len(stalled)}")
    if delays:
        print(f"  from the ask to the cut: min {min(delays):.2f} s, max {max(delays):.2f} s")
        print(f"  stall_timeout + 1 s = {limit:.2f} s; max / limit = {max(delays) / limit:.2f}")
    print()
    in_order = received == list(range(len(received)))
    print(f"ordinary listener: {len(received)} of {written} received, in order: {in_order}")
    summary = [text.decode().strip() for text in errors if text.startswith(b"served ")]
    if summary:
        print(f"serve's summary: {summary[-1]}")
    ok = growth <= bound and len(delays) == len(stalled) and max(delays, default=0) <= limit
    ok = ok and in_order and len(received) == written
    print("PASS" if ok else "FAIL")


if __name__ == "__main__":
    main()
