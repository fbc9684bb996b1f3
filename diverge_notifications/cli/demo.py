"""``python -m diverge_notifications demo``: a server and a listener in one process.

The notifications come from a *source* and go into a :class:`~diverge_notifications.sansio.Hub`
that the asyncio adapter serves on a loopback port; a listener (the asyncio
adapter's ``listen``) asks for notifications and shows what arrives. Then
the connection that carries the path is cut without a clean end. The
listener sees the path break, waits its backoff and asks again on a new
connection; the source goes on, and finally the server shuts down, which
ends the path cleanly. Only the source differs between the two demos:

* by default, a scripted MCP server: a tool call that reports progress on
  two tokens and logs at several levels, changes of its tool, resource and
  prompt lists, a resource update and a notification of its own (a custom
  one), published straight into the hub;
* with ``--mcp`` (the ``mcp`` extra), the example MCP server of
  :mod:`diverge_notifications.examples.mcp_server`, built on the official
  SDK and started over stdio by the bridge (:func:`~diverge_notifications.bridge.run_bridge`),
  which relays what it sends into the hub. Each of its bursts brings
  progress, log messages at four levels, a tools list change, a resource
  update and a custom notification; one burst goes on the first path, the
  next one is sent while the path is cut, the one after on the new path.

The listener reaches the server through a small loopback relay, so that the
cut is a real abrupt end of a TCP connection in the middle of a path, made
without reaching into the server's internals.

On a terminal the output is the human view; otherwise one JSON object per
line: ``{"side": "server", "step": ..., "detail": ...}`` for what the demo
does and ``{"side": "listener", "event": ..., ...}`` for every event the
listener sees (the fields of ``listen --events``, plus the whole
``"notification"`` for ``NotificationReceived``). If the reader of the output
goes away (``demo | head``), the demo stops at once and exits 0, as ``listen``
does; if the listener fails, the demo stops at once and exits 1.

The module reads top-down: the command and the demo's steps
(:func:`run_demo`), then the parts that do not depend on the source (the
output, the relay that makes the cut, the listener, the watched hub), then
the :class:`Source` protocol and its two implementations: the scripted MCP
server (:func:`scripted_notifications`) and, for ``--mcp``, the example MCP
server relayed by the bridge (:class:`ExampleServer`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import os
import shlex
import sys
from collections.abc import Awaitable, Callable, Iterator
from typing import IO, Any, Final, Protocol, TypeVar

from ..sansio import (
    Backoff,
    Event,
    Hub,
    Notification,
    NotificationReceived,
    ProxyPolicy,
    StreamOpened,
)
from ..sansio.events import TERMINAL_EVENTS
from ..sansio.mcp.json import dumps
from ..sansio.server.hub import as_notification
from .output import event_record, say, silence_stdout, stdout_is_a_terminal
from .running import EXIT_OK, EXIT_USAGE, aclose, interrupted, mcp_available

__all__ = [
    "DEMO_TIMEOUT",
    "MCP_MISSING_MESSAGE",
    "DemoFailed",
    "DemoListener",
    "DemoOutput",
    "ExampleServer",
    "Relay",
    "Source",
    "WatchedHub",
    "run_demo",
    "run_demo_command",
    "scripted_notifications",
]


#: The demo gives up (exit 1) if it has not finished after this many seconds.
DEMO_TIMEOUT: Final = 12.0
#: What ``demo --mcp`` says when the ``mcp`` package is missing.
MCP_MISSING_MESSAGE: Final = (
    "demo --mcp needs the 'mcp' extra: pip install 'diverge-notifications[mcp]'"
)
#: How long to wait for the server to notice the cut before going on.
_NOTICE_CUT: Final = 2.0

_T = TypeVar("_T")


class DemoFailed(Exception):
    """The demo cannot go on (the MCP server went away, the listener failed): it exits 1."""


# --- the command and the demo's steps -------------------------------------------------


def run_demo_command(args: argparse.Namespace) -> int:
    """Run ``demo`` with its parsed arguments; return the exit status."""
    if args.mcp and not mcp_available():
        say(MCP_MISSING_MESSAGE)
        return EXIT_USAGE
    if sys.stdout is None:
        # Nothing to show the demo on (``demo >&-``): as if the reader went away at once.
        return EXIT_OK
    return run_demo(human=stdout_is_a_terminal(), mcp=args.mcp)


def run_demo(*, human: bool, stream: IO[str] | None = None, mcp: bool = False) -> int:
    """Run the demo, writing to ``stream`` (standard output); return the exit status.

    With ``mcp`` the notifications come from the example MCP server, relayed
    by the bridge (the ``mcp`` extra must be installed); otherwise from the
    scripted one.
    """
    output = DemoOutput(sys.stdout if stream is None else stream, human=human)
    make_source: Callable[[WatchedHub], Source] = ExampleServer if mcp else _Scripted

    async def bounded() -> int:
        from ..adapters.asyncio import within

        return await within(_demo(output, make_source), DEMO_TIMEOUT)

    def gone() -> int:
        # The reader went away (``demo | head``): nothing more to show, no error.
        if stream is None:
            silence_stdout()
        return 0

    try:
        try:
            return asyncio.run(bounded())
        finally:
            output.close()
    except BrokenPipeError:
        return gone()
    except asyncio.TimeoutError:
        if output.broken:
            return gone()
        say(f"demo: did not finish within {DEMO_TIMEOUT:g} seconds")
        return 1
    except DemoFailed as failure:
        if output.broken:
            return gone()
        say(f"demo: {failure}")
        return 1
    except KeyboardInterrupt:
        return interrupted()


async def _demo(output: DemoOutput, make_source: Callable[[WatchedHub], Source]) -> int:
    from ..adapters.asyncio import serve

    hub = WatchedHub()
    source = make_source(hub)
    server = await serve(hub, "127.0.0.1", 0)
    relay = Relay(server.host, server.port)
    listener_task: asyncio.Task[None] | None = None
    server_closed = False
    try:
        await relay.start()
        output.server("serving", f"serving a hub on {server.url}", url=server.url)
        listener = DemoListener(output, relay.url, paths=2)
        listener_task = listener.start()
        await listener.wait_for(lambda: listener.opened >= 1)
        await listener.watching(source.start(output))

        output.server("publish", source.publishing)
        await listener.watching(source.first())
        await listener.wait_for(lambda: listener.received >= hub.delivered)

        # The re-ask waits at the relay until what the source publishes
        # while the path is down is published, so that it reaches no one.
        relay.hold()
        cut = relay.cut()
        output.server(
            "cut", f"the connection carrying the path is cut, no clean end ({cut} cut)", cut=cut
        )
        # Give the server a moment to notice, so the next publication shows
        # what happens to a notification when no path is open.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _NOTICE_CUT
        while hub.subscribers and loop.time() < deadline:
            await asyncio.sleep(0.02)
        reached = await listener.watching(source.while_down())
        count, paths = len(reached), sum(reached)
        what = "published" if count == 1 else f"{count} notifications published"
        output.server(
            "lost",
            f"{what} while the path is down, to {paths} open paths: not replayed later",
            paths=paths,
            count=count,
        )
        relay.release()

        await listener.wait_for(lambda: listener.opened >= 2)
        output.server("reask", "the listener asked again: a new path is open")
        await listener.watching(source.second())
        await listener.wait_for(lambda: listener.received >= hub.delivered)

        if source.stopping is not None:
            output.server("stop", source.stopping)
        await source.close()
        output.server("shutdown", "the server shuts down: every open path ends cleanly")
        server_closed = True
        await server.close()
        await listener.wait_for(lambda: listener.ended >= 2)
        await listener_task
        output.server("done", "done")
        return 0
    finally:
        await source.close()
        if listener_task is not None:
            if not listener_task.done():
                listener_task.cancel()
            # Awaited even when done, so that its exception counts as seen.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await listener_task
        await relay.close()
        if not server_closed:
            await server.close()


# --- output ---------------------------------------------------------------------------


class DemoOutput:
    """Where the demo says what happens: JSON lines, or the human view.

    Once a write finds the reader gone (:class:`BrokenPipeError`),
    :attr:`broken` is true and every later write raises the same at once.
    """

    def __init__(self, stream: IO[str], *, human: bool) -> None:
        self._stream = stream
        self._view = None
        self.broken = False
        if human:
            from .terminal import HumanView

            self._view = HumanView.for_stream(stream)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        if self.broken:
            raise BrokenPipeError(errno.EPIPE, "the reader of the demo's output went away")
        try:
            yield
        except BrokenPipeError:
            self.broken = True
            raise

    def _line(self, record: dict[str, Any]) -> None:
        self._stream.write(dumps(record).decode("utf-8") + "\n")
        self._stream.flush()

    def server(self, step: str, detail: str, **fields: Any) -> None:
        with self._writing():
            if self._view is not None:
                self._view.heading(f"server {self._view.glyph('arrow')} {detail}")
                return
            self._line({"side": "server", "step": step, "detail": detail, **fields})

    def listener(self, event: Event) -> None:
        with self._writing():
            if self._view is not None:
                self._view.event(event)
                return
            record: dict[str, Any] = {"side": "listener", **event_record(event)}
            if isinstance(event, NotificationReceived):
                record["notification"] = event.notification.members
            self._line(record)

    def close(self) -> None:
        if self._view is not None and not self.broken:
            with self._writing():
                self._view.close()


# --- the cut --------------------------------------------------------------------------


class Relay:
    """A loopback TCP relay whose open connections can be cut abruptly."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._server: asyncio.Server | None = None
        self._passing = asyncio.Event()
        self._passing.set()
        self.url = ""

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def hold(self) -> None:
        """Keep new connections waiting (accepted, not yet passed on) until :meth:`release`."""
        self._passing.clear()

    def release(self) -> None:
        """Pass held and new connections on to the server."""
        self._passing.set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._passing.wait()
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        pair = (writer, upstream_writer)
        self._pairs.add(pair)
        try:
            await asyncio.gather(
                self._pump(reader, upstream_writer), self._pump(upstream_reader, writer)
            )
        finally:
            self._pairs.discard(pair)
            for side in pair:
                side.transport.abort()

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()

    def cut(self) -> int:
        """Abort every open connection on both sides, mid-path; return how many."""
        pairs = list(self._pairs)
        for pair in pairs:
            for side in pair:
                side.transport.abort()
        return len(pairs)

    async def close(self) -> None:
        self.release()
        if self._server is not None:
            self._server.close()
        self.cut()
        if self._server is not None:
            from ..adapters.asyncio import within

            with contextlib.suppress(Exception):
                await within(self._server.wait_closed(), 1.0)


# --- the listener ---------------------------------------------------------------------


class DemoListener:
    """Runs the adapter's ``listen`` and counts what it sees, for the demo to wait on.

    Every wait of the demo goes through :meth:`watching`, so that the
    listener failing (its output gone, an error) ends the demo at once
    instead of leaving it waiting for what will never come.
    """

    def __init__(self, output: DemoOutput, url: str, *, paths: int) -> None:
        self._output = output
        self._url = url
        self._paths = paths
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self.opened = 0
        self.received = 0
        self.ended = 0

    def start(self) -> asyncio.Task[None]:
        """Start listening in a task of its own; return the task."""
        self._task = asyncio.create_task(self.run())
        return self._task

    async def run(self) -> None:
        from ..adapters.asyncio import listen

        # A quick backoff so the re-ask after the cut comes within a second.
        policy = ProxyPolicy(require_exchange=False, backoff=Backoff(base=0.3, factor=2.0, cap=1.0))
        stream = listen(self._url, events=True, policy=policy)
        try:
            async for item in stream:
                if not isinstance(item, Event):  # pragma: no cover - events=True yields events
                    continue
                self._output.listener(item)
                async with self._changed:
                    if isinstance(item, StreamOpened):
                        self.opened += 1
                    elif isinstance(item, NotificationReceived):
                        self.received += 1
                    elif isinstance(item, TERMINAL_EVENTS):
                        self.ended += 1
                    self._changed.notify_all()
                if self.ended >= self._paths:
                    break
        finally:
            await aclose(stream)

    async def watching(self, awaitable: Awaitable[_T]) -> _T:
        """Await ``awaitable``, unless the listener's task ends first: then raise why.

        The listener's own exception is raised as it is when the output
        went away (:class:`BrokenPipeError`), as :class:`DemoFailed`
        otherwise; a listener that just stopped is a :class:`DemoFailed`.
        """
        task = self._task
        assert task is not None, "start() the listener first"
        waiter = asyncio.ensure_future(awaitable)
        try:
            await asyncio.wait((waiter, task), return_when=asyncio.FIRST_COMPLETED)
            if waiter.done():
                return waiter.result()
        finally:
            if not waiter.done():
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await waiter
        if task.cancelled():
            raise DemoFailed("the listener was cancelled")
        failure = task.exception()
        if failure is None:
            raise DemoFailed("the listener stopped before the demo was over")
        if isinstance(failure, (BrokenPipeError, DemoFailed)):
            raise failure
        raise DemoFailed(f"the listener failed: {failure!r}") from failure

    async def _condition(self, predicate: Callable[[], bool]) -> None:
        async with self._changed:
            await self._changed.wait_for(predicate)

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate()`` holds, or raise why the listener stopped first."""
        await self.watching(self._condition(predicate))


# --- the hub --------------------------------------------------------------------------


class WatchedHub(Hub):
    """A hub that counts what it delivered and tells watchers what it published.

    Whoever publishes (the script, or the bridge relaying an MCP server),
    the demo can wait for it: :attr:`delivered` counts the notifications
    that reached at least one path, and :meth:`wait_for` returns once a
    condition on what was published holds.
    """

    def __init__(self) -> None:
        super().__init__()
        self.delivered = 0
        self._watchers: list[Callable[[Notification, int], None]] = []
        self._changed = asyncio.Event()

    def watch(self, watcher: Callable[[Notification, int], None]) -> None:
        """Call ``watcher(notification, paths)`` after each publication."""
        self._watchers.append(watcher)

    def publish(self, item: object, *, audience: str | None = None) -> int:
        paths = super().publish(item, audience=audience)
        notification = as_notification(item)
        if notification is not None:
            if paths:
                self.delivered += 1
            for watcher in self._watchers:
                watcher(notification, paths)
            self.poke()
        return paths

    def poke(self) -> None:
        """Wake :meth:`wait_for` to look again (something else changed)."""
        self._changed.set()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        while not predicate():
            self._changed.clear()
            await self._changed.wait()


# --- the sources ----------------------------------------------------------------------


class Source(Protocol):
    """Where the demo's notifications come from: the one part that differs.

    A source publishes into the hub it was made with.
    """

    #: What the ``publish`` step says.
    publishing: str
    #: What the ``stop`` step says before the shutdown, if the source has one.
    stopping: str | None

    async def start(self, output: DemoOutput) -> None:
        """Get ready to publish; the listener's first path is open."""

    async def first(self) -> None:
        """Publish what goes on the first path; return once all of it is published."""

    async def while_down(self) -> list[int]:
        """Publish while no path is open; return how many paths each publication reached."""

    async def second(self) -> None:
        """Publish what goes on the path asked for again."""

    async def close(self) -> None:
        """Stop publishing and release what :meth:`start` took."""


# --- the scripted MCP server (``demo``) -----------------------------------------------

#: Pause between two notifications of the script, so a person can follow.
_PACE: Final = 0.12
#: The method of the scripted server's notification of its own.
_CUSTOM_METHOD: Final = "notifications/acme/build_finished"


def _progress(token: int | str, progress: int, total: int, message: str) -> Notification:
    return Notification(
        "notifications/progress",
        {"progressToken": token, "progress": progress, "total": total, "message": message},
    )


def _log(level: str, data: Any, logger: str | None = "indexer") -> Notification:
    params: dict[str, Any] = {"level": level, "data": data}
    if logger is not None:
        params["logger"] = logger
    return Notification("notifications/message", params)


def scripted_notifications() -> dict[str, list[Notification]]:
    """The scripted MCP server's notifications, by the part of the demo they belong to.

    ``"first"`` goes on the first path, ``"lost"`` is published while the
    path is cut (so it reaches no one: nothing is replayed) and
    ``"second"`` goes on the path the listener asks for again.
    """
    first = [
        _log("info", "indexing /project for the tool call 'index'"),
        _progress("index", 0, 5, "scanning"),
        _progress(42, 0, 3, "fetching the model card"),
        _log("debug", {"cache": {"hits": 93, "misses": 7}}),
        _progress("index", 1, 5, "src/"),
        _progress(42, 1, 3, "fetching the model card"),
        _log("notice", "using 4 workers", logger=None),
        _progress("index", 2, 5, "tests/"),
        _log("warning", "skipping 2 binary files"),
        _progress(42, 2, 3, "fetching the model card"),
        _progress(42, 3, 3, "model card fetched"),
        _log("error", "cannot read docs/old.md: permission denied"),
        Notification("notifications/tools/list_changed"),
        Notification("notifications/resources/list_changed"),
        Notification("notifications/prompts/list_changed"),
        Notification("notifications/resources/updated", {"uri": "file:///project/README.md"}),
        Notification(_CUSTOM_METHOD, {"target": "wheel", "seconds": 1.5, "ok": True}),
        _progress("index", 3, 5, "docs/"),
    ]
    lost = [_log("warning", "published while no path is open: nobody hears this")]
    second = [
        _progress("index", 4, 5, "bench/"),
        _progress("index", 5, 5, "done"),
        _log("info", "indexed 1204 files"),
        Notification("notifications/acme/cache_warm", {"entries": 1204}),
    ]
    return {"first": first, "lost": lost, "second": second}


async def _publish_all(hub: Hub, notifications: list[Notification]) -> None:
    for notification in notifications:
        hub.publish(notification)
        await asyncio.sleep(_PACE)


class _Scripted:
    """The scripted MCP server: :func:`scripted_notifications`, published at a readable pace."""

    publishing = "the MCP server runs a tool call: progress and log messages, then changes"
    stopping: str | None = None

    def __init__(self, hub: WatchedHub) -> None:
        self._hub = hub
        self._script = scripted_notifications()

    async def start(self, output: DemoOutput) -> None:
        pass

    async def first(self) -> None:
        await _publish_all(self._hub, self._script["first"])

    async def while_down(self) -> list[int]:
        return [self._hub.publish(notification) for notification in self._script["lost"]]

    async def second(self) -> None:
        await _publish_all(self._hub, self._script["second"])

    async def close(self) -> None:
        pass


# --- the example MCP server, relayed by the bridge (``demo --mcp``) -------------------

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
