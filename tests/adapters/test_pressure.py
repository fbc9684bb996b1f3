"""The three servers under pressure: waiting publishers, refusals, stalls, limits, counts.

Each scenario runs against the asyncio, trio and blocking servers (each on
its own thread, as in tests/adapters/test_adapters.py) with an ordinary listener (the
blocking listener on a thread) and, where it matters, peers written with raw
sockets: one that asks and never reads, one that asks with the wrong token,
one that arrives beyond ``max_connections``. What the listeners count is
compared with what the server's ``stats()`` and its log lines say.

Every wait has a generous deadline that only guards against a hang; no test
asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest
import trio

from diverge_notifications.adapters import asyncio as asyncio_adapter
from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.adapters import parse_url
from diverge_notifications.sansio import (
    Ask,
    ErrorData,
    Exchange,
    Hub,
    Notification,
    NotificationReceived,
    ProxyConnection,
    StreamErrored,
    StreamOpened,
)
from diverge_notifications.sansio.server.counts import ServerStats
from diverge_notifications.sansio.server.hub import NotificationTooLarge
from diverge_notifications.sansio.wire.framing import DEFAULT_MAX_FRAME_SIZE
from tests.adapters.test_adapters import (
    HANG,
    AsyncioRunner,
    Received,
    TrioRunner,
    policy,
    run_exchange,
    wait_until,
)

LOGGER: Final = "diverge_notifications.server"
#: The notifications a waiting feeder publishes to one listener.
FED: Final = 100_000
END_LINE: Final = re.compile(
    r"path (\S+) ended \(([a-z ]+)\): (\d+) sent, (\d+) dropped \(peer \S+\)"
)


def numbered(index: int, pad: int = 0) -> Notification:
    params = {"progressToken": "feed", "progress": index}
    if pad:
        params["pad"] = "p" * pad
    return Notification("notifications/progress", params)


def progress_of(notifications: list[Notification]) -> list[int]:
    return [n.params["progress"] for n in notifications if n.params]


# --- one synchronous face for the three servers -------------------------------------


class Served:
    """A running server of one adapter, driven from the test's thread."""

    def __init__(
        self,
        server: Any,
        call: Callable[..., Any],
        run: Callable[..., Any],
        close: Callable[[], None],
    ) -> None:
        self.server = server
        self.url: str = server.url
        self._call = call  # a function, in the server's thread
        self._run = run  # an async function (or a blocking one), in the server's thread
        self.close = close

    def publish(self, item: object) -> int:
        published: int = self._call(self.server.publish, item)
        return published

    def feed(self, items: list[Notification]) -> None:
        """Publish every item with ``wait=True``, in the server's thread."""
        self._run(items)

    def stats(self) -> ServerStats:
        stats: ServerStats = self._call(self.server.stats)
        return stats


def serve_asyncio(runner: AsyncioRunner, hub: Hub, **options: Any) -> Served:
    def run(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, runner.loop).result(HANG * 4)

    def call(function: Callable[..., Any], *args: Any) -> Any:
        async def called() -> Any:
            return function(*args)

        return run(called())

    async def feed(items: list[Notification]) -> None:
        for item in items:
            await server.publish(item, wait=True)

    server: asyncio_adapter.Server = run(asyncio_adapter.serve(hub, **options))
    return Served(server, call, lambda items: run(feed(items)), lambda: run(server.close()))


def serve_trio(runner: TrioRunner, hub: Hub, **options: Any) -> Served:
    server, close = runner.start_server(hub, **options)

    async def feed(items: list[Notification]) -> None:
        for item in items:
            await server.publish(item, wait=True)

    return Served(server, runner.call, lambda items: runner.run(feed, items), close)


def serve_blocking(hub: Hub, **options: Any) -> Served:
    server = blocking_adapter.serve(hub, **options)

    def feed(items: list[Notification]) -> None:
        for item in items:
            server.publish(item, wait=True)

    return Served(server, lambda function, *args: function(*args), feed, server.close)


@pytest.fixture(scope="module")
def loops() -> Iterator[tuple[AsyncioRunner, TrioRunner]]:
    asyncio_runner, trio_runner = AsyncioRunner(), TrioRunner()
    yield asyncio_runner, trio_runner
    asyncio_runner.close()
    trio_runner.close()


ServeFactory = Callable[..., Served]


@pytest.fixture(params=["asyncio", "trio", "blocking"])
def serve(
    request: pytest.FixtureRequest, loops: tuple[AsyncioRunner, TrioRunner]
) -> Iterator[ServeFactory]:
    made: list[Served] = []

    def factory(hub: Hub, **options: Any) -> Served:
        options.setdefault("keepalive_interval", 1.0)
        if request.param == "asyncio":
            served = serve_asyncio(loops[0], hub, **options)
        elif request.param == "trio":
            served = serve_trio(loops[1], hub, **options)
        else:
            served = serve_blocking(hub, **options)
        made.append(served)
        return served

    yield factory
    for served in made:
        served.close()


class Listening:
    """The blocking listener on a thread: what it delivered, and a way to stop it."""

    def __init__(self, url: str, token: str | None = None) -> None:
        self.received = Received()
        self._listener = blocking_adapter.listen(url, events=True, policy=policy(), token=token)
        threading.Thread(target=self._consume, daemon=True).start()

    def _consume(self) -> None:
        try:
            for item in self._listener:
                self.received.put(item)
        finally:
            self.received.finished.set()

    def notifications(self, count: int) -> list[Notification]:
        got: list[Notification] = []
        while len(got) < count:
            item = self.received.next()
            if isinstance(item, NotificationReceived):
                got.append(item.notification)
        return got

    def stop(self) -> None:
        self._listener.close()
        assert self.received.finished.wait(HANG)


def opened(url: str) -> Listening:
    listening = Listening(url)
    listening.received.until_type(StreamOpened)
    return listening


def stalled_peer(url: str, token: str | None = None) -> socket.socket:
    """A connection that asks for notifications and then never reads."""
    endpoint = parse_url(url)
    sock = socket.create_connection((endpoint.host, endpoint.port), timeout=HANG)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(ProxyConnection(endpoint.authority, token=token).data_to_send())
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes; a reset fails the test."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


# --- waiting publishers ---------------------------------------------------------------


def test_a_waiting_feeder_loses_nothing_for_a_listener_that_reads(serve: ServeFactory) -> None:
    hub = Hub()  # queues of 1024: far fewer than what is fed
    # The listener is a thread of this busy process: on a loaded machine it may
    # take nothing for longer than the default slow_after, and be dropped for.
    served = serve(hub, slow_after=HANG)
    listening = opened(served.url)
    sent = [numbered(index) for index in range(FED)]
    feeder = threading.Thread(target=served.feed, args=(sent,), daemon=True)
    feeder.start()
    got = listening.notifications(FED)
    feeder.join(HANG)
    assert progress_of(got) == list(range(FED))
    stats = served.stats()
    assert (stats.notifications_sent, stats.notifications_dropped) == (FED, 0)
    listening.stop()


def test_a_waiting_feeder_is_held_up_by_a_stalled_path_only_until_it_is_cut_off(
    serve: ServeFactory,
) -> None:
    hub = Hub(queue_size=16)
    served = serve(hub, stall_timeout=0.5, send_buffer=16 * 1024)
    listening = opened(served.url)
    stalled = stalled_peer(served.url)
    try:
        wait_until(lambda: served.stats().open_paths == 2, "both paths to open")
        sent = [numbered(index, pad=1000) for index in range(2000)]
        feeder = threading.Thread(target=served.feed, args=(sent,), daemon=True)
        feeder.start()
        got = listening.notifications(len(sent))
        feeder.join(HANG)
        assert progress_of(got) == list(range(len(sent)))
        stats = served.stats()
        assert stats.paths_stalled == 1 and stats.open_paths == 1
    finally:
        stalled.close()
        listening.stop()


# --- too large for a frame --------------------------------------------------------------


def test_a_17_mib_notification_between_two_small_ones(serve: ServeFactory) -> None:
    hub = Hub()
    served = serve(hub)
    listening = opened(served.url)
    big = {"method": "x/big", "params": {"blob": "b" * (17 * 1024 * 1024)}}
    assert served.publish(numbered(1)) == 1
    with pytest.raises(NotificationTooLarge) as refused:
        served.publish(big)
    assert refused.value.limit == DEFAULT_MAX_FRAME_SIZE
    assert served.publish(numbered(2)) == 1
    assert progress_of(listening.notifications(2)) == [1, 2]
    # The server goes on serving: the path, and a new one.
    second = opened(served.url)
    served.publish(numbered(3))
    assert progress_of(listening.notifications(1)) == [3]
    assert progress_of(second.notifications(1)) == [3]
    assert hub.counts().refused == 1
    second.stop()
    listening.stop()


def test_a_waiting_publish_refuses_a_notification_too_large_at_once(serve: ServeFactory) -> None:
    hub = Hub(max_frame_size=1000)
    served = serve(hub)
    with pytest.raises(NotificationTooLarge):
        served.feed([numbered(0, pad=2000)])
    served.feed([numbered(1)])  # and goes on
    assert hub.counts().refused == 1


# --- counts and logs --------------------------------------------------------------------


def test_stats_and_log_lines_agree_with_what_the_listeners_counted(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    hub = Hub(queue_size=64)
    served = serve(hub, token="t0k3n", stall_timeout=0.5, send_buffer=16 * 1024)
    listening = Listening(served.url, token="t0k3n")
    listening.received.until_type(StreamOpened)
    stalled = stalled_peer(served.url, token="t0k3n")
    refused = stalled_peer(served.url)  # no token: 401
    try:
        assert read_all(refused).startswith(b"HTTP/1.1 401 ")
        wait_until(lambda: served.stats().open_paths == 2, "both paths to open")
        count = 600
        for start in range(0, count, 50):  # at the reading listener's pace
            for index in range(start, start + 50):
                served.publish(numbered(index, pad=1000))
            listening.notifications(50)
        wait_until(lambda: served.stats().paths_stalled == 1, "the stalled path to be cut off")
    finally:
        stalled.close()
        refused.close()
        listening.stop()
    wait_until(lambda: served.stats().open_paths == 0, "every path to end")
    stats = served.stats()
    ends = [END_LINE.search(record.getMessage()) for record in caplog.records]
    ended = {match[2]: (int(match[3]), int(match[4])) for match in ends if match}
    assert set(ended) == {"stalled", "peer closed"}
    assert ended["peer closed"] == (count, 0)  # what the reading listener counted
    stalled_sent, stalled_dropped = ended["stalled"]
    assert stalled_sent + stalled_dropped == count
    assert stats.notifications_sent == count + stalled_sent
    assert stats.notifications_dropped == stalled_dropped > 0
    assert (stats.paths_served, stats.asks_served, stats.paths_stalled) == (2, 2, 1)
    assert dict(stats.refusals) == {401: 1}
    messages = [(record.levelno, record.getMessage()) for record in caplog.records]
    assert any(level == logging.INFO and "refused: 401" in text for level, text in messages)
    assert any(level == logging.WARNING and "stalled" in text for level, text in messages)


# --- limits -------------------------------------------------------------------------------


def test_beyond_max_connections_503_with_retry_after_and_a_clean_close(
    serve: ServeFactory,
) -> None:
    served = serve(Hub(), max_connections=1)
    listening = opened(served.url)
    endpoint = parse_url(served.url)
    with socket.create_connection((endpoint.host, endpoint.port), timeout=HANG) as extra:
        # The ask, then more than any buffer holds: without a lingering close
        # the unread bytes would reset the connection under the 503.
        extra.sendall(ProxyConnection(endpoint.authority).data_to_send() + b"x" * 300_000)
        answer = read_all(extra)
    assert answer.startswith(b"HTTP/1.1 503 ")
    assert b"\r\nRetry-After: 1\r\n" in answer
    stats = served.stats()
    assert dict(stats.refusals) == {503: 1} and stats.open_paths == 1
    served.publish(numbered(7))  # the path that was served goes on
    assert progress_of(listening.notifications(1)) == [7]
    listening.stop()


def test_a_refusal_is_read_whole_although_the_client_sends_more(serve: ServeFactory) -> None:
    served = serve(Hub())
    endpoint = parse_url(served.url)
    head = b"POST /requests HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n"
    with socket.create_connection((endpoint.host, endpoint.port), timeout=HANG) as client:
        client.sendall(head + b"\x04" * 300_000)
        answer = read_all(client)
    assert answer.startswith(b"HTTP/1.1 413 ")
    assert dict(served.stats().refusals) == {413: 1}


# --- exchange handlers --------------------------------------------------------------------


def failing(ask: Ask) -> None:
    raise RuntimeError("the handler broke")


def test_a_failing_handler_is_logged_and_answered_an_internal_error(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger=LOGGER)
    served = serve(Hub(), exchange_handler=failing)
    events = run_exchange(served.url, Ask(exchange=Exchange.LIST_TOOLS))
    errored = [event for event in events if isinstance(event, StreamErrored)]
    assert errored and errored[0].error.code == -32603
    assert "the handler broke" in errored[0].error.message
    failures = [record for record in caplog.records if record.exc_info]
    assert failures and "exchange handler failed" in failures[0].getMessage()
    assert served.stats().handler_failures == 1


def test_a_handler_past_exchange_timeout_is_answered_and_blocks_no_other_path(
    serve: ServeFactory, request: pytest.FixtureRequest
) -> None:
    release = threading.Event()
    adapter = request.node.callspec.params["serve"]

    def hanging_blocking(ask: Ask) -> ErrorData:
        release.wait(HANG)
        return ErrorData(code=1, message="too late")

    async def hanging_asyncio(ask: Ask) -> None:
        await asyncio.sleep(HANG)

    async def hanging_trio(ask: Ask) -> None:
        await trio.sleep(HANG)

    handler = {"asyncio": hanging_asyncio, "trio": hanging_trio, "blocking": hanging_blocking}
    served = serve(Hub(), exchange_handler=handler[adapter], exchange_timeout=0.3)
    listening = opened(served.url)
    answers: list[list[Any]] = []
    asking = threading.Thread(
        target=lambda: answers.append(run_exchange(served.url, Ask(exchange=Exchange.LIST_TOOLS)))
    )
    asking.start()
    served.publish(numbered(1))  # while the handler runs
    assert progress_of(listening.notifications(1)) == [1]
    asking.join(HANG)
    release.set()
    errored = [event for event in answers[0] if isinstance(event, StreamErrored)]
    assert errored and "took longer than 0.3 s" in errored[0].error.message
    assert served.stats().handler_failures == 1
    listening.stop()


def test_junk_after_the_ask_costs_a_bounded_read_and_the_path_goes_on(
    serve: ServeFactory,
) -> None:
    served = serve(Hub())
    endpoint = parse_url(served.url)
    with socket.create_connection((endpoint.host, endpoint.port), timeout=HANG) as client:
        client.sendall(ProxyConnection(endpoint.authority).data_to_send())
        proxy_side = ProxyConnection(endpoint.authority)
        proxy_side.data_to_send()
        client.settimeout(0.2)
        junk = b"j" * 65536
        sent_junk = 0
        # The server stops reading past max_discard: the client's buffers fill.
        try:
            while sent_junk < 400 * len(junk):
                sent_junk += client.send(junk)
        except TimeoutError:
            pass
        assert sent_junk < 400 * len(junk)
        client.settimeout(HANG)
        wait_until(lambda: served.stats().open_paths == 1, "the path to open")
        served.publish(numbered(5))
        received: list[Notification] = []
        while not received:
            proxy_side.receive_data(client.recv(65536))
            while True:
                event = proxy_side.next_event()
                if isinstance(event, NotificationReceived):
                    received.append(event.notification)
                elif not isinstance(event, StreamOpened):
                    break
        assert progress_of(received) == [5]
