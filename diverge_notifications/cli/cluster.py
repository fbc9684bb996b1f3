"""``serve --redis URL [--redis-channel NAME]``: replicas that share one stream through Redis.

With ``--redis`` the served hub is fed by a
:class:`~diverge_notifications.cluster.RedisBroker` (docs/cluster.md): the
sources publish through the broker, and the hub gets only what comes back
from Redis, this replica's own notifications included, so that every
listener of every replica sees one order. While the broker is not
subscribed the hub is suspended: open paths end with a reason naming the
broker and asks are answered ``503`` until it has subscribed again.

The sources publish into an inlet :class:`~diverge_notifications.sansio.Hub`
whose one subscriber hands everything to the broker, so that they need not
know about it: the MCP bridge's notifications are refused while the broker
is not subscribed (counted and logged by the broker); standard input waits
instead, each line in turn, holding the reading thread back. The broker's
log lines, and the server's counts of asks refused and paths ended, go to
standard error as ``cluster: ...`` lines.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from ..cluster import BrokerError, BrokerUnavailable, NotificationTooLarge, OutboxFull
from ..sansio import Hub
from .output import say
from .running import PROG, UsageError

if TYPE_CHECKING:
    from ..adapters.asyncio import Server
    from ..cluster import RedisBroker

__all__ = ["REDIS_MISSING_MESSAGE", "Replica", "redis_problem", "replica_for"]

#: What ``serve --redis`` says when redis-py is missing.
REDIS_MISSING_MESSAGE: Final = (
    "serve --redis needs the 'redis' extra: pip install 'diverge-notifications[redis]'"
)
#: Seconds standard input waits when the outbox is full by its bytes (``ready()``
#: waits for room by count only).
_FULL_PAUSE: Final = 0.05

_logger = logging.getLogger("diverge_notifications.cluster")

#: One standard-input line handed over: its number, its bytes (``None``: too long).
_Publish = Callable[[Hub, int, "bytes | None"], None]


def redis_problem(args: argparse.Namespace) -> str | None:
    """The line ``serve`` says when its ``--redis`` options cannot be used (exit 2), or ``None``."""
    if args.redis is None:
        if args.redis_channel is not None:
            return f"{PROG} serve: error: --redis-channel needs --redis"
        return None
    try:
        import redis  # noqa: F401
    except ImportError:
        return REDIS_MISSING_MESSAGE
    return None


def replica_for(args: argparse.Namespace, hub: Hub) -> Replica | None:
    """The replica ``serve --redis`` makes of ``hub`` (suspended from now on), or ``None``.

    Raises :class:`UsageError` for a URL or channel the broker refuses.
    """
    if args.redis is None:
        return None
    from ..cluster import DEFAULT_CHANNEL, RedisBroker

    channel = args.redis_channel if args.redis_channel is not None else DEFAULT_CHANNEL
    try:
        broker = RedisBroker(hub, args.redis, channel)
    except (ValueError, TypeError) as error:
        raise UsageError(f"--redis: {error}") from None
    return Replica(broker)


class _Say(logging.Handler):
    """The cluster's log lines on standard error, as ``cluster: ...``."""

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            say(f"cluster: {record.getMessage()}")


def _at_power_of_two(count: int) -> bool:
    return count & (count - 1) == 0


class Replica:
    """The broker of one ``serve --redis``, and the inlet hub its sources publish into."""

    def __init__(self, broker: RedisBroker) -> None:
        self.broker = broker
        #: What the sources publish into: each notification goes on to the broker.
        self.inlet = Hub()
        self._inlet = self.inlet.subscribe(on_ready=self._forward)
        self._lines: deque[tuple[int, bytes | None, asyncio.Future[None]]] = deque()
        self._more = asyncio.Event()
        self._stdin: asyncio.Task[None] | None = None
        self._publish_line: _Publish | None = None
        self._server: Server | None = None
        self._handler = _Say()
        self._handler.setLevel(logging.INFO)

    async def start(self, server: Server) -> None:
        """Connect to Redis; ``server`` serves the hub (its counts are logged)."""
        self._server = server
        server.suspension.on_count = self._count
        _logger.addHandler(self._handler)
        if _logger.level == logging.NOTSET or _logger.level > logging.INFO:
            _logger.setLevel(logging.INFO)
        await self.broker.start()

    async def close(self) -> None:
        """Stop standard input's publishing and the broker; log the counts."""
        if self._stdin is not None:
            self._stdin.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stdin
        await self.broker.close()
        stats = self.broker.stats()
        counts = self._server.suspension if self._server is not None else None
        _logger.info(
            "counts: published %d, received %d, lost %d, gaps %d (%d missing), disconnects %d, "
            "reconnects %d; asks not served %d, paths ended %d",
            stats.published,
            stats.received,
            stats.lost,
            stats.gaps,
            stats.missing,
            stats.disconnects,
            stats.reconnects,
            counts.refused if counts is not None else 0,
            counts.ended if counts is not None else 0,
        )
        _logger.removeHandler(self._handler)

    def stdin(self, publish_line: _Publish) -> Callable[[int, bytes | None], asyncio.Future[None]]:
        """What standard input's reader hands each line to: published in turn, waiting.

        ``publish_line(hub, number, line)`` parses the line and publishes it
        (or says why not); the returned future is done once the line was
        taken by the broker or skipped.
        """
        self._publish_line = publish_line
        self._stdin = asyncio.get_running_loop().create_task(self._publish_stdin())

        def deliver(number: int, line: bytes | None) -> asyncio.Future[None]:
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._lines.append((number, line, done))
            self._more.set()
            return done

        return deliver

    # -- internals ---------------------------------------------------------------

    def _forward(self) -> None:
        # The bridge's notifications: on to the broker now, or refused (the
        # broker counts and logs each refusal).
        for notification in self._inlet.take():
            with contextlib.suppress(BrokerError):
                self.broker.publish(notification)

    async def _publish_stdin(self) -> None:
        assert self._publish_line is not None
        # Lines are parsed into a hub of their own, which nothing else feeds.
        lines = Hub()
        taken = lines.subscribe()
        while True:
            while not self._lines:
                self._more.clear()
                await self._more.wait()
            number, line, done = self._lines.popleft()
            try:
                self._publish_line(lines, number, line)
                for notification in taken.take():
                    await self._publish_waiting(number, notification)
            except Exception as error:  # one line's trouble stops no other line
                say(f"line {number}: not published: {error}")
            finally:
                if not done.done():
                    done.set_result(None)

    async def _publish_waiting(self, number: int, notification: object) -> None:
        """Publish one line's notification, waiting while the broker cannot take it."""
        broker = self.broker
        while True:
            await broker.ready()
            try:
                broker.publish(notification)
            except NotificationTooLarge as error:
                say(f"line {number}: {error}, skipped")
                return
            except OutboxFull:
                await asyncio.sleep(_FULL_PAUSE)
            except BrokerUnavailable:
                continue  # lost between ready() and now: wait again
            else:
                return

    def _count(self, what: str, count: int, reason: str) -> None:
        if _at_power_of_two(count):
            told = "asks not served" if what == "refused" else "paths ended"
            _logger.warning("%s while the hub is suspended: %d so far (%s)", told, count, reason)
