"""The bridge: one MCP server's notifications, relayed into a hub unchanged."""

from __future__ import annotations

import logging
import os
import random as random_module
import shlex
import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import Final, cast

import anyio
import attrs
import mcp_types as types
from mcp import Client
from mcp.client import Transport
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from .. import __version__
from ..sansio._errors import FrameError
from ..sansio.events import AttemptsExhausted, Event
from ..sansio.hub import Hub
from ..sansio.lines import DEFAULT_MAX_LINE_SIZE
from ..sansio.mcp import LogLevel, Notification
from ..sansio.policy import ProxyPolicy
from ._http import http_transport
from ._link import Link
from ._stdio import stdio_transport

__all__ = [
    "BridgeExhausted",
    "McpConnected",
    "McpDisconnected",
    "McpSubscribed",
    "run_bridge",
]

logger = logging.getLogger("diverge_notifications.bridge")

#: Pages of ``resources/list`` read at most when looking for what to subscribe to.
_MAX_RESOURCE_PAGES: Final = 100
_CLIENT_INFO: Final = types.Implementation(name="diverge-notifications", version=__version__)
_LIST_CHANGED: Final = "notifications/resources/list_changed"
_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"


@attrs.frozen(kw_only=True)
class McpConnected(Event):
    """The bridge connected to the MCP server and agreed on ``protocol_version``."""

    protocol_version: str
    #: The server's name, when it gave one.
    server: str | None


@attrs.frozen(kw_only=True)
class McpSubscribed(Event):
    """The bridge asked the MCP server for everything there is to hear.

    ``how`` is ``"subscriptions/listen"`` (MCP 2026-07-28) or
    ``"logging/setLevel + resources/subscribe"`` (earlier revisions);
    ``log_level`` is the level asked for (``None`` when the server offers no
    logging), ``resources`` the URIs subscribed to.
    """

    how: str
    log_level: str | None
    resources: tuple[str, ...]


@attrs.frozen(kw_only=True)
class McpDisconnected(Event):
    """The connection to the MCP server ended, or could not be made."""

    reason: str


class BridgeExhausted(ConnectionError):
    """The policy's ``max_attempts`` unhealthy connections in a row: the bridge gave up."""

    def __init__(self, attempts: int, reason: str) -> None:
        super().__init__(f"gave up after {attempts} failed connections to the MCP server: {reason}")
        self.attempts = attempts
        self.reason = reason


async def run_bridge(
    hub: Hub,
    *,
    stdio_command: str | Sequence[str] | None = None,
    url: str | None = None,
    log_level: str | LogLevel = "debug",
    policy: ProxyPolicy | None = None,
    random: Callable[[], float] | None = None,
    mode: str = "auto",
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    headers: Mapping[str, str] | None = None,
    request_timeout: float = 30.0,
    ping_interval: float = 15.0,
    max_line_size: int = DEFAULT_MAX_LINE_SIZE,
    on_event: Callable[[Event], None] | None = None,
) -> None:
    """Relay every notification an MCP server sends into ``hub``, until cancelled.

    The server is a command speaking MCP on its standard input and output
    (``stdio_command``: a shell-style string or an argument list), or a
    Streamable HTTP endpoint (``url``); give exactly one. The bridge
    connects as an MCP client with the official SDK and publishes each
    notification the server sends, custom ones included, as the JSON object
    the server wrote: every member, ``_meta`` included, in the order written,
    notifications in the order they arrived.

    It asks for what there is to hear. On MCP 2026-07-28 it opens one
    ``subscriptions/listen`` stream for the list changes the server offers
    and every resource it lists, with ``log_level`` as the stream's log
    opt-in; on earlier revisions it sends ``logging/setLevel`` and
    ``resources/subscribe`` for every listed resource, and the server's own
    stream carries the rest. ``mode`` picks the revision as the SDK's
    ``Client`` does: ``"auto"`` (ask the server), ``"legacy"`` (the
    ``initialize`` handshake: 2025-11-25 and older) or ``"2026-07-28"``.

    When the server goes away (its process exits, its output ends, the
    listen stream or the GET stream breaks, a ping goes unanswered), the
    bridge connects again after ``policy``'s backoff with jitter (default
    ``ProxyPolicy(require_exchange=False)``, the proxy's own policy) and
    asks again; nothing is replayed. ``random`` draws the jitter (default
    :func:`random.random`). With ``max_attempts`` set on the policy, that
    many unhealthy connections in a row raise :class:`BridgeExhausted`.

    ``env`` is added to the SDK's safe default environment of a stdio server
    and ``cwd`` is its working directory; ``headers`` go with every HTTP
    request. ``request_timeout`` bounds each request the bridge sends;
    ``ping_interval`` is how often a handshake-era HTTP server that keeps no
    GET stream is pinged. ``on_event`` gets :class:`McpConnected`,
    :class:`McpSubscribed`, :class:`McpDisconnected` and the policy's
    ``RetryScheduled`` / ``AttemptsExhausted``.

    Raises :class:`ValueError` for bad arguments and :class:`FileNotFoundError`
    when the command is not found, before connecting.
    """
    bridge = _Bridge(
        hub,
        stdio_command=stdio_command,
        url=url,
        log_level=log_level,
        policy=policy,
        random=random,
        mode=mode,
        env=env,
        cwd=cwd,
        headers=headers,
        request_timeout=request_timeout,
        ping_interval=ping_interval,
        max_line_size=max_line_size,
        on_event=on_event,
    )
    await bridge.run()


def _command(command: str | Sequence[str]) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(part) for part in command]
    if not argv:
        raise ValueError("stdio_command is empty")
    program = argv[0]
    if os.sep in program or (os.altsep is not None and os.altsep in program):
        if not os.access(program, os.X_OK):
            raise FileNotFoundError(f"MCP server command not found or not executable: {program}")
    elif shutil.which(program) is None:
        raise FileNotFoundError(f"MCP server command not found: {program}")
    return argv


def _describe(error: BaseException) -> str:
    """One line for what ended a connection, looking inside exception groups."""
    # Duck-typed: Python 3.10 has no built-in BaseExceptionGroup to test against.
    while True:
        inner = getattr(error, "exceptions", None)
        if not isinstance(inner, tuple) or not inner or not isinstance(inner[0], BaseException):
            break
        error = inner[0]
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class _Bridge:
    """The state of one :func:`run_bridge` call."""

    def __init__(
        self,
        hub: Hub,
        *,
        stdio_command: str | Sequence[str] | None,
        url: str | None,
        log_level: str | LogLevel,
        policy: ProxyPolicy | None,
        random: Callable[[], float] | None,
        mode: str,
        env: Mapping[str, str] | None,
        cwd: str | None,
        headers: Mapping[str, str] | None,
        request_timeout: float,
        ping_interval: float,
        max_line_size: int,
        on_event: Callable[[Event], None] | None,
    ) -> None:
        if (stdio_command is None) == (url is None):
            raise ValueError("give exactly one of stdio_command and url")
        level = log_level if isinstance(log_level, LogLevel) else LogLevel.from_wire(log_level)
        if level is None:
            raise ValueError(f"not a log level: {log_level!r} (debug, info, ... emergency)")
        if mode not in ("auto", "legacy") and mode not in MODERN_PROTOCOL_VERSIONS:
            known = ", ".join(repr(m) for m in ("auto", "legacy", *MODERN_PROTOCOL_VERSIONS))
            hint = " (use 'legacy' for it)" if mode in HANDSHAKE_PROTOCOL_VERSIONS else ""
            raise ValueError(f"mode must be one of {known}, not {mode!r}{hint}")
        if not request_timeout > 0 or not ping_interval > 0:
            raise ValueError("request_timeout and ping_interval must be positive")
        self._hub = hub
        self._argv = _command(stdio_command) if stdio_command is not None else None
        self._url = url
        # LogLevel's wire names are exactly the SDK's LoggingLevel literals.
        self._level = cast(types.LoggingLevel, level.wire)
        self._policy = policy if policy is not None else ProxyPolicy(require_exchange=False)
        self._random = random if random is not None else random_module.random
        self._mode = mode
        self._env = env
        self._cwd = cwd
        self._headers = headers
        self._request_timeout = request_timeout
        self._ping_interval = ping_interval
        self._max_line_size = max_line_size
        self._on_event = on_event
        self._started = 0.0
        self._last_now = 0.0
        self._path_open = False

    # -- the loop -------------------------------------------------------------

    def _now(self) -> float:
        """Seconds since the bridge started, never going back (the policy's clock)."""
        self._last_now = max(self._last_now, anyio.current_time() - self._started)
        return self._last_now

    def _emit(self, event: Event) -> None:
        if self._on_event is not None:
            self._on_event(event)

    async def run(self) -> None:
        self._started = anyio.current_time()
        policy = self._policy
        # Asking is gated on a first exchange for a proxy; the bridge has
        # nothing to exchange first, so that gate is opened at once.
        policy.exchange_completed()
        while True:
            ask_at = policy.ask_at()
            if ask_at is None:
                raise BridgeExhausted(policy.failures, "the policy allows no more connections")
            delay = ask_at - self._now()
            if delay > 0:
                await anyio.sleep(delay)
            # Never before ask_at, even if the sleep woke a hair early.
            self._last_now = max(self._now(), ask_at)
            policy.ask_started(self._last_now)
            reason = await self._connect_once()
            self._path_open = False
            logger.info("MCP server connection ended: %s", reason)
            self._emit(McpDisconnected(reason=reason))
            outcome = policy.ask_ended(self._now(), self._random())
            self._emit(outcome)
            if isinstance(outcome, AttemptsExhausted):
                raise BridgeExhausted(outcome.attempts, reason)
            logger.info("connecting to the MCP server again in %.2f s", outcome.delay)

    async def _connect_once(self) -> str:
        link = Link()
        resources_changed = _Flag()

        def relay(raw: bytes) -> None:
            self._relay(raw, resources_changed)

        try:
            async with self._client(link, relay) as client:
                self._policy.path_opened(self._now())
                self._path_open = True
                server = client.server_info.name if client.server_info is not None else None
                logger.info("connected to MCP server %s (%s)", server, client.protocol_version)
                self._emit(McpConnected(protocol_version=client.protocol_version, server=server))
                await self._hear(client, link, resources_changed)
        except Exception as error:
            link.mark_lost(_describe(error))
        return link.reason or "the MCP session ended"

    def _client(self, link: Link, relay: Callable[[bytes], None]) -> Client:
        transport: Transport
        if self._argv is not None:
            transport = stdio_transport(
                self._argv,
                relay=relay,
                link=link,
                env=self._env,
                cwd=self._cwd,
                max_line_size=self._max_line_size,
            )
        else:
            assert self._url is not None
            transport = http_transport(self._url, relay=relay, link=link, headers=self._headers)
        return Client(
            transport,
            mode=self._mode,
            log_level=self._level,
            read_timeout_seconds=self._request_timeout,
            client_info=_CLIENT_INFO,
            cache=None,
        )

    def _relay(self, raw: bytes, resources_changed: _Flag) -> None:
        """One raw JSON-RPC message from the server: publish it if it is a notification."""
        try:
            notification = Notification.from_bytes(raw)
        except FrameError:
            return  # not an object with a method: a response, or not JSON at all
        if "id" in notification.members:
            return  # a request from the server, not a notification
        try:
            self._hub.publish(notification)
        except Exception:
            # A subscriber's wake-up callback failed; the relay goes on.
            logger.exception("publishing a notification into the hub failed")
        # The acknowledgment of the bridge's own listen request says nothing
        # about the server staying up, so it does not make a connection healthy.
        if self._path_open and notification.method != _ACKNOWLEDGED:
            self._policy.notification_received()
        if notification.method == _LIST_CHANGED:
            resources_changed.set()

    # -- one connection -------------------------------------------------------

    async def _hear(self, client: Client, link: Link, resources_changed: _Flag) -> None:
        async with anyio.create_task_group() as tasks:

            async def watch() -> None:
                await link.lost.wait()
                tasks.cancel_scope.cancel()

            tasks.start_soon(watch)
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                await self._listen(client, link, resources_changed)
            else:
                await self._subscribe(client, link, resources_changed)
            tasks.cancel_scope.cancel()

    async def _resources(self, client: Client) -> list[str]:
        """Every resource URI the server lists (first ``_MAX_RESOURCE_PAGES`` pages)."""
        uris: dict[str, None] = {}
        cursor: str | None = None
        for _ in range(_MAX_RESOURCE_PAGES):
            params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            try:
                result = await client.session.list_resources(params=params)
            except MCPError as error:
                logger.warning("the MCP server refused resources/list: %s", error)
                break
            uris.update((resource.uri, None) for resource in result.resources)
            cursor = result.next_cursor
            if not cursor:
                break
        return list(uris)

    async def _listen(self, client: Client, link: Link, resources_changed: _Flag) -> None:
        """MCP 2026-07-28: a ``subscriptions/listen`` stream, opened anew when resources change."""
        capabilities = client.server_capabilities
        if self._mode in MODERN_PROTOCOL_VERSIONS:
            # A pinned revision skips the discovery, so the capabilities are unknown: ask.
            raw = await client.session.send_discover(self._mode)
            capabilities = types.DiscoverResult.model_validate(raw).capabilities
        resources = capabilities.resources
        subscribable = resources is not None and bool(resources.subscribe)
        while True:
            resources_changed.clear()
            uris = await self._resources(client) if subscribable else []
            try:
                async with client.listen(
                    tools_list_changed=bool(capabilities.tools and capabilities.tools.list_changed),
                    prompts_list_changed=bool(
                        capabilities.prompts and capabilities.prompts.list_changed
                    ),
                    resources_list_changed=bool(resources and resources.list_changed),
                    resource_subscriptions=uris,
                ) as subscription:
                    self._emit(
                        McpSubscribed(
                            how="subscriptions/listen", log_level=self._level, resources=tuple(uris)
                        )
                    )
                    async with anyio.create_task_group() as tasks:

                        async def drain() -> None:
                            # What the stream carries was relayed off the wire already.
                            async for _event in subscription:
                                pass
                            link.mark_lost("the MCP server closed the subscriptions/listen stream")

                        tasks.start_soon(drain)
                        if subscribable:
                            await resources_changed.wait()
                            # A stream's filter is fixed: open one for the new list.
                            tasks.cancel_scope.cancel()
            except MCPError as error:
                if error.code != types.METHOD_NOT_FOUND:
                    raise
                logger.warning(
                    "the MCP server does not serve subscriptions/listen: "
                    "relaying only what it sends on its own"
                )
                await anyio.sleep_forever()
            if link.lost.is_set():
                return

    async def _subscribe(self, client: Client, link: Link, resources_changed: _Flag) -> None:
        """Before 2026-07-28: ``logging/setLevel``, ``resources/subscribe``, the server's stream."""
        capabilities = client.server_capabilities
        session = client.session
        level: str | None = None
        if capabilities.logging is not None:
            try:
                await session.send_request(
                    types.SetLevelRequest(params=types.SetLevelRequestParams(level=self._level)),
                    types.EmptyResult,
                )
                level = self._level
            except MCPError as error:
                logger.warning("the MCP server refused logging/setLevel: %s", error)
        resources = capabilities.resources
        subscribable = resources is not None and bool(resources.subscribe)
        subscribed: dict[str, None] = {}

        def asked() -> McpSubscribed:
            return McpSubscribed(
                how="logging/setLevel + resources/subscribe",
                log_level=level,
                resources=tuple(subscribed),
            )

        if subscribable:
            await self._subscribe_new(client, subscribed)
        self._emit(asked())
        async with anyio.create_task_group() as tasks:
            if self._url is not None:
                tasks.start_soon(self._check_http, client, link)
            while subscribable:
                await resources_changed.wait()
                resources_changed.clear()
                if await self._subscribe_new(client, subscribed):
                    self._emit(asked())
            await anyio.sleep_forever()

    async def _subscribe_new(self, client: Client, subscribed: dict[str, None]) -> bool:
        """Subscribe to the listed resources not subscribed yet; whether there were any."""
        before = len(subscribed)
        for uri in await self._resources(client):
            if uri in subscribed:
                continue
            try:
                await client.session.send_request(
                    types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri)),
                    types.EmptyResult,
                )
            except MCPError as error:
                logger.warning("the MCP server refused resources/subscribe for %s: %s", uri, error)
            else:
                subscribed[uri] = None
        return len(subscribed) > before

    async def _check_http(self, client: Client, link: Link) -> None:
        """Handshake-era HTTP: notice the server going away.

        A broken GET stream after it had opened means the server went away
        (a restarted server no longer knows the session). A server that keeps
        no GET stream is pinged every ``ping_interval`` seconds instead.
        """
        await link.get_stream_ended.wait()
        if link.get_stream_opened:
            link.mark_lost("the MCP server's GET stream ended")
            return
        logger.info("the MCP server keeps no GET stream: only responses can carry notifications")
        while True:
            try:
                with anyio.fail_after(self._request_timeout):
                    await client.session.send_request(types.PingRequest(), types.EmptyResult)
            except (MCPError, TimeoutError) as error:
                link.mark_lost(f"the MCP server did not answer a ping: {_describe(error)}")
                return
            await anyio.sleep(self._ping_interval)


class _Flag:
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
        self._event = None

    async def wait(self) -> None:
        if self._set:
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()
