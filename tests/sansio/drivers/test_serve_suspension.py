"""The serving driver while its hub is suspended (a broker between replicas is lost).

A kind-4 ask is answered ``503`` with ``Retry-After`` and the hub's reason,
exchanges are answered as before, and an open path writes what its
subscriber had queued and then ends with the reason: an error message in
the provider profile and in the container profile before any
notification, the connection closed without the end of the body in the
container profile after notifications. The peer of each connection is a
real sans-IO :class:`ProxyConnection` or :class:`ExchangeConnection`, so the
checks are on the events a listener of this library sees.
"""

from __future__ import annotations

from typing import Any

import pytest

from diverge_notifications.sansio import (
    Ask,
    Exchange,
    ExchangeConnection,
    LocalProtocolError,
    NotificationReceived,
    NotServed,
    Profile,
    ProxyConnection,
    ReaskNeeded,
    ServerConnection,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
)
from diverge_notifications.sansio.drivers.actions import Close, RunHandler, WaitUntil, Write
from diverge_notifications.sansio.drivers.reports import (
    PathEnd,
    PathEndedReport,
    RefusalReport,
    ServeReport,
)
from diverge_notifications.sansio.drivers.serve import ServingState
from diverge_notifications.sansio.drivers.settings import DEFAULT_LINGER
from diverge_notifications.sansio.mcp.model import ErrorCode
from tests.sansio.drivers.test_serve import START, Served, events, progress

REASON = "Redis broker redis://127.0.0.1:6379 channel 'diverge:notifications': connection lost"


def counted(**options: Any) -> tuple[Served, list[tuple[str, int, str]]]:
    """A served connection, and what it reports of the suspension with the count so far.

    Each item is ``("refused", asks_suspended, reason)`` or ``("ended",
    paths_suspended, reason)``, the count read from the server's totals as
    the report is made.
    """
    reported: list[tuple[str, int, str]] = []

    def report(told: ServeReport) -> None:
        stats = totals.snapshot()
        if type(told) is RefusalReport:
            assert told.status == 503 and stats.refusals[503] == stats.asks_suspended
            reported.append(("refused", stats.asks_suspended, told.reason))
        elif type(told) is PathEndedReport and told.how is PathEnd.SUSPENDED:
            assert told.reason is not None
            reported.append(("ended", stats.paths_suspended, told.reason))

    served = Served(report=report, **options)
    totals = served.settings.totals
    return served, reported


def suspended(**options: Any) -> tuple[Served, list[tuple[str, int, str]]]:
    """A served connection whose hub is suspended, and the counts it reports."""
    served, reported = counted(**options)
    served.hub.suspend(REASON)
    return served, reported


def output(served: Served, now: float) -> bytes:
    """The next write at ``now``, past the turn a path gives the others after a batch."""
    action = served.act(now)
    if action == WaitUntil(deadline=now, wants_read=True):
        action = served.act(now)
    assert isinstance(action, Write), action
    return action.data


def opened(profile: Profile = Profile.PROVIDER) -> tuple[Served, ProxyConnection, list[Any]]:
    """A path open on a hub that is not suspended yet."""
    served, reported = counted(profile=profile)
    peer = ProxyConnection("x", profile=profile)
    served.serving.data_received(START, peer.data_to_send())
    assert [type(event) for event in events(peer, served.write(START))] == [StreamOpened]
    return served, peer, reported


def test_a_notification_ask_is_not_served_while_the_hub_is_suspended() -> None:
    served, reported = suspended()
    peer = ProxyConnection("x")
    served.serving.data_received(START, peer.data_to_send())
    assert served.state() is ServingState.FINISHING and served.hub.subscribers == 0
    written = served.write(START)
    assert written.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert b"\r\nRetry-After: 1\r\n" in written
    received = events(peer, written)
    assert isinstance(received[0], NotServed) and received[0].status == 503
    assert REASON in received[0].reason  # the body names the broker
    assert served.act(START) == Close(linger=DEFAULT_LINGER)  # the peer reads its 503
    assert reported == [("refused", 1, REASON)]


def test_once_resumed_the_hub_serves_again() -> None:
    served, reported = suspended()
    served.hub.resume()
    peer = ProxyConnection("x")
    served.serving.data_received(START, peer.data_to_send())
    assert served.state() is ServingState.PATH and served.hub.subscribers == 1
    assert [type(event) for event in events(peer, served.write(START))] == [StreamOpened]
    assert reported == []


def test_an_exchange_is_answered_as_before_while_suspended() -> None:
    ask = Ask(exchange=Exchange.LIST_TOOLS)
    served, _ = suspended(answers_exchanges=True)
    peer = ExchangeConnection("x", ask)
    served.serving.data_received(START, peer.data_to_send())
    assert served.act(START) == RunHandler(ask=ask)
    served.serving.handler_answered({"tools": []})
    assert served.write(START).startswith(b"HTTP/1.1 200 OK\r\n")
    # Without a handler: declined ("not served" with 200), not refused.
    served, reported = suspended()
    peer = ExchangeConnection("x", ask)
    served.serving.data_received(START, peer.data_to_send())
    written = served.write(START)
    assert written.startswith(b"HTTP/1.1 200 OK\r\n")
    assert [type(event) for event in events(peer, written)] == [StreamOpened, NotServed]
    assert reported == []


def test_a_provider_path_writes_its_queue_then_ends_with_the_reason() -> None:
    served, peer, reported = opened()
    for step in range(3):
        served.hub.publish(progress(step))
    assert output(served, START + 1)
    wakes = served.wakes
    for step in range(3, 6):
        served.hub.publish(progress(step))
    assert served.hub.suspend(REASON) == 1
    assert served.wakes > wakes  # the writer is woken to end the path
    received = events(peer, output(served, START + 2))
    assert received[:3] == [NotificationReceived(notification=progress(s)) for s in range(3, 6)]
    assert [type(event) for event in received[3:]] == [StreamErrored, ReaskNeeded]
    error = received[3]
    assert isinstance(error, StreamErrored)
    assert error.error.message == REASON and error.error.code == int(ErrorCode.INTERNAL_ERROR)
    # No keep-alive after the end, however long the adapter waits: Close.
    assert served.act(START + 100) == Close()
    assert served.hub.subscribers == 0
    assert reported == [("ended", 1, REASON)]


def test_a_container_path_with_no_notification_yet_gets_the_error_and_the_finish() -> None:
    served, peer, reported = opened(Profile.CONTAINER)
    served.hub.suspend(REASON)
    received = events(peer, output(served, START + 1))
    assert [type(event) for event in received] == [StreamErrored, ReaskNeeded]
    assert served.act(START + 1) == Close()
    assert reported == [("ended", 1, REASON)]


def test_a_container_path_after_notifications_closes_without_its_end() -> None:
    served, peer, reported = opened(Profile.CONTAINER)
    served.hub.publish(progress(0))
    events(peer, output(served, START + 1))
    served.hub.publish(progress(1))
    served.hub.suspend(REASON)
    # The queue goes out; neither an error nor a finish may follow it.
    received = events(peer, output(served, START + 2))
    assert received == [NotificationReceived(notification=progress(1))]
    assert served.act(START + 2) == Close()
    assert [type(event) for event in events(peer, b"")] == [StreamBroken, ReaskNeeded]
    assert reported == [("ended", 1, REASON)]


def test_nothing_queued_ends_at_once_with_no_keepalive_first() -> None:
    served, peer, _ = opened(Profile.CONTAINER)
    served.hub.publish(progress(0))
    events(peer, output(served, START))
    served.hub.suspend(REASON)
    # Past the keep-alive deadline: still no keep-alive, the connection just closes.
    assert served.act(START + 60) == Close()


def test_a_shutdown_after_the_hub_ended_the_path_still_gives_the_reason() -> None:
    served, peer, reported = opened()
    served.hub.publish(progress(0))
    served.hub.suspend(REASON)
    served.serving.shutdown()
    received = events(peer, output(served, START + 1))
    assert [type(event) for event in received] == [
        NotificationReceived,
        StreamErrored,
        ReaskNeeded,
    ]
    assert reported == [("ended", 1, REASON)]


def test_a_clean_shutdown_is_unchanged() -> None:
    served, peer, reported = opened()
    served.serving.shutdown()
    assert [type(event) for event in events(peer, output(served, START + 1))] == [
        NotServed,
        ReaskNeeded,
    ]
    served, peer, _ = opened()
    served.hub.publish(progress(0))
    served.serving.shutdown()
    received = events(peer, output(served, START + 1))
    assert [type(event) for event in received] == [NotificationReceived, StreamEnded, ReaskNeeded]
    assert reported == []


def _asked() -> ServerConnection:
    connection = ServerConnection()
    connection.receive_data(ProxyConnection("x").data_to_send())
    assert type(connection.next_event()).__name__ == "NotificationsAsked"
    return connection


@pytest.mark.parametrize(
    ("status", "reason", "headers"),
    [
        (200, "fine", []),
        (302, "elsewhere", []),
        (True, "a bool", []),
        (503, b"bytes", []),
        (503, "x", [("Bad Name", "1")]),
        (503, "x", [("Retry-After", "1\r\nInjected: yes")]),
        (503, "x", [("Retry-After", 1)]),
    ],
)
def test_refuse_takes_an_error_status_a_reason_and_sound_headers(
    status: Any, reason: Any, headers: Any
) -> None:
    connection = _asked()
    with pytest.raises(LocalProtocolError):
        connection.refuse(status, reason, headers=headers)
    # Refused and nothing changed: the path may still be opened.
    assert connection.start_path().startswith(b"HTTP/1.1 200 OK\r\n")


def test_refuse_follows_only_a_notification_ask() -> None:
    connection = _asked()
    connection.start_path()
    with pytest.raises(LocalProtocolError, match="refuse is not allowed in state PATH_OPEN"):
        connection.refuse(503, "too late")
    exchange = ServerConnection()
    exchange.receive_data(ExchangeConnection("x", Ask(exchange=Exchange.LIST_TOOLS)).data_to_send())
    exchange.next_event()
    with pytest.raises(LocalProtocolError, match="EXCHANGE_ASKED"):
        exchange.refuse(503, "an exchange is declined or answered")
