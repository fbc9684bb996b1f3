"""A notification's audience travels with it to every replica, through a real Redis.

The progress of a call forwarded under one of several tokens is published
to that token's audience; with ``--redis`` it goes through the broker, and
every replica's hub must deliver it to that audience's paths only. Starts a
``redis-server`` of its own and skips when it or redis-py is missing.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from diverge_notifications.sansio import Hub, Notification
from diverge_notifications.sansio.wire.http import audience_of
from tests.cluster.test_redis import FAST, blocking_broker, redis_broker, run, until
from tests.redis_server import RedisServer, redis_server

__all__ = ["blocking_broker", "redis_broker", "redis_server"]  # fixtures, imported to be found

ALPHA = audience_of("alpha-token")
BETA = audience_of("beta-token")


def progress(token: str) -> Notification:
    return Notification("notifications/progress", {"progressToken": token, "progress": 1})


def test_an_audience_travels_with_its_notification_to_every_replica(
    redis_server: RedisServer, redis_broker: Any, blocking_broker: Any
) -> None:
    async def main() -> None:
        hubs = [Hub(), Hub()]
        brokers = [redis_broker(hub, redis_server.url, backoff=FAST) for hub in hubs]
        threaded_hub = Hub()
        lock = threading.Lock()  # the blocking broker's thread and this one share its hub
        threaded = blocking_broker(threaded_hub, redis_server.url, backoff=FAST, hub_lock=lock)
        for broker in brokers:
            await broker.start()
        try:
            await until(
                lambda: all(b.connected for b in [*brokers, threaded]), "every broker subscribed"
            )
            with lock:
                paths = {
                    (replica, audience): hub.subscribe(audience=audience)
                    for replica, hub in enumerate([*hubs, threaded_hub])
                    for audience in (ALPHA, BETA, None)
                }
            # Published on replica 0, for alpha's paths; then something for everyone.
            await brokers[0].ready()
            assert brokers[0].publish(progress("alpha-call"), audience=ALPHA)
            assert threaded.publish(progress("beta-call"), audience=BETA)
            await brokers[1].ready()
            assert brokers[1].publish(progress("everyone"))
            # Each replica delivers in one order: once a path of no audience
            # (which hears every audience) has all three, the others have theirs.
            heard: dict[tuple[int, str | None], list[Notification]] = {k: [] for k in paths}

            def all_in() -> bool:
                with lock:
                    for key, subscriber in paths.items():
                        heard[key] += subscriber.take()
                return all(len(heard[(replica, None)]) == 3 for replica in range(3))

            await until(all_in, "every replica's unscoped path heard all three")
            for replica in range(3):
                tokens = {
                    audience: [
                        (n.params or {})["progressToken"] for n in heard[(replica, audience)]
                    ]
                    for audience in (ALPHA, BETA, None)
                }
                assert sorted(tokens[None]) == ["alpha-call", "beta-call", "everyone"]
                assert [t for t in tokens[None] if t != "beta-call"] == tokens[ALPHA]
                assert [t for t in tokens[None] if t != "alpha-call"] == tokens[BETA]
        finally:
            for broker in brokers:
                await broker.close()
            await asyncio.to_thread(threaded.close)

    run(main())
