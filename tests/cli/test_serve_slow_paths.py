"""``serve --stdin`` beside a listener that asks and never reads: the readers lose nothing.

Standard input waits for room only on paths that took bytes within
``--slow-after`` seconds; the listener that never reads stops holding it
up once it has not moved for that long, and what does not fit its queue is
dropped and counted. ``bench/bench_pressure.py`` measures the readers'
latency in the same scene; here only what arrived is checked. Every wait
has a generous deadline that only catches a hang.
"""

from __future__ import annotations

import threading
import time
from typing import Final

from diverge_notifications.cli import EXIT_OK
from tests.adapters.test_pressure import opened, progress_of, stalled_peer
from tests.interop import PATH_END_LINE, ServeProcess

#: 200 notifications of 8 KB a second, for 12 s.
RATE: Final = 200
SECONDS: Final = 12
LINES: Final = RATE * SECONDS
PAD: Final = "p" * 8 * 1024


def line(index: int) -> bytes:
    return (
        b'{"method":"notifications/progress","params":{"progressToken":"in","progress":%d,'
        b'"pad":"%s"}}\n' % (index, PAD.encode())
    )


def write_paced(serve: ServeProcess) -> threading.Thread:
    """Write LINES lines to serve's standard input, RATE a second, on a thread."""

    def write() -> None:
        assert serve.proc.stdin is not None
        start = time.monotonic()
        for index in range(LINES):
            # Paced by the clock, not by sleeps that add up.
            ahead = start + index / RATE - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
            serve.proc.stdin.write(line(index))
            serve.proc.stdin.flush()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


def test_a_listener_that_never_reads_holds_up_no_reader() -> None:
    serve = ServeProcess("--stdin")
    with serve:
        never_reads = stalled_peer(serve.url)
        head = b""
        while b"\r\n\r\n" not in head:  # its path is open: then it reads no more
            head += never_reads.recv(1)
        reader = opened(serve.url)
        writer = write_paced(serve)
        got = reader.notifications(LINES)
        writer.join()
        assert progress_of(got) == list(range(LINES))
        never_reads.close()
        assert serve.interrupt() == EXIT_OK
        reader.stop()
    ends = [match for text in serve.stderr.messages if (match := PATH_END_LINE.match(text))]
    counts = sorted((int(m[3]), int(m[4])) for m in ends)
    # The reader: everything, nothing dropped. The other: what did not fit, dropped and counted.
    assert counts[-1] == (LINES, 0)
    assert counts[0][1] > 0
    assert b" 0 paths cut off as stalled" in serve.stderr.lines[-1]
