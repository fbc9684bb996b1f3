"""Runs of short notifications decoded at once give what decoding each gives.

``messages.decode_notifications`` (and under it ``_json.parse_each``) reads
a batch of messages in one pass when every one is a short, plain
notification, and returns ``None`` otherwise, so that each is then decoded
on its own. Whatever the batch, the result must be exactly what
``decode_message`` of each gives; and a batch of plain notifications must
be taken at once, or the shortcut would be dead code.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio import FrameError, Notification
from diverge_notifications.sansio.mcp.json import JsonError, parse, parse_each
from diverge_notifications.sansio.wire.messages import (
    decode_message,
    decode_notifications,
    encode_message,
)
from tests.strategies import message_bytes, notifications


def one_by_one(payloads: list[bytes]) -> list[object]:
    """What ``decode_message`` gives for each payload: a message or the error's detail."""
    results: list[object] = []
    for payload in payloads:
        try:
            results.append(decode_message(payload))
        except FrameError as error:
            results.append(("error", error.detail))
    return results


def plain(notification: Notification) -> bool:
    """Whether the shortcut must take this notification's message."""
    message = encode_message(notification)
    return len(message) < 257 and message.isascii() and b"\\" not in message


@given(st.lists(message_bytes(), max_size=8))
@settings(max_examples=400, deadline=None)
def test_any_batch_gives_what_each_gives(payloads: list[bytes]) -> None:
    at_once = decode_notifications(payloads)
    if at_once is None:
        return  # each is decoded on its own: nothing else to compare
    expected = one_by_one(payloads)
    assert all(type(result) is Notification for result in expected)
    assert at_once == expected
    assert [item.to_bytes() for item in at_once] == [payload[1:] for payload in payloads]


@given(st.lists(notifications(), min_size=1, max_size=8))
@settings(max_examples=200, deadline=None)
def test_plain_notifications_are_taken_at_once(items: list[Notification]) -> None:
    payloads = [encode_message(item) for item in items]
    at_once = decode_notifications(payloads)
    if all(plain(item) for item in items):
        assert at_once is not None
    if at_once is not None:
        assert at_once == one_by_one(payloads) == items
        assert [item.to_bytes() for item in at_once] == [payload[1:] for payload in payloads]


GOOD = b'\x00{"method":"notifications/progress","params":{"progress":1}}'


@pytest.mark.parametrize(
    "odd",
    [
        b'\x00{"method":"x"} ',  # whitespace after the value
        b'\x00 {"method":"x"}',  # whitespace before it
        b'\x00{"method":"x"}{"method":"y"}',  # two values
        b'\x00{"method":"x","n":1e400}',  # a number out of range
        b'\x00{"method":"x","n":NaN}',
        b'\x00{"method":"\\ud800"}',  # a lone surrogate (an escape)
        b'\x00{"method":"caf\xc3\xa9"}',  # not ASCII: decoded on its own
        b'\x00{"method":"x"',  # cut short: the next message must not complete it
        b"\x00[1,2]",  # not an object
        b'\x00{"method":1}',  # no string method
        b'\x01{"code":1,"message":"m"}',  # an error
        b'\x02{"method":"x"}',  # an unknown tag
        b"",  # an empty message
        b"\x00",  # no JSON
        b"\x00" + b'{"method":"' + b"x" * 300 + b'"}',  # too long to take at once
    ],
)
def test_a_batch_with_one_odd_message_is_decoded_one_by_one(odd: bytes) -> None:
    for payloads in ([odd, GOOD], [GOOD, odd], [GOOD, odd, GOOD]):
        assert decode_notifications(payloads) is None
        # One by one, each gets its own result: the good ones are unharmed.
        results = one_by_one(payloads)
        assert [
            result for result, payload in zip(results, payloads, strict=True) if payload == GOOD
        ] == [decode_message(GOOD)] * payloads.count(GOOD)


def test_a_number_does_not_run_into_the_next_message() -> None:
    # Were the scanner to read past a message's end, "1" followed by a tag
    # byte that is a digit would be read as one number.
    assert parse_each([b"\x001", b"5{}"], 1) is None
    assert parse_each([b"\x001", b"\x005"], 1) == [1, 5]


def test_not_bytes_is_decoded_one_by_one() -> None:
    mixed: list[bytes] = [bytearray(GOOD), GOOD]  # type: ignore[list-item]  # a caller's mistake
    assert decode_notifications(mixed) is None
    assert decode_notifications([GOOD, GOOD]) == [decode_message(GOOD)] * 2


@given(st.lists(st.one_of(st.binary(max_size=40), st.just(GOOD[1:])), max_size=6))
@settings(max_examples=300, deadline=None)
def test_parse_each_agrees_with_parse(texts: list[bytes]) -> None:
    messages = [b"\x00" + text for text in texts]
    values = parse_each(messages, 1)
    if values is None:
        return
    expected = []
    for message in messages:
        try:
            expected.append(parse(message, 1))
        except JsonError:  # pragma: no cover - parse_each must have refused it
            pytest.fail(f"parse_each took {message!r}, which parse refuses")
    assert values == expected
    assert values == [json.loads(text) for text in texts]
