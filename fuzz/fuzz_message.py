"""Fuzz the message codec ``[tag][JSON]``.

For any bytes, :func:`decode_message` returns a notification or an error, or
raises :class:`FrameError`, and nothing else; a decoded message re-encodes
to exactly the bytes it came from, and everything derived from it (kind,
typed view, ``_meta``, equality, hash, repr) can be read without an error.
A ``bytearray`` or a ``memoryview`` decodes as the same ``bytes`` do, and
the writers' strict helpers agree with the decoder: a notification's JSON
(and the notification itself, and its members) is one to send, relayed
byte for byte; what the decoder rejects as a body they refuse with
``LocalProtocolError``; the wrong types are a ``TypeError``. A body that is
a JSON object is a one-shot result to send (as it is, or as the mapping it
decodes to), and any other body is refused as one. A run of messages
decoded at once (``decode_notifications``) gives what decoding each gives.

    python fuzz/fuzz_message.py -max_total_time=60

``SEEDS`` holds one message of every kind and a few near misses;
``DICTIONARY`` the JSON and MCP tokens they are made of.
"""

from __future__ import annotations

from collections.abc import Callable

from _driver import JSON_TOKENS, check_codec

from diverge_notifications.sansio import (
    ErrorData,
    FrameError,
    FrameErrorReason,
    LocalProtocolError,
    Notification,
    decode_message,
    encode_message,
)
from diverge_notifications.sansio.mcp.json import JsonError, parse
from diverge_notifications.sansio.wire.messages import (
    decode_notifications,
    result_json,
    to_error,
    to_notification,
)

#: The module fuzzed (tests/test_fuzz_coverage.py measures how much of it the seeds run).
TARGET = decode_message.__module__

SEEDS = [
    b'\x00{"jsonrpc":"2.0","method":"notifications/progress","params":'
    b'{"progressToken":7,"progress":1,"total":4,"message":"m"}}',
    b'\x00{"method":"notifications/cancelled","params":{"requestId":"r","reason":"x"}}',
    b'\x00{"method":"notifications/message","params":{"level":"warning","logger":"l","data":[1]}}',
    b'\x00{"method":"notifications/resources/updated","params":{"uri":"a://b"}}',
    b'\x00{"method":"notifications/resources/list_changed"}',
    b'\x00{"method":"notifications/tools/list_changed","params":null}',
    b'\x00{"method":"notifications/prompts/list_changed","params":{"_meta":{}}}',
    b'\x00{"method":"notifications/elicitation/complete","params":{"elicitationId":"e"}}',
    b'\x00{"method":"notifications/tasks/status","params":{"taskId":"t","status":"working"}}',
    b'\x00{"method":"notifications/tasks","params":{"taskId":"t","status":"failed",'
    b'"statusMessage":"s"}}',
    b'\x00{"method":"notifications/subscriptions/acknowledged","params":{"notifications":{}}}',
    b'\x00 {"params":{"progress":"abc","progressToken":1.5},"x":"\\u00e9","method":"v/x"} ',
    b'\x01{"code":-32603,"message":"server gone"}',
    b'\x01{"code":-32002,"message":"m","data":{"uri":"a://b"}}',
    b'\x00{"no":"method"}',
    b"\x00[]",
    b'\x01{"code":1.5,"message":"m"}',
    b"\x02{}",
    b"",
]

DICTIONARY = [
    *JSON_TOKENS,
    b"-0",
    b"1.5e3",
    b'"jsonrpc"',
    b'"2.0"',
    b'"method"',
    b'"params"',
    b'"_meta"',
    b'"notifications/progress"',
    b'"notifications/message"',
    b'"notifications/cancelled"',
    b'"notifications/tasks"',
    b'"progressToken"',
    b'"progress"',
    b'"total"',
    b'"level"',
    b'"data"',
    b'"uri"',
    b'"code"',
    b'"message"',
    b'"warning"',
    b"\\ud800",
    b"\\ud83d\\ude00",
    b"\\u00e9",
]


def _refused(call: Callable[..., object], *arguments: object, error: type[Exception]) -> None:
    try:
        call(*arguments)
    except error:
        return
    raise AssertionError(f"{call!r}{arguments!r} did not raise {error.__name__}")


def _writers_agree(data: bytes, message: object) -> None:
    """The strict helpers writers use take what the decoder accepts, and only that."""
    if isinstance(message, Notification):
        relayed = to_notification(data[1:])
        assert relayed == message and relayed.to_bytes() == data[1:]
        assert to_notification(message) is message
        assert to_notification(dict(message.members)) == message
        _refused(to_error, message, error=TypeError)
    elif isinstance(message, ErrorData):
        assert to_error(message) is message
    elif data[:1] == b"\x00":
        _refused(to_notification, data[1:], error=LocalProtocolError)
    _refused(to_notification, len(data), error=TypeError)
    _refused(encode_message, data, error=TypeError)
    _result_agrees(data[1:])


def _result_agrees(body: bytes) -> None:
    """A one-shot result is taken exactly when it is a JSON object, and relayed byte for byte."""
    try:
        value = parse(body)
    except JsonError:
        value = None
    if not isinstance(value, dict):
        _refused(result_json, body, error=LocalProtocolError)
        return
    assert result_json(body) == body
    try:
        again = result_json(value)
    except LocalProtocolError:
        return  # what the encoder cannot carry back (a lone surrogate)
    assert parse(again) == value
    _refused(result_json, [value], error=TypeError)


def _runs_agree(data: bytes) -> None:
    """Runs of messages decoded at once give what decoding each gives, or are refused."""
    for run in ([data, data], [data, SEEDS[0]], [SEEDS[1], data], [data[:1], data[1:]]):
        at_once = decode_notifications(run)
        if at_once is None:
            continue
        assert at_once == [decode_message(item) for item in run]
        assert [item.to_bytes() for item in at_once] == [item[1:] for item in run]


def TestOneInput(data: bytes) -> None:
    message = check_codec(data, decode_message, encode_message, FrameError, FrameErrorReason)
    for other in (bytearray(data), memoryview(data)):
        try:
            assert decode_message(other) == message
        except FrameError:
            assert message is None
    _writers_agree(data, message)
    _runs_agree(data)
    if isinstance(message, Notification):
        assert isinstance(message.method, str)
        assert message.kind is not None
        assert message.view is not None or message.kind.name == "CUSTOM"
        assert message.meta is None or isinstance(message.meta, dict)
        again = Notification.from_bytes(message.to_bytes())
        assert again == message and hash(again) == hash(message)
        assert again.kind is message.kind
    elif message is not None:
        assert isinstance(message, ErrorData)
        assert ErrorData.from_bytes(message.to_bytes()) == message
        assert -(2**31) <= message.code < 2**31


if __name__ == "__main__":
    from _driver import main

    main(TestOneInput)
