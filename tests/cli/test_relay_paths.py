"""What ``serve``'s paths carry and how they end, end to end with real processes.

A lost MCP server under ``serve --mcp-stdio`` ends the open paths with an
error naming it, asks are refused ``503`` until it is back, and a server
given up for good ends ``serve`` with status 1; a JSON-RPC request on
``serve --stdin`` is not relayed; ``--log-level``, ``--list-changed`` and
``--resource`` narrow what the paths carry. Every wait has a deadline that
only guards against a hang; nothing here asserts how long anything took.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from tests.interop import (
    ROOT,
    ListenProcess,
    ServeProcess,
    cli_command,
    run_cli,
)

#: The example server, started through a wrapper that notes its pid, waits while a
#: ``hold`` file exists (the server is down for as long as a test likes) and exits 3
#: while a ``fail`` file exists; then it becomes the example server (same pid).
WRAPPER: Final = textwrap.dedent(
    """
    import os, sys, time
    folder = sys.argv[1]
    with open(os.path.join(folder, "pids"), "a") as pids:
        pids.write(f"{os.getpid()}\\n")
    while os.path.exists(os.path.join(folder, "hold")):
        time.sleep(0.05)
    if os.path.exists(os.path.join(folder, "fail")):
        print("not starting: the fail file is there")
        raise SystemExit(3)
    os.execv(sys.executable, [sys.executable, "-m", "diverge_notifications.examples.mcp_server",
                              "--interval", "0.2"])
    """
)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Where the wrapper keeps its files."""
    pytest.importorskip("mcp", reason="the 'mcp' extra is not installed")
    return tmp_path


@contextlib.contextmanager
def servers_killed(folder: Path) -> Iterator[None]:
    """Every server the wrapper started is gone on the way out (they hold serve's stderr)."""
    try:
        yield
    finally:
        (folder / "hold").unlink(missing_ok=True)
        pids = folder / "pids"
        for pid in pids.read_text().split() if pids.exists() else ():
            with contextlib.suppress(OSError):
                os.kill(int(pid), signal.SIGKILL)


def wrapped_server(folder: Path) -> list[str]:
    """``serve``'s options for the example server behind :data:`WRAPPER` in ``folder``."""
    script = folder / "wrapper.py"
    script.write_text(WRAPPER)
    server = {"command": sys.executable, "args": [str(script), str(folder)]}
    config = {"mcpServers": {"example": {**server, "env": {"PYTHONPATH": str(ROOT)}}}}
    (folder / "mcp.json").write_text(json.dumps(config))
    return ["--mcp-config", str(folder / "mcp.json")]


def bridge_events(serve: ServeProcess) -> list[dict[str, Any]]:
    """The bridge's events (its JSON lines; its other lines are said in words)."""
    prefix = b"bridge: "
    lines = serve.stderr.messages
    return [json.loads(line[len(prefix) :]) for line in lines if line.startswith(prefix + b"{")]


def subscribed(serve: ServeProcess, count: int = 1) -> None:
    serve.stderr.wait(
        lambda _lines: sum(e["event"] == "McpSubscribed" for e in bridge_events(serve)) >= count
    )


def kill_server(folder: Path) -> None:
    pid = int((folder / "pids").read_text().split()[-1])
    os.kill(pid, signal.SIGKILL)


def event_names(listen: ListenProcess) -> list[str]:
    return [record["event"] for record in listen.events()]


def events_after(listen: ListenProcess, name: str) -> list[str]:
    names = event_names(listen)
    return names[names.index(name) + 1 :] if name in names else []


# --- a lost MCP server ------------------------------------------------------------------------


def test_a_killed_mcp_server_errors_the_path_refuses_asks_and_is_heard_again(
    folder: Path,
) -> None:
    with (
        ServeProcess(*wrapped_server(folder), stdin=False) as serve,
        ListenProcess(serve.url, "--events") as listen,
        servers_killed(folder),
    ):
        subscribed(serve)
        assert listen.stdout is not None
        listen.stdout.wait_for_count(1)
        (folder / "hold").touch()  # the server started again waits: an outage
        kill_server(folder)
        errored = listen.wait_for_event("StreamErrored")
        message = errored["error"]["message"]
        assert message == (
            "MCP server 'example' is not connected: the MCP server was killed by signal 9 (SIGKILL)"
        )
        # An ask during the outage is refused 503, with the same reason.
        once = run_cli(cli_command("listen", serve.url, "--once", "--events"))
        (refused,) = [json.loads(line) for line in once.stderr.splitlines() if b"NotServed" in line]
        assert refused["status"] == 503 and message in refused["reason"]
        # The listener's own re-asks are refused the same way.
        listen.stderr.wait(lambda _lines: "NotServed" in events_after(listen, "StreamErrored"))
        for record in listen.events()[event_names(listen).index("StreamErrored") + 1 :]:
            if record["event"] == "NotServed":
                assert record["status"] == 503 and message in record["reason"]
        (folder / "hold").unlink()
        subscribed(serve, 2)
        heard = len(listen.stdout.lines)
        listen.stdout.wait_for_count(heard + 1)
        assert "StreamOpened" in events_after(listen, "StreamErrored")


def test_a_server_given_up_errors_the_path_and_serve_exits_1(folder: Path) -> None:
    options = wrapped_server(folder)
    with (
        ServeProcess(
            *options, "--mcp-max-attempts", "2", "--log-level", "none", stdin=False
        ) as serve,
        ListenProcess(serve.url, "--events") as listen,
        servers_killed(folder),
    ):
        subscribed(serve)
        assert listen.stdout is not None
        listen.stdout.wait_for_count(1)
        # A connection that lived less than healthy_after and broke is the first
        # failure; started again, the server exits 3 at once: the second, given up.
        (folder / "fail").touch()
        kill_server(folder)
        errored = listen.wait_for_event("StreamErrored")
        assert "killed by signal 9" in errored["error"]["message"]
        assert serve.wait() == 1
        assert "StreamEnded" not in event_names(listen)
    # --log-level none: the server is asked for the least there is, and no log message passes.
    asked = [e["log_level"] for e in bridge_events(serve) if e["event"] == "McpSubscribed"]
    assert asked == ["emergency"]
    methods = {json.loads(line)["method"] for line in listen.notification_lines()}
    assert "notifications/message" not in methods and "notifications/progress" in methods
    log = serve.stderr.text()
    assert "the MCP bridge failed: every MCP server is gone: example: " in log
    assert "exited with status 3" in log
    assert "'not starting: the fail file is there'" in log  # its stray output, quoted


# --- requests are not notifications -----------------------------------------------------------


def test_a_request_line_on_stdin_is_skipped_and_named() -> None:
    lines = [
        b'{"jsonrpc":"2.0","method":"notifications/diverge/first"}',
        b'{"jsonrpc":"2.0","id":7,"method":"ping"}',
        b'{"jsonrpc":"2.0","id":8,"result":{}}',
        b'{"jsonrpc":"2.0","method":"notifications/diverge/last"}',
    ]
    with ServeProcess("--stdin") as serve, ListenProcess(serve.url, "--events") as listen:
        listen.wait_for_event("StreamOpened")
        for line in lines:
            serve.send_line(line)
        assert listen.stdout is not None
        listen.stdout.wait_for_count(2)
        serve.stderr.wait_for_text("line 3: ")
        serve.close_stdin()
        assert serve.interrupt() == 0
        listen.interrupt()
    methods = [json.loads(line)["method"] for line in listen.notification_lines()]
    assert methods == ["notifications/diverge/first", "notifications/diverge/last"]
    log = serve.stderr.text()
    assert 'line 2: a JSON-RPC request (it has an "id"), not a notification; skipped' in log
    assert 'line 3: a JSON-RPC response (it has an "id"), not a notification; skipped' in log


# --- what the paths carry ----------------------------------------------------------------------


def notification(method: str, **params: Any) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params:
        message["params"] = params
    return json.dumps(message, separators=(",", ":")).encode()


MIXED: Final = [
    *(
        notification("notifications/message", level=level, data=level)
        for level in ("debug", "info", "notice", "warning", "error")
    ),
    notification("notifications/progress", progressToken="t", progress=1),
    notification("notifications/tools/list_changed"),
    notification("notifications/prompts/list_changed"),
    notification("notifications/resources/list_changed"),
    notification("notifications/resources/updated", uri="demo://a"),
    notification("notifications/resources/updated", uri="demo://b"),
    notification("notifications/diverge/custom", n=1),
]


def carried(*filters: str) -> list[dict[str, Any]]:
    """What a listener hears of MIXED and a last one from ``serve --stdin`` with ``filters``."""
    with (
        ServeProcess("--stdin", *filters) as serve,
        ListenProcess(serve.url, "--events") as listen,
    ):
        listen.wait_for_event("StreamOpened")
        for line in MIXED:
            serve.send_line(line)
        serve.send_line(notification("notifications/diverge/last"))
        assert listen.stdout is not None
        listen.stdout.wait(lambda lines: any(b"diverge/last" in line for line in lines))
        serve.close_stdin()
        assert serve.interrupt() == 0
        listen.interrupt()
    return [json.loads(line) for line in listen.notification_lines()]


def test_log_level_list_changed_and_resource_narrow_what_paths_carry() -> None:
    got = carried("--log-level", "warning", "--list-changed", "tools", "--resource", "demo://a")
    assert [(n["method"], n.get("params")) for n in got] == [
        ("notifications/message", {"level": "warning", "data": "warning"}),
        ("notifications/message", {"level": "error", "data": "error"}),
        ("notifications/progress", {"progressToken": "t", "progress": 1}),
        ("notifications/tools/list_changed", None),
        ("notifications/resources/updated", {"uri": "demo://a"}),
        ("notifications/diverge/custom", {"n": 1}),
        ("notifications/diverge/last", None),
    ]


def test_log_level_none_and_list_changed_none_carry_no_log_and_no_list_change() -> None:
    methods = [n["method"] for n in carried("--log-level", "none", "--list-changed", "none")]
    assert methods == [
        "notifications/progress",
        "notifications/resources/updated",  # no --resource: every resource
        "notifications/resources/updated",
        "notifications/diverge/custom",
        "notifications/diverge/last",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--list-changed", "tools,widgets"], "--list-changed: not a list of tools"),
        (["--log-level", "loud"], "--log-level: invalid choice"),
        (["--exchange-timeout", "0"], "--exchange-timeout: must be a positive number"),
    ],
)
def test_a_bad_filter_or_timeout_is_a_usage_error(args: list[str], message: str) -> None:
    result = run_cli(cli_command("serve", "--port", "0", *args))
    assert result.returncode == 2, result.stderr
    assert message.encode() in result.stderr


# --- how long a forwarded call may take ------------------------------------------------------

SLOW_SERVER: Final = textwrap.dedent(
    """
    import anyio
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("slow")

    @server.tool()
    async def nap(seconds: float) -> str:
        await anyio.sleep(seconds)
        return "rested"

    server.run()
    """
)


def test_exchange_timeout_bounds_a_forwarded_call(tmp_path: Path) -> None:
    pytest.importorskip("mcp", reason="the 'mcp' extra is not installed")
    script = tmp_path / "slow_server.py"
    script.write_text(SLOW_SERVER)
    command = f"{sys.executable} {script}"
    with ServeProcess("--mcp-stdio", command, "--exchange-timeout", "1", stdin=False) as serve:
        subscribed(serve)
        quick = run_cli(cli_command("ask", serve.url, "call-tool", NAP.format(0)), timeout=60)
        slow = run_cli(cli_command("ask", serve.url, "call-tool", NAP.format(30)), timeout=60)
    assert quick.returncode == 0, quick.stderr
    assert b"rested" in quick.stdout
    assert slow.returncode != 0 and b"rested" not in slow.stdout
    # Answered an error when --exchange-timeout ran out, not after the handlers' default 30 s.
    assert json.loads(slow.stderr)["message"] == "the exchange handler took longer than 1 s"


NAP: Final = '{{"name": "nap", "arguments": {{"seconds": {}}}}}'
