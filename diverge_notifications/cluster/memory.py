"""An in-process stand-in for Redis: replicas in one process, for tests and examples.

An :class:`InMemoryBus` is one channel: every envelope published on it
reaches every attached :class:`InMemoryBroker`, in one order, including the
broker that published it. It carries the very envelopes the Redis brokers
carry (:mod:`diverge_notifications.sansio.envelope`) and follows the same
rules, synchronously: :meth:`InMemoryBroker.publish` returns once every
hub on the bus has the notification. :meth:`InMemoryBus.cut` and
:meth:`InMemoryBus.restore` play Redis going away and coming back.
"""

from __future__ import annotations

import contextlib
from collections import deque
from typing import TYPE_CHECKING, Any

from ..sansio.server.hub import Hub
from ._core import Broker, BrokerCore, BrokerSettings, broker_settings

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._core import BrokerOptions

__all__ = ["InMemoryBroker", "InMemoryBus"]


class InMemoryBus:
    """One in-process channel that :class:`InMemoryBroker` objects share.

    ``name`` names it in the reasons its brokers give. Not thread-safe:
    use it from one thread.
    """

    def __init__(self, name: str = "in-memory bus") -> None:
        self.name = name
        self._brokers: list[InMemoryBroker] = []
        self._up = True
        self._pending: deque[bytes] = deque()
        self._delivering = False
        #: Envelopes carried so far.
        self.carried = 0

    @property
    def up(self) -> bool:
        """False between :meth:`cut` and :meth:`restore`."""
        return self._up

    @property
    def brokers(self) -> int:
        """How many brokers are attached."""
        return len(self._brokers)

    def cut(self, why: str = "connection lost") -> None:
        """Every attached broker loses the bus: its hub is suspended with ``why``.

        Cutting a cut bus does nothing.
        """
        if not self._up:
            return
        self._up = False
        self._pending.clear()
        for broker in list(self._brokers):
            broker._core.lost(why)

    def restore(self) -> None:
        """The bus is back: every attached broker subscribes again (if it was cut)."""
        if self._up:
            return
        self._up = True
        for broker in list(self._brokers):
            broker._core.subscribed()

    def _attach(self, broker: InMemoryBroker) -> None:
        self._brokers.append(broker)
        if self._up:
            broker._core.subscribed()

    def _detach(self, broker: InMemoryBroker) -> None:
        if broker in self._brokers:
            self._brokers.remove(broker)

    def _carry(self, payload: bytes) -> None:
        # A hub's wake-up callback may publish again while an envelope is
        # being delivered: it waits its turn here, so that every broker sees
        # the envelopes in the same order.
        self._pending.append(payload)
        if self._delivering:
            return
        self._delivering = True
        try:
            while self._pending:
                current = self._pending.popleft()
                self.carried += 1
                for broker in list(self._brokers):
                    broker._core.received(current)
        finally:
            self._delivering = False


class InMemoryBroker(Broker):
    """A broker on an :class:`InMemoryBus`: what it publishes reaches every hub on the bus.

    The options are those of every broker: a
    :class:`~diverge_notifications.cluster.BrokerSettings` as ``settings``,
    or its fields as keywords. ``hub_lock`` serialises calls into the hub
    (hold the blocking server's lock).
    """

    def __init__(
        self,
        hub: Hub,
        bus: InMemoryBus,
        *,
        hub_lock: contextlib.AbstractContextManager[Any] | None = None,
        settings: BrokerSettings | None = None,
        **options: Unpack[BrokerOptions],
    ) -> None:
        self.bus = bus
        self._core = BrokerCore(
            hub,
            description=f"broker {bus.name!r}",
            settings=broker_settings(settings, options),
            hub_lock=hub_lock,
        )
        self._closed = False
        bus._attach(self)

    def publish(self, item: object, *, audience: str | None = None) -> bool:
        """Publish ``item`` to every hub on the bus, this one's included, before returning.

        As :meth:`Broker.publish` otherwise (``audience`` goes with it):
        ``BrokerUnavailable`` while the bus is cut or the broker closed.
        """
        if not self._core.accept(item, audience):
            return False
        while True:
            batch = self._core.next_batch()
            if batch is None:
                return True
            payload, count = batch
            self.bus._carry(payload)
            self._core.sent(count)

    def close(self) -> None:
        """Leave the bus; the hub stays suspended. Closing twice is harmless."""
        if not self._closed:
            self._closed = True
            self.bus._detach(self)
            self._core.closed()
