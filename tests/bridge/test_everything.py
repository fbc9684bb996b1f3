"""The reference MCP server, ``@modelcontextprotocol/server-everything``, through the relay.

It comes from the npm registry, installed once per test session into the
session's temporary directory; without ``node`` and ``npm``, or without the
registry, these tests are skipped, saying why. Over stdio the server runs
behind a tee that copies what it writes, so that what reached the hub can be
compared with it byte for byte.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any, Final

import pytest

pytest.importorskip("mcp")

from diverge_notifications.bridge import McpConnected, McpDisconnected, McpSubscribed, ServerSpec
from diverge_notifications.sansio import ErrorData, Exchange, Notification, NotificationKind
from diverge_notifications.sansio.wire.asks import Ask
from tests.relay_support import HANG, Tee, Watched, free_port, running, wait_for_port

#: The release line the relay was tested against.
PACKAGE: Final = "@modelcontextprotocol/server-everything@2026.8"
#: Seconds npm may take to install it.
INSTALL_TIMEOUT: Final = 180.0


@pytest.fixture(scope="session")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's entry point, installed from npm for this session."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are not installed: server-everything cannot be run")
    prefix = tmp_path_factory.mktemp("server-everything")
    try:
        subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", PACKAGE],
            check=True,
            capture_output=True,
            timeout=INSTALL_TIMEOUT,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        stderr = getattr(error, "stderr", b"") or b""
        pytest.skip(f"{PACKAGE} could not be installed from npm: {stderr[-300:]!r}")
    entry = prefix / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist"
    if not (entry / "index.js").exists():
        pytest.skip(f"{PACKAGE} installed without dist/index.js")
    return entry / "index.js"


def long_operation(token: Any, steps: int = 5) -> Ask:
    """A call of about ``steps / 5`` seconds, reporting progress ``steps`` times."""
    return Ask(
        exchange=Exchange.CALL_TOOL,
        params={
            "name": "trigger-long-running-operation",
            "arguments": {"duration": steps / 5, "steps": steps},
            "_meta": {"progressToken": token},
        },
    )


def progress_of(notifications: list[Notification], token: Any) -> list[Notification]:
    return [
        n
        for n in notifications
        if n.kind is NotificationKind.PROGRESS and n.params and n.params["progressToken"] == token
    ]


def simulated_logs(notifications: list[Notification]) -> list[Notification]:
    return [
        n
        for n in notifications
        if n.kind is NotificationKind.LOGGING_MESSAGE
        and n.params
        and isinstance(n.params.get("data"), str)
        and ("-level message" in n.params["data"] or " level-message" in n.params["data"])
    ]


def text_of(result: Any) -> str:
    assert isinstance(result, dict), result
    text: str = result["content"][0]["text"]
    return text


def test_stdio_progress_logs_and_a_restart(tmp_path: Path, everything: Path) -> None:
    tee = Tee(tmp_path, ["node", str(everything), "stdio"])
    spec = ServerSpec.stdio("everything", tee.command)

    async def scenario() -> None:
        async with running(Watched([spec])) as watched:
            relay = watched.relay
            result = await relay.handle_exchange(long_operation("everything-1"))
            assert "Long running operation completed" in text_of(result)
            await watched.wait_for(
                lambda: len(progress_of(watched.received, "everything-1")) == 5, "5 progress"
            )
            progress = progress_of(watched.received, "everything-1")
            assert [n.params and n.params["progress"] for n in progress] == [1, 2, 3, 4, 5]

            toggled = await relay.handle_exchange(
                Ask(exchange=Exchange.CALL_TOOL, params={"name": "toggle-simulated-logging"})
            )
            assert "Started simulated" in text_of(toggled)
            await watched.wait_for(lambda: bool(simulated_logs(watched.received)), "a log")

            # Killed in the middle of a call: the call fails, the bridge comes back.
            calling = asyncio.create_task(relay.handle_exchange(long_operation("killed", 20)))
            await watched.wait_for(lambda: bool(progress_of(watched.received, "killed")))
            first = tee.pid()
            os.kill(first, signal.SIGKILL)
            failed = await asyncio.wait_for(calling, HANG)
            assert isinstance(failed, ErrorData), failed
            await watched.wait_for(
                lambda: len(watched.of(McpSubscribed)) >= 2, "the bridge back after the kill"
            )
            assert tee.pid() != first
            assert len(watched.of(McpDisconnected)) == 1
            assert [e.protocol_version for e in watched.of(McpConnected)] == ["2025-11-25"] * 2
            again = await relay.handle_exchange(long_operation("everything-2", steps=3))
            assert "Long running operation completed" in text_of(again)
            await watched.wait_for(
                lambda: len(progress_of(watched.received, "everything-2")) == 3, "3 progress"
            )
            # Everything both servers wrote reached the hub, as written and in order.
            await watched.wait_for(
                lambda: len(watched.received) == len(tee.notifications()), "the whole wire"
            )
            assert [n.to_bytes() for n in watched.received] == tee.notifications()

    asyncio.run(scenario())


def test_streamable_http_progress(everything: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        ["node", str(everything), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        spec = ServerSpec.http("everything", f"http://127.0.0.1:{port}/mcp")

        async def scenario() -> list[Notification]:
            async with running(Watched([spec])) as watched:
                result = await watched.relay.handle_exchange(long_operation("http-1", steps=4))
                assert "Long running operation completed" in text_of(result)
                await watched.wait_for(
                    lambda: len(progress_of(watched.received, "http-1")) == 4, "4 progress"
                )
                return progress_of(watched.received, "http-1")

        progress = asyncio.run(scenario())
    finally:
        process.kill()
        process.wait()
    # As the server wrote them: its own member order, "jsonrpc" last.
    assert [n.to_bytes() for n in progress] == [
        b'{"method":"notifications/progress","params":{"progress":%d,"total":4,'
        b'"progressToken":"http-1"},"jsonrpc":"2.0"}' % step
        for step in range(1, 5)
    ]
