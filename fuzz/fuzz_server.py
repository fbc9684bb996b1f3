"""Fuzz the server's request reading: arbitrary bytes in, only declared outcomes out.

The first input byte picks the options (a token, small limits) and how the
rest is split; the rest is what the peer sent. Checked:

* ``next_event()`` never raises;
* the events are one of the declared shapes: an ask event, or one
  ``AskRefused`` with a declared status; then exactly one
  ``ConnectionClosed`` (the input ends with end of file);
* fed whole, one byte at a time, and in pieces of another size, the
  events and the queued bytes are the same;
* a refusal's queued bytes are one complete HTTP response with that
  status and ``Connection: close``; an accepted ask can be answered.
"""

from __future__ import annotations

from typing import Any

import h11

from diverge_notifications.sansio import NEED_DATA, ErrorData
from diverge_notifications.sansio.events import (
    AskRefused,
    ConnectionClosed,
    Event,
    ExchangeAsked,
    NotificationsAsked,
)
from diverge_notifications.sansio.server import ServerConnection

DECLARED_STATUSES = frozenset({400, 401, 404, 405, 413, 431, 501, 505})


def _options(config: int) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if config & 1:
        options["token"] = "t0k3n"
    if config & 2:
        options["max_head_size"] = 64
    if config & 4:
        options["max_ask_size"] = 8
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


def TestOneInput(data: bytes) -> None:
    """One fuzz input: see the module's documentation."""
    if not data:
        return
    config, request = data[0], data[1:]
    options = _options(config)
    whole = _run([request] if request else [], options)
    one_by_one = _run([request[i : i + 1] for i in range(len(request))], options)
    assert one_by_one == whole, (one_by_one, whole)
    size = (config >> 3) + 2
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
    conn = ServerConnection(**options)
    conn.receive_data(request)
    assert conn.next_event() == first
    if isinstance(first, NotificationsAsked):
        assert conn.start_path()
        assert conn.send_notification(b'{"method":"notifications/x"}')
        assert conn.end_path() == b"0\r\n\r\n"
    else:
        assert conn.answer_error(ErrorData(code=-32603, message="x")).endswith(b"0\r\n\r\n")
    assert conn.next_event() == ConnectionClosed()


if __name__ == "__main__":
    from _driver import main

    main(TestOneInput)
