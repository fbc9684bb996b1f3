"""``serve``: serve a hub until interrupted, fed from standard input or MCP servers.

With ``--stdin`` each line of standard input is published as one
notification (a line too long for a frame, or not a notification, is
reported on standard error and skipped); with ``--mcp-config``,
``--mcp-stdio`` or ``--mcp-url`` the relay (:mod:`.relay`, the ``mcp``
extra) publishes the MCP servers' notifications and answers the exchanges
of kinds 0-3 by forwarding them. SIGINT or SIGTERM ends every open path
cleanly. The token comes from ``--token``, ``--token-file`` or
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

from ..sansio import FrameError, Hub, Notification
from ..sansio.lines import DEFAULT_MAX_LINE_SIZE, LineSplitter
from .output import say
from .parser import resolve_token, serve_tls_context
from .relay import MCP_MISSING_MESSAGE, RelayFailed, make_relay, relay_stopped, relay_wanted
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
    loop: asyncio.AbstractEventLoop, deliver: Callable[[int, bytes | None], None]
) -> None:
    """Read standard input on a thread and hand each line to ``deliver`` on ``loop``.

    The raw descriptor 0 is read, not ``sys.stdin``: a daemon thread blocked
    inside the buffered reader can abort interpreter shutdown. A read error
    counts as the end of input.
    """
    splitter = LineSplitter(_MAX_STDIN_LINE)
    budget = _ByteBudget(_STDIN_READ_AHEAD)

    def publish(number: int, line: bytes | None, size: int) -> None:
        try:
            deliver(number, line)
        finally:
            budget.release(size)

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


async def _serve(args: argparse.Namespace, *, token: str | None, tls: ssl.SSLContext | None) -> int:
    from ..adapters.asyncio import serve

    hub = Hub()
    # Made before anything listens: a server that cannot be relayed costs no port.
    relay = make_relay(args, hub)
    # The TLS context is passed only when there is one (``serve --certfile``).
    tls_options: dict[str, Any] = {} if tls is None else {"ssl": tls}
    try:
        server = await serve(
            hub,
            args.host,
            args.port,
            token=token,
            keepalive_interval=args.keepalive,
            exchange_handler=None if relay is None else relay.handle_exchange,
            **tls_options,
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
        if args.stdin:
            threading.Thread(
                target=_read_stdin,
                args=(loop, lambda number, line: _publish_line(hub, number, line)),
                name="serve-stdin",
                daemon=True,
            ).start()
        if relay is not None:
            bridge = asyncio.create_task(relay.run())
            bridge.add_done_callback(lambda _task: stop.set())
        with on_signals(stop.set):
            await stop.wait()
        if bridge is not None and bridge.done() and not bridge.cancelled():
            say(relay_stopped(bridge))
            status = EXIT_NO_CONNECTION
    finally:
        if bridge is not None and not bridge.done():
            bridge.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await bridge
        await server.close()
    return status


def run_serve(args: argparse.Namespace) -> int:
    """Run ``serve`` with its parsed arguments; return the exit status."""
    if relay_wanted(args) and not mcp_available():
        say(MCP_MISSING_MESSAGE)
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
    except RelayFailed as error:
        say(f"{PROG} serve: {error}")
        return EXIT_NO_CONNECTION
    except KeyboardInterrupt:  # pragma: no cover - a signal before the handlers were installed
        return EXIT_OK
