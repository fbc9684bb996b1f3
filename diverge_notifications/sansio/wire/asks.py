"""The ask codecs: the provider ask and the agents-begin channel request.

Provider ask (the provider notifications page, the body of ``POST /requests``)::

    [kind][payload]     kind 0 list tools, 1 list resources, 2 call tool,
                        3 read resource (payload: MCP params JSON),
                        4 notifications (payload empty; anything there is
                        ignored, as the specification's ``Request::decode`` does)

Agents-begin channel request (the container request page, container-proxy protocol)::

    [tag][payload]      tag 0 Postgres (4-byte connection id), 1-4 the four
                        MCP exchanges (params JSON), 5 MCP notifications
                        (nothing; anything there is ignored)

The MCP params of the four exchanges must be a JSON object or ``null``
(``null`` meaning "no params", as ``Option<…>`` does in the Rust peer).
Exactly which members each exchange needs is MCP's business and is left to
the application: the codec checks only that the payload is strict JSON of
that shape, and keeps its bytes so that a relay forwards them unchanged.
"""

from __future__ import annotations

import enum
from typing import Any, Final

import attrs

from ..errors import AskError, AskErrorReason, JsonError
from ..mcp.json import dumps, parse

__all__ = [
    "Ask",
    "ChannelRequest",
    "ChannelRequestTag",
    "Exchange",
    "decode_ask",
    "decode_channel_request",
    "encode_ask",
    "encode_channel_request",
]


class Exchange(enum.IntEnum):
    """The five MCP exchanges; the value is the provider ask's kind byte."""

    LIST_TOOLS = 0
    LIST_RESOURCES = 1
    CALL_TOOL = 2
    READ_RESOURCE = 3
    NOTIFICATIONS = 4

    @property
    def is_one_shot(self) -> bool:
        """True for the four exchanges answered by one message."""
        return self is not Exchange.NOTIFICATIONS


class ChannelRequestTag(enum.IntEnum):
    """The six tags of the agents-begin channel request (the container request page)."""

    POSTGRES = 0
    MCP_LIST_TOOLS = 1
    MCP_LIST_RESOURCES = 2
    MCP_CALL_TOOL = 3
    MCP_READ_RESOURCE = 4
    MCP_NOTIFICATIONS = 5


_EXCHANGE_BY_TAG: Final = {
    ChannelRequestTag.MCP_LIST_TOOLS: Exchange.LIST_TOOLS,
    ChannelRequestTag.MCP_LIST_RESOURCES: Exchange.LIST_RESOURCES,
    ChannelRequestTag.MCP_CALL_TOOL: Exchange.CALL_TOOL,
    ChannelRequestTag.MCP_READ_RESOURCE: Exchange.READ_RESOURCE,
    ChannelRequestTag.MCP_NOTIFICATIONS: Exchange.NOTIFICATIONS,
}
_TAG_BY_EXCHANGE: Final = {exchange: tag for tag, exchange in _EXCHANGE_BY_TAG.items()}

_POSTGRES_ID_LENGTH: Final = 4


def _params_field_check(_instance: object, _attribute: object, value: Any) -> None:
    if value is not None and not isinstance(value, dict):
        raise TypeError(f"params must be a dict or None, not {type(value).__name__}")


@attrs.frozen(kw_only=True)
class Ask:
    """A provider ask: which exchange, and its MCP params.

    ``params`` is the params object (``None`` for "no params", and always
    ``None`` for :attr:`Exchange.NOTIFICATIONS`). A decoded ask keeps the
    payload bytes (``raw_params``, not compared) so that a relay can pass
    them on unchanged. ``audience`` is not on the wire: a server that
    accepts several tokens sets it to the audience of the token the ask
    carried (:func:`~.http.audience_of`), so that what answers the ask knows
    whose it is; ``None`` otherwise.
    """

    exchange: Exchange = attrs.field(converter=Exchange)
    params: dict[str, Any] | None = attrs.field(default=None, validator=_params_field_check)
    raw_params: bytes | None = attrs.field(default=None, eq=False, repr=False)
    audience: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.exchange is Exchange.NOTIFICATIONS and self.params is not None:
            raise ValueError("the notifications ask carries no params")


@attrs.frozen(kw_only=True)
class ChannelRequest:
    """An agents-begin channel request (the container request page).

    ``tag`` says which; ``connection_id`` is the 4-byte id of a Postgres
    request (and ``None`` otherwise); ``params`` the MCP params of tags
    1-4, as for :class:`Ask`.
    """

    tag: ChannelRequestTag = attrs.field(converter=ChannelRequestTag)
    connection_id: bytes | None = None
    params: dict[str, Any] | None = attrs.field(default=None, validator=_params_field_check)
    raw_params: bytes | None = attrs.field(default=None, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.tag is ChannelRequestTag.POSTGRES:
            if self.connection_id is None or len(self.connection_id) != _POSTGRES_ID_LENGTH:
                raise ValueError("a Postgres channel request needs a 4-byte connection_id")
            if self.params is not None:
                raise ValueError("a Postgres channel request carries no params")
        elif self.connection_id is not None:
            raise ValueError("only a Postgres channel request carries a connection_id")
        if self.tag is ChannelRequestTag.MCP_NOTIFICATIONS and self.params is not None:
            raise ValueError("the notifications channel request carries no params")

    @property
    def exchange(self) -> Exchange | None:
        """The MCP exchange this asks for, or ``None`` for Postgres."""
        return _EXCHANGE_BY_TAG.get(self.tag)


def _decode_params(payload: memoryview, tag: int) -> tuple[dict[str, Any] | None, bytes]:
    raw = bytes(payload)
    try:
        params = parse(raw)
    except JsonError as error:
        raise AskError(
            AskErrorReason.MCP_PARAMS, f"mcp request params did not parse: {error}", tag=tag
        ) from None
    if params is not None and not isinstance(params, dict):
        raise AskError(
            AskErrorReason.MCP_PARAMS,
            "mcp request params did not parse: expected a JSON object or null",
            tag=tag,
        )
    return params, raw


def _encode_params(params: dict[str, Any] | None, raw: bytes | None) -> bytes:
    if raw is not None:
        return raw
    return dumps(params)


def decode_ask(data: bytes | bytearray | memoryview) -> Ask:
    """Decode a provider ask.

    Raises :class:`AskError`: ``EMPTY``, ``UNKNOWN_TAG`` or ``MCP_PARAMS``.
    """
    view = memoryview(data)
    if len(view) == 0:
        raise AskError(AskErrorReason.EMPTY, "ask is empty: no kind byte")
    kind = view[0]
    if kind > Exchange.NOTIFICATIONS:
        raise AskError(
            AskErrorReason.UNKNOWN_TAG, f"unknown ask kind {kind} (kinds are 0 to 4)", tag=kind
        )
    exchange = Exchange(kind)
    if exchange is Exchange.NOTIFICATIONS:
        return Ask(exchange=exchange)
    params, raw = _decode_params(view[1:], kind)
    return Ask(exchange=exchange, params=params, raw_params=raw)


def encode_ask(ask: Ask) -> bytes:
    """Encode a provider ask; the inverse of :func:`decode_ask`."""
    if ask.exchange is Exchange.NOTIFICATIONS:
        return bytes((Exchange.NOTIFICATIONS,))
    return bytes((ask.exchange,)) + _encode_params(ask.params, ask.raw_params)


def decode_channel_request(data: bytes | bytearray | memoryview) -> ChannelRequest:
    """Decode an agents-begin channel request, or raise :class:`AskError`.

    The four failures are the container request page's: ``EMPTY``, ``UNKNOWN_TAG`` (with the
    tag), ``CONNECTION_ID`` (the Postgres id was not four bytes) and
    ``MCP_PARAMS`` (the params JSON did not parse).
    """
    view = memoryview(data)
    if len(view) == 0:
        raise AskError(AskErrorReason.EMPTY, "agents begin channel request frame is empty")
    value = view[0]
    if value > ChannelRequestTag.MCP_NOTIFICATIONS:
        raise AskError(
            AskErrorReason.UNKNOWN_TAG,
            f"unknown agents begin channel request tag {value}",
            tag=value,
        )
    tag = ChannelRequestTag(value)
    rest = view[1:]
    if tag is ChannelRequestTag.POSTGRES:
        if len(rest) != _POSTGRES_ID_LENGTH:
            raise AskError(
                AskErrorReason.CONNECTION_ID,
                f"postgres connection id must be 4 bytes, not {len(rest)}",
                tag=value,
            )
        return ChannelRequest(tag=tag, connection_id=bytes(rest))
    if tag is ChannelRequestTag.MCP_NOTIFICATIONS:
        return ChannelRequest(tag=tag)
    params, raw = _decode_params(rest, value)
    return ChannelRequest(tag=tag, params=params, raw_params=raw)


def encode_channel_request(request: ChannelRequest) -> bytes:
    """Encode an agents-begin channel request; the inverse of :func:`decode_channel_request`."""
    head = bytes((request.tag,))
    if request.tag is ChannelRequestTag.POSTGRES:
        assert request.connection_id is not None  # guaranteed by the constructor
        return head + request.connection_id
    if request.tag is ChannelRequestTag.MCP_NOTIFICATIONS:
        return head
    return head + _encode_params(request.params, request.raw_params)


def channel_request_for(exchange: Exchange, params: dict[str, Any] | None = None) -> ChannelRequest:
    """The channel request asking for ``exchange`` (tag = kind + 1)."""
    return ChannelRequest(tag=_TAG_BY_EXCHANGE[exchange], params=params)
