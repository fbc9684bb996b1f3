"""A proxy and a server connected in memory, the way h11's tests pair a client and a server.

Every scenario is run with the server's bytes handed over whole and one
byte at a time; both must give the proxy the same events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio import (
    NEED_DATA,
    Ask,
    ErrorData,
    Exchange,
    LocalProtocolError,
    Notification,
    Profile,
)
from diverge_notifications.sansio.client.connection import ExchangeConnection, ProxyConnection
from diverge_notifications.sansio.events import (
    AskRefused,
    ConnectionClosed,
    Event,
    ExchangeAsked,
    NotificationReceived,
    NotificationsAsked,
    NotServed,
    ReaskNeeded,
    ResultReceived,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
)
from diverge_notifications.sansio.server.connection import ServerConnection
from diverge_notifications.sansio.server.hub import Hub, Interest
from tests.strategies import notifications

AUTHORITY = "127.0.0.1:8080"
PROGRESS = Notification("notifications/progress", {"progressToken": 7, "progress": 1, "total": 2})
LIST_CHANGED = Notification("notifications/tools/list_changed")
BOOM = ErrorData(code=-32603, message="the MCP server went away", data={"retry": True})


def drain(connection: Any) -> list[Event]:
    events: list[Event] = []
    while (event := connection.next_event()) is not NEED_DATA:
        events.append(event)
    return events


def server_events(client: Any, server: ServerConnection) -> list[Event]:
    """Hand the client's ask to the server; the server's events."""
    server.receive_data(client.data_to_send())
    assert client.data_to_send() == b""  # the ask is sent once
    return drain(server)


def proxy_events(
    client: Any, stream: bytes, *, close: bool = True, bytewise: bool = False
) -> list[Event]:
    """Hand the server's bytes to the client (then end of file); the client's events."""
    pieces = [stream[i : i + 1] for i in range(len(stream))] if bytewise else [stream]
    events: list[Event] = []
    for piece in pieces:
        if piece:
            client.receive_data(piece)
        events.extend(drain(client))
    if close:
        client.receive_data(b"")
        events.extend(drain(client))
    return events


Script = Callable[[ServerConnection], bytes]


def run_path(
    script: Script,
    *,
    server_profile: Profile = Profile.PROVIDER,
    proxy_profile: Profile = Profile.PROVIDER,
    close: bool = True,
) -> list[Event]:
    """One notifications ask; ``script`` writes the server's side; the proxy's events.

    The scenario runs twice, whole and byte by byte, and both must agree.
    """
    results = []
    for bytewise in (False, True):
        proxy = ProxyConnection(AUTHORITY, profile=proxy_profile)
        server = ServerConnection(profile=server_profile)
        assert server_events(proxy, server) == [NotificationsAsked(channel="c1")]
        stream = script(server)
        results.append(proxy_events(proxy, stream, close=close, bytewise=bytewise))
    assert results[0] == results[1]
    return results[0]


def received(*items: Notification) -> list[Event]:
    return [NotificationReceived(notification=item) for item in items]


OPENED = StreamOpened(channel="c1")


# --- paths ------------------------------------------------------------------------------------


def test_notifications_then_clean_end() -> None:
    def script(server: ServerConnection) -> bytes:
        return (
            server.start_path()
            + server.send_notification(PROGRESS)
            + server.send_notifications([LIST_CHANGED, PROGRESS])
            + server.end_path()
        )

    events = run_path(script)
    assert events == [
        OPENED,
        *received(PROGRESS, LIST_CHANGED, PROGRESS),
        StreamEnded(),
        ReaskNeeded(),
    ]


def test_clean_end_is_seen_before_the_connection_closes() -> None:
    events = run_path(
        lambda s: s.start_path() + s.send_notification(PROGRESS) + s.end_path(), close=False
    )
    assert events == [OPENED, *received(PROGRESS), StreamEnded(), ReaskNeeded()]


def test_nothing_then_clean_end_is_not_served() -> None:
    events = run_path(lambda s: s.start_path() + s.end_path())
    assert events[0] == OPENED
    assert isinstance(events[1], NotServed) and events[1].status == 200
    assert events[2:] == [ReaskNeeded()]


def test_keepalives_only_then_clean_end_is_not_served() -> None:
    def script(server: ServerConnection) -> bytes:
        return (
            server.start_path()
            + server.send_keepalive() * 1
            + server.send_keepalive()
            + server.end_path()
        )

    events = run_path(script)
    assert [type(event) for event in events] == [StreamOpened, NotServed, ReaskNeeded]


def test_keepalives_keep_a_path_open() -> None:
    events = run_path(
        lambda s: s.start_path() + s.send_keepalive() + s.send_keepalive(), close=False
    )
    assert events == [OPENED]


def test_error_first() -> None:
    events = run_path(lambda s: s.start_path() + s.send_error(BOOM))
    assert events == [OPENED, StreamErrored(error=BOOM), ReaskNeeded()]


def test_error_after_notifications() -> None:
    def script(server: ServerConnection) -> bytes:
        return server.start_path() + server.send_notification(PROGRESS) + server.send_error(BOOM)

    events = run_path(script)
    assert events == [OPENED, *received(PROGRESS), StreamErrored(error=BOOM), ReaskNeeded()]


def test_decline_is_not_served() -> None:
    events = run_path(lambda s: s.decline())
    assert [type(event) for event in events] == [StreamOpened, NotServed, ReaskNeeded]


def test_abrupt_close_mid_path() -> None:
    def script(server: ServerConnection) -> bytes:
        whole = server.start_path() + server.send_notification(PROGRESS)
        return whole + server.send_notification(LIST_CHANGED)[:-7]  # cut inside the frame

    events = run_path(script)
    assert events[:2] == [OPENED, *received(PROGRESS)]
    assert isinstance(events[2], StreamBroken)
    assert events[3:] == [ReaskNeeded()]


def test_abrupt_close_between_frames() -> None:
    events = run_path(lambda s: s.start_path() + s.send_notification(PROGRESS))
    assert events[:2] == [OPENED, *received(PROGRESS)]
    assert isinstance(events[2], StreamBroken) and events[3:] == [ReaskNeeded()]


def test_raw_bytes_arrive_unchanged() -> None:
    raw = b'{"method":"vendor/thing",  "params":{"_meta":{"z":1},"a":[1.0,2]}, "extra":null}'
    proxy = ProxyConnection(AUTHORITY)
    server = ServerConnection()
    server_events(proxy, server)
    events = proxy_events(
        proxy, server.start_path() + server.send_notification(raw) + server.end_path()
    )
    notification = events[1]
    assert isinstance(notification, NotificationReceived)
    assert notification.notification.to_bytes() == raw


# --- the container profile --------------------------------------------------------------------


def test_container_notifications_then_connection_lost_is_broken() -> None:
    events = run_path(
        lambda s: s.start_path() + s.send_notification(PROGRESS),
        server_profile=Profile.CONTAINER,
        proxy_profile=Profile.CONTAINER,
    )
    assert events[:2] == [OPENED, *received(PROGRESS)]
    assert isinstance(events[2], StreamBroken)


def test_container_error_first_then_finish() -> None:
    events = run_path(
        lambda s: s.start_path() + s.send_error(BOOM),
        server_profile=Profile.CONTAINER,
        proxy_profile=Profile.CONTAINER,
    )
    assert events == [OPENED, StreamErrored(error=BOOM), ReaskNeeded()]


def test_container_server_refuses_what_the_container_proxy_would_call_a_violation() -> None:
    server = ServerConnection(profile=Profile.CONTAINER)
    server_events(ProxyConnection(AUTHORITY, profile=Profile.CONTAINER), server)
    server.start_path()
    server.send_notification(PROGRESS)
    with pytest.raises(LocalProtocolError):
        server.end_path()
    with pytest.raises(LocalProtocolError):
        server.send_error(BOOM)


@pytest.mark.parametrize("ending", ["end", "error"])
def test_provider_server_to_container_proxy_is_a_violation(ending: str) -> None:
    def script(server: ServerConnection) -> bytes:
        head = server.start_path() + server.send_notification(PROGRESS)
        return head + (server.end_path() if ending == "end" else server.send_error(BOOM))

    events = run_path(script, proxy_profile=Profile.CONTAINER)
    assert events[:2] == [OPENED, *received(PROGRESS)]
    assert isinstance(events[2], StreamBroken) and "container profile" in events[2].reason


# --- refusals reach the proxy as "not served" -------------------------------------------------


def test_refusal_is_not_served_with_its_status() -> None:
    proxy = ProxyConnection(AUTHORITY, token="wrong")
    server = ServerConnection(token="right")
    events = server_events(proxy, server)
    assert isinstance(events[0], AskRefused) and events[0].status == 401
    assert events[1:] == [ConnectionClosed()]
    proxy_side = proxy_events(proxy, server.data_to_send())
    assert isinstance(proxy_side[0], NotServed) and proxy_side[0].status == 401
    assert proxy_side[1:] == [ReaskNeeded()]


def test_the_right_token_is_served() -> None:
    proxy = ProxyConnection(AUTHORITY, token="right")
    server = ServerConnection(token="right")
    assert server_events(proxy, server) == [NotificationsAsked(channel="c1")]


def test_other_target_is_404_not_served() -> None:
    proxy = ProxyConnection(AUTHORITY, target="/base/requests")
    server = ServerConnection()
    events = server_events(proxy, server)
    assert isinstance(events[0], AskRefused) and events[0].status == 404
    proxy_side = proxy_events(proxy, server.data_to_send())
    assert isinstance(proxy_side[0], NotServed) and proxy_side[0].status == 404


# --- one-shot exchanges -----------------------------------------------------------------------

CALL = Ask(exchange=Exchange.CALL_TOOL, params={"name": "echo", "arguments": {"text": "hi"}})


def run_exchange(script: Script, ask: Ask = CALL) -> list[Event]:
    results = []
    for bytewise in (False, True):
        client = ExchangeConnection(AUTHORITY, ask)
        server = ServerConnection()
        assert server_events(client, server) == [ExchangeAsked(ask=ask, channel="c1")]
        results.append(proxy_events(client, script(server), bytewise=bytewise))
    assert results[0] == results[1]
    return results[0]


def test_exchange_answer() -> None:
    result = {"content": [{"type": "text", "text": "hi"}], "isError": False}
    events = run_exchange(lambda s: s.answer(result))
    assert events[0] == OPENED
    assert isinstance(events[1], ResultReceived) and events[1].result == result
    assert events[2:] == [StreamEnded()]


def test_exchange_answer_raw_bytes() -> None:
    raw = b'{"tools": [ {"name":"echo"} ]}'
    events = run_exchange(lambda s: s.answer(raw), Ask(exchange=Exchange.LIST_TOOLS))
    assert isinstance(events[1], ResultReceived) and events[1].raw == raw


def test_exchange_answer_error() -> None:
    events = run_exchange(lambda s: s.answer_error(BOOM))
    assert events == [OPENED, StreamErrored(error=BOOM)]


def test_exchange_decline() -> None:
    events = run_exchange(lambda s: s.decline())
    assert [type(event) for event in events] == [StreamOpened, NotServed]


# --- a hub in the loop ------------------------------------------------------------------------


def test_hub_fan_out_over_two_paths() -> None:
    hub = Hub()
    paths = []
    for interest in (None, Interest(tools_list_changed=True)):
        proxy = ProxyConnection(AUTHORITY)
        server = ServerConnection()
        server_events(proxy, server)
        paths.append((proxy, server, hub.subscribe(interest), server.start_path()))
    debug = Notification("notifications/message", {"level": "debug", "data": "noise"})
    for notification in (PROGRESS, LIST_CHANGED, debug):
        hub.publish(notification)
    outcomes = []
    for proxy, server, subscriber, head in paths:
        stream = head + server.send_notifications(subscriber.take()) + server.end_path()
        subscriber.close()
        outcomes.append(proxy_events(proxy, stream))
    end = [StreamEnded(), ReaskNeeded()]
    assert outcomes[0] == [OPENED, *received(PROGRESS, LIST_CHANGED, debug), *end]
    # Progress is not a topic the filter names, so it passes; the log message does not.
    assert outcomes[1] == [OPENED, *received(PROGRESS, LIST_CHANGED), *end]


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(notifications(), max_size=6),
    grouping=st.lists(st.integers(1, 3), min_size=1, max_size=6),
    data=st.data(),
)
def test_any_notifications_at_any_split(
    items: list[Notification], grouping: list[int], data: st.DataObject
) -> None:
    proxy = ProxyConnection(AUTHORITY)
    server = ServerConnection()
    server_events(proxy, server)
    stream = bytearray(server.start_path())
    position = 0
    for size in grouping * (len(items) + 1):
        if position >= len(items):
            break
        stream += server.send_notifications(items[position : position + size])
        stream += server.send_keepalive()
        position += size
    stream += server.end_path()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    events: list[Event] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        if start < end:
            proxy.receive_data(bytes(stream[start:end]))
            events.extend(drain(proxy))
    proxy.receive_data(b"")
    events.extend(drain(proxy))
    if items:
        assert events == [OPENED, *received(*items), StreamEnded(), ReaskNeeded()]
        assert [event.notification.to_bytes() for event in events[1:-2]] == [  # type: ignore[attr-defined]
            item.to_bytes() for item in items
        ]
    else:
        assert [type(event) for event in events] == [StreamOpened, NotServed, ReaskNeeded]
