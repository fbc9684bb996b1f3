"""Replicas sharing one notification stream through a real Redis.

These tests start a ``redis-server`` of their own (``redis_server.py``) and
skip when it or redis-py is missing. Faults are real: the server is killed
and started again on the same port, paused, a replica is made so slow that
Redis cuts it off, a connection is killed with ``CLIENT KILL``. Waits have
generous deadlines; nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

from diverge_notifications.cluster import BrokerStats, BrokerUnavailable, OutboxFull
from diverge_notifications.sansio import Hub, Notification
from diverge_notifications.sansio.client.policy import Backoff
from diverge_notifications.sansio.envelope import Envelope, encode_envelope
from diverge_notifications.sansio.server.hub import HubSuspended, Subscriber
from tests.interop import HANG_GUARD, free_port
from tests.redis_server import RedisServer, redis_server, wait_for
from tests.replicas import BIG, ODD, numbered, taken

__all__ = ["redis_server"]  # the fixture, imported to be found

T = TypeVar("T")
FAST = Backoff(base=0.05, factor=2.0, cap=0.5)
CHANNEL = "diverge:notifications"


# --- what the tests share -----------------------------------------------------------------------


#: Bytes a hub that collects what a test publishes holds (an 8 MiB notification among it).
COLLECTING = 64 * 1024 * 1024


def run(coroutine: Awaitable[T]) -> T:
    """Run a test's coroutine with an overall guard against a hang."""

    async def guarded() -> T:
        return await asyncio.wait_for(coroutine, 6 * HANG_GUARD)

    return asyncio.run(guarded())


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = asyncio.get_running_loop().time() + HANG_GUARD
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def ended(subscriber: Subscriber) -> Callable[[], bool]:
    return lambda: subscriber.closed


def client_names(server: RedisServer) -> list[str]:
    return [str(entry.get("name", "")) for entry in server.client().client_list()]


def raw_publish(client: Any, origin: str, first: int, *texts: bytes) -> None:
    """Publish an envelope as another process would, with a plain redis-py client."""
    notifications = [Notification.from_bytes(text) for text in texts]
    envelope = Envelope(origin=origin, sequence=first, notifications=notifications)
    client.publish(CHANNEL, encode_envelope(envelope))


def kill_client(server: RedisServer, name: str) -> None:
    """``CLIENT KILL`` the connection named ``name``."""
    client = server.client()
    for entry in client.client_list():
        if entry.get("name") == name:
            client.client_kill_filter(_id=int(entry["id"]))
            return
    raise AssertionError(f"no client named {name}")


@pytest.fixture
def redis_broker() -> Iterator[Any]:
    pytest.importorskip("redis", reason="redis-py is not installed (the 'redis' extra)")
    from diverge_notifications.cluster import RedisBroker

    yield RedisBroker


@pytest.fixture
def blocking_broker() -> Iterator[Any]:
    pytest.importorskip("redis", reason="redis-py is not installed (the 'redis' extra)")
    from diverge_notifications.cluster import BlockingRedisBroker

    yield BlockingRedisBroker


# --- Redis: one order, byte for byte --------------------------------------------------------


def test_two_replicas_see_the_same_bytes_in_the_same_order(
    redis_server: RedisServer, redis_broker: Any
) -> None:
    async def main() -> None:
        hubs = [Hub(queue_bytes=COLLECTING), Hub(queue_bytes=COLLECTING)]
        brokers = [redis_broker(hub, redis_server.url, backoff=FAST) for hub in hubs]
        for broker in brokers:
            await broker.start()
        try:
            await until(lambda: all(b.connected for b in brokers), "both brokers subscribed")
            subscribers = [hub.subscribe() for hub in hubs]
            texts = [*ODD, BIG, *(numbered(i) for i in range(200))]
            for i, text in enumerate(texts):
                await brokers[i % 2].ready()
                assert brokers[i % 2].publish(text)
                if i % 7 == 0:
                    await asyncio.sleep(0)
            await until(
                lambda: all(len(s) == len(texts) for s in subscribers), "every notification"
            )
            first, second = (taken(s) for s in subscribers)
            assert first == second  # one order everywhere, byte for byte
            assert sorted(first) == sorted(texts)  # each exactly once: no double delivery
            for parity in (0, 1):  # each publisher's order is kept
                mine = [t for i, t in enumerate(texts) if i % 2 == parity]
                assert [t for t in first if t in mine] == mine
            stats = [broker.stats() for broker in brokers]
            assert sum(s.published for s in stats) == len(texts)
            assert all(s.received == len(texts) and s.gaps == 0 for s in stats)
            assert BIG in first
        finally:
            for broker in brokers:
                await broker.close()

    run(main())


def test_the_publishing_replica_hears_itself_only_through_redis(
    redis_server: RedisServer, redis_broker: Any
) -> None:
    async def main() -> None:
        hub = Hub()
        async with redis_broker(hub, redis_server.url, backoff=FAST) as broker:
            await until(lambda: broker.connected, "subscribed")
            subscriber = hub.subscribe()
            broker.publish(numbered(1))
            assert len(subscriber) == 0  # not straight into the hub
            await until(lambda: len(subscriber) == 1, "the notification back from Redis")
            # Another process publishing on the channel reaches this hub the same way.
            raw_publish(redis_server.client(), "elsewhere", 1, numbered(2))
            await until(lambda: len(subscriber) == 2, "the other publisher's notification")
            assert taken(subscriber) == [numbered(1), numbered(2)]
            names = client_names(redis_server)
            assert names.count(f"diverge-notifications-{broker.origin}-pub") == 1
            assert names.count(f"diverge-notifications-{broker.origin}-sub") == 1

    run(main())


def test_foreign_messages_are_rejected_and_gaps_counted(
    redis_server: RedisServer, redis_broker: Any
) -> None:
    async def main() -> None:
        hub = Hub()
        async with redis_broker(hub, redis_server.url, backoff=FAST) as broker:
            await until(lambda: broker.connected, "subscribed")
            subscriber = hub.subscribe()
            client = redis_server.client()
            client.publish(CHANNEL, b'{"method":"not in an envelope"}')
            raw_publish(client, "o", 10, numbered(10), numbered(11))
            raw_publish(client, "o", 15, numbered(15))
            await until(lambda: broker.stats().received == 3, "three notifications")
            stats: BrokerStats = broker.stats()
            assert (stats.rejected, stats.gaps, stats.missing) == (1, 1, 3)
            assert taken(subscriber) == [numbered(10), numbered(11), numbered(15)]

    run(main())


def test_a_full_outbox_is_a_clear_error(redis_server: RedisServer, redis_broker: Any) -> None:
    async def main() -> None:
        hub = Hub()
        async with redis_broker(hub, redis_server.url, backoff=FAST, outbox_size=8) as broker:
            await until(lambda: broker.connected, "subscribed")
            subscriber = hub.subscribe()
            for i in range(8):  # no await: the sender has had no chance to run
                broker.publish(numbered(i))
            with pytest.raises(OutboxFull, match=r"outbox is full \(8 of 8 notifications"):
                broker.publish(numbered(8))
            await broker.ready()
            broker.publish(numbered(9))
            await until(lambda: len(subscriber) == 9, "what the outbox took")
            assert taken(subscriber) == [numbered(i) for i in (*range(8), 9)]
            stats = broker.stats()
            assert (stats.outbox_full, stats.published, stats.lost) == (1, 9, 0)
            assert stats.batches < 9  # what waited together went together

    run(main())


# --- Redis: losing it -------------------------------------------------------------------------


def test_killing_redis_ends_every_path_and_the_replicas_come_back_by_themselves(
    redis_server: RedisServer, redis_broker: Any
) -> None:
    async def main() -> None:
        hubs = [Hub(), Hub()]
        brokers = [redis_broker(hub, redis_server.url, backoff=FAST) for hub in hubs]
        for broker in brokers:
            await broker.start()
        try:
            await until(lambda: all(b.connected for b in brokers), "both subscribed")
            subscribers = [hub.subscribe() for hub in hubs for _ in range(3)]
            stop = asyncio.Event()
            refused = 0

            async def stream() -> None:  # a publisher that goes on through the loss
                nonlocal refused
                i = 0
                while not stop.is_set():
                    try:
                        brokers[0].publish(numbered(i))
                    except BrokerUnavailable:
                        refused += 1
                    i += 1
                    await asyncio.sleep(0.002)

            publisher = asyncio.ensure_future(stream())
            await until(lambda: all(len(s) > 5 for s in subscribers), "the stream flowing")
            redis_server.kill()
            await until(lambda: all(s.closed for s in subscribers), "every path ended")
            for subscriber in subscribers:
                assert subscriber.end_reason is not None
                assert f"Redis broker {redis_server.url} channel {CHANNEL!r}" in (
                    subscriber.end_reason
                )
            for hub in hubs:
                assert hub.suspended is not None
                with pytest.raises(HubSuspended):
                    hub.subscribe()
            redis_server.start()  # the same port
            await until(lambda: all(b.connected for b in brokers), "both subscribed again")
            again = [hub.subscribe() for hub in hubs]
            await until(lambda: all(len(s) > 5 for s in again), "the stream flowing again")
            stop.set()
            await publisher
            first, second = (taken(s) for s in again)
            shorter = min(len(first), len(second))
            assert first[:shorter] == second[:shorter]
            for broker in brokers:
                stats = broker.stats()
                assert stats.disconnects == 1 and stats.reconnects == 1
                assert stats.connected
            assert refused >= 1 and brokers[0].stats().unavailable == refused
        finally:
            for broker in brokers:
                await broker.close()

    run(main())


def test_a_replica_too_slow_for_redis_is_cut_off_and_notices(
    redis_server: RedisServer, redis_broker: Any
) -> None:
    # Redis closes a subscriber whose unsent output passes 256 KiB.
    redis_server.client().config_set("client-output-buffer-limit", "pubsub 262144 131072 1")
    blob = b'{"method":"x/blob","params":{"b":"' + b"z" * 65536 + b'"}}'

    async def main() -> None:
        hub = Hub()
        async with redis_broker(hub, redis_server.url, backoff=FAST) as broker:
            await until(lambda: broker.connected, "subscribed")
            subscriber = hub.subscribe()
            sub_name = f"diverge-notifications-{broker.origin}-sub"

            def flood() -> None:
                client = redis_server.client()
                for i in range(1024):  # 64 MiB: more than every socket buffer holds
                    if i % 16 == 0 and sub_name not in client_names(redis_server):
                        return
                    raw_publish(client, "flood", i + 1, blob)

            # The replica is slow: its event loop is blocked while Redis floods it.
            flooder = threading.Thread(target=flood)
            flooder.start()
            wait_for(lambda: sub_name not in client_names(redis_server), "Redis to cut it off")
            flooder.join(HANG_GUARD)
            await until(lambda: subscriber.closed, "the replica to notice")
            assert subscriber.end_reason is not None
            assert "connection lost" in subscriber.end_reason
            await until(lambda: broker.connected, "subscribed again")
            stats = broker.stats()
            assert stats.disconnects == 1 and stats.reconnects == 1

    run(main())


def test_either_connection_killed_ends_both(redis_server: RedisServer, redis_broker: Any) -> None:
    async def main() -> None:
        hub = Hub()
        async with redis_broker(hub, redis_server.url, backoff=FAST) as broker:
            for role in ("pub", "sub"):
                await until(lambda: broker.connected, "subscribed")
                subscriber = hub.subscribe()
                kill_client(redis_server, f"diverge-notifications-{broker.origin}-{role}")
                if role == "pub":
                    # A dead publishing connection is noticed when it is used.
                    broker.publish(numbered(1))
                await until(ended(subscriber), f"the {role} connection's loss")
            await until(lambda: broker.connected, "subscribed again")
            stats = broker.stats()
            assert (stats.disconnects, stats.reconnects, stats.lost) == (2, 2, 1)

    run(main())


def test_a_broker_without_redis_says_why_without_the_password(redis_broker: Any) -> None:
    port = free_port()

    async def main() -> None:
        hub = Hub()
        async with redis_broker(hub, f"redis://:s3cret@127.0.0.1:{port}", backoff=FAST) as broker:
            await until(lambda: broker.stats().failed_attempts >= 3, "a few failed attempts")
            assert hub.suspended is not None
            assert f"Redis broker redis://:***@127.0.0.1:{port}" in hub.suspended
            assert "could not subscribe" in hub.suspended and "s3cret" not in hub.suspended
            with pytest.raises(BrokerUnavailable, match="could not subscribe"):
                broker.publish(numbered(1))
            assert not broker.connected
            assert broker.stats().unavailable == 1

    run(main())


def test_a_broker_started_before_redis_subscribes_once_it_is_there(
    redis_server: RedisServer, redis_broker: Any
) -> None:
    later = RedisServer(redis_server.binary, redis_server.directory)

    async def main() -> None:
        hub = Hub()
        async with redis_broker(hub, later.url, backoff=FAST) as broker:
            await until(lambda: broker.stats().failed_attempts >= 2, "failed attempts")
            with pytest.raises(HubSuspended, match=r"not subscribed yet|could not subscribe"):
                hub.subscribe()
            later.start()
            try:
                await until(lambda: broker.connected, "subscribed")
                subscriber = hub.subscribe()
                broker.publish(numbered(1))
                await until(lambda: len(subscriber) == 1, "the first notification")
                assert broker.stats().reconnects == 0  # the first subscription
            finally:
                later.kill()

    run(main())


def test_options_that_would_bring_reconnects_back_are_refused(redis_broker: Any) -> None:
    for option in (
        "retry",
        "health_check_interval",
        "protocol",
        "socket_timeout",
        "socket_connect_timeout",
        "maint_notifications_config",
    ):
        with pytest.raises(ValueError, match=option):
            redis_broker(Hub(), "redis://127.0.0.1:1", redis_options={option: None})
    with pytest.raises(ValueError):
        redis_broker(Hub(), "http://127.0.0.1:1")
    with pytest.raises(ValueError):
        redis_broker(Hub(), "redis://127.0.0.1:1", channel="")


# --- Redis: the blocking broker ---------------------------------------------------------------


def test_the_blocking_broker_shares_the_stream_with_an_asyncio_one(
    redis_server: RedisServer, redis_broker: Any, blocking_broker: Any
) -> None:
    lock = threading.RLock()
    threaded = Hub(queue_bytes=COLLECTING)
    with blocking_broker(threaded, redis_server.url, hub_lock=lock, backoff=FAST) as broker:
        assert broker.wait_ready(HANG_GUARD)
        with lock:
            mine = threaded.subscribe()

        async def main() -> list[bytes]:
            hub = Hub(queue_bytes=COLLECTING)
            async with redis_broker(hub, redis_server.url, backoff=FAST) as other:
                await until(lambda: other.connected, "subscribed")
                theirs = hub.subscribe()
                texts = [*ODD, BIG, *(numbered(i) for i in range(50))]
                for i, text in enumerate(texts):
                    if i % 2:
                        other.publish(text)
                    else:
                        assert await asyncio.to_thread(broker.wait_ready, HANG_GUARD)
                        broker.publish(text)
                    await asyncio.sleep(0)
                await until(lambda: len(theirs) == len(texts), "everything, asyncio side")
                return taken(theirs)

        seen = run(main())
        wait_for(lambda: broker.stats().received == len(seen), "everything, blocking side")
        with lock:
            assert taken(mine) == seen


def test_the_blocking_broker_loses_redis_and_comes_back(
    redis_server: RedisServer, blocking_broker: Any
) -> None:
    lock = threading.RLock()
    hub = Hub()
    with blocking_broker(hub, redis_server.url, hub_lock=lock, backoff=FAST) as broker:
        assert broker.wait_ready(HANG_GUARD)
        with lock:
            subscriber = hub.subscribe()
        redis_server.kill()
        wait_for(lambda: subscriber.closed, "the path ended")
        assert subscriber.end_reason is not None and redis_server.url in subscriber.end_reason
        with pytest.raises(BrokerUnavailable):
            broker.publish(numbered(1))
        assert not broker.wait_ready(0.05)
        redis_server.start()
        assert broker.wait_ready(HANG_GUARD)
        with lock:
            again = hub.subscribe()
        broker.publish(BIG)
        wait_for(lambda: len(again) == 1, "the notification after the restart")
        with lock:
            assert taken(again) == [BIG]
        stats = broker.stats()
        assert (stats.disconnects, stats.reconnects) == (1, 1)
    assert hub.suspended is not None and "closed" in hub.suspended


def test_a_blocking_replica_too_slow_for_redis_is_cut_off_and_notices(
    redis_server: RedisServer, blocking_broker: Any
) -> None:
    redis_server.client().config_set("client-output-buffer-limit", "pubsub 262144 131072 1")
    blob = b'{"method":"x/blob","params":{"b":"' + b"z" * 65536 + b'"}}'
    lock = threading.RLock()
    hub = Hub()
    with blocking_broker(hub, redis_server.url, hub_lock=lock, backoff=FAST) as broker:
        assert broker.wait_ready(HANG_GUARD)
        with lock:
            subscriber = hub.subscribe()
        sub_name = f"diverge-notifications-{broker.origin}-sub"
        client = redis_server.client()
        with lock:  # the replica cannot publish into its hub: its reader stalls
            for i in range(1024):
                if i % 16 == 0 and sub_name not in client_names(redis_server):
                    break
                raw_publish(client, "flood", i + 1, blob)
            wait_for(lambda: sub_name not in client_names(redis_server), "Redis to cut it off")
        wait_for(lambda: subscriber.closed, "the replica to notice")
        assert broker.wait_ready(HANG_GUARD)
        stats = broker.stats()
        assert stats.disconnects == 1 and stats.reconnects == 1
        assert stats.received >= 1


# --- Redis: a hung server, a Unix socket, options ---------------------------------------------


def test_a_hung_redis_is_noticed_by_its_silence(
    redis_server: RedisServer, redis_broker: Any, blocking_broker: Any
) -> None:
    options: dict[str, Any] = {"backoff": FAST, "ping_interval": 0.2, "connect_timeout": 0.5}
    lock = threading.RLock()
    threaded = Hub()

    async def main() -> None:
        hub = Hub()
        with blocking_broker(threaded, redis_server.url, hub_lock=lock, **options) as other:
            async with redis_broker(hub, redis_server.url, **options) as broker:
                await until(lambda: broker.connected and other.connected, "subscribed")
                subscriber = hub.subscribe()
                with lock:
                    threaded_subscriber = threaded.subscribe()
                redis_server.pause()
                try:
                    await until(
                        lambda: subscriber.closed and threaded_subscriber.closed,
                        "both replicas to give the silent Redis up",
                    )
                    assert subscriber.end_reason is not None
                    assert "PING" in subscriber.end_reason
                    assert threaded_subscriber.end_reason is not None
                    assert "PING" in threaded_subscriber.end_reason
                finally:
                    redis_server.resume()
                await until(lambda: broker.connected and other.connected, "subscribed again")

    run(main())


def test_a_unix_socket_url_works(redis_server: RedisServer, redis_broker: Any) -> None:
    async def main() -> None:
        hub = Hub()
        async with redis_broker(hub, redis_server.socket_url, backoff=FAST) as broker:
            await until(lambda: broker.connected, "subscribed over the Unix socket")
            subscriber = hub.subscribe()
            broker.publish(BIG)
            await until(lambda: len(subscriber) == 1, "the notification")
            assert taken(subscriber) == [BIG]

    run(main())


def test_connection_options_redis_py_refuses_fail_at_once(
    redis_broker: Any, blocking_broker: Any
) -> None:
    for broker in (redis_broker, blocking_broker):
        with pytest.raises(TypeError):
            broker(Hub(), "redis://127.0.0.1:1", redis_options={"no_such_option": 1})
        with pytest.raises(ValueError, match="ping_interval"):
            broker(Hub(), "redis://127.0.0.1:1", ping_interval=0)


def test_a_url_query_cannot_undo_what_the_broker_sets(
    redis_server: RedisServer, redis_broker: Any
) -> None:
    url = f"{redis_server.url}/0?protocol=3&health_check_interval=1&socket_timeout=0.05"

    async def main() -> None:
        hub = Hub()
        async with redis_broker(hub, url, backoff=FAST) as broker:
            await until(lambda: broker.connected, "subscribed")
            subscriber = hub.subscribe()
            await asyncio.sleep(0.2)  # idle longer than the URL's socket_timeout
            broker.publish(numbered(1))
            await until(lambda: len(subscriber) == 1, "the notification (RESP2 as set)")
            assert broker.stats().disconnects == 0

    run(main())
