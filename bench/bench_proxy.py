"""Notifications per second through ProxyConnection, against bare ``json.loads``.

Three message shapes: ~150-byte progress notifications, ~8 KiB log
messages and ~17 KiB log messages (the larger ones hold more than 127
objects and arrays, so the strict decoder's nesting-depth check runs on
them). The answer is read in 64 KiB pieces, in two layouts:

* ``chunk each``: one HTTP chunk per notification, as a server writes
  notifications one at a time (``send_notification``);
* ``packed``: frames packed into 64 KiB chunks, as a server writes a
  backlog at once (``send_notifications``).

The comparison, measured in the same run on the same message bodies, is a
loop of ``json.loads`` over the JSON of each notification: the least any
reader of these messages must do. Also shown: ``decode_message`` alone (the
library's strict, lossless message codec, which ProxyConnection runs on
every message), so the cost of the HTTP and framing layers above it can be
read off.

Last, the memory an idle open path retains: a ProxyConnection constructed,
fed its answer's head and asked for its StreamOpened, measured with
``tracemalloc`` (the average over 200 such connections).

Times are CPU time of this process (``time.process_time``), the best of
several interleaved rounds, so that other work on the machine does not
blur the ratios. Run: ``python bench/bench_proxy.py``. Takes well under a
minute.
"""

from __future__ import annotations

import gc
import json
import time
import tracemalloc
from collections.abc import Callable

from diverge_notifications.sansio import NEED_DATA, ProxyConnection, StreamOpened, decode_message
from diverge_notifications.sansio.wire.framing import encode_frame

READ = 64 * 1024
ROUNDS = 7
HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.diverge.messages\r\n"
    b"Content-Location: /mcp/notifications/c1\r\nCache-Control: no-store\r\n"
    b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
)


def progress_bodies(count: int) -> list[bytes]:
    bodies = []
    for index in range(count):
        params = {
            "progressToken": f"build-{index % 7}",
            "progress": index,
            "total": count,
            "message": f"step {index} of {count}",
        }
        body = {"jsonrpc": "2.0", "method": "notifications/progress", "params": params}
        bodies.append(json.dumps(body, separators=(",", ":")).encode())
    return bodies


def log_bodies(count: int, records_each: int = 110) -> list[bytes]:
    bodies = []
    for index in range(count):
        records = [
            {"ts": 1_700_000_000 + i, "lvl": "info", "msg": f"request {index}-{i} served", "ms": i}
            for i in range(records_each)
        ]
        data = {"service": "indexer", "batch": index, "records": records}
        params = {"level": "info", "logger": "indexer", "data": data}
        body = {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
        bodies.append(json.dumps(body, separators=(",", ":")).encode())
    return bodies


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def chunk_each(bodies: list[bytes]) -> bytes:
    return b"".join(chunk(encode_frame(b"\x00" + body)) for body in bodies)


def packed(bodies: list[bytes]) -> bytes:
    frames = b"".join(encode_frame(b"\x00" + body) for body in bodies)
    return b"".join(chunk(frames[i : i + READ]) for i in range(0, len(frames), READ))


#: The times of one run, slice by slice (a read, or as many bodies).
SliceTimes = list[float]


def proxy_reads(
    body: bytes, count: int, *, read: int = READ, all_first: bool = False
) -> Callable[[], SliceTimes]:
    """The CPU time of each read (64 KiB unless told) through a ProxyConnection.

    A read is its receive_data() and its events, each let go as it comes;
    with ``all_first``, a read's events are all taken before any is let go.
    """
    reads = [body[i : i + read] for i in range(0, len(body), read)]

    def run() -> SliceTimes:
        connection = ProxyConnection("bench:1")
        connection.data_to_send()
        connection.receive_data(HEAD)
        assert isinstance(connection.next_event(), StreamOpened)
        clock = time.process_time
        times = []
        received = 0
        for piece in reads:
            started = clock()
            connection.receive_data(piece)
            if all_first:
                events = []
                while (event := connection.next_event()) is not NEED_DATA:
                    events.append(event)
                received += len(events)
                del events
            else:
                while connection.next_event() is not NEED_DATA:
                    received += 1
            times.append(clock() - started)
        assert received == count, (received, count)
        return times

    return run


def loads_groups(bodies: list[bytes], groups: int) -> Callable[[], SliceTimes]:
    """The CPU time of json.loads of each of ``groups`` runs of consecutive bodies."""
    size = -(-len(bodies) // groups)
    runs = [bodies[i : i + size] for i in range(0, len(bodies), size)]

    def run() -> SliceTimes:
        loads = json.loads
        clock = time.process_time
        times = []
        for group in runs:
            started = clock()
            for body in group:
                loads(body)
            times.append(clock() - started)
        return times

    return run


def best_per_slice(
    runs: dict[str, Callable[[], SliceTimes]], rounds: int = ROUNDS
) -> dict[str, float]:
    """Each run's total: the sum of each of its slices' best time over interleaved ``rounds``.

    A burst of other work on the machine then spoils one slice in one
    round rather than the whole round, which the best of whole rounds
    only escapes if some round had none.
    """
    best: dict[str, SliceTimes] = {}
    gc.collect()
    for _ in range(rounds):
        for name, run in runs.items():
            times = run()
            best[name] = list(map(min, best.get(name, times), times))
    return {name: sum(times) for name, times in best.items()}


def through_proxy(body: bytes, count: int) -> Callable[[], float]:
    """The CPU time of the whole answer through a ProxyConnection, 64 KiB reads."""
    reads = proxy_reads(body, count)
    return lambda: sum(reads())


def json_loads(bodies: list[bytes]) -> Callable[[], float]:
    """The CPU time of json.loads of each body."""
    group = loads_groups(bodies, 1)
    return lambda: sum(group())


def codec(bodies: list[bytes]) -> Callable[[], float]:
    messages = [b"\x00" + body for body in bodies]

    def run() -> float:
        started = time.process_time()
        for message in messages:
            decode_message(message)
        return time.process_time() - started

    return run


def best_of(runs: dict[str, Callable[[], float]]) -> dict[str, float]:
    best = {name: float("inf") for name in runs}
    gc.collect()
    for _ in range(ROUNDS):
        for name, run in runs.items():  # interleaved, so drift hits all alike
            best[name] = min(best[name], run())
    return best


def idle_path_size(samples: int = 200) -> float:
    """Bytes retained by one idle open path (average over ``samples``)."""

    def open_path() -> ProxyConnection:
        connection = ProxyConnection("127.0.0.1:8080", token="a-bearer-token")
        connection.data_to_send()
        connection.receive_data(HEAD)
        assert isinstance(connection.next_event(), StreamOpened)
        assert connection.next_event() is NEED_DATA
        return connection

    open_path()  # first use: imports, caches and interned names are not the path's
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    paths = [open_path() for _ in range(samples)]
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    retained = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    del paths
    return retained / samples


def main() -> None:
    shapes = {
        "progress": progress_bodies(20_000),
        "log 8 KiB": log_bodies(600),
        "log 17 KiB": log_bodies(300, records_each=240),
    }
    print(
        f"{'message':10} {'layout':11} {'bytes/msg':>9} {'msgs/s':>10} {'us/msg':>7} "
        f"{'vs json.loads':>13}"
    )
    for shape, bodies in shapes.items():
        count = len(bodies)
        average = sum(map(len, bodies)) / count
        runs = {
            "json.loads": json_loads(bodies),
            "decode_message": codec(bodies),
            "chunk each": through_proxy(chunk_each(bodies), count),
            "packed": through_proxy(packed(bodies), count),
        }
        best = best_of(runs)
        for name, seconds in best.items():
            layout = "-" if name in ("json.loads", "decode_message") else name
            label = name if layout == "-" else "ProxyConn."
            print(
                f"{shape:10} {layout:11} {average:>9.0f} {count / seconds:>10,.0f} "
                f"{seconds / count * 1e6:>7.2f} {seconds / best['json.loads']:>12.2f}x"
                f"   {label}"
            )
    size = idle_path_size()
    print(f"\nidle open ProxyConnection retains {size:,.0f} bytes ({size / 1024:.1f} KiB)")


if __name__ == "__main__":
    main()
