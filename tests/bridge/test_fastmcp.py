"""A fastmcp server, over stdio and over Streamable HTTP, relayed and forwarded to.

fastmcp 4.2 speaks MCP 2026-07-28 but does not serve ``subscriptions/listen``:
auto mode must fall back to the initialize handshake and the older methods.
It pages its listings (two entries a page here), offers a resource template,
and sends a resource update and a log message from its ``bump`` tool.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import sys
import textwrap
from pathlib import Path
from typing import Any, Final

import pytest

pytest.importorskip("mcp")
# Only the servers import fastmcp (slow to import): finding it is enough here.
if importlib.util.find_spec("fastmcp") is None:
    pytest.skip("fastmcp (Python 3.11+) is not installed", allow_module_level=True)

from diverge_notifications.bridge import McpConnected, McpDisconnected, McpSubscribed, ServerSpec
from diverge_notifications.sansio import Exchange, Notification, NotificationKind
from diverge_notifications.sansio.wire.asks import Ask
from tests.relay_support import (
    Watched,
    example_command,
    free_port,
    running,
    server_env,
    server_process,
)

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")

FASTMCP_SERVER: Final = textwrap.dedent(
    """
    import sys
    import warnings

    from fastmcp import Context, FastMCP

    warnings.simplefilter("ignore")
    mcp = FastMCP("relay-test-fastmcp", list_page_size=2)
    counter = {"value": 0}


    @mcp.resource("fm://counter")
    def read_counter() -> str:
        return str(counter["value"])


    def _static(index):
        def static() -> str:
            return f"static {index}"

        return static


    for index in range(3):
        mcp.resource(f"fm://static/{index}")(_static(index))


    @mcp.resource("fm://items/{item}")
    def item(item: str) -> str:
        return f"item {item}"


    @mcp.tool()
    async def bump(ctx: Context) -> int:
        counter["value"] += 1
        await ctx.session.send_resource_updated("fm://counter")
        await ctx.info(f"counter is {counter['value']}")
        return counter["value"]


    def _tool(index):
        def tool() -> str:
            return f"tool {index}"

        return tool


    for index in range(4):
        mcp.tool(_tool(index), name=f"tool-{index}")

    if len(sys.argv) > 1:
        mcp.run(
            transport="http",
            host="127.0.0.1",
            port=int(sys.argv[1]),
            show_banner=False,
            log_level="WARNING",
        )
    else:
        mcp.run(show_banner=False, log_level="WARNING")
    """
)
FASTMCP_TOOLS: Final = ["bump", "tool-0", "tool-1", "tool-2", "tool-3"]
FASTMCP_RESOURCES: Final = ["fm://counter", "fm://static/0", "fm://static/1", "fm://static/2"]


def fastmcp_command(tmp_path: Path, *arguments: str) -> list[str]:
    script = tmp_path / "fastmcp_server.py"
    script.write_text(FASTMCP_SERVER)
    return [sys.executable, str(script), *arguments]


def call(name: str) -> Ask:
    return Ask(exchange=Exchange.CALL_TOOL, params={"name": name})


def read(uri: str) -> Ask:
    return Ask(exchange=Exchange.READ_RESOURCE, params={"uri": uri})


def updates(notifications: list[Notification]) -> list[Notification]:
    return [n for n in notifications if n.kind is NotificationKind.RESOURCE_UPDATED]


def contents_of(result: Any) -> str:
    assert isinstance(result, dict), result
    text: str = result["contents"][0]["text"]
    return text


def assert_fell_back(watched: Watched, name: str) -> None:
    versions = [e.protocol_version for e in watched.of(McpConnected, name)]
    assert versions[:2] == ["2026-07-28", "2025-11-25"]
    reasons = [e.reason for e in watched.of(McpDisconnected, name)]
    assert "does not serve subscriptions/listen" in reasons[0]
    subscribed = watched.of(McpSubscribed, name)
    assert subscribed and subscribed[0].how == "logging/setLevel + resources/subscribe"


def test_stdio_beside_the_example_server(tmp_path: Path) -> None:
    """Auto mode falls back; the union reads every page; reads go where templates say."""
    specs = [
        ServerSpec.stdio("fastmcp", fastmcp_command(tmp_path)),
        ServerSpec.stdio("example", example_command("--interval", "3600"), env=server_env()),
    ]

    async def scenario() -> None:
        async with running(Watched(specs)) as watched:
            relay = watched.relay
            tools = await relay.handle_exchange(Ask(exchange=Exchange.LIST_TOOLS))
            assert isinstance(tools, dict)
            assert [t["name"] for t in tools["tools"]] == [*FASTMCP_TOOLS, "echo", "count"]
            resources = await relay.handle_exchange(Ask(exchange=Exchange.LIST_RESOURCES))
            assert isinstance(resources, dict)
            uris = [r["uri"] for r in resources["resources"]]
            assert uris == [*FASTMCP_RESOURCES, "demo://clock"]
            assert contents_of(await relay.handle_exchange(read("fm://items/42"))) == "item 42"
            assert contents_of(await relay.handle_exchange(read("fm://static/2"))) == "static 2"
            clock = contents_of(await relay.handle_exchange(read("demo://clock")))
            assert clock == '{"bursts": 0}'
            bumped = await relay.handle_exchange(call("bump"))
            assert isinstance(bumped, dict) and bumped["structuredContent"] == {"result": 1}
            await watched.wait_for(lambda: bool(updates(watched.received)), "the update")
            assert [n.params for n in updates(watched.received)] == [{"uri": "fm://counter"}]
            assert_fell_back(watched, "fastmcp")

    asyncio.run(scenario())


def test_http_auto_mode_relays_updates_and_notices_death(tmp_path: Path) -> None:
    port = free_port()
    command = fastmcp_command(tmp_path, str(port))
    spec = ServerSpec.http("fastmcp", f"http://127.0.0.1:{port}/mcp")

    async def scenario() -> None:
        async with running(Watched([spec], ping_interval=1.0)) as watched:
            with server_process(command, port):
                bumped = await watched.relay.handle_exchange(call("bump"))
                assert isinstance(bumped, dict) and bumped["structuredContent"] == {"result": 1}
                await watched.wait_for(lambda: bool(updates(watched.received)), "the update")
                logs = [n for n in watched.received if n.kind is NotificationKind.LOGGING_MESSAGE]
                assert logs and logs[-1].params and logs[-1].params["level"] == "info"
                assert_fell_back(watched, "fastmcp")
                lost_before = len(watched.of(McpDisconnected))
            # The server is killed on leaving the block.
            await watched.wait_for(
                lambda: len(watched.of(McpDisconnected)) > lost_before, "the death noticed"
            )
            with server_process(command, port):
                # A new server: the bridge comes back, in legacy mode straight away.
                await watched.wait_for(
                    lambda: len(watched.of(McpConnected)) >= 3, "the bridge back"
                )
                assert watched.of(McpConnected)[-1].protocol_version == "2025-11-25"
                again = await watched.relay.handle_exchange(call("bump"))
                assert isinstance(again, dict) and again["structuredContent"] == {"result": 1}

    asyncio.run(scenario())


def test_http_server_that_stops_answering_is_noticed_by_ping(tmp_path: Path) -> None:
    port = free_port()
    spec = ServerSpec.http("fastmcp", f"http://127.0.0.1:{port}/mcp", mode="legacy")

    async def scenario() -> None:
        async with running(Watched([spec], ping_interval=1.0)) as watched:
            with server_process(fastmcp_command(tmp_path, str(port)), port) as process:
                await watched.wait_for(lambda: bool(watched.of(McpSubscribed)), "subscribed")
                os.kill(process.pid, signal.SIGSTOP)
                try:
                    await watched.wait_for(
                        lambda: bool(watched.of(McpDisconnected)), "the silence noticed"
                    )
                finally:
                    os.kill(process.pid, signal.SIGCONT)
            (lost, *_) = watched.of(McpDisconnected)
            assert lost.reason == "the MCP server did not answer a ping within 0.5 s"

    asyncio.run(scenario())
