"""ProxyConnection: the ask's bytes, scripted answers, and the path's rules.

Every scripted answer runs whole, one byte at a time and at
hypothesis-chosen splits, and must give the same events each time.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio import (
    NEED_DATA,
    Ask,
    ErrorData,
    Event,
    Exchange,
    ExchangeConnection,
    FrameError,
    LocalProtocolError,
    MessageRejected,
    Notification,
    NotificationReceived,
    NotServed,
    Profile,
    ProxyConnection,
    ReaskNeeded,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
    decode_message,
)
from diverge_notifications.sansio.client.bodies import END as _END
from diverge_notifications.sansio.client.bodies import ChunkedBody as _ChunkedBody
from diverge_notifications.sansio.client.connection import (
    MAX_INFORMATIONAL_HEADS,
    PROXY_TRANSITIONS,
    ProxyInput,
    ProxyOutcome,
    ProxyState,
)
from diverge_notifications.sansio.events import TERMINAL_EVENTS
from diverge_notifications.sansio.wire.framing import KEEPALIVE_FRAME
from diverge_notifications.sansio.wire.http import DEFAULT_MAX_HEAD_SIZE, channel_from_location
from tests.proxy_scripts import (
    AUTHORITY,
    CHANNEL,
    LAST_CHUNK,
    NOTIFICATIONS,
    SCRIPTS,
    ask_request,
    bytewise,
    chunk,
    error_frame,
    frame,
    notification_frame,
    path_head,
    refusal,
    run_proxy,
    split_at,
    whole,
)
from tests.strategies import notifications


def drain(connection: ProxyConnection) -> list[Event]:
    events: list[Event] = []
    while (event := connection.next_event()) is not NEED_DATA:
        assert isinstance(event, Event)
        events.append(event)
    return events


def check_path_rules(events: list[Event]) -> None:
    """StreamOpened only first; at most one terminal; one ReaskNeeded right after it, last."""
    assert all(not isinstance(event, StreamOpened) for event in events[1:])
    terminals = [i for i, event in enumerate(events) if isinstance(event, TERMINAL_EVENTS)]
    reasks = [i for i, event in enumerate(events) if isinstance(event, ReaskNeeded)]
    assert len(terminals) <= 1
    if terminals:
        assert reasks == [terminals[0] + 1] == [len(events) - 1]
    else:
        assert reasks == []


# --- the ask -------------------------------------------------------------------------


def test_the_ask_without_a_token() -> None:
    connection = ProxyConnection("127.0.0.1:8080")
    assert connection.data_to_send() == (
        b"POST /requests HTTP/1.1\r\n"
        b"Host: 127.0.0.1:8080\r\n"
        b"Content-Type: application/vnd.diverge.ask\r\n"
        b"Content-Length: 1\r\n"
        b"\r\n"
        b"\x04"
    )
    assert connection.data_to_send() == b""


def test_the_ask_with_a_token() -> None:
    connection = ProxyConnection("notify.example:443", token="s3cr3t-t0ken")
    assert connection.data_to_send() == (
        b"POST /requests HTTP/1.1\r\n"
        b"Host: notify.example:443\r\n"
        b"Content-Type: application/vnd.diverge.ask\r\n"
        b"Content-Length: 1\r\n"
        b"Authorization: Bearer s3cr3t-t0ken\r\n"
        b"\r\n"
        b"\x04"
    )


def test_the_ask_matches_the_scripts_helper_and_takes_a_target() -> None:
    assert ProxyConnection(AUTHORITY, token="t").data_to_send() == ask_request(token="t")
    request = ProxyConnection("h:1", target="/base/requests").data_to_send()
    assert request.startswith(b"POST /base/requests HTTP/1.1\r\nHost: h:1\r\n")


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"token": "bad\r\ntoken"}, ValueError),
        ({"token": ""}, ValueError),
        ({"token": "caf\u00e9"}, ValueError),
        ({"token": "a b"}, ValueError),
        ({"target": "/has space"}, LocalProtocolError),
        ({"target": "requests"}, ValueError),
        ({"target": ""}, ValueError),
        ({"max_head_size": 0}, ValueError),
        ({"max_frame_size": 0}, ValueError),
    ],
)
def test_bad_options_are_the_callers_mistake(options: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        ProxyConnection(AUTHORITY, **options)


def test_an_empty_authority_is_refused() -> None:
    with pytest.raises(LocalProtocolError):
        ProxyConnection("")


# --- scripted answers -------------------------------------------------------------


SCRIPT_NAMES = sorted(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_script_whole(name: str) -> None:
    script = SCRIPTS[name]
    events = script.run(whole(script.answer))
    assert events == list(script.events)
    check_path_rules(events)


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_script_one_byte_at_a_time(name: str) -> None:
    script = SCRIPTS[name]
    assert script.run(bytewise(script.answer)) == list(script.events)


@pytest.mark.parametrize("name", SCRIPT_NAMES)
@given(data=st.data())
@settings(max_examples=25, deadline=None)
def test_script_at_random_splits(name: str, data: st.DataObject) -> None:
    script = SCRIPTS[name]
    size = len(script.answer)
    cuts = data.draw(st.lists(st.integers(min_value=1, max_value=max(1, size - 1)), max_size=12))
    assert script.run(split_at(script.answer, cuts)) == list(script.events)


@pytest.mark.parametrize("name", SCRIPT_NAMES)
def test_script_fed_whole_before_any_event_is_taken(name: str) -> None:
    # Everything (end of file included) arrives before the first next_event().
    script = SCRIPTS[name]
    connection = ProxyConnection(AUTHORITY, profile=script.profile)
    connection.data_to_send()
    for piece in [*bytewise(script.answer[:50]), script.answer[50:]]:
        connection.receive_data(piece)
    if script.eof:
        connection.receive_data(b"")
    assert drain(connection) == list(script.events)


def test_every_design_case_has_a_script() -> None:
    required = {
        "notifications_then_end",
        "nothing_then_end",
        "keepalives_only",
        "error_first",
        "error_after_notifications",
        "refused_with_body",
        "wrong_content_type",
        "oversized_frame",
        "truncated_length_prefix",
        "truncated_message",
        "truncated_chunk",
        "trailing_garbage",
        "content_length_body",
        "close_delimited_body",
        "container_error_after_notification",
        "container_finish_after_notifications",
        "container_notifications_open",
        "container_error_first",
    }
    assert required <= set(SCRIPTS)


# --- a model of the path -------------------------------------------------------------

Item = tuple[str, Any]

items = st.lists(
    st.one_of(
        st.tuples(st.just("notification"), notifications()),
        st.tuples(st.just("keepalive"), st.none()),
        st.tuples(st.just("undecodable"), st.sampled_from([b"\x00{", b"\x09", b"\x01[]"])),
        st.tuples(
            st.just("error"),
            st.builds(ErrorData, code=st.integers(-(2**31), 2**31 - 1), message=st.text()),
        ),
    ),
    max_size=8,
)


def item_frame(item: Item) -> bytes:
    what, value = item
    if what == "notification":
        return notification_frame(value)
    if what == "error":
        return error_frame(value)
    if what == "undecodable":
        return frame(value)
    return KEEPALIVE_FRAME


def expected_events(profile: Profile, path: list[Item], clean_end: bool) -> list[Event]:
    """The wire mapping's rules (docs/protocol.md), written apart from the tables."""
    events: list[Event] = [StreamOpened(channel=CHANNEL)]
    messages = notifications = 0
    for what, value in path:
        if what == "keepalive":
            continue
        if what == "error":
            if profile is Profile.CONTAINER and messages:
                after = "a notification" if notifications else "an undecodable message"
                reason = f"an error after {after} violates the container profile"
                events.append(StreamBroken(reason=reason))
            else:
                events.append(StreamErrored(error=value))
            return [*events, ReaskNeeded()]
        messages += 1
        if what == "notification":
            notifications += 1
            events.append(NotificationReceived(notification=value))
        else:
            with pytest.raises(FrameError) as caught:
                decode_message(value)
            events.append(MessageRejected(error=caught.value, payload=value))
    if not clean_end:
        events.append(StreamBroken(reason="the connection closed before the answer's body ended"))
    elif not messages:
        events.append(NotServed(status=200, reason="the path ended with no message"))
    elif profile is Profile.CONTAINER:
        after = "notifications" if notifications else "an undecodable message"
        events.append(StreamBroken(reason=f"a finish after {after} violates the container profile"))
    else:
        events.append(StreamEnded())
    return [*events, ReaskNeeded()]


@given(
    profile=st.sampled_from(Profile),
    path=items,
    clean_end=st.booleans(),
    chunk_cuts=st.lists(st.integers(min_value=1, max_value=4000), max_size=8),
    read_cuts=st.lists(st.integers(min_value=1, max_value=5000), max_size=8),
)
@settings(max_examples=150, deadline=None)
def test_any_path_follows_the_rules(
    profile: Profile,
    path: list[Item],
    clean_end: bool,
    chunk_cuts: list[int],
    read_cuts: list[int],
) -> None:
    body = b"".join(item_frame(item) for item in path)
    # Frames re-chunked arbitrarily (as intermediaries do), then read in
    # arbitrary pieces.
    chunks = b"".join(chunk(piece) for piece in split_at(body, chunk_cuts) if piece)
    answer = path_head() + chunks + (LAST_CHUNK if clean_end else b"")
    events = run_proxy(split_at(answer, read_cuts), profile=profile)
    assert events == expected_events(profile, path, clean_end)
    check_path_rules(events)


# --- the caller's side of the contract ----------------------------------------------


def test_receiving_before_the_ask_is_taken_is_a_mistake() -> None:
    connection = ProxyConnection(AUTHORITY)
    assert connection.next_event() is NEED_DATA
    with pytest.raises(LocalProtocolError):
        connection.receive_data(b"HTTP/1.1 200 OK\r\n")
    with pytest.raises(LocalProtocolError):
        connection.receive_data(b"")


def test_end_of_file_is_repeatable_and_data_after_it_is_a_mistake() -> None:
    connection = ProxyConnection(AUTHORITY)
    connection.data_to_send()
    connection.receive_data(path_head())
    connection.receive_data(b"")
    connection.receive_data(b"")
    assert drain(connection) == [
        StreamOpened(channel=CHANNEL),
        StreamBroken(reason="the connection closed before the answer's body ended"),
        ReaskNeeded(),
    ]
    connection.receive_data(b"")
    with pytest.raises(LocalProtocolError):
        connection.receive_data(b"x")
    assert connection.next_event() is NEED_DATA


def test_after_the_end_data_is_discarded_and_need_data_forever() -> None:
    connection = ProxyConnection(AUTHORITY)
    connection.data_to_send()
    connection.receive_data(path_head() + chunk(error_frame(ErrorData(code=1, message="x"))))
    assert [type(e) for e in drain(connection)] == [StreamOpened, StreamErrored, ReaskNeeded]
    assert connection.state is ProxyState.DONE
    for _ in range(3):
        connection.receive_data(b"\xff" * 100_000)
        assert connection.next_event() is NEED_DATA
    connection.receive_data(b"")
    assert connection.next_event() is NEED_DATA


def test_states_of_a_path() -> None:
    connection = ProxyConnection(AUTHORITY)
    states = [connection.state]
    connection.data_to_send()
    states.append(connection.state)
    connection.receive_data(path_head()[:-1])
    assert connection.next_event() is NEED_DATA
    states.append(connection.state)
    channel_before_the_head = connection.channel
    connection.receive_data(b"\n" + chunk(notification_frame(NOTIFICATIONS[0])))
    assert connection.next_event() == StreamOpened(channel=CHANNEL)
    states.append(connection.state)
    assert (connection.channel, connection.status, connection.messages) == (CHANNEL, 200, 0)
    assert isinstance(connection.next_event(), NotificationReceived)
    assert connection.messages == 1 and connection.profile is Profile.PROVIDER
    connection.receive_data(LAST_CHUNK)
    assert connection.next_event() == StreamEnded()
    states.append(connection.state)
    assert states == [
        ProxyState.SENDING_ASK,
        ProxyState.AWAITING_HEAD,
        ProxyState.AWAITING_HEAD,
        ProxyState.STREAMING,
        ProxyState.DONE,
    ]
    assert channel_before_the_head is None


def test_states_of_a_refusal() -> None:
    connection = ProxyConnection(AUTHORITY)
    connection.data_to_send()
    connection.receive_data(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 9\r\n\r\noops")
    assert connection.next_event() is NEED_DATA
    assert connection.state is ProxyState.REFUSED and connection.status == 500
    connection.receive_data(b"")
    assert drain(connection) == [
        NotServed(status=500, reason="500 Internal Server Error: oops"),
        ReaskNeeded(),
    ]


def test_a_refusal_is_reported_once_enough_of_its_body_is_read() -> None:
    # A refusal whose body never ends is not waited for past what is kept.
    connection = ProxyConnection(AUTHORITY)
    connection.data_to_send()
    connection.receive_data(b"HTTP/1.1 503 Busy\r\n\r\n" + b"z" * 201)
    events = drain(connection)
    assert events == [NotServed(status=503, reason="503 Busy: " + "z" * 200 + "…"), ReaskNeeded()]


def test_a_refusal_body_repeating_the_status_line_is_not_repeated() -> None:
    answer = refusal(401, "Unauthorized", b"401 Unauthorized: a valid bearer token is required")
    assert run_proxy(bytewise(answer))[0] == NotServed(
        status=401, reason="401 Unauthorized: a valid bearer token is required"
    )
    answer = refusal(404, "Not Found", b"404 Not Found")
    assert run_proxy(whole(answer))[0] == NotServed(status=404, reason="404 Not Found")


def test_a_broken_refusal_body_is_still_a_refusal() -> None:
    answer = b"HTTP/1.1 429 Too Many Requests\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nslow!XX"
    assert run_proxy(whole(answer)) == [
        NotServed(status=429, reason="429 Too Many Requests: slow!"),
        ReaskNeeded(),
    ]


def test_switching_protocols_is_broken() -> None:
    answer = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"
    events = run_proxy(whole(answer))
    assert isinstance(events[0], StreamBroken)
    assert events[0].reason.startswith("the answer's head is not valid HTTP/1.1: ")
    assert events[1:] == [ReaskNeeded()]


def test_http_1_0_close_delimited_answer() -> None:
    head = path_head(body="close").replace(b"HTTP/1.1", b"HTTP/1.0")
    answer = head + notification_frame(NOTIFICATIONS[0])
    assert run_proxy(bytewise(answer)) == [
        StreamOpened(channel=CHANNEL),
        NotificationReceived(notification=NOTIFICATIONS[0]),
        StreamEnded(),
        ReaskNeeded(),
    ]


# --- limits -------------------------------------------------------------------------


def head_of_size(size: int) -> bytes:
    base = path_head(extra=[("X-Pad", "")])
    padded = path_head(extra=[("X-Pad", "p" * (size - len(base)))])
    assert len(padded) == size
    return padded


@pytest.mark.parametrize("pieces", [whole, bytewise], ids=["whole", "bytewise"])
def test_max_head_size_is_exact_however_the_head_is_split(pieces: Any) -> None:
    answer = head_of_size(300) + LAST_CHUNK
    not_served = NotServed(status=200, reason="the path ended with no message")
    assert run_proxy(pieces(answer), max_head_size=300)[1] == not_served
    too_large = "the answer's head is larger than max_head_size (299 bytes)"
    assert run_proxy(pieces(answer), max_head_size=299) == [
        StreamBroken(reason=too_large),
        ReaskNeeded(),
    ]


def test_each_informational_head_is_measured_on_its_own() -> None:
    answer = b"HTTP/1.1 100 Continue\r\n\r\n" * MAX_INFORMATIONAL_HEADS + head_of_size(300)
    assert isinstance(run_proxy(bytewise(answer + LAST_CHUNK), max_head_size=300)[1], NotServed)


def test_one_informational_head_too_many_breaks_the_ask() -> None:
    answer = b"HTTP/1.1 100 Continue\r\n\r\n" * (MAX_INFORMATIONAL_HEADS + 1)
    events = run_proxy([answer + head_of_size(300) + LAST_CHUNK])
    assert events[-2:] == [
        StreamBroken(reason="more than 4 informational (1xx) heads before the answer"),
        ReaskNeeded(),
    ]


def test_max_frame_size_option() -> None:
    message = notification_frame(NOTIFICATIONS[0])
    size = len(message) - 4
    answer = path_head() + chunk(message) + LAST_CHUNK
    assert run_proxy(whole(answer), max_frame_size=size)[2] == StreamEnded()
    reason = f"a frame of {size} bytes is larger than max_frame_size ({size - 1} bytes)"
    assert run_proxy(whole(answer), max_frame_size=size - 1) == [
        StreamOpened(channel=CHANNEL),
        StreamBroken(reason=reason),
        ReaskNeeded(),
    ]


def test_an_oversized_frame_is_never_buffered() -> None:
    connection = ProxyConnection(AUTHORITY)
    connection.data_to_send()
    connection.receive_data(path_head() + b"7fffffff\r\n" + (2**31).to_bytes(4, "big"))
    assert [type(e) for e in drain(connection)] == [StreamOpened, StreamBroken, ReaskNeeded]
    # What follows is discarded as it arrives.
    for _ in range(8):
        connection.receive_data(b"\x00" * (1 << 20))
        assert connection.next_event() is NEED_DATA


# --- the table ----------------------------------------------------------------------


def test_every_live_state_is_in_the_table_and_done_is_not() -> None:
    states = {state for state, _ in PROXY_TRANSITIONS}
    assert states == set(ProxyState) - {ProxyState.DONE}
    targets = {state for state, _ in PROXY_TRANSITIONS.values()}
    assert targets == set(ProxyState) - {ProxyState.SENDING_ASK}


def test_the_hot_path_does_what_the_table_says() -> None:
    # Messages and keep-alives are not looked up for every frame.
    streaming = ProxyState.STREAMING
    assert PROXY_TRANSITIONS[(streaming, ProxyInput.MESSAGE)] == (streaming, ProxyOutcome.MESSAGE)
    assert PROXY_TRANSITIONS[(streaming, ProxyInput.KEEPALIVE)] == (
        streaming,
        ProxyOutcome.SKIPPED,
    )


def test_every_terminal_transition_ends_in_done() -> None:
    terminal = {ProxyOutcome.BROKEN, ProxyOutcome.NOT_SERVED, ProxyOutcome.RULES_TERMINAL}
    for (_, _), (state, outcome) in PROXY_TRANSITIONS.items():
        if outcome in terminal or outcome is ProxyOutcome.FINISH:
            assert state is ProxyState.DONE


# --- Content-Location ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "channel"),
    [
        ("/mcp/notifications/c1", "c1"),
        ("/base/mcp/notifications/Zz-_09", "Zz-_09"),
        ("http://proxy.example:8080/mcp/notifications/c7?x=1#f", "c7"),
        ("//proxy.example/mcp/call_tool/c7", "c7"),
        ("c3", "c3"),
        ("  /mcp/notifications/c1  ", "c1"),
        ("/mcp/notifications/" + "a" * 64, "a" * 64),
        ("/mcp/notifications/" + "a" * 65, None),
        ("/mcp/notifications/", None),
        ("/mcp/notifications/c.1", None),
        ("/mcp/notifications/c%201", None),
        ("http://proxy.example", None),
        ("", None),
    ],
)
def test_channel_from_location(location: str, channel: str | None) -> None:
    assert channel_from_location(location) == channel


@given(st.text(max_size=100))
def test_channel_from_location_is_total(location: str) -> None:
    channel = channel_from_location(location)
    assert channel is None or (1 <= len(channel) <= 64 and channel in location)


def test_notifications_are_delivered_exactly_as_sent() -> None:
    raw = b'{"method":"x/y", "params":{"b":1,"a":[true]},"z":null}'
    answer = path_head() + chunk(frame(b"\x00" + raw)) + LAST_CHUNK
    received = run_proxy(whole(answer))[1]
    assert isinstance(received, NotificationReceived)
    assert received.notification.to_bytes() == raw
    assert received.notification == Notification.from_bytes(raw)


# --- the worked example in docs/proxy.md ------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "proxy_by_hand.py"


def documented_block(marker: str) -> str:
    doc = (ROOT / "docs" / "proxy.md").read_text(encoding="utf-8")
    after = doc.split(f"<!-- example: {marker} -->\n```python\n", 1)[1]
    return after.split("\n```\n", 1)[0] + "\n"


def test_the_worked_example_is_the_file() -> None:
    assert documented_block("docs/examples/proxy_by_hand.py") == EXAMPLE.read_text(encoding="utf-8")


def serve_once(answer: bytes) -> tuple[socket.socket, threading.Thread]:
    """A server that reads one ask, writes ``answer`` and closes."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            request = b""
            while b"\r\n\r\n" not in request or request.endswith(b"\r\n\r\n"):
                request += connection.recv(4096)
            assert request.startswith(b"POST /requests HTTP/1.1\r\n")
            connection.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


def test_the_worked_example_runs_and_prints_what_the_doc_says() -> None:
    first, second = NOTIFICATIONS[:2]
    answer = path_head() + chunk(notification_frame(first)) + chunk(notification_frame(second))
    listener, thread = serve_once(answer + LAST_CHUNK)
    with listener:
        port = listener.getsockname()[1]
        result = subprocess.run(
            [sys.executable, str(EXAMPLE), "127.0.0.1", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        thread.join(timeout=10)
    assert result.returncode == 0, result.stderr
    doc = (ROOT / "docs" / "proxy.md").read_text(encoding="utf-8")
    printed = doc.split("it prints:\n\n```\n", 1)[1].split("```", 1)[0]
    assert result.stdout == printed


def test_the_worked_example_explains_its_usage() -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 1
    assert "Usage: python docs/examples/proxy_by_hand.py HOST PORT [TOKEN]" in result.stderr


# --- the chunked body reader, against h11 ----------------------------------------------

extensions = st.sampled_from([b"", b";a=b", b";x", b';q="v w"', b";a=b;c", b";e=1 "])
trailer_fields = st.lists(
    st.tuples(
        st.sampled_from([b"X-Sum", b"Server-Timing", b"x"]),
        st.binary(max_size=10).map(lambda v: bytes(c for c in v if 0x21 <= c <= 0x7E)),
    ),
    max_size=3,
)


def h11_body(encoded: bytes) -> bytes:
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    client.send(h11.EndOfMessage())
    client.receive_data(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + encoded)
    assert isinstance(client.next_event(), h11.Response)
    data = b""
    while True:
        event = client.next_event()
        if isinstance(event, h11.EndOfMessage):
            return data
        assert isinstance(event, h11.Data), event
        data += event.data


def reader_body(pieces: list[bytes]) -> bytes:
    reader = _ChunkedBody(max_line=DEFAULT_MAX_HEAD_SIZE)
    data = b""
    for piece in pieces:
        reader.feed(piece)
        while True:
            got = reader.read()
            if got is None or got is _END:
                break
            assert isinstance(got, bytes), got  # no _Bad for a valid encoding
            data += got
    assert reader.read() is _END
    return data


@given(
    chunks=st.lists(st.binary(min_size=1, max_size=40), max_size=6),
    exts=st.lists(extensions, min_size=7, max_size=7),
    upper=st.booleans(),
    zeros=st.integers(min_value=0, max_value=3),
    trailers=trailer_fields,
    cuts=st.lists(st.integers(min_value=1, max_value=600), max_size=10),
)
@settings(max_examples=150, deadline=None)
def test_the_chunked_reader_agrees_with_h11(
    chunks: list[bytes],
    exts: list[bytes],
    upper: bool,
    zeros: int,
    trailers: list[tuple[bytes, bytes]],
    cuts: list[int],
) -> None:
    encoded = b""
    for index, data in enumerate(chunks):
        size = b"0" * zeros + (b"%X" if upper else b"%x") % len(data)
        encoded += size + exts[index] + b"\r\n" + data + b"\r\n"
    encoded += b"0" + exts[-1] + b"\r\n"
    encoded += b"".join(name + b": " + value + b"\r\n" for name, value in trailers) + b"\r\n"
    expected = b"".join(chunks)
    assert h11_body(encoded) == expected
    assert reader_body(split_at(encoded, cuts)) == expected
    assert reader_body(bytewise(encoded)) == expected


# --- connection_lost ------------------------------------------------------------------


def close_delimited_connection(*frames: bytes) -> ProxyConnection:
    connection = ProxyConnection(AUTHORITY)
    connection.data_to_send()
    connection.receive_data(path_head(body="close") + b"".join(frames))
    return connection


def test_end_of_file_on_a_frame_boundary_ends_a_close_delimited_body_cleanly() -> None:
    connection = close_delimited_connection(notification_frame(NOTIFICATIONS[0]))
    connection.receive_data(b"")
    assert drain(connection)[2:] == [StreamEnded(), ReaskNeeded()]


@pytest.mark.parametrize("drained_first", [True, False])
def test_connection_lost_on_a_frame_boundary_is_abrupt(drained_first: bool) -> None:
    # A reset or an idle timeout is not the end of a close-delimited body,
    # and what arrived before it is still delivered.
    connection = close_delimited_connection(notification_frame(NOTIFICATIONS[0]))
    events = drain(connection) if drained_first else []
    connection.connection_lost("idle timeout: no data for 6 s")
    events += drain(connection)
    assert events == [
        StreamOpened(channel=CHANNEL),
        NotificationReceived(notification=NOTIFICATIONS[0]),
        StreamBroken(reason="idle timeout: no data for 6 s"),
        ReaskNeeded(),
    ]
    assert connection.state is ProxyState.DONE


def test_connection_lost_is_idempotent_and_ends_receiving() -> None:
    connection = close_delimited_connection()
    connection.connection_lost("reset")
    connection.connection_lost("again")
    connection.receive_data(b"")
    assert drain(connection)[1:] == [StreamBroken(reason="reset"), ReaskNeeded()]
    connection.connection_lost("later")
    assert connection.next_event() is NEED_DATA
    with pytest.raises(LocalProtocolError):
        connection.receive_data(b"more")


def test_connection_lost_after_a_body_that_ended_properly_changes_nothing() -> None:
    connection = ProxyConnection(AUTHORITY)
    connection.data_to_send()
    connection.receive_data(path_head() + chunk(notification_frame(NOTIFICATIONS[0])) + LAST_CHUNK)
    connection.connection_lost("reset")
    assert drain(connection)[2:] == [StreamEnded(), ReaskNeeded()]


def test_connection_lost_in_each_state() -> None:
    before_the_ask = ProxyConnection(AUTHORITY)
    before_the_ask.connection_lost("no route")
    assert before_the_ask.data_to_send() == b""
    assert drain(before_the_ask) == [StreamBroken(reason="no route"), ReaskNeeded()]
    in_the_head = ProxyConnection(AUTHORITY)
    in_the_head.data_to_send()
    in_the_head.receive_data(b"HTTP/1.1 200 OK\r\n")
    in_the_head.connection_lost("reset")
    assert drain(in_the_head) == [StreamBroken(reason="reset"), ReaskNeeded()]
    refused = ProxyConnection(AUTHORITY)
    refused.data_to_send()
    refused.receive_data(b"HTTP/1.1 503 Service Unavailable\r\n\r\nbusy")
    refused.connection_lost("reset")
    assert drain(refused) == [
        NotServed(status=503, reason="503 Service Unavailable: busy"),
        ReaskNeeded(),
    ]


def test_connection_lost_is_in_the_table() -> None:
    lost = ProxyInput.CONNECTION_LOST
    assert PROXY_TRANSITIONS[(ProxyState.STREAMING, lost)] == (
        ProxyState.DONE,
        ProxyOutcome.BROKEN,
    )
    live = set(ProxyState) - {ProxyState.DONE}
    assert {state for state, what in PROXY_TRANSITIONS if what is lost} == live


def test_an_exchange_reports_connection_lost_the_same_way() -> None:
    exchange = ExchangeConnection(AUTHORITY, Ask(exchange=Exchange.LIST_TOOLS))
    exchange.data_to_send()
    exchange.receive_data(path_head(body="close") + frame(b"\x00{}"))
    exchange.connection_lost("reset")
    exchange.connection_lost("again")
    events: list[object] = []
    while (event := exchange.next_event()) is not NEED_DATA:
        events.append(event)
    assert [type(event).__name__ for event in events] == [
        "StreamOpened",
        "ResultReceived",
        "StreamBroken",
    ]
    assert events[-1] == StreamBroken(reason="reset")
    with pytest.raises(LocalProtocolError):
        exchange.receive_data(b"x")
