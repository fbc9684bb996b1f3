"""The listener driver without I/O: every action, driven by hand on a fake clock.

The server side of each path is a real sans-IO :class:`ServerConnection`,
fed the ask the driver sends, so that what the driver reads is what a
server of this library writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from diverge_notifications.sansio import (
    ErrorData,
    LocalProtocolError,
    Notification,
    NotificationReceived,
    NotServed,
    ReaskNeeded,
    StreamEnded,
    StreamErrored,
    StreamOpened,
)
from diverge_notifications.sansio.client.policy import Backoff, ProxyPolicy
from diverge_notifications.sansio.drivers.actions import (
    Connect,
    Deliver,
    Disconnect,
    ListenAction,
    Receive,
    Send,
    Sleep,
    Stop,
)
from diverge_notifications.sansio.drivers.listen import ListenDriver, ListenState
from diverge_notifications.sansio.drivers.settings import ClientSettings
from diverge_notifications.sansio.events import (
    AttemptsExhausted,
    ConnectionFailed,
    NotificationsAsked,
    RetryScheduled,
    StreamBroken,
)
from diverge_notifications.sansio.mcp.model import ErrorCode
from diverge_notifications.sansio.server.connection import ServerConnection

BACKOFF = Backoff(base=1.0, factor=2.0, cap=8.0)


def progress(step: int) -> Notification:
    return Notification("notifications/progress", {"progressToken": "job", "progress": step})


def driver(
    *, random: Callable[[], float] = lambda: 0.5, max_attempts: int | None = None, **options: Any
) -> ListenDriver:
    policy = ProxyPolicy(require_exchange=False, backoff=BACKOFF, max_attempts=max_attempts)
    options.setdefault("events", True)
    return ListenDriver(
        "http://127.0.0.1:9000/base",
        ClientSettings(random=random, keepalive_interval=2.0, **options),
        policy=policy,
    )


def open_ask(listener: ListenDriver, now: float) -> ServerConnection:
    """Connect and send the ask; the server connection that read it."""
    assert listener.next_action(now) == Connect(host="127.0.0.1", port=9000, timeout=10.0)
    assert state_of(listener) is ListenState.CONNECTING
    listener.connected(now)
    send = listener.next_action(now)
    assert isinstance(send, Send)
    server = ServerConnection(target="/base/requests")
    server.receive_data(send.data)
    assert isinstance(server.next_event(), NotificationsAsked)
    assert listener.next_action(now) == Receive(timeout=6.0)
    assert state_of(listener) is ListenState.OPEN
    return server


def state_of(listener: ListenDriver) -> ListenState:
    return listener.state


def sleep(listener: ListenDriver, now: float) -> float:
    action = listener.next_action(now)
    assert isinstance(action, Sleep), action
    return action.delay


def delivered(listener: ListenDriver, now: float) -> list[object]:
    action = listener.next_action(now)
    assert isinstance(action, Deliver), action
    return list(action.items)


def path_end(listener: ListenDriver, now: float) -> list[object]:
    """What the end of a path delivers (after its Disconnect)."""
    assert listener.next_action(now) == Disconnect()
    items = delivered(listener, now)
    assert state_of(listener) is ListenState.IDLE
    return items


def test_a_path_from_connect_to_its_clean_end() -> None:
    listener = driver()
    server = open_ask(listener, 100.0)
    listener.data_received(100.1, server.start_path() + server.send_notification(progress(1)))
    opened, received = delivered(listener, 100.1)
    assert isinstance(opened, StreamOpened) and opened.channel == server.channel
    assert received == NotificationReceived(notification=progress(1))
    # A read that delivered nothing delivers nothing: the next action is the next read.
    listener.data_received(100.2, server.send_keepalive())
    assert listener.next_action(100.2) == Receive(timeout=6.0)
    listener.data_received(100.3, server.send_notification(progress(2)) + server.end_path())
    # A read is delivered a step of the connection at a time, each before the
    # next is decoded: the notification, then the end.
    assert delivered(listener, 100.3) == [NotificationReceived(notification=progress(2))]
    ended = path_end(listener, 100.3)
    assert [type(item) for item in ended] == [StreamEnded, ReaskNeeded, RetryScheduled]
    # The path delivered notifications: healthy, the count starts over.
    assert ended[-1] == RetryScheduled(delay=BACKOFF.delay(0, 0.5), attempt=1)


def test_between_asks_the_driver_sleeps_until_the_policy_allows_the_next() -> None:
    listener = driver()
    server = open_ask(listener, 100.0)
    listener.data_received(100.1, server.decline())
    retry = path_end(listener, 100.1)[-1]
    # Not served: one failure, a ceiling of 2 s, half of it drawn.
    assert retry == RetryScheduled(delay=BACKOFF.delay(1, 0.5), attempt=2)
    assert sleep(listener, 100.1) == pytest.approx(1.0)
    assert sleep(listener, 100.4) == pytest.approx(0.7)
    assert isinstance(listener.next_action(101.1), Connect)


def test_the_jitter_is_the_random_source_passed_in() -> None:
    draws = iter([0.25, 0.75])
    listener = driver(random=lambda: next(draws))
    for now, expected in ((0.0, BACKOFF.delay(1, 0.25)), (10.0, BACKOFF.delay(2, 0.75))):
        assert isinstance(listener.next_action(now), Connect)
        listener.connect_failed(now, "ECONNREFUSED: Connection refused")
        failed, retry = delivered(listener, now)
        assert failed == ConnectionFailed(reason="ECONNREFUSED: Connection refused")
        assert isinstance(retry, RetryScheduled) and retry.delay == pytest.approx(expected)
        assert sleep(listener, now) == pytest.approx(expected)


def test_without_a_random_source_each_delay_is_the_middle_of_its_range() -> None:
    policy = ProxyPolicy(require_exchange=False, backoff=BACKOFF)
    listener = ListenDriver("http://127.0.0.1:9000", ClientSettings(events=True), policy=policy)
    assert isinstance(listener.next_action(0.0), Connect)
    listener.connect_failed(0.0, "refused")
    assert delivered(listener, 0.0)[-1] == RetryScheduled(delay=BACKOFF.delay(1, 0.5), attempt=2)


@pytest.mark.parametrize("how", ["timed out", "lost"])
def test_silence_and_resets_break_the_path(how: str) -> None:
    listener = driver()
    server = open_ask(listener, 100.0)
    listener.data_received(100.1, server.start_path())
    assert isinstance(delivered(listener, 100.1)[0], StreamOpened)
    if how == "timed out":
        listener.timed_out(106.1)
        reason = "idle timeout: no data for 6 s"
    else:
        listener.connection_lost(106.1, "ECONNRESET: Connection reset by peer")
        reason = "the connection was lost: ECONNRESET: Connection reset by peer"
    broken, reask, retry = path_end(listener, 106.1)
    assert broken == StreamBroken(reason=reason)
    assert isinstance(reask, ReaskNeeded) and isinstance(retry, RetryScheduled)


def test_an_error_message_ends_the_path_and_is_delivered() -> None:
    listener = driver()
    server = open_ask(listener, 0.0)
    error = ErrorData(code=int(ErrorCode.INTERNAL_ERROR), message="boom")
    listener.data_received(0.1, server.start_path() + server.send_error(error))
    items = path_end(listener, 0.1)
    assert [type(item) for item in items] == [
        StreamOpened,
        StreamErrored,
        ReaskNeeded,
        RetryScheduled,
    ]


def test_without_events_only_notifications_are_delivered() -> None:
    listener = driver(events=False)
    server = open_ask(listener, 0.0)
    listener.data_received(0.1, server.start_path())
    # StreamOpened is not for the caller: nothing to deliver, the next read.
    assert listener.next_action(0.1) == Receive(timeout=6.0)
    listener.data_received(0.2, server.send_notification(progress(7)) + server.end_path())
    assert delivered(listener, 0.2) == [progress(7)]
    # The end delivers nothing: the connection goes, then the wait for the next ask.
    assert listener.next_action(0.2) == Disconnect()
    assert isinstance(listener.next_action(0.2), Sleep)
    # A failed connection delivers nothing either.
    assert isinstance(listener.next_action(100.0), Connect)
    listener.connect_failed(100.0, "refused")
    assert isinstance(listener.next_action(100.0), Sleep)


def test_attempts_exhausted_is_delivered_then_stop_for_good() -> None:
    listener = driver(max_attempts=2)
    now = 0.0
    for attempt in (1, 2):
        connect = listener.next_action(now)
        while isinstance(connect, Sleep):
            now += connect.delay
            connect = listener.next_action(now)
        assert isinstance(connect, Connect)
        listener.connect_failed(now, "refused")
        outcome = delivered(listener, now)[-1]
        if attempt == 1:
            assert isinstance(outcome, RetryScheduled)
    assert outcome == AttemptsExhausted(attempts=2)
    assert listener.next_action(now) == Stop()
    assert state_of(listener) is ListenState.STOPPED
    assert listener.next_action(now + 1000.0) == Stop()


def test_a_not_served_answer_counts_against_the_attempts() -> None:
    listener = driver(max_attempts=1)
    server = open_ask(listener, 0.0)
    listener.data_received(0.1, server.decline())
    opened, not_served, reask, exhausted = path_end(listener, 0.1)
    assert isinstance(opened, StreamOpened) and isinstance(not_served, NotServed)
    assert isinstance(reask, ReaskNeeded) and exhausted == AttemptsExhausted(attempts=1)
    assert listener.next_action(0.1) == Stop()


Report = Callable[[ListenDriver], None]

REPORTS: dict[str, Report] = {
    "connected": lambda listener: listener.connected(0.0),
    "connect_failed": lambda listener: listener.connect_failed(0.0, "refused"),
    "data_received": lambda listener: listener.data_received(0.0, b""),
    "connection_lost": lambda listener: listener.connection_lost(0.0, "reset"),
    "timed_out": lambda listener: listener.timed_out(0.0),
}
ALLOWED: dict[ListenState, set[str]] = {
    ListenState.IDLE: set(),
    ListenState.CONNECTING: {"connected", "connect_failed"},
    ListenState.OPEN: {"data_received", "connection_lost", "timed_out"},
}


def in_state(state: ListenState) -> ListenDriver:
    listener = driver()
    if state is not ListenState.IDLE:
        listener.next_action(0.0)
    if state is ListenState.OPEN:
        listener.connected(0.0)
        listener.next_action(0.0)
    assert state_of(listener) is state
    return listener


@pytest.mark.parametrize("state", list(ALLOWED), ids=lambda state: state.name)
@pytest.mark.parametrize("report", list(REPORTS))
def test_a_report_out_of_turn_is_refused_and_changes_nothing(
    state: ListenState, report: str
) -> None:
    listener = in_state(state)
    if report in ALLOWED[state]:
        REPORTS[report](listener)
        return
    with pytest.raises(LocalProtocolError, match=rf"^{report}\(\) is not allowed now"):
        REPORTS[report](listener)
    assert state_of(listener) is state


def test_next_action_waits_for_the_outcome_of_connect() -> None:
    listener = in_state(ListenState.CONNECTING)
    with pytest.raises(LocalProtocolError, match="not allowed now: the listener is connecting"):
        listener.next_action(0.0)
    listener.connected(0.0)
    assert isinstance(listener.next_action(0.0), Send)


def test_every_action_is_met() -> None:
    # The scenarios above, replayed for the set of actions they produce.
    seen: set[type[ListenAction]] = set()
    listener = driver(max_attempts=1)
    server = open_ask(listener, 0.0)
    seen |= {Connect, Send, Receive}
    listener.data_received(0.1, server.start_path() + server.end_path())
    for _ in range(3):
        seen.add(type(listener.next_action(0.1)))
    assert seen == {Connect, Send, Receive, Disconnect, Deliver, Stop}
    sleeping = driver()
    sleeping.next_action(0.0)
    sleeping.connect_failed(0.0, "refused")
    sleeping.next_action(0.0)  # Deliver
    assert isinstance(sleeping.next_action(0.0), Sleep)


# --- a read delivered a step at a time ------------------------------------------------


def log_message(index: int) -> Notification:
    """About 8 KB: more than a step of the connection holds, so a step of its own."""
    records = [{"n": index, "line": f"record {i} of message {index}"} for i in range(200)]
    return Notification("notifications/message", {"level": "info", "data": records})


def deliveries_until_disconnect(listener: ListenDriver, now: float) -> list[list[object]]:
    """The items of each Deliver, until the Disconnect; the connection decodes nothing ahead."""
    steps: list[list[object]] = []
    while (action := listener.next_action(now)) != Disconnect():
        assert isinstance(action, Deliver), action
        steps.append(list(action.items))
        connection = listener.connection
        assert connection is not None and connection.events_decoded == 0
    return steps


def test_a_read_is_delivered_a_step_at_a_time() -> None:
    listener = driver()
    server = open_ask(listener, 0.0)
    large = [log_message(index) for index in range(3)]
    small = [progress(step) for step in range(200)]
    assert all(len(message.to_bytes()) > 6 * 1024 for message in large)
    read = server.start_path() + b"".join(map(server.send_notification, large + small))
    listener.data_received(0.1, read + server.end_path())
    steps = deliveries_until_disconnect(listener, 0.1)
    items = [item for step in steps for item in step]
    assert isinstance(items[0], StreamOpened)
    received = [NotificationReceived(notification=message) for message in large + small]
    assert items[1:] == received
    # Each large message is delivered before the next is decoded; the small
    # ones a step (a few KB of them) at a time, not one Deliver each.
    assert [len(step) for step in steps[:3]] == [2, 1, 1]  # StreamOpened with the first
    assert 3 < len(steps) < 3 + len(small) // 10
    # The end is read after the last step: its own Deliver, after the Disconnect.
    ended = delivered(listener, 0.1)
    assert [type(item) for item in ended] == [StreamEnded, ReaskNeeded, RetryScheduled]
    assert state_of(listener) is ListenState.IDLE


def test_what_a_read_still_holds_is_delivered_before_the_next_read() -> None:
    listener = driver(events=False)
    server = open_ask(listener, 0.0)
    listener.data_received(0.1, server.start_path() + server.send_notification(log_message(0)))
    assert delivered(listener, 0.1) == [log_message(0)]
    # Nothing waits: the next read.
    assert listener.next_action(0.1) == Receive(timeout=6.0)
    listener.data_received(0.2, b"".join(server.send_notification(log_message(i)) for i in (1, 2)))
    assert delivered(listener, 0.2) == [log_message(1)]
    assert delivered(listener, 0.2) == [log_message(2)]
    assert listener.next_action(0.2) == Receive(timeout=6.0)


def test_a_cut_delivers_what_the_read_still_holds_then_the_break() -> None:
    listener = driver()
    server = open_ask(listener, 0.0)
    messages = [log_message(index) for index in range(3)]
    read = server.start_path() + b"".join(map(server.send_notification, messages))
    listener.data_received(0.1, read)
    first = delivered(listener, 0.1)
    assert first[1:] == [NotificationReceived(notification=messages[0])]
    listener.connection_lost(0.2, "ECONNRESET: Connection reset by peer")
    rest = path_end(listener, 0.2)
    assert rest[:2] == [NotificationReceived(notification=message) for message in messages[1:]]
    assert [type(item) for item in rest[2:]] == [StreamBroken, ReaskNeeded, RetryScheduled]
