"""The server connection: reading asks, refusing what is not one, writing paths."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import h11
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
    ProxyConnection,
    ReaskNeeded,
    StreamErrored,
    decode_message,
    encode_ask,
)
from diverge_notifications.sansio.events import (
    AskRefused,
    ConnectionClosed,
    Event,
    ExchangeAsked,
    NotificationsAsked,
)
from diverge_notifications.sansio.server.connection import (
    SERVER_TRANSITIONS,
    SERVER_TRANSITIONS_BY_PROFILE,
    ServerConnection,
    ServerInput,
    ServerState,
)
from diverge_notifications.sansio.wire.framing import KEEPALIVE, FrameDecoder
from diverge_notifications.sansio.wire.http import ChannelIds, check_token
from tests.strategies import asks, notifications

# --- helpers ----------------------------------------------------------------------------------


def ask_request(
    body: bytes = b"\x04",
    *,
    method: str = "POST",
    target: str = "/requests",
    version: str = "1.1",
    token: str | None = None,
    extra: Sequence[str] = (),
    content_length: bool = True,
) -> bytes:
    """The bytes of an ask request, as the proxy writes it ."""
    lines = [f"{method} {target} HTTP/{version}", "Host: server.test:8080"]
    lines.append("Content-Type: application/vnd.diverge.ask")
    if content_length:
        lines.append(f"Content-Length: {len(body)}")
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines.extend(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def chunked(body: bytes, sizes: Iterable[int] = (3,)) -> bytes:
    """``body`` as a chunked transfer coding with the given chunk sizes (cycled)."""
    out = bytearray()
    position = 0
    for size in itertools.cycle(sizes):
        if position >= len(body):
            break
        piece = body[position : position + size]
        out += b"%x\r\n" % len(piece) + piece + b"\r\n"
        position += len(piece)
    return bytes(out + b"0\r\n\r\n")


Result = tuple[list[Event], bytes]


def feed(
    pieces: Iterable[bytes], *, eof: bool = True, **options: Any
) -> tuple[ServerConnection, list[Event], bytes]:
    """Feed ``pieces`` one receive_data call each; collect every event and every queued byte."""
    conn = ServerConnection(**options)
    events: list[Event] = []
    out = bytearray()

    def drain() -> None:
        while True:
            event = conn.next_event()
            if event is NEED_DATA:
                break
            events.append(event)
        out.extend(conn.data_to_send())

    for piece in pieces:
        conn.receive_data(piece)
        drain()
    if eof:
        conn.receive_data(b"")
        drain()
        conn.receive_data(b"")  # repeatable
        drain()
    return conn, events, bytes(out)


def feed_all_ways(data: bytes, *, eof: bool = True, **options: Any) -> Result:
    """The events and queued bytes for ``data``, checked equal whole and byte by byte."""
    _, whole_events, whole_out = feed([data], eof=eof, **options)
    _, byte_events, byte_out = feed([data[i : i + 1] for i in range(len(data))], eof=eof, **options)
    assert byte_events == whole_events
    assert byte_out == whole_out
    return whole_events, whole_out


def read_response(data: bytes, *, method: bytes = b"POST") -> tuple[h11.Response, bytes]:
    """Parse a response with an independent HTTP client (h11's own client side)."""
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method=method, target="/requests", headers=[("Host", "x")]))
    client.send(h11.EndOfMessage())
    client.receive_data(data)
    client.receive_data(b"")
    response = client.next_event()
    assert isinstance(response, h11.Response)
    body = bytearray()
    while True:
        event = client.next_event()
        if isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            break
        else:
            raise AssertionError(f"unexpected {event!r}")
    return response, bytes(body)


def header(response: h11.Response, name: bytes) -> list[bytes]:
    return [value for key, value in response.headers if key == name]


def asked(body: bytes = b"\x04", **options: Any) -> tuple[ServerConnection, Event]:
    """A connection that received one valid ask, and the ask's event."""
    conn = ServerConnection(**options)
    conn.receive_data(ask_request(body, token=options.get("token")))
    event = conn.next_event()
    assert isinstance(event, (NotificationsAsked, ExchangeAsked))
    assert conn.next_event() is NEED_DATA
    return conn, event


def path_body(stream: bytes) -> list[object]:
    """Decode a written path: the response head, then each frame's message or KEEPALIVE."""
    response, body = read_response(stream)
    assert response.status_code == 200
    decoder = FrameDecoder()
    decoder.feed(body)
    frames: list[object] = []
    while (frame := decoder.next_frame()) is not None:
        frames.append(frame if frame is KEEPALIVE else decode_message(frame))  # type: ignore[arg-type]
    assert decoder.at_boundary
    return frames


PROGRESS = Notification("notifications/progress", {"progressToken": 1, "progress": 50})
UPDATED = Notification("notifications/resources/updated", {"uri": "file:///a"})
BOOM = ErrorData(code=-32603, message="upstream went away")

HEAD_C1 = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: application/vnd.diverge.messages\r\n"
    b"Content-Location: /mcp/notifications/c1\r\n"
    b"Cache-Control: no-store\r\n"
    b"Transfer-Encoding: chunked\r\n"
    b"Connection: close\r\n"
    b"\r\n"
)


# --- accepted asks ----------------------------------------------------------------------------


def test_notifications_ask_whole_and_byte_by_byte() -> None:
    events, out = feed_all_ways(ask_request())
    assert events == [NotificationsAsked(channel="c1"), ConnectionClosed()]
    assert out == b""


def test_notifications_ask_without_eof_waits_for_the_application() -> None:
    conn, events, _ = feed([ask_request()], eof=False)
    assert events == [NotificationsAsked(channel="c1")]
    assert conn.state is ServerState.NOTIFICATIONS_ASKED
    assert conn.channel == "c1"
    assert conn.ask == Ask(exchange=Exchange.NOTIFICATIONS)
    assert not conn.closed
    assert not conn.path_open


def test_kind_4_trailing_bytes_are_ignored() -> None:
    events, _ = feed_all_ways(ask_request(b"\x04whatever"), eof=False)
    assert events == [NotificationsAsked(channel="c1")]


@pytest.mark.parametrize(
    "exchange",
    [Exchange.LIST_TOOLS, Exchange.LIST_RESOURCES, Exchange.CALL_TOOL, Exchange.READ_RESOURCE],
)
def test_exchange_ask(exchange: Exchange) -> None:
    params = {"name": "echo", "arguments": {"text": "hi"}}
    ask = Ask(exchange=exchange, params=params)
    events, _ = feed_all_ways(ask_request(encode_ask(ask)), eof=False)
    assert events == [ExchangeAsked(ask=ask, channel="c1")]


@settings(max_examples=60, deadline=None)
@given(ask=asks(), data=st.data())
def test_any_valid_ask_at_random_splits(ask: Ask, data: st.DataObject) -> None:
    request = ask_request(encode_ask(ask), token="t0k3n")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(request)), max_size=8)))
    pieces = [request[a:b] for a, b in zip([0, *cuts], [*cuts, len(request)], strict=True) if a < b]
    _, events, out = feed(pieces, token="t0k3n")
    whole, whole_out = feed_all_ways(request, token="t0k3n")
    assert events == whole
    assert out == whole_out == b""
    if ask.exchange is Exchange.NOTIFICATIONS:
        assert events == [NotificationsAsked(channel="c1"), ConnectionClosed()]
    else:
        assert events == [ExchangeAsked(ask=ask, channel="c1"), ConnectionClosed()]


def test_chunked_ask_body() -> None:
    ask = Ask(exchange=Exchange.CALL_TOOL, params={"name": "x"})
    request = ask_request(
        chunked(encode_ask(ask), (1, 4)),
        content_length=False,
        extra=["Transfer-Encoding: chunked"],
    )
    events, _ = feed_all_ways(request, eof=False)
    assert events == [ExchangeAsked(ask=ask, channel="c1")]


@pytest.mark.parametrize(
    "target", ["/requests?x=1", "http://server.test:8080/requests", "HTTPS://h/requests?q"]
)
def test_targets_that_name_the_ask_path(target: str) -> None:
    events, _ = feed_all_ways(ask_request(target=target), eof=False)
    assert events == [NotificationsAsked(channel="c1")]


def test_content_type_is_not_checked() -> None:
    request = ask_request().replace(b"application/vnd.diverge.ask", b"text/plain")
    events, _ = feed_all_ways(request, eof=False)
    assert events == [NotificationsAsked(channel="c1")]


def test_expect_100_continue_is_answered() -> None:
    events, out = feed_all_ways(ask_request(extra=["Expect: 100-continue"]), eof=False)
    assert events == [NotificationsAsked(channel="c1")]
    assert out == b"HTTP/1.1 100 Continue\r\n\r\n"


def test_custom_ask_path() -> None:
    events, _ = feed_all_ways(ask_request(target="/base/requests"), target="/base/requests")
    assert events[0] == NotificationsAsked(channel="c1")
    events, _ = feed_all_ways(ask_request(), target="/base/requests")
    assert isinstance(events[0], AskRefused) and events[0].status == 404


def test_bytes_after_the_ask_are_discarded() -> None:
    pipelined = ask_request() + ask_request() + b"garbage" * 1000
    events, out = feed_all_ways(pipelined)
    assert events == [NotificationsAsked(channel="c1"), ConnectionClosed()]
    assert out == b""


def test_eof_before_anything_is_a_plain_close() -> None:
    conn, events, out = feed([])
    assert events == [ConnectionClosed()]
    assert out == b""
    assert conn.state is ServerState.CLOSED
    assert conn.closed and conn.peer_closed
    with pytest.raises(LocalProtocolError):
        conn.start_path()


def test_data_after_eof_is_a_local_error() -> None:
    conn = ServerConnection()
    conn.receive_data(b"")
    conn.receive_data(b"")
    with pytest.raises(LocalProtocolError):
        conn.receive_data(b"POST")


def test_peer_close_during_a_path_does_not_stop_writes() -> None:
    # The writer may be mid-write when the reader sees the close; its bytes
    # then have nowhere to go, which is the adapter's business, not an error.
    conn, _ = asked()
    head = conn.start_path()
    conn.receive_data(b"")
    assert conn.next_event() == ConnectionClosed()
    assert conn.closed and conn.path_open
    assert head + conn.send_notification(PROGRESS) + conn.end_path()
    assert conn.next_event() is NEED_DATA  # ConnectionClosed only once


# --- channel ids ------------------------------------------------------------------------------


def test_channel_ids_are_unique_per_shared_minter() -> None:
    ids = ChannelIds("srv-")
    minted = []
    for _ in range(3):
        _, event = asked(channel_ids=ids)
        assert isinstance(event, NotificationsAsked)
        minted.append(event.channel)
    assert minted == ["srv-1", "srv-2", "srv-3"]


@pytest.mark.parametrize("prefix", ["", "c", "A-z_09", "x" * 44])
def test_channel_prefix_accepted(prefix: str) -> None:
    channel = ChannelIds(prefix).mint()
    assert 1 <= len(channel) <= 64
    assert channel.startswith(prefix)


@pytest.mark.parametrize("prefix", ["a/b", "é", "a b", "x" * 45, "x" * 64, "c\n"])
def test_channel_prefix_rejected(prefix: str) -> None:
    with pytest.raises(ValueError):
        ChannelIds(prefix)


@pytest.mark.parametrize("start", [-1, 10**19])
def test_channel_start_rejected(start: int) -> None:
    with pytest.raises(ValueError):
        ChannelIds(start=start)


def test_channel_ids_never_exceed_64_characters() -> None:
    ids = ChannelIds("x" * 44, start=10**19 - 1)
    assert len(ids.mint()) == 63
    # The longest id a valid minter can give: prefix and 20 digits.
    ids._next = 10**20 - 1
    assert ids.mint() == "x" * 44 + "9" * 20
    with pytest.raises(LocalProtocolError):
        ids.mint()


def test_a_server_out_of_channel_ids_refuses_with_503_not_an_exception() -> None:
    ids = ChannelIds("x" * 44)
    ids._next = 10**20
    conn = ServerConnection(channel_ids=ids)
    conn.receive_data(ask_request(b"\x04"))
    event = conn.next_event()
    assert isinstance(event, AskRefused) and event.status == 503
    assert conn.data_to_send().startswith(b"HTTP/1.1 503 Service Unavailable\r\n")


# --- refusals ---------------------------------------------------------------------------------


def assert_refused(
    data: bytes,
    status: int,
    reason_part: str,
    *,
    method: bytes = b"POST",
    needs_eof: bool = False,
    **options: Any,
) -> h11.Response:
    """``data`` is refused with ``status``: event, readable response, Connection: close."""
    events, out = feed_all_ways(data, **options)
    assert len(events) == 2, events
    refused, closed = events
    assert isinstance(refused, AskRefused)
    assert refused.status == status
    assert reason_part in refused.reason
    assert closed == ConnectionClosed()
    response, body = read_response(out, method=method)
    assert response.status_code == status
    assert header(response, b"connection") == [b"close"]
    assert header(response, b"content-type") == [b"text/plain; charset=utf-8"]
    if method == b"HEAD":
        assert body == b""
    else:
        text = body.decode("utf-8")
        assert text.startswith(f"{status} ")
        assert refused.reason in text
        assert text.endswith("\n")
    conn, no_eof_events, no_eof_out = feed([data], eof=False, **options)
    if needs_eof:  # the refusal is for the request cut short by end of file
        assert no_eof_events == []
        conn.receive_data(b"")
        assert conn.next_event() == refused
    else:  # the refusal does not wait for the peer to close
        assert no_eof_events == events and no_eof_out == out
    assert conn.closed and conn.state is ServerState.REFUSED and not conn.path_open
    for write in (conn.start_path, conn.decline, conn.end_path, conn.send_keepalive):
        with pytest.raises(LocalProtocolError):
            write()
    return response


@pytest.mark.parametrize("target", ["/", "/other", "/requests/", "/requestsX", "/mcp/requests"])
def test_other_paths_are_404(target: str) -> None:
    assert_refused(ask_request(target=target), 404, "POST /requests")


def test_get_other_path_is_404() -> None:
    assert_refused(ask_request(b"", method="GET", target="/"), 404, "POST /requests")


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "OPTIONS", "PATCH"])
def test_other_methods_are_405_with_allow(method: str) -> None:
    response = assert_refused(ask_request(method=method), 405, "POST")
    assert header(response, b"allow") == [b"POST"]


def test_head_is_405_without_a_body() -> None:
    response = assert_refused(ask_request(b"", method="HEAD"), 405, "POST", method=b"HEAD")
    assert header(response, b"allow") == [b"POST"]


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Authorization: Bearer wrong",
        "Authorization: Bearer s3cret-but-longer",
        "Authorization: Basic czNjcmV0",
        "Authorization: s3cret",
        "Authorization: Bearer",
    ],
)
def test_missing_or_wrong_token_is_401(authorization: str | None) -> None:
    extra = [] if authorization is None else [authorization]
    response = assert_refused(ask_request(extra=extra), 401, "bearer token", token="s3cret")
    assert header(response, b"www-authenticate") == [b"Bearer"]


def test_two_authorization_headers_are_401() -> None:
    request = ask_request(token="s3cret", extra=["Authorization: Bearer s3cret"])
    assert_refused(request, 401, "bearer token", token="s3cret")


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_the_right_token_is_accepted(scheme: str) -> None:
    request = ask_request(extra=[f"Authorization: {scheme} s3cret"])
    events, _ = feed_all_ways(request, eof=False, token="s3cret")
    assert events == [NotificationsAsked(channel="c1")]


def test_token_is_ignored_when_none_is_configured() -> None:
    events, _ = feed_all_ways(ask_request(token="anything"), eof=False)
    assert events == [NotificationsAsked(channel="c1")]


@pytest.mark.parametrize("token", ["", "has space", "tab\t", "é"])
def test_unusable_tokens_are_rejected_at_construction(token: str) -> None:
    with pytest.raises(ValueError):
        ServerConnection(token=token)


def test_content_length_over_the_limit_is_413_before_the_body() -> None:
    head_only = ask_request(b"\x04" * 101)[:-101]  # the body never arrives
    assert_refused(head_only, 413, "limit of 100 bytes", max_ask_size=100)


def test_ask_of_exactly_the_limit_is_accepted() -> None:
    events, _ = feed_all_ways(ask_request(b"\x04" * 100), eof=False, max_ask_size=100)
    assert events == [NotificationsAsked(channel="c1")]


def test_chunked_body_over_the_limit_is_413_while_reading() -> None:
    body = chunked(b"\x04" + b"x" * 100, (7,))
    request = ask_request(body, content_length=False, extra=["Transfer-Encoding: chunked"])
    # Cut before the final chunk: the refusal comes while the body is read.
    assert_refused(request[:-20], 413, "limit of 50 bytes", max_ask_size=50)


def test_chunk_framing_without_end_is_413() -> None:
    # A chunk-extension that never ends spends the framing allowance.
    body = b"1;" + b"e" * 5000
    request = ask_request(body, content_length=False, extra=["Transfer-Encoding: chunked"])
    assert_refused(request, 413, "limit of 100 bytes", max_ask_size=100, max_head_size=1024)


def test_head_over_the_limit_is_431() -> None:
    request = ask_request(extra=["X-Padding: " + "p" * 2000])
    assert_refused(request, 431, "limit of 1024 bytes", max_head_size=1024)


def test_head_over_the_limit_is_431_even_without_its_end() -> None:
    request = b"POST /requests HTTP/1.1\r\nX-Padding: " + b"p" * 2000
    assert_refused(request, 431, "limit of 1024 bytes", max_head_size=1024)


def test_head_of_exactly_the_limit_is_accepted() -> None:
    base = ask_request(b"", extra=["X-Padding: "])
    padding = "p" * (1024 - len(base))
    request = ask_request(extra=["X-Padding: " + padding])
    assert request.index(b"\r\n\r\n") + 4 == 1024
    events, _ = feed_all_ways(request, eof=False, max_head_size=1024)
    assert events == [NotificationsAsked(channel="c1")]
    assert_refused(
        ask_request(extra=["X-Padding: " + padding + "p"]), 431, "1024", max_head_size=1024
    )


def test_http_1_0_is_505() -> None:
    assert_refused(ask_request(version="1.0"), 505, "HTTP/1.1")


def test_unsupported_transfer_coding_is_501() -> None:
    request = ask_request(b"\x04", content_length=False, extra=["Transfer-Encoding: gzip"])
    assert_refused(request, 501, "malformed HTTP request")


@pytest.mark.parametrize(
    ("data", "reason_part", "needs_eof"),
    [
        (b"hello\r\n\r\n", "malformed HTTP request", False),
        (b"\r\nPOST /requests HTTP/1.1\r\n\r\n", "illegal request line", False),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "illegal request line", False),
        (b"POST /requests HTTP/1.1\r\nContent-Length: 1\r\n\r\n\x04", "Host", False),
        (b"POST /requests HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n", "ended inside", True),
        (ask_request()[:-1], "ended inside the request body", True),
        (ask_request(b""), "malformed ask: ask is empty", False),
        (ask_request(b"\x09"), "malformed ask: unknown ask kind 9", False),
        (ask_request(b"\x02{nope"), "malformed ask: mcp request params did not parse", False),
        (ask_request(b"\x02[1]"), "expected a JSON object or null", False),
        (ask_request(extra=["Content-Length: 2"]), "malformed HTTP request", False),
        (ask_request(extra=["Bad Header: x"]), "malformed HTTP request", False),
    ],
)
def test_malformed_requests_are_400(data: bytes, reason_part: str, needs_eof: bool) -> None:
    assert_refused(data, 400, reason_part, needs_eof=needs_eof)


def test_content_length_with_too_many_digits_is_400() -> None:
    request = ask_request(extra=[]).replace(b"Content-Length: 1", b"Content-Length: " + b"9" * 5000)
    assert_refused(request, 400, "malformed HTTP request", max_head_size=16 * 1024)


def test_refusal_reasons_do_not_depend_on_split_for_odd_starts() -> None:
    for data in (b"\r", b"\n", b"\r\n", b"\rX\n\n", b" GET / HTTP/1.1\r\n\r\n"):
        events, _ = feed_all_ways(data)
        assert isinstance(events[0], AskRefused) and events[0].status == 400
        assert events[1:] == [ConnectionClosed()]


def test_memory_is_bounded_when_a_peer_floods_the_head() -> None:
    conn = ServerConnection(max_head_size=1024, max_ask_size=1024)
    for _ in range(1000):
        conn.receive_data(b"x" * 1000)
    assert len(conn._buffer) <= 1024 + 1024 + 1024
    event = conn.next_event()
    assert isinstance(event, AskRefused) and event.status == 431


# --- writing a path ---------------------------------------------------------------------------


def test_path_exact_bytes() -> None:
    conn, _ = asked()
    assert conn.start_path() == HEAD_C1
    assert conn.path_open
    raw = PROGRESS.to_bytes()
    frame = (len(raw) + 1).to_bytes(4, "big") + b"\x00" + raw
    assert conn.send_notification(PROGRESS) == b"%x\r\n" % len(frame) + frame + b"\r\n"
    assert conn.send_keepalive() == b"4\r\n\x00\x00\x00\x00\r\n"
    assert conn.end_path() == b"0\r\n\r\n"
    assert conn.state is ServerState.DONE
    assert conn.closed and not conn.path_open
    assert conn.next_event() == ConnectionClosed()
    assert conn.next_event() is NEED_DATA


def test_raw_bytes_are_relayed_unchanged() -> None:
    conn, _ = asked()
    conn.start_path()
    raw = b'{ "method" : "notifications/custom",  "params":{"\\u00e9":1.50}, "x":[] }'
    chunk = conn.send_notification(raw)
    prefix = (len(raw) + 1).to_bytes(4, "big")
    assert chunk == b"%x\r\n" % (len(raw) + 5) + prefix + b"\x00" + raw + b"\r\n"
    assert chunk[9:-2] == raw
    decoded = Notification.from_bytes(raw)
    assert conn.send_notification(decoded)[9:-2] == raw  # a decoded one keeps its bytes too
    assert conn.send_notification(bytearray(raw))[9:-2] == raw


def test_mapping_is_encoded_compactly() -> None:
    conn, _ = asked()
    conn.start_path()
    chunk = conn.send_notification({"method": "notifications/tools/list_changed"})
    assert chunk.endswith(b'\x00{"method":"notifications/tools/list_changed"}\r\n')


@pytest.mark.parametrize(
    "bad",
    [b"not json", b"[]", b'{"params":{}}', b'{"method":1}', b'{"method":"m","params":3}', b""],
)
def test_invalid_raw_notifications_raise_and_change_nothing(bad: bytes) -> None:
    conn, _ = asked()
    conn.start_path()
    with pytest.raises(LocalProtocolError, match="not a notification"):
        conn.send_notification(bad)
    assert conn.state is ServerState.PATH_OPEN
    with pytest.raises(LocalProtocolError):
        conn.send_notifications([PROGRESS, bad])
    assert conn.state is ServerState.PATH_OPEN


def test_invalid_mapping_and_types_raise() -> None:
    conn, _ = asked()
    conn.start_path()
    with pytest.raises(LocalProtocolError):
        conn.send_notification({"params": {}})
    with pytest.raises(TypeError):
        conn.send_notification(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        conn.send_error("boom")  # type: ignore[arg-type]


def test_send_notifications_is_one_chunk() -> None:
    conn, _ = asked()
    head = conn.start_path()
    items: list[Notification | dict[str, Any] | bytes] = [
        PROGRESS,
        {"method": "notifications/tools/list_changed"},
        b'{"method":"x/custom"}',
    ]
    chunk = conn.send_notifications(items)
    size_line, _, rest = chunk.partition(b"\r\n")
    assert int(size_line, 16) == len(rest) - 2 and rest.endswith(b"\r\n")
    singles = [ServerConnection_frame(item) for item in items]
    assert rest[:-2] == b"".join(singles)
    assert conn.send_notifications([]) == b""
    assert conn.state is ServerState.PATH_NOTIFYING
    messages = path_body(head + chunk + conn.end_path())
    assert messages == [
        Notification.from_json(i) if isinstance(i, dict) else i for i in items[:2]
    ] + [Notification.from_bytes(b'{"method":"x/custom"}')]


def ServerConnection_frame(item: Notification | dict[str, Any] | bytes) -> bytes:
    """The frame (without chunk framing) send_notification writes for ``item``."""
    conn, _ = asked()
    conn.start_path()
    chunk = conn.send_notification(item)
    return chunk.partition(b"\r\n")[2][:-2]


def test_send_notifications_empty_before_any_is_still_checked() -> None:
    conn, _ = asked()
    with pytest.raises(LocalProtocolError):
        conn.send_notifications([])


def test_send_error_ends_the_path() -> None:
    conn, _ = asked()
    head = conn.start_path()
    first = conn.send_notification(PROGRESS)
    tail = conn.send_error(BOOM)
    assert tail.endswith(b"\r\n0\r\n\r\n")
    assert conn.state is ServerState.DONE
    assert path_body(head + first + tail) == [PROGRESS, BOOM]
    writes: list[Callable[[], bytes]] = [
        lambda: conn.send_notification(PROGRESS),
        lambda: conn.send_error(BOOM),
        conn.send_keepalive,
        conn.end_path,
        conn.decline,
    ]
    for write in writes:
        with pytest.raises(LocalProtocolError):
            write()
    assert conn.next_event() == ConnectionClosed()


def test_error_first_is_allowed_in_both_profiles() -> None:
    for profile in Profile:
        conn, _ = asked(profile=profile)
        stream = conn.start_path() + conn.send_keepalive() + conn.send_error(BOOM)
        assert path_body(stream) == [KEEPALIVE, BOOM]


def test_container_profile_forbids_error_or_end_after_a_notification() -> None:
    conn, _ = asked(profile=Profile.CONTAINER)
    conn.start_path()
    conn.send_notification(PROGRESS)
    with pytest.raises(LocalProtocolError, match="container profile"):
        conn.send_error(BOOM)
    with pytest.raises(LocalProtocolError, match="container profile"):
        conn.end_path()
    assert conn.state is ServerState.PATH_NOTIFYING
    assert conn.send_notification(UPDATED)  # the path goes on
    assert conn.send_keepalive()


def test_container_profile_allows_an_empty_end() -> None:
    conn, _ = asked(profile=Profile.CONTAINER)
    stream = conn.start_path() + conn.send_keepalive() + conn.end_path()
    assert path_body(stream) == [KEEPALIVE]


def test_writes_before_start_path_raise() -> None:
    conn, _ = asked()
    writes: list[Callable[[], bytes]] = [
        lambda: conn.send_notification(PROGRESS),
        conn.send_keepalive,
        conn.end_path,
        lambda: conn.send_error(BOOM),
        lambda: conn.answer({}),
    ]
    for write in writes:
        with pytest.raises(LocalProtocolError):
            write()
    assert conn.state is ServerState.NOTIFICATIONS_ASKED


def test_writes_before_any_ask_raise() -> None:
    conn = ServerConnection()
    with pytest.raises(LocalProtocolError):
        conn.start_path()
    with pytest.raises(LocalProtocolError):
        conn.decline()


def test_start_path_twice_raises() -> None:
    conn, _ = asked()
    conn.start_path()
    with pytest.raises(LocalProtocolError):
        conn.start_path()


def test_frame_limit_is_enforced_on_writes() -> None:
    conn, _ = asked(max_frame_size=64)
    conn.start_path()
    big = Notification("notifications/message", {"level": "info", "data": "x" * 100})
    with pytest.raises(LocalProtocolError, match="frame limit"):
        conn.send_notification(big)
    assert conn.state is ServerState.PATH_OPEN


@pytest.mark.parametrize("profile", list(Profile))
def test_decline_after_notifications_asked(profile: Profile) -> None:
    conn, _ = asked(profile=profile)
    assert conn.decline() == HEAD_C1 + b"0\r\n\r\n"
    assert conn.state is ServerState.DONE
    assert conn.next_event() == ConnectionClosed()


def test_decline_after_start_path_is_the_empty_end() -> None:
    conn, _ = asked()
    conn.start_path()
    conn.send_keepalive()
    assert conn.decline() == b"0\r\n\r\n"


def test_decline_after_a_notification_raises() -> None:
    conn, _ = asked()
    conn.start_path()
    conn.send_notification(PROGRESS)
    with pytest.raises(LocalProtocolError):
        conn.decline()


# --- one-shot exchanges -----------------------------------------------------------------------

CALL = Ask(exchange=Exchange.CALL_TOOL, params={"name": "echo"})


def test_answer_exact_bytes() -> None:
    conn, event = asked(encode_ask(CALL))
    assert event == ExchangeAsked(ask=CALL, channel="c1")
    data = conn.answer({"content": [], "isError": False})
    head = HEAD_C1.replace(b"/mcp/notifications/c1", b"/mcp/call_tool/c1")
    json = b'{"content":[],"isError":false}'
    frame = (len(json) + 1).to_bytes(4, "big") + b"\x00" + json
    assert data == head + b"%x\r\n" % len(frame) + frame + b"\r\n0\r\n\r\n"
    assert conn.state is ServerState.DONE
    assert conn.next_event() == ConnectionClosed()
    with pytest.raises(LocalProtocolError):
        conn.answer({})


def test_answer_relays_raw_result_bytes() -> None:
    conn, _ = asked(encode_ask(Ask(exchange=Exchange.LIST_TOOLS)))
    raw = b'{ "tools" : [ ] }'
    data = conn.answer(raw)
    assert b"\x00" + raw + b"\r\n0\r\n\r\n" in data
    assert b"Content-Location: /mcp/list_tools/c1\r\n" in data


@pytest.mark.parametrize("bad", [b"[]", b"nope", b"1", b""])
def test_answer_rejects_non_objects(bad: bytes) -> None:
    conn, _ = asked(encode_ask(CALL))
    with pytest.raises(LocalProtocolError):
        conn.answer(bad)
    with pytest.raises(LocalProtocolError):
        conn.answer({"x": float("nan")})
    assert conn.state is ServerState.EXCHANGE_ASKED


def json_nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    "bad",
    [{"x": 10**400}, {"x": {1, 2}}, {"x": "\ud800"}, {"x": json_nested(200)}],
    ids=["huge int", "set", "lone surrogate", "too deep"],
)
def test_answer_refuses_what_cannot_be_sent(bad: dict[str, Any]) -> None:
    # As send_notification does: LocalProtocolError, and nothing changes.
    conn, _ = asked(encode_ask(CALL))
    with pytest.raises(LocalProtocolError):
        conn.answer(bad)
    assert conn.state is ServerState.EXCHANGE_ASKED


def test_an_error_with_any_data_that_can_be_built_reaches_the_proxy_as_an_error() -> None:
    error = ErrorData(code=1, message="m", data={"n": 10**300, "s": "\u00e9"})
    conn, _ = asked()
    conn.start_path()
    data = conn.send_error(error)
    proxy = ProxyConnection("h:1")
    proxy.data_to_send()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.diverge.messages\r\n"
    head += b"Content-Location: /mcp/notifications/c1\r\nTransfer-Encoding: chunked\r\n\r\n"
    proxy.receive_data(head + data)
    events: list[object] = []
    while (event := proxy.next_event()) is not NEED_DATA:
        events.append(event)
    assert events[1:] == [StreamErrored(error=error), ReaskNeeded()]


def test_answer_error_and_decline() -> None:
    conn, _ = asked(encode_ask(CALL))
    data = conn.answer_error(BOOM)
    assert data.endswith(b"\x01" + BOOM.to_bytes() + b"\r\n0\r\n\r\n")
    conn, _ = asked(encode_ask(CALL))
    assert conn.decline() == HEAD_C1.replace(b"notifications", b"call_tool") + b"0\r\n\r\n"


def test_exchange_ask_takes_no_path_writes() -> None:
    conn, _ = asked(encode_ask(CALL))
    for write in (conn.start_path, conn.send_keepalive, conn.end_path):
        with pytest.raises(LocalProtocolError):
            write()


def test_notifications_ask_takes_no_answer() -> None:
    conn, _ = asked()
    with pytest.raises(LocalProtocolError):
        conn.answer({})
    with pytest.raises(LocalProtocolError):
        conn.answer_error(BOOM)


# --- the transition table ---------------------------------------------------------------------

_WRITES: dict[ServerInput, Callable[[ServerConnection], bytes]] = {
    ServerInput.START_PATH: lambda c: c.start_path(),
    ServerInput.NOTIFICATION: lambda c: c.send_notification(PROGRESS),
    ServerInput.KEEPALIVE: lambda c: c.send_keepalive(),
    ServerInput.ERROR: lambda c: c.send_error(BOOM),
    ServerInput.END: lambda c: c.end_path(),
    ServerInput.DECLINE: lambda c: c.decline(),
    ServerInput.ANSWER: lambda c: c.answer({"ok": True}),
}


def _connection_in(state: ServerState, profile: Profile) -> ServerConnection:
    if state is ServerState.AWAITING_ASK:
        return ServerConnection(profile=profile)
    if state is ServerState.CLOSED:
        conn = ServerConnection(profile=profile)
        conn.receive_data(b"")
        conn.next_event()
        return conn
    if state is ServerState.REFUSED:
        conn = ServerConnection(profile=profile)
        conn.receive_data(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        conn.next_event()
        return conn
    if state is ServerState.EXCHANGE_ASKED:
        return asked(encode_ask(CALL), profile=profile)[0]
    if state is ServerState.HEALTH_ASKED:
        conn = ServerConnection(profile=profile)
        conn.receive_data(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        conn.next_event()
        return conn
    conn, _ = asked(profile=profile)
    if state is ServerState.NOTIFICATIONS_ASKED:
        return conn
    conn.start_path()
    if state is ServerState.PATH_OPEN:
        return conn
    if state is ServerState.DONE:
        conn.end_path()
        return conn
    conn.send_notification(PROGRESS)
    assert state is ServerState.PATH_NOTIFYING
    return conn


@pytest.mark.parametrize("profile", list(Profile))
@pytest.mark.parametrize("state", list(ServerState))
@pytest.mark.parametrize("what", list(_WRITES))
def test_every_write_in_every_state_follows_the_table(
    profile: Profile, state: ServerState, what: ServerInput
) -> None:
    conn = _connection_in(state, profile)
    assert conn.state is state
    expected = SERVER_TRANSITIONS_BY_PROFILE[profile].get((state, what))
    if expected is None:
        with pytest.raises(LocalProtocolError):
            _WRITES[what](conn)
        assert conn.state is state
    else:
        assert _WRITES[what](conn)
        assert conn.state is expected[0]


def test_table_is_complete_for_reachable_pairs() -> None:
    states_with_exits = {state for state, _ in SERVER_TRANSITIONS}
    assert ServerState.DONE not in states_with_exits
    assert ServerState.REFUSED not in states_with_exits
    targets = {target for target, _ in SERVER_TRANSITIONS.values()}
    assert targets | {ServerState.AWAITING_ASK} == set(ServerState)


@settings(max_examples=150, deadline=None)
@given(
    profile=st.sampled_from(list(Profile)),
    exchange=st.booleans(),
    writes=st.lists(st.sampled_from(list(_WRITES)), max_size=12),
    items=st.lists(notifications(), min_size=1, max_size=3),
)
def test_random_write_sequences_follow_the_table(
    profile: Profile,
    exchange: bool,
    writes: list[ServerInput],
    items: list[Notification],
) -> None:
    conn, _ = asked(encode_ask(CALL) if exchange else b"\x04", profile=profile)
    table = SERVER_TRANSITIONS_BY_PROFILE[profile]
    stream = bytearray()
    sent: list[object] = []
    for what in writes:
        expected = table.get((conn.state, what))
        if expected is None:
            with pytest.raises(LocalProtocolError):
                _WRITES[what](conn)
            continue
        if what is ServerInput.NOTIFICATION:
            stream += conn.send_notifications(items)
            sent.extend(items)
        else:
            stream += _WRITES[what](conn)
            if what is ServerInput.KEEPALIVE:
                sent.append(KEEPALIVE)
            elif what is ServerInput.ERROR:
                sent.append(BOOM)
            elif what is ServerInput.ANSWER:
                sent.append("answer")
        assert conn.state is expected[0]
    if conn.state is ServerState.DONE and "answer" not in sent:
        assert path_body(bytes(stream)) == sent


# --- the documentation's worked example -------------------------------------------------------


def test_serve_by_hand_example_runs() -> None:
    """docs/examples/serve_by_hand.py serves a hub over real sockets, end to end."""
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[3] / "docs" / "examples" / "serve_by_hand.py"
    result = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=30, check=False
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "StreamOpened(channel='c1')"
    assert sum(line.startswith("NotificationReceived(") for line in lines) == 4
    assert lines[-2:] == ["StreamEnded()", "ReaskNeeded()"]


@pytest.mark.parametrize("token", ["", "a b", "tab\t", "\u00e9", "a\r\nb", " lead", "\x7f", 42])
def test_both_sides_refuse_the_same_tokens_with_one_rule(token: Any) -> None:
    with pytest.raises(ValueError, match="token"):
        check_token(token)
    with pytest.raises(ValueError, match="token"):
        ServerConnection(token=token)
    with pytest.raises(ValueError, match="token"):
        ProxyConnection("h:1", token=token)


@pytest.mark.parametrize("token", [None, "s3cr3t", "!~", "a" * 1000])
def test_both_sides_take_the_same_tokens(token: str | None) -> None:
    check_token(token)
    proxy = ProxyConnection("h:1", token=token, target="/base/requests")
    server = ServerConnection(token=token, target="/base/requests")
    server.receive_data(proxy.data_to_send())
    assert isinstance(server.next_event(), NotificationsAsked)


def test_a_target_must_start_with_a_slash_on_both_sides() -> None:
    with pytest.raises(ValueError, match="target"):
        ServerConnection(target="requests")
    with pytest.raises(ValueError, match="target"):
        ProxyConnection("h:1", target="requests")
