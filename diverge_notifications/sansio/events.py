"""The events a notification path produces, and the ``NEED_DATA`` marker.

Each path produces, in order: :class:`StreamOpened`; any number of
:class:`NotificationReceived` and :class:`MessageRejected`; exactly one
terminal event (:class:`StreamErrored`, :class:`NotServed`,
:class:`StreamEnded` or :class:`StreamBroken`); then exactly one
:class:`ReaskNeeded`. A one-shot exchange (kinds 0-3) produces
:class:`ResultReceived` then :class:`StreamEnded`, or one other terminal
event, and no :class:`ReaskNeeded`.
"""

from __future__ import annotations

import enum
from collections import deque
from itertools import repeat
from typing import Any, Final, Literal

import attrs

from .errors import FrameError
from .mcp.model import ErrorData, Notification, NotificationKind
from .wire.asks import Ask

__all__ = [
    "NEED_DATA",
    "TERMINAL_EVENTS",
    "AskRefused",
    "AttemptsExhausted",
    "ConnectionClosed",
    "ConnectionFailed",
    "Event",
    "ExchangeAsked",
    "HealthAsked",
    "MessageRejected",
    "NeedData",
    "NotServed",
    "NotificationReceived",
    "NotificationsAsked",
    "ReaskNeeded",
    "ResultReceived",
    "RetryScheduled",
    "StreamBroken",
    "StreamEnded",
    "StreamErrored",
    "StreamOpened",
    "TerminalEvent",
]


class NeedData(enum.Enum):
    """The type of :data:`NEED_DATA`."""

    NEED_DATA = "NEED_DATA"

    def __repr__(self) -> str:
        return "NEED_DATA"


#: Returned by ``next_event()`` when no event can be produced until more
#: bytes (or end of file) are received.
NEED_DATA: Final = NeedData.NEED_DATA


@attrs.frozen(kw_only=True)
class Event:
    """Base class of every event."""


@attrs.frozen(kw_only=True)
class StreamOpened(Event):
    """The server accepted the ask; the path is open on ``channel``."""

    channel: str


@attrs.frozen(kw_only=True)
class NotificationReceived(Event):
    """One notification arrived, exactly as the server sent it."""

    notification: Notification

    @property
    def kind(self) -> NotificationKind:
        """The notification's kind (a shortcut)."""
        return self.notification.kind


_new_event: Final = object.__new__
_set_notification: Final = NotificationReceived.__dict__["notification"].__set__


def _check_built_in_place() -> None:
    # What attrs generates for NotificationReceived.__init__ is one
    # object.__setattr__ of its one field: the slot's own setter, which is all
    # that notification_received() calls. That holds while the field has no
    # default, converter or validator and the class no pre- or post-init hook.
    fields = attrs.fields(NotificationReceived)
    default: object = fields[0].default
    plain = (
        [field.name for field in fields] == ["notification"]
        and default is attrs.NOTHING
        and fields[0].converter is None
        and fields[0].validator is None
        and not hasattr(NotificationReceived, "__attrs_pre_init__")
        and not hasattr(NotificationReceived, "__attrs_post_init__")
        and "__dict__" not in dir(NotificationReceived)
    )
    if not plain:  # pragma: no cover - a guard on a change to the class
        raise RuntimeError("NotificationReceived can no longer be built in place")


_check_built_in_place()


def notification_received(notification: Notification) -> NotificationReceived:
    """``NotificationReceived(notification=notification)``, for the receive path.

    The same frozen event, with its field set as attrs' ``__init__`` sets it
    but without that call, which costs as much as the rest of a short
    message's bookkeeping (checked at import: see ``_check_built_in_place``).
    """
    event: NotificationReceived = _new_event(NotificationReceived)
    _set_notification(event, notification)
    return event


def notifications_received(notifications: list[Notification]) -> list[NotificationReceived]:
    """:func:`notification_received` of each notification, in one call."""
    # C-level loops: the events made, then each one's field set.
    events: list[NotificationReceived] = list(
        map(_new_event, repeat(NotificationReceived, len(notifications)))
    )
    deque(map(_set_notification, events, notifications), 0)
    return events


@attrs.frozen(kw_only=True)
class MessageRejected(Event):
    """One message did not decode; the path goes on.

    ``payload`` is the whole message as received (tag byte included), so
    nothing is lost; ``error`` says why it was rejected.
    """

    error: FrameError
    payload: bytes = attrs.field(repr=lambda payload: f"<{len(payload)} bytes>")


@attrs.frozen(kw_only=True)
class ResultReceived(Event):
    """The answer of a one-shot exchange (kinds 0-3): the result object."""

    result: Any
    raw: bytes = attrs.field(eq=False, repr=False)


@attrs.frozen(kw_only=True)
class StreamErrored(Event):
    """Terminal: the server's error message; nothing follows it."""

    error: ErrorData


@attrs.frozen(kw_only=True)
class NotServed(Event):
    """Terminal: the ask was not served.

    Either a clean end with no message before it (``status`` is the
    answer's 2xx status, or ``None`` at payload level), or a non-2xx
    answer (``status`` is that status). ``reason`` is for people.
    """

    status: int | None
    reason: str


@attrs.frozen(kw_only=True)
class StreamEnded(Event):
    """Terminal: a clean end after one or more messages."""


@attrs.frozen(kw_only=True)
class StreamBroken(Event):
    """Terminal: an abrupt end or a violation; ``reason`` says which, for people."""

    reason: str


@attrs.frozen(kw_only=True)
class ReaskNeeded(Event):
    """The path is over: ask for notifications again (after the policy's delay)."""


TerminalEvent = StreamErrored | NotServed | StreamEnded | StreamBroken
#: The four terminal event classes.
TERMINAL_EVENTS: Final = (StreamErrored, NotServed, StreamEnded, StreamBroken)

#: What ``next_event()`` returns.
EventOrNeedData = Event | Literal[NeedData.NEED_DATA]


# --- the server's side of an ask -------------------------------------------------


@attrs.frozen(kw_only=True)
class NotificationsAsked(Event):
    """A valid kind-4 ask arrived; write the path (``start_path`` ...) or ``decline``.

    ``audience`` names the token the ask carried when the server accepts
    several (:func:`~.wire.http.audience_of`), else ``None``.
    """

    channel: str
    audience: str | None = None


@attrs.frozen(kw_only=True)
class ExchangeAsked(Event):
    """A valid kind 0-3 ask arrived; ``answer``, ``answer_error`` or ``decline`` it."""

    ask: Ask
    channel: str


@attrs.frozen(kw_only=True)
class AskRefused(Event):
    """The request was not a valid ask.

    The HTTP error response (``status``, a short ``text/plain`` body saying
    ``reason``, ``Connection: close``) is already queued in
    :meth:`ServerConnection.data_to_send`; send it, then close the connection.
    """

    status: int
    reason: str


@attrs.frozen(kw_only=True)
class HealthAsked(Event):
    """A health check arrived (``GET /healthz`` or ``GET /readyz``, no token needed).

    ``check`` is ``"healthz"`` or ``"readyz"``; answer it with
    ``ServerConnection.answer_health`` (the reason the server would not
    serve an ask now, or ``None``), then close the connection.
    """

    check: str


@attrs.frozen(kw_only=True)
class ConnectionClosed(Event):
    """The connection is over: the peer closed it, or this side's answer is complete.

    Send what is left (``data_to_send()`` and any bytes a write returned),
    then close the socket. Produced exactly once per connection.
    """


# --- the proxy policy and the listener's loop ---------------------------------------


@attrs.frozen(kw_only=True)
class RetryScheduled(Event):
    """A notification ask ended; the next one may start after ``delay`` seconds.

    ``attempt`` is the number the next ask has in the current run of
    unhealthy ends: 1 after a healthy path, ``n + 1`` after ``n`` unhealthy
    ends in a row. With ``max_attempts`` set it never exceeds that limit.
    """

    delay: float
    attempt: int


@attrs.frozen(kw_only=True)
class AttemptsExhausted(Event):
    """``attempts`` unhealthy ends in a row reached ``max_attempts``: no more asks."""

    attempts: int


@attrs.frozen(kw_only=True)
class ConnectionFailed(Event):
    """No connection could be made for an ask; ``reason`` says why, for people.

    The policy's :class:`RetryScheduled` (or :class:`AttemptsExhausted`)
    follows it, as after any other end of an ask.
    """

    reason: str
