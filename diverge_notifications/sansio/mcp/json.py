"""Strict, total JSON decoding and compact encoding.

The standard library's :func:`json.loads` accepts things the Rust peer
(``serde_json``) rejects and raises things a total decoder must not leak.
:func:`parse` closes both gaps, so every decoder in this package is built on
one function that, for any bytes, returns a value or raises
:class:`JsonError`:

* only UTF-8 is accepted (``json.loads`` on bytes would also guess UTF-16
  and UTF-32);
* ``NaN``, ``Infinity`` and ``-Infinity`` are rejected, and so is a number
  whose magnitude is beyond a double's range, about 1.8e308 (``1e400``,
  which ``json.loads`` turns into infinity, or an integer that large, which
  ``serde_json`` reads as a double and rejects in the same way). The bound is that range, not a
  digit count: a 309-digit integer below it is accepted, one above it is
  not, and every integer of 310 digits or more is rejected;
* a ``\\uD800``-style escape that leaves a lone surrogate is rejected, since
  it cannot be re-encoded as UTF-8;
* arrays and objects nested :data:`MAX_DEPTH` deep are rejected, exactly as
  ``serde_json``'s recursion limit rejects them (127 levels are accepted), so
  what this side accepts the Rust side accepts too;
* because of the integer bound, no digit string longer than 309 digits
  ever reaches ``int()``: the result does not depend on the interpreter's
  ``int_max_str_digits`` setting, and converting stays linear in the input.
"""

from __future__ import annotations

import gc
import json
import math
import re
import sys
from collections.abc import Callable
from itertools import chain, compress
from typing import Any, Final

from ..errors import JsonError

__all__ = ["MAX_DEPTH", "JsonError", "canonical_bytes", "dumps", "parse", "parse_each"]

#: serde_json's default recursion limit: a value whose arrays and objects nest
#: this many levels deep is rejected; ``MAX_DEPTH - 1`` levels are accepted.
#: (The outermost array or object is level 1.)
MAX_DEPTH = 128

# An integer text of at most this many characters is below 10**308, so always
# within a double's range; one longer than _INT_TEXT_MAX (a sign and 309
# digits) is at least 10**309, so always beyond it.
_INT_TEXT_CHECK = 308
_INT_TEXT_MAX = 310

_DEPTH_DETAIL = f"arrays and objects nested {MAX_DEPTH} deep (at most {MAX_DEPTH - 1} levels)"


def _reject_constant(name: str) -> Any:
    raise JsonError(f"non-standard JSON constant {name}")


def _out_of_range(text: str) -> JsonError:
    shown = text if len(text) <= 40 else text[:40] + "..."
    return JsonError(f"number out of range: {shown}")


def _finite_float(text: str) -> float:
    value = float(text)
    # ``value - value`` is 0.0 for a finite value and NaN (true) for an
    # infinite one: a cheaper test than math.isinf, paid once per float.
    if value - value:
        raise _out_of_range(text)
    return value


def _bounded_int(text: str) -> int:
    # serde_json reads an integer that does not fit 64 bits as a double, and
    # rejects it when that double is infinite; so does this side.
    if len(text) > _INT_TEXT_CHECK and (len(text) > _INT_TEXT_MAX or math.isinf(float(text))):
        raise _out_of_range(text)
    return int(text)


# Three decoders, all refusing NaN and the infinities. A number out of range
# is caught as it is read, by a hook the scanner calls with the number's
# text: a Python call per number, so paid only where a number can be out of
# range.
#
# * Floats: every float goes through _finite_float in the usual decoder. A
#   message that holds no float pays nothing for it.
# * Integers: one out of range has more than _INT_TEXT_CHECK characters, so
#   a shorter text cannot hold one; in a longer one a sample of the text
#   says whether a run of that many digits may be there, and only then are
#   integers read through _bounded_int (the checked decoder).
# * A long text dense in floats would pay the float hook many times: there
#   the shape of the text (below) is looked at instead, and when no number
#   in it can be out of range the plain decoder, without hooks, reads it.
_float_decoder = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
_checked_decoder = json.JSONDecoder(
    parse_constant=_reject_constant, parse_float=_finite_float, parse_int=_bounded_int
)
_plain_decoder = json.JSONDecoder(parse_constant=_reject_constant)
# The decoders' scanners are called directly, as JSONDecoder.decode calls
# them, but without its two whitespace matches when there is no whitespace
# around the value: for a short message those cost as much as the scan.
# (JSONDecoder sets ``scan_once`` on itself; typeshed does not declare it.)
_Scan = Callable[[str, int], tuple[Any, int]]
_scan_floats: _Scan = vars(_float_decoder)["scan_once"]
_scan_checked: _Scan = vars(_checked_decoder)["scan_once"]
_scan_plain: _Scan = vars(_plain_decoder)["scan_once"]
# Bytes looked for with ``in``, as integers: ``bytes in bytes`` first tries
# its left side as an integer, and the error it raises and clears costs more
# than the search.
_BACKSLASH, _POINT, _CLOSING = b"\\.}"
# The whitespace JSONDecoder.decode skips (json.decoder.WHITESPACE).
_WHITESPACE = re.compile(r"[ \t\n\r]*")
# The sample of a long text: every _STRIDE-th byte. A run of _INT_TEXT_CHECK
# digits holds _SAMPLED_RUN of them in a row (_STRIDE * _SAMPLED_RUN is not
# more than _INT_TEXT_CHECK), so a sample without such a run proves that
# the text has no integer out of range.
_STRIDE = 30
_SAMPLED_RUN = b"0" * (_INT_TEXT_CHECK // _STRIDE)
_DIGITS_TABLE = bytes(ord("0") if 0x30 <= byte <= 0x39 else ord(" ") for byte in range(256))
# The float hook costs about as much as looking at this many bytes of the
# text's shape: a long text with more floats than one in so many bytes (as
# its sample's decimal points say) is read the other way.
_BYTES_PER_FLOAT_HOOK = 100
# One C-level pass gives the shape of the text: digits become "0", exponent
# letters "e", signs are deleted and everything else is " ". Plain substring
# searches over it then say whether a number could be out of range (a
# regular expression is several times slower here than json.loads itself).
_SHAPE_TABLE = bytes(
    ord("0") if 0x30 <= byte <= 0x39 else ord("e") if byte in b"eE" else ord(" ")
    for byte in range(256)
)
# A number without a run of 20 digits and without a 3-digit exponent is
# below 10**120, so the plain decoder reads it exactly.
_LONG_DIGITS = b"0" * 20
_LONG_INT_DIGITS = b"0" * _INT_TEXT_CHECK
# For this literal the regular expression engine's prefix search is faster
# than ``find``, which slows down on text full of digits.
_LONG_EXPONENT = re.compile(rb"e000")
# A value nested MAX_DEPTH deep has MAX_DEPTH opening and as many closing
# brackets: a shorter text cannot be one, and its nesting is not checked.
_DEPTH_TEXT_MIN = 2 * MAX_DEPTH
# The quotes and brackets of a text, "{" and "}" read as "[" and "]".
_TO_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_QUOTE_OR_BRACKET = bytes(sorted(set(range(256)) - set(b'"[]{}')))
# An escaped backslash or quote (JSON escapes are two bytes, read from the
# left, as a search reads them).
_ESCAPED_BACKSLASH_OR_QUOTE = re.compile(rb'\\[\\"]')
# Dropping escapes costs a little per escape: in a text with more than one
# backslash in this many bytes, the value itself is walked instead.
_SPARSE_ESCAPES = 16
# A ``\u`` escape that can leave a lone surrogate (``\uD800`` to ``\uDFFF``).
# Plain searches for its first three bytes find where the first candidate
# may be; the expression is searched from there, and only a match has the
# value walked.
_SURROGATE_STARTS = (b"\\ud", b"\\uD")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def parse(data: bytes | bytearray | memoryview, start: int = 0) -> Any:
    """Decode ``data`` as exactly one strict JSON value, or raise :class:`JsonError`.

    With ``start``, the value is ``data[start:]``, read in place (a message's
    JSON after its tag byte, without a copy); the bytes before ``start``
    must be ASCII, and the offsets in errors count from ``start``.
    """
    raw = data if type(data) is bytes else bytes(data)
    try:
        text = raw.decode()
    except UnicodeDecodeError as error:
        raise JsonError(f"invalid UTF-8 at byte {error.start - start}") from None
    size = len(raw) - start
    scan = _scan_floats if size <= _INT_TEXT_CHECK else _long_text_scanner(raw)
    try:
        # What JSONDecoder.decode does, with the same errors: whitespace is
        # skipped only where the scanner finds no value.
        try:
            value, end = scan(text, start)
        except StopIteration as stop:
            after = _after_whitespace(text, start)
            if after == start:
                raise json.JSONDecodeError("Expecting value", text, stop.value) from None
            try:
                value, end = scan(text, after)
            except StopIteration as error:
                raise json.JSONDecodeError("Expecting value", text, error.value) from None
        if end != len(text):
            end = _after_whitespace(text, end)
            if end != len(text):
                raise json.JSONDecodeError("Extra data", text, end)
    except JsonError:
        raise
    except json.JSONDecodeError as error:
        # Some of the standard library's messages already end in "at".
        message = error.msg.removesuffix(" at")
        raise JsonError(f"{message} at offset {error.pos - start}") from None
    except RecursionError:
        raise JsonError(_DEPTH_DETAIL) from None
    except ValueError as error:  # pragma: no cover - defensive: conversions are bounded above
        raise JsonError(str(error).split("\n", 1)[0]) from None
    # Cheap pre-checks first: the walks of the value below are skipped for
    # ordinary messages, which keeps decoding within a small factor of
    # json.loads. (``in`` on the text, not ``find`` on the bytes: on a str
    # it is the cheaper test.)
    if size >= _DEPTH_TEXT_MIN:
        _check_depth_of(raw, value)
    if "\\" in text and _may_have_surrogate(raw):
        _check_surrogates(value)
    return value


# parse_each takes texts shorter than this: none of them can hold an integer
# out of range or nest MAX_DEPTH deep, so reading each is one scan.
_SHORT_TEXT_MAX: Final = min(_INT_TEXT_CHECK, _DEPTH_TEXT_MIN - 1)


def parse_each(messages: list[bytes], start: int) -> list[Any] | None:
    """``[parse(message, start) for message in messages]`` at once, or ``None``.

    For short messages (fewer than 256 bytes after ``start``) in ASCII and
    without escapes, each a value with no whitespace around it: one check
    and one decode of them all, and then a scan of each where it lies in
    the whole. ``None`` when any of them is not such a message, or does not
    decode: :func:`parse` of each then says what each is. Either way the
    values are those :func:`parse` gives.
    """
    if not messages or max(map(len, messages)) > _SHORT_TEXT_MAX + start:
        return None
    whole = b"".join(messages)
    # ASCII: the text's offsets are the bytes'. No backslash: no escape,
    # so no lone surrogate.
    if not whole.isascii() or _BACKSLASH in whole:
        return None
    text = whole.decode()
    scan = _scan_floats
    values: list[Any] = []
    append = values.append
    end_of_message = 0
    try:
        for size in map(len, messages):
            value, end = scan(text, end_of_message + start)
            end_of_message += size
            # The value ends where its message does: what follows (the
            # next message) was not read into it, so it is the value that
            # message alone gives.
            if end != end_of_message:
                return None
            append(value)
    except (StopIteration, ValueError, RecursionError):  # JsonError is a ValueError
        return None
    return values


def _long_text_scanner(raw: bytes) -> _Scan:
    """The scanner for a text longer than :data:`_INT_TEXT_CHECK` bytes (see the decoders)."""
    sample = raw[::_STRIDE]
    shape: bytes | None = None
    if sample.translate(_DIGITS_TABLE).find(_SAMPLED_RUN) >= 0:
        shape = raw.translate(_SHAPE_TABLE, b"+-")
        if shape.find(_LONG_INT_DIGITS) >= 0:
            return _scan_checked
    # (``in`` first: a memchr, where ``count`` looks at every byte.)
    if _POINT not in sample or sample.count(b".") * _STRIDE * _BYTES_PER_FLOAT_HOOK <= len(raw):
        return _scan_floats
    if shape is None:
        shape = raw.translate(_SHAPE_TABLE, b"+-")
    if shape.find(_LONG_DIGITS) < 0 and _LONG_EXPONENT.search(shape) is None:
        return _scan_plain
    return _scan_checked


def _may_have_surrogate(raw: bytes) -> bool:
    low, high = _SURROGATE_STARTS
    starts = [start for start in (raw.find(low), raw.find(high)) if start >= 0]
    return bool(starts) and _SURROGATE_ESCAPE.search(raw, min(starts)) is not None


def _after_whitespace(text: str, position: int) -> int:
    match = _WHITESPACE.match(text, position)
    assert match is not None  # the pattern matches the empty string too
    return match.end()


def _check_depth_of(raw: bytes, value: Any) -> None:
    """Refuse ``value``, decoded from ``raw``, if it nests MAX_DEPTH deep.

    The brackets outside strings say how deep the value nests; a few C-level
    passes over the text find them. Only a text dense in escapes has its
    value walked instead.
    """
    # A chain of MAX_DEPTH nested arrays and objects opens all its levels by
    # its innermost opening bracket and closes them all after it: so after
    # the text's MAX_DEPTH-th opening bracket come at least MAX_DEPTH closing
    # ones. A text with fewer openings, or fewer closings after that one, is
    # done. (Brackets in strings are counted too, which only adds to both.)
    #
    # Each step is a C-level pass: "[" read as "{", the first MAX_DEPTH - 1
    # of those replaced in place (one ``memchr`` per bracket, and the rest
    # not looked at), then a search for the next one.
    openings = raw.replace(b"[", b"{").replace(b"{", b" ", MAX_DEPTH - 1)
    deepest = openings.find(b"{")
    if deepest < 0:
        return
    closings = raw[deepest + 1 :].replace(b"]", b"}").replace(b"}", b" ", MAX_DEPTH - 1)
    if _CLOSING not in closings:
        return
    if _WALK_TRACKED and _within_depth(value, len(raw) // _BYTES_PER_WALKED_CHILD):
        return
    marks = raw.translate(_TO_BRACKETS, _NOT_QUOTE_OR_BRACKET)
    if raw.find(b"\\") >= 0:
        if raw.count(b"\\") * _SPARSE_ESCAPES > len(raw):
            _check_depth(value)
            return
        # Without escaped backslashes and quotes, every quote delimits a string.
        unescaped = _ESCAPED_BACKSLASH_OR_QUOTE.sub(b"", raw)
        marks = unescaped.translate(_TO_BRACKETS, _NOT_QUOTE_OR_BRACKET)
    brackets = marks.translate(None, b'"')
    # Quotes alternate, opening and closing, so a bracket is inside a string
    # exactly when an odd number of quotes comes before it. When every run
    # of quotes between brackets is even (its pairs, counted without
    # overlap, are all of its quotes), no bracket is: the brackets are the
    # value's own. Otherwise dropping adjacent quotes in pairs keeps them
    # alternating (it drops no bracket from between them), and the pieces
    # between quotes at even places are the brackets outside strings.
    if marks.count(b'""') * 2 != len(marks) - len(brackets):
        brackets = b"".join(marks.replace(b'""', b"").split(b'"')[::2])
    # Each pass drops every "[]", the innermost level of nesting: the value
    # is within the limit if MAX_DEPTH - 1 passes leave nothing.
    for _ in range(MAX_DEPTH - 1):
        brackets = brackets.replace(b"[]", b"")
        if not brackets:
            return
    _check_depth(value)


# A long text with many brackets, say a log message of 880 records (64 KB),
# has its value's containers walked rather than its text read, where that
# is cheaper (bench/bench_floor.py, section 2, the listener at 64 KB; the
# check alone, timed apart: 15 us against 53 us for the text's passes,
# beside 410 us of json.loads). CPython does not track for
# garbage collection a dict none of whose values is a container, and tracks
# every list: so below each level of containers only the tracked children,
# the lists and the dicts that hold containers, can nest further, and an
# untracked dict ends its branch one level down. (Were every dict tracked,
# as on an interpreter that does not untrack them, the walk would follow
# them all: slower, never wrong.) Elsewhere the text is read.
_WALK_TRACKED: Final = sys.implementation.name == "cpython"
# The walk lists every child of the containers it follows, about 17 ns
# each; the text's passes cost about 0.9 ns a byte. So the walk is taken
# while its containers hold fewer children than one per this many bytes of
# text, and given up for the text as soon as they hold more.
_BYTES_PER_WALKED_CHILD: Final = 20
_children = gc.get_referents
_is_tracked = gc.is_tracked


def _within_depth(value: Any, budget: int) -> bool:
    """True if ``value`` nests fewer than MAX_DEPTH levels, by a walk of ``budget`` children.

    False when that does not tell: the containers' children are more than
    ``budget``, or tracked containers reach MAX_DEPTH - 1 levels (the text,
    or the exact walk, decides then).
    """
    if not _is_tracked(value):
        return True  # a scalar, or a dict of scalars: one level at most
    level = [value]
    # After the n-th step, level holds the tracked containers at depth
    # n + 1; when there are none, the deepest containers are untracked
    # dicts at that depth, n + 1 <= MAX_DEPTH - 1.
    for _ in range(MAX_DEPTH - 2):
        budget -= sum(map(len, level))
        if budget < 0:
            return False
        level = list(filter(_is_tracked, _children(*level)))
        if not level:
            return True
    return False


_CONTAINER_TYPES: Final = frozenset({dict, list})


def _check_depth(value: Any) -> None:
    """Refuse ``value`` if it nests MAX_DEPTH deep, by walking it level by level."""
    is_container = _CONTAINER_TYPES.__contains__
    level = [value] if is_container(type(value)) else []
    depth = 0
    while level:
        depth += 1
        if depth >= MAX_DEPTH:
            raise JsonError(_DEPTH_DETAIL)
        children = list(
            chain.from_iterable([item.values() if type(item) is dict else item for item in level])
        )
        # Only containers go on to the next level: scalars cannot nest.
        level = list(compress(children, map(is_container, map(type, children))))


def _check_surrogates(value: Any) -> None:
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            strings: list[str] = [item]
        elif isinstance(item, dict):
            strings = list(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
            continue
        else:
            continue
        for string in strings:
            try:
                string.encode("utf-8")
            except UnicodeEncodeError:
                raise JsonError("lone surrogate in a \\u escape") from None


_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def dumps(value: Any) -> bytes:
    """Encode ``value`` as compact UTF-8 JSON.

    Raises ``ValueError`` or ``TypeError`` for values JSON cannot carry
    (``NaN``, sets, lone surrogates...): those are the caller's values.
    """
    try:
        return _encoder.encode(value).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("string with a lone surrogate cannot be encoded as UTF-8") from None
    except RecursionError:
        raise ValueError("value nested too deeply to encode") from None


_canonical_encoder = json.JSONEncoder(
    ensure_ascii=False, allow_nan=False, separators=(",", ":"), sort_keys=True
)


def canonical_bytes(value: Any) -> bytes:
    """``value`` with object members sorted: equal JSON values give equal bytes."""
    return _canonical_encoder.encode(value).encode("utf-8", "surrogatepass")
