"""``serve``: serve a hub until interrupted, fed from standard input or an MCP server.

With ``--stdin`` each line of standard input is published as one
notification (a line too long for a frame, or not a notification, is
reported on standard error and skipped); with ``--mcp-stdio`` or
``--mcp-url`` the bridge relays an MCP server's notifications (the ``mcp``
extra). With ``--redis`` they publish through Redis pub/sub, whose stream
other replicas share (:mod:`.cluster`). SIGINT or SIGTERM ends every open
path cleanly. The token comes from ``--token``, ``--token-file`` or
``DIVERGE_TOKEN`` (:func:`~.parser.resolve_token`); with ``--certfile`` the
server speaks TLS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import ssl
import threading
from collections.abc import Callable
from typing import Any, Final

from ..sansio import Event, FrameError, Hub, Notification
from ..sansio._json import dumps
from ..sansio.lines import DEFAULT_MAX_LINE_SIZE, LineSplitter
from .cluster import redis_problem, replica_for
from .output import event_record, say
from .parser import resolve_token, serve_tls_context
from .running import (
    EXIT_NO_CONNECTION,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    UsageError,
    mcp_available,
    on_signals,
)

__all__ = ["MCP_MISSING_MESSAGE", "run_serve"]

#: What ``serve --mcp-stdio/--mcp-url`` says when the ``mcp`` package is missing.
MCP_MISSING_MESSAGE: Final = (
    "serve --mcp-stdio/--mcp-url need the 'mcp' extra: pip install 'diverge-notifications[mcp]'"
)

#: The longest standard-input line published: one that fills a frame of the default limit.
_MAX_STDIN_LINE: Final = DEFAULT_MAX_LINE_SIZE


def _publish_line(hub: Hub, number: int, line: bytes | None) -> None:
    """Publish one standard-input line, or report on standard error why it was skipped."""
    if line is None:
        say(f"line {number}: longer than {_MAX_STDIN_LINE} bytes, skipped")
        return
    text = line.strip()
    if not text:
        return  # blank lines separate nothing and say nothing
    try:
        notification = Notification.from_bytes(text)
    except FrameError as error:
        say(f"line {number}: {error.detail}, skipped")
        return
    hub.publish(notification)


class _ByteBudget:
    """Bounds the bytes handed from the reading thread to the event loop but not yet published.

    The reader waits while ``limit`` bytes are in flight (one line is always
    let through, however long), so a fast producer on standard input cannot
    pile up work on the loop.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._used = 0
        self._changed = threading.Condition()

    def acquire(self, size: int) -> None:
        with self._changed:
            while self._used and self._used + size > self._limit:
                self._changed.wait()
            self._used += size

    def release(self, size: int) -> None:
        with self._changed:
            self._used -= size
            self._changed.notify_all()


#: Bytes of standard input read ahead of publication at most (beyond one line).
_STDIN_READ_AHEAD: Final = 4 * 1024 * 1024


def _read_stdin(
    loop: asyncio.AbstractEventLoop,
    deliver: Callable[[int, bytes | None], asyncio.Future[None] | None],
) -> None:
    """Read standard input on a thread and hand each line to ``deliver`` on ``loop``.

    The raw descriptor 0 is read, not ``sys.stdin``: a daemon thread blocked
    inside the buffered reader can abort interpreter shutdown. A read error
    counts as the end of input. A line ``deliver`` returns a future for
    (``serve --redis``, waiting for the broker) is read ahead until it is done.
    """
    splitter = LineSplitter(_MAX_STDIN_LINE)
    budget = _ByteBudget(_STDIN_READ_AHEAD)

    def publish(number: int, line: bytes | None, size: int) -> None:
        pending = None
        try:
            pending = deliver(number, line)
        finally:
            if pending is None:
                budget.release(size)
            else:
                pending.add_done_callback(lambda _: budget.release(size))

    while True:
        try:
            data = os.read(0, 65536)
        except InterruptedError:  # pragma: no cover - retried by Python itself
            continue
        except OSError:
            data = b""
        lines = splitter.feed(data) if data else splitter.close()
        for number, line in lines:
            size = len(line) if line is not None else 0
            budget.acquire(size)
            try:
                loop.call_soon_threadsafe(publish, number, line, size)
            except RuntimeError:  # the loop is closed: serve is shutting down
                return
        if not data:
            return


def _report_bridge_event(event: Event) -> None:
    """Say on standard error what the MCP bridge did (connected, subscribed, lost...)."""
    say(f"bridge: {dumps(event_record(event)).decode('utf-8')}")


async def _serve(args: argparse.Namespace, *, token: str | None, tls: ssl.SSLContext | None) -> int:
    from ..adapters.asyncio import serve

    hub = Hub()
    # The TLS context is passed only when there is one (``serve --certfile``).
    tls_options: dict[str, Any] = {} if tls is None else {"ssl": tls}
    replica = replica_for(args, hub)  # serve --redis: a broker feeds the hub (cli/cluster.py)
    try:
        server = await serve(
            hub, args.host, args.port, token=token, keepalive_interval=args.keepalive, **tls_options
        )
    except OSError as error:
        say(f"{PROG} serve: cannot listen on {args.host}:{args.port}: {error}")
        return EXIT_NO_CONNECTION
    except ValueError as error:
        # The server refused an argument up front (such as the token).
        raise UsageError(str(error)) from None
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    status = EXIT_OK
    bridge: asyncio.Task[None] | None = None
    try:
        say(f"serving on {server.url}")
        if replica is not None:
            await replica.start(server)
        source = hub if replica is None else replica.inlet
        if args.stdin:
            deliver = (
                replica.stdin(_publish_line)
                if replica is not None
                else lambda number, line: _publish_line(hub, number, line)
            )
            threading.Thread(
                target=_read_stdin,
                args=(loop, deliver),
                name="serve-stdin",
                daemon=True,
            ).start()
        if args.mcp_stdio is not None or args.mcp_url is not None:
            from ..bridge import run_bridge

            options: dict[str, Any] = {}
            if args.log_level is not None:
                options["log_level"] = args.log_level
            bridge = asyncio.create_task(
                run_bridge(
                    source,
                    stdio_command=args.mcp_stdio,
                    url=args.mcp_url,
                    on_event=_report_bridge_event,
                    **options,
                )
            )
            bridge.add_done_callback(lambda _task: stop.set())
        with on_signals(stop.set):
            await stop.wait()
        if bridge is not None and bridge.done() and not bridge.cancelled():
            failure = bridge.exception()
            # The bridge runs until cancelled: ending on its own means the MCP
            # server is gone and nothing more will be relayed.
            reason = "stopped" if failure is None else f"failed: {failure!r}"
            say(f"{PROG} serve: the MCP bridge {reason}")
            status = EXIT_NO_CONNECTION
    finally:
        if bridge is not None and not bridge.done():
            bridge.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await bridge
        await server.close()
        if replica is not None:
            await replica.close()
    return status


def run_serve(args: argparse.Namespace) -> int:
    """Run ``serve`` with its parsed arguments; return the exit status."""
    if (args.mcp_stdio is not None or args.mcp_url is not None) and not mcp_available():
        say(MCP_MISSING_MESSAGE)
        return EXIT_USAGE
    problem = redis_problem(args)
    if problem is not None:
        say(problem)
        return EXIT_USAGE
    try:
        token = resolve_token(args, listening=False)
        tls = serve_tls_context(args.certfile, args.keyfile)
    except ValueError as error:
        say(f"{PROG} serve: error: {error}")
        return EXIT_USAGE
    try:
        return asyncio.run(_serve(args, token=token, tls=tls))
    except UsageError as error:
        say(f"{PROG} serve: error: {error}")
        return EXIT_USAGE
    except KeyboardInterrupt:  # pragma: no cover - a signal before the handlers were installed
        return EXIT_OK
