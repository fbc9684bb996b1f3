"""The Redis broker for asyncio: replicas share one notification stream over Redis pub/sub.

One task keeps two connections to Redis, one subscribed to the channel and
one that publishes, and makes them again after its own backoff whenever
either fails (docs/cluster.md). Everything published goes through Redis,
and the hub gets only what comes back from it.
"""

from __future__ import annotations

import asyncio
import contextlib
from types import TracebackType
from typing import Any

from redis.asyncio.connection import Connection, ConnectionPool
from redis.asyncio.retry import Retry

from ..adapters.asyncio import within
from ._core import logger
from ._redis import FAILURES, Reconnects, RedisBrokerBase, check_subscribed, describe, message_data

__all__ = ["RedisBroker"]

_FAILURES = (*FAILURES, asyncio.TimeoutError)


class RedisBroker(RedisBrokerBase):
    """The Redis broker for asyncio; the options are :class:`RedisBrokerBase`'s.

    ``async with RedisBroker(hub, "redis://127.0.0.1:6379") as broker:``
    (or :meth:`start` and :meth:`close`). Use it from one event loop, and
    :meth:`publish` from that loop's thread.
    """

    _pool_class = ConnectionPool
    _tcp_class = Connection
    _retry_class = Retry
    _subscriber_waits = True  # connecting is bounded by wait_for, reading is not

    def _prepare(self) -> None:
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        #: Replies read on the subscription so far (the PING watch compares).
        self._replies = 0

    def _wake_sender(self) -> None:
        self._wake.set()

    async def ready(self) -> None:
        """Wait until :meth:`publish` would take a notification (for sources that can wait)."""
        while not self._core.can_accept():
            self._changed.clear()
            await self._changed.wait()

    async def start(self) -> None:
        """Start connecting (at once) in a task of the running loop."""
        if self._closed:
            raise RuntimeError("the broker is closed")
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name=f"diverge-redis-broker-{self._core.origin}"
            )

    async def close(self) -> None:
        """Stop: the connections are closed and the hub stays suspended. Harmless twice."""
        if self._closed:
            return
        self._closed = True
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._core.closed()
        self._changed.set()

    async def __aenter__(self) -> RedisBroker:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the connections ---------------------------------------------------------

    async def _run(self) -> None:
        reconnects = self._reconnects
        while True:
            delay = reconnects.delay()
            if delay > 0:
                await asyncio.sleep(delay)
            reconnects.started()
            try:
                why = await self._attempt(reconnects)
            except Exception as error:
                # Never a dead task that looks alive: a bug is a lost connection too.
                logger.exception("%s: unexpected failure", self._core.description)
                why = f"connection lost ({describe(error)})"
            self._core.lost(why)
            logger.info("%s: next attempt in %.2f s", self._core.description, reconnects.ended())

    async def _attempt(self, reconnects: Reconnects) -> str:
        """One pair of connections, from connecting to their loss; why they ended."""
        subscriber = self._subscriber()
        publisher = self._publisher()
        tasks: list[asyncio.Task[None]] = []
        try:
            try:
                await within(self._subscribe(subscriber, publisher), self._connect_timeout)
            except _FAILURES as error:
                return f"could not subscribe ({describe(error)})"
            reconnects.subscribed()
            self._core.subscribed()
            self._changed.set()
            tasks = [
                asyncio.ensure_future(self._read(subscriber, reconnects)),
                asyncio.ensure_future(self._watch(subscriber)),
                asyncio.ensure_future(self._send(publisher)),
            ]
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            failure = next(iter(done)).exception()
            if failure is not None and not isinstance(failure, _FAILURES):
                logger.error("%s: unexpected failure", self._core.description, exc_info=failure)
            return f"connection lost ({describe(failure) if failure else 'ended'})"
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for connection in (subscriber, publisher):
                with contextlib.suppress(Exception):
                    await connection.disconnect(nowait=True)

    async def _subscribe(self, subscriber: Any, publisher: Any) -> None:
        await subscriber.connect()
        await subscriber.send_command("SUBSCRIBE", self._channel)
        check_subscribed(await subscriber.read_response(), self._channel)
        await publisher.connect()

    async def _read(self, subscriber: Any, reconnects: Reconnects) -> None:
        channel = self._channel
        core = self._core
        while True:
            reply = await subscriber.read_response()
            self._replies += 1
            data = message_data(reply, channel)
            if data is not None and core.received(data):
                reconnects.heard()
            # Buffered replies come back without waiting: let the paths'
            # writers run between envelopes.
            await asyncio.sleep(0)

    async def _watch(self, subscriber: Any) -> None:
        """PING a silent subscription; raise when it stays silent (see ``ping_interval``)."""
        interval = self._ping_interval
        seen = self._replies
        pinged = False
        while True:
            await asyncio.sleep(interval)
            if self._replies != seen:
                seen, pinged = self._replies, False
            elif pinged:
                raise TimeoutError(f"no answer from Redis to a PING within {interval:g} s")
            else:
                await subscriber.send_command("PING")
                pinged = True

    async def _send(self, publisher: Any) -> None:
        core = self._core
        while True:
            batch = core.next_batch()
            if batch is None:
                self._wake.clear()
                if not core.pending:
                    await self._wake.wait()
                continue
            self._changed.set()  # the outbox has room again
            payload, count = batch
            try:
                await publisher.send_command("PUBLISH", self._channel, payload)
                await publisher.read_response()
            except BaseException as error:
                # Whether Redis got it is unknown: never sent again.
                core.failed(count, describe(error))
                raise
            core.sent(count)
