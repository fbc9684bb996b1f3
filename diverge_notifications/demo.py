"""``python -m diverge_notifications demo``: a server and a listener in one process.

A scripted MCP server publishes into a :class:`~.sansio.Hub` that the
asyncio adapter serves on a loopback port; a listener (the asyncio adapter's
``listen``) asks for notifications and shows what arrives. The script runs a
tool call that reports progress on two tokens and logs at several levels,
changes the server's tool, resource and prompt lists, updates a resource,
sends a notification of its own (a custom one), and then the connection that
carries the path is cut without a clean end. The listener sees the path
break, waits its backoff and asks again on a new connection; the script
goes on, and finally the server shuts down, which ends the path cleanly.

The listener reaches the server through a small loopback relay, so that the
cut is a real abrupt end of a TCP connection in the middle of a path, made
without reaching into the server's internals.

On a terminal the output is the human view; otherwise one JSON object per
line: ``{"side": "server", "step": ..., "detail": ...}`` for what the script
does and ``{"side": "listener", "event": ..., ...}`` for every event the
listener sees (the fields of ``listen --events``, plus the whole
``"notification"`` for ``NotificationReceived``).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable
from typing import IO, Any, Final

from .cli import _aclose, event_record
from .sansio import (
    Backoff,
    Event,
    Hub,
    Notification,
    NotificationReceived,
    ProxyPolicy,
    StreamOpened,
)
from .sansio._json import dumps
from .sansio.events import TERMINAL_EVENTS

__all__ = ["DEMO_TIMEOUT", "run_demo", "scripted_notifications"]

#: The demo gives up (exit 1) if it has not finished after this many seconds.
DEMO_TIMEOUT: Final = 12.0
#: Pause between two notifications of the script, so a person can follow.
_PACE: Final = 0.12
#: How long to wait for the server to notice the cut before going on.
_NOTICE_CUT: Final = 2.0

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


# --- output --------------------------------------------------------------------


class _Output:
    """Where the demo says what happens: JSON lines, or the human view."""

    def __init__(self, stream: IO[str], *, human: bool) -> None:
        self._stream = stream
        self._view = None
        if human:
            from ._terminal import HumanView

            self._view = HumanView.for_stream(stream)

    def server(self, step: str, detail: str, **fields: Any) -> None:
        if self._view is not None:
            self._view.heading(f"server {self._view.glyph('arrow')} {detail}")
            return
        record = {"side": "server", "step": step, "detail": detail, **fields}
        self._stream.write(dumps(record).decode("utf-8") + "\n")
        self._stream.flush()

    def listener(self, event: Event) -> None:
        if self._view is not None:
            self._view.event(event)
            return
        record: dict[str, Any] = {"side": "listener", **event_record(event)}
        if isinstance(event, NotificationReceived):
            record["notification"] = event.notification.members
        self._stream.write(dumps(record).decode("utf-8") + "\n")
        self._stream.flush()

    def close(self) -> None:
        if self._view is not None:
            self._view.close()


# --- the cut -------------------------------------------------------------------


class _Relay:
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
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)


# --- the listener ------------------------------------------------------------------


class _Listener:
    """Runs the adapter's ``listen`` and counts what it sees, for the script to wait on."""

    def __init__(self, output: _Output, url: str, *, paths: int) -> None:
        self._output = output
        self._url = url
        self._paths = paths
        self._changed = asyncio.Condition()
        self.opened = 0
        self.received = 0
        self.ended = 0

    async def run(self) -> None:
        from .adapters.asyncio import listen

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
            await _aclose(stream)

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        async with self._changed:
            await self._changed.wait_for(predicate)


# --- the script --------------------------------------------------------------------


async def _publish_all(hub: Hub, notifications: list[Notification]) -> None:
    for notification in notifications:
        hub.publish(notification)
        await asyncio.sleep(_PACE)


async def _demo(output: _Output) -> int:
    from .adapters.asyncio import serve

    script = scripted_notifications()
    hub = Hub()
    server = await serve(hub, "127.0.0.1", 0)
    relay = _Relay(server.host, server.port)
    listener_task: asyncio.Task[None] | None = None
    server_closed = False
    try:
        await relay.start()
        output.server("serving", f"serving a hub on {server.url}", url=server.url)
        listener = _Listener(output, relay.url, paths=2)
        listener_task = asyncio.create_task(listener.run())
        await listener.wait_for(lambda: listener.opened >= 1)

        output.server(
            "publish", "the MCP server runs a tool call: progress and log messages, then changes"
        )
        await _publish_all(hub, script["first"])
        expected = len(script["first"])
        await listener.wait_for(lambda: listener.received >= expected)

        # The re-ask waits at the relay until the notification below is
        # published, so that it shows a publication with no path open.
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
        for notification in script["lost"]:
            paths = hub.publish(notification)
            output.server(
                "lost",
                f"published while the path is down, to {paths} open paths: not replayed later",
                paths=paths,
            )
        relay.release()

        await listener.wait_for(lambda: listener.opened >= 2)
        output.server("reask", "the listener asked again: a new path is open")
        await _publish_all(hub, script["second"])
        expected += len(script["second"])
        await listener.wait_for(lambda: listener.received >= expected)

        output.server("shutdown", "the server shuts down: every open path ends cleanly")
        server_closed = True
        await server.close()
        await listener.wait_for(lambda: listener.ended >= 2)
        await listener_task
        output.server("done", "done")
        return 0
    finally:
        if listener_task is not None and not listener_task.done():
            listener_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await listener_task
        await relay.close()
        if not server_closed:
            await server.close()


def run_demo(*, human: bool, stream: IO[str] | None = None) -> int:
    """Run the demo, writing to ``stream`` (standard output); return the exit status."""
    output = _Output(sys.stdout if stream is None else stream, human=human)

    async def bounded() -> int:
        return await asyncio.wait_for(_demo(output), DEMO_TIMEOUT)

    try:
        return asyncio.run(bounded())
    except asyncio.TimeoutError:
        print(f"demo: did not finish within {DEMO_TIMEOUT:g} seconds", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        output.close()
