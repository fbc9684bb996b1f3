"""Replicas behind a load balancer, sharing one stream through Redis: delivery, faults, cost.

Everything runs on loopback from a temporary folder, on free ports, and is
stopped at the end: one ``redis-server`` (persistence off), three
``python -m diverge_notifications serve --redis`` replicas (the first one
publishes what the bench writes on its standard input, at a steady rate),
nginx as a round-robin load balancer in front of them, and 300 listeners
(this library's asyncio ``listen()``, with its own backoff and jitter) in a
few worker processes, all asking nginx. Each notification carries its
number and the time it was written, so every delivery is checked (in the
publisher's order, none twice) and timed.

1. **Baseline**: as many listeners through the same nginx on one replica
   without Redis (``serve --stdin``, the in-process hub), at the same rate.
2. **Replicas**: every listener gets every notification; p50 and p99
   publish-to-delivery latency beside the baseline's. The two take turns
   (``--turns``), both sets of listeners connected throughout, so that a
   change in the machine's load falls on both alike.
3. **A replica killed** (not the publisher): its listeners re-ask, nginx
   lands them on the others, and the listeners of the others lose nothing.
4. **Redis killed for a second**: every path ends with ``StreamErrored``
   naming the broker, every listener is back by itself after its backoff,
   with no notification twice or out of order.
5. **Throughput per replica**: a flood of notifications through one
   ``serve --redis`` and through one ``serve`` (the in-process hub), one
   listener each, as a ratio.

Run: ``python bench/bench_cluster.py`` (about a minute) or ``--quick``
(100 listeners, shorter phases); ``--help`` for the sizes. Needs
``redis-server``, nginx and redis-py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from multiprocessing.sharedctypes import SynchronizedArray
from pathlib import Path
from typing import IO, Any

from diverge_notifications.adapters import asyncio as asyncio_adapter
from diverge_notifications.sansio import (
    NotificationReceived,
    NotServed,
    StreamBroken,
    StreamErrored,
    StreamOpened,
)
from diverge_notifications.sansio.events import RetryScheduled

ROOT = Path(__file__).resolve().parent.parent
#: Every wait's guard against a hang, in seconds.
GUARD = 60.0
#: The servers' keep-alive interval; listeners count three of them as a broken path.
KEEPALIVE = 1.0
BROKER = "Redis broker"

NGINX_CONFIG = """\
{user}worker_processes 1;
error_log {root}/nginx-error.log warn;
pid {root}/nginx.pid;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {root}/client_body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    upstream replicas {{
{servers}
    }}
    upstream alone {{
        server 127.0.0.1:{alone};
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{ proxy_pass http://replicas; {proxying} }}
    }}
    server {{
        listen 127.0.0.1:{alone_port};
        location / {{ proxy_pass http://alone; {proxying} }}
    }}
}}
"""
PROXYING = (
    "proxy_buffering off; proxy_http_version 1.1; proxy_read_timeout 120s; "
    "proxy_next_upstream error timeout; proxy_connect_timeout 2s;"
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until(condition: Callable[[], bool], what: str, timeout: float = GUARD) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"bench_cluster: timed out waiting for {what}")
        time.sleep(0.02)


def answers(port: int, request: bytes, expect: bytes) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(request)
            return sock.recv(64).startswith(expect)
    except OSError:
        return False


def binary(name: str) -> str:
    for found in (shutil.which(name), f"/usr/sbin/{name}", f"/usr/local/sbin/{name}"):
        if found and os.access(found, os.X_OK):
            return found
    raise SystemExit(f"bench_cluster: {name} is not installed")


def stop(process: subprocess.Popen[bytes], signum: int = signal.SIGINT) -> None:
    """Stop one process this bench started, by its pid, and reap it."""
    if process.poll() is None:
        process.send_signal(signum)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# --- the processes -------------------------------------------------------------------


class Redis:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                *(binary("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1"),
                *("--save", "", "--appendonly", "no", "--dir", str(self.folder)),
                *("--logfile", str(self.folder / "redis.log")),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(lambda: answers(self.port, b"PING\r\n", b"+PONG"), "redis-server")

    def kill(self) -> None:
        if self.process is not None:
            stop(self.process, signal.SIGKILL)
            self.process = None


class Serve:
    """One ``serve`` process; its standard error is kept in a file."""

    def __init__(self, folder: Path, name: str, *options: str, stdin: bool = False) -> None:
        self.port = free_port()
        self.log = folder / f"{name}.log"
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
        )
        self._err = self.log.open("wb")
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "diverge_notifications", "serve", "--port", str(self.port)),
                *("--keepalive", str(KEEPALIVE), *options, *(["--stdin"] if stdin else [])),
            ],
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._err,
            env=env,
            cwd=ROOT,
        )
        self.stdin: IO[bytes] | None = self.process.stdin
        wait_until(lambda: b"serving on" in self.log.read_bytes(), f"{name} to listen")

    def wait_for_log(self, text: str, count: int = 1) -> None:
        needle = text.encode()
        wait_until(lambda: self.log.read_bytes().count(needle) >= count, f"{text!r} in {self.log}")

    def stop(self, signum: int = signal.SIGINT) -> None:
        stop(self.process, signum)
        self._err.close()


def start_nginx(
    folder: Path, replicas: list[Serve], alone: Serve
) -> tuple[subprocess.Popen[bytes], int, int]:
    port, alone_port = free_port(), free_port()
    config = folder / "nginx.conf"
    servers = "\n".join(
        f"        server 127.0.0.1:{r.port} max_fails=1 fail_timeout=60s;" for r in replicas
    )
    config.write_text(
        NGINX_CONFIG.format(
            user="user root;\n" if os.geteuid() == 0 else "",
            root=folder,
            servers=servers,
            alone=alone.port,
            port=port,
            alone_port=alone_port,
            proxying=PROXYING,
        )
    )
    process = subprocess.Popen(
        [binary("nginx"), "-p", str(folder), "-c", str(config), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for each in (port, alone_port):
        wait_until(partial(answers, each, b"GET / HTTP/1.0\r\n\r\n", b"HTTP/"), "nginx")
    return process, port, alone_port


class Publisher:
    """Writes numbered notifications on a replica's standard input at a steady rate."""

    def __init__(self, serve: Serve, rate: float, first: int = 0) -> None:
        assert serve.stdin is not None
        self._stdin = serve.stdin
        self._interval = 1.0 / rate
        self.next = first
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        at = time.monotonic()
        while not self._stop.is_set():
            line = b'{"method":"x/bench","params":{"i":%d,"t":%r}}\n' % (
                self.next,
                time.monotonic(),
            )
            self._stdin.write(line)
            self._stdin.flush()
            self.next += 1
            at += self._interval
            self._stop.wait(max(0.0, at - time.monotonic()))

    def stop(self) -> int:
        """Stop; returns the number of the last notification written."""
        self._stop.set()
        self._thread.join(GUARD)
        return self.next - 1


# --- the listeners, in worker processes ----------------------------------------------


class Shared:
    """What the workers show the bench while they run, one slot per listener."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.opened: SynchronizedArray[int] = multiprocessing.Array("i", count)
        self.opened_at: SynchronizedArray[float] = multiprocessing.Array("d", count)
        self.last: SynchronizedArray[int] = multiprocessing.Array("i", [-1] * count)
        self.errored: SynchronizedArray[int] = multiprocessing.Array("i", count)
        self.ended: SynchronizedArray[int] = multiprocessing.Array("i", count)

    def all(self, array: Any, condition: Callable[[Any], bool]) -> bool:
        return all(condition(value) for value in array[:])


def listeners_worker(
    url: str, first: int, count: int, shared: Shared, stop: Any, results: Any
) -> None:
    """Run ``count`` listeners of ``url`` (slots from ``first``) until ``stop``; report them."""
    asyncio.run(_listeners(url, first, count, shared, stop, results))


async def _listeners(
    url: str, first: int, count: int, shared: Shared, stop: Any, results: Any
) -> None:
    records: dict[int, dict[str, list[Any]]] = {}

    async def one(slot: int) -> None:
        got: list[tuple[int, float]] = []
        delays: list[tuple[float, float]] = []
        records[slot] = {"got": got, "delays": delays}
        items = asyncio_adapter.listen(url, events=True, keepalive_interval=KEEPALIVE)
        async with contextlib.aclosing(items):
            async for item in items:
                now = time.monotonic()
                if isinstance(item, NotificationReceived):
                    params = item.notification.params or {}
                    got.append((params["i"], now - params["t"]))
                    shared.last[slot] = params["i"]
                elif isinstance(item, StreamOpened):
                    shared.opened_at[slot] = now
                    shared.opened[slot] += 1
                elif isinstance(item, StreamErrored):
                    if item.error.message.startswith(BROKER):
                        shared.errored[slot] += 1
                    shared.ended[slot] += 1
                elif isinstance(item, (StreamBroken, NotServed)):
                    shared.ended[slot] += 1
                elif isinstance(item, RetryScheduled):
                    delays.append((now, item.delay))

    tasks = [asyncio.create_task(one(first + n)) for n in range(count)]
    while not stop.is_set():
        await asyncio.sleep(0.05)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    results.put(records)


class Listeners:
    """``count`` listeners of ``url`` spread over ``workers`` processes."""

    def __init__(self, url: str, count: int, workers: int) -> None:
        self.shared = Shared(count)
        self._stop = multiprocessing.Event()
        self._results: Any = multiprocessing.Queue()
        share = -(-count // workers)
        self._processes = [
            multiprocessing.Process(
                target=listeners_worker,
                args=(
                    url,
                    first,
                    min(share, count - first),
                    self.shared,
                    self._stop,
                    self._results,
                ),
                daemon=True,
            )
            for first in range(0, count, share)
        ]
        for process in self._processes:
            process.start()

    def wait_opened(self, at_least: int = 1, since: list[int] | None = None) -> None:
        opened = self.shared.opened
        if since is None:
            wait_until(lambda: min(opened[:]) >= at_least, "every listener's path")
        else:
            wait_until(
                lambda: all(now > then for now, then in zip(opened[:], since, strict=True)),
                "every listener back",
            )

    def wait_last(self, last: int) -> None:
        wait_until(lambda: min(self.shared.last[:]) >= last, f"notification {last} everywhere")

    def stop(self) -> dict[int, dict[str, list[Any]]]:
        self._stop.set()
        records: dict[int, dict[str, list[Any]]] = {}
        for _ in self._processes:
            records.update(self._results.get(timeout=GUARD))
        for process in self._processes:
            process.join(GUARD)
        return records


# --- checking and measuring ----------------------------------------------------------


def in_order_once(records: dict[int, dict[str, list[Any]]]) -> int:
    """How many listeners got a notification twice or out of order (0 is the claim)."""
    return sum(
        1
        for record in records.values()
        if any(b <= a for (a, _), (b, _) in zip(record["got"], record["got"][1:], strict=False))
    )


def latencies(records: dict[int, dict[str, list[Any]]], low: int, high: int) -> list[float]:
    return [late for record in records.values() for i, late in record["got"] if low <= i <= high]


def missing(record: dict[str, list[Any]], low: int, high: int) -> int:
    seen = {i for i, _ in record["got"] if low <= i <= high}
    return high - low + 1 - len(seen)


def first_ask_served(delays: list[tuple[float, float]], opened_at: float, serving: float) -> bool:
    """Whether a listener was served at its first ask after the replicas served again.

    ``delays`` are its ``RetryScheduled`` events (when, delay): each schedules
    an ask at ``when + delay``, and every such ask before the last one (the
    one that opened the path at ``opened_at``) was refused or failed. None of
    those may have been made once the replicas served again, at ``serving``:
    the listener came back at the ask its own backoff scheduled next.
    """
    asks = [at + delay for at, delay in delays if at < opened_at]
    return all(ask < serving for ask in asks[:-1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(value: float) -> str:
    return f"{value * 1000:7.1f} ms"


def serving_again(ports: list[int]) -> float:
    """When the last of the replicas on ``ports`` answers a notification ask with a path again."""
    ask = (
        b"POST /requests HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/vnd.diverge.ask\r\nContent-Length: 1\r\n\r\n\x04"
    )
    waiting = set(ports)

    def served() -> bool:
        waiting.difference_update(
            [port for port in waiting if answers(port, ask, b"HTTP/1.1 200 ")]
        )
        return not waiting

    wait_until(served, "the replicas to serve again")
    return time.monotonic()


#: Notifications the flood keeps ahead of its listener at most: well under a
#: subscriber's queue (1024), so that the in-process hub drops none.
FLOOD_WINDOW = 500


def flood(serve: Serve, n: int) -> float:
    """Notifications per second through ``serve`` to one listener of it, ``n`` as fast as it takes.

    The lines are written in windows of :data:`FLOOD_WINDOW` ahead of what
    the listener received, the same for both kinds of replica.
    """
    listeners = Listeners(f"http://127.0.0.1:{serve.port}", 1, 1)
    listeners.wait_opened()
    stdin = serve.stdin
    assert stdin is not None
    last = listeners.shared.last
    started = time.monotonic()
    written = 0
    while written < n:
        if written - last[0] > FLOOD_WINDOW:
            time.sleep(0.0005)
            continue
        upto = min(n, last[0] + 1 + 2 * FLOOD_WINDOW, written + FLOOD_WINDOW)
        stdin.write(
            b"".join(
                b'{"method":"x/bench","params":{"i":%d,"t":0}}\n' % i for i in range(written, upto)
            )
        )
        stdin.flush()
        written = upto
    listeners.wait_last(n - 1)
    elapsed = time.monotonic() - started
    listeners.stop()
    return n / elapsed


# --- the run -------------------------------------------------------------------------


def run(options: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as name:
        folder = Path(name)
        started: list[Serve] = []
        nginx: subprocess.Popen[bytes] | None = None
        redis = Redis(folder)
        try:
            redis.start()
            replicas = [
                Serve(folder, f"replica{n}", "--redis", redis.url, stdin=n == 0)
                for n in range(options.replicas)
            ]
            started += replicas
            alone = Serve(folder, "alone", stdin=True)
            started.append(alone)
            for replica in replicas:
                replica.wait_for_log("': subscribed")
            nginx, port, alone_port = start_nginx(folder, replicas, alone)
            measure(options, redis, replicas, alone, port, alone_port, folder)
        finally:
            if nginx is not None:
                stop(nginx, signal.SIGQUIT)
            for serve in started:
                serve.stop()
            redis.kill()


def measure(
    options: argparse.Namespace,
    redis: Redis,
    replicas: list[Serve],
    alone: Serve,
    port: int,
    alone_port: int,
    folder: Path,
) -> None:
    n, rate, duration = options.listeners, options.rate, options.duration
    print(
        f"{options.replicas} replicas (serve --redis) behind nginx round robin, 1 Redis, "
        f"{n} listeners in {options.workers} processes, {rate:g} notifications/s\n"
    )
    # 1-2. The baseline (one replica, the in-process hub, through the same nginx)
    # and the replicas take turns, both sets of listeners connected throughout,
    # so that both are timed under the same load of the machine.
    base = Listeners(f"http://127.0.0.1:{alone_port}", n, options.workers)
    cluster = Listeners(f"http://127.0.0.1:{port}", n, options.workers)
    base.wait_opened()
    cluster.wait_opened()
    turns: dict[str, list[tuple[int, int]]] = {"base": [], "cluster": []}
    following = {"base": 0, "cluster": 0}
    turn = duration / options.turns
    for _ in range(options.turns):
        for what, serve, listeners in (("base", alone, base), ("cluster", replicas[0], cluster)):
            publisher = Publisher(serve, rate, first=following[what])
            time.sleep(turn)
            last = publisher.stop()
            listeners.wait_last(last)
            turns[what].append((following[what], last))
            following[what] = last + 1
    base_records = base.stop()
    base_last = following["base"] - 1
    base_bad = in_order_once(base_records) + sum(
        missing(r, 0, base_last) for r in base_records.values()
    )
    steady_last = following["cluster"] - 1
    publisher = Publisher(replicas[0], rate, first=following["cluster"])

    # 3. A replica that does not publish is killed: its listeners' paths break.
    shared = cluster.shared
    opened, ended = shared.opened[:], shared.ended[:]
    killed_from = publisher.next
    replicas[-1].stop(signal.SIGKILL)
    wait_until(lambda: shared.ended[:] != ended, "the killed replica's paths to end")
    time.sleep(1.0)  # every path of the killed replica has seen its end by now
    moved = [slot for slot in range(n) if shared.ended[slot] > ended[slot]]
    wait_until(lambda: all(shared.opened[s] > opened[s] for s in moved), "the moved listeners")
    time.sleep(max(1.0, duration / 2))
    kill_last = publisher.next - 1
    wait_until(lambda: min(shared.last[:]) >= kill_last, "the replica phase everywhere")

    # 4. Redis is killed for a second.
    opened = cluster.shared.opened[:]
    errored = cluster.shared.errored[:]
    redis.kill()
    time.sleep(1.0)
    redis.start()
    restarted = time.monotonic()
    # When each live replica serves again (its broker subscribed): asked directly.
    serving = serving_again([replica.port for replica in replicas[:-1]])
    cluster.wait_opened(since=opened)
    for replica in replicas[:-1]:
        replica.wait_for_log("': subscribed again")
    time.sleep(max(1.0, duration / 2))
    last = publisher.stop()
    cluster.wait_last(last)
    ends = cluster.shared.errored[:]
    back = [cluster.shared.opened_at[s] - restarted for s in range(n)]
    records = cluster.stop()

    # The first second of the first turn warms up (first batches, caches): not timed.
    warm = int(rate)
    base_lat = [
        late
        for low, high in turns["base"]
        for late in latencies(base_records, max(low, warm), high)
    ]
    cluster_lat = [
        late for low, high in turns["cluster"] for late in latencies(records, max(low, warm), high)
    ]
    steady_missing = sum(missing(r, 0, steady_last) for r in records.values())
    stayed = [slot for slot in range(n) if slot not in moved]
    stayed_missing = sum(missing(records[s], killed_from, kill_last) for s in stayed)
    errored_all = sum(1 for s in range(n) if ends[s] > errored[s])
    # The longest backoff delay each listener drew before the ask that was served.
    waited = [
        max(
            (delay for at, delay in records[s]["delays"] if at < cluster.shared.opened_at[s]),
            default=0.0,
        )
        for s in range(n)
    ]
    within = sum(
        1
        for s in range(n)
        if first_ask_served(records[s]["delays"], cluster.shared.opened_at[s], serving)
    )
    twice = in_order_once(records)

    # 5. Throughput per replica: Redis against the in-process hub, one listener each.
    for replica in replicas[:-1]:
        replica.stop()
    with_redis = Serve(
        folder, "flood-redis", "--redis", redis.url, "--redis-channel", "bench:flood", stdin=True
    )
    with_hub = Serve(folder, "flood-hub", stdin=True)
    try:
        with_redis.wait_for_log("': subscribed")
        redis_rate = flood(with_redis, options.flood)
        hub_rate = flood(with_hub, options.flood)
    finally:
        with_redis.stop()
        with_hub.stop()

    p50, p99 = statistics.median, partial(percentile, q=0.99)
    table = [
        ("1 replica, in-process hub, through nginx", base_lat),
        (f"{options.replicas} replicas through Redis and nginx", cluster_lat),
    ]
    print(f"{'publish-to-delivery latency (steady phase)':45} {'p50':>10} {'p99':>10}")
    for label, values in table:
        print(f"  {label:43} {ms(p50(values))} {ms(p99(values))}")
    print(
        f"  {'ratio, Redis / in-process':43} {p50(cluster_lat) / p50(base_lat):9.2f}x "
        f"{p99(cluster_lat) / p99(base_lat):9.2f}x\n"
    )
    print(
        f"steady phase: {steady_last + 1} notifications x {n} listeners, {steady_missing} missing"
        f" (baseline: {base_bad} missing or out of order)"
    )
    print(
        f"replica killed: {len(moved)} listeners re-asked and landed on the others; the other "
        f"{len(stayed)} missed {stayed_missing} of notifications {killed_from}-{kill_last}"
    )
    print(
        f"Redis killed for 1 s: {errored_all}/{n} paths ended with StreamErrored naming the "
        f"broker; {n}/{n} listeners back by themselves, {within}/{n} at the first ask their "
        f"backoff made once the replicas served again ({serving - restarted:.2f} s after "
        f"Redis restarted); back p50 {p50(back):.2f} s, at most {max(back):.2f} s after the "
        f"restart (the longest backoff delay drawn: {max(waited):.2f} s)"
    )
    print(f"listeners that got a notification twice or out of order, whole run: {twice}\n")
    print(
        f"throughput of one replica: {options.flood} notifications to one listener, as fast as "
        f"it takes them ({FLOOD_WINDOW} ahead at most)"
    )
    print(f"  serve --redis  {redis_rate:9.0f} notifications/s")
    print(f"  serve (hub)    {hub_rate:9.0f} notifications/s")
    print(f"  ratio          {redis_rate / hub_rate:9.2f} (Redis / in-process hub)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 listeners, shorter phases")
    parser.add_argument("--listeners", type=int, default=None, help="listeners (300)")
    parser.add_argument("--replicas", type=int, default=3, help="replicas behind nginx (3)")
    parser.add_argument("--workers", type=int, default=3, help="listener processes (3)")
    parser.add_argument("--rate", type=float, default=20.0, help="notifications per second (20)")
    parser.add_argument("--duration", type=float, default=None, help="seconds per phase (10)")
    parser.add_argument(
        "--turns", type=int, default=4, help="turns the baseline and the replicas take (4)"
    )
    parser.add_argument(
        "--flood", type=int, default=None, help="notifications in the throughput burst (20000)"
    )
    options = parser.parse_args()
    quick = options.quick
    options.listeners = options.listeners or (100 if quick else 300)
    options.duration = options.duration or (3.0 if quick else 10.0)
    options.flood = options.flood or (5000 if quick else 20000)
    if options.replicas < 2:
        parser.error("--replicas must be at least 2 (one of them is killed)")
    run(options)


if __name__ == "__main__":
    main()
