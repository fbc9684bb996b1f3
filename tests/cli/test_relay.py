"""``serve`` relaying real MCP servers, from the command line, to ``listen``, ``ask`` and ``Proxy``.

Every ``serve`` here is a subprocess started as a user would start it
(tests/interop.py), relaying real MCP servers: the bundled example server
(behind a tee that copies what it writes, so that what arrives can be
compared with it byte for byte), a small server that reports its
environment, the example server over Streamable HTTP behind a recorder of
request headers, and ``@modelcontextprotocol/server-everything`` from npm
where ``node`` and ``npm`` are installed (skipped, saying why, otherwise).
Every wait has a deadline that only guards against a hang; nothing here
asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest

pytest.importorskip("mcp")

from diverge_notifications.adapters import asyncio as asyncio_adapter
from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.adapters import trio as trio_adapter
from diverge_notifications.cli.output import compact_json
from diverge_notifications.sansio import Notification, NotificationReceived, StreamOpened
from tests.bridge.test_everything import everything  # the fixture: server-everything from npm
from tests.bridge.test_relay_forwarding import ENV_SERVER
from tests.interop import (
    HANG_GUARD,
    ROOT,
    ListenProcess,
    ServeProcess,
    cli_command,
    cli_env,
    log_message,
    run_cli,
)
from tests.relay_support import Tee, example_command, free_port, wait_for_port

__all__ = ["everything"]  # imported to be found by pytest, as a fixture

#: The example server with no bursts of its own while a test runs.
QUIET: Final = ("--interval", "3600")
#: What a server started by ``serve`` needs to import this package from a checkout.
CHECKOUT_ENV: Final = f"PYTHONPATH={ROOT}"


def ask(url: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return run_cli(cli_command("ask", url, *args), timeout=60)


def bridge_events(serve: ServeProcess) -> list[dict[str, Any]]:
    """The relay's events ``serve`` reported: ``bridge: {...}`` lines on standard error."""
    prefix = b"bridge: {"  # the bridge's logger says other things too
    return [
        json.loads(line[len(prefix) - 1 :])
        for line in serve.stderr.messages
        if line.startswith(prefix)
    ]


def wait_for_bridge(serve: ServeProcess, event: str, server: str | None = None) -> None:
    def seen() -> bool:
        return any(
            record["event"] == event and (server is None or record["mcp_server"] == server)
            for record in bridge_events(serve)
        )

    serve.stderr.wait(lambda _lines: seen())


def progress_lines(lines: list[bytes], token: str) -> list[bytes]:
    needle = f'"progressToken":"{token}"'.encode()
    return [line for line in lines if b"notifications/progress" in line and needle in line]


# --- Proxy.call_tool -> serve --mcp-stdio -> the example server -> the proxy's iterator -------


def hear_progress_asyncio(url: str, token: str) -> tuple[dict[str, Any], list[Notification]]:
    async def scenario() -> tuple[dict[str, Any], list[Notification]]:
        proxy = asyncio_adapter.Proxy(url, events=True)
        tools = await proxy.list_tools()
        assert {tool["name"] for tool in tools["tools"]} == {"echo", "count"}
        heard: list[Notification] = []
        opened = asyncio.Event()

        async def read() -> None:
            async with contextlib.aclosing(proxy.notifications()) as items:
                async for item in items:
                    if isinstance(item, StreamOpened):
                        opened.set()
                    elif isinstance(item, NotificationReceived):
                        heard.append(item.notification)

        reading = asyncio.create_task(read())
        try:
            await asyncio.wait_for(opened.wait(), HANG_GUARD)
            result = await proxy.call_tool("count", {"steps": 4}, progress_token=token)
            deadline = asyncio.get_running_loop().time() + HANG_GUARD
            while len(progress_of(heard, token)) < 4:
                assert asyncio.get_running_loop().time() < deadline, heard
                await asyncio.sleep(0.02)
        finally:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading
        return result, heard

    return asyncio.run(scenario())


def hear_progress_trio(url: str, token: str) -> tuple[dict[str, Any], list[Notification]]:
    import trio

    async def scenario() -> tuple[dict[str, Any], list[Notification]]:
        proxy = trio_adapter.Proxy(url, events=True)
        await proxy.list_tools()
        heard: list[Notification] = []
        opened = trio.Event()
        result: dict[str, Any] = {}

        async def read() -> None:
            async with contextlib.aclosing(proxy.notifications()) as items:
                async for item in items:
                    if isinstance(item, StreamOpened):
                        opened.set()
                    elif isinstance(item, NotificationReceived):
                        heard.append(item.notification)
                        if len(progress_of(heard, token)) == 4:
                            return

        with trio.fail_after(HANG_GUARD):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read)
                await opened.wait()
                result.update(await proxy.call_tool("count", {"steps": 4}, progress_token=token))
        return result, heard

    return trio.run(scenario)


def hear_progress_blocking(url: str, token: str) -> tuple[dict[str, Any], list[Notification]]:
    with blocking_adapter.Proxy(url, events=True) as proxy:
        proxy.list_tools()
        heard: list[Notification] = []
        opened = threading.Event()
        items = proxy.notifications()

        def read() -> None:
            for item in items:
                if isinstance(item, StreamOpened):
                    opened.set()
                elif isinstance(item, NotificationReceived):
                    heard.append(item.notification)
                    if len(progress_of(heard, token)) == 4:
                        return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert opened.wait(HANG_GUARD)
        result = proxy.call_tool("count", {"steps": 4}, progress_token=token)
        reader.join(HANG_GUARD)
        assert not reader.is_alive(), heard
        items.close()
        return result, heard


def progress_of(notifications: list[Notification], token: str) -> list[Notification]:
    return [
        n
        for n in notifications
        if n.method == "notifications/progress" and (n.params or {}).get("progressToken") == token
    ]


@pytest.mark.parametrize(
    "hear",
    [hear_progress_asyncio, hear_progress_trio, hear_progress_blocking],
    ids=["asyncio", "trio", "blocking"],
)
def test_a_proxys_call_through_serve_brings_its_progress_on_the_proxys_own_path(
    tmp_path: Path, hear: Callable[[str, str], tuple[dict[str, Any], list[Notification]]]
) -> None:
    tee = Tee(tmp_path, example_command(*QUIET))
    token = f"proxy-{hear.__name__}"
    with ServeProcess(
        "--mcp-stdio", shlex.join(tee.command), "--mcp-env", CHECKOUT_ENV, stdin=False
    ) as serve:
        result, heard = hear(serve.url, token)
        assert result["structuredContent"] == {"result": "counted to 4"}
        progress = progress_of(heard, token)
        assert [(n.params or {})["progress"] for n in progress] == [1, 2, 3, 4]
        # As the server wrote them, byte for byte.
        written = [raw for raw in tee.notifications() if token.encode() in raw]
        assert [n.to_bytes() for n in progress] == written


# --- ask and listen, from the command line ----------------------------------------------------


def test_ask_call_tool_with_a_progress_token_and_listen_hears_it_byte_for_byte(
    tmp_path: Path,
) -> None:
    tee = Tee(tmp_path, example_command(*QUIET))
    command = shlex.join(tee.command)
    with (
        ServeProcess("--mcp-stdio", command, "--mcp-env", CHECKOUT_ENV, stdin=False) as serve,
        ListenProcess(serve.url, "--events") as listen,
    ):
        listen.wait_for_event("StreamOpened")
        params = {"name": "count", "arguments": {"steps": 3}, "_meta": {"progressToken": "cli-1"}}
        done = ask(serve.url, "call-tool", json.dumps(params))
        assert done.returncode == 0, done.stderr
        (line,) = done.stdout.splitlines()
        assert json.loads(line)["structuredContent"] == {"result": "counted to 3"}
        assert listen.stdout is not None
        listen.stdout.wait(lambda lines: len(progress_lines(lines, "cli-1")) == 3)
        written = [raw for raw in tee.notifications() if b'"cli-1"' in raw]
        assert progress_lines(listen.notification_lines(), "cli-1") == [
            compact_json(raw) for raw in written
        ]
        listed = ask(serve.url, "list-tools")
        assert listed.returncode == 0
        assert [tool["name"] for tool in json.loads(listed.stdout)["tools"]] == ["echo", "count"]
        read = ask(serve.url, "read-resource", '{"uri": "demo://clock"}')
        assert read.returncode == 0 and b'"contents"' in read.stdout
        assert ask(serve.url, "list-resources").returncode == 0


def test_a_server_killed_under_serve_is_reported_and_comes_back(tmp_path: Path) -> None:
    tee = Tee(tmp_path, example_command(*QUIET))
    command = shlex.join(tee.command)
    with ServeProcess("--mcp-stdio", command, "--mcp-env", CHECKOUT_ENV, stdin=False) as serve:
        wait_for_bridge(serve, "McpSubscribed")
        first = tee.pid()
        os.kill(first, signal.SIGKILL)
        wait_for_bridge(serve, "McpDisconnected")
        serve.stderr.wait(
            lambda _lines: [r["event"] for r in bridge_events(serve)].count("McpSubscribed") == 2
        )
        assert tee.pid() != first
        assert serve.proc.poll() is None  # serve kept serving
        events = [record["event"] for record in bridge_events(serve)]
        assert "RetryScheduled" in events
        again = ask(serve.url, "call-tool", '{"name": "echo", "arguments": {"text": "back"}}')
        assert again.returncode == 0 and b"back" in again.stdout
        assert serve.interrupt() == 0


# --- several servers from the mcpServers configuration ---------------------------------------


def test_mcp_config_with_two_servers_lists_both_and_names_both_for_a_shared_tool(
    tmp_path: Path,
) -> None:
    example = {
        "command": sys.executable,
        "args": ["-m", "diverge_notifications.examples.mcp_server", *QUIET],
        "env": {"PYTHONPATH": str(ROOT)},
        "description": "ignored, as other clients' members are",
    }
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"a": example, "b": example}}))
    with ServeProcess("--mcp-config", str(config), stdin=False) as serve:
        listed = ask(serve.url, "list-tools")
        assert listed.returncode == 0, listed.stderr
        names = [tool["name"] for tool in json.loads(listed.stdout)["tools"]]
        assert names == ["echo", "count", "echo", "count"]  # the union, server by server
        both = ask(serve.url, "call-tool", '{"name": "count", "arguments": {"steps": 1}}')
        assert both.returncode == 3
        assert both.stdout == b""
        error = json.loads(both.stderr)
        assert error["code"] == -32602
        assert error["data"] == {"servers": ["a", "b"]}
        assert "'a' and 'b'" in error["message"]
        subscribed = {
            r["mcp_server"] for r in bridge_events(serve) if r["event"] == "McpSubscribed"
        }
        assert subscribed == {"a", "b"}


# --- the environment, the headers, the mode ---------------------------------------------------


def test_mcp_env_reaches_the_server_and_the_parents_secrets_do_not(tmp_path: Path) -> None:
    script = tmp_path / "env_server.py"
    script.write_text(ENV_SERVER)
    env = cli_env(FOO_SECRET="must not leak")
    with ServeProcess(
        "--mcp-stdio",
        shlex.join([sys.executable, str(script)]),
        "--mcp-env",
        "DIVERGE_GIVEN=yes=really",
        "--mcp-env",
        "DIVERGE_EMPTY=",
        stdin=False,
        env=env,
    ) as serve:
        result = ask(serve.url, "call-tool", '{"name": "environment"}')
        assert result.returncode == 0, result.stderr
        environment = json.loads(json.loads(result.stdout)["content"][0]["text"])
    assert environment["DIVERGE_GIVEN"] == "yes=really"  # split at the first "="
    assert environment["DIVERGE_EMPTY"] == ""
    assert "FOO_SECRET" not in environment
    assert "PYTHONPATH" not in environment  # not inherited either


HTTP_SERVER: Final = textwrap.dedent(
    """
    import json, sys
    import uvicorn
    from diverge_notifications.examples.mcp_server import build_server

    port, log = int(sys.argv[1]), sys.argv[2]
    app = build_server(interval=3600).server.streamable_http_app()

    async def recording(scope, receive, send):
        if scope["type"] == "http":
            with open(log, "a") as out:
                headers = {k.decode(): v.decode() for k, v in scope["headers"]}
                out.write(json.dumps(headers) + "\\n")
        await app(scope, receive, send)

    uvicorn.run(recording, host="127.0.0.1", port=port, log_level="warning")
    """
)


@contextlib.contextmanager
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The example server over Streamable HTTP in a process, recording every request's headers."""
    script = tmp_path / "http_server.py"
    script.write_text(HTTP_SERVER)
    log = tmp_path / "headers.jsonl"
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(script), str(port), str(log)],
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp", log
    finally:
        process.kill()
        process.wait(HANG_GUARD)


def test_mcp_header_goes_with_every_request_and_mcp_mode_legacy_is_the_handshake(
    tmp_path: Path,
) -> None:
    with (
        http_server(tmp_path) as (url, log),
        ServeProcess(
            "--mcp-url",
            url,
            "--mcp-header",
            "X-Diverge-Test:  yes, sent ",
            "--mcp-mode",
            "legacy",
            "--mcp-resource",
            "demo://clock",
            stdin=False,
        ) as serve,
    ):
        wait_for_bridge(serve, "McpSubscribed")
        (connected,) = [r for r in bridge_events(serve) if r["event"] == "McpConnected"]
        assert connected["protocol_version"] == "2025-11-25"
        (subscribed,) = [r for r in bridge_events(serve) if r["event"] == "McpSubscribed"]
        assert subscribed["resources"] == ["demo://clock"]
        requests = [json.loads(line) for line in log.read_text().splitlines()]
        assert requests and all(r.get("x-diverge-test") == "yes, sent" for r in requests)


def test_mcp_mode_listen_asks_on_the_new_revision(tmp_path: Path) -> None:
    command = shlex.join(example_command(*QUIET))
    with ServeProcess(
        "--mcp-stdio", command, "--mcp-env", CHECKOUT_ENV, "--mcp-mode", "listen", stdin=False
    ) as serve:
        wait_for_bridge(serve, "McpSubscribed")
        (connected,) = [r for r in bridge_events(serve) if r["event"] == "McpConnected"]
        assert connected["protocol_version"] == "2026-07-28"
        (subscribed,) = [r for r in bridge_events(serve) if r["event"] == "McpSubscribed"]
        assert subscribed["how"] == "subscriptions/listen"


# --- what serve does when a server cannot be used, or is gone -------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--mcp-env", "A=1"], "--mcp-env: applies to --mcp-stdio servers"),
        (["--mcp-stdio", "x", "--mcp-header", "A: 1"], "--mcp-header: applies to --mcp-url"),
        (["--mcp-stdio", "x", "--mcp-env", "A"], "is not NAME=VALUE"),
        (["--mcp-url", "mcp.example.com"], "must be an http:// or https:// URL"),
        (["--mcp-stdio", "x", "--mcp-mode", "often"], "mode must be one of auto, listen, legacy"),
        (["--mcp-config", "/no/such/mcp.json"], "cannot read '/no/such/mcp.json'"),
    ],
)
def test_an_unusable_option_or_configuration_exits_2(args: list[str], message: str) -> None:
    result = run_cli(cli_command("serve", "--port", "0", *args))
    assert result.returncode == 2, result.stderr
    assert message.encode() in result.stderr
    assert b"serving on" not in result.stderr  # refused before anything listens


def test_a_configuration_without_servers_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {"off": {"command": "x", "disabled": true}}}')
    result = run_cli(cli_command("serve", "--port", "0", "--mcp-config", str(config)))
    assert result.returncode == 2
    assert b"'mcpServers' names no server" in result.stderr


def test_every_server_gone_with_an_attempt_limit_exits_1() -> None:
    dying = shlex.join([sys.executable, "-c", "raise SystemExit(3)"])
    result = run_cli(
        cli_command("serve", "--port", "0", "--mcp-stdio", dying, "--mcp-max-attempts", "2"),
        timeout=60,
    )
    assert result.returncode == 1, result.stderr
    assert b"the MCP bridge failed: every MCP server is gone" in result.stderr
    assert b"the MCP server exited with status 3" in result.stderr
    events = [
        json.loads(line[len(b"bridge: ") :])
        for line in map(log_message, result.stderr.splitlines())
        if line.startswith(b"bridge: {")
    ]
    assert [e["event"] for e in events if e["event"] == "AttemptsExhausted"] == [
        "AttemptsExhausted"
    ]


# --- @modelcontextprotocol/server-everything, from the command line -------------------------


def test_server_everything_progress_and_logs_through_ask_and_listen(
    tmp_path: Path, everything: Path
) -> None:
    tee = Tee(tmp_path, ["node", str(everything), "stdio"])
    with (
        ServeProcess("--mcp-stdio", shlex.join(tee.command), stdin=False) as serve,
        ListenProcess(serve.url, "--events") as listen,
    ):
        listen.wait_for_event("StreamOpened")
        assert listen.stdout is not None
        operation = {
            "name": "trigger-long-running-operation",
            "arguments": {"duration": 1, "steps": 5},
            "_meta": {"progressToken": "op-1"},
        }
        done = ask(serve.url, "call-tool", json.dumps(operation))
        assert done.returncode == 0, done.stderr
        assert b"Long running operation completed" in done.stdout
        listen.stdout.wait(lambda lines: len(progress_lines(lines, "op-1")) == 5)
        written = [raw for raw in tee.notifications() if b'"op-1"' in raw]
        assert len(written) == 5
        assert progress_lines(listen.notification_lines(), "op-1") == [
            compact_json(raw) for raw in written
        ]

        toggled = ask(serve.url, "call-tool", '{"name": "toggle-simulated-logging"}')
        assert toggled.returncode == 0, toggled.stderr
        assert b"Started simulated" in toggled.stdout

        def logs(lines: list[bytes]) -> list[bytes]:
            return [
                line
                for line in lines
                if b"notifications/message" in line
                and (b"-level message" in line or b" level-message" in line)
            ]

        listen.stdout.wait(lambda lines: bool(logs(lines)))
        wire = {compact_json(raw) for raw in tee.notifications()}
        assert set(logs(listen.notification_lines())) <= wire
