"""``demo --mcp``'s source: the example MCP server over stdio, relayed by the bridge.

The server is :mod:`diverge_notifications.examples.mcp_server`, built on the
official SDK; the bridge (:func:`~diverge_notifications.bridge.run_bridge`)
starts it and relays what it sends into the demo's hub. It sends bursts
(:class:`ExampleServer` follows them as they are published): one goes on
the first path, the next one is sent while the path is cut, the one after
on the new path.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import sys
from collections.abc import Callable
from typing import Final

from ..sansio import Event, Notification
from ..sansio._json import dumps
from .demo_parts import DemoFailed, DemoOutput, WatchedHub
from .output import event_record

__all__ = ["ExampleServer"]

#: Seconds before each burst of the example MCP server.
_BURST_INTERVAL: Final = 1.0

_PROGRESS: Final = "notifications/progress"
_TOOLS_CHANGED: Final = "notifications/tools/list_changed"
_RESOURCE_UPDATED: Final = "notifications/resources/updated"


class _Bursts:
    """Follows the example MCP server's bursts as the bridge publishes them.

    A burst starts with progress on its own token ``burst-N`` and ends with
    a tools list change, a resource update and the custom notification
    ``tick_method`` whose ``"burst"`` is ``N``. The list change and the
    resource update carry no number and, on MCP 2026-07-28, travel through
    the server's subscription bus, so they can come after the custom
    notification: burst ``N`` is complete once its custom notification and
    ``N`` of each of them were published.
    """

    def __init__(self, tick_method: str) -> None:
        self._tick_method = tick_method
        self.started = 0
        self._ticked = 0
        self._tools = 0
        self._resources = 0

    def see(self, notification: Notification, _paths: int) -> None:
        method = notification.method
        params = notification.params or {}
        if method == _PROGRESS:
            token = params.get("progressToken")
            if isinstance(token, str) and token.startswith("burst-"):
                with contextlib.suppress(ValueError):
                    self.started = max(self.started, int(token.removeprefix("burst-")))
        elif method == self._tick_method:
            burst = params.get("burst")
            if isinstance(burst, int):
                self._ticked = max(self._ticked, burst)
        elif method == _TOOLS_CHANGED:
            self._tools += 1
        elif method == _RESOURCE_UPDATED:
            self._resources += 1

    def complete(self, burst: int) -> bool:
        return min(self._ticked, self._tools, self._resources) >= burst


def _bridge_detail(event: Event) -> str:
    """What the demo says about an event of the bridge."""
    fields = event_record(event)
    name = fields.pop("event")
    if name == "McpConnected":
        return (
            f"the bridge connected to the MCP server {fields['server']} "
            f"(MCP {fields['protocol_version']})"
        )
    if name == "McpSubscribed":
        resources = ", ".join(fields["resources"]) or "none"
        return (
            f"the bridge asked for everything: {fields['how']}, log level "
            f"{fields['log_level']}, resources {resources}"
        )
    if name == "McpDisconnected":
        return f"the bridge lost the MCP server: {fields['reason']}"
    return f"the bridge: {name} {dumps(fields).decode('utf-8')}"


class ExampleServer:
    """The example MCP server over stdio, relayed into the hub by the bridge.

    One burst goes on the first path, the next one is published while the
    path is down, the one after on the path asked for again.
    """

    publishing = (
        "the example MCP server sends a burst: progress, log messages at four levels, "
        "a tools list change, a resource update and a custom notification"
    )
    stopping: str | None = "the bridge stops: the example MCP server's input is closed and it exits"

    def __init__(self, hub: WatchedHub, interval: float = _BURST_INTERVAL) -> None:
        from ..examples.mcp_server import TICK_METHOD

        self.command = [
            sys.executable,
            "-m",
            "diverge_notifications.examples.mcp_server",
            "--interval",
            f"{interval:g}",
        ]
        self._hub = hub
        self._bursts = _Bursts(TICK_METHOD)
        hub.watch(self._bursts.see)
        hub.watch(self._record)
        self._bridge: asyncio.Task[None] | None = None
        self._subscribed = False
        self._closing = False
        self._failure: str | None = None
        self._recording: list[int] | None = None

    async def start(self, output: DemoOutput) -> None:
        from ..bridge import McpDisconnected, McpSubscribed, run_bridge

        def on_event(event: Event) -> None:
            if self._closing:
                return
            try:
                output.server("bridge", _bridge_detail(event), **event_record(event))
            except BrokenPipeError:
                # Not the bridge's failure: the demo ends, output.broken says why.
                self._fail("the reader of the demo's output went away")
                return
            if isinstance(event, McpSubscribed):
                self._subscribed = True
            elif isinstance(event, McpDisconnected):
                self._fail(f"the example MCP server went away: {event.reason}")
            self._hub.poke()

        shown = ["python", *self.command[1:]]
        output.server(
            "mcp",
            f"the bridge starts the example MCP server over stdio: {shlex.join(shown)}",
            command=self.command,
        )
        # The server gets the SDK's safe default environment; it must find
        # this very package, as this process did.
        path = os.environ.get("PYTHONPATH")
        self._bridge = asyncio.create_task(
            run_bridge(
                self._hub,
                stdio_command=self.command,
                env={"PYTHONPATH": path} if path else None,
                on_event=on_event,
            )
        )
        self._bridge.add_done_callback(self._bridge_done)
        await self._wait(lambda: self._subscribed)

    def _fail(self, reason: str) -> None:
        if self._failure is None:
            self._failure = reason
        self._hub.poke()

    def _bridge_done(self, task: asyncio.Task[None]) -> None:
        failure = None if task.cancelled() else task.exception()
        if not self._closing:
            self._fail(f"the bridge stopped: {failure!r}" if failure else "the bridge stopped")

    def _record(self, _notification: Notification, paths: int) -> None:
        if self._recording is not None:
            self._recording.append(paths)

    async def _wait(self, predicate: Callable[[], bool]) -> None:
        await self._hub.wait_for(lambda: predicate() or self._failure is not None)
        if self._failure is not None:
            raise DemoFailed(self._failure)

    async def _next_burst(self) -> None:
        """Wait for the next burst that starts from now on to be published whole."""
        burst = self._bursts.started + 1
        await self._wait(lambda: self._bursts.complete(burst))

    async def first(self) -> None:
        await self._next_burst()

    async def while_down(self) -> list[int]:
        self._recording = []
        try:
            await self._next_burst()
            return self._recording
        finally:
            self._recording = None

    async def second(self) -> None:
        await self._next_burst()

    async def close(self) -> None:
        self._closing = True
        if self._bridge is not None and not self._bridge.done():
            self._bridge.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._bridge
