"""The three servers honour the hub's suspension over real sockets: asyncio, trio, blocking.

A listener of the same adapter holds a path; the hub is suspended (as a
broker does when it loses Redis) in the server's own thread, or under the
blocking server's lock: the listener sees its notifications, then
``StreamErrored`` naming the broker, then ``503`` answers with
``Retry-After`` while it re-asks; once the hub resumes it is served again
by itself. The server counts the refusals and the ended path. Waits have
generous deadlines; nothing asserts how long anything took.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

from diverge_notifications.adapters import asyncio as asyncio_adapter
from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.sansio import (
    Hub,
    NotificationReceived,
    NotServed,
    StreamErrored,
    StreamOpened,
)
from diverge_notifications.sansio.server.counts import ServerStats
from tests.adapters.test_adapters import (
    KEEPALIVE,
    AsyncioRunner,
    BlockingRunner,
    Runner,
    TrioRunner,
    notifications_in,
    policy,
    progress,
    runners,
)

__all__ = ["runners"]  # the fixture, imported to be found

T = TypeVar("T")
REASON = "Redis broker redis://127.0.0.1:6379 channel 'diverge:notifications': connection lost"


class Served:
    """A server of any adapter, and a way to call into its hub from the server's thread."""

    def __init__(self, runner: Runner, hub: Hub) -> None:
        self.runner = runner
        self.blocking: blocking_adapter.Server | None = None
        #: The server's counts, where the test holds the server itself (not trio's).
        self.stats: Callable[[], ServerStats] | None = None
        if isinstance(runner, BlockingRunner):
            self.blocking = blocking_adapter.serve(hub, keepalive_interval=KEEPALIVE)
            self.url = self.blocking.url
            self.stats = self.blocking.stats
            self.close: Callable[[], None] = self.blocking.close
        elif isinstance(runner, AsyncioRunner):
            server = runner.run(asyncio_adapter.serve(hub, keepalive_interval=KEEPALIVE))
            self.url = server.url
            self.stats = server.stats
            self.close = lambda: runner.run(server.close())
        else:
            handle = runner.serve(hub)
            self.url, self.close = handle.url, handle.close

    def call(self, function: Callable[[], T]) -> T:
        if self.blocking is not None:
            with self.blocking.lock:
                return function()
        assert isinstance(self.runner, (AsyncioRunner, TrioRunner))
        result: T = self.runner.call(function)
        return result


@pytest.fixture(params=("asyncio", "trio", "blocking"))
def runner(request: pytest.FixtureRequest, runners: dict[str, Runner]) -> Runner:
    return runners[request.param]


def test_a_suspended_hub_ends_the_path_refuses_asks_and_serves_again(runner: Runner) -> None:
    hub = Hub()
    served = Served(runner, hub)
    listener = runner.listen(served.url, events=True, policy=policy())
    try:
        listener.received.until_type(StreamOpened)
        before = [progress(index) for index in range(3)]
        served.call(lambda: [hub.publish(item) for item in before])
        served.call(lambda: hub.suspend(REASON))
        items = listener.received.until_type(StreamErrored)
        assert notifications_in(items) == before  # what was queued went out first
        errored = items[-1]
        assert isinstance(errored, StreamErrored) and errored.error.message == REASON
        refused = listener.received.until_type(NotServed)[-1]
        assert isinstance(refused, NotServed) and refused.status == 503
        assert REASON in refused.reason
        served.call(hub.resume)
        listener.received.until_type(StreamOpened)
        after = progress(99)
        served.call(lambda: hub.publish(after))
        got = listener.received.until(lambda item: isinstance(item, NotificationReceived))
        assert notifications_in(got) == [after]
        stats = served.stats
        if stats is not None:
            counts = served.call(stats)
            assert (counts.asks_suspended >= 1, counts.paths_suspended) == (True, 1)
            assert counts.refusals[503] == counts.asks_suspended
    finally:
        listener.stop()
        served.close()
