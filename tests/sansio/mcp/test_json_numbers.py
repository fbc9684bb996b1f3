"""Numbers out of range are refused whichever way ``parse`` reads the text.

``parse`` picks one of three scanners per text (see ``_json``): floats
checked by a hook in short texts and in long ones with few floats,
integers checked too when a sample of a long text says a long run of
digits may be there, and no hook at all for long texts dense in floats
whose shape says no number can be out of range. Every route must give the
answer of one reference: a decoder whose hooks check every number.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio.mcp import json as _json
from diverge_notifications.sansio.mcp.json import JsonError, parse


class OutOfRange(Exception):
    pass


def _reference_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise OutOfRange(text)
    return value


def _reference_int(text: str) -> int:
    # Beyond a double's range, as serde_json reads it; the text is bounded
    # by the tests below, so int() of it is cheap.
    if math.isinf(float(text)):
        raise OutOfRange(text)
    return int(text)


def reference(text: bytes) -> Any:
    """json.loads with every number checked: the value, or OutOfRange."""
    return json.loads(text, parse_float=_reference_float, parse_int=_reference_int)


def expect_agrees(text: bytes) -> None:
    try:
        value = reference(text)
    except OutOfRange:
        with pytest.raises(JsonError, match="number out of range"):
            parse(text)
    else:
        assert parse(text) == value


BIG = "1" + "0" * 309  # 10**309: out of range
EDGE = "1" + "0" * 308  # 10**308: within range, 309 digits
NEG_EDGE = "-" + EDGE


@pytest.mark.parametrize("number", [BIG, "-" + BIG, EDGE, NEG_EDGE, "2" + "0" * 308, "9" * 308])
@pytest.mark.parametrize("padding", range(0, 61, 7))
@pytest.mark.parametrize("floats", [0, 400])
def test_long_integers_at_every_alignment(number: str, padding: int, floats: int) -> None:
    # The sample looks at every 30th byte: the run of digits is placed at
    # many offsets from it, in a text with few floats and one dense in them.
    text = '{"pad":"' + "x" * padding + '","f":[' + ",".join(["1.5"] * floats)
    text += '],"n":' + number + "}"
    expect_agrees(text.encode())


@pytest.mark.parametrize(
    "number",
    ["1e400", "-1e400", "1E+400", "1.5e308", "1e308", "1e-400", "0.5E309", "1" * 200 + "e200"],
)
@pytest.mark.parametrize("floats", [0, 400])
@pytest.mark.parametrize("length", [10, 1000])
def test_exponents_in_short_and_long_texts(number: str, floats: int, length: int) -> None:
    text = '{"pad":"' + "x" * length + '","f":[' + ",".join(["2.25"] * floats)
    text += "]," + '"n":' + number + "}"
    expect_agrees(text.encode())


def test_every_scanner_is_taken() -> None:
    dense = ("[" + ",".join(["1.5"] * 400) + "]").encode()
    sparse = ('{"a":"' + "x" * 1000 + '","b":1.5}').encode()
    with_long_run = ('{"a":"' + "x" * 1000 + '","b":' + EDGE + "}").encode()
    dense_with_exponent = dense[:-1] + b",1e300]"
    assert _json._long_text_scanner(dense) is _json._scan_plain
    assert _json._long_text_scanner(sparse) is _json._scan_floats
    assert _json._long_text_scanner(with_long_run) is _json._scan_checked
    assert _json._long_text_scanner(dense_with_exponent) is _json._scan_checked


numbers = st.one_of(
    st.integers(min_value=-(10**400), max_value=10**400).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.builds(
        lambda mantissa, exponent: f"{mantissa}e{exponent}",
        st.integers(-(10**20), 10**20),
        st.integers(-400, 400),
    ),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(numbers, min_size=1, max_size=60),
    st.integers(0, 400),
    st.integers(0, 60),
)
def test_any_numbers_anywhere(items: list[str], padding: int, dense: int) -> None:
    text = '{"pad":"' + "x" * padding + '","f":[' + ",".join(["0.5"] * dense) + "],"
    text += '"n":[' + ",".join(items) + "]}"
    expect_agrees(text.encode())
