"""The parts of ``demo`` that do not depend on where its notifications come from.

:class:`DemoOutput` says what happens (JSON lines, or the human view),
:class:`Relay` carries the listener's connections to the server and cuts
them, :class:`DemoListener` runs the listener and counts what it sees,
:class:`WatchedHub` lets the demo wait on what was published, and
:class:`Source` is what each source of notifications provides.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
from collections.abc import Awaitable, Callable, Iterator
from typing import IO, Any, Protocol, TypeVar

from ..sansio import (
    Backoff,
    Event,
    Hub,
    Notification,
    NotificationReceived,
    ProxyPolicy,
    StreamOpened,
)
from ..sansio._json import dumps
from ..sansio.events import TERMINAL_EVENTS
from ..sansio.hub import as_notification
from .output import event_record
from .running import aclose

__all__ = ["DemoFailed", "DemoListener", "DemoOutput", "Relay", "Source", "WatchedHub"]

_T = TypeVar("_T")


class DemoFailed(Exception):
    """The demo cannot go on (the MCP server went away, the listener failed): it exits 1."""


# --- output --------------------------------------------------------------------


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


# --- the cut -------------------------------------------------------------------


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
            from ..adapters._asyncio_parts import within

            with contextlib.suppress(Exception):
                await within(self._server.wait_closed(), 1.0)


# --- the listener ------------------------------------------------------------------


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


# --- the hub ------------------------------------------------------------------------


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

    def publish(self, item: object) -> int:
        paths = super().publish(item)
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


# --- the sources ---------------------------------------------------------------------


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
