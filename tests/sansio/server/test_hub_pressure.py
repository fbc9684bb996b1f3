"""The hub under pressure: byte-bounded queues, shared frames, refusals, counts, waiting."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio import LocalProtocolError, Notification, encode_message, errors
from diverge_notifications.sansio.server.hub import (
    DEFAULT_QUEUE_BYTES,
    DEFAULT_QUEUE_SIZE,
    Hub,
    HubCounts,
    Interest,
    NotificationTooLarge,
    Subscriber,
)
from diverge_notifications.sansio.wire.framing import DEFAULT_MAX_FRAME_SIZE, encode_frame


def numbered(n: int, pad: int = 0) -> Notification:
    return Notification(
        "notifications/progress", {"progressToken": 1, "progress": n, "p": "x" * pad}
    )


def frame_of(notification: Notification) -> bytes:
    return encode_frame(encode_message(notification))


def of_size(message_size: int) -> bytes:
    """Raw JSON of a notification whose message (tag byte + JSON) is ``message_size`` bytes."""
    head, tail = b'{"method":"x/big","params":{"p":"', b'"}}'
    filler = message_size - 1 - len(head) - len(tail)
    assert filler >= 0
    return head + b"a" * filler + tail


def progress_of(notifications: list[Notification]) -> list[int]:
    return [n.params["progress"] for n in notifications if n.params]


# --- defaults -----------------------------------------------------------------------------------


def test_defaults_are_the_documented_ones() -> None:
    hub = Hub()
    assert (hub.queue_size, hub.queue_bytes) == (DEFAULT_QUEUE_SIZE, DEFAULT_QUEUE_BYTES)
    assert (DEFAULT_QUEUE_SIZE, DEFAULT_QUEUE_BYTES) == (1024, 1024 * 1024)
    assert hub.max_frame_size == DEFAULT_MAX_FRAME_SIZE == 16 * 1024 * 1024
    subscriber = hub.subscribe()
    assert (subscriber.queue_size, subscriber.queue_bytes) == (1024, 1024 * 1024)
    assert hub.subscribe(queue_bytes=10).queue_bytes == 10
    for bad in ({"queue_bytes": 0}, {"max_frame_size": 0}):
        with pytest.raises(ValueError):
            Hub(**bad)
    with pytest.raises(ValueError):
        hub.subscribe(queue_bytes=0)


# --- bounded in bytes ---------------------------------------------------------------------------


def test_queue_is_bounded_in_bytes_and_counts_whole_frames() -> None:
    small = numbered(0, pad=100)
    size = len(frame_of(small))
    hub = Hub(queue_bytes=3 * size)
    subscriber = hub.subscribe()
    results = [hub.publish(numbered(n, pad=100)) for n in range(5)]
    assert results == [1, 1, 1, 0, 0]
    assert (len(subscriber), subscriber.bytes_queued, subscriber.dropped) == (3, 3 * size, 2)
    assert progress_of(subscriber.take()) == [0, 1, 2]
    assert subscriber.bytes_queued == 0
    assert hub.publish(numbered(9, pad=100)) == 1


def test_an_empty_queue_takes_one_frame_larger_than_its_byte_bound() -> None:
    hub = Hub(queue_bytes=64)
    subscriber = hub.subscribe()
    big = numbered(0, pad=1000)
    assert hub.publish(big) == 1
    assert hub.publish(numbered(1)) == 0  # the queue is over its bound now
    assert subscriber.bytes_queued == len(frame_of(big))
    assert subscriber.take() == [big]
    assert hub.publish(numbered(2)) == 1


def test_the_notification_bound_still_holds_for_tiny_frames() -> None:
    hub = Hub(queue_size=2, queue_bytes=10**9)
    subscriber = hub.subscribe()
    assert [hub.publish(numbered(n)) for n in range(3)] == [1, 1, 0]
    assert subscriber.dropped == 1


# --- one frame per notification -----------------------------------------------------------------


def test_every_queue_shares_the_frame_built_once() -> None:
    hub = Hub()
    subscribers = [hub.subscribe() for _ in range(5)]
    raw = b'{"method" : "x/custom",  "params": {"b":1}}'
    hub.publish(raw)
    frames = [subscriber.take_frames() for subscriber in subscribers]
    first = frames[0][0]
    assert first == encode_frame(b"\x00" + raw)  # the bytes received, unchanged
    assert all(taken[0] is first for taken in frames)


def test_take_frames_bounds_items_and_bytes_but_takes_at_least_one() -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    published = [numbered(n, pad=50) for n in range(6)]
    for notification in published:
        hub.publish(notification)
    size = len(frame_of(published[0]))
    assert subscriber.take_frames(max_bytes=2 * size + 1) == [frame_of(n) for n in published[:2]]
    assert subscriber.take_frames(max_bytes=1) == [frame_of(published[2])]
    assert subscriber.take_frames(max_items=1, max_bytes=10**6) == [frame_of(published[3])]
    assert subscriber.take_frames(max_items=0) == []
    assert subscriber.bytes_queued == 2 * size
    assert subscriber.take_frames(max_bytes=2 * size) == [frame_of(n) for n in published[4:]]
    assert subscriber.take_frames() == []
    assert subscriber.sent == 6
    with pytest.raises(ValueError):
        subscriber.take_frames(max_bytes=0)
    with pytest.raises(ValueError):
        subscriber.take_frames(max_items=-1)


def test_take_frames_of_a_whole_queue_checks_its_limits_and_counts() -> None:
    hub = Hub()
    subscriber, other = hub.subscribe(), hub.subscribe()
    published = [numbered(n, pad=10) for n in range(3)]
    for notification in published:
        hub.publish(notification)
    size = len(frame_of(published[0]))
    # Limits are refused as documented even when the whole queue would fit
    # the other one, and nothing is taken.
    for bad in ({"max_bytes": 0}, {"max_items": -1}, {"max_items": -1, "max_bytes": 10**6}):
        with pytest.raises(ValueError):
            subscriber.take_frames(**bad)
    with pytest.raises(ValueError):
        subscriber.take_frames(max_items=10, max_bytes=0)
    assert (len(subscriber), subscriber.bytes_queued, subscriber.sent) == (3, 3 * size, 0)
    # Limits the whole queue fits exactly: all of it, oldest first, counted.
    taken = subscriber.take_frames(max_items=3, max_bytes=3 * size)
    assert taken == [frame_of(n) for n in published]
    assert (len(subscriber), subscriber.bytes_queued, subscriber.sent) == (0, 0, 3)
    assert hub.counts().sent == 3
    # One queued frame: the one every queue shares.
    hub.publish(numbered(3))
    (frame,) = subscriber.take_frames(max_items=1, max_bytes=size)
    assert other.take_frames()[-1] is frame
    assert (subscriber.sent, other.sent, hub.counts().sent) == (4, 4, 8)
    # A publisher waiting for room is woken by a whole-queue take too.
    narrow = hub.subscribe(queue_size=1)
    hub.publish(numbered(4))
    assert not hub.room_for(numbered(5))
    woken: list[int] = []
    hub.when_room(lambda: woken.append(len(narrow)))
    assert narrow.take_frames(max_items=1) == [frame_of(numbered(4))]
    assert woken == [0] and narrow.sent == 1


@given(
    pads=st.lists(st.integers(0, 60), max_size=8),
    max_items=st.none() | st.integers(0, 10),
    max_bytes=st.none() | st.integers(1, 600),
)
@settings(max_examples=200, deadline=None)
def test_take_frames_takes_what_its_limits_allow(
    pads: list[int], max_items: int | None, max_bytes: int | None
) -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    frames = []
    for n, pad in enumerate(pads):
        hub.publish(numbered(n, pad=pad))
        frames.append(frame_of(numbered(n, pad=pad)))
    # The documented rule: oldest first, at most max_items frames and
    # max_bytes bytes, but at least one frame of a queue that has one.
    expected: list[bytes] = []
    for frame in frames:
        if max_items is not None and len(expected) >= max_items:
            break
        if expected and max_bytes is not None and sum(map(len, expected)) + len(frame) > max_bytes:
            break
        expected.append(frame)
    assert subscriber.take_frames(max_items, max_bytes) == expected
    assert subscriber.sent == hub.counts().sent == len(expected)
    assert len(subscriber) == len(frames) - len(expected)
    assert subscriber.bytes_queued == sum(map(len, frames[len(expected) :]))
    assert subscriber.take_frames() == frames[len(expected) :]


# --- too large to send --------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [64, 1000])
def test_a_message_at_the_frame_limit_is_published_one_byte_over_is_refused(limit: int) -> None:
    hub = Hub(max_frame_size=limit)
    subscriber = hub.subscribe()
    assert hub.publish(of_size(limit)) == 1
    with pytest.raises(NotificationTooLarge) as caught:
        hub.publish(of_size(limit + 1))
    assert (caught.value.size, caught.value.limit) == (limit + 1, limit)
    assert isinstance(caught.value, LocalProtocolError)
    assert NotificationTooLarge is errors.NotificationTooLarge
    assert f"{limit + 1} bytes" in str(caught.value) and f"{limit} bytes" in str(caught.value)
    assert len(subscriber) == 1 and subscriber.refused == 1 and subscriber.dropped == 0
    counts = hub.counts()
    assert (counts.published, counts.refused) == (1, 1)


def test_the_default_limit_is_the_proxys_16_mib_frame() -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    hub.publish(numbered(1))
    with pytest.raises(NotificationTooLarge):
        hub.publish(of_size(DEFAULT_MAX_FRAME_SIZE + 1))
    hub.publish(numbered(2))
    assert progress_of(subscriber.take()) == [1, 2]
    # Into an empty queue, a message of exactly the limit goes, whatever the byte bound.
    assert hub.publish(of_size(DEFAULT_MAX_FRAME_SIZE)) == 1
    (taken,) = subscriber.take_frames()
    assert len(taken) == DEFAULT_MAX_FRAME_SIZE + 4


def test_a_refusal_is_counted_for_the_subscribers_it_would_have_reached() -> None:
    hub = Hub(max_frame_size=100)
    everything = hub.subscribe()
    narrow = hub.subscribe(Interest(tools_list_changed=True))
    with pytest.raises(NotificationTooLarge):
        hub.publish(of_size(101))  # x/big reaches every subscriber
    big_list_changed = {"method": "notifications/prompts/list_changed", "params": {"p": "a" * 200}}
    with pytest.raises(NotificationTooLarge):
        hub.publish(big_list_changed)
    assert (everything.refused, narrow.refused) == (2, 1)
    assert hub.counts().refused == 2


# --- counts -------------------------------------------------------------------------------------


def test_counts_of_a_subscriber_survive_its_close() -> None:
    hub = Hub(queue_size=3)
    reader, slow = hub.subscribe(), hub.subscribe()
    hub.publish(b"not a notification")
    for n in range(5):
        hub.publish(numbered(n))
    assert len(reader.take(2)) == 2
    assert (reader.sent, reader.dropped, slow.dropped) == (2, 2, 2)
    assert slow.close() == 3  # what was queued is dropped, and counted
    assert slow.close() == 0
    assert slow.dropped == 5 and slow.sent == 0
    assert reader.close() == 1
    assert reader.dropped == 3
    assert hub.counts() == HubCounts(
        subscribers=0,
        subscribed=2,
        published=5,
        ignored=1,
        refused=0,
        sent=2,
        dropped=8,
        queued=0,
    )
    assert "2 sent, 3 dropped" in repr(reader)


_operations = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), st.integers(0, 300)),
        st.tuples(st.just("take"), st.integers(0, 5)),
        st.tuples(st.just("frames"), st.integers(1, 900)),
        st.tuples(st.just("close"), st.integers(0, 5)),
        st.tuples(st.just("subscribe"), st.integers(1, 4)),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(operations=_operations)
def test_what_reached_a_subscriber_is_sent_dropped_or_queued(
    operations: list[tuple[str, int]],
) -> None:
    hub = Hub(queue_size=4, queue_bytes=600)
    subscribers: list[Subscriber] = [hub.subscribe()]
    reached = {id(subscribers[0]): 0}
    for what, value in operations:
        live = [s for s in subscribers if not s.closed]
        if what == "publish":
            for subscriber in live:
                reached[id(subscriber)] += 1
            hub.publish(numbered(0, pad=value))
        elif what == "subscribe":
            subscriber = hub.subscribe(queue_size=value)
            subscribers.append(subscriber)
            reached[id(subscriber)] = 0
        elif live:
            target = live[value % len(live)]
            if what == "take":
                target.take(value)
            elif what == "frames":
                target.take_frames(max_bytes=value)
            else:
                target.close()
        for subscriber in subscribers:
            assert subscriber.sent + subscriber.dropped + len(subscriber) == reached[id(subscriber)]
            assert subscriber.bytes_queued <= max(subscriber.queue_bytes, 400)
            assert len(subscriber) <= subscriber.queue_size
        counts = hub.counts()
        assert counts.sent == sum(s.sent for s in subscribers)
        assert counts.dropped == sum(s.dropped for s in subscribers)
        assert counts.queued == sum(len(s) for s in subscribers)
        assert counts.subscribers == sum(not s.closed for s in subscribers)


# --- publishers that wait -----------------------------------------------------------------------


def test_room_for_says_whether_a_publish_would_drop_and_when_room_wakes_the_publisher() -> None:
    hub = Hub(queue_size=2)
    full, other = hub.subscribe(), hub.subscribe(queue_size=100)
    hub.publish(numbered(0))
    assert hub.room_for(numbered(1))
    hub.publish(numbered(1))
    assert not hub.room_for(numbered(2))
    woken: list[str] = []
    hub.when_room(lambda: woken.append("room"))
    other.take()  # another queue's room is not what the publisher waits for
    assert woken == []
    assert len(full.take(1)) == 1
    assert woken == ["room"]
    assert hub.room_for(numbered(2))
    full.take()
    assert woken == ["room"]  # once per registration


def test_a_closed_subscriber_stops_holding_the_publisher_up() -> None:
    hub = Hub(queue_size=1)
    stalled = hub.subscribe()
    hub.publish(numbered(0))
    assert not hub.room_for(numbered(1))
    woken: list[int] = []
    hub.when_room(lambda: woken.append(1))
    stalled.close()
    assert woken == [1]
    assert hub.room_for(numbered(1))


def test_room_for_follows_the_routes_and_passes_what_publish_does_not_queue() -> None:
    hub = Hub(queue_size=1, max_frame_size=100)
    narrow = hub.subscribe(Interest(tools_list_changed=True))
    hub.publish(Notification("notifications/tools/list_changed"))
    assert not hub.room_for(Notification("notifications/tools/list_changed"))
    assert hub.room_for(Notification("notifications/prompts/list_changed"))  # reaches nobody
    assert hub.room_for(b"not a notification")
    assert hub.room_for(of_size(101))  # refused at once by publish: nothing to wait for
    assert len(narrow) == 1


def test_room_for_counts_bytes_too() -> None:
    size = len(frame_of(numbered(0, pad=100)))
    hub = Hub(queue_bytes=2 * size)
    hub.subscribe()
    hub.publish(numbered(0, pad=100))
    assert hub.room_for(numbered(1, pad=100))
    assert not hub.room_for(numbered(1, pad=101))


def test_a_failing_room_callback_undoes_the_take() -> None:
    hub = Hub(queue_size=1)
    subscriber = hub.subscribe()
    hub.publish(numbered(0))
    assert not hub.room_for(numbered(1))
    seen: list[int] = []

    def failing() -> None:
        raise RuntimeError("wake-up failed")

    hub.when_room(failing)
    hub.when_room(lambda: seen.append(len(subscriber)))
    with pytest.raises(RuntimeError, match="wake-up failed"):
        subscriber.take_frames()
    assert seen == [0]  # the others ran, after the queue changed
    assert len(subscriber) == 1 and subscriber.sent == 0 and hub.counts().sent == 0
    assert progress_of(subscriber.take()) == [0]


def waiting_publisher(hub: Hub, items: list[Notification]) -> Callable[[], bool]:
    """A publisher that publishes only while there is room; ``step()`` is False when done."""
    pending = list(items)
    blocked = [False]

    def wake() -> None:
        blocked[0] = False

    def step() -> bool:
        while pending and not blocked[0]:
            if not hub.room_for(pending[0]):
                blocked[0] = True
                hub.when_room(wake)
                return True
            hub.publish(pending.pop(0))
        return bool(pending)

    return step


@settings(max_examples=60, deadline=None)
@given(
    reads=st.lists(st.tuples(st.integers(0, 2), st.integers(1, 7)), min_size=1, max_size=200),
    queue_size=st.integers(1, 5),
)
def test_a_publisher_that_waits_loses_nothing_for_readers_that_keep_reading(
    reads: list[tuple[int, int]], queue_size: int
) -> None:
    hub = Hub(queue_size=queue_size, queue_bytes=700)
    readers = [hub.subscribe() for _ in range(3)]
    items = [numbered(n, pad=(n * 37) % 300) for n in range(120)]
    step = waiting_publisher(hub, items)
    received: list[list[Notification]] = [[] for _ in readers]
    more = step()
    turns = 0
    while more or any(len(reader) for reader in readers):
        who, count = reads[turns % len(reads)]
        turns += 1
        received[who] += readers[who].take(count)
        if turns % len(reads) == 0:  # every reader gets a turn, so nobody stalls for ever
            for index, reader in enumerate(readers):
                received[index] += reader.take()
        more = step()
    for reader, got in zip(readers, received, strict=True):
        assert got == items
        assert reader.dropped == 0 and reader.sent == len(items)
