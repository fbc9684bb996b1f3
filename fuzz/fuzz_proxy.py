"""Fuzz the proxy side: arbitrary answer bytes in, only declared events out.

The first input byte picks the options and how the rest is read; the rest
is (part of) what the server sent. Checked:

* ``next_event()`` never raises, and every event is a declared one;
* fed whole, one byte at a time, and in pieces of another size, the events
  are the same;
* a notification path obeys the path's rules: ``StreamOpened`` only first,
  exactly one terminal event (the input ends with end of file), then
  exactly one ``ReaskNeeded``, last; an exchange gives at most one
  ``ResultReceived``, exactly one terminal event last, and no
  ``ReaskNeeded``.

Config byte: bits 0-1 choose what precedes the rest (nothing; a 2xx chunked
path head; the same head with the rest wrapped in one chunk; a
close-delimited path head), bit 2 the container profile, bit 3 an exchange
instead of a notification path, bit 4 small limits, bits 5-7 the piece size.
"""

from __future__ import annotations

from typing import Any

from diverge_notifications.sansio import (
    NEED_DATA,
    Ask,
    Event,
    Exchange,
    ExchangeConnection,
    MessageRejected,
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
from diverge_notifications.sansio.events import TERMINAL_EVENTS

CHUNKED_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.diverge.messages\r\n"
    b"Content-Location: /mcp/notifications/c1\r\nTransfer-Encoding: chunked\r\n\r\n"
)
CLOSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.diverge.messages\r\n"
    b"Content-Location: /mcp/notifications/c1\r\nConnection: close\r\n\r\n"
)
PATH_EVENTS = (
    StreamOpened,
    NotificationReceived,
    MessageRejected,
    StreamErrored,
    NotServed,
    StreamEnded,
    StreamBroken,
    ReaskNeeded,
)
EXCHANGE_EVENTS = (
    StreamOpened,
    ResultReceived,
    StreamErrored,
    NotServed,
    StreamEnded,
    StreamBroken,
)
ASK = Ask(exchange=Exchange.LIST_TOOLS, params={})

SEEDS = [
    b"\x01"
    + b"1b\r\n\x00\x00\x00\x17\x00"
    + b'{"method":"notifications/x"}'[:22]
    + b"\r\n0\r\n\r\n",
    b"\x02\x00\x00\x00\x00\x00\x00\x00\x0f\x00" + b'{"method":"a/b"}'[:14],
    b"\x03\x00\x00\x00\x0f\x01" + b'{"code":1,"message":"x"}'[:14],
    b"\x00HTTP/1.1 401 Unauthorized\r\nContent-Length: 3\r\n\r\nno!",
    b"\x00HTTP/1.1 100 Continue\r\n\r\n" + CHUNKED_HEAD + b"0\r\n\r\n",
    b"\x0a\x00\x00\x00\x03\x00{}",
    b"\x06\x00\x00\x00\x10\x00" + b'{"method":"x/y"}' + b"\x00\x00\x00\x03\x01{}",
]
DICTIONARY = [
    b"HTTP/1.1 200 OK\r\n",
    b"HTTP/1.0 ",
    b"Content-Type: application/vnd.diverge.messages\r\n",
    b"Content-Location: /mcp/notifications/c1\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Content-Length: ",
    b"\r\n\r\n",
    b"0\r\n\r\n",
    b"\x00\x00\x00\x00",
    b'\x00{"method":"notifications/progress"}',
    b'\x01{"code":-32603,"message":"x"}',
]


def _options(config: int) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if config & 4 and not config & 8:
        options["profile"] = Profile.CONTAINER
    if config & 16:
        options["max_frame_size"] = 24
        options["max_head_size"] = 200
    return options


def _answer(config: int, rest: bytes) -> bytes:
    mode = config & 3
    if mode == 1:
        return CHUNKED_HEAD + rest
    if mode == 2:
        return CHUNKED_HEAD + (b"%x\r\n%s\r\n" % (len(rest), rest) if rest else b"") + b"0\r\n\r\n"
    if mode == 3:
        return CLOSE_HEAD + rest
    return rest


def _run(config: int, pieces: list[bytes]) -> list[Event]:
    options = _options(config)
    connection: ProxyConnection | ExchangeConnection
    if config & 8:
        connection = ExchangeConnection("fuzz:1", ASK, **options)
    else:
        connection = ProxyConnection("fuzz:1", **options)
    connection.data_to_send()
    events: list[Event] = []
    for piece in [*pieces, b""]:
        connection.receive_data(piece)
        while (event := connection.next_event()) is not NEED_DATA:
            events.append(event)
    assert connection.next_event() is NEED_DATA
    return events


def _check_path(events: list[Event]) -> None:
    assert all(type(event) in PATH_EVENTS for event in events), events
    assert all(not isinstance(event, StreamOpened) for event in events[1:]), events
    terminals = [i for i, event in enumerate(events) if isinstance(event, TERMINAL_EVENTS)]
    assert len(terminals) == 1, events
    assert events[-1] == ReaskNeeded() and terminals[0] == len(events) - 2, events
    assert sum(isinstance(event, ReaskNeeded) for event in events) == 1, events


def _check_exchange(events: list[Event]) -> None:
    assert all(type(event) in EXCHANGE_EVENTS for event in events), events
    assert all(not isinstance(event, StreamOpened) for event in events[1:]), events
    assert sum(isinstance(event, ResultReceived) for event in events) <= 1, events
    terminals = [i for i, event in enumerate(events) if isinstance(event, TERMINAL_EVENTS)]
    assert terminals == [len(events) - 1], events
    if isinstance(events[-1], StreamEnded):
        assert isinstance(events[-2], ResultReceived), events


def TestOneInput(data: bytes) -> None:
    """One fuzz input: see the module's documentation."""
    if not data:
        return
    config, rest = data[0], data[1:]
    answer = _answer(config, rest)
    whole = _run(config, [answer] if answer else [])
    one_by_one = _run(config, [answer[i : i + 1] for i in range(len(answer))])
    assert one_by_one == whole, (one_by_one, whole)
    size = (config >> 5) * 7 + 2
    pieces = [answer[i : i + size] for i in range(0, len(answer), size)]
    assert _run(config, pieces) == whole
    if config & 8:
        _check_exchange(whole)
    else:
        _check_path(whole)


if __name__ == "__main__":
    from _driver import main

    main(TestOneInput)
