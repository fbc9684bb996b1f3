"""A small MCP server that keeps talking, built with the official MCP Python SDK.

Run it over stdio (what ``serve --mcp-stdio`` starts) or over Streamable HTTP::

    python -m diverge_notifications.examples.mcp_server
    python -m diverge_notifications.examples.mcp_server --http 127.0.0.1:8765   # at /mcp

Every ``--interval`` seconds (``--bursts`` times, or for ever) it sends each
client one *burst*:

1. ``notifications/progress`` about the burst's own job (token ``burst-N``),
   at half way and when done;
2. ``notifications/message`` at ``debug``, ``info``, ``warning`` and
   ``error``, between the two progress reports;
3. ``notifications/tools/list_changed``: the ``ephemeral`` tool comes or goes;
4. ``notifications/resources/updated`` for ``demo://clock``, whose content
   is the number of bursts sent so far;
5. ``notifications/diverge/example/tick``, a notification the MCP schema does
   not know, with a ``_meta`` member, so a relay can show that it forwards
   those too.

How a burst reaches a client depends on the revision the client chose:

* **2025-11-25 and older** (the ``initialize`` handshake): the bursts start
  once the client sent ``notifications/initialized`` and go out on the
  connection's own stream (stdio, or the GET stream of Streamable HTTP).
  Log messages honour ``logging/setLevel`` (``info`` until a client sets a
  level) and resource updates go only to subscribed URIs.
* **2026-07-28**: each ``subscriptions/listen`` stream gets the bursts. The
  list change and the resource update go through the SDK's subscription
  bus, so the stream's filter applies; progress, the log messages (only at
  and above the level the listen request opted in to) and the custom
  notification ride the listen request's own stream.

Its tools: ``echo`` (answers with its ``text``), ``count`` (counts to
``steps``, 3 by default, sending ``notifications/progress`` for each step
when the call carries a progress token) and ``ephemeral``, which comes and
goes with the bursts. Its resource: ``demo://clock``.

The server is built on :class:`mcp.server.mcpserver.MCPServer`; see
:func:`build_server`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any, Final, Protocol, cast

try:
    import anyio
    import mcp_types as types
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel.server import NotificationOptions, Server
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.resources import TextResource
    from mcp.server.models import InitializationOptions
    from mcp.server.session import ServerSession
    from mcp.server.stdio import stdio_server
    from mcp.server.subscriptions import (
        InMemorySubscriptionBus,
        ListenHandler,
        ResourcesListChanged,
        ResourceUpdated,
        ToolsListChanged,
    )
    from mcp.shared.exceptions import MCPDeprecationWarning
except ImportError as error:  # pragma: no cover - exercised without the extra
    raise ImportError(
        "diverge_notifications.examples.mcp_server needs the 'mcp' extra: "
        "pip install 'diverge-notifications[mcp]'",
        name=error.name,
    ) from error

__all__ = [
    "CLOCK_URI",
    "LEVELS",
    "LOGGER",
    "TICK_METHOD",
    "Example",
    "build_server",
    "main",
    "serve_http",
    "serve_stdio",
]

#: The resource every burst updates.
CLOCK_URI: Final = "demo://clock"
#: The levels of the log messages in a burst, least severe first.
LEVELS: Final[tuple[types.LoggingLevel, ...]] = ("debug", "info", "warning", "error")
#: The ``logger`` of the log messages.
LOGGER: Final = "diverge-example"
#: The method of the custom notification that ends each burst.
TICK_METHOD: Final = "notifications/diverge/example/tick"

_ALL_LEVELS: Final[tuple[types.LoggingLevel, ...]] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_EPHEMERAL_TOOL: Final = "ephemeral"


class TickNotification(types.Notification[dict[str, Any], str]):
    """A notification outside the MCP schema; the SDK sends it like any other."""


class _Sink(Protocol):
    """Where one client's bursts go; one implementation per protocol era."""

    async def progress(self, token: str, progress: float, total: float, message: str) -> None: ...

    async def log(self, level: types.LoggingLevel, data: Any) -> None: ...

    async def tools_changed(self) -> None: ...

    async def resource_updated(self, uri: str) -> None: ...

    async def custom(self, notification: TickNotification) -> None: ...


class _HandshakeClient:
    """What a client of the handshake era asked for on its connection."""

    def __init__(self) -> None:
        self.level: types.LoggingLevel = "info"
        self.subscriptions: set[str] = set()


class _HandshakeSink:
    """Bursts on the connection's own stream (2025-11-25 and older)."""

    def __init__(self, session: ServerSession, client: _HandshakeClient) -> None:
        self._session = session
        self._client = client

    async def progress(self, token: str, progress: float, total: float, message: str) -> None:
        await self._session.send_progress_notification(token, progress, total, message)

    async def log(self, level: types.LoggingLevel, data: Any) -> None:
        if _ALL_LEVELS.index(level) >= _ALL_LEVELS.index(self._client.level):
            await self._session.send_log_message(level, data, logger=LOGGER)

    async def tools_changed(self) -> None:
        await self._session.send_tool_list_changed()

    async def resource_updated(self, uri: str) -> None:
        if uri in self._client.subscriptions:
            await self._session.send_resource_updated(uri)

    async def resources_changed(self) -> None:
        await self._session.send_resource_list_changed()

    async def custom(self, notification: TickNotification) -> None:
        # The session's signature names the schema's union; any notification
        # model is sent the same way (dumped by alias, then written).
        await self._session.send_notification(cast(types.ServerNotification, notification))


class _ListenSink:
    """Bursts on one ``subscriptions/listen`` stream (2026-07-28)."""

    def __init__(
        self, session: ServerSession, request_id: types.RequestId, bus: InMemorySubscriptionBus
    ) -> None:
        self._session = session
        self._request_id = request_id
        self._bus = bus

    async def progress(self, token: str, progress: float, total: float, message: str) -> None:
        await self._session.send_progress_notification(
            token, progress, total, message, related_request_id=str(self._request_id)
        )

    async def log(self, level: types.LoggingLevel, data: Any) -> None:
        # The session drops levels below what the listen request opted in to.
        await self._session.send_log_message(
            level, data, logger=LOGGER, related_request_id=self._request_id
        )

    async def tools_changed(self) -> None:
        await self._bus.publish(ToolsListChanged())

    async def resource_updated(self, uri: str) -> None:
        await self._bus.publish(ResourceUpdated(uri=uri))

    async def custom(self, notification: TickNotification) -> None:
        await self._session.send_notification(
            cast(types.ServerNotification, notification), related_request_id=self._request_id
        )


def _client_key(ctx: ServerRequestContext[Any, Any]) -> str | None:
    """Which connection a handshake-era message came on: its HTTP session id, or None on stdio."""
    headers = getattr(ctx.request, "headers", None)
    if headers is None:
        return None
    value = headers.get("mcp-session-id")
    return value if isinstance(value, str) else None


class Example:
    """The example server: an :class:`MCPServer` plus the bursts it sends.

    ``interval`` is the time before each burst, in seconds (positive);
    ``bursts`` how many each client gets (``None``: for ever). The last
    burst's custom notification has ``"last": true``.
    """

    def __init__(self, *, interval: float = 2.0, bursts: int | None = None) -> None:
        if not interval > 0:
            raise ValueError(f"interval must be positive, got {interval!r}")
        if bursts is not None and bursts < 1:
            raise ValueError(f"bursts must be at least 1, got {bursts!r}")
        self.interval = interval
        self.bursts = bursts
        self.sent = 0
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus)
        self._clients: dict[str | None, _HandshakeClient] = {}
        self._sinks: dict[_HandshakeSink, None] = {}
        self._ephemeral_listed = False
        self.server: MCPServer[Any] = MCPServer(
            "diverge-example",
            version="1.0",
            instructions="Sends a burst of notifications every few seconds.",
            log_level="WARNING",
            subscriptions=self.bus,
        )
        self._register()

    @property
    def lowlevel(self) -> Server[Any]:
        """The low-level server under :attr:`server`.

        MCPServer 2.3 has no public way to serve the handshake-era
        ``logging/setLevel`` and ``resources/subscribe`` or to wrap
        ``subscriptions/listen``, so they are registered here.
        """
        return self.server._lowlevel_server

    def initialization_options(self) -> InitializationOptions:
        """What the ``initialize`` answer over stdio advertises.

        List changes of tools and resources, logging and resource
        subscriptions. (Over Streamable HTTP the SDK's session manager
        builds the answer itself, without the ``listChanged`` flags; the
        list changes are sent all the same.)
        """
        return self.lowlevel.create_initialization_options(
            NotificationOptions(tools_changed=True, resources_changed=True)
        )

    def _register(self) -> None:
        server = self.server

        @server.tool()
        def echo(text: str) -> str:
            """Answer with the text given."""
            return text

        @server.tool()
        async def count(ctx: Context, steps: int = 3) -> str:
            """Count to ``steps``, reporting progress at each step (given a progress token)."""
            for step in range(1, steps + 1):
                await ctx.report_progress(step, steps, f"step {step} of {steps}")
            return f"counted to {steps}"

        @server.resource(CLOCK_URI, mime_type="application/json")
        def clock() -> str:
            """How many bursts the server has sent."""
            return json.dumps({"bursts": self.sent})

        lowlevel = self.lowlevel
        lowlevel.add_request_handler(
            "logging/setLevel", types.SetLevelRequestParams, self._set_level
        )
        lowlevel.add_request_handler(
            "resources/subscribe", types.SubscribeRequestParams, self._subscribe
        )
        lowlevel.add_request_handler(
            "resources/unsubscribe", types.UnsubscribeRequestParams, self._unsubscribe
        )
        lowlevel.add_notification_handler(
            "notifications/initialized", types.NotificationParams, self._initialized
        )
        lowlevel.add_request_handler(
            "subscriptions/listen", types.SubscriptionsListenRequestParams, self._serve_listen
        )

    # -- changes an application makes ------------------------------------------

    async def add_resource(self, uri: str, text: str) -> None:
        """Offer one more resource, ``uri`` with content ``text``, and tell every client."""
        self.server.add_resource(TextResource(uri=uri, name=uri, text=text))
        for sink in list(self._sinks):
            await sink.resources_changed()
        await self.bus.publish(ResourcesListChanged())

    async def resource_changed(self, uri: str) -> None:
        """Tell every client subscribed to ``uri`` that it changed."""
        for sink in list(self._sinks):
            await sink.resource_updated(uri)
        await self.bus.publish(ResourceUpdated(uri=uri))

    # -- the handshake era ----------------------------------------------------

    def _client(self, ctx: ServerRequestContext[Any, Any]) -> _HandshakeClient:
        return self._clients.setdefault(_client_key(ctx), _HandshakeClient())

    async def _set_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        self._client(ctx).level = params.level
        return types.EmptyResult()

    async def _subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        self._client(ctx).subscriptions.add(params.uri)
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self._client(ctx).subscriptions.discard(params.uri)
        return types.EmptyResult()

    async def _initialized(
        self, ctx: ServerRequestContext[Any, Any], params: types.NotificationParams
    ) -> None:
        # The SDK runs notification handlers as tasks of the connection and
        # cancels them when it ends, so the bursts end with the connection.
        key = _client_key(ctx)
        client = self._client(ctx)
        sink = _HandshakeSink(ctx.session, client)
        self._sinks[sink] = None
        try:
            await self._tick(sink)
        finally:
            del self._sinks[sink]
            if self._clients.get(key) is client:
                del self._clients[key]

    # -- 2026-07-28 -----------------------------------------------------------

    async def _serve_listen(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.SubscriptionsListenRequestParams,
    ) -> types.SubscriptionsListenResult:
        if ctx.request_id is None:
            return await self._listen(ctx, params)
        async with anyio.create_task_group() as tasks:
            # The first burst waits `interval`, so the acknowledgment the
            # SDK's handler sends at once stays the stream's first frame.
            tasks.start_soon(self._tick, _ListenSink(ctx.session, ctx.request_id, self.bus))
            result = await self._listen(ctx, params)
            tasks.cancel_scope.cancel()
        return result

    # -- the bursts -----------------------------------------------------------

    async def _tick(self, sink: _Sink) -> None:
        burst = 0
        while self.bursts is None or burst < self.bursts:
            await anyio.sleep(self.interval)
            burst += 1
            await self._burst(sink, burst, last=burst == self.bursts)

    async def _burst(self, sink: _Sink, burst: int, *, last: bool) -> None:
        self.sent += 1
        token = f"burst-{burst}"
        await sink.progress(token, 1, 2, f"burst {burst}: half way")
        for level in LEVELS:
            await sink.log(level, {"burst": burst, "text": f"a {level} message"})
        await sink.progress(token, 2, 2, f"burst {burst}: done")
        self._toggle_tool()
        await sink.tools_changed()
        await sink.resource_updated(CLOCK_URI)
        await sink.custom(
            TickNotification(
                method=TICK_METHOD,
                params={
                    "burst": burst,
                    "last": last,
                    "pid": os.getpid(),
                    "sample": {"ratio": 0.25, "text": "naïve ✓", "list": [1, "two", 3.5]},
                    "_meta": {"diverge.example/origin": "ticker"},
                },
            )
        )

    def _toggle_tool(self) -> None:
        if self._ephemeral_listed:
            self.server.remove_tool(_EPHEMERAL_TOOL)
        else:
            self.server.add_tool(_ephemeral, name=_EPHEMERAL_TOOL)
        self._ephemeral_listed = not self._ephemeral_listed


def _ephemeral() -> str:
    """A tool that comes and goes with the bursts."""
    return "here for now"


def build_server(*, interval: float = 2.0, bursts: int | None = None) -> Example:
    """The example server; run it with :func:`serve_stdio` or :func:`serve_http`."""
    return Example(interval=interval, bursts=bursts)


async def serve_stdio(example: Example) -> None:
    """Serve ``example`` on this process's standard input and output until the client leaves."""
    async with stdio_server() as (read_stream, write_stream):
        await example.lowlevel.run(read_stream, write_stream, example.initialization_options())


async def serve_http(example: Example, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve ``example`` over Streamable HTTP at ``http://host:port/mcp`` until cancelled."""
    import uvicorn

    app = example.server.streamable_http_app(host=host)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    await uvicorn.Server(config).serve()


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not HOST:PORT or PORT: {text!r}") from None
    return host or "127.0.0.1", number


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m diverge_notifications.examples.mcp_server [--http HOST:PORT]``."""
    parser = argparse.ArgumentParser(
        prog="python -m diverge_notifications.examples.mcp_server",
        description="An MCP server that sends a burst of notifications every few seconds.",
    )
    parser.add_argument(
        "--interval", type=float, default=2.0, help="seconds before each burst (default 2)"
    )
    parser.add_argument(
        "--bursts", type=int, default=None, help="bursts per client (default: for ever)"
    )
    parser.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        type=_host_port,
        default=None,
        help="serve Streamable HTTP at http://HOST:PORT/mcp instead of stdio",
    )
    args = parser.parse_args(argv)
    try:
        example = build_server(interval=args.interval, bursts=args.bursts)
    except ValueError as error:
        parser.error(str(error))
    # The example sends log messages the way 2025-11-25 clients expect, which
    # the SDK marks as deprecated for 2026-07-28; that is the point here.
    warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
    try:
        if args.http is None:
            anyio.run(serve_stdio, example)
        else:
            host, port = args.http
            print(f"MCP server at http://{host}:{port}/mcp", file=sys.stderr, flush=True)
            anyio.run(serve_http, example, host, port)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
