"""Exchanges of kinds 0-3 forwarded to real MCP servers, and the progress they make.

The servers are the bundled example server (built on the official SDK),
over stdio behind a tee that copies what it writes, and over Streamable
HTTP in this process behind a recorder of what it writes; both revisions
the SDK speaks. Waits have deadlines that only guard against hangs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import textwrap
from pathlib import Path
from typing import Any, Final

import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.shared.exceptions import MCPError

from diverge_notifications.adapters.asyncio import listen, serve
from diverge_notifications.bridge import (
    McpConnected,
    McpDisconnected,
    McpRelay,
    McpSubscribed,
    RelayExhausted,
    ServerSpec,
)
from diverge_notifications.examples.mcp_server import CLOCK_URI, build_server
from diverge_notifications.sansio import (
    NEED_DATA,
    ErrorData,
    Exchange,
    ExchangeConnection,
    Hub,
    Notification,
    NotificationKind,
    ResultReceived,
    StreamEnded,
    StreamErrored,
)
from diverge_notifications.sansio.events import AttemptsExhausted
from diverge_notifications.sansio.mcp.model import ErrorCode
from diverge_notifications.sansio.wire.asks import Ask
from tests.relay_support import (
    FAST,
    HANG,
    Tee,
    Watched,
    example_command,
    free_port,
    http_example,
    running,
    server_env,
    server_process,
)

pytestmark = pytest.mark.filterwarnings(
    # The example server sends log messages the 2025-11-25 way on purpose.
    "ignore::mcp.shared.exceptions.MCPDeprecationWarning"
)

#: No bursts: the first one would come after an hour.
QUIET: Final = ("--interval", "3600")
MODES: Final = [
    pytest.param("legacy", "2025-11-25", id="2025-11-25"),
    pytest.param("auto", "2026-07-28", id="2026-07-28"),
]


def call(name: str, arguments: dict[str, Any] | None = None, token: Any = None) -> Ask:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    if token is not None:
        params["_meta"] = {"progressToken": token}
    return Ask(exchange=Exchange.CALL_TOOL, params=params)


LIST_TOOLS: Final = Ask(exchange=Exchange.LIST_TOOLS)
LIST_RESOURCES: Final = Ask(exchange=Exchange.LIST_RESOURCES)


def read(uri: str) -> Ask:
    return Ask(exchange=Exchange.READ_RESOURCE, params={"uri": uri})


def progress_of(notifications: list[Notification], token: Any) -> list[Notification]:
    return [
        n
        for n in notifications
        if n.kind is NotificationKind.PROGRESS and n.params and n.params["progressToken"] == token
    ]


def text_of(result: Any) -> str:
    assert isinstance(result, dict), result
    content = result["content"]
    assert isinstance(content, list) and content[0]["type"] == "text"
    text: str = content[0]["text"]
    return text


def example_spec(name: str, tmp_path: Path | None = None, mode: str = "auto") -> ServerSpec:
    command = example_command(*QUIET)
    if tmp_path is not None:
        command = Tee(tmp_path, command).command
    return ServerSpec.stdio(name, command, env=server_env(), mode=mode)


# --- a call's progress -----------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "revision", "token"),
    [
        pytest.param("legacy", "2025-11-25", "job-1", id="2025-11-25"),
        pytest.param("auto", "2026-07-28", 7, id="2026-07-28"),
    ],
)
def test_stdio_call_relays_its_progress_as_written(
    tmp_path: Path, mode: str, revision: str, token: Any
) -> None:
    tee = Tee(tmp_path, example_command(*QUIET))
    spec = ServerSpec.stdio("example", tee.command, env=server_env(), mode=mode)

    async def scenario() -> None:
        async with running(Watched([spec])) as watched:
            result = await watched.relay.handle_exchange(call("count", {"steps": 4}, token))
            assert text_of(result) == "counted to 4"
            assert isinstance(result, dict) and result["isError"] is False
            await watched.wait_for(lambda: len(progress_of(watched.received, token)) == 4)
            relayed = progress_of(watched.received, token)
            assert [n.params and n.params["progress"] for n in relayed] == [1, 2, 3, 4]
            written = [raw for raw in tee.notifications() if b"notifications/progress" in raw]
            assert [n.to_bytes() for n in relayed] == written
            assert [e.protocol_version for e in watched.of(McpConnected)] == [revision]

    asyncio.run(scenario())


@pytest.mark.parametrize(("mode", "revision"), MODES)
def test_http_call_relays_its_progress_as_written(mode: str, revision: str) -> None:
    async def scenario() -> None:
        async with http_example(interval=3600.0) as (url, recorder, _):
            spec = ServerSpec.http("example", url, mode=mode)
            async with running(Watched([spec])) as watched:
                result = await watched.relay.handle_exchange(call("count", {"steps": 3}, "h-1"))
                assert text_of(result) == "counted to 3"
                await watched.wait_for(lambda: len(progress_of(watched.received, "h-1")) == 3)
                written = [r for r in recorder.notifications() if b"notifications/progress" in r]
                relayed = progress_of(watched.received, "h-1")
                assert [n.to_bytes() for n in relayed] == written
                assert [e.protocol_version for e in watched.of(McpConnected)] == [revision]

    asyncio.run(scenario())


# --- several servers ---------------------------------------------------------------


def test_two_servers_union_and_a_name_both_list() -> None:
    specs = [example_spec("a", mode="legacy"), example_spec("b", mode="auto")]

    async def scenario() -> None:
        async with running(Watched(specs)) as watched:
            relay = watched.relay
            tools = await relay.handle_exchange(LIST_TOOLS)
            assert isinstance(tools, dict)
            assert sorted(tool["name"] for tool in tools["tools"]) == [
                "count",
                "count",
                "echo",
                "echo",
            ]
            assert set(tools) == {"tools"}  # every page read: no cursor to go on from
            resources = await relay.handle_exchange(LIST_RESOURCES)
            assert isinstance(resources, dict)
            assert [r["uri"] for r in resources["resources"]] == [CLOCK_URI, CLOCK_URI]
            both = await relay.handle_exchange(call("echo", {"text": "hi"}))
            assert both == ErrorData(
                code=ErrorCode.INVALID_PARAMS,
                message="tool 'echo' is listed by more than one MCP server: 'a' and 'b'",
                data={"servers": ["a", "b"]},
            )
            clash = await relay.handle_exchange(read(CLOCK_URI))
            assert isinstance(clash, ErrorData) and clash.data == {"servers": ["a", "b"]}
            unknown = await relay.handle_exchange(call("nobody-lists-this"))
            assert isinstance(unknown, ErrorData) and unknown.code == ErrorCode.INVALID_PARAMS
            cursor = await relay.handle_exchange(
                Ask(exchange=Exchange.LIST_TOOLS, params={"cursor": "x"})
            )
            assert isinstance(cursor, ErrorData) and cursor.code == ErrorCode.INVALID_PARAMS
            assert [s.connected for s in relay.status()] == [True, True]

    asyncio.run(scenario())


def test_one_server_failing_does_not_disturb_the_others() -> None:
    specs = [
        ServerSpec.stdio("exits", [sys.executable, "-c", "raise SystemExit(3)"]),
        example_spec("example"),
        ServerSpec.http("nobody", f"http://127.0.0.1:{free_port()}/mcp"),
    ]

    async def scenario() -> None:
        async with running(Watched(specs)) as watched:
            await watched.wait_for(
                lambda: (
                    len(watched.of(McpDisconnected, "exits")) >= 2
                    and len(watched.of(McpDisconnected, "nobody")) >= 2
                    and bool(watched.of(McpSubscribed, "example"))
                ),
                "the two failing servers retried and the example server subscribed",
            )
            tools = await watched.relay.handle_exchange(LIST_TOOLS)
            assert isinstance(tools, dict)
            assert sorted(tool["name"] for tool in tools["tools"]) == ["count", "echo"]
            echoed = await watched.relay.handle_exchange(call("echo", {"text": "still here"}))
            assert text_of(echoed) == "still here"
            status = {s.name: s for s in watched.relay.status()}
            assert status["example"].connected and not status["example"].gone
            assert not status["exits"].connected and status["exits"].reason
            assert not status["nobody"].connected and status["nobody"].reason
            assert len(watched.of(McpConnected, "example")) == 1

    asyncio.run(scenario())


def test_servers_that_are_gone_for_good() -> None:
    """With max_attempts, a server can be gone; the relay ends only when all are."""
    dead = [
        ServerSpec.stdio("exits", [sys.executable, "-c", "pass"]),
        ServerSpec.http("nobody", f"http://127.0.0.1:{free_port()}/mcp"),
    ]

    async def all_gone() -> None:
        watched = Watched(dead, max_attempts=2)
        with pytest.raises(RelayExhausted) as caught:
            await asyncio.wait_for(watched.relay.run(), HANG)
        assert set(caught.value.reasons) == {"exits", "nobody"}
        assert all(s.gone for s in watched.relay.status())
        assert [type(e) for e in watched.of(AttemptsExhausted)] == [AttemptsExhausted] * 2
        answer = await watched.relay.handle_exchange(LIST_TOOLS)
        assert isinstance(answer, ErrorData) and "no MCP server is connected" in answer.message

    async def one_left() -> None:
        async with running(Watched([dead[0], example_spec("example")], max_attempts=2)) as w:
            await w.wait_for(lambda: bool(w.of(AttemptsExhausted, "exits")), "'exits' gone")
            echoed = await w.relay.handle_exchange(call("echo", {"text": "on"}))
            assert text_of(echoed) == "on"
            assert [s.gone for s in w.relay.status()] == [True, False]

    asyncio.run(all_gone())
    asyncio.run(one_left())


def test_options_are_checked_before_anything_runs() -> None:
    hub = Hub()
    with pytest.raises(ValueError, match="no MCP server"):
        McpRelay(hub, [])
    with pytest.raises(ValueError, match="share a name: 'a'"):
        McpRelay(hub, [example_spec("a"), example_spec("a")])
    with pytest.raises(FileNotFoundError, match="MCP server 'x': command not found"):
        McpRelay(hub, [ServerSpec.stdio("x", "no-such-mcp-server-command --flag")])
    with pytest.raises(ValueError, match="exchange_timeout"):
        McpRelay(hub, [example_spec("a")], exchange_timeout=0)
    with pytest.raises(ValueError, match="log level"):
        McpRelay(hub, [example_spec("a")], log_level="INFO")


# --- errors, unchanged -------------------------------------------------------------


def test_the_servers_errors_come_back_unchanged() -> None:
    async def direct() -> Any:
        async with Client(build_server().server, mode="legacy") as client:
            with pytest.raises(MCPError) as caught:
                await client.session.read_resource("demo://no-such-resource")
            return caught.value.error

    async def relayed() -> Any:
        async with running(Watched([example_spec("example", mode="legacy")])) as watched:
            return await watched.relay.handle_exchange(read("demo://no-such-resource"))

    expected = asyncio.run(direct())
    answer = asyncio.run(relayed())
    assert answer == ErrorData(code=expected.code, message=expected.message, data=expected.data)


# --- the environment of a stdio server ------------------------------------------------

ENV_SERVER: Final = textwrap.dedent(
    """
    import json, os
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("env")

    @server.tool()
    def environment() -> str:
        return json.dumps(dict(os.environ))

    server.run()
    """
)


def test_a_stdio_server_gets_the_environment_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp.client.stdio import get_default_environment

    script = tmp_path / "env_server.py"
    script.write_text(ENV_SERVER)
    monkeypatch.setenv("FOO_SECRET", "must not leak")
    given = {"DIVERGE_GIVEN": "yes", "HOME": str(tmp_path)}
    spec = ServerSpec.stdio("env", [sys.executable, str(script)], env=given, cwd=str(tmp_path))

    async def scenario() -> dict[str, str]:
        async with running(Watched([spec])) as watched:
            result = await watched.relay.handle_exchange(call("environment"))
            environment: dict[str, str] = json.loads(text_of(result))
            return environment

    environment = asyncio.run(scenario())
    inherited = get_default_environment()
    assert "FOO_SECRET" not in environment
    assert environment["DIVERGE_GIVEN"] == "yes"
    assert environment["HOME"] == str(tmp_path)  # what is given wins over what is inherited
    for key, value in inherited.items():
        if key != "HOME":
            assert environment[key] == value
    # Python itself may set LC_CTYPE (PEP 538); nothing else appears.
    assert set(environment) - set(inherited) - set(given) <= {"LC_CTYPE"}


# --- end to end: serve answers the exchange, listen hears the progress -------------------


async def exchange(authority: str, ask: Ask) -> list[Any]:
    """One exchange over a real connection; the events it gave."""
    host, _, port = authority.rpartition(":")
    connection = ExchangeConnection(authority, ask)
    reader, writer = await asyncio.open_connection(host, int(port))
    events: list[Any] = []
    try:
        writer.write(connection.data_to_send())
        while not any(isinstance(e, StreamEnded | StreamErrored) for e in events):
            event = connection.next_event()
            if event is NEED_DATA:
                connection.receive_data(await asyncio.wait_for(reader.read(65536), HANG))
                continue
            events.append(event)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return events


def test_served_exchange_and_progress_on_a_path(tmp_path: Path) -> None:
    tee = Tee(tmp_path, example_command(*QUIET))
    spec = ServerSpec.stdio("example", tee.command, env=server_env())

    async def scenario() -> None:
        hub = Hub()
        relay = McpRelay(hub, [spec], backoff=FAST)
        heard: list[Notification] = []
        async with await serve(hub, exchange_handler=relay.handle_exchange) as server:
            relaying = asyncio.create_task(relay.run())

            async def hear() -> None:
                async for item in listen(server.url):
                    assert isinstance(item, Notification)
                    heard.append(item)

            hearing = asyncio.create_task(hear())
            try:
                while hub.subscribers == 0:
                    await asyncio.sleep(0.01)
                authority = server.url.removeprefix("http://")
                events = await exchange(authority, call("count", {"steps": 5}, "served-1"))
                results = [e for e in events if isinstance(e, ResultReceived)]
                assert len(results) == 1
                assert text_of(results[0].result) == "counted to 5"
                deadline = asyncio.get_running_loop().time() + HANG
                while len(progress_of(heard, "served-1")) < 5:
                    assert asyncio.get_running_loop().time() < deadline, heard
                    await asyncio.sleep(0.02)
                written = [r for r in tee.notifications() if b'"served-1"' in r]
                assert [n.to_bytes() for n in progress_of(heard, "served-1")] == written
            finally:
                for task in (hearing, relaying):
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task

    asyncio.run(scenario())


# --- trio -----------------------------------------------------------------------------


def test_the_relay_under_trio() -> None:
    trio = pytest.importorskip("trio")
    hub = Hub()
    subscriber = hub.subscribe()
    relay = McpRelay(hub, [example_spec("example")], backoff=FAST)

    async def scenario() -> Any:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(relay.run)
            result = await relay.handle_exchange(call("count", {"steps": 2}, "trio-1"))
            with trio.fail_after(HANG):
                while len(progress_of(heard, "trio-1")) < 2:
                    heard.extend(subscriber.take())
                    await trio.sleep(0.02)
            nursery.cancel_scope.cancel()
        return result

    heard: list[Notification] = []
    assert text_of(trio.run(scenario)) == "counted to 2"


# --- limits ------------------------------------------------------------------------------

LOUD_SERVER: Final = textwrap.dedent(
    """
    import sys
    from mcp.server.mcpserver import Context, MCPServer

    server = MCPServer("loud")

    @server.tool()
    async def shout(ctx: Context, size: int) -> str:
        await ctx.info("x" * size)
        return "shouted"

    @server.tool()
    def big(size: int) -> str:
        return "y" * size

    if sys.argv[1:]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]), json_response=True)
    else:
        server.run()
    """
)
LIMIT: Final = 64 * 1024


def loud_command(tmp_path: Path, *arguments: str) -> list[str]:
    script = tmp_path / "loud_server.py"
    script.write_text(LOUD_SERVER)
    return [sys.executable, str(script), *arguments]


def test_a_stdio_message_over_the_limit_is_dropped_and_counted(tmp_path: Path) -> None:
    spec = ServerSpec.stdio("loud", loud_command(tmp_path), mode="legacy")

    async def scenario() -> None:
        async with running(Watched([spec], max_message_size=LIMIT)) as watched:
            loud = await watched.relay.handle_exchange(call("shout", {"size": LIMIT}))
            assert text_of(loud) == "shouted"
            quiet = await watched.relay.handle_exchange(call("shout", {"size": 10}))
            assert text_of(quiet) == "shouted"
            await watched.wait_for(
                lambda: any(n.kind is NotificationKind.LOGGING_MESSAGE for n in watched.received)
            )
            logs = [n for n in watched.received if n.kind is NotificationKind.LOGGING_MESSAGE]
            assert [n.params and n.params["data"] for n in logs] == ["x" * 10]
            (status,) = watched.relay.status()
            assert status.dropped == 1

    asyncio.run(scenario())


def test_an_http_answer_over_the_limit_is_refused_and_counted(tmp_path: Path) -> None:
    port = free_port()
    spec = ServerSpec.http("loud", f"http://127.0.0.1:{port}/mcp")

    async def scenario() -> None:
        async with running(Watched([spec], max_message_size=LIMIT)) as watched:
            small = await watched.relay.handle_exchange(call("big", {"size": 10}))
            assert text_of(small) == "y" * 10
            large = await watched.relay.handle_exchange(call("big", {"size": LIMIT}))
            assert large == ErrorData(
                code=ErrorCode.INTERNAL_ERROR, message="the answer is too large"
            )
            (status,) = watched.relay.status()
            assert status.dropped == 1 and status.connected

    with server_process(loud_command(tmp_path, str(port)), port):
        asyncio.run(scenario())
