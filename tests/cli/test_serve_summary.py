"""``serve``'s summary names what ended without an answer, or failed, beside what was sent."""

from __future__ import annotations

from types import MappingProxyType

from diverge_notifications.cli.serve import _summary
from diverge_notifications.sansio.server.counts import ServerStats


def test_the_summary_counts_handler_failures_abandoned_exchanges_and_expired_asks() -> None:
    stats = ServerStats(
        connections=0,
        open_paths=0,
        asks_served=5,
        paths_served=1,
        exchanges_answered=4,
        refusals=MappingProxyType({503: 7}),
        notifications_sent=10,
        notifications_dropped=0,
        paths_stalled=0,
        handler_failures=2,
        asks_suspended=0,
        paths_suspended=0,
        connections_crowded=6,
        asks_expired=3,
        exchanges_abandoned=1,
    )
    assert _summary(stats) == (
        "served 5 asks (1 paths, 4 exchanges): 10 sent, 0 dropped, 0 paths cut off as stalled, "
        "refusals: 503=7, 2 handler failures, 1 exchanges abandoned by their caller, "
        "3 connections closed at the ask deadline, 6 refused for their address's share"
    )
