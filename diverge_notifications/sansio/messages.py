"""The message codec: ``[tag][JSON]``, the payload of one frame.

Tag ``0`` is a notification and tag ``1`` an error (``ErrorData``), the last
message of a path. This is seed 000's ``Frame``; the name *message* is used
here because *frame* is the length-prefixed unit on the byte stream.
"""

from __future__ import annotations

from typing import Final

from ._errors import FrameError, FrameErrorReason
from .mcp import ErrorData, Notification

__all__ = ["ERROR_TAG", "NOTIFICATION_TAG", "Message", "decode_message", "encode_message"]

#: Tag of a message carrying a notification.
NOTIFICATION_TAG: Final = 0
#: Tag of a message carrying an error, the last message of a path.
ERROR_TAG: Final = 1

Message = Notification | ErrorData


def decode_message(data: bytes | bytearray | memoryview) -> Message:
    """Decode one message.

    Returns a :class:`Notification` (tag ``0``) or an :class:`ErrorData`
    (tag ``1``). For any other input raises :class:`FrameError`, whose
    ``reason`` is ``EMPTY``, ``UNKNOWN_TAG`` (with ``tag``) or ``BODY`` (with
    a ``detail`` saying what is wrong with the JSON). Nothing else escapes.
    """
    if type(data) is bytes:
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


def encode_message(message: Message) -> bytes:
    """Encode a message; the inverse of :func:`decode_message`.

    A message that was decoded is re-encoded from the bytes it came from.
    """
    if isinstance(message, Notification):
        return b"\x00" + message.to_bytes()
    if isinstance(message, ErrorData):
        return b"\x01" + message.to_bytes()
    raise TypeError(f"expected a Notification or ErrorData, not {type(message).__name__}")
