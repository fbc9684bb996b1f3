"""The serving driver without I/O: every action, driven by hand on a fake clock.

The peer of each connection is a real sans-IO :class:`ProxyConnection` (or
:class:`ExchangeConnection`): it writes the ask the driver reads, and reads
what the driver's ``Write`` actions carry, so the checks are on the events
a listener of this library would see.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from diverge_notifications.sansio import (
    NEED_DATA,
    Ask,
    ErrorData,
    Event,
    Exchange,
    ExchangeConnection,
    Hub,
    LocalProtocolError,
    Notification,
    NotificationReceived,
    NotServed,
    Profile,
    ProxyConnection,
    ReaskNeeded,
    ResultReceived,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
)
from diverge_notifications.sansio.drivers.actions import (
    Close,
    RunHandler,
    ServeAction,
    WaitUntil,
    Write,
)
from diverge_notifications.sansio.drivers.serve import ServingConnection, ServingState
from diverge_notifications.sansio.drivers.settings import DEFAULT_LINGER, ServeSettings
from diverge_notifications.sansio.mcp.model import ErrorCode

KEEPALIVE = 5.0
ASK_TIMEOUT = 2.0
START = 100.0


def progress(step: int) -> Notification:
    return Notification("notifications/progress", {"progressToken": "job", "progress": step})


#: What a connection is made with beside its server's settings.
CONNECTION_OPTIONS = ("peer", "report", "hub_lock")


def answer_nothing(ask: Ask) -> None:
    """An exchange handler for settings that answer exchanges; the tests answer by hand."""


class Served:
    """A serving connection accepted at ``START``, its hub, and how often it was woken."""

    def __init__(self, **options: Any) -> None:
        self.hub = Hub()
        self.wakes = 0
        options.setdefault("keepalive_interval", KEEPALIVE)
        options.setdefault("ask_timeout", ASK_TIMEOUT)
        if options.pop("answers_exchanges", False):
            options["exchange_handler"] = answer_nothing
        connection = {name: options.pop(name) for name in CONNECTION_OPTIONS if name in options}
        self.settings: ServeSettings[Any] = ServeSettings(**options)
        self.serving = ServingConnection(
            self.hub, self.settings, wake=self._wake, now=START, **connection
        )

    def _wake(self) -> None:
        self.wakes += 1

    def state(self) -> ServingState:
        return self.serving.state

    def act(self, now: float) -> ServeAction:
        return self.serving.next_action(now)

    def write(self, now: float) -> bytes:
        action = self.act(now)
        assert isinstance(action, Write), action
        return action.data


def events(peer: ProxyConnection | ExchangeConnection, data: bytes) -> list[Event]:
    peer.receive_data(data)
    found: list[Event] = []
    while (event := peer.next_event()) is not NEED_DATA:
        assert not isinstance(event, type(NEED_DATA))
        found.append(event)
    return found


def asked(served: Served, now: float = START) -> ProxyConnection:
    """The notification ask read; the head written."""
    peer = ProxyConnection("x")
    served.serving.data_received(now, peer.data_to_send())
    assert served.serving.state is ServingState.PATH and served.hub.subscribers == 1
    assert [type(event) for event in events(peer, served.write(now))] == [StreamOpened]
    return peer


def test_a_path_from_its_head_to_its_clean_end() -> None:
    served = Served()
    peer = asked(served)
    # Nothing queued: wait for the hub, the peer, or the keep-alive.
    assert served.act(START) == WaitUntil(deadline=START + KEEPALIVE, wants_read=True)
    for step in range(3):
        served.hub.publish(progress(step))
    assert served.wakes >= 1
    # Published while the adapter waited: one write, one chunk.
    received = events(peer, served.write(101.0))
    assert received == [NotificationReceived(notification=progress(step)) for step in range(3)]
    assert served.act(101.0) == WaitUntil(deadline=101.0 + KEEPALIVE, wants_read=True)
    # Silence until the deadline: a keep-alive, and the next deadline from there.
    assert served.act(105.9) == WaitUntil(deadline=106.0, wants_read=True)
    assert events(peer, served.write(106.0)) == []
    assert served.act(106.0) == WaitUntil(deadline=111.0, wants_read=True)
    # The server closes: what is queued, then the clean end, then Close.
    served.hub.publish(progress(3))
    served.serving.shutdown()
    assert served.state() is ServingState.ENDING
    assert [type(event) for event in events(peer, served.write(107.0))] == [
        NotificationReceived,
        StreamEnded,
        ReaskNeeded,
    ]
    assert served.act(107.0) == Close()
    assert served.state() is ServingState.CLOSED and served.hub.subscribers == 0
    assert served.act(108.0) == Close()


def test_a_backlog_goes_out_in_batches_with_a_turn_for_others_between() -> None:
    served = Served(max_batch=2)
    peer = asked(served)
    for step in range(5):
        served.hub.publish(progress(step))
    # Queued right after the head: the others get their turn first, as after a batch.
    assert served.act(101.0) == WaitUntil(deadline=101.0, wants_read=True)
    sizes = []
    for _ in range(2):
        sizes.append(len(events(peer, served.write(101.0))))
        # More is queued: a wait that is already over, so that others run first.
        assert served.act(101.0) == WaitUntil(deadline=101.0, wants_read=True)
    sizes.append(len(events(peer, served.write(101.0))))
    assert sizes == [2, 2, 1]
    assert served.act(101.0) == WaitUntil(deadline=101.0 + KEEPALIVE, wants_read=True)


def test_a_connection_that_does_not_complete_its_ask_is_closed_unanswered() -> None:
    served = Served()
    assert served.act(START) == WaitUntil(deadline=START + ASK_TIMEOUT, wants_read=True)
    served.serving.data_received(101.0, b"POST /requests HTTP/1.1\r\n")
    assert served.act(101.9) == WaitUntil(deadline=START + ASK_TIMEOUT, wants_read=True)
    assert served.act(START + ASK_TIMEOUT) == Close()  # no Write: nothing to answer


def answered(result: object) -> Callable[[Event], bool]:
    return lambda event: isinstance(event, ResultReceived) and event.result == result


def errored(code: int, message: str) -> Callable[[Event], bool]:
    return lambda event: (
        isinstance(event, StreamErrored)
        and event.error.code == code
        and event.error.message.startswith(message)
    )


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param({"tools": []}, answered({"tools": []}), id="result"),
        pytest.param(b'{"tools":[]}', answered({"tools": []}), id="json-bytes"),
        pytest.param(ErrorData(code=-32601, message="no"), errored(-32601, "no"), id="error"),
        pytest.param(None, lambda event: isinstance(event, NotServed), id="declined"),
        pytest.param([1, 2], errored(-32603, "invalid result: "), id="not-an-object"),
    ],
)
def test_an_exchange_is_answered_by_its_handler(
    answer: Any, expected: Callable[[Event], bool]
) -> None:
    served = Served(answers_exchanges=True)
    ask = Ask(exchange=Exchange.LIST_TOOLS)
    peer = ExchangeConnection("x", ask)
    served.serving.data_received(START, peer.data_to_send())
    assert served.act(START) == RunHandler(ask=ask)
    # While the handler runs, nothing to do but read (and no ask deadline).
    assert served.act(START + 1000.0) == WaitUntil(deadline=None, wants_read=True)
    served.serving.handler_answered(answer)
    opened, answer_event, *_ = events(peer, served.write(START + 1000.0))
    assert isinstance(opened, StreamOpened)
    assert expected(answer_event), answer_event
    assert served.act(START + 1000.0) == Close()


def test_a_handler_that_failed_is_answered_with_an_internal_error() -> None:
    served = Served(answers_exchanges=True)
    peer = ExchangeConnection("x", Ask(exchange=Exchange.LIST_TOOLS))
    served.serving.data_received(START, peer.data_to_send())
    assert isinstance(served.act(START), RunHandler)
    served.serving.handler_failed("ValueError: no such tool")
    error = ErrorData(code=int(ErrorCode.INTERNAL_ERROR), message="ValueError: no such tool")
    assert events(peer, served.write(START))[1] == StreamErrored(error=error)


def test_without_a_handler_an_exchange_is_declined() -> None:
    served = Served()
    peer = ExchangeConnection("x", Ask(exchange=Exchange.LIST_TOOLS))
    served.serving.data_received(START, peer.data_to_send())
    found = events(peer, served.write(START))
    assert [type(event) for event in found[:2]] == [StreamOpened, NotServed]
    assert served.act(START) == Close()


def test_a_refused_ask_is_answered_then_closed_lingering() -> None:
    served = Served(token="secret")
    served.serving.data_received(START, ProxyConnection("x").data_to_send())
    assert served.write(START).startswith(b"HTTP/1.1 401 ")
    # Read and discard a while, so that the peer reads the 401, not a reset.
    assert served.act(START) == Close(linger=DEFAULT_LINGER)


def test_shutdown_lets_a_running_handler_answer_first() -> None:
    served = Served(answers_exchanges=True)
    peer = ExchangeConnection("x", Ask(exchange=Exchange.LIST_TOOLS))
    served.serving.data_received(START, peer.data_to_send())
    assert isinstance(served.act(START), RunHandler)
    served.serving.shutdown()
    assert served.act(START) == WaitUntil(deadline=None, wants_read=True)
    served.serving.handler_answered({"tools": []})
    assert answered({"tools": []})(events(peer, served.write(START))[1])
    assert served.act(START) == Close()


def test_shutdown_before_the_ask_closes_without_an_answer() -> None:
    served = Served()
    served.serving.shutdown()
    assert served.act(START) == Close()


@pytest.mark.parametrize("published", [False, True])
def test_in_the_container_profile_a_path_with_notifications_ends_with_the_connection(
    published: bool,
) -> None:
    served = Served(profile=Profile.CONTAINER)
    peer = ProxyConnection("x", profile=Profile.CONTAINER)
    served.serving.data_received(START, peer.data_to_send())
    events(peer, served.write(START))
    if published:
        served.hub.publish(progress(1))
        assert served.act(START) == WaitUntil(deadline=START, wants_read=True)
        assert len(events(peer, served.write(START))) == 1
    served.serving.shutdown()
    if published:
        # No finish may follow notifications: nothing more is written.
        assert served.act(START) == Close()
        assert isinstance(events(peer, b"")[0], StreamBroken)
    else:
        assert isinstance(events(peer, served.write(START))[0], NotServed)
        assert served.act(START) == Close()


def test_the_peer_going_away_ends_the_path_and_its_subscription() -> None:
    served = Served()
    asked(served)
    served.serving.data_received(101.0, b"")
    assert not served.serving.wants_read
    assert served.act(101.0) == Close()
    assert served.hub.subscribers == 0
    served.hub.publish(progress(1))  # nobody is subscribed: nothing to write
    assert served.act(101.0) == Close()


def test_a_lost_connection_closes_and_an_answer_after_it_is_dropped() -> None:
    served = Served(answers_exchanges=True)
    served.serving.data_received(
        START, ExchangeConnection("x", Ask(exchange=Exchange.LIST_TOOLS)).data_to_send()
    )
    assert isinstance(served.act(START), RunHandler)
    served.serving.connection_lost()
    served.serving.handler_answered({"tools": []})  # nobody to answer
    assert served.act(START) == Close()


Report = Callable[[ServingConnection], None]


@pytest.mark.parametrize(
    "report",
    [
        pytest.param(lambda serving: serving.handler_answered({}), id="handler_answered"),
        pytest.param(lambda serving: serving.handler_failed("x"), id="handler_failed"),
    ],
)
def test_an_answer_without_an_exchange_is_refused_and_changes_nothing(report: Report) -> None:
    served = Served()
    asked(served)
    with pytest.raises(LocalProtocolError, match="not allowed in state PATH"):
        report(served.serving)
    assert served.serving.state is ServingState.PATH
    assert served.act(START) == WaitUntil(deadline=START + KEEPALIVE, wants_read=True)
