"""The serving driver under pressure, without I/O: what the adapters rely on.

A stalled path is cut off with its queue freed and counted; a connection
beyond ``max_connections`` gets 503 with ``Retry-After`` and a lingering
close; a ``Write`` carries at most ``write_buffer`` bytes (one larger frame
alone); the peer is read at most ``max_discard`` bytes past its ask; the
server's totals and the reports agree with what was written; the hub's
frames go out as ``send_notifications`` would have written them.
"""

from __future__ import annotations

from typing import Any

import pytest

from diverge_notifications.sansio import (
    ExchangeConnection,
    Notification,
    NotificationReceived,
    NotServed,
    Profile,
    ProxyConnection,
    ServerConnection,
)
from diverge_notifications.sansio.drivers.actions import Close, WaitUntil, Write
from diverge_notifications.sansio.drivers.reports import (
    ExchangeReport,
    PathEnd,
    PathEndedReport,
    PathOpenedReport,
    RefusalReport,
    ServeReport,
)
from diverge_notifications.sansio.drivers.serve import ServingConnection
from diverge_notifications.sansio.drivers.settings import ServeSettings
from diverge_notifications.sansio.server.connection import ServerState
from diverge_notifications.sansio.server.hub import Hub
from diverge_notifications.sansio.wire.asks import Ask, Exchange
from diverge_notifications.sansio.wire.http import LAST_CHUNK, chunk
from tests.sansio.drivers.test_serve import START, Served, asked, events, progress


class Reported(Served):
    """A served connection whose reports and totals are kept."""

    def __init__(self, **options: Any) -> None:
        self.reports: list[ServeReport] = []
        options.setdefault("peer", "127.0.0.1:5555")
        super().__init__(report=self.reports.append, **options)
        self.totals = self.settings.totals


def big(step: int, size: int) -> Notification:
    return Notification(
        "notifications/progress", {"progressToken": "j", "progress": step, "p": "x" * size}
    )


def test_the_hubs_frames_go_out_as_send_notifications_writes_them() -> None:
    notifications = [progress(step) for step in range(5)]
    hub = Hub()
    subscriber = hub.subscribe()
    for notification in notifications:
        hub.publish(notification)
    ask = ProxyConnection("x").data_to_send()
    by_frames, by_notifications = ServerConnection(), ServerConnection()
    for connection in (by_frames, by_notifications):
        connection.receive_data(ask)
        connection.next_event()
        connection.start_path()
    assert by_frames.send_frames(subscriber.take_frames()) == (
        by_notifications.send_notifications(notifications)
    )
    assert by_frames.state is by_notifications.state
    assert by_frames.send_frames([]) == b""


def opened(profile: Profile = Profile.PROVIDER) -> ServerConnection:
    """A server connection whose path is open, no notification written yet."""
    connection = ServerConnection(profile=profile)
    connection.receive_data(ProxyConnection("x").data_to_send())
    connection.next_event()
    connection.start_path()
    return connection


@pytest.mark.parametrize("profile", list(Profile))
def test_one_frame_goes_out_as_the_general_path_writes_it(profile: Profile) -> None:
    hub = Hub()
    subscribers = [hub.subscribe() for _ in range(3)]
    first, second = progress(1), big(2, 70 * 1024)
    by_frames, by_notifications, other = opened(profile), opened(profile), opened(profile)
    for notification in (first, first, second, second, first):
        hub.publish(notification)
        for connection, subscriber in ((by_frames, subscribers[0]), (other, subscribers[1])):
            assert connection.send_frames(subscriber.take_frames()) == (
                by_notifications.send_notification(notification)
            )
            assert connection.state is by_notifications.state is ServerState.PATH_NOTIFYING
    frame = subscribers[2].take_frames()[0]
    assert by_frames.send_frames([frame]) == chunk(frame)
    # Several frames in the loop state: one chunk, as send_notifications writes it.
    assert by_frames.send_frames([frame, frame]) == chunk(frame + frame)
    assert by_frames.send_frames([]) == b""
    # A frame that is not bytes may change between writes: each write is of what it holds.
    changing = bytearray(frame)
    assert by_frames.send_frames([changing]) == chunk(frame)  # type: ignore[list-item]
    changing[-2:] = b"9}"
    assert changing != frame
    assert by_frames.send_frames([changing]) == chunk(bytes(changing))  # type: ignore[list-item]
    if profile is Profile.PROVIDER:
        assert by_frames.end_path() == LAST_CHUNK and by_frames.state is ServerState.DONE


class WatchedLock:
    """A hub lock that says whether it is held now (and is never entered twice)."""

    def __init__(self) -> None:
        self.held = False

    def __enter__(self) -> None:
        assert not self.held
        self.held = True

    def __exit__(self, *_: object) -> None:
        self.held = False


def test_with_a_hub_lock_the_path_takes_under_it_and_writes_the_same() -> None:
    lock = WatchedLock()
    locked, unlocked = Served(hub_lock=lock, queue_size=1), Served(queue_size=1)
    peers = [asked(served) for served in (locked, unlocked)]
    held_while_taking: list[bool] = []
    for step in range(3):
        for served in (locked, unlocked):
            assert isinstance(served.act(START + step), WaitUntil)  # nothing queued yet
            served.hub.publish(progress(step))
        # A publisher waiting for room is woken from inside the take.
        assert not locked.hub.room_for(progress(step + 1))
        locked.hub.when_room(lambda: held_while_taking.append(lock.held))
        now = START + step
        written = [served.write(now) for served in (locked, unlocked)]
        assert written[0] == written[1]
        assert events(peers[0], written[0]) == [NotificationReceived(notification=progress(step))]
    assert held_while_taking == [True, True, True] and not lock.held


def test_a_stalled_path_is_cut_off_its_queue_freed_and_counted() -> None:
    served = Reported(stall_timeout=7.0)
    asked(served)
    for step in range(10):
        served.hub.publish(progress(step))
    assert isinstance(served.act(START), WaitUntil)  # the head went out: the others' turn
    assert isinstance(served.act(START), Write)  # taken for writing: sent
    for step in range(10, 13):
        served.hub.publish(progress(step))
    served.serving.write_stalled(START + 7.0)
    assert served.act(START + 7.0) == Close(abort=True)
    assert served.hub.subscribers == 0
    end = served.reports[-1]
    assert end == PathEndedReport(
        peer="127.0.0.1:5555",
        channel="c1",
        how=PathEnd.STALLED,
        sent=10,
        dropped=3,
        freed=3,
        stall_timeout=7.0,
    )
    stats = served.totals.snapshot()
    assert (stats.paths_stalled, stats.notifications_sent, stats.notifications_dropped) == (
        1,
        10,
        3,
    )
    assert (stats.open_paths, stats.connections) == (0, 0)
    served.serving.connection_lost()  # the adapter's finally: nothing is counted twice
    assert served.totals.snapshot() == stats


def test_beyond_max_connections_503_and_a_lingering_close() -> None:
    settings: ServeSettings[Any] = ServeSettings(max_connections=1, linger=3.0)
    hub = Hub()
    first = ServingConnection(hub, settings, wake=lambda: None, now=START)
    assert settings.totals.connections == 1
    reports: list[ServeReport] = []
    second = ServingConnection(
        hub, settings, wake=lambda: None, now=START, peer="10.0.0.9:1", report=reports.append
    )
    assert settings.totals.connections == 1  # a refused one is not being served
    action = second.next_action(START)
    assert isinstance(action, Write) and action.data.startswith(b"HTTP/1.1 503 ")
    assert b"\r\nRetry-After: 1\r\n" in action.data and b"\r\nConnection: close\r\n" in action.data
    assert second.next_action(START) == Close(linger=3.0)
    (report,) = reports
    assert isinstance(report, RefusalReport) and (report.peer, report.status) == ("10.0.0.9:1", 503)
    assert dict(settings.totals.snapshot().refusals) == {503: 1}
    first.connection_lost()
    assert settings.totals.connections == 0
    third = ServingConnection(hub, settings, wake=lambda: None, now=START)
    assert not third.done  # room again


def test_a_refused_ask_is_reported_with_its_status_and_peer() -> None:
    served = Reported(token="secret", linger=1.5)
    served.serving.data_received(START, ProxyConnection("x").data_to_send())
    assert served.write(START).startswith(b"HTTP/1.1 401 ")
    assert served.act(START) == Close(linger=1.5)
    (report,) = served.reports
    assert isinstance(report, RefusalReport) and (report.status, report.peer) == (
        401,
        "127.0.0.1:5555",
    )
    assert dict(served.totals.snapshot().refusals) == {401: 1}


def test_a_write_carries_at_most_write_buffer_bytes_and_one_larger_frame_alone() -> None:
    served = Served(write_buffer=1000)
    peer = asked(served)
    served.hub.publish(big(0, 5000))
    for step in range(1, 11):
        served.hub.publish(big(step, 200))
    sizes: list[int] = []
    received: list[Notification] = []
    now = START
    while len(received) < 11:
        action = served.act(now)
        if isinstance(action, WaitUntil):
            continue  # the others' turn
        assert isinstance(action, Write)
        sizes.append(len(action.data))
        received += [
            e.notification for e in events(peer, action.data) if isinstance(e, NotificationReceived)
        ]
    assert sizes[0] > 5000  # the large frame, alone
    assert all(size <= 1000 + 16 for size in sizes[1:])  # frames, plus the chunk's framing
    assert [n.params["progress"] for n in received if n.params] == list(range(11))


def test_the_peer_is_read_at_most_max_discard_bytes_past_its_ask() -> None:
    served = Served(max_discard=100)
    asked(served)
    assert served.serving.wants_read
    served.serving.data_received(START, b"j" * 100)
    assert served.serving.wants_read
    served.serving.data_received(START, b"j")
    assert not served.serving.wants_read
    assert served.act(START) == WaitUntil(deadline=START + 5.0, wants_read=False)
    served.hub.publish(progress(1))
    assert isinstance(served.act(START), Write)  # the path goes on


def test_paths_and_exchanges_are_reported_and_counted() -> None:
    served = Reported()
    peer = asked(served)
    served.hub.publish(progress(1))
    assert served.act(START) == WaitUntil(deadline=START, wants_read=True)  # the others' turn
    events(peer, served.write(START))
    served.serving.data_received(START, b"")  # the listener went away
    assert served.reports == [
        PathOpenedReport(peer="127.0.0.1:5555", channel="c1"),
        PathEndedReport(
            peer="127.0.0.1:5555", channel="c1", how=PathEnd.PEER_CLOSED, sent=1, dropped=0, freed=0
        ),
    ]
    exchange = Reported(answers_exchanges=True)
    asker = ExchangeConnection("x", Ask(exchange=Exchange.LIST_TOOLS))
    exchange.serving.data_received(START, asker.data_to_send())
    exchange.act(START)  # RunHandler
    exchange.serving.handler_failed("it broke")
    events(asker, exchange.write(START))
    assert exchange.reports == [
        ExchangeReport(
            peer="127.0.0.1:5555",
            channel="c1",
            exchange="list_tools",
            outcome="internal error: it broke",
        )
    ]
    stats = exchange.totals.snapshot()
    assert (stats.exchanges_answered, stats.handler_failures, stats.asks_served) == (1, 1, 1)


def test_a_declined_exchange_is_an_answer_not_served() -> None:
    served = Reported()
    asker = ExchangeConnection("x", Ask(exchange=Exchange.LIST_TOOLS))
    served.serving.data_received(START, asker.data_to_send())
    found = events(asker, served.write(START))
    assert any(isinstance(event, NotServed) for event in found)
    assert served.reports[-1] == ExchangeReport(
        peer="127.0.0.1:5555", channel="c1", exchange="list_tools", outcome="declined"
    )
