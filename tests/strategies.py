"""Hypothesis strategies for the protocol's values and their bytes.

Import from test modules as ``from strategies import notifications`` (pytest
puts ``tests/`` on ``sys.path``). The names below are stable; options are
keyword-only and may grow.

Values (each draws an object the library can encode):

* :func:`json_values`, :func:`json_objects` - strict JSON as Python values
  (no ``NaN``, no lone surrogates, integers and nesting within the limits
  the decoder accepts);
* :func:`notifications` - :class:`Notification` of every kind, built from
  Python values or decoded from members with ``jsonrpc``, ``_meta`` and
  unknown members; ``kinds=`` narrows the kinds;
* :func:`error_datas`, :func:`messages` (a notification or an error),
  :func:`asks`, :func:`channel_requests`, :func:`log_levels`.

Bytes (for ``encode(decode(b)) == b`` and totality properties):

* :func:`json_texts` renders a value with odd whitespace, escapes, member
  orders and, optionally, duplicate members;
* :func:`notification_bytes`, :func:`error_bytes`, :func:`message_bytes`,
  :func:`ask_bytes`, :func:`channel_request_bytes` mix well-formed,
  almost-well-formed and random input.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from hypothesis import strategies as st

from diverge_notifications.sansio import (
    Ask,
    ErrorData,
    Exchange,
    LogLevel,
    Notification,
    NotificationKind,
)
from diverge_notifications.sansio.mcp.json import dumps
from diverge_notifications.sansio.mcp.model import METHODS, TASK_STATUSES, ErrorCode
from diverge_notifications.sansio.wire.asks import ChannelRequest, ChannelRequestTag

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "ask_bytes",
    "asks",
    "channel_request_bytes",
    "channel_requests",
    "custom_methods",
    "error_bytes",
    "error_datas",
    "json_objects",
    "json_texts",
    "json_values",
    "log_levels",
    "message_bytes",
    "messages",
    "methods_of",
    "notification_bytes",
    "notification_members",
    "notification_params",
    "notifications",
]

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

_LIST_CHANGED = frozenset(
    {
        NotificationKind.RESOURCE_LIST_CHANGED,
        NotificationKind.TOOL_LIST_CHANGED,
        NotificationKind.PROMPT_LIST_CHANGED,
    }
)

# --- JSON values --------------------------------------------------------------

_texts = st.text(max_size=12)
_keys = st.text(max_size=8)
# Beyond 64 bits on purpose: the decoder keeps any integer a double can hold.
_integers = st.integers(min_value=-(2**70), max_value=2**70)
_floats = st.floats(allow_nan=False, allow_infinity=False)
_scalars: st.SearchStrategy[Any] = st.one_of(st.none(), st.booleans(), _integers, _floats, _texts)


def json_values(*, max_leaves: int = 12) -> st.SearchStrategy[Any]:
    """Any strict JSON value: ``None``, bools, ints, finite floats, str, lists, dicts."""
    return st.recursive(
        _scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(_keys, children, max_size=4),
        ),
        max_leaves=max_leaves,
    )


def json_objects(*, max_leaves: int = 8) -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object whose members are :func:`json_values`."""
    return st.dictionaries(_keys, json_values(max_leaves=max_leaves), max_size=4)


def log_levels() -> st.SearchStrategy[LogLevel]:
    """One of the eight severities."""
    return st.sampled_from(list(LogLevel))


# --- notifications ------------------------------------------------------------

_request_ids = st.one_of(st.integers(min_value=INT64_MIN, max_value=INT64_MAX), _texts)
_numbers = st.one_of(_integers, _floats)
# Unknown members the Rust peer ignores; the prefix keeps them clear of known names.
_extra_members = st.dictionaries(
    _keys.map(lambda key: "x-" + key), json_values(max_leaves=4), max_size=2
)


def _with_extras_and_meta(
    required: Mapping[str, st.SearchStrategy[Any]],
    optional: Mapping[str, st.SearchStrategy[Any]] | None = None,
) -> st.SearchStrategy[dict[str, Any]]:
    """Params with the given members, plus maybe ``_meta`` and unknown members, shuffled."""
    optional = {**(optional or {}), "_meta": json_objects(max_leaves=4)}
    base = st.fixed_dictionaries(dict(required), optional=optional)
    return st.builds(_merge_shuffled, base, _extra_members, st.randoms(use_true_random=False))


def _merge_shuffled(base: dict[str, Any], extras: dict[str, Any], rnd: Any) -> dict[str, Any]:
    items = [*base.items(), *extras.items()]
    rnd.shuffle(items)
    return dict(items)


def notification_params(kind: NotificationKind) -> st.SearchStrategy[dict[str, Any] | None]:
    """Params that fit ``kind`` (for ``CUSTOM``: any params object, or none)."""
    if kind in _LIST_CHANGED:
        return st.one_of(
            st.none(),
            st.just({}),
            st.fixed_dictionaries({"_meta": json_objects(max_leaves=4)}),
            _with_extras_and_meta({}),
        )
    if kind is NotificationKind.PROGRESS:
        token = st.one_of(st.integers(min_value=INT64_MIN, max_value=INT64_MAX), _texts)
        return _with_extras_and_meta(
            {"progressToken": token, "progress": _numbers},
            {"total": _numbers, "message": _texts},
        )
    if kind is NotificationKind.LOGGING_MESSAGE:
        return _with_extras_and_meta(
            {"level": log_levels().map(lambda level: level.wire), "data": json_values()},
            {"logger": _texts},
        )
    if kind is NotificationKind.RESOURCE_UPDATED:
        return _with_extras_and_meta({"uri": _texts})
    if kind is NotificationKind.CANCELLED:
        return _with_extras_and_meta({}, {"requestId": _request_ids, "reason": _texts})
    if kind is NotificationKind.ELICITATION_COMPLETE:
        return _with_extras_and_meta({"elicitationId": _texts})
    if kind is NotificationKind.TASK_STATUS:
        return _with_extras_and_meta(
            {"taskId": _texts, "status": st.sampled_from(sorted(TASK_STATUSES))},
            {"statusMessage": _texts, "createdAt": _texts, "ttl": st.none() | _integers},
        )
    if kind is NotificationKind.SUBSCRIPTIONS_ACKNOWLEDGED:
        return _with_extras_and_meta({"notifications": json_objects(max_leaves=4)})
    return st.none() | json_objects()


def custom_methods() -> st.SearchStrategy[str]:
    """Method names no known kind answers to."""
    return st.one_of(
        st.text(max_size=30),
        st.sampled_from(["notifications/custom", "x/y", "notifications/Progress"]),
        st.text(max_size=10).map(lambda suffix: "notifications/" + suffix),
    ).filter(lambda method: method not in METHODS)


def methods_of(kind: NotificationKind) -> st.SearchStrategy[str]:
    """The method names of ``kind`` (two for ``TASK_STATUS``)."""
    if kind is NotificationKind.CUSTOM:
        return custom_methods()
    return st.sampled_from(sorted(method for method, known in METHODS.items() if known is kind))


@st.composite
def notification_members(
    draw: st.DrawFn, *, kinds: Collection[NotificationKind] | None = None
) -> dict[str, Any]:
    """The JSON object of a notification of one of ``kinds`` (default: all).

    ``method`` and ``params`` may come in any order, among ``jsonrpc`` and
    unknown members; ``params`` may be absent or an explicit ``null`` where
    the kind allows it.
    """
    kind = draw(st.sampled_from(sorted(kinds or NotificationKind, key=lambda k: k.value)))
    members: dict[str, Any] = {"method": draw(methods_of(kind))}
    params = draw(notification_params(kind))
    if params is not None:
        members["params"] = params
    elif draw(st.booleans()):
        members["params"] = None
    if draw(st.booleans()):
        members["jsonrpc"] = "2.0"
    members.update(draw(_extra_members))
    items = list(members.items())
    draw(st.randoms(use_true_random=False)).shuffle(items)
    return dict(items)


@st.composite
def notifications(
    draw: st.DrawFn, *, kinds: Collection[NotificationKind] | None = None
) -> Notification:
    """A notification of one of ``kinds`` (default: every kind, ``CUSTOM`` included).

    Half are built with ``Notification(method, params, ...)``, half decoded
    from :func:`notification_members` with :meth:`Notification.from_json`.
    Either way ``.kind`` is the drawn kind.
    """
    if draw(st.booleans()):
        return Notification.from_json(draw(notification_members(kinds=kinds)))
    kind = draw(st.sampled_from(sorted(kinds or NotificationKind, key=lambda k: k.value)))
    method = draw(methods_of(kind))
    params = draw(notification_params(kind))
    jsonrpc = draw(st.sampled_from(["2.0", None]))
    return Notification(method, params, jsonrpc=jsonrpc)


# --- errors and messages --------------------------------------------------------

_codes = st.one_of(
    st.sampled_from([int(code) for code in ErrorCode]),
    st.integers(min_value=INT32_MIN, max_value=INT32_MAX),
)


@st.composite
def _error_members(draw: st.DrawFn) -> dict[str, Any]:
    members: dict[str, Any] = {"code": draw(_codes), "message": draw(_texts)}
    if draw(st.booleans()):
        members["data"] = draw(json_values())
    members.update(draw(_extra_members))
    items = list(members.items())
    draw(st.randoms(use_true_random=False)).shuffle(items)
    return dict(items)


def error_datas() -> st.SearchStrategy[ErrorData]:
    """ErrorData built from Python values, or decoded from JSON with unknown members."""
    built = st.builds(
        ErrorData, code=_codes, message=_texts, data=st.none() | json_values(max_leaves=6)
    )
    decoded = st.builds(_decode_error_members, _error_members())
    return st.one_of(built, decoded)


def _decode_error_members(members: dict[str, Any]) -> ErrorData:
    return ErrorData.from_bytes(dumps(members))


def messages() -> st.SearchStrategy[Notification | ErrorData]:
    """A message: a notification or an error."""
    return st.one_of(notifications(), error_datas())


# --- asks -----------------------------------------------------------------------

_params = st.none() | json_objects()


@st.composite
def asks(draw: st.DrawFn) -> Ask:
    """A provider ask of any kind; kinds 0-3 carry params (or ``None``)."""
    exchange = draw(st.sampled_from(list(Exchange)))
    if exchange is Exchange.NOTIFICATIONS:
        return Ask(exchange=exchange)
    return Ask(exchange=exchange, params=draw(_params))


@st.composite
def channel_requests(draw: st.DrawFn) -> ChannelRequest:
    """An agents-begin channel request of any tag."""
    tag = draw(st.sampled_from(list(ChannelRequestTag)))
    if tag is ChannelRequestTag.POSTGRES:
        return ChannelRequest(tag=tag, connection_id=draw(st.binary(min_size=4, max_size=4)))
    if tag is ChannelRequestTag.MCP_NOTIFICATIONS:
        return ChannelRequest(tag=tag)
    return ChannelRequest(tag=tag, params=draw(_params))


# --- rendering JSON with odd but valid spelling ----------------------------------

_whitespace = st.text(alphabet=" \t\n\r", max_size=3)
_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def _unicode_escape(code: int, upper: bool) -> str:
    if code > 0xFFFF:  # a surrogate pair, as JSON spells characters outside the BMP
        code -= 0x10000
        return _unicode_escape(0xD800 + (code >> 10), upper) + _unicode_escape(
            0xDC00 + (code & 0x3FF), upper
        )
    return f"\\u{code:04X}" if upper else f"\\u{code:04x}"


def _render_string(draw: st.DrawFn, text: str) -> str:
    out = ['"']
    for char in text:
        styles = ["lower", "upper"]
        if char in _SHORT_ESCAPES:
            styles.append("short")
        if char not in '"\\' and ord(char) >= 0x20:
            styles += ["literal", "literal", "literal"]
        style = draw(st.sampled_from(styles))
        if style == "literal":
            out.append(char)
        elif style == "short":
            out.append(_SHORT_ESCAPES[char])
        else:
            out.append(_unicode_escape(ord(char), upper=style == "upper"))
    out.append('"')
    return "".join(out)


def _render_float(draw: st.DrawFn, value: float) -> str:
    text = repr(value)  # always valid JSON for a finite float
    if "e" in text:
        return text.replace("e", "E") if draw(st.booleans()) else text
    return text + draw(st.sampled_from(["", "", "e0", "E+0", "e-00"]))


def _render(draw: st.DrawFn, value: Any, duplicates: bool) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _render_float(draw, value)
    if isinstance(value, str):
        return _render_string(draw, value)
    if isinstance(value, list):
        if not value:
            return "[" + draw(_whitespace) + "]"
        parts = [
            draw(_whitespace) + _render(draw, item, duplicates) + draw(_whitespace)
            for item in value
        ]
        return "[" + ",".join(parts) + "]"
    assert isinstance(value, dict)
    members = list(value.items())
    if duplicates and members and draw(st.integers(min_value=0, max_value=3)) == 0:
        # An earlier member with the same name; the parsed view keeps the last one.
        key = draw(st.sampled_from([key for key, _ in members]))
        index = next(i for i, (k, _) in enumerate(members) if k == key)
        members.insert(index, (key, draw(_scalars)))
    if not members:
        return "{" + draw(_whitespace) + "}"
    parts = [
        draw(_whitespace)
        + _render_string(draw, key)
        + draw(_whitespace)
        + ":"
        + draw(_whitespace)
        + _render(draw, item, duplicates)
        + draw(_whitespace)
        for key, item in members
    ]
    return "{" + ",".join(parts) + "}"


@st.composite
def json_texts(draw: st.DrawFn, value: Any, *, duplicates: bool = False) -> str:
    """``value`` as a JSON text with random whitespace, escapes and number spellings.

    Parsing the text gives back ``value``. With ``duplicates=True`` some
    objects get an earlier member of the same name (parsing keeps the last,
    so the value is still ``value``).
    """
    return draw(_whitespace) + _render(draw, value, duplicates) + draw(_whitespace)


def _texts_of(values: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes]:
    return values.flatmap(
        lambda value: st.booleans().flatmap(
            lambda duplicates: json_texts(value, duplicates=duplicates)
        )
    ).map(lambda text: text.encode("utf-8"))


def _mangled(valid: st.SearchStrategy[bytes]) -> st.SearchStrategy[bytes]:
    """Valid bytes with a slice cut out, a byte flipped or junk appended."""

    @st.composite
    def mangle(draw: st.DrawFn) -> bytes:
        data = bytearray(draw(valid))
        how = draw(st.sampled_from(["cut", "flip", "append"]))
        if how == "cut" and data:
            start = draw(st.integers(min_value=0, max_value=len(data) - 1))
            stop = draw(st.integers(min_value=start, max_value=len(data)))
            del data[start:stop]
        elif how == "flip" and data:
            index = draw(st.integers(min_value=0, max_value=len(data) - 1))
            data[index] ^= draw(st.integers(min_value=1, max_value=255))
        else:
            data += draw(st.binary(max_size=4))
        return bytes(data)

    return mangle()


def notification_bytes() -> st.SearchStrategy[bytes]:
    """A notification's JSON bytes, oddly spelled; sometimes broken or random."""
    valid = _texts_of(notification_members())
    return st.one_of(valid, valid, _mangled(valid), _texts_of(json_values()), st.binary())


def error_bytes() -> st.SearchStrategy[bytes]:
    """An error's JSON bytes, oddly spelled; sometimes broken or random."""
    valid = _texts_of(_error_members())
    return st.one_of(valid, valid, _mangled(valid), _texts_of(json_values()), st.binary())


def message_bytes() -> st.SearchStrategy[bytes]:
    """A message ``[tag][JSON]``: mostly tags 0 and 1 with plausible bodies."""
    return st.one_of(
        notification_bytes().map(lambda body: b"\x00" + body),
        error_bytes().map(lambda body: b"\x01" + body),
        st.binary(max_size=64),
    )


def _params_bytes() -> st.SearchStrategy[bytes]:
    valid = _texts_of(_params)
    return st.one_of(valid, valid, _mangled(valid), _texts_of(json_values()), st.binary())


def ask_bytes() -> st.SearchStrategy[bytes]:
    """A provider ask ``[kind][payload]``, kinds 0-4 mostly, any payload."""
    kinds = st.integers(min_value=0, max_value=4) | st.integers(min_value=0, max_value=255)
    return st.one_of(
        st.builds(lambda kind, body: bytes((kind,)) + body, kinds, _params_bytes()),
        st.binary(max_size=64),
    )


def channel_request_bytes() -> st.SearchStrategy[bytes]:
    """An agents-begin channel request ``[tag][payload]``, any payload."""
    tags = st.integers(min_value=0, max_value=5) | st.integers(min_value=0, max_value=255)
    return st.one_of(
        st.builds(lambda tag, body: bytes((tag,)) + body, tags, _params_bytes()),
        st.binary(min_size=0, max_size=6).map(lambda rest: b"\x00" + rest),
        st.binary(max_size=64),
    )
