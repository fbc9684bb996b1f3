"""The provider ask (seed 000) and the agents-begin channel request (seed 003)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import ask_bytes, asks, channel_request_bytes, channel_requests

from diverge_notifications.sansio import (
    Ask,
    AskError,
    AskErrorReason,
    ChannelRequest,
    ChannelRequestTag,
    Exchange,
    ProtocolError,
    decode_ask,
    decode_channel_request,
    encode_ask,
    encode_channel_request,
)
from diverge_notifications.sansio.asks import channel_request_for

# The documented examples (docs/protocol.md).
NOTIFICATIONS_ASK = bytes.fromhex("04")
CALL_TOOL_ASK = bytes.fromhex(
    "02"  # kind 2: call tool
    "7b226e616d65223a22736561726368222c22617267756d656e7473223a7b2271"
    "223a226d6370227d7d"
)
POSTGRES_REQUEST = bytes.fromhex("000000002a")  # tag 0, connection id 42
NOTIFICATIONS_REQUEST = bytes.fromhex("05")

DOCS = Path(__file__).resolve().parent.parent / "docs" / "protocol.md"


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


def decode_ask_all_ways(data: bytes) -> Ask:
    results: list[Ask | AskError] = []
    for view in (data, bytearray(data), memoryview(b"\xaa" + data)[1:]):
        try:
            results.append(decode_ask(view))
        except AskError as error:
            results.append(error)
    assert results[0] == results[1] == results[2]
    if isinstance(results[0], AskError):
        raise results[0]
    return results[0]


def decode_request_all_ways(data: bytes) -> ChannelRequest:
    results: list[ChannelRequest | AskError] = []
    for view in (data, bytearray(data), memoryview(b"\xaa" + data)[1:]):
        try:
            results.append(decode_channel_request(view))
        except AskError as error:
            results.append(error)
    assert results[0] == results[1] == results[2]
    if isinstance(results[0], AskError):
        raise results[0]
    return results[0]


# --- provider ask -------------------------------------------------------------------


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


@pytest.mark.parametrize("rest", [b"x", b"\x00", b'{"a":1}', b"\xff\xfe", b"\x04" * 100])
def test_kind_4_ignores_trailing_bytes(rest: bytes) -> None:
    ask = decode_ask_all_ways(b"\x04" + rest)
    assert ask == Ask(exchange=Exchange.NOTIFICATIONS)
    assert ask.params is None
    assert encode_ask(ask) == b"\x04"


def test_ask_empty() -> None:
    with pytest.raises(AskError) as caught:
        decode_ask_all_ways(b"")
    assert caught.value.reason is AskErrorReason.EMPTY
    assert caught.value.tag is None
    assert caught.value.detail == "ask is empty: no kind byte"


@pytest.mark.parametrize("kind", [5, 6, 0x7B, 255])
def test_ask_unknown_kind(kind: int) -> None:
    with pytest.raises(AskError) as caught:
        decode_ask_all_ways(bytes((kind,)) + b"{}")
    assert caught.value.reason is AskErrorReason.UNKNOWN_TAG
    assert caught.value.tag == kind
    assert caught.value.detail == f"unknown ask kind {kind} (kinds are 0 to 4)"


@pytest.mark.parametrize("kind", [0, 1, 2, 3])
@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        (b"", "Expecting value at offset 0"),
        (b"[]", "expected a JSON object or null"),
        (b'"name"', "expected a JSON object or null"),
        (b"1", "expected a JSON object or null"),
        (b"{", "Expecting property name enclosed in double quotes"),
        (b'{"a":NaN}', "non-standard JSON constant NaN"),
        (b'{"a":1e400}', "number out of range"),
        (b'{"a":"\xff"}', "invalid UTF-8 at byte 6"),
        (b'{"a":"\\ud800"}', "lone surrogate"),
        (b"[" * 10**5, "nested 128 deep"),
        (b"{} {}", "Extra data"),
    ],
)
def test_ask_bad_params(kind: int, payload: bytes, detail: str) -> None:
    with pytest.raises(AskError) as caught:
        decode_ask_all_ways(bytes((kind,)) + payload)
    error = caught.value
    assert error.reason is AskErrorReason.MCP_PARAMS
    assert error.tag == kind
    assert error.detail.startswith("mcp request params did not parse: ")
    assert detail in error.detail


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
    error = AskError(AskErrorReason.UNKNOWN_TAG, "d", tag=6)
    assert error == AskError(AskErrorReason.UNKNOWN_TAG, "d", tag=6)
    assert hash(error) == hash(AskError(AskErrorReason.UNKNOWN_TAG, "d", tag=6))
    assert repr(error) == "AskError(UNKNOWN_TAG, 'd', tag=6)"


# --- agents-begin channel request (seed 003) -------------------------------------------------


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


@pytest.mark.parametrize("tag", [1, 2, 3, 4])
@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        (b"", "Expecting value at offset 0"),
        (b"[1]", "expected a JSON object or null"),
        (b"true", "expected a JSON object or null"),
        (b'{"a":Infinity}', "non-standard JSON constant Infinity"),
        (b"\xc3\x28", "invalid UTF-8 at byte 0"),
    ],
)
def test_channel_request_mcp_params_errors(tag: int, payload: bytes, detail: str) -> None:
    with pytest.raises(AskError) as caught:
        decode_request_all_ways(bytes((tag,)) + payload)
    error = caught.value
    assert error.reason is AskErrorReason.MCP_PARAMS
    assert error.tag == tag
    # seed 003: "mcp request params did not parse: {error}"
    assert str(error).startswith("mcp request params did not parse: ")
    assert detail in str(error)


@pytest.mark.parametrize("rest", [b"\x00", b"null", b"{not json", b"\xff" * 64])
def test_tag_5_ignores_trailing_bytes(rest: bytes) -> None:
    request = decode_request_all_ways(b"\x05" + rest)
    assert request == ChannelRequest(tag=ChannelRequestTag.MCP_NOTIFICATIONS)
    assert encode_channel_request(request) == b"\x05"


@pytest.mark.parametrize("tag", [6, 7, 0x7B, 255])
def test_channel_request_unknown_tag(tag: int) -> None:
    with pytest.raises(AskError) as caught:
        decode_request_all_ways(bytes((tag,)) + b"{}")
    assert caught.value.reason is AskErrorReason.UNKNOWN_TAG
    assert caught.value.tag == tag
    # seed 003: "unknown agents begin channel request tag {tag}"
    assert str(caught.value) == f"unknown agents begin channel request tag {tag}"


def test_channel_request_empty() -> None:
    with pytest.raises(AskError) as caught:
        decode_request_all_ways(b"")
    assert caught.value.reason is AskErrorReason.EMPTY
    # seed 003: "agents begin channel request frame is empty"
    assert str(caught.value) == "agents begin channel request frame is empty"


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


# --- properties ---------------------------------------------------------------------------


def _expected_reencoding(data: bytes, ignores_rest: int) -> bytes:
    """Kind 4 / tag 5 drop whatever follows the first byte; all else comes back whole."""
    return data[:1] if data[0] == ignores_rest else data


@settings(max_examples=150)
@given(asks())
def test_ask_decode_inverts_encode(ask: Ask) -> None:
    data = encode_ask(ask)
    assert decode_ask(data) == ask
    assert encode_ask(decode_ask(data)) == data


@settings(max_examples=150)
@given(channel_requests())
def test_channel_request_decode_inverts_encode(request: ChannelRequest) -> None:
    data = encode_channel_request(request)
    assert decode_channel_request(data) == request
    assert encode_channel_request(decode_channel_request(data)) == data


@settings(max_examples=200)
@given(st.one_of(ask_bytes(), st.binary()))
def test_decode_ask_is_total_and_encode_inverts_it(data: bytes) -> None:
    try:
        ask = decode_ask(data)
    except AskError as error:
        assert isinstance(error.reason, AskErrorReason)
        assert error.detail
        return
    assert encode_ask(ask) == _expected_reencoding(data, Exchange.NOTIFICATIONS)


@settings(max_examples=200)
@given(st.one_of(channel_request_bytes(), st.binary()))
def test_decode_channel_request_is_total_and_encode_inverts_it(data: bytes) -> None:
    try:
        request = decode_channel_request(data)
    except AskError as error:
        assert isinstance(error.reason, AskErrorReason)
        assert error.detail
        return
    expected = _expected_reencoding(data, ChannelRequestTag.MCP_NOTIFICATIONS)
    assert encode_channel_request(request) == expected
