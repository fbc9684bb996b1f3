"""Asking an MCP server for everything there is to hear, in either revision.

:func:`listen` is MCP 2026-07-28's way: one ``subscriptions/listen`` stream.
:func:`subscribe` is the earlier revisions' way: ``logging/setLevel`` and
``resources/subscribe``, with the server's own stream carrying the rest.
What the server then sends is relayed off the wire by the transport; these
only ask.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Final

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError

from ._link import Link

__all__ = ["LISTEN", "MAX_PAGES", "SUBSCRIBE", "Flag", "list_resource_uris", "listen", "subscribe"]

logger = logging.getLogger("diverge_notifications.bridge")

#: Pages of one listing read at most from one server.
MAX_PAGES: Final = 100
#: :class:`~._core.McpSubscribed`'s ``how`` for each revision.
LISTEN: Final = "subscriptions/listen"
SUBSCRIBE: Final = "logging/setLevel + resources/subscribe"

#: Told what was asked for: ``how``, the log level, the resources.
OnSubscribed = Callable[[str, "str | None", Sequence[str]], None]


class Flag:
    """A resettable event: set by the relay, waited on and cleared by the session."""

    def __init__(self) -> None:
        self._event: anyio.Event | None = None
        self._set = False

    def set(self) -> None:
        self._set = True
        if self._event is not None:
            self._event.set()

    def clear(self) -> None:
        self._set = False
        # An event not set yet may have waiters: they wait on for the next set().
        if self._event is not None and self._event.is_set():
            self._event = None

    async def wait(self) -> None:
        if self._set:
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()


async def list_resource_uris(client: Client, name: str) -> list[str]:
    """Every resource URI the server lists (the first :data:`MAX_PAGES` pages)."""
    uris: dict[str, None] = {}
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        try:
            result = await client.session.list_resources(params=params)
        except MCPError as error:
            logger.warning("MCP server %r refused resources/list: %s", name, error)
            break
        uris.update((resource.uri, None) for resource in result.resources)
        cursor = result.next_cursor
        if not cursor:
            break
    return list(uris)


async def listen(
    client: Client,
    link: Link,
    resources_changed: Flag,
    *,
    name: str,
    level: str,
    resources: Sequence[str] | None,
    on_subscribed: OnSubscribed,
) -> bool:
    """Hold a ``subscriptions/listen`` stream until the link is lost; False if not served.

    The filter asks for the list changes the server's capabilities offer
    and for ``resources`` (default: every listed resource, listed again and
    a new stream opened whenever the resource list changes, since a
    stream's filter is fixed).
    """
    capabilities = client.server_capabilities
    offered = capabilities.resources
    subscribable = offered is not None and bool(offered.subscribe)
    if resources is not None and not subscribable:
        logger.warning("MCP server %r offers no resource subscriptions", name)
    while True:
        resources_changed.clear()
        if not subscribable:
            uris: list[str] = []
        elif resources is not None:
            uris = list(resources)
        else:
            uris = await list_resource_uris(client, name)
        try:
            async with client.listen(
                tools_list_changed=bool(capabilities.tools and capabilities.tools.list_changed),
                prompts_list_changed=bool(
                    capabilities.prompts and capabilities.prompts.list_changed
                ),
                resources_list_changed=bool(offered and offered.list_changed),
                resource_subscriptions=uris,
            ) as subscription:
                on_subscribed(LISTEN, level, uris)
                async with anyio.create_task_group() as tasks:

                    async def drain() -> None:
                        # What the stream carries was relayed off the wire already.
                        async for _event in subscription:
                            pass
                        link.mark_lost("the MCP server closed the subscriptions/listen stream")

                    tasks.start_soon(drain)
                    if subscribable and resources is None:
                        await resources_changed.wait()
                        # A stream's filter is fixed: open one for the new list.
                        tasks.cancel_scope.cancel()
        except MCPError as error:
            if error.code != types.METHOD_NOT_FOUND:
                raise
            logger.warning("MCP server %r does not serve subscriptions/listen", name)
            return False
        if link.lost.is_set():
            return True


async def subscribe(
    client: Client,
    resources_changed: Flag,
    *,
    name: str,
    level: types.LoggingLevel,
    resources: Sequence[str] | None,
    on_subscribed: OnSubscribed,
) -> None:
    """``logging/setLevel`` and ``resources/subscribe``, then subscribe to new resources for ever.

    ``resources`` are the URIs to subscribe to; by default every listed
    resource, and those that appear whenever the resource list changes.
    """
    capabilities = client.server_capabilities
    session = client.session
    asked_level: str | None = None
    if capabilities.logging is not None:
        try:
            await session.send_request(
                types.SetLevelRequest(params=types.SetLevelRequestParams(level=level)),
                types.EmptyResult,
            )
            asked_level = level
        except MCPError as error:
            logger.warning("MCP server %r refused logging/setLevel: %s", name, error)
    offered = capabilities.resources
    subscribable = offered is not None and bool(offered.subscribe)
    if resources is not None and not subscribable:
        logger.warning("MCP server %r offers no resource subscriptions", name)
    subscribed: dict[str, None] = {}
    if subscribable:
        await _subscribe_new(client, name, resources, subscribed)
    on_subscribed(SUBSCRIBE, asked_level, list(subscribed))
    while subscribable and resources is None:
        await resources_changed.wait()
        resources_changed.clear()
        if await _subscribe_new(client, name, None, subscribed):
            on_subscribed(SUBSCRIBE, asked_level, list(subscribed))


async def _subscribe_new(
    client: Client, name: str, resources: Sequence[str] | None, subscribed: dict[str, None]
) -> bool:
    """Subscribe to ``resources`` (default: the listed ones) not subscribed yet; any new?"""
    before = len(subscribed)
    wanted = list(resources) if resources is not None else await list_resource_uris(client, name)
    for uri in wanted:
        if uri in subscribed:
            continue
        try:
            await client.session.send_request(
                types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)),
                types.EmptyResult,
            )
        except MCPError as error:
            logger.warning("MCP server %r refused resources/subscribe %s: %s", name, uri, error)
        else:
            subscribed[uri] = None
    return len(subscribed) > before
