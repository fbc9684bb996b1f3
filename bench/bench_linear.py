"""Cost per byte of reading an answer, by answer size: it must not grow (linear, not quadratic).

A :class:`ProxyConnection` reads answers of 10 KB, 100 KB and 1 MB, fed one
byte at a time and in 64 KiB pieces, in two shapes:

* ``small``: ~200-byte progress notifications, one HTTP chunk each;
* ``big``: one single notification as large as the answer, in 64 KiB
  chunks (one frame gathered across many reads).

For each it prints the time per byte; the last column is the ratio to the
10 KB answer of the same shape and feeding, measured in the same run
(flat means about 1.0; a quadratic buffer would show 10x and 100x).

Run: ``python bench/bench_linear.py``. Takes well under a minute.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from diverge_notifications.sansio import NEED_DATA, ProxyConnection, ReaskNeeded, StreamEnded
from diverge_notifications.sansio.wire.framing import encode_frame

SIZES = (10_000, 100_000, 1_000_000)
READ = 64 * 1024
HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.diverge.messages\r\n"
    b"Content-Location: /mcp/notifications/c1\r\nTransfer-Encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def small_answer(size: int) -> bytes:
    body = bytearray()
    index = 0
    while len(body) < size:
        notification = {
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": {"progressToken": "job-42", "progress": index, "total": 10**6},
        }
        body += chunk(encode_frame(b"\x00" + json.dumps(notification).encode()))
        index += 1
    return HEAD + bytes(body) + b"0\r\n\r\n"


def big_answer(size: int) -> bytes:
    filler = "x" * max(0, size - 120)
    notification = {"method": "notifications/message", "params": {"level": "info", "data": filler}}
    body = encode_frame(b"\x00" + json.dumps(notification).encode())
    chunks = b"".join(chunk(body[i : i + READ]) for i in range(0, len(body), READ))
    return HEAD + chunks + b"0\r\n\r\n"


def read(answer: bytes, piece: int) -> float:
    """Seconds to read ``answer`` in pieces of ``piece`` bytes, taking events as they come."""
    connection = ProxyConnection("bench:1")
    connection.data_to_send()
    last = None
    started = time.process_time()
    for start in range(0, len(answer), piece):
        connection.receive_data(answer[start : start + piece])
        while (event := connection.next_event()) is not NEED_DATA:
            if not isinstance(event, ReaskNeeded):
                last = event
    elapsed = time.process_time() - started
    if not isinstance(last, StreamEnded):
        raise AssertionError(f"the answer did not end cleanly: {last!r}")
    return elapsed


def main() -> None:
    shapes: dict[str, Callable[[int], bytes]] = {"small": small_answer, "big": big_answer}
    print(f"{'shape':6} {'feeding':>10} {'size':>10} {'ns/byte':>9} {'vs 10 KB':>9}")
    for shape, build in shapes.items():
        for piece, feeding in ((1, "1 byte"), (READ, "64 KiB")):
            baseline = None
            for size in SIZES:
                answer = build(size)
                repeats = 1 if piece == 1 and size >= 100_000 else 3
                seconds = min(read(answer, piece) for _ in range(repeats))
                per_byte = seconds / len(answer) * 1e9
                baseline = baseline or per_byte
                print(
                    f"{shape:6} {feeding:>10} {len(answer):>10} {per_byte:>9.1f} "
                    f"{per_byte / baseline:>8.2f}x"
                )


if __name__ == "__main__":
    main()
