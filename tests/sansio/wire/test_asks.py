"""The provider ask and the agents-begin channel request.

The provider notifications page and the container request page define them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio import (
    Ask,
    AskError,
    Exchange,
    ProtocolError,
    decode_ask,
    encode_ask,
)
from diverge_notifications.sansio.errors import AskErrorReason, DecodeError
from diverge_notifications.sansio.wire.asks import (
    ChannelRequest,
    ChannelRequestTag,
    channel_request_for,
    decode_channel_request,
    encode_channel_request,
)
from tests.sansio.wire.test_messages import decoding_all_ways, documented_dump
from tests.strategies import ask_bytes, asks, channel_request_bytes, channel_requests

Decoded = TypeVar("Decoded")

# The documented examples (docs/protocol.md).
NOTIFICATIONS_ASK = bytes.fromhex("04")
CALL_TOOL_ASK = bytes.fromhex(
    "02"  # kind 2: call tool
    "7b226e616d65223a22736561726368222c22617267756d656e7473223a7b2271"
    "223a226d6370227d7d"
)
POSTGRES_REQUEST = bytes.fromhex("000000002a")  # tag 0, connection id 42
NOTIFICATIONS_REQUEST = bytes.fromhex("05")

decode_ask_all_ways = decoding_all_ways(decode_ask, AskError)
decode_request_all_ways = decoding_all_ways(decode_channel_request, AskError)


@dataclass(frozen=True)
class Codec(Generic[Decoded]):
    """One of the two ``[byte][payload]`` codecs, and what sets it apart from the other."""

    #: Decodes from bytes, bytearray and memoryview alike (see ``decoding_all_ways``).
    decode: Callable[[bytes], Decoded]
    encode: Callable[[Decoded], bytes]
    #: The first bytes whose payload is MCP params JSON.
    mcp_tags: tuple[int, ...]
    #: The notifications input, whose first byte makes the codec ignore what follows it.
    notifications: bytes
    notifications_value: Decoded
    #: First bytes the codec does not define.
    unknown_tags: tuple[int, ...]
    #: The details of the errors for no bytes and an unknown first byte (``{tag}``).
    empty_detail: str
    unknown_detail: str
    #: Generated values, and generated inputs (mostly valid, some mangled).
    values: st.SearchStrategy[Decoded]
    inputs: st.SearchStrategy[bytes]


ASK = Codec(
    decode=decode_ask_all_ways,
    encode=encode_ask,
    mcp_tags=(0, 1, 2, 3),
    notifications=NOTIFICATIONS_ASK,
    notifications_value=Ask(exchange=Exchange.NOTIFICATIONS),
    unknown_tags=(5, 6, 0x7B, 255),
    empty_detail="ask is empty: no kind byte",
    unknown_detail="unknown ask kind {tag} (kinds are 0 to 4)",
    values=asks(),
    inputs=ask_bytes(),
)
# Seed 003 words these error details.
CHANNEL_REQUEST = Codec(
    decode=decode_request_all_ways,
    encode=encode_channel_request,
    mcp_tags=(1, 2, 3, 4),
    notifications=NOTIFICATIONS_REQUEST,
    notifications_value=ChannelRequest(tag=ChannelRequestTag.MCP_NOTIFICATIONS),
    unknown_tags=(6, 7, 0x7B, 255),
    empty_detail="agents begin channel request frame is empty",
    unknown_detail="unknown agents begin channel request tag {tag}",
    values=channel_requests(),
    inputs=channel_request_bytes(),
)
CODECS: dict[str, Codec[Any]] = {"ask": ASK, "channel_request": CHANNEL_REQUEST}
EACH_CODEC = [pytest.param(codec, id=name) for name, codec in CODECS.items()]


def each_codec_with(cases: Callable[[Codec[Any]], tuple[int, ...]]) -> list[Any]:
    """``(codec, case)`` parameters: every codec, with each of its ``cases(codec)``."""
    return [
        pytest.param(codec, case, id=f"{name}-{case}")
        for name, codec in CODECS.items()
        for case in cases(codec)
    ]


# --- provider ask ---------------------------------------------------------------------------------


def test_documented_dumps() -> None:
    assert documented_dump("notifications-ask") == NOTIFICATIONS_ASK
    assert documented_dump("call-tool-ask") == CALL_TOOL_ASK
    assert documented_dump("postgres-request") == POSTGRES_REQUEST
    assert documented_dump("notifications-request") == NOTIFICATIONS_REQUEST


def test_documented_asks() -> None:
    assert encode_ask(Ask(exchange=Exchange.NOTIFICATIONS)) == NOTIFICATIONS_ASK
    call = Ask(exchange=Exchange.CALL_TOOL, params={"name": "search", "arguments": {"q": "mcp"}})
    assert encode_ask(call) == CALL_TOOL_ASK
    assert decode_ask_all_ways(CALL_TOOL_ASK) == call
    assert decode_ask_all_ways(NOTIFICATIONS_ASK) == Ask(exchange=Exchange.NOTIFICATIONS)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"\x00null", Ask(exchange=Exchange.LIST_TOOLS)),
        (b'\x00{"cursor":"c2"}', Ask(exchange=Exchange.LIST_TOOLS, params={"cursor": "c2"})),
        (b"\x01{}", Ask(exchange=Exchange.LIST_RESOURCES, params={})),
        (b'\x02{"name":"t"}', Ask(exchange=Exchange.CALL_TOOL, params={"name": "t"})),
        (b'\x03 {"uri":"a://b"}\n', Ask(exchange=Exchange.READ_RESOURCE, params={"uri": "a://b"})),
        (b"\x04", Ask(exchange=Exchange.NOTIFICATIONS)),
    ],
)
def test_ask_kinds(data: bytes, expected: Ask) -> None:
    ask = decode_ask_all_ways(data)
    assert ask == expected
    assert ask.exchange.value == data[0]
    assert encode_ask(ask) == data  # params bytes are kept as received


def test_ask_built_without_params_encodes_null() -> None:
    assert encode_ask(Ask(exchange=Exchange.LIST_RESOURCES)) == b"\x01null"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"exchange": Exchange.NOTIFICATIONS, "params": {}}, ValueError),
        ({"exchange": Exchange.CALL_TOOL, "params": [1]}, TypeError),
        ({"exchange": Exchange.CALL_TOOL, "params": "x"}, TypeError),
    ],
)
def test_ask_constructor_validates(kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        Ask(**kwargs)


def test_exchanges() -> None:
    assert [exchange.value for exchange in Exchange] == [0, 1, 2, 3, 4]
    assert [exchange.is_one_shot for exchange in Exchange] == [True, True, True, True, False]


def test_ask_error_is_declared() -> None:
    assert issubclass(AskError, ProtocolError)
    assert issubclass(AskError, ValueError)
    assert issubclass(AskError, DecodeError)
    error = AskError(AskErrorReason.UNKNOWN_TAG, "d", tag=6)
    assert error == AskError(AskErrorReason.UNKNOWN_TAG, "d", tag=6)
    assert hash(error) == hash(AskError(AskErrorReason.UNKNOWN_TAG, "d", tag=6))
    assert repr(error) == "AskError(UNKNOWN_TAG, 'd', tag=6)"


# --- agents-begin channel request (the container request page) ------------------------------------


def test_documented_channel_requests() -> None:
    postgres = ChannelRequest(tag=ChannelRequestTag.POSTGRES, connection_id=b"\x00\x00\x00\x2a")
    assert encode_channel_request(postgres) == POSTGRES_REQUEST
    assert decode_request_all_ways(POSTGRES_REQUEST) == postgres
    notifications = ChannelRequest(tag=ChannelRequestTag.MCP_NOTIFICATIONS)
    assert encode_channel_request(notifications) == NOTIFICATIONS_REQUEST
    assert decode_request_all_ways(NOTIFICATIONS_REQUEST) == notifications


@pytest.mark.parametrize(
    ("data", "tag", "exchange"),
    [
        (b"\x00\x01\x02\x03\x04", ChannelRequestTag.POSTGRES, None),
        (b'\x01{"cursor":null}', ChannelRequestTag.MCP_LIST_TOOLS, Exchange.LIST_TOOLS),
        (b"\x02null", ChannelRequestTag.MCP_LIST_RESOURCES, Exchange.LIST_RESOURCES),
        (b'\x03{"name":"t"}', ChannelRequestTag.MCP_CALL_TOOL, Exchange.CALL_TOOL),
        (b'\x04\t{"uri":"a://b"}', ChannelRequestTag.MCP_READ_RESOURCE, Exchange.READ_RESOURCE),
        (b"\x05", ChannelRequestTag.MCP_NOTIFICATIONS, Exchange.NOTIFICATIONS),
    ],
)
def test_channel_request_tags(data: bytes, tag: ChannelRequestTag, exchange: Exchange) -> None:
    request = decode_request_all_ways(data)
    assert request.tag is tag
    assert request.tag.value == data[0]
    assert request.exchange is exchange
    assert encode_channel_request(request) == data


def test_postgres_connection_id_is_four_raw_bytes() -> None:
    request = decode_request_all_ways(b"\x00\xff\x00{\x80")
    assert request.connection_id == b"\xff\x00{\x80"
    assert request.params is None


@pytest.mark.parametrize("length", [0, 1, 3, 5, 8])
def test_postgres_connection_id_of_the_wrong_length(length: int) -> None:
    with pytest.raises(AskError) as caught:
        decode_request_all_ways(b"\x00" + b"\x07" * length)
    assert caught.value.reason is AskErrorReason.CONNECTION_ID
    assert caught.value.tag == 0
    assert caught.value.detail == f"postgres connection id must be 4 bytes, not {length}"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"tag": ChannelRequestTag.POSTGRES}, ValueError),
        ({"tag": ChannelRequestTag.POSTGRES, "connection_id": b"abc"}, ValueError),
        (
            {"tag": ChannelRequestTag.POSTGRES, "connection_id": b"abcd", "params": {}},
            ValueError,
        ),
        ({"tag": ChannelRequestTag.MCP_CALL_TOOL, "connection_id": b"abcd"}, ValueError),
        ({"tag": ChannelRequestTag.MCP_NOTIFICATIONS, "params": {}}, ValueError),
        ({"tag": ChannelRequestTag.MCP_CALL_TOOL, "params": []}, TypeError),
    ],
)
def test_channel_request_constructor_validates(kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        ChannelRequest(**kwargs)


@pytest.mark.parametrize("exchange", list(Exchange))
def test_channel_request_for_an_exchange(exchange: Exchange) -> None:
    request = channel_request_for(exchange)
    assert request.tag.value == exchange.value + 1
    assert request.exchange is exchange
    ask = Ask(exchange=exchange)
    assert encode_channel_request(request)[1:] == encode_ask(ask)[1:]


# --- what both codecs share -----------------------------------------------------------------------


@pytest.mark.parametrize("codec", EACH_CODEC)
def test_empty(codec: Codec[Any]) -> None:
    with pytest.raises(AskError) as caught:
        codec.decode(b"")
    assert caught.value.reason is AskErrorReason.EMPTY
    assert caught.value.tag is None
    assert caught.value.detail == str(caught.value) == codec.empty_detail


@pytest.mark.parametrize(("codec", "tag"), each_codec_with(lambda codec: codec.unknown_tags))
def test_unknown_tag(codec: Codec[Any], tag: int) -> None:
    with pytest.raises(AskError) as caught:
        codec.decode(bytes((tag,)) + b"{}")
    assert caught.value.reason is AskErrorReason.UNKNOWN_TAG
    assert caught.value.tag == tag
    assert caught.value.detail == str(caught.value) == codec.unknown_detail.format(tag=tag)


@pytest.mark.parametrize(("codec", "tag"), each_codec_with(lambda codec: codec.mcp_tags))
@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        (b"", "Expecting value at offset 0"),
        (b"[]", "expected a JSON object or null"),
        (b"[1]", "expected a JSON object or null"),
        (b'"name"', "expected a JSON object or null"),
        (b"1", "expected a JSON object or null"),
        (b"true", "expected a JSON object or null"),
        (b"{", "Expecting property name enclosed in double quotes"),
        (b'{"a":NaN}', "non-standard JSON constant NaN"),
        (b'{"a":Infinity}', "non-standard JSON constant Infinity"),
        (b'{"a":1e400}', "number out of range"),
        (b'{"a":"\xff"}', "invalid UTF-8 at byte 6"),
        (b"\xc3\x28", "invalid UTF-8 at byte 0"),
        (b'{"a":"\\ud800"}', "lone surrogate"),
        (b"[" * 10**5, "nested 128 deep"),
        (b"{} {}", "Extra data"),
    ],
)
def test_bad_mcp_params(codec: Codec[Any], tag: int, payload: bytes, detail: str) -> None:
    with pytest.raises(AskError) as caught:
        codec.decode(bytes((tag,)) + payload)
    error = caught.value
    assert error.reason is AskErrorReason.MCP_PARAMS
    assert error.tag == tag
    # the container request page: "mcp request params did not parse: {error}"
    assert error.detail == str(error)
    assert error.detail.startswith("mcp request params did not parse: ")
    assert detail in error.detail


@pytest.mark.parametrize(
    "rest",
    [b"x", b"\x00", b"null", b'{"a":1}', b"{not json", b"\xff\xfe", b"\xff" * 64, b"\x04" * 100],
)
@pytest.mark.parametrize("codec", EACH_CODEC)
def test_notifications_ignore_trailing_bytes(codec: Codec[Any], rest: bytes) -> None:
    decoded = codec.decode(codec.notifications + rest)
    assert decoded == codec.notifications_value
    assert decoded.params is None
    assert codec.encode(decoded) == codec.notifications


# --- properties -----------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", EACH_CODEC)
@settings(max_examples=150)
@given(st.data())
def test_decode_inverts_encode(codec: Codec[Any], data: st.DataObject) -> None:
    value = data.draw(codec.values, label="value")
    encoded = codec.encode(value)
    assert codec.decode(encoded) == value
    assert codec.encode(codec.decode(encoded)) == encoded


@pytest.mark.parametrize("codec", EACH_CODEC)
@settings(max_examples=200)
@given(st.data())
def test_decode_is_total_and_encode_inverts_it(codec: Codec[Any], data: st.DataObject) -> None:
    raw = data.draw(st.one_of(codec.inputs, st.binary()), label="raw")
    try:
        value = codec.decode(raw)
    except AskError as error:
        assert isinstance(error.reason, AskErrorReason)
        assert error.detail
        return
    # Notifications drop whatever follows their first byte; all else comes back whole.
    expected = codec.notifications if raw[:1] == codec.notifications else raw
    assert codec.encode(value) == expected


def test_plain_integers_are_converted_to_their_members() -> None:
    call = Ask(exchange=Exchange.CALL_TOOL, params={"name": "x"})
    assert Ask(exchange=2, params={"name": "x"}) == call
    assert encode_channel_request(ChannelRequest(tag=5)) == b"\x05"
    assert encode_ask(Ask(exchange=4)) == b"\x04"


@pytest.mark.parametrize(
    "build",
    [
        lambda: Ask(exchange=9),
        lambda: Ask(exchange=-1),
        lambda: ChannelRequest(tag=6),
        # A plain 0 is POSTGRES, which needs its connection id.
        lambda: ChannelRequest(tag=0),
        lambda: Ask(exchange=4, params={"a": 1}),
    ],
)
def test_asks_that_cannot_be_encoded_are_refused_when_built(build: Any) -> None:
    with pytest.raises(ValueError):
        build()
