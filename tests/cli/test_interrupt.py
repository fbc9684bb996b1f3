"""Ctrl-C at any moment: every command exits quietly with ``EXIT_INTERRUPTED``.

Each command runs as ``python -X importtime -m diverge_notifications ...``
in a session of its own, and gets SIGINT sent to its process group, as a
terminal's Ctrl-C does, at a moment the process itself marks on standard
error: ``-X importtime`` writes a line as each module is imported, so
"the command line imported", "in the middle of importing the ``mcp``
extra" and "relaying an MCP server that is still starting" are moments of
what the process did, not guesses of how long it takes. No standard error
may hold a traceback, and the status must be the same every time. All the
runs go on at once, so the test takes about as long as its slowest run.

Before the command line's own code runs (Python starting, and importing the
``diverge_notifications`` package itself, a tenth of a second or so),
Python's default applies; that is not tested here.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from diverge_notifications.cli import EXIT_INTERRUPTED
from tests.interop import HANG_GUARD, ROOT, LineReader, cli_env, free_port, kill_if_running

#: After this module's import line, the command line's own code runs.
CLI_IMPORTED = "diverge_notifications.cli"
#: A run: the arguments after ``python -m diverge_notifications``, and the moment to interrupt.
Run = tuple[tuple[str, ...], Callable[[list[bytes]], bool]]


def imported(module: str) -> Callable[[list[bytes]], bool]:
    """The moment ``module`` has been imported (its ``-X importtime`` line)."""
    ending = re.compile(rb"\| +" + re.escape(module.encode()) + rb"$")
    return lambda lines: any(ending.search(line) for line in lines)


def said(text: str) -> Callable[[list[bytes]], bool]:
    """The moment the command has written ``text`` on standard error."""
    return lambda lines: any(text.encode() in line for line in lines)


def interrupted(args: tuple[str, ...], moment: Callable[[list[bytes]], bool]) -> tuple[int, str]:
    """Run the command, send SIGINT to its process group at ``moment``; its status and stderr."""
    process = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "diverge_notifications", *args],
        stdin=subprocess.PIPE,  # serve --stdin waits on it
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=cli_env(),
        cwd=ROOT,
        start_new_session=True,
    )
    assert process.stderr is not None
    stderr = LineReader(process.stderr, "stderr")
    try:
        try:
            stderr.wait(moment)
        except AssertionError:
            raise AssertionError(f"{args}: the moment never came:\n{stderr.text()}") from None
        os.killpg(process.pid, signal.SIGINT)
        status = process.wait(HANG_GUARD)
    finally:
        kill_if_running(process)
        stderr.join()
        assert process.stdin is not None
        process.stdin.close()
    text = "\n".join(
        line.decode("utf-8", "replace")
        for line in stderr.lines
        if not line.startswith(b"import time:")
    )
    return status, text


@contextmanager
def silent_server() -> Iterator[str]:
    """The URL of a port that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_ctrl_c_at_any_moment_is_quiet_and_the_same_status() -> None:
    runs: list[Run] = []
    refusing = f"http://127.0.0.1:{free_port()}"  # nothing listens: listen asks again
    with silent_server() as url:
        for moment in (
            # The core, imported by the command line (the package imports it lazily).
            imported("diverge_notifications.sansio.errors"),
            imported(CLI_IMPORTED),
            imported("diverge_notifications.adapters.asyncio"),
        ):
            runs += [
                (("serve", "--port", "0", "--stdin"), moment),
                (("listen", url), moment),
                (("ask", url, "list-tools"), moment),
                (("demo",), moment),
            ]
        runs += [
            (("serve", "--port", "0", "--stdin"), said("serving on")),
            (("listen", refusing, "--events"), said('"event":"RetryScheduled"')),
        ]
        try:
            import mcp  # noqa: F401
        except ImportError:
            pass
        else:
            example = f"{sys.executable} -m diverge_notifications.examples.mcp_server"
            relay = ("serve", "--port", "0", "--mcp-stdio", example)
            # Start-up: the command line imported, the mcp extra half imported, the
            # MCP server not yet started, then started and relayed.
            for moment in (
                imported(CLI_IMPORTED),
                imported("pydantic"),
                said("serving on"),
                said('"event":"McpConnected"'),
            ):
                runs.append((relay, moment))
        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(lambda run: interrupted(*run), runs))
    for (args, _), (status, stderr) in zip(runs, results, strict=True):
        assert "Traceback" not in stderr, (args, stderr)
        assert status == EXIT_INTERRUPTED, (args, status, stderr)


def test_the_status_of_an_interrupt_is_the_documented_one() -> None:
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert f"| {EXIT_INTERRUPTED} | any command interrupted by Ctrl-C" in text
