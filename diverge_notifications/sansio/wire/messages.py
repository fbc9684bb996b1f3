"""The message codec: ``[tag][JSON]``, the payload of one frame.

Tag ``0`` is a notification and tag ``1`` an error (``ErrorData``), the last
message of a path. This is the provider notifications page's ``Frame``; the name *message* is used
here because *frame* is the length-prefixed unit on the byte stream.

The tags are defined here once, as numbers and as the bytes that start a
message; every writer (:func:`encode_message`, the server's chunks, the
container writer) spells them with these names. :data:`pack_frame_head`
gives the first bytes of the frame that holds one message, so that a writer
that frames messages itself (the server, on its hot path) writes exactly
what :func:`~.framing.encode_frame` of :func:`encode_message` would.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from operator import itemgetter
from typing import Any, Final

from ..errors import FrameError, FrameErrorReason, JsonError, LocalProtocolError
from ..mcp.json import dumps, parse
from ..mcp.model import ErrorData, Notification
from .framing import LENGTH_FORMAT

__all__ = [
    "ERROR_TAG",
    "ERROR_TAG_BYTE",
    "NOTIFICATION_TAG",
    "NOTIFICATION_TAG_BYTE",
    "Message",
    "NotificationLike",
    "decode_message",
    "decode_notifications",
    "encode_message",
    "pack_frame_head",
    "result_json",
    "to_error",
    "to_notification",
]

#: Tag of a message carrying a notification.
NOTIFICATION_TAG: Final = 0
#: Tag of a message carrying an error, the last message of a path.
ERROR_TAG: Final = 1
#: The byte that starts a notification's message.
NOTIFICATION_TAG_BYTE: Final = bytes((NOTIFICATION_TAG,))
#: The byte that starts an error's message.
ERROR_TAG_BYTE: Final = bytes((ERROR_TAG,))

#: ``pack_frame_head(payload_size, tag)``: the first bytes of the frame that
#: holds one message, its length prefix (``payload_size`` counts the tag
#: byte: the JSON's length plus one) and then the tag. The JSON follows.
pack_frame_head: Final = struct.Struct(LENGTH_FORMAT + "B").pack

Message = Notification | ErrorData

_decode_notification: Final = Notification._decode
_decode_notifications: Final = Notification._decode_each
_first_byte: Final = itemgetter(0)
_ONLY_BYTES: Final = {bytes}

#: What a notification may be given as to a writer: an object, a mapping, or raw JSON bytes.
NotificationLike = Notification | Mapping[str, Any] | bytes | bytearray | memoryview


def decode_message(data: bytes | bytearray | memoryview) -> Message:
    """Decode one message.

    Returns a :class:`Notification` (tag ``0``) or an :class:`ErrorData`
    (tag ``1``). For any other input raises :class:`FrameError`, whose
    ``reason`` is ``EMPTY``, ``UNKNOWN_TAG`` (with ``tag``) or ``BODY`` (with
    a ``detail`` saying what is wrong with the JSON). Nothing else escapes.
    """
    if type(data) is bytes:
        if data and data[0] == NOTIFICATION_TAG:
            # The common case first: the JSON is read in place, after the tag.
            return _decode_notification(data, True)
        if not data:
            raise FrameError(FrameErrorReason.EMPTY, "message is empty: no tag byte")
        tag = data[0]
        body = data[1:]
    else:
        view = memoryview(data)
        if len(view) == 0:
            raise FrameError(FrameErrorReason.EMPTY, "message is empty: no tag byte")
        tag = view[0]
        body = view[1:].tobytes()
    if tag == NOTIFICATION_TAG:
        return Notification.from_bytes(body)
    if tag == ERROR_TAG:
        return ErrorData.from_bytes(body)
    raise FrameError(
        FrameErrorReason.UNKNOWN_TAG,
        f"unknown message tag {tag} (0 is a notification, 1 an error)",
        tag=tag,
    )


def decode_notifications(payloads: list[bytes]) -> list[Notification] | None:
    """``[decode_message(payload) for payload in payloads]``, when every one is a notification.

    For a run of short notifications (the common case on a busy path) this
    reads them all at once, for less per message; it returns ``None`` when
    any payload is something else (an error, another tag, one that does not
    decode, one too long to take this way), and then decoding them one by
    one with :func:`decode_message` gives each its own result or error.
    """
    # The JSON is read first: it refuses long messages at the first look.
    notifications = _decode_notifications(payloads)
    if notifications is None or set(map(type, payloads)) != _ONLY_BYTES:
        return None  # (a notification keeps the bytes it came from, as bytes)
    # Each payload held a value after its first byte, so it has one.
    tags = bytes(map(_first_byte, payloads))
    if tags.count(NOTIFICATION_TAG_BYTE) != len(tags):
        return None
    return notifications


def encode_message(message: Message) -> bytes:
    """Encode a message; the inverse of :func:`decode_message`.

    A message that was decoded is re-encoded from the bytes it came from.
    """
    if isinstance(message, Notification):
        return NOTIFICATION_TAG_BYTE + message.to_bytes()
    if isinstance(message, ErrorData):
        return ERROR_TAG_BYTE + message.to_bytes()
    raise TypeError(f"expected a Notification or ErrorData, not {type(message).__name__}")


def to_notification(item: NotificationLike) -> Notification:
    """``item`` as a :class:`Notification`, for a writer about to send it (strict).

    Unlike the hub's lenient :func:`~..server.hub.as_notification`, which returns
    ``None`` for what is not a notification, this raises: a writer given
    something else is the caller's mistake.

    A :class:`Notification` is returned as it is; a mapping is encoded as
    compact JSON; raw JSON bytes are checked to decode as a notification and
    kept unchanged (its :meth:`~Notification.to_bytes` gives them back).
    Raises :class:`LocalProtocolError` if ``item`` is not a notification and
    :class:`TypeError` if it is none of these types.
    """
    if isinstance(item, Notification):
        return item
    try:
        if isinstance(item, (bytes, bytearray, memoryview)):
            return Notification.from_bytes(item)
        if isinstance(item, Mapping):
            return Notification.from_json(item)
    except FrameError as error:
        raise LocalProtocolError(f"not a notification: {error.detail}") from None
    raise TypeError(f"expected a Notification, a mapping or JSON bytes, not {type(item).__name__}")


def to_error(error: ErrorData) -> ErrorData:
    """``error``, checked to be an :class:`ErrorData` (else :class:`TypeError`)."""
    if not isinstance(error, ErrorData):
        raise TypeError(f"expected an ErrorData, not {type(error).__name__}")
    return error


def result_json(result: Mapping[str, Any] | bytes) -> bytes:
    """The JSON bytes of a one-shot result, for a writer about to send it (strict).

    ``result`` is a JSON object: a mapping (encoded as compact JSON and
    checked as the proxy would read it) or raw JSON bytes (checked, then
    kept unchanged). Raises :class:`LocalProtocolError` if it is not one and
    :class:`TypeError` if it is neither of these types.
    """
    if isinstance(result, (bytes, bytearray, memoryview)):
        raw = bytes(result)
    elif isinstance(result, Mapping):
        try:
            raw = dumps(dict(result))
        except (TypeError, ValueError) as error:
            raise LocalProtocolError(f"the result is not JSON-encodable: {error}") from None
    else:
        raise TypeError(f"expected a mapping or JSON bytes, not {type(result).__name__}")
    try:
        # An encoded mapping is read back too: too deep or too large a
        # number is refused here exactly as the proxy would refuse it.
        value = parse(raw)
    except JsonError as error:
        raise LocalProtocolError(f"the result is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise LocalProtocolError("the result must be a JSON object")
    return raw
