"""Replicas sharing one notification stream: the in-memory bus and the brokers' rules.

The same rules against a real Redis are in ``tests/cluster/test_redis.py``.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from diverge_notifications import sansio
from diverge_notifications.cluster import (
    BrokerError,
    BrokerUnavailable,
    InMemoryBroker,
    InMemoryBus,
    NotificationTooLarge,
    OutboxFull,
)
from diverge_notifications.cluster._core import (
    BrokerCore,
    BrokerOptions,
    BrokerSettings,
    redact_url,
)
from diverge_notifications.sansio import Hub, Notification
from diverge_notifications.sansio.envelope import Envelope, EnvelopeLimits, encode_envelope
from diverge_notifications.sansio.errors import NotificationTooLarge as HubNotificationTooLarge
from diverge_notifications.sansio.server.hub import HubSuspended
from tests.replicas import ODD, numbered, taken

# --- the in-memory bus --------------------------------------------------------------------


def test_every_hub_on_the_bus_gets_everything_once_in_one_order() -> None:
    bus = InMemoryBus()
    hubs = [Hub(), Hub(), Hub()]
    brokers = [InMemoryBroker(hub, bus) for hub in hubs]
    subscribers = [hub.subscribe() for hub in hubs]
    sent: list[bytes] = []
    for i, text in enumerate([*ODD, *(numbered(i) for i in range(20))]):
        assert brokers[i % 3].publish(text)
        sent.append(text)
    for subscriber in subscribers:
        assert taken(subscriber) == sent  # the publisher's own hub too, once
    assert [broker.stats().published for broker in brokers] == [8, 8, 8]
    assert all(broker.stats().received == len(sent) for broker in brokers)
    assert bus.carried == len(sent)


def test_a_publish_made_while_delivering_keeps_one_order() -> None:
    bus = InMemoryBus()
    first, second = Hub(), Hub()
    broker = InMemoryBroker(first, bus)
    InMemoryBroker(second, bus)
    echoed: list[int] = []

    def echo() -> None:  # a writer's wake-up that publishes again
        if not echoed:
            echoed.append(1)
            broker.publish(numbered(2))

    early = first.subscribe(on_ready=echo)
    late = second.subscribe()
    broker.publish(numbered(1))
    assert taken(early) == taken(late) == [numbered(1), numbered(2)]


def test_cutting_the_bus_ends_every_path_and_restoring_it_serves_again() -> None:
    bus = InMemoryBus("bus-7")
    hubs = [Hub(), Hub()]
    brokers = [InMemoryBroker(hub, bus) for hub in hubs]
    subscribers = [hub.subscribe() for hub in hubs]
    brokers[0].publish(numbered(1))
    bus.cut("it was cut")
    for hub, subscriber in zip(hubs, subscribers, strict=True):
        assert subscriber.end_reason == "broker 'bus-7': it was cut"
        assert taken(subscriber) == [numbered(1)]  # what arrived is still written
        with pytest.raises(HubSuspended):
            hub.subscribe()
    with pytest.raises(BrokerUnavailable, match="bus-7"):
        brokers[1].publish(numbered(2))
    bus.restore()
    again = [hub.subscribe() for hub in hubs]
    brokers[1].publish(numbered(3))
    assert [taken(subscriber) for subscriber in again] == [[numbered(3)]] * 2
    stats = brokers[1].stats()
    assert (stats.disconnects, stats.reconnects, stats.unavailable) == (1, 1, 1)


def test_what_is_not_a_notification_is_ignored_and_what_is_too_large_refused() -> None:
    bus = InMemoryBus()
    hub = Hub()
    broker = InMemoryBroker(hub, bus, limits=EnvelopeLimits(max_notification_size=64))
    assert broker.publish(b"[1, 2]") is False
    assert broker.publish(object()) is False
    with pytest.raises(NotificationTooLarge) as caught:
        broker.publish({"method": "x", "params": {"pad": "x" * 64}})
    assert caught.value.limit == 64
    assert broker.stats().too_large == 1 and bus.carried == 0


def test_too_large_for_the_broker_is_the_hubs_refusal_and_a_broker_error() -> None:
    refused = NotificationTooLarge(65, 64)
    assert isinstance(refused, HubNotificationTooLarge)
    assert isinstance(refused, BrokerError) and isinstance(refused, ValueError)
    assert isinstance(refused, sansio.LocalProtocolError)
    assert (refused.size, refused.limit) == (65, 64)
    assert str(refused) == "not published: a notification of 65 bytes is over 64 bytes"


def test_a_closed_broker_leaves_its_hub_suspended() -> None:
    bus = InMemoryBus()
    hub = Hub()
    broker = InMemoryBroker(hub, bus)
    subscriber = hub.subscribe()
    broker.close()
    broker.close()
    assert subscriber.end_reason is not None and "closed" in subscriber.end_reason
    assert hub.suspended is not None and bus.brokers == 0
    with pytest.raises(BrokerUnavailable):
        broker.publish(numbered(1))


def test_an_outbox_that_is_not_emptied_fills_and_says_so() -> None:
    hub = Hub()
    settings = BrokerSettings(outbox_size=2, outbox_bytes=10_000)
    core = BrokerCore(hub, description="broker b", settings=settings)
    core.subscribed()
    assert core.accept(numbered(1)) and core.accept(numbered(2))
    with pytest.raises(OutboxFull, match="outbox is full") as caught:
        core.accept(numbered(3))
    assert (caught.value.size, caught.value.limit) == (2, 2)
    batch = core.next_batch()
    assert batch is not None and batch[1] == 2
    assert core.accept(numbered(3))
    stats = core.stats()
    assert (stats.outbox_full, stats.outbox) == (1, 1)


def test_the_outbox_is_bounded_in_bytes_too_and_batches_are_cut_by_size() -> None:
    hub = Hub()
    settings = BrokerSettings(outbox_bytes=300, max_batch=3, max_batch_bytes=120)
    core = BrokerCore(hub, description="broker b", settings=settings)
    core.subscribed()
    big = b'{"method":"x","params":{"p":"' + b"y" * 230 + b'"}}'
    assert core.accept(big)  # alone, even when larger than what a batch holds
    with pytest.raises(OutboxFull):
        core.accept(big)
    first = core.next_batch()
    assert first is not None and first[1] == 1
    for i in range(5):
        core.accept(numbered(i))
    sizes = []
    while (batch := core.next_batch()) is not None:
        sizes.append(batch[1])
        assert len(batch[0]) <= 120
    assert sum(sizes) == 5 and max(sizes) <= 3


def test_messages_that_are_not_envelopes_are_counted_and_gaps_too() -> None:
    hub = Hub()
    core = BrokerCore(hub, description="broker b", settings=BrokerSettings())
    core.subscribed()
    subscriber = hub.subscribe()
    assert core.received(b"hello") == 0
    one = [Notification.from_bytes(numbered(1))]
    assert core.received(encode_envelope(Envelope(origin="o", sequence=1, notifications=one)))
    assert core.received(encode_envelope(Envelope(origin="o", sequence=5, notifications=one)))
    stats = core.stats()
    assert (stats.rejected, stats.gaps, stats.missing, stats.received) == (1, 1, 3, 2)
    assert len(subscriber) == 2


def test_urls_lose_their_password_in_reasons() -> None:
    assert redact_url("redis://:s3cret@h:1/0") == "redis://:***@h:1/0"
    assert redact_url("rediss://u:s3cret@[::1]:6380") == "rediss://u:***@[::1]:6380"
    assert redact_url("redis://127.0.0.1:6379") == "redis://127.0.0.1:6379"
    assert redact_url("unix:///tmp/r.sock?db=1") == "unix:///tmp/r.sock?db=1"


# --- the settings -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"outbox_size": 0}, ValueError),
        ({"outbox_bytes": -1}, ValueError),
        ({"max_batch": 1.5}, TypeError),
        ({"max_batch_bytes": True}, TypeError),
        ({"max_origins": "8"}, TypeError),
        ({"max_batch": 2000}, ValueError),  # over limits.max_items
        ({"max_batch_bytes": 64 * 1024 * 1024}, ValueError),  # over limits.max_size
        ({"origin": "a b"}, ValueError),
        ({"origin": 7}, TypeError),
        ({"limits": {"max_size": 10}}, TypeError),
    ],
)
def test_bad_settings_are_refused_when_made(
    options: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        BrokerSettings(**options)
    with pytest.raises(error):
        InMemoryBroker(Hub(), InMemoryBus(), **options)


def test_the_keywords_are_the_settings_fields() -> None:
    assert set(BrokerOptions.__annotations__) == {
        field.name for field in attrs.fields(BrokerSettings)
    }


def test_a_broker_takes_its_settings_whole_or_as_keywords_not_both() -> None:
    bus = InMemoryBus()
    settings = BrokerSettings(origin="replica-1", outbox_size=3)
    broker = InMemoryBroker(Hub(), bus, settings=settings)
    assert broker.origin == "replica-1" and broker._core.settings is settings
    assert InMemoryBroker(Hub(), bus, origin="replica-2").origin == "replica-2"
    with pytest.raises(TypeError, match="not both"):
        InMemoryBroker(Hub(), bus, settings=settings, outbox_size=3)
    with pytest.raises(TypeError):
        InMemoryBroker(Hub(), bus, settings={"outbox_size": 3})  # type: ignore[arg-type]


def test_settings_without_an_origin_give_each_broker_a_fresh_one() -> None:
    bus = InMemoryBus()
    settings = BrokerSettings()
    first, second = (InMemoryBroker(Hub(), bus, settings=settings) for _ in range(2))
    assert first.origin != second.origin
