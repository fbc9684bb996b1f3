"""The hub's suspension: subscribers ended with a reason, new ones refused, then resumed."""

from __future__ import annotations

import pytest

from diverge_notifications.sansio import Notification
from diverge_notifications.sansio.server.hub import Hub, HubSuspended, Interest

PROGRESS = Notification("notifications/progress", {"progressToken": "t", "progress": 1})
UPDATED = Notification("notifications/resources/updated", {"uri": "a://b"})
REASON = "Redis broker redis://127.0.0.1:6379 channel 'diverge:notifications': connection lost"


def test_suspend_ends_every_subscriber_with_the_reason_and_keeps_their_queues() -> None:
    hub = Hub()
    woken: list[str] = []
    first = hub.subscribe(on_ready=lambda: woken.append("first"))
    second = hub.subscribe(Interest(resource_subscriptions={"a://b"}))
    idle = hub.subscribe(on_ready=lambda: woken.append("idle"))
    hub.publish(PROGRESS)
    hub.publish(UPDATED)
    idle.take()
    woken.clear()
    assert hub.suspend(REASON) == 3
    assert hub.subscribers == 0
    assert hub.suspended == REASON
    for subscriber in (first, second, idle):
        assert subscriber.closed and subscriber.end_reason == REASON
    # Every writer is woken, an idle one too, and drains what was queued.
    assert woken == ["first", "idle"]
    assert first.take() == [PROGRESS, UPDATED]
    assert second.take() == [PROGRESS, UPDATED]
    assert idle.take() == []
    assert "ended" in repr(first)


def test_a_suspended_hub_refuses_subscriptions_and_hears_nothing() -> None:
    hub = Hub()
    hub.suspend(REASON)
    with pytest.raises(HubSuspended) as caught:
        hub.subscribe()
    assert caught.value.reason == REASON
    assert REASON in str(caught.value)
    assert hub.publish(PROGRESS) == 0


def test_resume_serves_again_and_replays_nothing() -> None:
    hub = Hub()
    before = hub.subscribe(Interest(resource_subscriptions={"a://b"}, tools_list_changed=True))
    hub.suspend(REASON)
    hub.publish(UPDATED)
    hub.resume()
    assert hub.suspended is None
    after = hub.subscribe(Interest(resource_subscriptions={"a://b"}))
    assert len(after) == 0
    assert hub.publish(UPDATED) == 1  # the ended subscriber left every index
    assert after.take() == [UPDATED]
    assert before.take() == []
    assert after.end_reason is None


def test_suspending_again_replaces_the_reason() -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    hub.suspend("first")
    assert hub.suspend("second") == 0
    assert hub.suspended == "second"
    assert subscriber.end_reason == "first"
    hub.resume()
    hub.resume()  # harmless
    assert hub.suspended is None


def test_close_with_a_reason_ends_one_subscriber() -> None:
    hub = Hub()
    woken: list[int] = []
    ended = hub.subscribe(on_ready=lambda: woken.append(1))
    other = hub.subscribe()
    hub.publish(PROGRESS)
    ended.close(reason="gone")
    assert woken == [1, 1]  # once for the notification, once for the end
    assert ended.closed and ended.end_reason == "gone"
    assert hub.publish(PROGRESS) == 1
    assert ended.take() == [PROGRESS]
    ended.close(reason="again")
    assert ended.end_reason == "gone" and woken == [1, 1]
    assert hub.suspended is None and other.end_reason is None


def test_a_plain_close_drops_the_queue_and_sets_no_reason() -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    hub.publish(PROGRESS)
    subscriber.close()
    assert subscriber.closed and subscriber.end_reason is None and len(subscriber) == 0
    subscriber.close(reason="late")  # already closed: nothing changes
    assert subscriber.end_reason is None


def test_the_writer_closes_what_was_ended_and_its_queue_goes() -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    hub.publish(PROGRESS)
    hub.suspend(REASON)
    subscriber.close()  # the writer is done with it
    assert len(subscriber) == 0 and subscriber.end_reason == REASON


def test_a_failing_wake_up_does_not_stop_the_suspension() -> None:
    hub = Hub()
    woken: list[str] = []

    def fail() -> None:
        raise RuntimeError("boom")

    first = hub.subscribe(on_ready=fail)
    second = hub.subscribe(on_ready=lambda: woken.append("second"))
    with pytest.raises(RuntimeError, match="boom"):
        hub.suspend(REASON)
    assert first.end_reason == second.end_reason == REASON
    assert woken == ["second"]
    assert hub.suspended == REASON


@pytest.mark.parametrize(("reason", "error"), [("", ValueError), (None, TypeError), (3, TypeError)])
def test_a_reason_is_a_non_empty_string(reason: object, error: type[Exception]) -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    with pytest.raises(error):
        hub.suspend(reason)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        subscriber.close(reason="")
    assert hub.suspended is None and not subscriber.closed
