"""Strict, total JSON decoding and compact encoding.

The standard library's :func:`json.loads` accepts things the Rust peer
(``serde_json``) rejects and raises things a total decoder must not leak.
:func:`parse` closes both gaps, so every decoder in this package is built on
one function that, for any bytes, returns a value or raises
:class:`JsonError`:

* only UTF-8 is accepted (``json.loads`` on bytes would also guess UTF-16
  and UTF-32);
* ``NaN``, ``Infinity`` and ``-Infinity`` are rejected, and so is a number
  too large for a double (``1e400``), which ``json.loads`` turns into
  infinity;
* a ``\\uD800``-style escape that leaves a lone surrogate is rejected, since
  it cannot be re-encoded as UTF-8;
* nesting deeper than :data:`MAX_DEPTH` (``serde_json``'s own limit) is
  rejected, so what this side accepts the Rust side accepts too;
* integers with more digits than Python converts (``sys.int_info``'s limit)
  are rejected instead of raising ``ValueError`` later.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["MAX_DEPTH", "JsonError", "canonical_bytes", "dumps", "parse"]

#: Deepest nesting of arrays and objects accepted, the same as serde_json's
#: default recursion limit.
MAX_DEPTH = 128


class JsonError(ValueError):
    """The bytes are not one strict JSON value."""


def _reject_constant(name: str) -> Any:
    raise JsonError(f"non-standard JSON constant {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise JsonError(f"number out of range: {text[:40]}")
    return value


_decoder = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")


def parse(data: bytes | bytearray | memoryview) -> Any:
    """Decode ``data`` as exactly one strict JSON value, or raise :class:`JsonError`."""
    raw = data if isinstance(data, bytes) else bytes(data)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise JsonError(f"invalid UTF-8 at byte {error.start}") from None
    try:
        value = _decoder.decode(text)
    except JsonError:
        raise
    except json.JSONDecodeError as error:
        raise JsonError(f"{error.msg} at offset {error.pos}") from None
    except RecursionError:
        raise JsonError(f"nesting deeper than {MAX_DEPTH}") from None
    except ValueError as error:  # int digit limit and similar conversion failures
        raise JsonError(str(error).split("\n", 1)[0]) from None
    # Cheap pre-checks first: both walks below are skipped for ordinary
    # messages, which keeps decoding within a small factor of json.loads.
    if raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:
        _check_depth(value)
    if _SURROGATE_ESCAPE.search(raw) is not None:
        _check_surrogates(value)
    return value


def _check_depth(value: Any) -> None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > MAX_DEPTH:
            raise JsonError(f"nesting deeper than {MAX_DEPTH}")
        stack.extend((child, depth + 1) for child in children)


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
