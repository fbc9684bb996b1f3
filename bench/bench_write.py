"""How cheap writing a path is, against ``json.dumps`` of the same notifications.

A server that relays notifications holds them as :class:`Notification`
objects whose JSON bytes are already known, so writing a frame should cost
far less than serialising the notification again. Measured here, per
notification, in one run:

* ``json.dumps`` of the notification's members (the comparison);
* ``send_notification`` of a :class:`Notification` (one chunk per frame);
* ``send_notifications`` of batches of 64 (one chunk per batch);
* ``send_notification`` of raw JSON bytes, which are checked to decode
  as a notification before they are relayed (so this one parses).

Run: ``python bench/bench_write.py`` (well under 60 s).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from diverge_notifications.sansio import Notification
from diverge_notifications.sansio.server.connection import ServerConnection

COUNT = 50_000
BATCH = 64


def sample(n: int) -> Notification:
    """A mix of the usual traffic: progress, log messages, resource changes."""
    if n % 3 == 0:
        return Notification(
            "notifications/progress",
            {"progressToken": f"tok-{n % 17}", "progress": n, "total": COUNT, "message": "working"},
        )
    if n % 3 == 1:
        return Notification(
            "notifications/message",
            {"level": "info", "logger": "worker", "data": {"step": n, "detail": "x" * 40}},
        )
    return Notification("notifications/resources/updated", {"uri": f"file:///data/{n % 100}.csv"})


def open_path() -> ServerConnection:
    conn = ServerConnection()
    conn.receive_data(b"POST /requests HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n\x04")
    conn.next_event()
    conn.start_path()
    return conn


def best_of(repeats: int, run: Callable[[], float]) -> float:
    return min(run() for _ in range(repeats))


def main() -> None:
    items = [sample(n) for n in range(COUNT)]
    members = [item.members for item in items]
    raws = [item.to_bytes() for item in items]
    total_bytes = sum(len(raw) for raw in raws)

    def dumps() -> float:
        start = time.perf_counter()
        for value in members:
            json.dumps(value)
        return time.perf_counter() - start

    def one_at_a_time(inputs: list[Notification] | list[bytes]) -> Callable[[], float]:
        def run() -> float:
            conn = open_path()
            send = conn.send_notification
            start = time.perf_counter()
            for item in inputs:
                send(item)
            return time.perf_counter() - start

        return run

    def batches() -> float:
        conn = open_path()
        groups = [items[i : i + BATCH] for i in range(0, COUNT, BATCH)]
        start = time.perf_counter()
        for group in groups:
            conn.send_notifications(group)
        return time.perf_counter() - start

    baseline = best_of(5, dumps)
    print(f"{COUNT} notifications, {total_bytes / COUNT:.0f} bytes of JSON on average")
    print(f"{'what':<36} {'ns each':>9} {'MB/s':>8} {'vs json.dumps':>14}")
    for name, run in (
        ("json.dumps (comparison)", dumps),
        ("send_notification(Notification)", one_at_a_time(items)),
        (f"send_notifications(batch of {BATCH})", batches),
        ("send_notification(raw bytes, checked)", one_at_a_time(raws)),
    ):
        elapsed = baseline if run is dumps else best_of(5, run)
        per_item = elapsed / COUNT
        speed = total_bytes / elapsed / 1e6
        print(f"{name:<36} {per_item * 1e9:>9.0f} {speed:>8.0f} {baseline / elapsed:>13.1f}x")


if __name__ == "__main__":
    main()
