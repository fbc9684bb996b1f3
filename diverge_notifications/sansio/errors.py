"""Exceptions raised by the sans-IO core, and the one way it refuses a bad argument.

Two families, as in h11, under :class:`ProtocolError`:

* :class:`LocalProtocolError` is raised when *this* side's code asks for
  something the protocol forbids (a bug in the caller), for example
  publishing a notification too large for a frame
  (:class:`NotificationTooLarge`);
* :class:`DecodeError` describes bytes that came from somewhere else and
  do not decode: a message (:class:`FrameError`), an ask
  (:class:`AskError`), an envelope (:class:`EnvelopeError`) or the JSON
  inside any of them (:class:`JsonError`). Decoding failures are always
  declared, never a stray ``ValueError`` or ``RecursionError``; each is a
  :class:`ValueError` too. A frame longer than the reader's limit is
  described by :class:`FrameTooLarge`, which the decoder returns rather
  than raises.

A proxy's exchange that does not end in a result raises
:class:`~.drivers.proxy.ExchangeError` or
:class:`~.drivers.proxy.ExchangeFailed`: they carry what the exchange ended
with (an ``ErrorData``, an event), so they live with the exchange driver,
above the model and the events that this module lies below.

Besides these, :class:`HubSuspended` tells a subscriber that the hub serves
nobody for now, and :class:`PlaintextTokenRefused` (a :class:`ValueError`)
refuses a bearer token bound for the network in cleartext.

A bad argument to a constructor is a :class:`TypeError` when it has the
wrong type and a :class:`ValueError` when its value is wrong;
:func:`check_positive_int` says so for the sizes and counts, and
:func:`check_positive` for the timeouts and intervals.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

__all__ = [
    "AskError",
    "AskErrorReason",
    "DecodeError",
    "EnvelopeError",
    "EnvelopeErrorReason",
    "FrameError",
    "FrameErrorReason",
    "FrameTooLarge",
    "HubSuspended",
    "JsonError",
    "LocalProtocolError",
    "NotificationTooLarge",
    "PlaintextTokenRefused",
    "ProtocolError",
    "ProxyClosed",
    "check_positive",
    "check_positive_int",
    "positive",
    "positive_int",
]


def check_positive(name: str, value: float) -> None:
    """Raise :class:`ValueError` unless ``value`` is a positive number (NaN is not)."""
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")


def check_positive_int(name: str, value: int) -> int:
    """``value`` if it is an int of at least 1 (``name`` says what it is in messages).

    :class:`TypeError` for anything that is not an int (a bool is not one),
    :class:`ValueError` for an int below 1.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be at least 1, got {value!r}")
    return value


def positive(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    """:func:`check_positive` as an ``attrs`` validator, naming the field."""
    check_positive(attribute.name, value)


def positive_int(_instance: object, attribute: attrs.Attribute[Any], value: int) -> None:
    """:func:`check_positive_int` as an ``attrs`` validator, naming the field."""
    check_positive_int(attribute.name, value)


class ProtocolError(Exception):
    """Base class of every protocol error this library raises."""


class LocalProtocolError(ProtocolError):
    """The local code asked for something the protocol does not allow.

    For example: sending a notification after the path's error, receiving
    data after end of file, or asking twice at once. It is never raised
    because of what the peer sent: that becomes an event instead.
    """


class NotificationTooLarge(LocalProtocolError):
    """A notification refused for its size: nothing of it was queued or sent.

    :meth:`~.server.hub.Hub.publish` raises it for a notification whose
    message (the tag byte and the JSON) is larger than the hub's
    ``max_frame_size``: ``size`` is the message's size and ``limit`` that
    bound, and the hub goes on. A cluster's broker raises a subclass, for
    a notification whose JSON is over the limit every replica applies.
    """

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(self._describe(size, limit))
        self.size = size
        self.limit = limit

    @staticmethod
    def _describe(size: int, limit: int) -> str:
        """The message of the error, from its ``size`` and ``limit``."""
        return (
            f"a notification of {size} bytes (tag byte and JSON) is larger than the frame "
            f"limit of {limit} bytes: not published"
        )


class HubSuspended(Exception):
    """:meth:`~.server.hub.Hub.subscribe` was called while the hub is suspended.

    ``reason`` is the reason given to :meth:`~.server.hub.Hub.suspend`. A
    server answers the ask as not served for now (``503`` with
    ``Retry-After``) instead of opening a path that would hear nothing.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"the hub is suspended: {reason}")
        self.reason = reason


class PlaintextTokenRefused(ValueError):
    """A bearer token would go over plain HTTP to a host that is not loopback."""


class ProxyClosed(RuntimeError):
    """The proxy was closed: it makes no exchange and no notification ask any more."""


class FrameTooLarge(ProtocolError):
    """Not raised by the decoder: the value it returns for an oversized frame.

    ``length`` is the payload length the frame's prefix declares, ``limit``
    the decoder's ``max_frame_size``.
    """

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"frame of {length} bytes is larger than the limit of {limit} bytes")
        self.length = length
        self.limit = limit

    @property
    def reason(self) -> str:
        """Why a path that met this frame ended: its size and the option that bounds it."""
        return f"a frame of {self.length} bytes is larger than max_frame_size ({self.limit} bytes)"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FrameTooLarge):
            return NotImplemented
        return (self.length, self.limit) == (other.length, other.limit)

    def __hash__(self) -> int:
        return hash((self.length, self.limit))


class DecodeError(ProtocolError, ValueError):
    """Bytes from somewhere else that do not decode.

    ``detail`` is a sentence a person can act on. The subclasses say what
    the bytes were meant to be, and those with a ``reason`` which check
    they failed.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class JsonError(DecodeError):
    """The bytes are not one strict JSON value (see :func:`~.mcp.json.parse`)."""


class FrameErrorReason(enum.Enum):
    """Why a message (``[tag][JSON]``) could not be decoded."""

    #: No bytes at all, so not even a tag.
    EMPTY = "empty"
    #: A tag other than ``0`` (notification) or ``1`` (error).
    UNKNOWN_TAG = "unknown_tag"
    #: The tag was fine but the JSON after it was not a valid body.
    BODY = "body"


class FrameError(DecodeError):
    """A message that does not decode.

    ``reason`` says which of the three failures it is; ``tag`` is set for
    :attr:`FrameErrorReason.UNKNOWN_TAG` (and for ``BODY``, the tag whose
    body failed); ``detail`` is a sentence a person can act on.
    """

    def __init__(self, reason: FrameErrorReason, detail: str, *, tag: int | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.tag = tag

    def __repr__(self) -> str:
        return f"FrameError({self.reason.name}, {self.detail!r}, tag={self.tag!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FrameError):
            return NotImplemented
        return (self.reason, self.detail, self.tag) == (other.reason, other.detail, other.tag)

    def __hash__(self) -> int:
        return hash((self.reason, self.detail, self.tag))


class AskErrorReason(enum.Enum):
    """Why a provider ask or a channel request could not be decoded."""

    #: No bytes at all, so not even a kind or tag.
    EMPTY = "empty"
    #: A kind (provider ask) or tag (channel request) this revision does not define.
    UNKNOWN_TAG = "unknown_tag"
    #: The Postgres connection id was not exactly four bytes.
    CONNECTION_ID = "connection_id"
    #: The JSON params of one of the MCP exchanges did not parse.
    MCP_PARAMS = "mcp_params"


class AskError(DecodeError):
    """A provider ask or an agents-begin channel request that does not decode."""

    def __init__(self, reason: AskErrorReason, detail: str, *, tag: int | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.tag = tag

    def __repr__(self) -> str:
        return f"AskError({self.reason.name}, {self.detail!r}, tag={self.tag!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AskError):
            return NotImplemented
        return (self.reason, self.detail, self.tag) == (other.reason, other.detail, other.tag)

    def __hash__(self) -> int:
        return hash((self.reason, self.detail, self.tag))


class EnvelopeErrorReason(enum.Enum):
    """Why bytes are not an envelope this version can read."""

    #: Fewer than four bytes, or not the magic: other traffic on the channel.
    NOT_AN_ENVELOPE = "not_an_envelope"
    #: The magic, then a version other than :data:`~.envelope.VERSION` and
    #: :data:`~.envelope.AUDIENCE_VERSION`.
    UNKNOWN_VERSION = "unknown_version"
    #: The envelope is over ``max_size``, or a notification over ``max_notification_size``.
    TOO_LARGE = "too_large"
    #: The bytes end inside the header or inside a notification.
    TRUNCATED = "truncated"
    #: The origin id is empty, longer than 64 bytes, or not visible ASCII.
    ORIGIN = "origin"
    #: No notification, or more than ``max_items``.
    COUNT = "count"
    #: The last notification's number would be beyond :data:`~.envelope.MAX_SEQUENCE`.
    SEQUENCE = "sequence"
    #: Bytes after the last notification.
    TRAILING = "trailing"
    #: A notification's bytes are not a notification (``index`` says which).
    NOTIFICATION = "notification"
    #: An audience (version 2) longer than 64 bytes or not visible ASCII, or a
    #: version 2 envelope that names no audience at all (version 1 carries that).
    AUDIENCE = "audience"


class EnvelopeError(DecodeError):
    """Bytes that do not decode as an envelope.

    ``reason`` says which failure it is, ``detail`` is a sentence a person can
    act on, ``index`` the position of the notification at fault (for
    ``NOTIFICATION`` and for a notification that is ``TOO_LARGE``).
    """

    def __init__(
        self, reason: EnvelopeErrorReason, detail: str, *, index: int | None = None
    ) -> None:
        super().__init__(detail)
        self.reason = reason
        self.index = index

    def __repr__(self) -> str:
        return f"EnvelopeError({self.reason.name}, {self.detail!r}, index={self.index!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EnvelopeError):
            return NotImplemented
        return (self.reason, self.detail, self.index) == (other.reason, other.detail, other.index)

    def __hash__(self) -> int:
        return hash((self.reason, self.detail, self.index))
