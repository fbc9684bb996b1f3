"""The hub: fan-out, bounded queues, filters and no replay.

The filters follow the MCP server library's notifications page.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio import LogLevel, Notification, NotificationKind
from diverge_notifications.sansio.server.hub import Hub, Interest, Subscriber, as_notification
from tests.strategies import notifications


def log(level: str, data: Any = "x") -> Notification:
    return Notification("notifications/message", {"level": level, "data": data})


def updated(uri: str) -> Notification:
    return Notification("notifications/resources/updated", {"uri": uri})


RESOURCES_CHANGED = Notification("notifications/resources/list_changed")
TOOLS_CHANGED = Notification("notifications/tools/list_changed")
PROMPTS_CHANGED = Notification("notifications/prompts/list_changed")
PROGRESS = Notification("notifications/progress", {"progressToken": "t", "progress": 1})
FLAG_INTERESTS = {
    "resources_list_changed": Interest(resources_list_changed=True),
    "tools_list_changed": Interest(tools_list_changed=True),
    "prompts_list_changed": Interest(prompts_list_changed=True),
}


# --- fan-out --------------------------------------------------------------------------------------


def test_every_open_subscriber_gets_a_published_notification() -> None:
    hub = Hub()
    first, second = hub.subscribe(), hub.subscribe()
    assert hub.subscribers == 2
    assert hub.publish(PROGRESS) == 2
    assert first.take() == [PROGRESS]
    assert second.take() == [PROGRESS]
    assert first.take() == []


def test_order_is_kept_per_subscriber() -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    sent = [log("info", n) for n in range(50)]
    for notification in sent:
        hub.publish(notification)
    assert len(subscriber) == 50
    assert subscriber.take(10) == sent[:10]
    assert subscriber.take(0) == []
    assert subscriber.take() == sent[10:]
    with pytest.raises(ValueError):
        subscriber.take(-1)


@pytest.mark.parametrize(
    "item",
    [
        PROGRESS,
        PROGRESS.to_bytes(),
        bytearray(PROGRESS.to_bytes()),
        PROGRESS.to_json(),
        dict(PROGRESS.members),
    ],
)
def test_publish_takes_notifications_in_every_form(item: object) -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    assert hub.publish(item) == 1
    assert subscriber.take() == [PROGRESS]


def test_raw_bytes_are_kept_exactly() -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    raw = b'{"method" : "x/custom", "params": {"b":1, "a":2}}'
    hub.publish(raw)
    (received,) = subscriber.take()
    assert received.to_bytes() == raw


@pytest.mark.parametrize(
    "item",
    [
        None,
        42,
        3.5,
        [1, 2],
        {"no": "method"},
        {"method": 7},
        {"method": "m", "params": [1]},
        {"method": "m", "x": float("nan")},
        {"method": "m", "x": {1, 2}},
        b"not json",
        b"[]",
        b'{"method":"m"',
        b"\xff\xfe",
        "",
        "[1]",
        object(),
        Interest(),
    ],
)
def test_anything_that_is_not_a_notification_is_ignored(item: object) -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    assert hub.publish(item) == 0
    assert len(subscriber) == 0
    assert subscriber.dropped == 0


@settings(max_examples=100, deadline=None)
@given(item=st.one_of(st.binary(max_size=40), st.text(max_size=40), st.integers()))
def test_publish_never_raises(item: object) -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    queued = hub.publish(item)
    assert queued == len(subscriber) in (0, 1)
    assert (as_notification(item) is None) == (queued == 0)


# --- bounded queues -------------------------------------------------------------------------------


def test_slow_subscriber_is_bounded_and_the_loss_is_counted_exactly() -> None:
    hub = Hub()  # default queue size: 1024
    slow = hub.subscribe()
    reader = hub.subscribe()
    read: list[Notification] = []
    sent = 100_000
    for n in range(sent):
        hub.publish(Notification("notifications/progress", {"progressToken": 1, "progress": n}))
        if n % 100 == 99:
            read.extend(reader.take())
    read.extend(reader.take())
    assert slow.queue_size == 1024
    assert len(slow) == 1024
    assert slow.dropped == sent - 1024 == 98_976
    kept = slow.take()
    assert [item.params["progress"] for item in kept if item.params] == list(range(1024))
    assert reader.dropped == 0
    assert len(read) == sent
    assert [item.params["progress"] for item in read if item.params] == list(range(sent))


def test_queue_size_per_hub_and_per_subscriber() -> None:
    hub = Hub(queue_size=3)
    default, big = hub.subscribe(), hub.subscribe(queue_size=5)
    results = [hub.publish(log("info", n)) for n in range(6)]
    assert results == [2, 2, 2, 1, 1, 0]
    assert (len(default), default.dropped) == (3, 3)
    assert (len(big), big.dropped) == (5, 1)
    with pytest.raises(ValueError):
        Hub(queue_size=0)
    with pytest.raises(ValueError):
        hub.subscribe(queue_size=0)


def test_a_drained_queue_takes_notifications_again() -> None:
    hub = Hub(queue_size=2)
    subscriber = hub.subscribe()
    for n in range(4):
        hub.publish(log("info", n))
    assert [item.params["data"] for item in subscriber.take() if item.params] == [0, 1]
    hub.publish(log("info", 9))
    assert [item.params["data"] for item in subscriber.take() if item.params] == [9]
    assert subscriber.dropped == 2


# --- on_ready -------------------------------------------------------------------------------------


def test_on_ready_fires_when_the_queue_goes_from_empty_to_non_empty() -> None:
    hub = Hub()
    calls: list[str] = []
    subscriber = hub.subscribe(on_ready=lambda: calls.append("ready"))
    hub.publish(PROGRESS)
    hub.publish(PROGRESS)
    assert calls == ["ready"]
    subscriber.take()
    hub.publish(PROGRESS)
    assert calls == ["ready", "ready"]


def test_on_ready_does_not_fire_for_ignored_or_dropped_items() -> None:
    hub = Hub(queue_size=1)
    calls: list[int] = []
    subscriber = hub.subscribe(on_ready=lambda: calls.append(1))
    hub.publish(b"nope")
    assert calls == []
    hub.publish(PROGRESS)
    hub.publish(PROGRESS)  # dropped
    assert calls == [1] and subscriber.dropped == 1


def test_on_ready_runs_after_every_queue_was_filled_and_errors_do_not_starve_others() -> None:
    hub = Hub()
    seen: list[int] = []

    def failing() -> None:
        raise RuntimeError("callback failed")

    first = hub.subscribe(on_ready=failing)
    second = hub.subscribe(on_ready=lambda: seen.append(len(second)))
    with pytest.raises(RuntimeError, match="callback failed"):
        hub.publish(PROGRESS)
    assert len(first) == 1
    assert seen == [1]


def test_on_ready_may_subscribe_and_close() -> None:
    hub = Hub()
    late: list[Subscriber] = []
    victim = hub.subscribe()

    def react() -> None:
        victim.close()
        late.append(hub.subscribe())

    hub.subscribe(on_ready=react)
    assert hub.publish(PROGRESS) == 2
    assert victim.closed and len(victim) == 0
    assert len(late[0]) == 0  # it subscribed after the publish


# --- no replay ------------------------------------------------------------------------------------


def test_no_replay_after_resubscribe() -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    hub.publish(log("info", "before"))
    subscriber.close()
    assert subscriber.closed and len(subscriber) == 0
    assert hub.subscribers == 0
    assert hub.publish(log("info", "while away")) == 0
    again = hub.subscribe()
    assert len(again) == 0
    hub.publish(log("info", "after"))
    assert [item.params["data"] for item in again.take() if item.params] == ["after"]
    assert subscriber.take() == []
    subscriber.close()  # twice is harmless


def test_closed_subscriber_gets_nothing_and_the_index_shrinks() -> None:
    hub = Hub()
    subscriber = hub.subscribe(Interest(resource_subscriptions={"file:///a"}, log_level="debug"))
    subscriber.close()
    assert hub.publish(updated("file:///a")) == 0
    assert hub.publish(log("emergency")) == 0
    assert hub._by_uri == {}


# --- filters: the MCP server library's notifications page's table, row by row ---------------------


def test_row_resources_updated_reaches_subscribers_of_that_uri() -> None:
    hub = Hub()
    of_a = hub.subscribe(Interest(resource_subscriptions={"config://app", "file:///b"}))
    of_b = hub.subscribe(Interest(resource_subscriptions={"file:///b"}))
    of_none = hub.subscribe(Interest(resources_list_changed=True))
    assert hub.publish(updated("config://app")) == 1
    assert of_a.take() == [updated("config://app")]
    assert of_b.take() == [] and of_none.take() == []
    assert hub.publish(updated("file:///b")) == 2
    assert len(of_a) == len(of_b) == 1
    assert hub.publish(updated("file:///c")) == 0


@pytest.mark.parametrize(
    ("notification", "flag"),
    [
        (RESOURCES_CHANGED, "resources_list_changed"),
        (TOOLS_CHANGED, "tools_list_changed"),
        (PROMPTS_CHANGED, "prompts_list_changed"),
    ],
)
def test_rows_list_changed_reach_subscribers_that_asked(
    notification: Notification, flag: str
) -> None:
    hub = Hub()
    asked = hub.subscribe(FLAG_INTERESTS[flag])
    others = [
        hub.subscribe(interest) for other, interest in FLAG_INTERESTS.items() if other != flag
    ]
    uri_only = hub.subscribe(Interest(resource_subscriptions={"file:///a"}))
    assert hub.publish(notification) == 1
    assert asked.take() == [notification]
    assert all(len(other) == 0 for other in others)
    assert len(uri_only) == 0


def test_anything_else_in_the_seed_table_sense_passes_an_interest() -> None:
    # Seed 004: "Anything else published to the topic is ignored" by the
    # topic filter; here, kinds the filter does not name pass (the provider notifications page
    # relays the whole union).
    hub = Hub()
    narrow = hub.subscribe(Interest(resource_subscriptions={"file:///a"}))
    passing = [
        PROGRESS,
        Notification("notifications/cancelled", {"requestId": 1}),
        Notification("notifications/elicitation/complete", {"elicitationId": "e"}),
        Notification("notifications/tasks/status", {"taskId": "t", "status": "working"}),
        Notification("vendor/custom", {"anything": True}),
    ]
    for notification in passing:
        assert hub.publish(notification) == 1
    assert narrow.take() == passing


# --- filters: log levels --------------------------------------------------------------------------


def test_asked_warning_gets_warning_and_above() -> None:
    hub = Hub()
    subscriber = hub.subscribe(Interest(log_level=LogLevel.WARNING))
    for level in LogLevel:
        hub.publish(log(level.wire))
    levels = [item.params["level"] for item in subscriber.take() if item.params]
    assert levels == ["warning", "error", "critical", "alert", "emergency"]


def test_asked_no_level_gets_no_log_messages() -> None:
    hub = Hub()
    subscriber = hub.subscribe(Interest(tools_list_changed=True))
    for level in LogLevel:
        assert hub.publish(log(level.wire)) == 0
    assert len(subscriber) == 0


@pytest.mark.parametrize("asked", list(LogLevel))
def test_every_level_against_every_level(asked: LogLevel) -> None:
    hub = Hub()
    subscriber = hub.subscribe(Interest(log_level=asked.wire))
    assert subscriber.interest is not None and subscriber.interest.log_level is asked
    for level in LogLevel:
        assert hub.publish(log(level.wire)) == (1 if level >= asked else 0)


def test_log_messages_with_an_unknown_level_reach_only_the_unfiltered() -> None:
    hub = Hub()
    filtered = hub.subscribe(Interest(log_level="debug"))
    everything = hub.subscribe()
    odd = Notification("notifications/message", {"level": "INFO", "data": 1})
    assert odd.kind is NotificationKind.CUSTOM
    assert hub.publish(odd) == 1
    assert len(filtered) == 0 and len(everything) == 1


def test_interest_validation() -> None:
    with pytest.raises(ValueError):
        Interest(log_level="loud")
    with pytest.raises(TypeError):
        Interest(resource_subscriptions="file:///a")
    with pytest.raises(TypeError):
        Interest(resource_subscriptions={1})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Hub().subscribe("everything")  # type: ignore[arg-type]
    assert Interest(resource_subscriptions=["a", "a"]).resource_subscriptions == frozenset({"a"})


# --- no interest means everything -----------------------------------------------------------------


def test_no_interest_gets_everything() -> None:
    hub = Hub()
    everything = hub.subscribe()
    sent = [
        updated("file:///x"),
        RESOURCES_CHANGED,
        TOOLS_CHANGED,
        PROMPTS_CHANGED,
        *(log(level.wire) for level in LogLevel),
        PROGRESS,
        Notification("vendor/custom"),
    ]
    for notification in sent:
        assert hub.publish(notification) == 1
    assert everything.take() == sent


# --- the index agrees with the rule ---------------------------------------------------------------

_uris = st.sampled_from(["file:///a", "file:///b", "config://app"])
interests = st.one_of(
    st.none(),
    st.builds(
        Interest,
        resource_subscriptions=st.frozensets(_uris, max_size=2),
        resources_list_changed=st.booleans(),
        tools_list_changed=st.booleans(),
        prompts_list_changed=st.booleans(),
        log_level=st.one_of(st.none(), st.sampled_from(list(LogLevel))),
    ),
)
published = st.one_of(
    notifications(),
    _uris.map(updated),
    st.sampled_from([log(level.wire) for level in LogLevel]),
    st.sampled_from([RESOURCES_CHANGED, TOOLS_CHANGED, PROMPTS_CHANGED]),
)


@settings(max_examples=150, deadline=None)
@given(
    subscriptions=st.lists(interests, max_size=6),
    closed=st.sets(st.integers(0, 5)),
    sent=st.lists(published, max_size=8),
)
def test_fan_out_matches_interest_wants(
    subscriptions: list[Interest | None], closed: set[int], sent: list[Notification]
) -> None:
    hub = Hub()
    subscribers = [hub.subscribe(interest) for interest in subscriptions]
    for index in closed:
        if index < len(subscribers):
            subscribers[index].close()
    expected: list[list[Notification]] = [[] for _ in subscribers]
    for notification in sent:
        count = 0
        for index, interest in enumerate(subscriptions):
            if subscribers[index].closed:
                continue
            if interest is None or interest.wants(notification):
                expected[index].append(notification)
                count += 1
        assert hub.publish(notification) == count
    assert [subscriber.take() for subscriber in subscribers] == expected
