"""Several MCP servers in one hub, and the exchanges of kinds 0-3 forwarded to them.

:class:`McpRelay` runs one :class:`~._core.Bridge` per server, each on its
own (a server that fails does not disturb the others), all publishing into
one hub, and answers the four one-shot exchanges of the provider protocol
for a serving adapter: :meth:`McpRelay.handle_exchange` is an
``exchange_handler``.
"""

from __future__ import annotations

import logging
import random as random_module
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import anyio
import attrs
from mcp.shared.uri_template import UriTemplate

from ..sansio.client.policy import DEFAULT_BACKOFF, Backoff, ProxyPolicy
from ..sansio.drivers.settings import DEFAULT_EXCHANGE_TIMEOUT
from ..sansio.events import Event
from ..sansio.lines import DEFAULT_MAX_LINE_SIZE
from ..sansio.mcp.model import ErrorCode, ErrorData, LogLevel
from ..sansio.server.hub import Hub
from ..sansio.wire.asks import Ask, Exchange
from ._config import ServerSpec
from ._core import DEFAULT_PING_INTERVAL, Bridge, BridgeExhausted, BridgeSettings, check_command
from ._subscribe import MAX_PAGES

__all__ = ["DEFAULT_EXCHANGE_TIMEOUT", "McpRelay", "RelayExhausted", "ServerStatus"]

logger = logging.getLogger("diverge_notifications.bridge")


@attrs.frozen(kw_only=True)
class _Listing:
    """One kind of listing: its method, the result's array, each entry's key."""

    method: str
    member: str
    key: str
    #: The member of the server's capabilities that offers it.
    capability: str


_TOOLS: Final = _Listing(method="tools/list", member="tools", key="name", capability="tools")
_RESOURCES: Final = _Listing(
    method="resources/list", member="resources", key="uri", capability="resources"
)
_TEMPLATES: Final = _Listing(
    method="resources/templates/list",
    member="resourceTemplates",
    key="uriTemplate",
    capability="resources",
)
_CACHE_KEY: Final = {_TOOLS: "tools", _RESOURCES: "resources", _TEMPLATES: "templates"}


class RelayExhausted(ConnectionError):
    """Servers' bridges gave up (``max_attempts``): every one, or with ``every=False`` one.

    ``reasons`` maps the name of each server given up to its last reason.
    """

    def __init__(self, reasons: Mapping[str, str], *, every: bool = True) -> None:
        detail = "; ".join(f"{name}: {reason}" for name, reason in reasons.items())
        what = "every MCP server is gone" if every else "an MCP server is gone"
        super().__init__(f"{what}: {detail}")
        self.reasons = dict(reasons)


@attrs.frozen(kw_only=True)
class ServerStatus:
    """Where one server of a relay is; see :meth:`McpRelay.status`."""

    name: str
    connected: bool
    #: The revision agreed on, while connected.
    protocol_version: str | None
    #: Why it is not connected (``None`` while connected or before the first attempt).
    reason: str | None
    #: True once its bridge gave up (``max_attempts``).
    gone: bool
    #: Messages not relayed because they were larger than the limit.
    dropped: int


def _error(code: int, message: str, data: Any = None) -> ErrorData:
    return ErrorData(code=code, message=message, data=data)


class McpRelay:
    """Relay ``servers`` into ``hub`` and forward exchanges of kinds 0-3 to them.

    :meth:`run` runs every server's bridge until cancelled;
    :meth:`handle_exchange` (also the instance itself, as a callable) is the
    ``exchange_handler`` of a serving adapter. Run both in the same event
    loop: asyncio, or trio (the bridge is written on anyio).

    Each server gets its own :class:`ProxyPolicy` with ``backoff``,
    ``healthy_after`` and ``max_attempts``; ``random`` draws the jitter.
    ``log_level`` is asked of every server; ``request_timeout`` bounds each
    request the bridge makes itself and each listing; ``exchange_timeout``
    a forwarded call or read (seconds); a server that does not
    answer a ``ping`` is noticed within ``ping_interval`` seconds.
    ``on_event(name, event)`` gets each bridge's events with the server's
    name (see :func:`~._core.run_bridge`).

    With ``suspends`` (the hub a server serves: ``hub`` itself, or the
    served hub when ``hub`` is a broker's inlet), a server that is not
    connected suspends it (:meth:`Hub.suspend`): from construction until
    every server is connected and subscribed, and whenever one is lost,
    its open paths end with an error naming the server and what happened,
    and its notification asks are answered ``503`` with ``Retry-After``;
    it is resumed when every server is back. A server given up for good
    keeps it suspended. Without ``suspends`` the hub is never suspended.

    Raises :class:`ValueError` for no servers, two servers of one name or
    bad options, and :class:`FileNotFoundError` when a server's command is
    not found, before anything starts.
    """

    def __init__(
        self,
        hub: Hub,
        servers: Sequence[ServerSpec],
        *,
        log_level: str | LogLevel = "debug",
        backoff: Backoff = DEFAULT_BACKOFF,
        healthy_after: float = 10.0,
        max_attempts: int | None = None,
        random: Callable[[], float] | None = None,
        request_timeout: float = 30.0,
        exchange_timeout: float = DEFAULT_EXCHANGE_TIMEOUT,
        ping_interval: float = DEFAULT_PING_INTERVAL,
        max_message_size: int = DEFAULT_MAX_LINE_SIZE,
        on_event: Callable[[str, Event], None] | None = None,
        suspends: Hub | None = None,
    ) -> None:
        specs = tuple(servers)
        if not specs:
            raise ValueError("no MCP server to relay")
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            twice = sorted({name for name in names if names.count(name) > 1})
            raise ValueError(f"two MCP servers share a name: {', '.join(map(repr, twice))}")
        if not exchange_timeout > 0:
            raise ValueError(f"exchange_timeout must be positive, got {exchange_timeout!r}")
        self._settings = BridgeSettings(
            log_level=log_level,
            request_timeout=request_timeout,
            ping_interval=ping_interval,
            max_message_size=max_message_size,
        )
        # Checked once here so that a mistake shows before anything runs.
        ProxyPolicy(backoff=backoff, healthy_after=healthy_after, max_attempts=max_attempts)
        for spec in specs:
            check_command(spec)
        self.hub = hub
        self.servers = specs
        self._backoff = backoff
        self._healthy_after = healthy_after
        self._max_attempts = max_attempts
        self._random = random if random is not None else random_module.random
        self._exchange_timeout = exchange_timeout
        self._on_event = on_event
        self._bridges: tuple[Bridge, ...] | None = None
        self._suspends = suspends
        # The reason this relay holds the served hub suspended for (``None``: not held;
        # ``""``: not looked at yet).
        self._held: str | None = ""
        self._update_suspension()

    # -- running ----------------------------------------------------------------

    def _bridge_list(self) -> tuple[Bridge, ...]:
        """The bridges, made on first use inside the event loop."""
        if self._bridges is None:
            self._bridges = tuple(self._make_bridge(spec) for spec in self.servers)
        return self._bridges

    def _make_bridge(self, spec: ServerSpec) -> Bridge:
        on_event = self._on_event

        def emit(event: Event) -> None:
            if on_event is not None:
                on_event(spec.name, event)

        policy = ProxyPolicy(
            backoff=self._backoff,
            healthy_after=self._healthy_after,
            max_attempts=self._max_attempts,
            require_exchange=False,
        )
        return Bridge(
            self.hub,
            spec,
            settings=self._settings,
            policy=policy,
            random=self._random,
            on_event=emit,
            on_change=self._update_suspension,
        )

    def not_connected(self) -> str | None:
        """Why a server is not connected (the first such, named), or ``None`` when all are."""
        made = {bridge.name: bridge for bridge in self._bridges or ()}
        for spec in self.servers:
            bridge = made.get(spec.name)
            if bridge is None:
                return f"MCP server {spec.name!r} is not connected yet"
            if bridge.gone:
                return f"MCP server {spec.name!r} is gone (given up): {bridge.reason}"
            if bridge.client is None and bridge.reason is None:
                return f"MCP server {spec.name!r} is not connected yet"
            if bridge.client is None:
                return f"MCP server {spec.name!r} is not connected: {bridge.reason}"
        return None

    def _update_suspension(self) -> None:
        """Suspend the served hub while a server is not connected; resume it when all are."""
        hub = self._suspends
        if hub is None:
            return
        reason = self.not_connected()
        if reason == self._held:
            return
        self._held = reason
        if reason is None:
            logger.info("every MCP server is connected: notification asks are served again")
            hub.resume(holder=self)
            return
        try:
            ended = hub.suspend(reason, holder=self)
        except Exception:
            logger.exception("a subscriber's wake-up failed while suspending the hub")
            return
        if ended:
            logger.warning("%s: ended %d open paths", reason, ended)

    async def run(self, *, stop_when_one_is_gone: bool = False) -> None:
        """Run every bridge until cancelled.

        A bridge whose policy gives up is gone, and the others go on; when
        every one is gone this raises :class:`RelayExhausted`. With
        ``stop_when_one_is_gone`` the first server given up ends the run
        (:class:`RelayExhausted` with ``every=False``): what ``serve`` does,
        since its hub would never serve again. (With the default
        ``max_attempts=None`` no bridge ever gives up.)
        """
        bridges = self._bridge_list()
        self._update_suspension()
        reasons: dict[str, str] = {}

        async with anyio.create_task_group() as tasks:

            async def run_one(bridge: Bridge) -> None:
                try:
                    await bridge.run()
                except BridgeExhausted as error:
                    logger.error("MCP server %r is gone: %s", bridge.name, error)
                    reasons[bridge.name] = error.reason
                    if stop_when_one_is_gone:
                        tasks.cancel_scope.cancel()

            for bridge in bridges:
                tasks.start_soon(run_one, bridge)
        raise RelayExhausted(reasons, every=len(reasons) == len(bridges))

    def status(self) -> tuple[ServerStatus, ...]:
        """Each server's state, in the order given."""
        bridges = self._bridges or ()
        made = {bridge.name: bridge for bridge in bridges}
        statuses = []
        for spec in self.servers:
            bridge = made.get(spec.name)
            client = bridge.client if bridge is not None else None
            statuses.append(
                ServerStatus(
                    name=spec.name,
                    connected=client is not None,
                    protocol_version=client.protocol_version if client is not None else None,
                    reason=bridge.reason if bridge is not None else None,
                    gone=bridge.gone if bridge is not None else False,
                    dropped=bridge.dropped if bridge is not None else 0,
                )
            )
        return tuple(statuses)

    # -- the exchanges -------------------------------------------------------------

    async def __call__(self, ask: Ask) -> dict[str, Any] | ErrorData | None:
        return await self.handle_exchange(ask)

    async def handle_exchange(self, ask: Ask) -> dict[str, Any] | ErrorData | None:
        """Answer one exchange of kinds 0-3 by forwarding it (see ``docs/relay.md``).

        List tools and list resources: the union over the connected servers,
        every page read. Call tool and read resource: the params, as the
        proxy sent them, go to the server that lists that tool or resource,
        and its result or its error comes back. The notifications ask
        (kind 4) is declined: that is the serving adapter's business.

        An ask made under one of several tokens (``ask.audience``): the
        progress of its call or read reaches only the paths of that token.
        """
        bridges = self._bridge_list()
        params = ask.params
        exchange = ask.exchange
        if exchange is Exchange.LIST_TOOLS:
            return await self._union(bridges, _TOOLS, params)
        if exchange is Exchange.LIST_RESOURCES:
            return await self._union(bridges, _RESOURCES, params)
        if exchange is Exchange.CALL_TOOL:
            return await self._forward(bridges, _TOOLS, "tools/call", params, ask.audience)
        if exchange is Exchange.READ_RESOURCE:
            return await self._forward(bridges, _RESOURCES, "resources/read", params, ask.audience)
        return None

    async def _connected(self, bridges: Sequence[Bridge]) -> list[Bridge]:
        """The connected bridges, once each made its first attempt (bounded wait)."""
        with anyio.move_on_after(self._settings.request_timeout):
            for bridge in bridges:
                await bridge.settled.wait()
        return [bridge for bridge in bridges if bridge.client is not None]

    @staticmethod
    def _nobody(bridges: Sequence[Bridge]) -> ErrorData:
        down = "; ".join(f"{b.name}: {b.reason or 'not connected yet'}" for b in bridges)
        return _error(ErrorCode.INTERNAL_ERROR, f"no MCP server is connected ({down})")

    @staticmethod
    def _offers(bridge: Bridge, listing: _Listing) -> bool:
        client = bridge.client
        if client is None:
            return False
        return getattr(client.server_capabilities, listing.capability, None) is not None

    async def _list_all(
        self, bridge: Bridge, listing: _Listing, params: Mapping[str, Any] | None
    ) -> list[Any] | ErrorData:
        """Every page of ``listing`` from ``bridge``; the names go into its cache."""
        entries: list[Any] = []
        page: dict[str, Any] = dict(params or {})
        for _ in range(MAX_PAGES):
            result = await bridge.request(listing.method, page or None)
            if isinstance(result, ErrorData):
                return result
            found = result.get(listing.member)
            if not isinstance(found, list):
                return _error(
                    ErrorCode.INTERNAL_ERROR,
                    f"MCP server {bridge.name!r} answered {listing.method} "
                    f"without an array {listing.member!r}",
                )
            entries.extend(found)
            cursor = result.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
            page["cursor"] = cursor
        else:
            logger.warning(
                "MCP server %r: %s has more than %d pages; the rest is left out",
                bridge.name,
                listing.method,
                MAX_PAGES,
            )
        keys = {entry.get(listing.key) for entry in entries if isinstance(entry, dict)}
        bridge.listed[_CACHE_KEY[listing]] = frozenset(k for k in keys if isinstance(k, str))
        return entries

    async def _union(
        self, bridges: Sequence[Bridge], listing: _Listing, params: Mapping[str, Any] | None
    ) -> dict[str, Any] | ErrorData:
        if params is not None and params.get("cursor") is not None:
            return _error(
                ErrorCode.INVALID_PARAMS,
                "the relay answers with every page at once: there is no cursor to go on from",
            )
        connected = [b for b in await self._connected(bridges) if self._offers(b, listing)]
        if not connected:
            if not any(b.client is not None for b in bridges):
                return self._nobody(bridges)
            return {listing.member: []}
        results: dict[str, list[Any] | ErrorData] = {}

        async def fetch(bridge: Bridge) -> None:
            results[bridge.name] = await self._list_all(bridge, listing, params)

        async with anyio.create_task_group() as tasks:
            for bridge in connected:
                tasks.start_soon(fetch, bridge)
        union: list[Any] = []
        failed: list[tuple[str, ErrorData]] = []
        for bridge in connected:
            result = results[bridge.name]
            if isinstance(result, ErrorData):
                logger.warning("MCP server %r: %s failed: %s", bridge.name, listing.method, result)
                failed.append((bridge.name, result))
            else:
                union.extend(result)
        if len(failed) == len(connected):
            if len(failed) == 1:
                return failed[0][1]  # one server: its own error, unchanged
            detail = "; ".join(f"{name}: {error.message}" for name, error in failed)
            return _error(ErrorCode.INTERNAL_ERROR, f"every MCP server failed: {detail}")
        return {listing.member: union}

    async def _names(self, bridge: Bridge, listing: _Listing) -> frozenset[str]:
        """The names (or URIs, or templates) ``bridge`` lists, from its cache if fresh."""
        cached = bridge.listed.get(_CACHE_KEY[listing])
        if isinstance(cached, frozenset):
            return cached
        if not self._offers(bridge, listing):
            return frozenset()
        result = await self._list_all(bridge, listing, None)
        if isinstance(result, ErrorData):
            logger.warning("MCP server %r: %s failed: %s", bridge.name, listing.method, result)
            return frozenset()
        names = bridge.listed.get(_CACHE_KEY[listing])
        return names if isinstance(names, frozenset) else frozenset()

    async def _owners(
        self, bridges: Sequence[Bridge], listing: _Listing, value: str
    ) -> list[Bridge]:
        owners = [bridge for bridge in bridges if value in await self._names(bridge, listing)]
        if owners or listing is not _RESOURCES:
            return owners
        # No server lists the URI itself: whose resource templates match it?
        for bridge in bridges:
            for template in await self._names(bridge, _TEMPLATES):
                try:
                    matched = UriTemplate.parse(template).match(value) is not None
                except ValueError:
                    matched = False
                if matched:
                    owners.append(bridge)
                    break
        return owners

    async def _forward(
        self,
        bridges: Sequence[Bridge],
        listing: _Listing,
        method: str,
        params: Mapping[str, Any] | None,
        audience: str | None = None,
    ) -> dict[str, Any] | ErrorData:
        what = "tool" if listing is _TOOLS else "resource"
        value = (params or {}).get(listing.key)
        if not isinstance(value, str):
            return _error(
                ErrorCode.INVALID_PARAMS, f"{method} needs a string {listing.key!r} in its params"
            )
        connected = await self._connected(bridges)
        if not connected:
            return self._nobody(bridges)
        owners = await self._owners(connected, listing, value)
        if len(owners) > 1:
            names = [owner.name for owner in owners]
            listed = " and ".join(repr(name) for name in names)
            return _error(
                ErrorCode.INVALID_PARAMS,
                f"{what} {value!r} is listed by more than one MCP server: {listed}",
                {"servers": names},
            )
        if owners:
            owner = owners[0]
        elif len(bridges) == 1:
            owner = bridges[0]  # the only server answers for itself, unknown names included
        else:
            down = [b.name for b in bridges if b.client is None]
            also = f" (not connected: {', '.join(map(repr, down))})" if down else ""
            code = ErrorCode.INVALID_PARAMS if listing is _TOOLS else ErrorCode.RESOURCE_NOT_FOUND
            return _error(code, f"no connected MCP server lists {what} {value!r}{also}")
        return await owner.request(
            method, params, timeout=self._exchange_timeout, audience=audience
        )
