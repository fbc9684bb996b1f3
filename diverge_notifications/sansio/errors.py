"""Exceptions raised by the sans-IO core.

Two families, as in h11: :class:`LocalProtocolError` is raised when *this*
side's code asks for something the protocol forbids (a bug in the caller);
the decoding errors (:class:`FrameError`, :class:`AskError`) describe bytes
that came from somewhere else and are always declared, never a stray
``ValueError`` or ``RecursionError``.
"""

from __future__ import annotations

import enum

__all__ = [
    "AskError",
    "AskErrorReason",
    "FrameError",
    "FrameErrorReason",
    "LocalProtocolError",
    "ProtocolError",
]


class ProtocolError(Exception):
    """Base class of every protocol error this library raises."""


class LocalProtocolError(ProtocolError):
    """The local code asked for something the protocol does not allow.

    For example: sending a notification after the path's error, receiving
    data after end of file, or asking twice at once. It is never raised
    because of what the peer sent: that becomes an event instead.
    """


class FrameErrorReason(enum.Enum):
    """Why a message (``[tag][JSON]``) could not be decoded."""

    #: No bytes at all, so not even a tag.
    EMPTY = "empty"
    #: A tag other than ``0`` (notification) or ``1`` (error).
    UNKNOWN_TAG = "unknown_tag"
    #: The tag was fine but the JSON after it was not a valid body.
    BODY = "body"


class FrameError(ProtocolError, ValueError):
    """A message that does not decode.

    ``reason`` says which of the three failures it is; ``tag`` is set for
    :attr:`FrameErrorReason.UNKNOWN_TAG` (and for ``BODY``, the tag whose
    body failed); ``detail`` is a sentence a person can act on.
    """

    def __init__(self, reason: FrameErrorReason, detail: str, *, tag: int | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
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


class AskError(ProtocolError, ValueError):
    """A provider ask or an agents-begin channel request that does not decode."""

    def __init__(self, reason: AskErrorReason, detail: str, *, tag: int | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.tag = tag

    def __repr__(self) -> str:
        return f"AskError({self.reason.name}, {self.detail!r}, tag={self.tag!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AskError):
            return NotImplemented
        return (self.reason, self.detail, self.tag) == (other.reason, other.detail, other.tag)

    def __hash__(self) -> int:
        return hash((self.reason, self.detail, self.tag))
