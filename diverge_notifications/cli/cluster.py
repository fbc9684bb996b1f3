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
instead (:meth:`Replica.publish`), each line in turn, holding the reading
thread back. The broker's log lines, and the server's counts of asks
refused and paths ended while the hub is suspended (``asks_suspended``,
``paths_suspended`` in its ``stats()``), go to standard error as
``cluster: ...`` lines.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Final

from ..cluster import BrokerError, BrokerUnavailable, OutboxFull
from ..sansio import Hub, Notification
from ..sansio.drivers.reports import PathEnd, PathEndedReport, RefusalReport, ServeReport
from .logs import divert_active
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
        self._server: Server | None = None
        #: The suspension's counts last seen, by what they count.
        self._seen = {"asks not served": 0, "paths ended": 0}
        self._handler = _Say()
        self._handler.setLevel(logging.INFO)

    async def start(self, server: Server) -> None:
        """Connect to Redis; ``server`` serves the hub (its counts are logged)."""
        self._server = server
        if not divert_active():  # else serve's log writes the broker's lines, at its level
            _logger.addHandler(self._handler)
            if _logger.level == logging.NOTSET or _logger.level > logging.INFO:
                _logger.setLevel(logging.INFO)
        await self.broker.start()

    async def close(self) -> None:
        """Stop the broker; log the counts."""
        await self.broker.close()
        stats = self.broker.stats()
        counts = self._server.stats() if self._server is not None else None
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
            counts.asks_suspended if counts is not None else 0,
            counts.paths_suspended if counts is not None else 0,
        )
        _logger.removeHandler(self._handler)

    async def publish(self, notification: Notification) -> None:
        """Publish one notification through the broker, waiting while it cannot take it.

        Standard input's lines go this way (``serve --stdin --redis``):
        raises the broker's :class:`~diverge_notifications.cluster.NotificationTooLarge`
        for one it never takes.
        """
        broker = self.broker
        while True:
            await broker.ready()
            try:
                broker.publish(notification)
            except OutboxFull:
                await asyncio.sleep(_FULL_PAUSE)
            except BrokerUnavailable:
                continue  # lost between ready() and now: wait again
            else:
                return

    def report(self, report: ServeReport) -> None:
        """What the server reports: an ask refused or a path ended while the hub is suspended.

        Each is counted in the server's ``stats()``; the 1st, 2nd, 4th ...
        of each kind is logged with the hub's reason.
        """
        if type(report) is RefusalReport:
            reason = report.reason
        elif type(report) is PathEndedReport and report.how is PathEnd.SUSPENDED:
            reason = report.reason or ""
        else:
            return
        if self._server is None:
            return
        stats = self._server.stats()
        counts = {"asks not served": stats.asks_suspended, "paths ended": stats.paths_suspended}
        for told, count in counts.items():
            if count > self._seen[told]:
                self._seen[told] = count
                if _at_power_of_two(count):
                    _logger.warning(
                        "%s while the hub is suspended: %d so far (%s)", told, count, reason
                    )

    # -- internals ---------------------------------------------------------------

    def _forward(self) -> None:
        # The bridge's notifications, each with its audience: on to the broker
        # now, or refused (the broker counts and logs each refusal).
        for notification, audience in self._inlet.take_addressed():
            with contextlib.suppress(BrokerError):
                self.broker.publish(notification, audience=audience)
