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
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Callable
from typing import IO, Any, Final

from ..sansio import Hub, Notification
from .demo_mcp import ExampleServer
from .demo_parts import DemoFailed, DemoListener, DemoOutput, Relay, Source, WatchedHub
from .output import say, silence_stdout, stdout_is_a_terminal
from .running import EXIT_OK, EXIT_USAGE, mcp_available

__all__ = [
    "DEMO_TIMEOUT",
    "MCP_MISSING_MESSAGE",
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


# --- the scripted source ---------------------------------------------------------------


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


# --- the demo ------------------------------------------------------------------------


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


def run_demo(*, human: bool, stream: IO[str] | None = None, mcp: bool = False) -> int:
    """Run the demo, writing to ``stream`` (standard output); return the exit status.

    With ``mcp`` the notifications come from the example MCP server, relayed
    by the bridge (the ``mcp`` extra must be installed); otherwise from the
    scripted one.
    """
    output = DemoOutput(sys.stdout if stream is None else stream, human=human)
    make_source: Callable[[WatchedHub], Source] = ExampleServer if mcp else _Scripted

    async def bounded() -> int:
        from ..adapters._asyncio_parts import within

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
        return 130


def run_demo_command(args: argparse.Namespace) -> int:
    """Run ``demo`` with its parsed arguments; return the exit status."""
    if args.mcp and not mcp_available():
        say(MCP_MISSING_MESSAGE)
        return EXIT_USAGE
    if sys.stdout is None:
        # Nothing to show the demo on (``demo >&-``): as if the reader went away at once.
        return EXIT_OK
    return run_demo(human=stdout_is_a_terminal(), mcp=args.mcp)
