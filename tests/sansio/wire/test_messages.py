"""The message codec ``[tag][JSON]``: vectors and properties.

The provider notifications page calls a message a ``Frame``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio import (
    ErrorData,
    FrameError,
    FrameErrorReason,
    LocalProtocolError,
    LogLevel,
    Notification,
    NotificationKind,
    ProtocolError,
    decode_message,
    encode_frame,
    encode_message,
)
from diverge_notifications.sansio.errors import DecodeError
from diverge_notifications.sansio.mcp.model import ErrorCode, LogMessage
from diverge_notifications.sansio.wire.messages import (
    ERROR_TAG,
    ERROR_TAG_BYTE,
    NOTIFICATION_TAG,
    NOTIFICATION_TAG_BYTE,
    Message,
    pack_frame_head,
    to_error,
    to_notification,
)
from tests.strategies import message_bytes, messages

PROGRESS_MESSAGE = bytes.fromhex(
    "00"  # tag 0: a notification
    "7b226a736f6e727063223a22322e30222c226d6574686f64223a226e6f74696669"
    "636174696f6e732f70726f6772657373222c22706172616d73223a7b2270726f67"
    "72657373546f6b656e223a372c2270726f6772657373223a312c22746f74616c22"
    "3a347d7d"
)
ERROR_MESSAGE = bytes.fromhex(
    "01"  # tag 1: an error, the last message of a path
    "7b22636f6465223a2d33323630332c226d657373616765223a22736572766572"
    "20676f6e65227d"
)

Decoded = TypeVar("Decoded")

DOCS = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


def documented_dump(name: str) -> bytes:
    """The bytes of the hex dump labelled ``<!-- dump: name -->`` in docs/protocol.md."""
    text = DOCS.read_text(encoding="utf-8")
    block = text.split(f"<!-- dump: {name} -->", 1)[1].split("```text\n", 1)[1]
    block = block.split("```", 1)[0]
    data = bytearray()
    for line in block.splitlines():
        offset, rest = line.split("  ", 1)
        assert int(offset, 16) == len(data)
        data += bytes.fromhex(rest.split("|", 1)[0])
    return bytes(data)


def decoding_all_ways(
    decode: Callable[[bytes | bytearray | memoryview], Decoded], error: type[Exception]
) -> Callable[[bytes], Decoded]:
    """``decode`` made to decode from bytes, bytearray and an offset memoryview.

    All three must agree, on the value or on the ``error`` raised; the
    agreed value is returned and the agreed error raised again.
    """

    def decode_all_ways(data: bytes) -> Decoded:
        results: list[Decoded | Exception] = []
        for view in (data, bytearray(data), memoryview(b"\xaa" + data)[1:]):
            try:
                results.append(decode(view))
            except error as caught:
                results.append(caught)
        assert results[0] == results[1] == results[2]
        if isinstance(results[0], Exception):  # an ``error``: nothing else was kept
            raise results[0]
        return results[0]

    return decode_all_ways


decode_all_ways = decoding_all_ways(decode_message, FrameError)


# --- the documented examples ---------------------------------------------------------


def test_progress_message_example() -> None:
    notification = Notification(
        "notifications/progress", {"progressToken": 7, "progress": 1, "total": 4}
    )
    assert encode_message(notification) == PROGRESS_MESSAGE
    decoded = decode_all_ways(PROGRESS_MESSAGE)
    assert decoded == notification
    assert isinstance(decoded, Notification)
    assert decoded.kind is NotificationKind.PROGRESS
    assert encode_message(decoded) == PROGRESS_MESSAGE


def test_error_message_example() -> None:
    error = ErrorData(code=ErrorCode.INTERNAL_ERROR, message="server gone")
    assert encode_message(error) == ERROR_MESSAGE
    decoded = decode_all_ways(ERROR_MESSAGE)
    assert decoded == error
    assert encode_message(decoded) == ERROR_MESSAGE


def test_documented_dumps() -> None:
    assert documented_dump("progress-message") == PROGRESS_MESSAGE
    assert documented_dump("error-message") == ERROR_MESSAGE
    assert len(PROGRESS_MESSAGE) == 0x68  # the frame length the docs give


def test_tags() -> None:
    assert (NOTIFICATION_TAG, ERROR_TAG) == (0, 1)
    assert (NOTIFICATION_TAG_BYTE, ERROR_TAG_BYTE) == (b"\x00", b"\x01")


@settings(max_examples=100)
@given(messages())
def test_a_frame_head_and_the_json_are_the_frame_of_the_message(message: Message) -> None:
    """What the server writes on its hot path is what encode_frame(encode_message()) gives."""
    json = message.to_bytes()
    tag = NOTIFICATION_TAG if isinstance(message, Notification) else ERROR_TAG
    head = pack_frame_head(len(json) + 1, tag)
    assert head + json == encode_frame(encode_message(message))


def test_writers_take_a_notification_as_an_object_a_mapping_or_raw_json() -> None:
    raw = b'{ "method" : "notifications/x" }'
    note = Notification.from_bytes(raw)
    assert to_notification(note) is note
    assert to_notification(raw).to_bytes() == raw  # relayed unchanged
    assert to_notification(bytearray(raw)).to_bytes() == raw
    assert (
        to_notification({"method": "notifications/x"}).to_bytes() == b'{"method":"notifications/x"}'
    )
    with pytest.raises(LocalProtocolError, match="not a notification"):
        to_notification(b"[]")
    with pytest.raises(TypeError):
        to_notification(42)  # type: ignore[arg-type]
    error = ErrorData(code=1, message="m")
    assert to_error(error) is error
    with pytest.raises(TypeError, match="expected an ErrorData"):
        to_error({"code": 1})  # type: ignore[arg-type]


# --- the three failures ---------------------------------------------------------------


def test_empty() -> None:
    with pytest.raises(FrameError) as caught:
        decode_all_ways(b"")
    assert caught.value.reason is FrameErrorReason.EMPTY
    assert caught.value.tag is None
    assert caught.value.detail == "message is empty: no tag byte"


@pytest.mark.parametrize("tag", [2, 3, 0x7B, 255])
@pytest.mark.parametrize("body", [b"", b'{"method":"x"}', b"\xff"])
def test_unknown_tag(tag: int, body: bytes) -> None:
    with pytest.raises(FrameError) as caught:
        decode_all_ways(bytes((tag,)) + body)
    assert caught.value.reason is FrameErrorReason.UNKNOWN_TAG
    assert caught.value.tag == tag
    assert caught.value.detail == f"unknown message tag {tag} (0 is a notification, 1 an error)"


@pytest.mark.parametrize(
    ("data", "tag", "detail"),
    [
        (b"\x00", 0, "notification is not valid JSON: Expecting value"),
        (b"\x00 ", 0, "notification is not valid JSON: Expecting value"),
        (b"\x00[]", 0, "notification must be a JSON object, not an array"),
        (b"\x00null", 0, "notification must be a JSON object, not null"),
        (b'\x00{"code":1,"message":"m"}', 0, 'notification has no "method" member'),
        (b'\x00{"method":7}', 0, 'notification "method" must be a string, not a number'),
        (b'\x00{"method":"m","params":[1]}', 0, '"params" must be an object or null'),
        (b'\x00{"method":"m\xff"}', 0, "invalid UTF-8 at byte 12"),
        (b'\x00{"method":"m","a":NaN}', 0, "non-standard JSON constant NaN"),
        (b'\x00{"method":"m","a":Infinity}', 0, "non-standard JSON constant Infinity"),
        (b'\x00{"method":"m","a":-Infinity}', 0, "non-standard JSON constant -Infinity"),
        (b'\x00{"method":"m","a":1e400}', 0, "number out of range: 1e400"),
        (b'\x00{"method":"m","a":-' + b"1" * 1000 + b"}", 0, "number out of range: -111"),
        (b"\x00" + b"[" * 10**5, 0, "arrays and objects nested 128 deep"),
        (b'\x00{"method":"m","a":"\\udbff"}', 0, "lone surrogate"),
        (b"\x01", 1, "error is not valid JSON: Expecting value"),
        (b'\x01{"method":"m"}', 1, 'error "code" must be an int32, not missing or null'),
        (b'\x01{"code":2147483648,"message":"m"}', 1, "not an integer outside the int32"),
        (b'\x01{"code":-1.0,"message":"m"}', 1, 'error "code" must be an int32, not a number'),
        (b'\x01{"code":false,"message":"m"}', 1, '"code" must be an int32, not a boolean'),
        (b'\x01{"code":1}', 1, 'error "message" must be a string, not missing or null'),
        (b'\x01{"code":1,"message":"m","data":NaN}', 1, "non-standard JSON constant NaN"),
        (b"\x01" + b"{" * 10**5, 1, "error is not valid JSON"),
    ],
)
def test_bad_body(data: bytes, tag: int, detail: str) -> None:
    with pytest.raises(FrameError) as caught:
        decode_all_ways(data)
    error = caught.value
    assert error.reason is FrameErrorReason.BODY
    assert error.tag == tag
    assert detail in error.detail
    assert str(error) == error.detail


def test_frame_error_is_declared() -> None:
    assert issubclass(FrameError, ProtocolError)
    assert issubclass(FrameError, ValueError)
    assert issubclass(FrameError, DecodeError)
    a = FrameError(FrameErrorReason.UNKNOWN_TAG, "d", tag=9)
    assert a == FrameError(FrameErrorReason.UNKNOWN_TAG, "d", tag=9)
    assert hash(a) == hash(FrameError(FrameErrorReason.UNKNOWN_TAG, "d", tag=9))
    assert a != FrameError(FrameErrorReason.UNKNOWN_TAG, "d", tag=8)
    assert repr(a) == "FrameError(UNKNOWN_TAG, 'd', tag=9)"


# --- tag 0 and tag 1 bodies ----------------------------------------------------------------


def test_tag_0_body_is_kept_byte_for_byte() -> None:
    body = b' {"params":{"level":"info","data":"\\u00e9"} , "method":"notifications/message"}\n'
    decoded = decode_all_ways(b"\x00" + body)
    assert isinstance(decoded, Notification)
    assert decoded.view == LogMessage(level=LogLevel.INFO, logger=None, data="é")
    assert encode_message(decoded) == b"\x00" + body


def test_tag_0_custom_notification() -> None:
    decoded = decode_all_ways(b'\x00{"method":"vendor/thing","params":null}')
    assert isinstance(decoded, Notification)
    assert decoded.kind is NotificationKind.CUSTOM
    assert decoded.params is None


def test_tag_1_body_is_kept_byte_for_byte() -> None:
    body = b'{ "message":"gone", "code":-32002, "data":{"uri":"a://b"}, "x":1 }'
    decoded = decode_all_ways(b"\x01" + body)
    assert decoded == ErrorData(code=-32002, message="gone", data={"uri": "a://b"})
    assert isinstance(decoded, ErrorData)
    assert decoded.well_known is ErrorCode.RESOURCE_NOT_FOUND
    assert encode_message(decoded) == b"\x01" + body


def test_encode_refuses_other_values() -> None:
    with pytest.raises(TypeError):
        encode_message({"method": "m"})  # type: ignore[arg-type]


# --- properties -------------------------------------------------------------------------


@settings(max_examples=200)
@given(messages())
def test_decode_inverts_encode(message: Message) -> None:
    data = encode_message(message)
    decoded = decode_message(data)
    assert decoded == message
    assert type(decoded) is type(message)
    assert encode_message(decoded) == data


@settings(max_examples=200)
@given(message_bytes())
def test_encode_inverts_decode(data: bytes) -> None:
    try:
        message = decode_message(data)
    except FrameError:
        return
    assert encode_message(message) == data


@settings(max_examples=200)
@given(st.binary())
def test_decode_is_total(data: bytes) -> None:
    try:
        message = decode_message(data)
    except FrameError as error:
        assert isinstance(error.reason, FrameErrorReason)
        assert error.detail
        return
    assert isinstance(message, (Notification, ErrorData))
    assert encode_message(message) == data
