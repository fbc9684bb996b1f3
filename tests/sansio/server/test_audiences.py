"""Several tokens: each ask and path belongs to the audience of its token, and the hub's audiences.

A server given several tokens accepts each one; the ask it reads names the
audience of the one it carried (a short digest, never the token). The hub
delivers what is published to an audience to that audience's subscribers
and to those of none, and what is published to no audience to everyone.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from diverge_notifications.sansio import (
    NEED_DATA,
    ExchangeAsked,
    Hub,
    Interest,
    Notification,
    NotificationsAsked,
    NotificationTooLarge,
    ServerConnection,
)
from diverge_notifications.sansio.drivers.reports import PathEndedReport, PathOpenedReport
from diverge_notifications.sansio.drivers.serve import ServingConnection
from diverge_notifications.sansio.drivers.settings import ServeSettings
from diverge_notifications.sansio.events import AskRefused
from diverge_notifications.sansio.wire.asks import Ask, Exchange, encode_ask
from diverge_notifications.sansio.wire.http import AUDIENCE_LENGTH, audience_of, check_tokens
from tests.sansio.server.test_connection import ask_request

ALPHA = "alpha-Token.1"
BETA = "beta-Token.2"


def progress(token: str, step: int = 1) -> Notification:
    return Notification("notifications/progress", {"progressToken": token, "progress": step})


def log(level: str) -> Notification:
    return Notification("notifications/message", {"level": level, "data": level})


# --- the audience of a token -------------------------------------------------------------


def test_an_audience_is_a_short_digest_that_never_shows_the_token() -> None:
    alpha, beta = audience_of(ALPHA), audience_of(BETA)
    assert re.fullmatch(f"[0-9a-f]{{{AUDIENCE_LENGTH}}}", alpha)
    assert alpha != beta
    assert alpha == audience_of(ALPHA)  # the same on every replica, every run
    assert ALPHA not in alpha and "alpha" not in alpha


@pytest.mark.parametrize(
    ("token", "tokens", "message"),
    [
        ("a", ["b"], "not both"),
        (None, [], "empty"),
        (None, "abc", "not one str"),
        (None, ["ok", "not ok"], "visible ASCII"),
        (None, ["ok", ""], "visible ASCII"),
    ],
)
def test_nonsense_in_token_and_tokens_is_a_value_error(
    token: str | None, tokens: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        check_tokens(token, tokens)
    with pytest.raises(ValueError, match=message):
        ServerConnection(token=token, tokens=tokens)
    with pytest.raises(ValueError, match=message):
        ServeSettings(token=token, tokens=tokens)


def test_the_tokens_in_use_come_from_token_or_tokens() -> None:
    assert ServeSettings().accepted == ()
    assert ServeSettings(token=ALPHA).accepted == (ALPHA,)
    assert ServeSettings(tokens=[ALPHA, BETA, ALPHA]).accepted == (ALPHA, BETA)
    assert ALPHA not in repr(ServeSettings(tokens=[ALPHA])) + repr(ServeSettings(token=ALPHA))


# --- the server connection ---------------------------------------------------------------


def read(conn: ServerConnection, request: bytes) -> list[object]:
    conn.receive_data(request)
    events: list[object] = []
    while (event := conn.next_event()) is not NEED_DATA:
        events.append(event)
    return events


def test_every_token_is_accepted_and_the_ask_names_the_audience_of_its_own() -> None:
    for token in (ALPHA, BETA):
        conn = ServerConnection(tokens=[ALPHA, BETA])
        assert read(conn, ask_request(token=token)) == [
            NotificationsAsked(channel="c1", audience=audience_of(token))
        ]
        assert conn.audience == audience_of(token)
    call = Ask(exchange=Exchange.CALL_TOOL, params={"name": "count"})
    conn = ServerConnection(tokens=[ALPHA, BETA])
    (event,) = read(conn, ask_request(encode_ask(call), token=BETA))
    assert isinstance(event, ExchangeAsked)
    assert event.ask.audience == audience_of(BETA)
    assert event.ask.params == call.params


@pytest.mark.parametrize("token", [None, "gamma", ALPHA + "x", ALPHA[:-1]])
def test_a_token_that_is_none_of_them_is_refused(token: str | None) -> None:
    (refused, _closed) = read(ServerConnection(tokens=[ALPHA, BETA]), ask_request(token=token))
    assert isinstance(refused, AskRefused) and refused.status == 401


def test_with_one_token_nothing_changes() -> None:
    for conn in (ServerConnection(token=ALPHA), ServerConnection(tokens=[ALPHA])):
        assert read(conn, ask_request(token=ALPHA)) == [NotificationsAsked(channel="c1")]
        assert conn.audience is None


# --- the hub -------------------------------------------------------------------------------


def test_a_publish_to_an_audience_reaches_it_and_those_of_none() -> None:
    hub = Hub()
    alpha, beta = audience_of(ALPHA), audience_of(BETA)
    first = hub.subscribe(audience=alpha)
    second = hub.subscribe(audience=beta)
    everyone = hub.subscribe()  # of no audience: hears every one
    assert hub.publish(progress("call-1"), audience=alpha) == 2
    assert hub.publish(progress("burst-1")) == 3
    assert first.take() == [progress("call-1"), progress("burst-1")]
    assert second.take() == [progress("burst-1")]
    assert everyone.take() == [progress("call-1"), progress("burst-1")]
    assert hub.publish(progress("nobody's"), audience="no-such-audience") == 1
    assert hub.audiences() == {alpha: 1, beta: 1}
    assert second.audience == beta and everyone.audience is None


def test_filters_still_apply_to_a_publish_to_an_audience() -> None:
    hub = Hub()
    warnings = hub.subscribe(Interest(log_level="warning"), audience="a")
    debug = hub.subscribe(Interest(log_level="debug"), audience="a")
    other = hub.subscribe(Interest(log_level="debug"), audience="b")
    unscoped = hub.subscribe(Interest(log_level="error"))
    assert hub.publish(log("info"), audience="a") == 1
    assert hub.publish(log("error"), audience="a") == 3
    assert warnings.take() == [log("error")]
    assert debug.take() == [log("info"), log("error")]
    assert unscoped.take() == [log("error")]
    assert other.take() == []


def test_audience_groups_go_with_their_last_subscriber() -> None:
    hub = Hub()
    subscriber = hub.subscribe(audience="a")
    subscriber.close()
    assert hub.audiences() == {}
    assert hub.publish(progress("t"), audience="a") == 0
    assert hub.subscribers == 0


def test_a_passing_on_subscriber_takes_each_notification_with_its_audience() -> None:
    hub = Hub()
    inlet = hub.subscribe()
    hub.publish(progress("mine"), audience="a")
    hub.publish(progress("everyone's"))
    assert inlet.take_addressed() == [(progress("mine"), "a"), (progress("everyone's"), None)]


def test_room_and_refusals_count_only_the_audience_reached() -> None:
    hub = Hub(queue_size=1, max_frame_size=128)
    full = hub.subscribe(audience="a")
    hub.subscribe(audience="b")
    assert hub.publish(progress("x"), audience="a") == 1
    assert not hub.room_for(progress("y"), audience="a")
    assert hub.room_for(progress("y"), audience="b")
    with pytest.raises(NotificationTooLarge):
        hub.publish(progress("x" * 200), audience="b")
    assert full.refused == 0 and hub.counts().refused == 1


@pytest.mark.parametrize(("audience", "error"), [("", ValueError), (7, TypeError)])
def test_an_audience_is_a_non_empty_str(audience: Any, error: type[Exception]) -> None:
    hub = Hub()
    with pytest.raises(error):
        hub.subscribe(audience=audience)
    with pytest.raises(error):
        hub.publish(progress("t"), audience=audience)


# --- the serving driver -------------------------------------------------------------------


def test_a_served_path_subscribes_with_its_audience_and_reports_it() -> None:
    hub = Hub()
    reports: list[object] = []
    settings: ServeSettings[Any] = ServeSettings(tokens=[ALPHA, BETA])
    serving = {
        token: ServingConnection(hub, settings, wake=lambda: None, now=0.0, report=reports.append)
        for token in (ALPHA, BETA)
    }
    for token, connection in serving.items():
        connection.data_received(0.0, ask_request(token=token))
        assert connection.path_open
    assert hub.audiences() == {audience_of(ALPHA): 1, audience_of(BETA): 1}
    hub.publish(progress("call"), audience=audience_of(ALPHA))
    assert b"call" in serving[ALPHA].take_output(0.0)
    assert b"call" not in serving[BETA].take_output(0.0)
    for connection in serving.values():
        connection.connection_lost()
    opened = [r.audience for r in reports if isinstance(r, PathOpenedReport)]
    ended = [r.audience for r in reports if isinstance(r, PathEndedReport)]
    assert opened == ended == [audience_of(ALPHA), audience_of(BETA)]
    assert not any(ALPHA in repr(r) or BETA in repr(r) for r in reports)
