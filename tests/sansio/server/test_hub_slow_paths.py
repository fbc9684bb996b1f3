"""A publisher that waits for room waits only for paths that move (``room_for`` told the time)."""

from __future__ import annotations

from diverge_notifications.sansio.server.hub import Hub
from tests.sansio.server.test_hub_pressure import numbered


def test_a_full_queue_whose_path_has_not_moved_for_slow_after_is_not_waited_for() -> None:
    hub = Hub(queue_size=1)
    still, moving = hub.subscribe(), hub.subscribe()
    assert hub.room_for(numbered(0), now=10.0, slow_after=1.0)  # both empty: moving at 10
    hub.publish(numbered(0))
    moving.take()
    moving.moved(10.5)  # its writer took frames at 10.5
    assert not hub.room_for(numbered(1), now=10.9, slow_after=1.0)  # still: 0.9 s
    assert hub.slow_at == 11.0  # when to ask again at the latest
    # At 11 the still one has not moved for slow_after: not waited for.
    assert hub.room_for(numbered(1), now=11.0, slow_after=1.0)
    assert hub.publish(numbered(1)) == 1  # the moving one queued it; for the other, dropped
    assert (still.dropped, hub.counts().dropped) == (1, 1)
    # The moving one was found empty at 11 (caught up), and is full now: waited for.
    assert moving.moved_at == 11.0
    assert not hub.room_for(numbered(2), now=11.5, slow_after=1.0)
    assert hub.slow_at == 12.0 and still.moved_at == 10.0


def test_a_path_never_said_to_move_and_a_call_without_the_time_are_waited_for() -> None:
    hub = Hub(queue_size=1)
    subscriber = hub.subscribe()
    hub.publish(numbered(0))
    assert subscriber.moved_at is None
    assert not hub.room_for(numbered(1), now=100.0, slow_after=1.0)
    subscriber.moved(0.0)
    assert hub.room_for(numbered(1), now=100.0, slow_after=1.0)
    assert not hub.room_for(numbered(1))  # not told the time: waited for, as ever
