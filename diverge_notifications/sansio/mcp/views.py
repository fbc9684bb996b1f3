"""Typed views of the known notifications, and the rule that gives one.

A :class:`~.model.Notification` of a known method whose params fit that
method's shape has a view (:attr:`~.model.Notification.view`); one whose params
do not fit has none and is a custom notification, never a failure
(classification as the Rust peer, rmcp, does it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from .kinds import INT64_MAX, INT64_MIN, TASK_STATUSES, LogLevel, NotificationKind

__all__ = [
    "KIND_BY_VIEW",
    "Cancelled",
    "ElicitationComplete",
    "ListChanged",
    "LogMessage",
    "NotificationView",
    "Progress",
    "ResourceUpdated",
    "SubscriptionsAcknowledged",
    "TaskStatus",
    "is_int",
    "view_of",
]


@attrs.frozen(kw_only=True)
class Cancelled:
    """``notifications/cancelled``: a request the server gave up on."""

    request_id: int | str | None
    reason: str | None


@attrs.frozen(kw_only=True)
class Progress:
    """``notifications/progress``: how far along a request is."""

    token: int | str
    progress: int | float
    total: int | float | None
    message: str | None


@attrs.frozen(kw_only=True)
class LogMessage:
    """``notifications/message``: one log record."""

    level: LogLevel
    logger: str | None
    data: Any


@attrs.frozen(kw_only=True)
class ResourceUpdated:
    """``notifications/resources/updated``: the resource at ``uri`` changed."""

    uri: str


@attrs.frozen(kw_only=True)
class ListChanged:
    """One of the three ``…/list_changed`` notifications; ``kind`` says which."""

    kind: NotificationKind


@attrs.frozen(kw_only=True)
class ElicitationComplete:
    """``notifications/elicitation/complete``: an out-of-band elicitation finished."""

    elicitation_id: str


@attrs.frozen(kw_only=True)
class TaskStatus:
    """``notifications/tasks/status`` (or rmcp's ``notifications/tasks``)."""

    task_id: str
    status: str
    status_message: str | None


@attrs.frozen(kw_only=True)
class SubscriptionsAcknowledged:
    """``notifications/subscriptions/acknowledged``: what a listen request was granted.

    ``notifications`` is the ``SubscriptionFilter`` object as sent.
    """

    notifications: Mapping[str, Any]


NotificationView = (
    Cancelled
    | Progress
    | LogMessage
    | ResourceUpdated
    | ListChanged
    | ElicitationComplete
    | TaskStatus
    | SubscriptionsAcknowledged
)


def is_int(value: object, low: int, high: int) -> bool:
    return type(value) is int and low <= value <= high


def _is_number(value: object) -> bool:
    return type(value) is int or type(value) is float


def _optional_str(params: Mapping[str, Any], key: str) -> tuple[bool, str | None]:
    value = params.get(key)
    if value is None or isinstance(value, str):
        return True, value
    return False, None


def _optional_number(params: Mapping[str, Any], key: str) -> tuple[bool, int | float | None]:
    value = params.get(key)
    if value is None or _is_number(value):
        return True, value
    return False, None


def view_of(kind: NotificationKind, params: Any) -> NotificationView | None:
    """The typed view of ``params`` for ``kind``, or ``None`` if they do not fit."""
    if kind in (
        NotificationKind.RESOURCE_LIST_CHANGED,
        NotificationKind.TOOL_LIST_CHANGED,
        NotificationKind.PROMPT_LIST_CHANGED,
    ):
        # No params needed: absent, null, {} and {"_meta": …} all fit.
        return ListChanged(kind=kind)
    if not isinstance(params, dict):
        return None
    if kind is NotificationKind.PROGRESS:
        token = params.get("progressToken")
        progress = params.get("progress")
        if not (is_int(token, INT64_MIN, INT64_MAX) or isinstance(token, str)):
            return None
        if not _is_number(progress):
            return None
        assert isinstance(token, (int, str)) and isinstance(progress, (int, float))
        total_ok, total = _optional_number(params, "total")
        message_ok, message = _optional_str(params, "message")
        if not (total_ok and message_ok):
            return None
        return Progress(token=token, progress=progress, total=total, message=message)
    if kind is NotificationKind.LOGGING_MESSAGE:
        level = LogLevel.from_wire(params.get("level"))
        logger_ok, logger = _optional_str(params, "logger")
        if level is None or not logger_ok or "data" not in params:
            return None
        return LogMessage(level=level, logger=logger, data=params["data"])
    if kind is NotificationKind.RESOURCE_UPDATED:
        uri = params.get("uri")
        return ResourceUpdated(uri=uri) if isinstance(uri, str) else None
    if kind is NotificationKind.CANCELLED:
        request_id = params.get("requestId")
        if not (
            request_id is None
            or isinstance(request_id, str)
            or is_int(request_id, INT64_MIN, INT64_MAX)
        ):
            return None
        reason_ok, reason = _optional_str(params, "reason")
        return Cancelled(request_id=request_id, reason=reason) if reason_ok else None
    if kind is NotificationKind.ELICITATION_COMPLETE:
        elicitation_id = params.get("elicitationId")
        if isinstance(elicitation_id, str):
            return ElicitationComplete(elicitation_id=elicitation_id)
        return None
    if kind is NotificationKind.TASK_STATUS:
        task_id = params.get("taskId")
        status = params.get("status")
        message_ok, status_message = _optional_str(params, "statusMessage")
        if isinstance(task_id, str) and status in TASK_STATUSES and message_ok:
            return TaskStatus(task_id=task_id, status=status, status_message=status_message)
        return None
    if kind is NotificationKind.SUBSCRIPTIONS_ACKNOWLEDGED:
        granted = params.get("notifications")
        if isinstance(granted, dict):
            return SubscriptionsAcknowledged(notifications=granted)
        return None
    return None  # pragma: no cover - every kind is handled above


#: The kind each view stands for (the list-changed view carries its own).
KIND_BY_VIEW: Final[Mapping[type, NotificationKind]] = {
    Cancelled: NotificationKind.CANCELLED,
    Progress: NotificationKind.PROGRESS,
    LogMessage: NotificationKind.LOGGING_MESSAGE,
    ResourceUpdated: NotificationKind.RESOURCE_UPDATED,
    ElicitationComplete: NotificationKind.ELICITATION_COMPLETE,
    TaskStatus: NotificationKind.TASK_STATUS,
    SubscriptionsAcknowledged: NotificationKind.SUBSCRIPTIONS_ACKNOWLEDGED,
}
