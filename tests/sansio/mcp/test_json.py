"""The strict JSON layer: what it accepts, what it refuses, and that it is total."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio import errors
from diverge_notifications.sansio.mcp.json import (
    MAX_DEPTH,
    JsonError,
    canonical_bytes,
    dumps,
    parse,
)
from tests.strategies import json_texts, json_values


def nested_arrays(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def nested_objects(depth: int) -> bytes:
    return b'{"a":' * depth + b"null" + b"}" * depth


# --- accepted ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        (b"null", None),
        (b"true", True),
        (b"0", 0),
        (b"-0", 0),
        (b"1.5", 1.5),
        (b"1E2", 100.0),
        (b"1e-400", 0.0),  # underflow is a value, as in serde_json
        (b' \t\r\n{"a" : [ 1 , "x" ] }\n', {"a": [1, "x"]}),
        (b'"\\u00e9\\/\\n"', "é/\n"),
        (b'"\\ud83d\\ude00"', "\U0001f600"),  # a surrogate pair is one character
        ('"é😀"'.encode(), "é😀"),
        (b'"\\\\ud800"', "\\ud800"),  # an escaped backslash, not a surrogate escape
        (b'{"a":1,"a":2}', {"a": 2}),  # duplicates: the last one wins
        (str(2**64).encode(), 2**64),  # beyond 64 bits: kept exactly
        (str(10**308).encode(), 10**308),  # 309 digits, within a double's range
        (str(-(10**308)).encode(), -(10**308)),
    ],
)
def test_accepted(text: bytes, value: Any) -> None:
    assert parse(text) == value
    assert type(parse(text)) is type(value)


def test_accepts_every_input_type() -> None:
    data = b'{"a":[1,2]}'
    assert parse(data) == parse(bytearray(data)) == parse(memoryview(b"xx" + data)[2:])


def test_depth_limit_matches_serde_json() -> None:
    # serde_json's recursion limit of 128 accepts 127 levels and refuses 128.
    assert MAX_DEPTH == 128
    assert parse(nested_arrays(MAX_DEPTH - 1)) is not None
    assert parse(nested_objects(MAX_DEPTH - 1)) is not None
    mixed = b'{"a":' + nested_arrays(MAX_DEPTH - 2) + b"}"
    assert isinstance(parse(mixed), dict)


def test_many_brackets_in_strings_are_not_depth() -> None:
    text = b'["' + b"[" * 500 + b'"]'
    assert parse(text) == ["[" * 500]


# --- refused ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        (b"", "Expecting value"),
        (b"nul", "Expecting value"),
        (b"{} {}", "Extra data"),
        (b"[1,]", "Expecting value"),
        (b"{'a':1}", "Expecting property name"),
        (b'"\x01"', "Invalid control character at offset 1"),
        (b"01", "Extra data"),
        (b"NaN", "non-standard JSON constant NaN"),
        (b"Infinity", "non-standard JSON constant Infinity"),
        (b"-Infinity", "non-standard JSON constant -Infinity"),
        (b"[1, NaN]", "non-standard JSON constant NaN"),
        (b"1e400", "number out of range: 1e400"),
        (b"-1e400", "number out of range: -1e400"),
        (b"1" + b"0" * 309, "number out of range: 1000000000"),
        (b"-1" + b"0" * 309, "number out of range: -100000000"),
        (b"2" + b"0" * 308, "number out of range: 2000000000"),  # 309 digits, > DBL_MAX
        (b"1" * 5000, "number out of range"),
        (b"\xff", "invalid UTF-8 at byte 0"),
        (b'"\xed\xa0\x80"', "invalid UTF-8 at byte 1"),  # a surrogate encoded in UTF-8
        (b'"\xc3"', "invalid UTF-8"),
        (b"\xef\xbb\xbfnull", "Expecting value"),  # no byte order mark
        ('"x"'.encode("utf-16"), "invalid UTF-8"),
        ('"x"'.encode("utf-32-le"), "Invalid control character at offset 1"),
        (b'"\\ud800"', "lone surrogate"),
        (b'"\\uDFFF"', "lone surrogate"),
        (b'"\\ude00\\ud83d"', "lone surrogate"),  # a pair in the wrong order
        (b'{"\\ud800":1}', "lone surrogate"),  # in a member name too
        (b'[[["\\ud83dx"]]]', "lone surrogate"),
        (nested_arrays(MAX_DEPTH), "nested 128 deep"),
        (nested_objects(MAX_DEPTH), "nested 128 deep"),
        (b"[" * 10**5, "nested 128 deep"),
        (b"[" * 10**5 + b"]" * 10**5, "nested 128 deep"),
        (b'{"a":' * 10**5, "nested 128 deep"),
    ],
)
def test_refused(text: bytes, detail: str) -> None:
    with pytest.raises(JsonError) as caught:
        parse(text)
    assert detail in str(caught.value)


def test_integer_limit_does_not_depend_on_interpreter_setting() -> None:
    # A long digit string never reaches int(), whatever the process allows.
    old = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        with pytest.raises(JsonError, match="number out of range"):
            parse(b"9" * 100_000)
    finally:
        sys.set_int_max_str_digits(old)


def test_json_error_is_a_value_error_and_a_decode_error() -> None:
    assert issubclass(JsonError, ValueError)
    assert JsonError is errors.JsonError
    assert issubclass(JsonError, errors.DecodeError)
    assert not issubclass(JsonError, errors.LocalProtocolError)
    with pytest.raises(JsonError) as caught:
        parse(b"[1,")
    assert caught.value.detail == str(caught.value)


# --- totality and round trips -------------------------------------------------------


@settings(max_examples=200)
@given(st.binary())
def test_parse_is_total(data: bytes) -> None:
    try:
        parse(data)
    except JsonError as error:
        assert str(error)


@settings(max_examples=150)
@given(st.text().map(lambda text: text.encode("utf-8", "surrogatepass")))
def test_parse_is_total_on_text(data: bytes) -> None:
    try:
        value = parse(data)
    except JsonError:
        return
    assert canonical_bytes(parse(dumps(value))) == canonical_bytes(value)


@settings(max_examples=150)
@given(json_values())
def test_dumps_then_parse(value: Any) -> None:
    text = dumps(value)
    assert canonical_bytes(parse(text)) == canonical_bytes(value)
    assert text == json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


@settings(max_examples=150)
@given(json_values().flatmap(lambda value: st.tuples(st.just(value), json_texts(value))))
def test_odd_spellings_parse_to_the_value(case: tuple[Any, str]) -> None:
    value, text = case
    assert canonical_bytes(parse(text.encode("utf-8"))) == canonical_bytes(value)


@settings(max_examples=100)
@given(
    json_values().flatmap(
        lambda value: st.tuples(st.just(value), json_texts(value, duplicates=True))
    )
)
def test_duplicate_members_keep_the_last(case: tuple[Any, str]) -> None:
    value, text = case
    assert canonical_bytes(parse(text.encode("utf-8"))) == canonical_bytes(value)


# --- dumps and canonical_bytes --------------------------------------------------------


def test_dumps_is_compact_utf8() -> None:
    assert dumps({"a": [1, 2.5, None, True], "é": "😀"}) == (
        '{"a":[1,2.5,null,true],"é":"😀"}'.encode()
    )


@pytest.mark.parametrize(
    "value",
    [math.nan, math.inf, -math.inf, {"a": [math.nan]}, "\ud800", {"\udfff": 1}, {1, 2}, b"x"],
)
def test_dumps_refuses_what_json_cannot_carry(value: Any) -> None:
    with pytest.raises((ValueError, TypeError)):
        dumps(value)


def test_dumps_refuses_values_nested_beyond_the_stack() -> None:
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(ValueError, match="nested too deeply"):
        dumps(value)


def test_canonical_bytes_ignore_member_order_but_not_types() -> None:
    assert canonical_bytes({"b": 1, "a": {"d": 2, "c": 3}}) == canonical_bytes(
        {"a": {"c": 3, "d": 2}, "b": 1}
    )
    assert canonical_bytes(1) != canonical_bytes(1.0)
    assert canonical_bytes(1) != canonical_bytes(True)
    assert canonical_bytes([1, 2]) != canonical_bytes([2, 1])
