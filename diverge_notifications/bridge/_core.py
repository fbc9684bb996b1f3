"""The bridge: one MCP server's notifications, relayed into a hub unchanged.

A :class:`Bridge` keeps one MCP server connected (connecting again with the
proxy's backoff when it goes away), asks it for everything there is to hear,
publishes each notification it sends into the hub as the bytes it wrote,
and forwards the requests :class:`~._relay.McpRelay` hands it.
:func:`run_bridge` runs one bridge by itself.
"""

from __future__ import annotations

import logging
import os
import random as random_module
import shutil
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, cast

import anyio
import attrs
import mcp_types as types
from mcp import Client
from mcp.client import Transport
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, ValidationError

from .. import __version__
from ..sansio.client.policy import ProxyPolicy
from ..sansio.errors import FrameError
from ..sansio.events import AttemptsExhausted, Event
from ..sansio.lines import DEFAULT_MAX_LINE_SIZE
from ..sansio.mcp.model import ErrorCode, ErrorData, LogLevel, Notification
from ..sansio.server.hub import Hub, is_request
from ._config import ServerSpec
from ._http import http_transport
from ._link import Link, describe
from ._stdio import stdio_transport
from ._subscribe import Flag, listen, subscribe

__all__ = [
    "DEFAULT_PING_INTERVAL",
    "Bridge",
    "BridgeExhausted",
    "BridgeSettings",
    "McpConnected",
    "McpDisconnected",
    "McpSubscribed",
    "check_command",
    "run_bridge",
]

logger = logging.getLogger("diverge_notifications.bridge")

#: Seconds within which a server that stopped answering is noticed.
DEFAULT_PING_INTERVAL: Final = 15.0
_CLIENT_INFO: Final = types.Implementation(name="diverge-notifications", version=__version__)
_ACKNOWLEDGED: Final = "notifications/subscriptions/acknowledged"
#: Which cached listing each list change makes stale.
_STALE: Final[Mapping[str, tuple[str, ...]]] = {
    "notifications/tools/list_changed": ("tools",),
    "notifications/resources/list_changed": ("resources", "templates"),
}
_DEAD: Final = frozenset({types.CONNECTION_CLOSED, types.REQUEST_TIMEOUT})
_PROGRESS: Final = "notifications/progress"


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


def _positive(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not value > 0:
        raise ValueError(f"{attribute.name} must be positive, got {value!r}")


def _level(value: str | LogLevel) -> LogLevel:
    level = value if isinstance(value, LogLevel) else LogLevel.from_wire(value)
    if level is None:
        raise ValueError(f"not a log level: {value!r} (debug, info, ... emergency)")
    return level


@attrs.frozen(kw_only=True)
class BridgeSettings:
    """What every bridge of a relay shares; see :class:`~._relay.McpRelay`."""

    log_level: LogLevel = attrs.field(default=LogLevel.DEBUG, converter=_level)
    request_timeout: float = attrs.field(default=30.0, validator=_positive)
    ping_interval: float = attrs.field(default=DEFAULT_PING_INTERVAL, validator=_positive)
    max_message_size: int = attrs.field(default=DEFAULT_MAX_LINE_SIZE, validator=_positive)


class _AnyResult(BaseModel):
    """A result as the server sent it: every member kept, none interpreted."""

    model_config = ConfigDict(extra="allow")


def check_command(spec: ServerSpec) -> None:
    """Raise :class:`FileNotFoundError` unless ``spec``'s program can be started."""
    if not spec.command:
        return
    program = spec.command[0]
    if os.sep in program or (os.altsep is not None and os.altsep in program):
        if not os.access(program, os.X_OK):
            raise FileNotFoundError(
                f"MCP server {spec.name!r}: command not found or not executable: {program}"
            )
    elif shutil.which(program) is None:
        raise FileNotFoundError(f"MCP server {spec.name!r}: command not found: {program}")


def _error_data(error: types.ErrorData) -> ErrorData:
    try:
        return ErrorData(code=error.code, message=error.message, data=error.data)
    except (TypeError, ValueError) as problem:
        return ErrorData(code=ErrorCode.INTERNAL_ERROR, message=f"{error.message} ({problem})")


class Bridge:
    """One MCP server, kept connected and relayed into ``hub``.

    :meth:`run` connects, asks for everything there is to hear and relays
    until cancelled, connecting again after ``policy``'s backoff whenever
    the server goes away; with ``max_attempts`` on the policy it raises
    :class:`BridgeExhausted` in the end. While connected, :meth:`request`
    forwards one request to the server. ``on_change`` is called whenever
    the server becomes ready to forward to (connected and asked for
    everything), stops being so, or is given up. Create it inside the
    event loop.
    """

    def __init__(
        self,
        hub: Hub,
        spec: ServerSpec,
        *,
        settings: BridgeSettings,
        policy: ProxyPolicy,
        random: Callable[[], float],
        on_event: Callable[[Event], None] | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.hub = hub
        self.spec = spec
        self._settings = settings
        self._policy = policy
        self._random = random
        self._on_event = on_event
        # Told whenever the server becomes ready to forward to, or stops being.
        self._on_change = on_change
        # LogLevel's wire names are exactly the SDK's LoggingLevel literals.
        self._level = cast(types.LoggingLevel, settings.log_level.wire)
        #: The connected client, or ``None`` between connections.
        self.client: Client | None = None
        #: Why the server is not connected (``None`` before the first attempt ends).
        self.reason: str | None = None
        #: Set while the server is connected or the bridge waits to connect
        #: again; clear while a connection is being made.
        self.settled = Flag()
        #: True once the policy gave up on this server.
        self.gone = False
        #: Listings the relay keeps (``"tools"``, ``"resources"``, ``"templates"``),
        #: cleared when the server says they changed and on each connection.
        self.listed: dict[str, Any] = {}
        # Messages dropped for their size by the connections that ended, and
        # the one that is up.
        self._dropped = 0
        self._invalid = 0
        self._link: Link | None = None
        # Connected, and not forwarded to until it was asked for everything.
        self._connecting: Client | None = None
        # Auto mode learned that the server does not serve subscriptions/listen.
        self._fallen_back = False
        self._started = 0.0
        self._last_now = 0.0
        self._path_open = False
        # The audiences of the forwarded calls in flight, by their progress
        # token (one entry per call: two callers may pick the same token).
        self._callers: dict[tuple[str, object], list[str]] = {}

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def dropped(self) -> int:
        """Messages not relayed because they were larger than the limit, over all connections."""
        return self._dropped + (self._link.dropped if self._link is not None else 0)

    @property
    def invalid(self) -> int:
        """Lines of the server that were no JSON-RPC message (stdio), over all connections."""
        return self._invalid + (self._link.invalid if self._link is not None else 0)

    # -- the loop -------------------------------------------------------------

    def _now(self) -> float:
        """Seconds since the bridge started, never going back (the policy's clock)."""
        self._last_now = max(self._last_now, anyio.current_time() - self._started)
        return self._last_now

    def _emit(self, event: Event) -> None:
        if self._on_event is not None:
            self._on_event(event)

    async def run(self) -> None:
        """Relay until cancelled; :class:`BridgeExhausted` when the policy gives up."""
        self._started = anyio.current_time()
        policy = self._policy
        # Asking is gated on a first exchange for a proxy; the bridge has
        # nothing to exchange first, so that gate is opened at once.
        policy.exchange_completed()
        try:
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
                self.settled.clear()
                reason = await self._connect_once()
                self._disconnected(reason)
                outcome = policy.ask_ended(self._now(), self._random())
                self._emit(outcome)
                if isinstance(outcome, AttemptsExhausted):
                    raise BridgeExhausted(outcome.attempts, reason)
                logger.info("connecting to MCP server %r again in %.2f s", self.name, outcome.delay)
        except BridgeExhausted:
            self.gone = True
            self._changed()
            raise
        finally:
            self.client = None
            self.settled.set()

    def _disconnected(self, reason: str, *, again: bool = False) -> None:
        """The connection ended; ``again`` when the next one is made at once."""
        self.client = None
        self.listed.clear()
        self.reason = reason
        if not again:
            self._path_open = False
            self.settled.set()
        logger.info("MCP server %r: connection ended: %s", self.name, reason)
        self._emit(McpDisconnected(reason=reason))
        self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change()

    async def _connect_once(self) -> str:
        """One connection (two when auto mode falls back); why it ended."""
        while True:
            link = self._link = Link()
            try:
                fall_back = await self._session(link)
            except Exception as error:
                link.mark_lost(describe(error))
                fall_back = False
            finally:
                self._dropped += link.dropped
                self._invalid += link.invalid
                self._link = None
            reason = link.reason or "the MCP session ended"
            if not fall_back:
                return reason
            self._fallen_back = True
            self._disconnected(
                "the MCP server does not serve subscriptions/listen: "
                "connecting again with the initialize handshake",
                again=True,
            )

    async def _session(self, link: Link) -> bool:
        """Connect, listen, relay; True when auto mode must fall back to the handshake."""
        resources_changed = Flag()

        def relay(raw: bytes) -> None:
            self._relay(raw, resources_changed)

        async with self._client(link, relay) as client:
            if not self._path_open:
                self._policy.path_opened(self._now())
                self._path_open = True
            server = client.server_info.name if client.server_info is not None else None
            version = client.protocol_version
            logger.info("connected to MCP server %r: %s (%s)", self.name, server, version)
            self.listed.clear()
            self._emit(McpConnected(protocol_version=version, server=server))
            if self.spec.mode == "listen" and version not in MODERN_PROTOCOL_VERSIONS:
                link.mark_lost(
                    f"the MCP server speaks {version}, and mode 'listen' needs 2026-07-28"
                )
                return False
            self._connecting = client
            try:
                return await self._hear(client, link, resources_changed)
            finally:
                self.client = None
                self._connecting = None

    def _ready(self, client: Client) -> None:
        """Forward to ``client`` from now on: the server was asked for everything.

        Not at once on connecting: auto mode may still find that it must
        connect again with the handshake, and what was forwarded meanwhile
        would fail for nothing.
        """
        if self.client is None:
            self.client = client
            self.reason = None
            self.settled.set()
            self._changed()

    def _transport(self, link: Link, relay: Callable[[bytes], None]) -> Transport:
        spec = self.spec
        if spec.command:
            return stdio_transport(
                spec.command,
                relay=relay,
                link=link,
                env=spec.env,
                cwd=spec.cwd,
                max_line_size=self._settings.max_message_size,
                name=self.name,
            )
        assert spec.url is not None
        return http_transport(
            spec.url,
            relay=relay,
            link=link,
            headers=spec.headers,
            max_message_size=self._settings.max_message_size,
        )

    def _client(self, link: Link, relay: Callable[[bytes], None]) -> Client:
        mode = "legacy" if self.spec.mode == "legacy" or self._fallen_back else "auto"
        return Client(
            self._transport(link, relay),
            mode=mode,
            log_level=self._level,
            read_timeout_seconds=self._settings.request_timeout,
            client_info=_CLIENT_INFO,
            cache=None,
        )

    def _relay(self, raw: bytes, resources_changed: Flag) -> None:
        """One raw JSON-RPC message from the server: publish it if it is a notification."""
        try:
            notification = Notification.from_bytes(raw)
        except FrameError:
            return  # not an object with a method: a response, or not JSON at all
        if is_request(notification):
            return  # a request from the server, not a notification
        try:
            audiences = self._audiences(notification) if self._callers else ()
            if audiences:
                for audience in audiences:
                    self.hub.publish(notification, audience=audience)
            else:
                self.hub.publish(notification)
        except Exception:
            # A subscriber's wake-up callback failed; the relay goes on.
            logger.exception("publishing a notification into the hub failed")
        # The acknowledgment of the bridge's own listen request says nothing
        # about the server staying up, so it does not make a connection healthy.
        if self._path_open and notification.method != _ACKNOWLEDGED:
            self._policy.notification_received()
        for stale in _STALE.get(notification.method, ()):
            self.listed.pop(stale, None)
        if notification.method == "notifications/resources/list_changed":
            resources_changed.set()

    def _audiences(self, notification: Notification) -> tuple[str, ...]:
        """Whose call ``notification`` is about: the audiences it goes to (none: everyone).

        The progress of a call forwarded under a token, by the call's
        progress token; what the server says on its own account (any other
        notification, progress of a token no call in flight carries) goes
        to everyone.
        """
        if notification.method != _PROGRESS or notification.params is None:
            return ()
        key = _progress_key(notification.params.get("progressToken"))
        callers = self._callers.get(key) if key is not None else None
        return tuple(dict.fromkeys(callers)) if callers else ()

    # -- one connection -------------------------------------------------------

    async def _hear(self, client: Client, link: Link, resources_changed: Flag) -> bool:
        """Ask for everything and keep the server checked until the link is lost."""
        fall_back = False
        async with anyio.create_task_group() as tasks:

            async def watch() -> None:
                await link.lost.wait()
                tasks.cancel_scope.cancel()

            tasks.start_soon(watch)
            tasks.start_soon(self._keep_checking, client, link)
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                served = await listen(
                    client,
                    link,
                    resources_changed,
                    name=self.name,
                    level=self._level,
                    resources=self.spec.resources,
                    on_subscribed=self._subscribed,
                )
                if not served and self.spec.mode == "auto":
                    fall_back = True
                    tasks.cancel_scope.cancel()
                elif not served:
                    self._ready(client)  # kept connected in mode "listen" all the same
            else:
                await subscribe(
                    client,
                    resources_changed,
                    name=self.name,
                    level=self._level,
                    resources=self.spec.resources,
                    on_subscribed=self._subscribed,
                )
            await anyio.sleep_forever()
        return fall_back

    def _subscribed(self, how: str, level: str | None, resources: Sequence[str]) -> None:
        if self._connecting is not None:
            self._ready(self._connecting)
        self._emit(McpSubscribed(how=how, log_level=level, resources=tuple(resources)))

    async def _keep_checking(self, client: Client, link: Link) -> None:
        """Ping every half ``ping_interval``; no answer within the other half is the end.

        So a server that stops answering is noticed within ``ping_interval``.
        Any answer counts, an error too: 2026-07-28 servers need not serve
        ``ping``, and answering at all is what shows they are there.
        """
        half = self._settings.ping_interval / 2
        while True:
            await anyio.sleep(half)
            try:
                with anyio.fail_after(half):
                    await client.session.send_request(types.PingRequest(), types.EmptyResult)
            except TimeoutError:
                link.mark_lost(f"the MCP server did not answer a ping within {half:g} s")
                return
            except MCPError as error:
                if error.code in _DEAD:
                    link.mark_lost(f"the MCP server did not answer a ping: {error.error.message}")
                    return
            except ValidationError:
                pass  # an answer all the same

    # -- forwarding -------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        *,
        timeout: float | None = None,
        audience: str | None = None,
    ) -> dict[str, Any] | ErrorData:
        """Send ``method`` with ``params`` to the server; its result, or its error.

        The params go as given (``_meta`` included: a ``progressToken`` in it
        reaches the server, and its progress is relayed like every other
        notification). The result comes back with every member the server
        wrote; an error from the server comes back as its
        :class:`ErrorData`. When the server is not connected, or the request
        fails on the way, the error says so.

        ``audience`` is whose request it is (the audience of the token the
        ask came with, see :meth:`~._relay.McpRelay.handle_exchange`): while
        it runs, the progress it carries a token for goes only to that
        audience's paths.
        """
        key = _progress_key(_progress_token(params)) if audience is not None else None
        if key is None or audience is None:
            return await self._send(method, params, timeout)
        callers = self._callers.setdefault(key, [])
        callers.append(audience)
        try:
            return await self._send(method, params, timeout)
        finally:
            callers.remove(audience)
            if not callers:
                del self._callers[key]

    async def _send(
        self, method: str, params: Mapping[str, Any] | None, timeout: float | None
    ) -> dict[str, Any] | ErrorData:
        """:meth:`request`, for whoever asked."""
        client = self.client
        if client is None:
            why = self.reason or "not connected yet"
            return ErrorData(
                code=ErrorCode.INTERNAL_ERROR,
                message=f"MCP server {self.name!r} is not connected: {why}",
            )
        request = types.Request[dict[str, Any] | None, str](
            method=method, params=dict(params) if params is not None else None
        )
        try:
            result = await client.session.send_request(
                request, _AnyResult, request_read_timeout_seconds=timeout
            )
        except MCPError as error:
            return _error_data(error.error)
        except ValidationError as error:
            return ErrorData(
                code=ErrorCode.INTERNAL_ERROR,
                message=f"MCP server {self.name!r} answered {method} with an invalid result",
                data={"errors": error.error_count()},
            )
        return dict(result.model_extra or {})


def _progress_token(params: Mapping[str, Any] | None) -> object:
    """The progress token in ``params``' ``_meta``, if any."""
    meta = params.get("_meta") if params is not None else None
    return meta.get("progressToken") if isinstance(meta, Mapping) else None


def _progress_key(token: object) -> tuple[str, object] | None:
    """``token`` as a key: a string and a number that look alike are different tokens."""
    if isinstance(token, bool) or not isinstance(token, (str, int)):
        return None
    return (type(token).__name__, token)


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
    resources: Sequence[str] | None = None,
    request_timeout: float = 30.0,
    ping_interval: float = DEFAULT_PING_INTERVAL,
    max_line_size: int = DEFAULT_MAX_LINE_SIZE,
    on_event: Callable[[Event], None] | None = None,
) -> None:
    """Relay every notification one MCP server sends into ``hub``, until cancelled.

    The server is a command speaking MCP on its standard input and output
    (``stdio_command``: a shell-style string or an argument list, with
    ``env`` added to the safe default environment and ``cwd``), or a
    Streamable HTTP endpoint (``url``, with ``headers``); give exactly one.
    ``mode`` is ``"auto"``, ``"listen"`` or ``"legacy"`` (a 2026-07-28
    revision string means ``"listen"``), ``resources`` the URIs to
    subscribe to (default: every listed resource). See ``docs/relay.md``
    for what the bridge asks for and how it notices a server going away
    (a ``ping`` unanswered within ``ping_interval`` seconds, among others).

    It connects again after ``policy``'s backoff with jitter (default
    ``ProxyPolicy(require_exchange=False)``); ``random`` draws the jitter.
    With ``max_attempts`` set on the policy, that many unhealthy connections
    in a row raise :class:`BridgeExhausted`. ``on_event`` gets
    :class:`McpConnected`, :class:`McpSubscribed`, :class:`McpDisconnected`
    and the policy's ``RetryScheduled`` / ``AttemptsExhausted``.

    Raises :class:`ValueError` for bad arguments and :class:`FileNotFoundError`
    when the command is not found, before connecting.
    """
    if (stdio_command is None) == (url is None):
        raise ValueError("give exactly one of stdio_command and url")
    if mode in MODERN_PROTOCOL_VERSIONS:
        mode = "listen"
    if stdio_command is not None:
        spec = ServerSpec.stdio(
            "stdio", stdio_command, env=env, cwd=cwd, resources=resources, mode=mode
        )
    else:
        assert url is not None
        spec = ServerSpec.http("http", url, headers=headers, resources=resources, mode=mode)
    settings = BridgeSettings(
        log_level=log_level,
        request_timeout=request_timeout,
        ping_interval=ping_interval,
        max_message_size=max_line_size,
    )
    check_command(spec)
    bridge = Bridge(
        hub,
        spec,
        settings=settings,
        policy=policy if policy is not None else ProxyPolicy(require_exchange=False),
        random=random if random is not None else random_module.random,
        on_event=on_event,
    )
    await bridge.run()
