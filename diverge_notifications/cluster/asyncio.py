"""The Redis broker for asyncio: replicas share one notification stream over Redis pub/sub.

One task keeps two connections to Redis, one subscribed to the channel and
one that publishes, and makes them again after its own backoff whenever
either fails (docs/cluster.md). Everything published goes through Redis,
and the hub gets only what comes back from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import random as random_module
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any

from redis.asyncio.connection import ConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ..sansio.envelope import DEFAULT_LIMITS, DEFAULT_MAX_ORIGINS, EnvelopeLimits
from ..sansio.hub import Hub
from ..sansio.policy import DEFAULT_BACKOFF, Backoff
from ._core import (
    DEFAULT_CHANNEL,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_BATCH_BYTES,
    DEFAULT_OUTBOX_BYTES,
    DEFAULT_OUTBOX_SIZE,
    BrokerCore,
    BrokerStats,
    Reconnects,
    logger,
)
from ._redis import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_PUBLISH_TIMEOUT,
    FAILURES,
    check_subscribed,
    connection_factory,
    connection_options,
    describe,
    description,
    message_data,
)

__all__ = ["RedisBroker"]

_FAILURES = (*FAILURES, asyncio.TimeoutError)


class RedisBroker:
    """Feeds ``hub`` from the Redis ``channel`` at ``url``, and publishes through it.

    ``async with RedisBroker(hub, "redis://127.0.0.1:6379") as broker:``
    (or :meth:`start` and :meth:`close`). Until the broker has subscribed,
    and whenever it loses Redis, the hub is suspended: its open paths end
    with a reason naming this broker and it takes no new subscription.
    Use it from one event loop; :meth:`publish` from that loop's thread.

    ``origin`` is this broker's origin id (default: fresh random hex).
    ``backoff``, ``random`` (uniform in ``[0, 1)``, default
    :func:`random.random`) and ``healthy_after`` pace reconnecting (see
    :class:`~diverge_notifications.cluster.Reconnects`). ``connect_timeout``
    bounds connecting and subscribing, ``publish_timeout`` one PUBLISH.
    ``outbox_size`` and ``outbox_bytes`` bound what waits to be published;
    ``max_batch`` and ``max_batch_bytes`` bound one envelope; ``limits`` is
    what received envelopes may hold (the same on every replica);
    ``redis_options`` adds redis-py connection options (``password=``,
    ``ssl_ca_certs=``, ...), though not ``retry``,
    ``health_check_interval`` or ``protocol``.
    """

    def __init__(
        self,
        hub: Hub,
        url: str,
        channel: str = DEFAULT_CHANNEL,
        *,
        origin: str | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        random: Callable[[], float] | None = None,
        healthy_after: float = 10.0,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        publish_timeout: float = DEFAULT_PUBLISH_TIMEOUT,
        limits: EnvelopeLimits = DEFAULT_LIMITS,
        outbox_size: int = DEFAULT_OUTBOX_SIZE,
        outbox_bytes: int = DEFAULT_OUTBOX_BYTES,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_origins: int = DEFAULT_MAX_ORIGINS,
        redis_options: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(channel, str) or not channel:
            raise ValueError("channel must be a non-empty str")
        if not connect_timeout > 0 or not publish_timeout > 0:
            raise ValueError("connect_timeout and publish_timeout must be positive")
        self.channel = channel
        self._channel = channel.encode("utf-8")
        self._connect_timeout = connect_timeout
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._core = BrokerCore(
            hub,
            description=description(url, channel),
            origin=origin,
            limits=limits,
            outbox_size=outbox_size,
            outbox_bytes=outbox_bytes,
            max_batch=max_batch,
            max_batch_bytes=max_batch_bytes,
            max_origins=max_origins,
            on_ready=self._wake.set,
        )
        name = f"diverge-notifications-{self._core.origin}"
        retry = Retry(NoBackoff(), 0)
        self._subscriber = connection_factory(
            ConnectionPool,
            url,
            retry=retry,
            **connection_options(
                socket_timeout=None,  # a subscriber waits for messages for ever
                connect_timeout=connect_timeout,
                client_name=f"{name}-sub",
                extra=redis_options,
            ),
        )
        self._publisher = connection_factory(
            ConnectionPool,
            url,
            retry=retry,
            **connection_options(
                socket_timeout=publish_timeout,
                connect_timeout=connect_timeout,
                client_name=f"{name}-pub",
                extra=redis_options,
            ),
        )
        # The loop's clock is time.monotonic() too; made here so that bad
        # pacing options are refused at once.
        self._reconnects = Reconnects(
            clock=time.monotonic,
            random=random if random is not None else random_module.random,
            backoff=backoff,
            healthy_after=healthy_after,
        )
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    # -- what callers use --------------------------------------------------------

    @property
    def hub(self) -> Hub:
        """The hub this broker feeds."""
        return self._core.hub

    @property
    def origin(self) -> str:
        """This broker's origin id."""
        return self._core.origin

    @property
    def connected(self) -> bool:
        """Subscribed to Redis now."""
        return self._core.connected

    def publish(self, item: object) -> bool:
        """Queue ``item`` for Redis, without waiting; every hub on the channel gets it.

        ``False`` if ``item`` is not a notification (ignored, as by
        ``Hub.publish``). Raises
        :class:`~diverge_notifications.cluster.BrokerUnavailable` while not
        subscribed, :class:`~diverge_notifications.cluster.OutboxFull` when
        the outbox is full and
        :class:`~diverge_notifications.cluster.NotificationTooLarge`; each
        is counted in :meth:`stats` and logged.
        """
        return self._core.accept(item)

    async def ready(self) -> None:
        """Wait until :meth:`publish` would take a notification (for sources that can wait)."""
        while not self._core.can_accept():
            self._changed.clear()
            await self._changed.wait()

    def stats(self) -> BrokerStats:
        """The counts now."""
        return self._core.stats()

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
            why = await self._session(reconnects)
            self._core.lost(why)
            logger.info("%s: next attempt in %.2f s", self._core.description, reconnects.ended())

    async def _session(self, reconnects: Reconnects) -> str:
        """One pair of connections, from connecting to their loss; why they ended."""
        subscriber = self._subscriber()
        publisher = self._publisher()
        tasks: list[asyncio.Task[None]] = []
        try:
            try:
                await asyncio.wait_for(
                    self._subscribe(subscriber, publisher), self._connect_timeout
                )
            except _FAILURES as error:
                return f"could not subscribe ({describe(error)})"
            reconnects.subscribed()
            self._core.subscribed()
            self._changed.set()
            tasks = [
                asyncio.ensure_future(self._read(subscriber, reconnects)),
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
            data = message_data(await subscriber.read_response(), channel)
            if data is not None and core.received(data):
                reconnects.heard()
            # Buffered replies come back without waiting: let the paths'
            # writers run between envelopes.
            await asyncio.sleep(0)

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
