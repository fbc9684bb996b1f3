"""A publisher that waits for room waits only for paths that move (``room_for`` told the time)."""

from __future__ import annotations

from diverge_notifications.sansio.server.hub import Hub
from tests.sansio.server.test_hub_pressure import numbered


def test_a_full_queue_that_takes_nothing_for_slow_after_is_not_waited_for() -> None:
    hub = Hub(queue_size=1)
    still, moving = hub.subscribe(), hub.subscribe()
    hub.publish(numbered(0))
    assert not hub.room_for(numbered(1), now=10.0, slow_after=1.0)  # both full: found so at 10
    moving.take()
    assert not hub.room_for(numbered(1), now=10.5, slow_after=1.0)  # still: full for 0.5 s
    # At 11 the still one has taken nothing for slow_after since it was found full.
    assert hub.room_for(numbered(1), now=11.0, slow_after=1.0)
    assert hub.publish(numbered(1)) == 1  # the moving one queued it; for the other, dropped
    assert (still.dropped, hub.counts().dropped) == (1, 1)
    # The moving one fills up: found full now, it is waited for again.
    assert not hub.room_for(numbered(2), now=11.0, slow_after=1.0)
    moving.take()
    assert hub.room_for(numbered(2), now=11.2, slow_after=1.0)


def test_a_take_makes_a_path_moving_again_and_without_the_time_every_path_is_waited_for() -> None:
    hub = Hub(queue_size=1)
    subscriber = hub.subscribe()
    hub.publish(numbered(0))
    assert not hub.room_for(numbered(1), now=0.0, slow_after=1.0)
    assert hub.room_for(numbered(1), now=5.0, slow_after=1.0)
    assert not hub.room_for(numbered(1))  # not told the time: waited for, as ever
    subscriber.take()
    hub.publish(numbered(1))
    assert not hub.room_for(numbered(2), now=5.5, slow_after=1.0)  # found full anew at 5.5
