"""Fuzz the server side: arbitrary request bytes, then a random script of writes.

Input layout: byte 0 picks the options and how the request is split;
byte 1 is the length ``L`` of the write script; the next ``L`` bytes are the
script (one write per byte, see :func:`_write`); the rest is what the peer
sent. Checked, on the reading side:

* ``next_event()`` never raises;
* the events are one of the declared shapes: an ask event, or one
  ``AskRefused`` with a declared status; then exactly one
  ``ConnectionClosed`` (the request ends with end of file);
* fed whole, one byte at a time, and in pieces of another size, the
  events and the queued bytes are the same;
* a refusal's queued bytes are one complete HTTP response with that
  status and ``Connection: close``.

And on the writing side, for an accepted ask, the script's writes run in
order (with the peer's end of file at a random point when the script says
so): each write returns bytes, or raises ``LocalProtocolError`` and changes
nothing; once the connection is closed nothing more is written. What was
written, read back by the proxy side (:class:`ProxyConnection` or
:class:`ExchangeConnection`), gives exactly the notifications sent, in
order, and the terminal event the writes call for.

Config byte: bit 0 a token, bit 1 a small head limit, bit 2 small ask and
frame limits, bit 3 the container profile, bits 4-7 the piece size.
"""

from __future__ import annotations

from typing import Any

import h11

from diverge_notifications.sansio import (
    NEED_DATA,
    TERMINAL_EVENTS,
    AskRefused,
    ConnectionClosed,
    ErrorData,
    Event,
    ExchangeAsked,
    ExchangeConnection,
    LocalProtocolError,
    Notification,
    NotificationReceived,
    NotificationsAsked,
    NotServed,
    Profile,
    ProxyConnection,
    ResultReceived,
    ServerConnection,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    encode_frame,
    encode_message,
)

DECLARED_STATUSES = frozenset({400, 401, 404, 405, 413, 431, 501, 505})
TOKEN = "t0k3n"
#: Small enough for the small frame limit (100 bytes), as messages.
NOTIFICATIONS = (
    Notification("notifications/progress", {"progressToken": 1, "progress": 2}),
    Notification("notifications/tools/list_changed"),
    Notification("x/custom", {"a": [1, None]}),
)
#: Their frames, as the hub builds them once for every path (send_frames).
FRAMES = tuple(encode_frame(encode_message(notification)) for notification in NOTIFICATIONS)
RAW_NOTIFICATION = b'{"method" :"x/raw" , "params":{}}'
NOT_NOTIFICATIONS = (b"not json", b'{"no":"method"}', b"[1]")
OVERSIZED = Notification("x/big", {"padding": "p" * 80})
ERROR = ErrorData(code=-32603, message="failed")
RESULT: dict[str, Any] = {"tools": []}


def _request(
    body: bytes = b"\x04",
    *,
    method: str = "POST",
    target: str = "/requests",
    token: str | None = None,
    extra: tuple[str, ...] = (),
    chunked: bool = False,
) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: server.test:8080"]
    lines.append("Content-Type: application/vnd.diverge.ask")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if body else b"0\r\n\r\n"
    else:
        lines.append(f"Content-Length: {len(body)}")
    if token is not None:
        lines.append(f"Authorization: Bearer {token}")
    lines.extend(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def _seed(config: int, script: bytes, request: bytes) -> bytes:
    return bytes((config, len(script))) + script + request


# Scripts, one write per byte (see _write): start, notifications, keep-alive, end...
_PATH = bytes((0, 1, 0x12, 4, 0x21, 6))
_PATH_ERROR = bytes((0, 4, 5, 1))
_PATH_LOST = bytes((0, 1, 9, 1, 4, 3, 0x13))
_DECLINE = bytes((7, 1))
_ANSWER = bytes((8, 8))
_ANSWER_ERROR = bytes((0x18,))
_CONTAINER = bytes((0, 1, 6, 5, 0x11, 4))
_SMALL_FRAMES = bytes((0, 3, 0x13, 0x33, 1, 0x32, 6))
_BATCH_FIRST = bytes((0, 0x32, 0x22, 2, 0x19, 1, 6))
_RESULTS = bytes((0x48, 0x68, 0x88, 0x28))
_FRAMES = bytes((0, 0x92, 0x92, 0xA2, 0x82, 0x12, 0xB2, 6))

#: The module fuzzed (tests/test_fuzz_coverage.py measures how much of it the seeds run).
TARGET = ServerConnection.__module__

SEEDS = [
    _seed(0, _PATH, _request()),
    _seed(1, _PATH, _request(token=TOKEN)),
    _seed(1, _PATH_ERROR, _request(token="wrong")),
    _seed(0, _PATH_LOST, _request(chunked=True)),
    _seed(0x20, _PATH, _request(extra=("Expect: 100-continue",))),
    _seed(8, _CONTAINER, _request()),
    _seed(8, _PATH_ERROR, _request()),
    _seed(4, _SMALL_FRAMES, _request()),
    _seed(0, _DECLINE, _request(b"\x04trailing bytes are ignored")),
    _seed(0, _ANSWER, _request(b"\x00{}")),
    _seed(1, _ANSWER_ERROR, _request(b'\x01{"cursor":"c2"}', token=TOKEN)),
    _seed(0, _ANSWER, _request(b'\x02{"name":"echo","arguments":{"x":1}}', chunked=True)),
    _seed(0, _DECLINE, _request(b'\x03{"uri":"file:///a"}')),
    _seed(0, _ANSWER, _request(b"")),
    _seed(0, _BATCH_FIRST, _request()),
    _seed(0, _FRAMES, _request()),
    _seed(8, _FRAMES, _request()),
    _seed(0, bytes((0x82, 0x92, 0, 0x82, 6, 0x92)), _request()),
    _seed(0, _RESULTS, _request(b"\x01{}")),
    _seed(0, b"", b""),
    _seed(0, b"", b"POST /requests HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n\x04"),
    _seed(0, b"", _request(method="GET")),
    _seed(0, b"", _request(target="/other")),
    _seed(2, b"", _request(extra=("X-Padding: " + "p" * 80,))),
    _seed(4, b"", _request(b"\x02" + b"{}" * 10)),
    _seed(0, b"", b"HEAD /requests HTTP/1.1\r\nHost: x\r\n\r\n"),
    _seed(0, b"", b"POST /requests HTTP/1.0\r\nContent-Length: 1\r\n\r\n\x04"),
]
DICTIONARY = [
    b"POST /requests HTTP/1.1\r\n",
    b"Host: server.test\r\n",
    b"Content-Type: application/vnd.diverge.ask\r\n",
    b"Content-Length: 1\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Authorization: Bearer t0k3n\r\n",
    b"Expect: 100-continue\r\n",
    b"Connection: close\r\n",
    b"\r\n\r\n",
    b"0\r\n\r\n",
    b"\x04",
    b'\x00{"cursor":"c"}',
    b'\x02{"name":"t","arguments":{}}',
    b'\x03{"uri":"file:///a"}',
]


def _options(config: int) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if config & 1:
        options["token"] = TOKEN
    if config & 2:
        options["max_head_size"] = 64
    if config & 4:
        options["max_ask_size"] = 8
        options["max_frame_size"] = 100
    if config & 8:
        options["profile"] = Profile.CONTAINER
    return options


def _run(pieces: list[bytes], options: dict[str, Any]) -> tuple[list[Event], bytes]:
    conn = ServerConnection(**options)
    events: list[Event] = []
    out = bytearray()
    for piece in [*pieces, b""]:
        conn.receive_data(piece)
        while (event := conn.next_event()) is not NEED_DATA:
            assert isinstance(event, Event)
            events.append(event)
        out += conn.data_to_send()
    assert conn.closed
    return events, bytes(out)


def _check_refusal(out: bytes, status: int, head_only: bool) -> None:
    client = h11.Connection(h11.CLIENT)
    client.send(
        h11.Request(
            method=b"HEAD" if head_only else b"POST", target="/requests", headers=[("Host", "x")]
        )
    )
    client.send(h11.EndOfMessage())
    client.receive_data(out)
    client.receive_data(b"")
    response = client.next_event()
    assert isinstance(response, h11.Response), response
    assert response.status_code == status
    assert (b"connection", b"close") in response.headers
    while not isinstance(client.next_event(), h11.EndOfMessage):
        pass


class _Writes:
    """What a script wrote, and what the proxy side should read back from it."""

    def __init__(self) -> None:
        self.out = bytearray()
        self.sent: list[Notification] = []
        self.ending: str | None = None  # "end", "error", "result"


def _write(conn: ServerConnection, op: int, writes: _Writes) -> None:
    """One write of the script: the low four bits pick it (modulo 10), the high four vary it."""
    kind, variant = (op & 0x0F) % 10, op >> 4
    notification = NOTIFICATIONS[variant % len(NOTIFICATIONS)]
    if kind == 0:
        writes.out += conn.start_path()
    elif kind == 1:
        forms: list[Any] = [notification, dict(notification.members), RAW_NOTIFICATION]
        item = forms[variant % 3]
        writes.out += conn.send_notification(item)
        writes.sent.append(Notification.from_bytes(item) if variant % 3 == 2 else notification)
    elif kind == 2:
        picked = [(variant + i) % len(NOTIFICATIONS) for i in range(variant % 4)]
        if variant & 8:  # as the hub gives them: frames built once, shared, written as they are
            writes.out += conn.send_frames([FRAMES[i] for i in picked])
        else:
            writes.out += conn.send_notifications([NOTIFICATIONS[i] for i in picked])
        writes.sent += [NOTIFICATIONS[i] for i in picked]
    elif kind == 3:
        if variant % 2:
            conn.send_notification(NOT_NOTIFICATIONS[(variant >> 1) % len(NOT_NOTIFICATIONS)])
            raise AssertionError("something that is not a notification was written")
        # Written where the frame limit allows it (the default), else refused.
        writes.out += conn.send_notification(OVERSIZED.to_bytes())
        writes.sent.append(OVERSIZED)
    elif kind == 4:
        writes.out += conn.send_keepalive()
    elif kind == 5:
        writes.out += conn.send_error(ERROR)
        writes.ending = "error"
    elif kind == 6:
        writes.out += conn.end_path()
        writes.ending = "end"
    elif kind == 7:
        writes.out += conn.decline()
        writes.ending = "end"
    elif kind == 8:
        _answer(conn, variant, writes)
    else:
        conn.receive_data(b"")
        assert conn.peer_closed
        if variant % 2:
            try:
                conn.receive_data(b"late")
            except LocalProtocolError:
                pass
            else:
                raise AssertionError("data after end of file was taken")


#: Results an exchange may be answered with: a mapping, raw JSON bytes, and
#: what the connection must refuse (not JSON, not an object, not encodable).
RESULTS: tuple[Any, ...] = (RESULT, b'{"tools" : [ ]}', b"{", b"[1]", {"x": float("nan")})


def _answer(conn: ServerConnection, variant: int, writes: _Writes) -> None:
    if variant % 2:
        writes.out += conn.answer_error(ERROR)
        writes.ending = "error"
        return
    result = RESULTS[(variant >> 1) % len(RESULTS)]
    writes.out += conn.answer(result)
    assert (variant >> 1) % len(RESULTS) < 2, f"{result!r} was answered"
    writes.ending = "result"


def _run_script(first: Event, request: bytes, options: dict[str, Any], script: bytes) -> _Writes:
    """Accept ``request`` again and run ``script``'s writes; check each write's contract."""
    conn = ServerConnection(**options)
    conn.receive_data(request)
    assert conn.next_event() == first
    assert conn.channel is not None and conn.profile is options.get("profile", Profile.PROVIDER)
    if isinstance(first, ExchangeAsked):
        assert conn.ask == first.ask
    writes = _Writes()
    closings = 0
    for op in script:
        state, closed, written, sent = conn.state, conn.closed, len(writes.out), len(writes.sent)
        ended = writes.ending is not None
        try:
            _write(conn, op, writes)
        except LocalProtocolError:
            assert conn.state == state and conn.closed == closed
            assert len(writes.out) == written and len(writes.sent) == sent
            continue
        assert not (ended and (op & 0x0F) % 10 != 9), "a write was accepted after the path's end"
        assert conn.path_open == (
            isinstance(first, NotificationsAsked) and bool(writes.out) and writes.ending is None
        )
        while (event := conn.next_event()) is not NEED_DATA:
            assert isinstance(event, ConnectionClosed), event
            closings += 1
    # The end of the answer, or the peer's end of file, is reported once.
    assert closings <= 1
    return writes


def _read_back(first: Event, writes: _Writes, options: dict[str, Any]) -> None:
    """The proxy side reads what was written: the notifications sent, then the right end."""
    out = bytes(writes.out)
    if not out:
        return  # nothing written: no head to read
    reader: ProxyConnection | ExchangeConnection
    if isinstance(first, ExchangeAsked):
        reader = ExchangeConnection("server.test:8080", first.ask)
    else:
        reader = ProxyConnection(
            "server.test:8080", profile=options.get("profile", Profile.PROVIDER)
        )
    reader.data_to_send()
    reader.receive_data(out)
    reader.receive_data(b"")
    events: list[Event] = []
    while (event := reader.next_event()) is not NEED_DATA:
        events.append(event)
    received = [event.notification for event in events if isinstance(event, NotificationReceived)]
    # Byte for byte: raw JSON is relayed unchanged, a mapping as compact JSON.
    assert [n.to_bytes() for n in received] == [n.to_bytes() for n in writes.sent], events
    terminal = [event for event in events if isinstance(event, TERMINAL_EVENTS)]
    assert len(terminal) == 1, events
    expected: type[Event]
    if writes.ending == "error":
        expected = StreamErrored
    elif writes.ending == "result":
        expected = StreamEnded
        assert any(isinstance(event, ResultReceived) for event in events), events
    elif writes.ending == "end":
        expected = StreamEnded if writes.sent else NotServed
    else:
        expected = StreamBroken  # the connection ended without the body's end
    assert isinstance(terminal[0], expected), (events, writes.ending)


def TestOneInput(data: bytes) -> None:
    """One fuzz input: see the module's documentation."""
    if len(data) < 2:
        return
    config, script_size = data[0], data[1]
    script, request = data[2 : 2 + script_size], data[2 + script_size :]
    options = _options(config)
    whole = _run([request] if request else [], options)
    one_by_one = _run([request[i : i + 1] for i in range(len(request))], options)
    assert one_by_one == whole, (one_by_one, whole)
    size = (config >> 4) + 2
    pieces = [request[i : i + size] for i in range(0, len(request), size)]
    assert _run(pieces, options) == whole

    events, out = whole
    assert events[-1] == ConnectionClosed()
    assert events.count(ConnectionClosed()) == 1
    body = events[:-1]
    assert len(body) <= 1
    if not body:
        assert out in (b"", b"HTTP/1.1 100 Continue\r\n\r\n")
        return
    first = body[0]
    if isinstance(first, AskRefused):
        assert first.status in DECLARED_STATUSES, first
        assert first.reason
        response = out.removeprefix(b"HTTP/1.1 100 Continue\r\n\r\n")
        _check_refusal(response, first.status, head_only=request.startswith(b"HEAD "))
        return
    assert isinstance(first, (NotificationsAsked, ExchangeAsked)), first
    writes = _run_script(first, request, options, script)
    _read_back(first, writes, options)


if __name__ == "__main__":
    from _driver import main

    main(TestOneInput)
