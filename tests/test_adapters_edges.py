"""The adapters at their edges: the container profile, and options that cannot work.

In the container profile a notification path has no finish while the
connection lives: a server that shuts down after sending notifications can
only close the connection, and the listener sees the path broken (then asks
again). A path that carried nothing may still be declined cleanly.
"""

from __future__ import annotations

import asyncio

import pytest

from diverge_notifications.adapters import asyncio as asyncio_adapter
from diverge_notifications.sansio import (
    Hub,
    Notification,
    NotificationReceived,
    NotServed,
    Profile,
    StreamBroken,
    StreamOpened,
)
from diverge_notifications.sansio.policy import Backoff, ProxyPolicy

HANG = 30.0


def test_shutdown_after_notifications_breaks_the_path_without_a_finish() -> None:
    async def scenario() -> list[object]:
        hub = Hub()
        server = await asyncio_adapter.serve(hub, profile=Profile.CONTAINER, keepalive_interval=5)
        progress = Notification("notifications/progress", {"progressToken": 1, "progress": 1})
        policy = ProxyPolicy(require_exchange=False, backoff=Backoff(base=0.01, cap=0.05))
        listener = asyncio_adapter.listen(
            server.url, events=True, policy=policy, profile=Profile.CONTAINER
        )
        tail: list[object] = []

        async def watch() -> None:
            async for item in listener:
                tail.append(item)
                if isinstance(item, StreamOpened):
                    hub.publish(progress)
                if isinstance(item, NotificationReceived):
                    await server.close()
                if isinstance(item, (StreamBroken, NotServed)):
                    return

        await asyncio.wait_for(watch(), HANG)
        await listener.aclose()
        return tail

    events = asyncio.run(scenario())
    terminals = [event for event in events if isinstance(event, (StreamBroken, NotServed))]
    # The server closed the connection without a finish, which the container
    # profile forbids after notifications; the listener saw the path break.
    assert any(isinstance(event, NotificationReceived) for event in events)
    assert len(terminals) == 1 and isinstance(terminals[0], StreamBroken)


def test_shutdown_with_nothing_sent_declines_cleanly() -> None:
    async def scenario() -> list[object]:
        hub = Hub()
        server = await asyncio_adapter.serve(hub, profile=Profile.CONTAINER, keepalive_interval=5)
        policy = ProxyPolicy(require_exchange=False, backoff=Backoff(base=0.01, cap=0.05))
        listener = asyncio_adapter.listen(
            server.url, events=True, policy=policy, profile=Profile.CONTAINER
        )
        seen: list[object] = []

        async def watch() -> None:
            async for item in listener:
                seen.append(item)
                if isinstance(item, StreamOpened):
                    await server.close()
                if isinstance(item, (StreamBroken, NotServed)):
                    return

        await asyncio.wait_for(watch(), HANG)
        await listener.aclose()
        return seen

    events = asyncio.run(scenario())
    assert isinstance(events[-1], NotServed)


@pytest.mark.parametrize(
    "option",
    [
        {"keepalive_interval": 0},
        {"queue_size": 0},
        {"max_batch": 0},
        {"close_timeout": -1.0},
        {"keepalive_interval": float("nan")},
    ],
)
def test_serve_refuses_options_that_cannot_work(option: dict[str, float]) -> None:
    async def scenario() -> None:
        with pytest.raises(ValueError, match="must be positive"):
            await asyncio_adapter.serve(Hub(), **option)  # type: ignore[arg-type]

    asyncio.run(scenario())
