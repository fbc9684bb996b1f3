"""What a subscriber wants to hear: the :class:`Interest` a hub routes by.

The topics of the MCP server library's notifications page (named after
MCP 2026-07-28's ``SubscriptionFilter``): URIs whose ``resources/updated``
a subscriber wants, three list-changed flags, and the least severe log
message it wants. :class:`~.hub.Hub` indexes subscribers by these; the rule
itself, in one place, is :meth:`Interest.wants`. The routing table is in
:mod:`.hub`'s documentation.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import attrs

from ..mcp.model import LogLevel, Notification

__all__ = [
    "LIST_CHANGED_METHODS",
    "LOG_METHOD",
    "RESOURCE_UPDATED_METHOD",
    "Interest",
]

RESOURCE_UPDATED_METHOD: Final = "notifications/resources/updated"
LOG_METHOD: Final = "notifications/message"
#: The list-changed methods and the :class:`Interest` flag each one needs.
LIST_CHANGED_METHODS: Final = {
    "notifications/resources/list_changed": "resources_list_changed",
    "notifications/tools/list_changed": "tools_list_changed",
    "notifications/prompts/list_changed": "prompts_list_changed",
}


def _uri_set(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, (str, bytes)):
        raise TypeError("resource_subscriptions is a collection of URIs, not one string")
    uris = frozenset(value)
    for uri in uris:
        if not isinstance(uri, str):
            raise TypeError(f"a resource URI is a str, not {type(uri).__name__}")
    return uris


def _log_level(value: LogLevel | str | None) -> LogLevel | None:
    if value is None or isinstance(value, LogLevel):
        return value
    level = LogLevel.from_wire(value)
    if level is None:
        raise ValueError(f"not a log level: {value!r} (debug, info, notice, warning, ...)")
    return level


@attrs.frozen(kw_only=True)
class Interest:
    """What a subscriber wants to hear of the topics a filter can narrow.

    ``resource_subscriptions``: the URIs whose ``resources/updated`` it
    wants (``all_resources``: every URI's, whatever that set holds); the
    three ``*_list_changed`` flags; ``log_level``: the least severe log
    message it wants (a :class:`LogLevel` or its wire name), or
    ``None`` for no log messages. Notifications of other methods are not
    narrowed by an interest (see the module's documentation).
    """

    resource_subscriptions: frozenset[str] = attrs.field(default=frozenset(), converter=_uri_set)
    resources_list_changed: bool = False
    tools_list_changed: bool = False
    prompts_list_changed: bool = False
    log_level: LogLevel | None = attrs.field(default=None, converter=_log_level)
    all_resources: bool = False

    def wants(self, notification: Notification) -> bool:
        """True if a subscriber with this interest receives ``notification``.

        The hub does not call this (it uses its indexes); it states the rule
        in one place, for readers and tests.
        """
        method = notification.method
        params = notification.params or {}
        if method == RESOURCE_UPDATED_METHOD:
            uri = params.get("uri")
            if self.all_resources:
                return True
            return isinstance(uri, str) and uri in self.resource_subscriptions
        flag = LIST_CHANGED_METHODS.get(method)
        if flag is not None:
            wanted: bool = getattr(self, flag)
            return wanted
        if method == LOG_METHOD:
            level = LogLevel.from_wire(params.get("level"))
            return level is not None and self.log_level is not None and level >= self.log_level
        return True
