"""A bounded load test of the asyncio adapter on loopback.

100 listeners each receive 10,000 notifications through one server. The
publisher keeps every listener within a window of the last notification
published (it waits for the slowest before publishing more), so a listener
that keeps pace never finds its queue full: nothing may be lost, and every
listener must get everything, in order.

One more listener connects, asks, and never reads. The server's socket
buffers are bounded (``send_buffer``), so they fill early; from then on its
queue fills and it loses notifications (counted through ``Hub.publish``'s
return value: the subscribers that queued each one), and nobody else waits
for it: the others still get everything.

Deadlines only guard against a hang; nothing asserts how long it took.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Final

from diverge_notifications.adapters import asyncio as asyncio_adapter
from diverge_notifications.adapters import parse_url
from diverge_notifications.sansio import (
    Hub,
    Notification,
    NotificationReceived,
    ProxyConnection,
    StreamOpened,
)
from diverge_notifications.sansio.client.policy import Backoff, ProxyPolicy

LISTENERS: Final = 100
NOTIFICATIONS: Final = 10_000
#: Published between two checks of the slowest listener.
BATCH: Final = 200
#: How far the slowest listener may fall behind: well inside a queue (1024).
WINDOW: Final = 600
HANG: Final = 120.0
#: Sizes the notifications so that the stalled listener's socket buffers fill.
FILLER: Final = "x" * 200
#: The server's send buffer per socket: far less than what the stalled listener is sent.
SEND_BUFFER: Final = 64 * 1024


def notification(index: int) -> Notification:
    return Notification(
        "notifications/progress",
        {"progressToken": "load", "progress": index, "total": NOTIFICATIONS, "message": FILLER},
    )


class Tally:
    """What one listener received: a count, checked to be in order as it goes."""

    def __init__(self) -> None:
        self.received = 0
        self.out_of_order: list[tuple[int, object]] = []
        self.opened = asyncio.Event()
        self.done = asyncio.Event()


async def listen(url: str, tally: Tally) -> None:
    policy = ProxyPolicy(require_exchange=False, backoff=Backoff(base=0.05, cap=0.5))
    async with contextlib.aclosing(
        asyncio_adapter.listen(url, events=True, policy=policy, keepalive_interval=10.0)
    ) as items:
        async for item in items:
            if type(item) is NotificationReceived:
                params = item.notification.params or {}
                if params.get("progress") != tally.received:
                    tally.out_of_order.append((tally.received, params.get("progress")))
                tally.received += 1
                if tally.received == NOTIFICATIONS:
                    tally.done.set()
            elif isinstance(item, StreamOpened):
                tally.opened.set()


async def stalled_listener(url: str) -> socket.socket:
    """A connection that asks for notifications and then never reads."""
    endpoint = parse_url(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # A small receive buffer, so that the server's writes back up quickly.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, (endpoint.host, endpoint.port))
    await loop.sock_sendall(sock, ProxyConnection(endpoint.authority).data_to_send())
    return sock


async def publish_all(hub: Hub, tallies: list[Tally]) -> int:
    """Publish everything at the slowest listener's pace; returns how many were lost."""
    for tally in tallies:
        await tally.opened.wait()
    while hub.subscribers < LISTENERS + 1:
        await asyncio.sleep(0.01)
    subscribers = hub.subscribers
    lost = 0
    published = 0
    while published < NOTIFICATIONS:
        # Keep pace with the slowest listener that reads.
        while published - min(tally.received for tally in tallies) > WINDOW:
            await asyncio.sleep(0.001)
        end = min(published + BATCH, NOTIFICATIONS)
        for index in range(published, end):
            lost += subscribers - hub.publish(notification(index))
        published = end
        await asyncio.sleep(0)
    for tally in tallies:
        await tally.done.wait()
    return lost


async def run_load() -> tuple[list[Tally], int]:
    hub = Hub()
    serving = asyncio_adapter.serve(hub, keepalive_interval=5.0, send_buffer=SEND_BUFFER)
    async with await serving as server:
        tallies = [Tally() for _ in range(LISTENERS)]
        tasks = [asyncio.create_task(listen(server.url, tally)) for tally in tallies]
        stalled = await stalled_listener(server.url)
        try:
            lost = await asyncio.wait_for(publish_all(hub, tallies), HANG)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            stalled.close()
        return tallies, lost


def test_hundred_listeners_ten_thousand_notifications_and_one_stalled() -> None:
    tallies, lost = asyncio.run(run_load())
    for tally in tallies:
        assert tally.out_of_order == []
        assert tally.received == NOTIFICATIONS
    # Only the stalled listener lost anything, and it did lose.
    assert lost > 0
