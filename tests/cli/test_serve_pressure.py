"""``serve --stdin`` under pressure: lossless for a listener that reads, refusals reported.

``serve`` runs as a subprocess (tests/interop.py); the listener is the
blocking one, in this process, on a thread. Standard input is written as
fast as the pipe takes it. Every wait has a generous deadline that only
guards against a hang; no test asserts how long anything took.
"""

from __future__ import annotations

import threading
from typing import Final

from diverge_notifications.cli import EXIT_OK, EXIT_USAGE
from diverge_notifications.sansio import NotServed
from tests.adapters.test_pressure import Listening, opened, progress_of
from tests.interop import PATH_END_LINE, ServeProcess, cli_command, run_cli

LINES: Final = 100_000


def line(index: int) -> bytes:
    return b'{"method":"notifications/progress","params":{"progressToken":"in","progress":%d}}' % (
        index
    )


def write_all(serve: ServeProcess, data: bytes) -> threading.Thread:
    """Write ``data`` to serve's standard input on a thread, as fast as the pipe takes it."""

    def write() -> None:
        assert serve.proc.stdin is not None
        serve.proc.stdin.write(data)
        serve.proc.stdin.flush()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    return writer


def test_100000_lines_at_full_speed_reach_a_listener_that_reads_all_in_order() -> None:
    serve = ServeProcess("--stdin")
    with serve:
        listening = opened(serve.url)
        writer = write_all(serve, b"".join(line(index) + b"\n" for index in range(LINES)))
        got = listening.notifications(LINES)
        writer.join()
        assert progress_of(got) == list(range(LINES))
        assert serve.interrupt() == EXIT_OK
        listening.stop()
    ends = [match for text in serve.stderr.messages if (match := PATH_END_LINE.match(text))]
    assert [(m[2], int(m[3]), int(m[4])) for m in ends] == [(b"clean", LINES, 0)]
    summary = serve.stderr.messages[-1]
    assert summary.startswith(b"served 1 asks (1 paths, 0 exchanges): ")
    assert b": %d sent, 0 dropped, 0 paths cut off as stalled" % LINES in summary


def test_lines_too_large_for_a_frame_are_reported_and_the_rest_goes_on() -> None:
    exactly_16_mib = b'{"method":"x/big","params":{"p":"' + b"a" * (16 * 1024 * 1024 - 36) + b'"}}'
    assert len(exactly_16_mib) == 16 * 1024 * 1024  # its frame would be one byte too long
    seventeen_mib = b'{"method":"x/big","params":{"p":"' + b"a" * (17 * 1024 * 1024) + b'"}}'
    serve = ServeProcess("--stdin")
    with serve:
        listening = opened(serve.url)
        data = b"\n".join([line(1), exactly_16_mib, seventeen_mib, line(2)]) + b"\n"
        writer = write_all(serve, data)
        assert progress_of(listening.notifications(2)) == [1, 2]
        writer.join()
        # The server goes on: a new listener gets what comes next.
        second = opened(serve.url)
        serve.send_line(line(3))
        assert progress_of(second.notifications(1)) == [3]
        assert progress_of(listening.notifications(1)) == [3]
        assert serve.interrupt() == EXIT_OK
        second.stop()
        listening.stop()
    reports = [text for text in serve.stderr.messages if text.startswith(b"line ")]
    assert reports == [
        b"line 2: longer than 16777215 bytes, skipped",
        b"line 3: longer than 16777215 bytes, skipped",
    ]


def test_serve_takes_its_limits_on_the_command_line() -> None:
    serve = ServeProcess(
        "--stall-timeout",
        "7.5",
        "--max-connections",
        "1",
        "--queue-size",
        "8",
        "--queue-bytes",
        "4096",
        "--backlog",
        "16",
    )
    with serve:
        first = opened(serve.url)
        second = Listening(serve.url)  # beyond --max-connections 1: 503, asked again later
        refused = second.received.until(lambda item: isinstance(item, NotServed))[-1]
        assert isinstance(refused, NotServed) and refused.status == 503
        assert serve.interrupt() == EXIT_OK
        first.stop()
        second.stop()
    summary = serve.stderr.messages[-1]
    assert b"refusals: 503=" in summary


def test_serve_refuses_limits_that_are_not_positive() -> None:
    for option, value in [
        ("--stall-timeout", "0"),
        ("--max-connections", "0"),
        ("--queue-size", "-1"),
        ("--queue-bytes", "x"),
        ("--backlog", "0"),
    ]:
        result = run_cli(cli_command("serve", option, value))
        assert result.returncode == EXIT_USAGE, (option, value, result.stderr)
