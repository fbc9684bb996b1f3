"""Fuzz the message codec ``[tag][JSON]``.

For any bytes, :func:`decode_message` returns a notification or an error, or
raises :class:`FrameError`, and nothing else; a decoded message re-encodes
to exactly the bytes it came from, and everything derived from it (kind,
typed view, ``_meta``, equality, hash, repr) can be read without an error.

    python fuzz/fuzz_message.py -max_total_time=60

``SEEDS`` holds one message of every kind and a few near misses;
``DICTIONARY`` the JSON and MCP tokens they are made of.
"""

from __future__ import annotations

from _driver import JSON_TOKENS, check_codec

from diverge_notifications.sansio import (
    ErrorData,
    FrameError,
    FrameErrorReason,
    Notification,
    decode_message,
    encode_message,
)

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


def TestOneInput(data: bytes) -> None:
    message = check_codec(data, decode_message, encode_message, FrameError, FrameErrorReason)
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
