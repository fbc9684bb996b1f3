"""What the relay tests share: real MCP servers to start, and a relay to watch.

Import from test modules as ``from relay_support import ...``. This
module holds no tests itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterator,
    MutableMapping,
    Sequence,
)
from pathlib import Path
from typing import Any, Final

from diverge_notifications.bridge import McpRelay, ServerSpec
from diverge_notifications.examples.mcp_server import Example, build_server
from diverge_notifications.sansio import Backoff, Event, Hub, Notification

ROOT: Final = Path(__file__).resolve().parents[1]
#: Deadline of every wait: it only guards against a hang.
HANG: Final = 30.0
#: A short backoff, so that reconnecting takes a moment.
FAST: Final = Backoff(base=0.05, factor=2.0, cap=0.2)

#: Runs a command with its standard output copied, line by line, to a file;
#: writes the command's pid to a second file. Standard input and error pass
#: straight through.
TEE: Final = textwrap.dedent(
    """
    import os, subprocess, sys

    capture, pid_file, *command = sys.argv[1:]
    child = subprocess.Popen(command, stdout=subprocess.PIPE)
    with open(pid_file + ".tmp", "w") as out:
        out.write(str(child.pid))
    os.replace(pid_file + ".tmp", pid_file)
    assert child.stdout is not None
    with open(capture, "ab") as wire:
        for line in child.stdout:
            sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
            wire.write(line)
            wire.flush()
    sys.exit(child.wait())
    """
)


def server_env() -> dict[str, str]:
    """What a server started by the bridge needs to import this package from a checkout."""
    paths = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(path for path in paths if path)}


def example_command(*options: str) -> list[str]:
    return [sys.executable, "-m", "diverge_notifications.examples.mcp_server", *options]


class Tee:
    """A command run behind :data:`TEE`: what it wrote, and its pid."""

    def __init__(self, directory: Path, command: Sequence[str]) -> None:
        script = directory / "tee.py"
        script.write_text(TEE)
        self.wire = directory / "wire.jsonl"
        self.pid_file = directory / "server.pid"
        self.command = [sys.executable, str(script), str(self.wire), str(self.pid_file), *command]

    def notifications(self) -> list[bytes]:
        """The notifications the server wrote, as it wrote them."""
        if not self.wire.exists():
            return []
        lines = [line.rstrip(b"\r") for line in self.wire.read_bytes().split(b"\n")[:-1]]
        return [line for line in lines if line.strip() and is_notification(line)]

    def pid(self) -> int:
        return int(self.pid_file.read_text())


def is_notification(raw: bytes) -> bool:
    try:
        value = json.loads(raw)
    except ValueError:
        return False
    return isinstance(value, dict) and "method" in value and "id" not in value


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        assert process.poll() is None, "the server exited before it listened"
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port} after {HANG} s")


@contextlib.contextmanager
def server_process(command: Sequence[str], port: int) -> Iterator[subprocess.Popen[bytes]]:
    """An HTTP MCP server as a process of its own, listening on ``port`` when yielded."""
    process = subprocess.Popen(
        list(command),
        env={**os.environ, **server_env()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield process
    finally:
        process.kill()
        process.wait(HANG)


class Watched:
    """A relay publishing into a hub, with everything it publishes and every event kept."""

    def __init__(self, specs: Sequence[ServerSpec], **options: Any) -> None:
        self.hub = Hub()
        self._subscriber = self.hub.subscribe()
        self.received: list[Notification] = []
        self.events: list[tuple[str, Event]] = []
        options.setdefault("backoff", FAST)
        self.relay = McpRelay(self.hub, specs, on_event=self._event, **options)
        self.task: asyncio.Task[None] | None = None

    def _event(self, name: str, event: Event) -> None:
        self.events.append((name, event))

    def of(self, kind: type[Event], name: str | None = None) -> list[Any]:
        return [e for n, e in self.events if isinstance(e, kind) and (name is None or n == name)]

    def take(self) -> list[Notification]:
        self.received.extend(self._subscriber.take())
        return self.received

    async def wait_for(self, condition: Callable[[], bool], what: str = "a condition") -> None:
        deadline = asyncio.get_running_loop().time() + HANG
        while True:
            self.take()
            if condition():
                return
            if self.task is not None and self.task.done():
                self.task.result()
                raise AssertionError("the relay returned")
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(
                    f"still waiting for {what} after {HANG} s; received {len(self.received)}: "
                    f"{self.received[-3:]!r}; events {self.events[-6:]!r}"
                )
            await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def running(watched: Watched) -> AsyncIterator[Watched]:
    """``watched``'s relay running in this event loop, cancelled on the way out."""
    watched.task = asyncio.create_task(watched.relay.run())
    try:
        yield watched
    finally:
        watched.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watched.task


# --- the example server in this process, over Streamable HTTP ----------------------

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class WireRecorder:
    """ASGI wrapper keeping the data of every server-sent event the app writes, in order."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.events: list[bytes] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        buffer = bytearray()
        streaming = False

        async def recording_send(message: Message) -> None:
            nonlocal streaming
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", []))
                streaming = headers.get(b"content-type", b"").startswith(b"text/event-stream")
            elif message["type"] == "http.response.body" and streaming:
                buffer.extend(message.get("body", b""))
                self._take_events(buffer)
            await send(message)

        await self.app(scope, receive, recording_send)

    def _take_events(self, buffer: bytearray) -> None:
        text = buffer.replace(b"\r\n", b"\n")
        *complete, rest = text.split(b"\n\n")
        buffer[:] = rest
        for event in complete:
            data = [
                line[5:].removeprefix(b" ")
                for line in event.split(b"\n")
                if line.startswith(b"data:")
            ]
            if data:
                self.events.append(b"\n".join(data))

    def notifications(self) -> list[bytes]:
        return [raw for raw in self.events if raw and is_notification(raw)]


@contextlib.asynccontextmanager
async def http_example(
    *, port: int = 0, **keywords: Any
) -> AsyncIterator[tuple[str, WireRecorder, Example]]:
    """The example server over Streamable HTTP, in this event loop, behind a recorder."""
    import uvicorn

    example = build_server(**keywords)
    recorder = WireRecorder(example.server.streamable_http_app())
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    config = uvicorn.Config(
        recorder, log_level="warning", lifespan="on", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            assert not task.done(), "the MCP server did not start"
            await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", recorder, example
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, HANG)
        sock.close()
