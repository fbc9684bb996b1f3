"""The nesting limit of the strict JSON decoder, checked against a plain walk.

``parse`` refuses a value whose arrays and objects nest ``MAX_DEPTH`` (128)
levels deep and accepts 127. It finds the depth from the brackets outside
strings, or (on CPython, where that is cheaper) by walking only the
containers that can hold containers; it skips the check for texts shorter
than ``2 * MAX_DEPTH`` bytes and walks texts dense in escapes. Whatever the
route, the answer must be the one a recursive walk of ``json.loads`` gives:
every case here runs twice, with the walk of tracked containers first and
with the text alone.
"""

from __future__ import annotations

import json
import random
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio.mcp import json as _json
from diverge_notifications.sansio.mcp.json import MAX_DEPTH, JsonError, parse
from tests.strategies import json_values

LIMIT = MAX_DEPTH - 1  # the deepest nesting accepted
THRESHOLD = 2 * MAX_DEPTH  # shorter texts have their depth not checked


def reference_depth(value: Any) -> int:
    """Levels of arrays and objects: 0 for a scalar, 1 for ``[]`` or ``{}``.

    A walk of every container with an explicit stack (so that values deeper
    than the interpreter's recursion limit can be measured too).
    """
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, above = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if isinstance(item, list):
            deepest = max(deepest, above + 1)
            stack.extend((child, above + 1) for child in item)
    return deepest


def expect_parse_agrees(text: bytes) -> None:
    """``parse(text)`` accepts exactly what json.loads gives within the limit."""
    value = json.loads(text)
    if reference_depth(value) <= LIMIT:
        assert parse(text) == value
    else:
        with pytest.raises(JsonError, match="nested 128 deep"):
            parse(text)


@pytest.fixture(autouse=True, params=["tracked walk first", "text alone"])
def depth_route(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each case with the walk of tracked containers tried first, then with the text alone."""
    route: str = request.param
    if route == "text alone":
        monkeypatch.setattr(_json, "_WALK_TRACKED", False)
    elif not _json._WALK_TRACKED:
        pytest.skip("the walk of tracked containers is CPython's")
    return route


def nested(depth: int, inner: str = "") -> str:
    return "[" * depth + inner + "]" * depth


# --- strings that try to confuse a bracket count ---------------------------------

_TRICKY = '[]{}"\\'
_OTHER = "ab:, /\n\té☃\U0001f600\x00"
tricky_strings = st.text(alphabet=st.sampled_from(list(_TRICKY + _OTHER)), max_size=24)
# A string full of escapes: each backslash and quote is written with one.
escape_heavy = st.integers(min_value=1, max_value=40).map(lambda n: '\\"' * n + "\\" * n)
bracket_heavy = st.integers(min_value=1, max_value=300).flatmap(
    lambda n: st.sampled_from(["[" * n, "]" * n, "{" * n, "}" * n, "][" * n, "[{" * n + "]"])
)
# Strings that end in a backslash or hold quotes: misread escapes would
# turn the brackets between two of them into string content.
trap_strings = st.sampled_from(["\\", "a\\", "\\\\", "]\\", '"', '\\"', '"]', '[\\"\\'])
padding_strings = st.one_of(tricky_strings, trap_strings, escape_heavy, bracket_heavy)


def render(value: Any, rnd: random.Random) -> str:
    """``value`` as JSON with random whitespace and random (valid) escapes."""
    space = "" if rnd.random() < 0.7 else rnd.choice([" ", "\n", "\t", "\r\n "])
    if isinstance(value, list):
        if not value:
            return "[" + space + "]"
        return "[" + ",".join(space + render(item, rnd) for item in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{" + space + "}"
        members = (
            render_string(key, rnd) + space + ":" + render(item, rnd) for key, item in value.items()
        )
        return "{" + ",".join(members) + space + "}"
    if isinstance(value, str):
        return render_string(value, rnd)
    return json.dumps(value)


def render_string(text: str, rnd: random.Random) -> str:
    out = ['"']
    for char in text:
        roll = rnd.random()
        if char == '"':
            out.append('\\"' if roll < 0.7 else "\\u0022")
        elif char == "\\":
            out.append("\\\\" if roll < 0.7 else rnd.choice(["\\u005c", "\\u005C"]))
        elif char in "[]{}" and roll < 0.2:
            out.append(f"\\u{ord(char):04x}")
        elif ord(char) < 0x20:
            out.append(json.dumps(char)[1:-1])
        elif ord(char) > 0xFFFF and roll < 0.3:
            out.append(json.dumps(char)[1:-1])  # a surrogate pair
        elif char == "/" and roll < 0.5:
            out.append("\\/")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


@st.composite
def values_of_depth(draw: st.DrawFn, depth: int) -> Any:
    """A value nesting exactly ``depth`` levels, with siblings and tricky strings on the way.

    Siblings and keys are drawn at a few levels; elsewhere a seeded choice
    between an array and an object keeps the number of draws small.
    """
    decorated = set(draw(st.lists(st.integers(min_value=1, max_value=depth), max_size=6)))
    rnd = random.Random(draw(st.integers(0, 2**32)))
    child: Any = draw(st.sampled_from([[], {}, [0], {"k": "v"}, ["]"], {"[": "}"}]))
    for level in range(depth - 1, 0, -1):  # build outwards: ``child`` is at level + 1
        if level not in decorated:
            child = [child] if rnd.random() < 0.5 else {rnd.choice(["", "[", "\\"]): child}
            continue
        siblings: list[Any] = []
        for _ in range(draw(st.integers(min_value=1, max_value=3))):
            sibling = draw(st.one_of(padding_strings, json_values(max_leaves=4)))
            if level + reference_depth(sibling) <= depth:
                siblings.append(sibling)
        position = draw(st.integers(min_value=0, max_value=len(siblings)))
        if draw(st.booleans()):
            siblings.insert(position, child)
            child = siblings
        else:
            keys = draw(st.lists(padding_strings, min_size=len(siblings), max_size=len(siblings)))
            items = list(dict(zip(keys, siblings, strict=True)).items())
            key = draw(padding_strings)
            items = [item for item in items if item[0] != key]
            items.insert(min(position, len(items)), (key, child))
            child = dict(items)
    return child


texts_at_the_limit = st.sampled_from([LIMIT, MAX_DEPTH]).flatmap(
    lambda depth: st.tuples(values_of_depth(depth), st.integers(0, 2**32))
)


def text_of(value: Any, seed: int) -> bytes:
    rnd = random.Random(seed)
    if rnd.random() < 0.3:
        return json.dumps(value, ensure_ascii=rnd.random() < 0.5).encode("utf-8")
    return render(value, rnd).encode("utf-8")


# --- the boundary, generated --------------------------------------------------------


@given(texts_at_the_limit)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_depth_127_is_accepted_and_128_refused(case: tuple[Any, int]) -> None:
    value, seed = case
    text = text_of(value, seed)
    depth = reference_depth(json.loads(text))
    assert depth in (LIMIT, MAX_DEPTH)  # the generator builds what it claims
    assert len(text) >= 2 * depth
    expect_parse_agrees(text)
    # The private check, whatever the text's length, against the reference.
    if depth > LIMIT:
        with pytest.raises(JsonError):
            _json._check_depth_of(text, json.loads(text))
        return
    # Within the limit, a text with few escapes must be accepted by the
    # bracket count itself, without the walk: were brackets inside strings
    # counted, the walk would still give the right answer, but only by chance.
    walked: list[Any] = []
    with mock.patch.object(_json, "_check_depth", walked.append):
        _json._check_depth_of(text, json.loads(text))
    sparse = text.count(b"\\") * 16 <= len(text)
    if sparse:
        assert walked == []


@given(st.integers(min_value=MAX_DEPTH - 6, max_value=MAX_DEPTH + 6), st.data())
@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_depths_around_the_limit(depth: int, data: st.DataObject) -> None:
    value = data.draw(values_of_depth(depth))
    text = text_of(value, data.draw(st.integers(0, 2**32)))
    assert reference_depth(json.loads(text)) == depth
    expect_parse_agrees(text)


@given(st.lists(st.one_of(json_values(), padding_strings), max_size=8), st.integers(0, 2**32))
@settings(max_examples=150, deadline=None)
def test_shallow_values_with_tricky_strings_round_trip(items: list[Any], seed: int) -> None:
    text = text_of(items, seed)
    assert parse(text) == json.loads(text)


# --- the size threshold ---------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        nested(LIMIT).encode(),  # 254 bytes: not checked, and within the limit anyway
        nested(LIMIT, "0").encode(),  # 255 bytes
        nested(LIMIT - 1, "{}").encode(),  # 254 bytes, an object innermost
        (" " + nested(LIMIT) + " ").encode(),  # 256 bytes: checked, accepted
        nested(LIMIT, '"' + "]" * 300 + '"').encode(),
        nested(LIMIT, '"' + "[" * 300 + '"').encode(),
    ],
)
def test_127_levels_below_and_above_the_threshold_are_accepted(text: bytes) -> None:
    assert reference_depth(json.loads(text)) == LIMIT
    assert parse(text) == json.loads(text)


def test_the_smallest_text_nested_128_deep_is_exactly_the_threshold() -> None:
    text = nested(MAX_DEPTH).encode()
    assert len(text) == THRESHOLD
    with pytest.raises(JsonError, match="nested 128 deep"):
        parse(text)
    with pytest.raises(JsonError):
        parse(("[{" * (MAX_DEPTH // 2)).encode()[:-1] + b"[" + ("]}" * (MAX_DEPTH // 2)).encode())


@pytest.mark.parametrize("shape", ["list", "object", "mixed"])
@pytest.mark.parametrize("depth", [LIMIT, MAX_DEPTH, MAX_DEPTH + 1, 500])
def test_plain_nesting(shape: str, depth: int) -> None:
    text = "0"
    for level in range(depth):
        is_object = shape == "object" or (shape == "mixed" and level % 2 == 1)
        text = '{"a":' + text + "}" if is_object else "[" + text + "]"
    expect_parse_agrees(text.encode())


# --- targeted vectors: escapes next to the brackets -------------------------------------

# Strings whose last character is a backslash, or that hold quotes: a count
# that misreads ``\\"`` as an escaped quote would see the brackets after them
# as inside a string, and under-count the nesting.
_VECTORS = [
    '"\\\\"',  # one backslash: the quote after it closes the string
    '"\\\\\\\\"',  # two backslashes
    '"\\""',  # one quote
    '"\\\\\\""',  # a backslash then a quote
    '"a\\\\"',
    '"[\\\\"',
    '"]\\\\"',
    '"\\"]]]]\\\\"',
    '"\\\\\\\\\\\\"',  # three backslashes
    '"\\u005c"',  # a backslash spelled as a unicode escape
    '"\\u0022["',
]


def with_padding(text: str, route: str) -> bytes:
    """``text`` (an array or object) with a plain string member put first.

    ``route`` "unpadded" adds nothing; "padded" adds enough plain bytes that
    the escapes are sparse and the brackets are counted without a walk.
    """
    raw = text.encode()
    if route == "unpadded":
        return raw
    size = max(40, 16 * raw.count(b"\\") + 16)
    member = b'"' + b"x" * size + b'"' + (b":0," if raw.startswith(b"{") else b",")
    padded = raw[:1] + member + raw[1:]
    assert padded.count(b"\\") * 16 <= len(padded)
    return padded


def expect_depth_and_agreement(raw: bytes, depth: int) -> None:
    assert reference_depth(json.loads(raw)) == depth
    expect_parse_agrees(raw)


ROUTES = ["unpadded", "padded"]


@pytest.mark.parametrize("vector", _VECTORS)
@pytest.mark.parametrize("depth", [LIMIT, MAX_DEPTH])
@pytest.mark.parametrize("where", ["every level", "around", "outermost", "innermost", "as keys"])
@pytest.mark.parametrize("route", ROUTES)
def test_strings_ending_in_escapes_next_to_brackets(
    vector: str, depth: int, where: str, route: str
) -> None:
    text = "0"
    for level in range(depth, 0, -1):
        if where == "as keys":
            text = "{" + vector + ":" + text + "}"
        elif where == "around" and level == 1:
            # The whole nesting between two such strings.
            text = "[" + vector + "," + text + "," + vector + "]"
        elif where == "every level" or (where, level) in (("outermost", 1), ("innermost", depth)):
            text = "[" + vector + "," + text + "]"
        else:
            text = "[" + text + "]"
    expect_depth_and_agreement(with_padding(text, route), depth)


@pytest.mark.parametrize("depth", [LIMIT, MAX_DEPTH])
@pytest.mark.parametrize("route", ROUTES)
def test_brackets_after_a_string_ending_in_an_escaped_backslash(depth: int, route: str) -> None:
    # Half the nesting opens after strings ending in an escaped backslash;
    # the closing brackets in those strings would balance a misread count.
    half = depth // 2
    opening = '["\\\\]]]]]]]]",' * half + "[" * (depth - half)
    expect_depth_and_agreement(with_padding(opening + "]" * depth, route), depth)


@pytest.mark.parametrize("depth", [LIMIT, MAX_DEPTH])
@pytest.mark.parametrize("quote", ['"\\""', '"\\\\\\""', '"\\"\\""', '"\\\\"'])
@pytest.mark.parametrize("route", ROUTES)
def test_brackets_between_strings_holding_quotes_and_backslashes(
    depth: int, quote: str, route: str
) -> None:
    # An escaped quote misread as a closing one (or an escaped backslash
    # misread as escaping the closing quote) puts the brackets between two
    # such strings inside a string.
    text = ("[" + quote + ",") * depth + "0" + "]" * depth
    expect_depth_and_agreement(with_padding(text, route), depth)
    pairs = "[" + quote + "," + "[" * (depth - 1) + "]" * (depth - 1) + "," + quote + "]"
    expect_depth_and_agreement(with_padding(pairs, route), depth)


@pytest.mark.parametrize("depth", [LIMIT, MAX_DEPTH])
def test_escape_dense_text_is_walked_and_agrees(depth: int) -> None:
    text = ('["\\\\\\"",' * depth + "0" + "]" * depth).encode()
    assert text.count(b"\\") * 16 > len(text)
    expect_depth_and_agreement(text, depth)


def test_many_bracket_strings_but_shallow_nesting() -> None:
    # Over MAX_DEPTH opening brackets, all inside strings: accepted.
    for string in ('"' + "[" * 200 + '"', '"' + "{[" * 200 + '"', '"\\\\' + "[" * 200 + '"'):
        raw = ("[" * 5 + string + "]" * 5).encode()
        assert parse(raw) == json.loads(raw)


# --- the routes of the bracket count ---------------------------------------------------


def records(count: int) -> str:
    """``count`` sibling objects with plain strings: many brackets, little nesting."""
    return ",".join(f'{{"n":{index},"s":"plain"}}' for index in range(count))


@pytest.mark.parametrize("depth", [LIMIT, MAX_DEPTH])
@pytest.mark.parametrize("siblings", [0, 40, 300])
def test_nesting_beside_many_siblings(depth: int, siblings: int) -> None:
    # No siblings: too few brackets for the nesting (fewer than 128 opening
    # ones, or fewer than 128 closing ones after the 128th opening one),
    # which is known without finding the strings; with siblings: no bracket
    # is in a string (every run of quotes between brackets is even), so the
    # brackets are counted as they are.
    members = (
        [records(siblings), nested(depth - 1), records(siblings)]
        if siblings
        else [nested(depth - 1)]
    )
    text = "[" + ",".join(members) + "]"
    expect_depth_and_agreement(text.encode(), depth)


@pytest.mark.parametrize("depth", [LIMIT, MAX_DEPTH])
def test_nesting_hidden_by_brackets_in_strings(depth: int) -> None:
    # Each level opens with a string "]" and closes with a string "[", so
    # that the brackets counted with the strings' own look flat, and many
    # siblings keep the counts of brackets from deciding: the strings must
    # be found and left out.
    text = '["]",' * (depth - 2) + "[" + records(300) + "]" + ',"["]' * (depth - 2)
    raw = text.encode()
    flat = raw.translate(None, bytes(sorted(set(range(256)) - set(b"[]{}"))))
    assert flat.replace(b"{}", b"").replace(b"[]", b"").replace(b"[]", b"") == b""
    expect_depth_and_agreement(raw, depth)


def test_the_counts_see_a_chain_that_is_all_the_brackets() -> None:
    # Every opening bracket before every closing one: the 128th opening
    # bracket is the innermost, and 128 closing ones follow it.
    for depth in (LIMIT, MAX_DEPTH):
        raw = nested(depth).encode()
        assert raw[: len(raw) // 2].count(b"[") == depth
        expect_depth_and_agreement(raw, depth)


@pytest.mark.parametrize("depth", [LIMIT, MAX_DEPTH])
@pytest.mark.parametrize("level", ["[", '{"k":'])
@pytest.mark.parametrize("side", ["first half", "second half"])
def test_a_chain_of_either_kind_is_counted_where_it_lies(depth: int, level: str, side: str) -> None:
    # A whole chain of arrays or of objects, before or after a long plain
    # string: the counts read "[" as "{" and "]" as "}", and must find the
    # chain's brackets wherever it lies.
    chain = level * (depth - 1) + "1" + ("]" if level == "[" else "}") * (depth - 1)
    padding = json.dumps("x" * (2 * len(chain)))
    text = f"[{chain},{padding}]" if side == "first half" else f"[{padding},{chain}]"
    raw = text.encode()
    half = raw[: len(raw) // 2] if side == "first half" else raw[len(raw) // 2 :]
    assert chain.encode() in half
    expect_depth_and_agreement(raw, depth)


# --- the walk of tracked containers ----------------------------------------------------


def log_message(records_each: int) -> bytes:
    """A log message whose data holds ``records_each`` records: many brackets, 4 levels."""
    records = [
        {"ts": 1_700_000_000 + i, "lvl": "info", "msg": f"request {i}"} for i in range(records_each)
    ]
    data = {"service": "indexer", "records": records}
    params = {"level": "info", "logger": "indexer", "data": data}
    body = {"jsonrpc": "2.0", "method": "notifications/message", "params": params}
    return json.dumps(body, separators=(",", ":")).encode()


def test_a_log_message_of_many_records_is_decided_by_the_walk(depth_route: str) -> None:
    # The shape the walk is for: its records are dicts of scalars, which
    # CPython does not track, so the walk stops above them.
    raw = log_message(880)
    assert raw.count(b"{") > MAX_DEPTH
    value = json.loads(raw)
    assert _json._within_depth(value, len(raw) // _json._BYTES_PER_WALKED_CHILD)
    with mock.patch.object(_json, "_within_depth", wraps=_json._within_depth) as walk:
        assert parse(raw) == value
    assert walk.call_count == (depth_route == "tracked walk first")


@pytest.mark.parametrize("total", [LIMIT, MAX_DEPTH, MAX_DEPTH + 1])
@pytest.mark.parametrize("innermost", ["{}", '{"k":1}', "[]", "[1]", "1"])
@pytest.mark.parametrize("level", ["[", '{"k":'])
def test_the_walk_at_the_limit(total: int, innermost: str, level: str) -> None:
    # A chain beside many records, ending in an untracked dict, a list or a
    # scalar: the walk says "within" only for what is, and leaves the rest
    # to the exact checks, whatever the chain's last container.
    links = total - 1 - (innermost != "1")  # the outer array is a level too
    chain = level * links + innermost + ("]" if level == "[" else "}") * links
    raw = ("[" + records(300) + "," + chain + "]").encode()
    value = json.loads(raw)
    assert reference_depth(value) == total
    within = _json._within_depth(value, len(raw))
    # At the limit, the walk decides alone where the deepest container is
    # an untracked dict; a list down there is the text's to decide.
    deepest_is_a_flat_dict = innermost in ("{}", '{"k":1}') or (innermost == "1" and level != "[")
    assert within == (total <= LIMIT and deepest_is_a_flat_dict)
    expect_depth_and_agreement(raw, total)


def test_the_walk_gives_up_past_its_budget() -> None:
    # A dense array: more children than one per _BYTES_PER_WALKED_CHILD
    # bytes. The walk gives up, the text decides.
    raw = json.dumps([[index, index] for index in range(3000)], separators=(",", ":")).encode()
    value = json.loads(raw)
    budget = len(raw) // _json._BYTES_PER_WALKED_CHILD
    assert len(value) > budget
    assert not _json._within_depth(value, budget)
    assert _json._within_depth(value, 10 * len(value))
    assert parse(raw) == value


def test_the_walk_of_scalars_and_flat_dicts() -> None:
    # What is not tracked nests one level at most.
    for value in ("[" * 300, 12, None, {"a": 1, "b": "[[["}):
        assert _json._within_depth(value, 0)
