"""What a notification can be: its kinds by method, log levels, error codes.

The vocabulary of the MCP model (:mod:`.model`) and of its typed views
(:mod:`.views`): the known methods (the union of MCP revisions 2024-11-05 to
2026-07-28 and rmcp 3.x), the eight RFC 5424 log levels as MCP spells them,
task statuses, and the well-known JSON-RPC error codes.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "METHODS",
    "TASK_STATUSES",
    "ErrorCode",
    "LogLevel",
    "NotificationKind",
]

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
INT32_MIN: Final = -(2**31)
INT32_MAX: Final = 2**31 - 1


class NotificationKind(enum.Enum):
    """What a notification is, decided by its ``method`` and the fit of its params.

    The value is the member name in lower case, which is how the command
    line prints a kind.
    """

    CANCELLED = "cancelled"
    PROGRESS = "progress"
    LOGGING_MESSAGE = "logging_message"
    RESOURCE_UPDATED = "resource_updated"
    RESOURCE_LIST_CHANGED = "resource_list_changed"
    TOOL_LIST_CHANGED = "tool_list_changed"
    PROMPT_LIST_CHANGED = "prompt_list_changed"
    ELICITATION_COMPLETE = "elicitation_complete"
    TASK_STATUS = "task_status"
    SUBSCRIPTIONS_ACKNOWLEDGED = "subscriptions_acknowledged"
    CUSTOM = "custom"


#: Every method a known kind answers to, across MCP 2024-11-05 … 2026-07-28
#: and rmcp 3.x (which spells the task notification ``notifications/tasks``).
METHODS: Final[Mapping[str, NotificationKind]] = {
    "notifications/cancelled": NotificationKind.CANCELLED,
    "notifications/progress": NotificationKind.PROGRESS,
    "notifications/message": NotificationKind.LOGGING_MESSAGE,
    "notifications/resources/updated": NotificationKind.RESOURCE_UPDATED,
    "notifications/resources/list_changed": NotificationKind.RESOURCE_LIST_CHANGED,
    "notifications/tools/list_changed": NotificationKind.TOOL_LIST_CHANGED,
    "notifications/prompts/list_changed": NotificationKind.PROMPT_LIST_CHANGED,
    "notifications/elicitation/complete": NotificationKind.ELICITATION_COMPLETE,
    "notifications/tasks/status": NotificationKind.TASK_STATUS,
    "notifications/tasks": NotificationKind.TASK_STATUS,
    "notifications/subscriptions/acknowledged": NotificationKind.SUBSCRIPTIONS_ACKNOWLEDGED,
}


class LogLevel(enum.IntEnum):
    """The eight RFC 5424 severities, ordered from least to most severe.

    On the wire a level is its lower-case name, matched case-sensitively
    (``"INFO"`` is not a level).
    """

    DEBUG = 0
    INFO = 1
    NOTICE = 2
    WARNING = 3
    ERROR = 4
    CRITICAL = 5
    ALERT = 6
    EMERGENCY = 7

    @property
    def wire(self) -> str:
        """The level as written in JSON, e.g. ``"warning"``."""
        return self.name.lower()

    @classmethod
    def from_wire(cls, value: object) -> LogLevel | None:
        """The level named exactly ``value``, or ``None`` if it names none."""
        if isinstance(value, str):
            return _LEVELS_BY_WIRE.get(value)
        return None


_LEVELS_BY_WIRE: Final[Mapping[str, LogLevel]] = {level.wire: level for level in LogLevel}

#: The statuses MCP defines for a task.
TASK_STATUSES: Final = frozenset({"working", "input_required", "completed", "failed", "cancelled"})


class ErrorCode(enum.IntEnum):
    """The well-known JSON-RPC and MCP error codes."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    RESOURCE_NOT_FOUND = -32002
