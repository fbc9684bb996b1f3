"""The MCP side of the channel: notifications, errors and log levels.

A :class:`Notification` is a JSON object ``{"method": str, "params"?: object,
...}`` kept *losslessly*: every member as received (``jsonrpc``, ``_meta``,
members this library has never heard of), in the order received, and the
exact bytes it came from, so that a relay forwards what it was given.

Classification follows the Rust peer (rmcp): a notification is one of the
known kinds when its ``method`` is a known one *and* its params fit that
kind's shape; otherwise it is :attr:`NotificationKind.CUSTOM`. A known
method with unfitting params is never a failure. The hard failures, which
make a message undecodable, are listed on :meth:`Notification.from_bytes`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from ..errors import FrameError, FrameErrorReason, JsonError
from .json import canonical_bytes, dumps, parse, parse_each
from .kinds import (
    INT32_MAX,
    INT32_MIN,
    METHODS,
    TASK_STATUSES,
    ErrorCode,
    LogLevel,
    NotificationKind,
)
from .views import (
    KIND_BY_VIEW,
    Cancelled,
    ElicitationComplete,
    ListChanged,
    LogMessage,
    NotificationView,
    Progress,
    ResourceUpdated,
    SubscriptionsAcknowledged,
    TaskStatus,
    is_int,
    view_of,
)

__all__ = [
    "METHODS",
    "TASK_STATUSES",
    "Cancelled",
    "ElicitationComplete",
    "ErrorCode",
    "ErrorData",
    "ListChanged",
    "LogLevel",
    "LogMessage",
    "Notification",
    "NotificationKind",
    "NotificationView",
    "Progress",
    "ResourceUpdated",
    "SubscriptionsAcknowledged",
    "TaskStatus",
]

_INT64_MIN: Final = -(2**63)


def _body_error(detail: str, tag: int) -> FrameError:
    return FrameError(FrameErrorReason.BODY, detail, tag=tag)


_NOT_CLASSIFIED: Final = object()
_new_object: Final = object.__new__


class Notification:
    """One MCP notification, kept exactly as it was sent.

    Build one from Python values with ``Notification(method, params)``, or
    decode one with :meth:`from_bytes` / :meth:`from_json`. Instances are
    immutable by contract: do not mutate :attr:`members` or :attr:`params`.

    Equality and hashing compare the JSON *value* (object member order and
    insignificant whitespace do not matter; ``1``, ``1.0`` and ``true`` are
    all different), while :meth:`to_bytes` preserves the exact bytes a
    decoded notification came from.
    """

    __slots__ = ("_canonical", "_members", "_message", "_raw", "_view")

    _members: dict[str, Any]
    _raw: bytes | None
    # Decoded from a message (tag byte, then the JSON): the message, until
    # to_bytes() first slices the JSON out of it.
    _message: bytes | None
    _view: object
    _canonical: bytes | None

    def __init__(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        meta: Mapping[str, Any] | None = None,
        jsonrpc: str | None = "2.0",
    ) -> None:
        """Build a notification from Python values.

        The result is ``{"jsonrpc": "2.0", "method": …, "params": {…}}``:
        ``jsonrpc`` is written because a JSON-RPC MCP peer requires it and
        the Rust peer ignores it (pass ``jsonrpc=None`` to leave it out);
        ``params`` is left out when it is ``None`` and no ``meta`` is given;
        ``meta`` becomes ``params["_meta"]``. Values must be JSON-encodable
        (no ``NaN``, no sets): ``ValueError`` or ``TypeError`` otherwise.
        """
        if not isinstance(method, str):
            raise TypeError(f"method must be a str, not {type(method).__name__}")
        members: dict[str, Any] = {}
        if jsonrpc is not None:
            members["jsonrpc"] = jsonrpc
        members["method"] = method
        if params is not None or meta is not None:
            if params is not None and not isinstance(params, Mapping):
                raise TypeError(f"params must be a mapping, not {type(params).__name__}")
            built = dict(params or {})
            if meta is not None:
                built["_meta"] = dict(meta)
            members["params"] = built
        raw = dumps(members)  # validates the values now, not at send time
        self._set(parse(raw), raw)

    def _set(self, members: dict[str, Any], raw: bytes | None) -> None:
        self._members = members
        self._raw = raw
        self._message = None
        self._view = _NOT_CLASSIFIED
        self._canonical = None

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> Notification:
        """Decode one notification from its JSON bytes, keeping those bytes.

        Raises :class:`FrameError` (reason ``BODY``) when the bytes are not
        strict UTF-8 JSON (see :mod:`.json`), not an object, have no string
        ``method``, or have ``params`` that is neither an object nor null.
        """
        return cls._decode(data if type(data) is bytes else bytes(data), False)

    @classmethod
    def _decode(cls, data: bytes, tagged: bool) -> Notification:
        """:meth:`from_bytes` of ``data``, or of the JSON after its tag byte if ``tagged``.

        A tagged message (see :func:`~..wire.messages.decode_message`) is read in
        place: its JSON is sliced out only if :meth:`to_bytes` asks for it.
        """
        try:
            members = parse(data, 1 if tagged else 0)
        except JsonError as error:
            raise _body_error(f"notification is not valid JSON: {error}", 0) from None
        # What _adopt() does in its loop, for one message: the loop's set-up
        # (a list, a zip, the tuples it is given) costs a third as much as
        # decoding a short message (bench/bench_proxy.py, decode_message).
        if type(members) is dict:
            method = members.get("method")
            params = members.get("params")
            if type(method) is str and (params is None or type(params) is dict):
                self = _new_object(cls)
                self._members = members
                if tagged:
                    self._raw = None
                    self._message = data
                else:
                    self._raw = data
                    self._message = None
                self._view = _NOT_CLASSIFIED
                self._canonical = None
                return self
        return cls._from_members(members, data[1:] if tagged else data)

    @classmethod
    def _decode_each(cls, messages: list[bytes]) -> list[Notification] | None:
        """``_decode(message, True)`` of every message, at once; ``None`` if any is not plain.

        Plain: what :func:`~.json.parse_each` reads at once, and a
        notification :meth:`_adopt` takes. Otherwise ``_decode`` of each
        says what each message is (or what is wrong with it).
        """
        values = parse_each(messages, 1)
        return None if values is None else cls._adopt(values, messages, True)

    @classmethod
    def _adopt(
        cls, values: Sequence[Any], sources: Sequence[bytes], tagged: bool
    ) -> list[Notification] | None:
        """The notifications ``values`` (decoded from ``sources``) are, built in place, or ``None``.

        The common case, checked with exact types (what the JSON decoder
        builds) and each instance filled in as _set() does; ``None`` (if any
        value is not such a notification) sends the members to
        _from_members(), whose checks accept a superset and say what is
        wrong. One loop for a whole run: no call per notification.
        """
        new = _new_object
        adopted: list[Notification] = []
        append = adopted.append
        # (zip without strict=: a call with a keyword costs as much as the rest.)
        for members, data in zip(values, sources):  # noqa: B905 - of one length
            if type(members) is not dict:
                return None
            method = members.get("method")
            params = members.get("params")
            if type(method) is not str or not (params is None or type(params) is dict):
                return None
            self = new(cls)
            self._members = members
            if tagged:
                self._raw = None
                self._message = data
            else:
                self._raw = data
                self._message = None
            self._view = _NOT_CLASSIFIED
            self._canonical = None
            append(self)
        return adopted

    @classmethod
    def from_json(cls, value: str | Mapping[str, Any]) -> Notification:
        """Decode a notification from a JSON text or an already-parsed object.

        Takes the same checks as :meth:`from_bytes`. A mapping is copied
        through JSON, so later changes to it do not reach the notification.
        """
        if isinstance(value, str):
            return cls.from_bytes(value.encode("utf-8", "surrogatepass"))
        if not isinstance(value, Mapping):
            raise _body_error(f"notification must be a JSON object, not {type(value).__name__}", 0)
        try:
            raw = dumps(dict(value))
        except (TypeError, ValueError) as error:
            raise _body_error(f"notification is not JSON-encodable: {error}", 0) from None
        try:
            # Encodable is not enough: too deep or too large a number is
            # refused here exactly as it would be on the wire.
            members = parse(raw)
        except JsonError as error:
            raise _body_error(f"notification is not valid JSON: {error}", 0) from None
        return cls._from_members(members, raw)

    @classmethod
    def _from_members(cls, members: Any, raw: bytes) -> Notification:
        if not isinstance(members, dict):
            raise _body_error(f"notification must be a JSON object, not {_json_type(members)}", 0)
        method = members.get("method", _NOT_CLASSIFIED)
        if method is _NOT_CLASSIFIED:
            raise _body_error('notification has no "method" member', 0)
        if not isinstance(method, str):
            raise _body_error(
                f'notification "method" must be a string, not {_json_type(method)}', 0
            )
        params = members.get("params")
        if params is not None and not isinstance(params, dict):
            raise _body_error(
                f'notification "params" must be an object or null, not {_json_type(params)}', 0
            )
        self = cls.__new__(cls)
        self._set(members, raw)
        return self

    # --- reading -------------------------------------------------------

    @property
    def method(self) -> str:
        """The ``method`` member."""
        method: str = self._members["method"]
        return method

    @property
    def params(self) -> dict[str, Any] | None:
        """The ``params`` object, or ``None`` when absent or null."""
        params: dict[str, Any] | None = self._members.get("params")
        return params

    @property
    def meta(self) -> dict[str, Any] | None:
        """``params._meta`` when it is an object, else ``None``."""
        params = self.params
        meta = params.get("_meta") if params is not None else None
        return meta if isinstance(meta, dict) else None

    @property
    def members(self) -> dict[str, Any]:
        """The whole JSON object, every member in the order received."""
        return self._members

    @property
    def view(self) -> NotificationView | None:
        """The typed view for a known kind, or ``None`` for a custom notification."""
        view = self._view
        if view is _NOT_CLASSIFIED:
            kind = METHODS.get(self.method)
            view = None if kind is None else view_of(kind, self._members.get("params"))
            self._view = view
        return view  # type: ignore[return-value]

    @property
    def kind(self) -> NotificationKind:
        """The kind; :attr:`NotificationKind.CUSTOM` for unknown or unfitting ones."""
        view = self.view
        if view is None:
            return NotificationKind.CUSTOM
        if isinstance(view, ListChanged):
            return view.kind
        return KIND_BY_VIEW[type(view)]

    # --- writing -------------------------------------------------------

    def to_bytes(self) -> bytes:
        """The notification as UTF-8 JSON: the received bytes, unchanged, if decoded."""
        raw = self._raw
        if raw is None:
            message = self._message
            if message is None:  # pragma: no cover - every constructor sets one
                raw = self._raw = dumps(self._members)
            else:
                raw = self._raw = message[1:]
                self._message = None
        return raw

    def to_json(self) -> str:
        """The notification as a JSON text; see :meth:`to_bytes`."""
        return self.to_bytes().decode("utf-8")

    # --- identity ------------------------------------------------------

    def _canonical_bytes(self) -> bytes:
        canonical = self._canonical
        if canonical is None:
            canonical = self._canonical = canonical_bytes(self._members)
        return canonical

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Notification):
            return NotImplemented
        return self._canonical_bytes() == other._canonical_bytes()

    def __hash__(self) -> int:
        return hash(self._canonical_bytes())

    def __repr__(self) -> str:
        text = self.to_json()
        if len(text) > 200:
            text = text[:197] + "..."
        return f"Notification({self.kind.name}, {text})"


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _plain_code(value: int) -> int:
    # An ErrorCode (an IntEnum) is a fine code: store it as the plain int it
    # stands for. Anything else is left for the validator to judge.
    if isinstance(value, int) and not isinstance(value, bool) and type(value) is not int:
        return int(value)
    return value


@attrs.frozen(kw_only=True)
class ErrorData:
    """A JSON-RPC error: why a path stopped (``{code, message, data?}``).

    ``code`` is an int32 (an :class:`ErrorCode` is accepted and stored as
    its plain int) and ``message`` a string; ``data`` is any JSON
    value, ``None`` when absent (as in rmcp, an explicit ``null`` and an
    absent ``data`` are the same). ``data`` is checked when the error is
    built, as a notification's values are: what JSON cannot carry (a set,
    ``NaN``) or what the strict JSON layer would refuse on the wire (a
    number beyond a double's range, nesting too deep) is a
    :class:`ValueError`. The bytes are kept (``raw``, not compared), so
    that re-encoding a decoded or built error is exact.
    """

    code: int = attrs.field(converter=_plain_code)
    message: str = attrs.field()
    data: Any = None
    _raw: bytes | None = attrs.field(default=None, eq=False, repr=False, alias="raw")
    # The JSON of an error built from values, made when it is built.
    _built: bytes = attrs.field(init=False, default=b"", eq=False, repr=False)

    @code.validator
    def _check_code(self, _attribute: object, value: object) -> None:
        if not is_int(value, INT32_MIN, INT32_MAX):
            raise ValueError(f"error code must be an int32, not {value!r}")

    @message.validator
    def _check_message(self, _attribute: object, value: object) -> None:
        if not isinstance(value, str):
            raise TypeError(f"error message must be a str, not {type(value).__name__}")

    def __attrs_post_init__(self) -> None:
        if self._raw is not None:
            return
        members: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            members["data"] = self.data
        try:
            raw = dumps(members)
        except (TypeError, ValueError) as error:
            raise ValueError(f"error data is not JSON-encodable: {error}") from None
        try:
            # Encodable is not enough: what the peer would refuse is refused now.
            parse(raw)
        except JsonError as error:
            raise ValueError(f"error data is not valid JSON: {error}") from None
        object.__setattr__(self, "_built", raw)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> ErrorData:
        """Decode an error from its JSON bytes; :class:`FrameError` (``BODY``) if it is not one."""
        raw = bytes(data)
        try:
            members = parse(raw)
        except JsonError as error:
            raise _body_error(f"error is not valid JSON: {error}", 1) from None
        if not isinstance(members, dict):
            raise _body_error(f"error must be a JSON object, not {_json_type(members)}", 1)
        code = members.get("code")
        if not is_int(code, INT32_MIN, INT32_MAX):
            raise _body_error(f'error "code" must be an int32, not {_describe_code(code)}', 1)
        assert isinstance(code, int)
        message = members.get("message")
        if not isinstance(message, str):
            raise _body_error(
                f'error "message" must be a string, not {_describe_message(message)}', 1
            )
        return cls(code=code, message=message, data=members.get("data"), raw=raw)

    def to_bytes(self) -> bytes:
        """The error as UTF-8 JSON: the received bytes, unchanged, if decoded."""
        raw = self._raw
        return self._built if raw is None else raw

    @property
    def well_known(self) -> ErrorCode | None:
        """The :class:`ErrorCode` for :attr:`code`, if it is a well-known one."""
        try:
            return ErrorCode(self.code)
        except ValueError:
            return None


def _describe_code(value: object) -> str:
    if type(value) is int:
        return "an integer outside the int32 range"
    return _describe_message(value)


def _describe_message(value: object) -> str:
    if value is None:
        return "missing or null"
    return _json_type(value)
