"""Counts of what the server side did: frozen snapshots and the running totals behind them.

A :class:`~.hub.Hub` counts what it published, ignored, refused, and what
its subscribers sent and dropped, in one :class:`HubTotals` that its
subscribers count into directly, so that the counts of a subscriber that is
gone stay in the totals. :meth:`~.hub.Hub.counts` copies them into a
:class:`HubCounts`. A server's connections count into one
:class:`ServingTotals` the same way; ``Server.stats()`` gives its
:class:`ServerStats`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from .subscriber import Subscriber

__all__ = ["HubCounts", "HubTotals", "ServerStats", "ServingTotals"]


@attrs.frozen(kw_only=True)
class HubCounts:
    """What a hub has done, as :meth:`~.hub.Hub.counts` saw it.

    Every count but ``subscribers`` and ``queued`` is a total since the hub
    was made, subscribers that are gone included.
    """

    #: Subscribers open now.
    subscribers: int
    #: Subscriptions made.
    subscribed: int
    #: Notifications :meth:`~.hub.Hub.publish` accepted (whether or not they reached anyone).
    published: int
    #: Items :meth:`~.hub.Hub.publish` ignored because they were not notifications
    #: (JSON-RPC requests and responses, which carry an ``"id"``, included).
    ignored: int
    #: Notifications refused as too large (:class:`NotificationTooLarge`).
    refused: int
    #: Notifications taken out of queues by the paths' writers.
    sent: int
    #: Notifications that reached a subscriber and will never be sent (queue full, or closed).
    dropped: int
    #: Notifications queued now, over every open subscriber.
    queued: int


class HubTotals:
    """A hub's running counts, shared with its subscribers (they count into it directly)."""

    __slots__ = ("dropped", "ignored", "published", "refused", "sent", "subscribed")

    def __init__(self) -> None:
        self.subscribed = 0
        self.published = 0
        self.ignored = 0
        self.refused = 0
        self.sent = 0
        self.dropped = 0


@attrs.frozen(kw_only=True)
class ServerStats:
    """What a server has done, as ``Server.stats()`` saw it (a frozen snapshot).

    ``connections`` and ``open_paths`` are now; every other count is a total
    since the server started, connections and paths that ended included.
    """

    #: Connections open now that are being served (not those refused as busy).
    connections: int
    #: Notification paths open now.
    open_paths: int
    #: Asks answered: notification paths opened plus exchanges answered.
    asks_served: int
    #: Notification paths opened.
    paths_served: int
    #: Exchanges (kinds 0-3) answered, declines and internal errors included.
    exchanges_answered: int
    #: Asks refused, by HTTP status (``503`` counts the connections over
    #: ``max_connections`` and the asks refused while the hub is suspended).
    refusals: Mapping[int, int]
    #: Notifications written to paths.
    notifications_sent: int
    #: Notifications that reached a path and were not sent (queue full, or freed at its end).
    notifications_dropped: int
    #: Paths cut off because their peer took nothing for ``stall_timeout`` while output waited.
    paths_stalled: int
    #: Exchange handlers that raised or ran past ``exchange_timeout``.
    handler_failures: int
    #: Notification asks answered ``503`` because the hub was suspended (its broker lost).
    asks_suspended: int
    #: Paths the hub ended with its reason when it was suspended (its broker lost).
    paths_suspended: int
    #: Connections refused (``503``) because their address held its share of
    #: ``max_connections`` (see :mod:`.admission`); also in ``refusals``.
    connections_crowded: int = 0
    #: Connections closed without an answer because their ask was not complete
    #: within ``ask_timeout``.
    asks_expired: int = 0
    #: Exchanges whose caller closed the connection before the answer (nobody answered).
    exchanges_abandoned: int = 0
    #: Paths ended, by how (``clean``, ``peer_closed``, ``stalled``, ``lost``,
    #: ``suspended``: the names of ``PathEnd``, in lower case).
    paths_ended: Mapping[str, int] = attrs.field(factory=dict)
    #: Connections whose TLS handshake failed (or did not finish within ``ask_timeout``).
    tls_failures: int = 0


class ServingTotals:
    """The running counts of one server's connections, which they count into directly.

    One per server (its ``ServeSettings`` holds it). Open paths are kept by
    their subscriber, so that a snapshot adds what they sent and dropped so
    far to the totals of the paths that ended.
    """

    __slots__ = (
        "abandoned",
        "connections",
        "crowded",
        "dropped",
        "ended",
        "exchanges_answered",
        "expired",
        "handler_failures",
        "paths",
        "paths_served",
        "refusals",
        "sent",
        "stalled",
        "suspended_asks",
        "suspended_paths",
        "tls_failures",
    )

    def __init__(self) -> None:
        self.connections = 0
        self.paths_served = 0
        self.exchanges_answered = 0
        self.refusals: dict[int, int] = {}
        self.sent = 0
        self.dropped = 0
        self.stalled = 0
        self.handler_failures = 0
        self.suspended_asks = 0
        self.suspended_paths = 0
        self.crowded = 0
        self.expired = 0
        self.abandoned = 0
        self.tls_failures = 0
        self.ended: dict[str, int] = {}
        self.paths: dict[Subscriber, None] = {}

    def path_opened(self, subscriber: Subscriber) -> None:
        """A path subscribed with ``subscriber``."""
        self.paths_served += 1
        self.paths[subscriber] = None

    def path_ended(self, subscriber: Subscriber, how: str) -> None:
        """The path of ``subscriber`` ended ``how``: its counts join the totals.

        ``how`` names the end (``clean``, ``peer_closed``, ...); the subscriber is closed.
        """
        if subscriber in self.paths:
            del self.paths[subscriber]
            self.ended[how] = self.ended.get(how, 0) + 1
            self.sent += subscriber.sent
            self.dropped += subscriber.dropped

    def refused(self, status: int) -> None:
        """An ask was refused with ``status``."""
        self.refusals[status] = self.refusals.get(status, 0) + 1

    def snapshot(self) -> ServerStats:
        """The counts now, as a :class:`ServerStats`."""
        paths = list(self.paths)
        return ServerStats(
            connections=self.connections,
            open_paths=len(paths),
            asks_served=self.paths_served + self.exchanges_answered,
            paths_served=self.paths_served,
            exchanges_answered=self.exchanges_answered,
            refusals=MappingProxyType(dict(sorted(self.refusals.items()))),
            notifications_sent=self.sent + sum(path.sent for path in paths),
            notifications_dropped=self.dropped + sum(path.dropped for path in paths),
            paths_stalled=self.stalled,
            handler_failures=self.handler_failures,
            asks_suspended=self.suspended_asks,
            paths_suspended=self.suspended_paths,
            connections_crowded=self.crowded,
            asks_expired=self.expired,
            exchanges_abandoned=self.abandoned,
            paths_ended=MappingProxyType(dict(sorted(self.ended.items()))),
            tls_failures=self.tls_failures,
        )
