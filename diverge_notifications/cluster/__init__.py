"""Past one process: replicas that share one notification stream through a broker.

Every replica holds a :class:`~diverge_notifications.sansio.Hub` and a
broker. What a replica publishes goes to the broker (Redis pub/sub), and
each replica's hub gets only what comes back from it, the publisher's own
included, so every listener on every replica sees one order, byte for
byte. When a replica loses the broker its hub is suspended: the open paths
end with a reason naming the broker, and new asks are not served until it
has subscribed again. See ``docs/cluster.md``.

* :class:`RedisBroker` (asyncio) and :class:`BlockingRedisBroker` (threads)
  need the ``redis`` extra (``pip install 'diverge-notifications[redis]'``;
  ``hiredis`` is used when installed) and are imported on first use;
* :class:`InMemoryBroker` on an :class:`InMemoryBus` plays the same part
  inside one process, for tests and examples.

The options every broker has (its origin, its outbox, its envelopes) are a
:class:`BrokerSettings`, given whole as ``settings=`` or field by field as
keywords.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._core import (
    DEFAULT_CHANNEL,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_BATCH_BYTES,
    DEFAULT_OUTBOX_BYTES,
    DEFAULT_OUTBOX_SIZE,
    Broker,
    BrokerError,
    BrokerSettings,
    BrokerStats,
    BrokerUnavailable,
    NotificationTooLarge,
    OutboxFull,
)
from .memory import InMemoryBroker, InMemoryBus

if TYPE_CHECKING:
    from .asyncio import RedisBroker
    from .blocking import BlockingRedisBroker

__all__ = [
    "DEFAULT_CHANNEL",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_BATCH_BYTES",
    "DEFAULT_OUTBOX_BYTES",
    "DEFAULT_OUTBOX_SIZE",
    "BlockingRedisBroker",
    "Broker",
    "BrokerError",
    "BrokerSettings",
    "BrokerStats",
    "BrokerUnavailable",
    "InMemoryBroker",
    "InMemoryBus",
    "NotificationTooLarge",
    "OutboxFull",
    "RedisBroker",
]


def __getattr__(name: str) -> object:
    # The Redis brokers import redis-py: only when asked for, so that the
    # in-memory broker works without the extra.
    if name == "RedisBroker":
        from .asyncio import RedisBroker

        return RedisBroker
    if name == "BlockingRedisBroker":
        from .blocking import BlockingRedisBroker

        return BlockingRedisBroker
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
