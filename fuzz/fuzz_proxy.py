"""Fuzz the proxy side: arbitrary answer bytes in, only declared events out.

The first input byte picks the options and how the rest is read; the
second picks where the connection is lost and how the bytes before that
are split; the rest is (part of) what the server sent. Checked:

* ``next_event()`` never raises, and every event is a declared one;
* fed whole, one byte at a time, in pieces of another size, and split at
  random offsets, the events are the same;
* with ``connection_lost()`` called at a point the second byte picks
  (before the ask is sent, at any offset of the answer, with the events
  read before the loss or not), the path rules below still hold, the
  events do not depend on how the bytes were split or when they were read,
  the notifications are a prefix of those the whole answer gives, a second
  loss changes nothing, and data after the loss is refused with
  ``LocalProtocolError``;
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

import itertools
import random
from typing import Any

from diverge_notifications.sansio import (
    NEED_DATA,
    TERMINAL_EVENTS,
    Ask,
    Event,
    Exchange,
    ExchangeConnection,
    LocalProtocolError,
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


def _frame(message: bytes) -> bytes:
    return len(message).to_bytes(4, "big") + message


def _head(*fields: str) -> bytes:
    """A 200 head with the path's content type and ``fields``."""
    lines = ["HTTP/1.1 200 OK", "Content-Type: application/vnd.diverge.messages", *fields]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


#: One notification frame (20 bytes, 0x14).
_NOTE = _frame(b'\x00{"method":"a/b"}')

#: The module fuzzed (tests/test_fuzz_coverage.py measures how much of it the seeds run).
TARGET = ProxyConnection.__module__

SEEDS = [
    b"\x01\x80"
    + b"1b\r\n\x00\x00\x00\x17\x00"
    + b'{"method":"notifications/x"}'[:22]
    + b"\r\n0\r\n\r\n",
    b"\x02\xff\x00\x00\x00\x00\x00\x00\x00\x0f\x00" + b'{"method":"a/b"}'[:14],
    b"\x03\x40\x00\x00\x00\x0f\x01" + b'{"code":1,"message":"x"}'[:14],
    b"\x00\x00HTTP/1.1 401 Unauthorized\r\nContent-Length: 3\r\n\r\nno!",
    b"\x00\xc0HTTP/1.1 100 Continue\r\n\r\n" + CHUNKED_HEAD + b"0\r\n\r\n",
    b"\x0a\x90\x00\x00\x00\x03\x00{}",
    b"\x06\x33\x00\x00\x00\x10\x00" + b'{"method":"x/y"}' + b"\x00\x00\x00\x03\x01{}",
    b"\x01\xfe\x00\x00\x00\x00\r\n3\r\n\x00\x00\x00\r\n",
    b"\x0b\xa0\x00\x00\x00\x03\x00{}" + b"\x00\x00\x00\x03\x00{}",
    b"\x13\x70"
    + b"\x00\x00\x00\x40\x00"
    + b'{"method":"notifications/too/long/for/the/small/limit"}',
    # Whole answers (mode 0): chunk extensions and trailers, broken chunks,
    # other statuses, lengths, encodings, heads h11 refuses or that are too large.
    b"\x00\x90" + CHUNKED_HEAD + b"14;ext=1\r\n" + _NOTE + b"\r\n0\r\nX-Trailer: v\r\n\r\n",
    b"\x00\x60" + CHUNKED_HEAD + b"14\r\n" + _NOTE + b"XY0\r\n\r\n",
    b"\x00\x50" + CHUNKED_HEAD + b"14\r\n" + _NOTE + b"\r\n0\r\nno colon here\r\n\r\n",
    b"\x00\x50" + CHUNKED_HEAD + b"zz\r\n",
    b"\x00\x80HTTP/1.1 204 No Content\r\n\r\n",
    b"\x00\x80HTTP/1.1 503 Service Unavailable\r\nContent-Length: 23\r\n\r\n"
    + b"503: retry later - busy",
    b"\x00\x20" + _head("Content-Length: 30") + _NOTE + _NOTE[:10],
    b"\x00\xe0" + _head("Content-Length: 0"),
    b"\x00\x30" + _head("Transfer-Encoding: gzip, chunked") + b"0\r\n\r\n",
    b"\x00\x30" + _head("Transfer-Encoding: identity", "Content-Length: 20") + _NOTE,
    b"\x00\x10HTTP/1.1 abc\r\n\r\n",
    b"\x00\x10HTTP/1.0 200 OK\r\nContent-Type: application/vnd.diverge.messages\r\n\r\n" + _NOTE,
    b"\x00\x40HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nhi",
    b"\x10\x40" + _head("X-Long: " + "x" * 300) + b"0\r\n\r\n",
    b"\x10\xd0" + CHUNKED_HEAD[:60],
    b"\x01\xd0" + b"14\r\n" + _NOTE[:12],
    # Exchanges (bit 3): a result, an error, nothing, a result cut.
    b"\x0a\xff" + _frame(b'\x00{"tools":[]}'),
    b"\x0a\x80" + _frame(b'\x01{"code":-32601,"message":"no"}'),
    b"\x09\x80" + b"0\r\n\r\n",
    b"\x0b\x80" + _frame(b'\x00{"tools":[]}')[:9],
    b"\x08\x80HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
    # Refusals whose body is cut short, broken or lost; a path that ends
    # inside a frame's length prefix.
    b"\x00\xf0HTTP/1.1 401 Unauthorized\r\nContent-Length: 30\r\n\r\nno token",
    b"\x00\xf0HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"\x00\xb0HTTP/1.1 503 Busy\r\nTransfer-Encoding: chunked\r\n\r\n9\r\nbusy, try",
    b"\x01\xf0" + b"2\r\n\x00\x00\r\n",
    b"\x01\x50" + b"14\r\n" + _NOTE + b"\r\n6\r\n\x00\x00\x00\x04\x00{\r\n",
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


def _connection(config: int) -> ProxyConnection | ExchangeConnection:
    options = _options(config)
    if config & 8:
        return ExchangeConnection("fuzz:1", ASK, **options)
    return ProxyConnection("fuzz:1", **options)


def _drain(connection: ProxyConnection | ExchangeConnection) -> list[Event]:
    events: list[Event] = []
    while (event := connection.next_event()) is not NEED_DATA:
        events.append(event)
    return events


def _run(config: int, pieces: list[bytes]) -> list[Event]:
    connection = _connection(config)
    if pieces:
        try:
            connection.receive_data(pieces[0])
        except LocalProtocolError:
            pass  # the answer cannot come before the ask is taken
        else:
            raise AssertionError("an answer was taken before the ask")
    assert connection.data_to_send()
    assert connection.data_to_send() == b""  # the ask is taken once
    events: list[Event] = []
    for piece in [*pieces, b""]:
        connection.receive_data(piece)
        events += _drain(connection)
    assert connection.next_event() is NEED_DATA
    _check_state(connection, events)
    return events


def _check_state(connection: ProxyConnection | ExchangeConnection, events: list[Event]) -> None:
    """What the connection says of itself agrees with the events it gave."""
    opened = [event for event in events if isinstance(event, StreamOpened)]
    if isinstance(connection, ExchangeConnection):
        assert connection.ask == ASK
        connection.answer_state  # noqa: B018 - readable in every state
    else:
        assert connection.channel == (opened[0].channel if opened else connection.channel)
        messages = [e for e in events if isinstance(e, (NotificationReceived, MessageRejected))]
        # The error that ends a path is a message too.
        assert len(messages) <= connection.messages <= len(messages) + 1, events
        assert connection.profile in (Profile.PROVIDER, Profile.CONTAINER)
    status = connection.status
    assert status is None or 100 <= status <= 999, status
    connection.state  # noqa: B018 - readable in every state


def _random_split(data: bytes, rng: random.Random) -> list[bytes]:
    """``data`` cut at random offsets (some pieces may be one byte, none is empty)."""
    if len(data) < 2:
        return [data] if data else []
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 12))))
    edges = [0, *cuts, len(data)]
    return [data[start:end] for start, end in itertools.pairwise(edges)]


def _run_lost(config: int, pieces: list[bytes] | None, read_early: bool) -> list[Event]:
    """Feed ``pieces``, then lose the connection; ``None``: lost before the ask was sent."""
    connection = _connection(config)
    events: list[Event] = []
    if pieces is None:
        connection.connection_lost("lost before asking")
    else:
        connection.data_to_send()
        for piece in pieces:
            connection.receive_data(piece)
            if read_early:
                events += _drain(connection)
        connection.connection_lost("cut by the fuzzer")
    connection.connection_lost("only the first loss counts")
    try:
        connection.receive_data(b"late")
    except LocalProtocolError:
        pass
    else:
        raise AssertionError("data after the loss was taken")
    connection.receive_data(b"")  # end of file after the loss changes nothing
    events += _drain(connection)
    assert connection.next_event() is NEED_DATA
    return events


def _notifications(events: list[Event]) -> list[Event]:
    return [event for event in events if isinstance(event, NotificationReceived)]


def _check_lost(config: int, cut: int, answer: bytes, whole: list[Event]) -> None:
    """Lose the connection where ``cut`` says; see the module's documentation."""
    rng = random.Random(cut)
    if cut == 0:
        lost = _run_lost(config, None, read_early=False)
    else:
        prefix = answer[: (cut * (len(answer) + 1)) // 256]
        lost = _run_lost(config, [prefix] if prefix else [], read_early=False)
        split = _run_lost(config, _random_split(prefix, rng), read_early=True)
        assert split == lost, (split, lost)
    if config & 8:
        _check_exchange(lost)
    else:
        _check_path(lost)
    received = _notifications(lost)
    assert received == _notifications(whole)[: len(received)], (lost, whole)


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
    if len(data) < 2:
        return
    config, cut, rest = data[0], data[1], data[2:]
    answer = _answer(config, rest)
    whole = _run(config, [answer] if answer else [])
    one_by_one = _run(config, [answer[i : i + 1] for i in range(len(answer))])
    assert one_by_one == whole, (one_by_one, whole)
    size = (config >> 5) * 7 + 2
    pieces = [answer[i : i + size] for i in range(0, len(answer), size)]
    assert _run(config, pieces) == whole
    assert _run(config, _random_split(answer, random.Random(cut))) == whole
    if config & 8:
        _check_exchange(whole)
    else:
        _check_path(whole)
    _check_lost(config, cut, answer, whole)


if __name__ == "__main__":
    from _driver import main

    main(TestOneInput)
