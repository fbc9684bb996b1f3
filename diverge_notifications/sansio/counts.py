"""Counts of what the server side did: frozen snapshots and the running totals behind them.

A :class:`~.hub.Hub` counts what it published, ignored, refused, and what
its subscribers sent and dropped, in one :class:`HubTotals` that its
subscribers count into directly, so that the counts of a subscriber that is
gone stay in the totals. :meth:`~.hub.Hub.counts` copies them into a
:class:`HubCounts`.
"""

from __future__ import annotations

import attrs

__all__ = ["HubCounts", "HubTotals"]


@attrs.frozen(kw_only=True)
class HubCounts:
    """What a hub has done, as :meth:`Hub.counts` saw it.

    Every count but ``subscribers`` and ``queued`` is a total since the hub
    was made, subscribers that are gone included.
    """

    #: Subscribers open now.
    subscribers: int
    #: Subscriptions made.
    subscribed: int
    #: Notifications :meth:`Hub.publish` accepted (whether or not they reached anyone).
    published: int
    #: Items :meth:`Hub.publish` ignored because they were not notifications.
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
