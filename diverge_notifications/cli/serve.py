"""``serve``: serve a hub until interrupted, fed from standard input or MCP servers.

With ``--stdin`` each line of standard input is published as one
notification (a line too long for a frame, or not a notification, is
reported on standard error and skipped). Standard input waits for the
paths: while a path that is not stalled has a full queue, no more is read,
so every listener that keeps reading gets every line (a stalled one is cut
off after ``--stall-timeout``). With ``--mcp-config``, ``--mcp-stdio`` or
``--mcp-url`` the relay (:mod:`.relay`, the ``mcp`` extra) publishes the MCP
servers' notifications and answers the exchanges of kinds 0-3 by forwarding
them. With ``--redis`` every source publishes through Redis pub/sub, whose
stream other replicas share (:mod:`.cluster`); standard input then waits for
the broker instead. SIGINT or SIGTERM ends every open path cleanly. Standard
error is the log (:mod:`.logs`: timestamped lines, ``--log-format json``, ``-v``/``-q``):
each path's end is one line, ``path <channel> ended (<how>): <sent> sent,
<dropped> dropped (peer <address>)``, each refusal one line naming the peer,
and the server's counts are the last line. Serving on an address that is
not loopback without a token, or without TLS, is warned of first.
``--metrics HOST:PORT`` serves ``GET /metrics`` there
(:mod:`~diverge_notifications.metrics`, the ``metrics`` extra).
The token comes from ``--token``, ``--token-file`` or ``DIVERGE_TOKEN``
(:func:`~.parser.resolve_serve_tokens`; the file may list several, each
accepted, each path hearing the progress of its own token's calls only);
with ``--certfile`` the server speaks TLS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import ssl
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

from ..sansio import FrameError, Hub, Interest, LogLevel, Notification
from ..sansio.client.urls import format_url, is_loopback
from ..sansio.drivers.reports import ServeReport
from ..sansio.lines import DEFAULT_MAX_LINE_SIZE, LineSplitter
from ..sansio.mcp.json import parse
from ..sansio.server.counts import ServerStats
from ..sansio.server.hub import NotificationTooLarge, is_request
from .cluster import Replica, redis_problem, replica_for
from .logs import COMMAND_LOGGER, serve_log
from .output import say
from .parser import LIST_CHANGED_KINDS, NO_LOG_LEVEL, resolve_serve_tokens, serve_tls_context
from .relay import MCP_MISSING_MESSAGE, RelayFailed, make_relay, relay_stopped, relay_wanted
from .running import (
    EXIT_NO_CONNECTION,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    UsageError,
    interrupted,
    mcp_available,
    on_signals,
)

if TYPE_CHECKING:
    from ..bridge import McpRelay

__all__ = ["MCP_MISSING_MESSAGE", "METRICS_MISSING_MESSAGE", "exposure_warnings", "run_serve"]

#: The longest standard-input line published: one that fills a frame of the default limit.
_MAX_STDIN_LINE: Final = DEFAULT_MAX_LINE_SIZE


def _parse_line(number: int, line: bytes | None) -> Notification | None:
    """One standard-input line as a notification, or ``None`` (said on standard error why)."""
    if line is None:
        say(f"line {number}: longer than {_MAX_STDIN_LINE} bytes, skipped")
        return None
    text = line.strip()
    if not text:
        return None  # blank lines separate nothing and say nothing
    try:
        notification = Notification.from_bytes(text)
    except FrameError as error:
        if _is_response(text):
            say(f'line {number}: a JSON-RPC response (it has an "id"), not a notification; skipped')
        else:
            say(f"line {number}: {error.detail}, skipped")
        return None
    if is_request(notification):
        say(f'line {number}: a JSON-RPC request (it has an "id"), not a notification; skipped')
        return None
    return notification


def _is_response(text: bytes) -> bool:
    """Whether a line that is not a notification is a JSON-RPC response (an ``"id"``, no method)."""
    try:
        message = parse(text)
    except ValueError:
        return False
    return isinstance(message, dict) and "id" in message and "method" not in message


def _interest(args: argparse.Namespace) -> Interest | None:
    """What every path carries: ``--log-level``, ``--list-changed`` and ``--resource``.

    ``None`` (everything, the hub's fastest route) when none of them narrows anything.
    """
    kinds: frozenset[str] = args.list_changed
    level = None if args.log_level == NO_LOG_LEVEL else LogLevel.from_wire(args.log_level)
    every_kind = kinds == frozenset(LIST_CHANGED_KINDS)
    if level is LogLevel.DEBUG and every_kind and not args.mcp_resource:
        return None
    return Interest(
        resource_subscriptions=frozenset(args.mcp_resource or ()),
        all_resources=not args.mcp_resource,
        tools_list_changed="tools" in kinds,
        prompts_list_changed="prompts" in kinds,
        resources_list_changed="resources" in kinds,
        log_level=level,
    )


#: Lines read from standard input in one read, with the bytes they hold.
_Lines = tuple[list[tuple[int, bytes | None]], int]


#: Publishes one notification, waiting for room (``server.publish(..., wait=True)``, or
#: the broker's with ``--redis``).
_Publish = Callable[[Notification], Awaitable[object]]


async def _publish_lines(
    publish: _Publish, lines: asyncio.Queue[_Lines | None], budget: _Budget
) -> None:
    """Publish what the reading thread hands over, waiting for room: no listener that reads loses.

    After each read's worth of lines the paths get a turn: the source never
    starves the writers it feeds.
    """
    while (batch := await lines.get()) is not None:
        numbered, size = batch
        try:
            for number, line in numbered:
                notification = _parse_line(number, line)
                if notification is None:
                    continue
                try:
                    await publish(notification)
                except NotificationTooLarge as error:  # the hub's, or a broker's (a subclass)
                    say(f"line {number}: {error}, skipped")
        finally:
            budget.release(size)
        await asyncio.sleep(0)


class _Budget:
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


def _read_stdin(loop: asyncio.AbstractEventLoop, lines: asyncio.Queue[_Lines | None]) -> _Budget:
    """Read standard input on a thread, handing each read's lines to ``lines`` on ``loop``.

    The raw descriptor 0 is read, not ``sys.stdin``: a daemon thread blocked
    inside the buffered reader can abort interpreter shutdown. A read error
    counts as the end of input. The thread stops reading while
    ``_STDIN_READ_AHEAD`` bytes are handed over and not yet published, so
    that a publisher waiting for room holds standard input up.
    """
    splitter = LineSplitter(_MAX_STDIN_LINE)
    budget = _Budget(_STDIN_READ_AHEAD)

    def read() -> None:
        while True:
            try:
                data = os.read(0, 65536)
            except InterruptedError:  # pragma: no cover - retried by Python itself
                continue
            except OSError:
                data = b""
            numbered = splitter.feed(data) if data else splitter.close()
            if numbered:
                size = sum(len(line) for _, line in numbered if line is not None)
                budget.acquire(size)
                try:
                    loop.call_soon_threadsafe(lines.put_nowait, (numbered, size))
                except RuntimeError:  # the loop is closed: serve is shutting down
                    return
            if not data:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(lines.put_nowait, None)
                return

    threading.Thread(target=read, name="serve-stdin", daemon=True).start()
    return budget


# --- what an operator sees: warnings and metrics -------------------------------------

#: What ``serve --metrics`` says when prometheus_client is missing.
METRICS_MISSING_MESSAGE: Final = (
    "serve --metrics needs the 'metrics' extra: pip install 'diverge-notifications[metrics]'"
)


def _metrics_problem(args: argparse.Namespace) -> str | None:
    """The line ``serve`` says when ``--metrics`` cannot be served (exit 2), or ``None``."""
    if args.metrics is None:
        return None
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return METRICS_MISSING_MESSAGE
    return None


def exposure_warnings(host: str, *, token: str | None, tls: bool) -> list[str]:
    """What serving on ``host`` leaves open: a line for a missing token, one for missing TLS.

    Nothing on a loopback address, which only this machine reaches.
    """
    if is_loopback(host):
        return []
    where = f"listening on {host or 'every address'}, which is not a loopback address,"
    warnings = []
    if token is None:
        warnings.append(
            f"{where} without a token: anyone who reaches it is served "
            "(give --token-file or $DIVERGE_TOKEN)"
        )
    if not tls:
        warnings.append(
            f"{where} without TLS: asks, tokens and notifications cross the network "
            "in cleartext (give --certfile, or terminate TLS in front of it)"
        )
    return warnings


async def _serve_metrics(
    args: argparse.Namespace, server: Any, replica: Replica | None, relay: McpRelay | None
) -> asyncio.Server | None:
    """``--metrics``: the server's metrics on their own address, served on this loop."""
    if args.metrics is None:
        return None
    from prometheus_client import CollectorRegistry

    from ..metrics import ServerCollector, serve_metrics

    registry = CollectorRegistry()
    broker = replica.broker if replica is not None else None
    registry.register(ServerCollector(server, broker=broker, relay=relay))
    host, port = args.metrics
    metrics = await serve_metrics(registry, host, port)
    name = metrics.sockets[0].getsockname()
    say(f"metrics on {format_url(str(name[0]), int(name[1]), tls=False)}/metrics")
    return metrics


def _summary(stats: ServerStats) -> str:
    """The last line ``serve`` prints: what the server did, in all."""
    refusals = " ".join(f"{status}={count}" for status, count in stats.refusals.items())
    return (
        f"served {stats.asks_served} asks ({stats.paths_served} paths, "
        f"{stats.exchanges_answered} exchanges): {stats.notifications_sent} sent, "
        f"{stats.notifications_dropped} dropped, {stats.paths_stalled} paths cut off as "
        f"stalled, refusals: {refusals or 'none'}{_unseen(stats)}"
    )


def _unseen(stats: ServerStats) -> str:
    """The summary's counts of what ended without an answer or failed: what no path line says."""
    return (
        f", {stats.handler_failures} handler failures, {stats.exchanges_abandoned} exchanges "
        f"abandoned by their caller, {stats.asks_expired} connections closed at the ask "
        f"deadline, {stats.connections_crowded} refused for their address's share"
    )


async def _serve(
    args: argparse.Namespace, *, tokens: list[str] | None, tls: ssl.SSLContext | None
) -> int:
    from ..adapters.asyncio import serve

    hub = Hub(queue_size=args.queue_size, queue_bytes=args.queue_bytes)
    # The TLS context is passed only when there is one (``serve --certfile``).
    tls_options: dict[str, Any] = {} if tls is None else {"ssl": tls}
    replica = replica_for(args, hub)  # serve --redis: a broker feeds the hub (cli/cluster.py)
    # What the sources publish into: the hub, or with --redis the broker's inlet.
    source = hub if replica is None else replica.inlet
    # Made before anything listens: a server that cannot be relayed costs no port.
    relay = make_relay(args, source, hub)

    def on_report(report: ServeReport) -> None:
        if replica is not None:
            replica.report(report)

    try:
        server = await serve(
            hub,
            args.host,
            args.port,
            tokens=tokens,
            keepalive_interval=args.keepalive,
            exchange_handler=None if relay is None else relay.handle_exchange,
            stall_timeout=args.stall_timeout,
            max_connections=args.max_connections,
            address_share=args.address_share,
            slow_after=args.slow_after,
            backlog=args.backlog,
            on_report=on_report,
            interest=_interest(args),
            # A forwarded call may take --exchange-timeout, not the handlers' default 30 s.
            exchange_timeout=args.exchange_timeout,
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
    feeding: asyncio.Task[None] | None = None
    metrics: asyncio.Server | None = None
    try:
        token = tokens[0] if tokens else None
        for warning in exposure_warnings(args.host, token=token, tls=tls is not None):
            logging.getLogger(COMMAND_LOGGER).warning("%s", warning)
        try:
            metrics = await _serve_metrics(args, server, replica, relay)
        except OSError as error:
            host, port = args.metrics
            where = format_url(host, port, tls=False)
            say(f"{PROG} serve: cannot serve metrics on {where}: {error}")
            return EXIT_NO_CONNECTION
        say(f"serving on {server.url}")
        if replica is not None:
            await replica.start(server)
        if args.stdin:
            lines: asyncio.Queue[_Lines | None] = asyncio.Queue()
            budget = _read_stdin(loop, lines)
            # With --redis a line waits for the broker, else for the paths' room.
            publish: _Publish = (
                replica.publish
                if replica is not None
                else lambda notification: server.publish(notification, wait=True)
            )
            feeding = asyncio.create_task(_publish_lines(publish, lines, budget))
        if relay is not None:
            bridge = asyncio.create_task(relay.run(stop_when_one_is_gone=True))
            bridge.add_done_callback(lambda _task: stop.set())
        with on_signals(stop.set):
            await stop.wait()
        if bridge is not None and bridge.done() and not bridge.cancelled():
            say(relay_stopped(bridge))
            status = EXIT_NO_CONNECTION
    finally:
        for task in (bridge, feeding):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if metrics is not None:
            metrics.close()
        await server.close()
        if replica is not None:
            await replica.close()
        say(_summary(server.stats()))
    return status


def run_serve(args: argparse.Namespace) -> int:
    """Run ``serve`` with its parsed arguments; return the exit status.

    Once its options are found usable, everything it writes on standard
    error is its log (:mod:`.logs`); a usage error before is one plain line,
    as the parser's own are.
    """
    if relay_wanted(args) and not mcp_available():
        say(MCP_MISSING_MESSAGE)
        return EXIT_USAGE
    problem = redis_problem(args) or _metrics_problem(args)
    if problem is not None:
        say(problem)
        return EXIT_USAGE
    try:
        tokens = resolve_serve_tokens(args)
        tls = serve_tls_context(args.certfile, args.keyfile)
    except ValueError as error:
        say(f"{PROG} serve: error: {error}")
        return EXIT_USAGE
    with serve_log(args.log_format, args.verbose, args.quiet):
        return _run(args, tokens=tokens, tls=tls)


def _run(args: argparse.Namespace, *, tokens: list[str] | None, tls: ssl.SSLContext | None) -> int:
    try:
        return asyncio.run(_serve(args, tokens=tokens, tls=tls))
    except UsageError as error:
        say(f"{PROG} serve: error: {error}")
        return EXIT_USAGE
    except RelayFailed as error:
        say(f"{PROG} serve: {error}")
        return EXIT_NO_CONNECTION
    except KeyboardInterrupt:  # a signal before the handlers were installed
        return interrupted()
