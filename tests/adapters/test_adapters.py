"""One scenario suite for the three adapters: asyncio, trio and blocking sockets.

Each adapter runs on its own thread (an event loop thread for asyncio and
trio, the adapter's own threads for blocking) behind a :class:`Runner`
with the same synchronous interface, so every scenario is written once and
runs against all three. Some scenarios face the listener with a scripted
raw-socket server (:class:`ScriptedServer`) that answers each ask as the
scenario says, and counts the asks.

Intervals are small (keep-alive 0.1 s, backoff base 0.02 s); every wait has
a generous deadline that only guards against a hang. No test asserts how
long anything took.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Final, Protocol, cast

import pytest
import trio

from diverge_notifications.adapters import ConnectionFailed, parse_url
from diverge_notifications.adapters import asyncio as asyncio_adapter
from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.adapters import trio as trio_adapter
from diverge_notifications.sansio import (
    Ask,
    Event,
    Exchange,
    ExchangeConnection,
    Hub,
    Notification,
    NotificationReceived,
    NotServed,
    ProxyConnection,
    ReaskNeeded,
    ResultReceived,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
)
from diverge_notifications.sansio.client.policy import Backoff, ProxyPolicy
from diverge_notifications.sansio.drivers.actions import (
    Connect,
    Deliver,
    Disconnect,
    Receive,
    Send,
    Sleep,
)
from diverge_notifications.sansio.drivers.listen import (
    DEFAULT_CONNECT_TIMEOUT,
    ListenDriver,
    idle_timeout_reason,
)
from diverge_notifications.sansio.drivers.serve import ServingConnection
from diverge_notifications.sansio.drivers.settings import ClientSettings, ServeSettings
from diverge_notifications.sansio.events import (
    NEED_DATA,
    AttemptsExhausted,
    NotificationsAsked,
    RetryScheduled,
)
from diverge_notifications.sansio.server.connection import ServerConnection

#: Deadline of every wait: generous for a loaded CI machine, short enough to fail a hang.
HANG: Final = 30.0
KEEPALIVE: Final = 0.1
BACKOFF: Final = Backoff(base=0.02, cap=0.2)
#: A fixed jitter draw, so that delays are predictable (half the ceiling).
HALF: Final = 0.5

Item = Notification | Event


def policy(**options: Any) -> ProxyPolicy:
    return ProxyPolicy(require_exchange=False, backoff=BACKOFF, **options)


def progress(index: int) -> Notification:
    return Notification("notifications/progress", {"progressToken": "load", "progress": index})


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def wait_until(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + HANG
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


# --- what a listener delivered ----------------------------------------------------


class Received:
    """The items one listener delivered, collected from whatever thread ran it."""

    def __init__(self) -> None:
        self._queue: queue.Queue[Item] = queue.Queue()
        self.items: list[Item] = []
        self.finished = threading.Event()

    def put(self, item: Item) -> None:
        self._queue.put(item)

    def next(self) -> Item:
        try:
            item = self._queue.get(timeout=HANG)
        except queue.Empty:
            raise AssertionError(f"no item within {HANG} s; so far: {self.items!r}") from None
        self.items.append(item)
        return item

    def until(self, predicate: Callable[[Item], bool]) -> list[Item]:
        """Items up to and including the first one ``predicate`` accepts."""
        taken: list[Item] = []
        while True:
            item = self.next()
            taken.append(item)
            if predicate(item):
                return taken

    def until_type(self, kind: type[Event]) -> list[Item]:
        return self.until(lambda item: isinstance(item, kind))

    def drain(self) -> list[Item]:
        """Everything delivered and not yet taken, without waiting."""
        taken: list[Item] = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return taken
            self.items.append(item)
            taken.append(item)


def notifications_in(items: list[Item]) -> list[Notification]:
    return [item.notification for item in items if isinstance(item, NotificationReceived)]


def run_exchange(url: str, ask: Ask, token: str | None = None) -> list[Event]:
    """Ask one exchange (kinds 0-3) of the server at ``url``; its events."""
    endpoint = parse_url(url)
    connection = ExchangeConnection(endpoint.authority, ask, token=token)
    with socket.create_connection((endpoint.host, endpoint.port), timeout=HANG) as sock:
        sock.sendall(connection.data_to_send())
        while data := sock.recv(4096):
            connection.receive_data(data)
        connection.receive_data(b"")
    events = []
    while (event := connection.next_event()) is not NEED_DATA:
        events.append(event)
    return events


# --- the runners: one synchronous face for three adapters ---------------------------


class ServerHandle:
    """A running server of any adapter; ``publish_many`` publishes in the server's thread."""

    def __init__(
        self,
        url: str,
        publish_many: Callable[[list[Notification]], list[int]],
        close: Callable[[], None],
        subscribers: Callable[[], int],
    ) -> None:
        self.url = url
        self.port = parse_url(url).port
        self.publish_many = publish_many
        self.close = close
        self.subscribers = subscribers

    def publish(self, notification: Notification) -> None:
        self.publish_many([notification])


def publish_each(publish: Callable[[object], int]) -> Callable[[list[Notification]], list[int]]:
    """Publishes each notification; how many subscribers queued each one."""

    def publish_many(notifications: list[Notification]) -> list[int]:
        return [publish(notification) for notification in notifications]

    return publish_many


class ListenerHandle:
    def __init__(self, received: Received, stop: Callable[[], None]) -> None:
        self.received = received
        self._stop = stop

    def stop(self) -> None:
        self._stop()
        assert self.received.finished.wait(HANG), "the listener did not stop"


class Runner(Protocol):
    name: str

    def serve(self, hub: Hub, **options: Any) -> ServerHandle: ...

    def listen(self, url: str, **options: Any) -> ListenerHandle: ...

    def close(self) -> None: ...


class AsyncioRunner:
    name = "asyncio"

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(HANG)

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        async def call() -> Any:
            return function(*args)

        return self.run(call())

    def serve(self, hub: Hub, **options: Any) -> ServerHandle:
        options.setdefault("keepalive_interval", KEEPALIVE)
        server: asyncio_adapter.Server = self.run(asyncio_adapter.serve(hub, **options))
        return ServerHandle(
            server.url,
            publish_many=lambda items: self.call(publish_each(server.publish), items),
            close=lambda: self.run(server.close()),
            subscribers=lambda: int(self.call(lambda: hub.subscribers)),
        )

    def listen(self, url: str, **options: Any) -> ListenerHandle:
        options.setdefault("keepalive_interval", KEEPALIVE)
        return self.collect(lambda: asyncio_adapter.listen(url, **options))

    def collect(self, items: Callable[[], Any], *, failure_as_item: bool = False) -> ListenerHandle:
        """Iterate ``items()`` (an async generator) in the loop, into a :class:`Received`.

        With ``failure_as_item``, an exception that ends the iteration is
        put among the items, where a test meets it in order.
        """
        received = Received()

        async def consume() -> None:
            try:
                async with contextlib.aclosing(items()) as iterated:
                    async for item in iterated:
                        received.put(item)
            except Exception as error:
                if not failure_as_item:
                    raise
                received.put(cast("Item", error))  # a test meets it in order
            finally:
                received.finished.set()

        future = asyncio.run_coroutine_threadsafe(consume(), self.loop)

        def stop() -> None:
            future.cancel()  # cancels the task that iterates

        return ListenerHandle(received, stop=stop)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(HANG)
        self.loop.close()


class TrioRunner:
    name = "trio"

    def __init__(self) -> None:
        started = threading.Event()
        self._stop: trio.Event | None = None

        async def main() -> None:
            self.token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            async with trio.open_nursery() as nursery:
                self.nursery = nursery
                started.set()
                await self._stop.wait()
                nursery.cancel_scope.cancel()

        self.thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
        self.thread.start()
        assert started.wait(HANG)

    def run(self, function: Callable[..., Any], *args: Any) -> Any:
        return trio.from_thread.run(function, *args, trio_token=self.token)

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        return trio.from_thread.run_sync(function, *args, trio_token=self.token)

    def start_server(
        self, hub: Hub, **options: Any
    ) -> tuple[trio_adapter.Server, Callable[[], None]]:
        """A server kept open in the loop's nursery, and what closes it (and waits)."""
        done = trio.Event()
        closed = threading.Event()

        async def keep(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            try:
                async with trio_adapter.serve(hub, **options) as server:
                    task_status.started(server)
                    await done.wait()
            finally:
                closed.set()

        server: trio_adapter.Server = self.run(self.nursery.start, keep)

        def close() -> None:
            self.call(done.set)
            assert closed.wait(HANG)

        return server, close

    def serve(self, hub: Hub, **options: Any) -> ServerHandle:
        options.setdefault("keepalive_interval", KEEPALIVE)
        server, close = self.start_server(hub, **options)
        return ServerHandle(
            server.url,
            publish_many=lambda items: self.call(publish_each(server.publish), items),
            close=close,
            subscribers=lambda: int(self.call(lambda: hub.subscribers)),
        )

    def listen(self, url: str, **options: Any) -> ListenerHandle:
        options.setdefault("keepalive_interval", KEEPALIVE)
        return self.collect(lambda: trio_adapter.listen(url, **options))

    def collect(self, items: Callable[[], Any], *, failure_as_item: bool = False) -> ListenerHandle:
        """Iterate ``items()`` (an async generator) in the nursery (see AsyncioRunner.collect)."""
        received = Received()

        async def consume(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
            try:
                with trio.CancelScope() as scope:
                    task_status.started(scope)
                    async with contextlib.aclosing(items()) as iterated:
                        async for item in iterated:
                            received.put(item)
            except Exception as error:
                if not failure_as_item:
                    raise
                received.put(cast("Item", error))  # a test meets it in order
            finally:
                received.finished.set()

        scope: trio.CancelScope = self.run(self.nursery.start, consume)
        return ListenerHandle(received, stop=lambda: self.call(scope.cancel))

    def close(self) -> None:
        if self._stop is not None:
            self.call(self._stop.set)
        self.thread.join(HANG)


class BlockingRunner:
    name = "blocking"

    def serve(self, hub: Hub, **options: Any) -> ServerHandle:
        options.setdefault("keepalive_interval", KEEPALIVE)
        server = blocking_adapter.serve(hub, **options)

        def subscribers() -> int:
            with server.lock:
                return hub.subscribers

        return ServerHandle(
            server.url,
            publish_many=publish_each(server.publish),
            close=server.close,
            subscribers=subscribers,
        )

    def listen(self, url: str, **options: Any) -> ListenerHandle:
        options.setdefault("keepalive_interval", KEEPALIVE)
        return self.collect(blocking_adapter.listen(url, **options))

    @staticmethod
    def collect(items: Any, *, failure_as_item: bool = False) -> ListenerHandle:
        """Iterate ``items`` (a generator) in a thread (see AsyncioRunner.collect)."""
        received = Received()

        def consume() -> None:
            try:
                for item in items:
                    received.put(item)
            except Exception as error:
                if not failure_as_item:
                    raise
                received.put(cast("Item", error))  # a test meets it in order
            finally:
                received.finished.set()

        threading.Thread(target=consume, daemon=True).start()
        return ListenerHandle(received, stop=items.close)

    def close(self) -> None:
        pass


RUNNER_NAMES: Final = ("asyncio", "trio", "blocking")


@pytest.fixture(scope="module")
def runners() -> Iterator[dict[str, Runner]]:
    made: dict[str, Runner] = {
        "asyncio": AsyncioRunner(),
        "trio": TrioRunner(),
        "blocking": BlockingRunner(),
    }
    yield made
    for runner in made.values():
        runner.close()


@pytest.fixture(params=RUNNER_NAMES)
def runner(request: pytest.FixtureRequest, runners: dict[str, Runner]) -> Runner:
    return runners[request.param]


# --- a scripted server ----------------------------------------------------------------


class ScriptedConnection:
    """One accepted connection of :class:`ScriptedServer`, its ask already read."""

    def __init__(self, sock: socket.socket, connection: ServerConnection) -> None:
        self.socket = sock
        self.connection = connection
        self.peer_closed = threading.Event()

    def send(self, data: bytes) -> None:
        self.socket.sendall(data)

    def open_path(self, *notifications: Notification) -> None:
        data = self.connection.start_path()
        if notifications:
            data += self.connection.send_notifications(notifications)
        self.send(data)

    def hold(self, stop: threading.Event, *, keepalive: float | None) -> None:
        """Keep the connection open until ``stop`` or the peer closes it.

        With ``keepalive`` a keep-alive frame goes out at that interval;
        without, the path is silent.
        """
        self.socket.settimeout(keepalive if keepalive is not None else 0.05)
        while not stop.is_set():
            try:
                data = self.socket.recv(4096)
            except TimeoutError:
                if keepalive is not None:
                    with contextlib.suppress(OSError):
                        self.send(self.connection.send_keepalive())
                continue
            except OSError:
                data = b""
            if not data:
                self.peer_closed.set()
                return


Script = Callable[[int, ScriptedConnection], None]


class ScriptedServer:
    """Accepts connections, reads each ask, and hands it to ``script(index, connection)``.

    ``asks`` counts the notification asks read. The script returns when it
    is done with the connection, which is then closed (abruptly unless the
    script ended the path).
    """

    def __init__(self, script: Script, port: int = 0) -> None:
        self._script = script
        self._listener = socket.create_server(("127.0.0.1", port))
        self._listener.settimeout(0.05)
        self.port: int = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.asks = 0
        self.connections: list[ScriptedConnection] = []
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                sock, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(sock,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, sock: socket.socket) -> None:
        with sock:
            sock.settimeout(HANG)
            connection = ServerConnection()
            while True:
                data = sock.recv(4096)
                connection.receive_data(data)
                event = connection.next_event()
                while event is not NEED_DATA and not isinstance(event, NotificationsAsked):
                    event = connection.next_event()
                if isinstance(event, NotificationsAsked):
                    break
                if not data:
                    return
            scripted = ScriptedConnection(sock, connection)
            with self._lock:
                index = self.asks
                self.asks += 1
                self.connections.append(scripted)
            with contextlib.suppress(OSError):
                self._script(index, scripted)

    def close(self) -> None:
        self.stop.set()
        self._acceptor.join(HANG)
        self._listener.close()
        for thread in self._threads:
            thread.join(HANG)

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def decline(_index: int, connection: ScriptedConnection) -> None:
    connection.send(connection.connection.decline())


# --- scenarios ------------------------------------------------------------------------


def test_notifications_arrive_in_order(runner: Runner) -> None:
    hub = Hub()
    server = runner.serve(hub)
    listener = runner.listen(server.url, events=True, policy=policy())
    try:
        listener.received.until_type(StreamOpened)
        sent = [progress(index) for index in range(300)]
        for notification in sent:
            server.publish(notification)
        got = notifications_in(
            listener.received.until(
                lambda item: (
                    isinstance(item, NotificationReceived) and item.notification == sent[-1]
                )
            )
        )
        assert got == sent
        assert [item.to_bytes() for item in got] == [item.to_bytes() for item in sent]
    finally:
        listener.stop()
        server.close()


@pytest.mark.parametrize("server_name", RUNNER_NAMES)
def test_every_listener_adapter_hears_every_server_adapter(
    runner: Runner, server_name: str, runners: dict[str, Runner]
) -> None:
    hub = Hub()
    server = runners[server_name].serve(hub)
    listener = runner.listen(server.url, policy=policy())
    try:
        # Without events the listener yields notifications only; publish
        # until the path is open, then the marked sequence.
        wait_until(lambda: server.subscribers() == 1, "the subscription")
        sent = [progress(index) for index in range(20)]
        for notification in sent:
            server.publish(notification)
        got = [listener.received.next() for _ in sent]
        assert got == sent
        assert all(isinstance(item, Notification) for item in got)
    finally:
        listener.stop()
        server.close()


def test_bursts_from_another_thread_arrive_without_waiting_for_keepalives(
    runner: Runner,
) -> None:
    # Keep-alives far beyond the hang guard: a writer that missed a wake-up
    # would sit until the next keep-alive, and the wait below would fail.
    hub = Hub(queue_size=100_000)
    server = runner.serve(hub, keepalive_interval=1000.0)
    listener = runner.listen(server.url, events=True, policy=policy(), keepalive_interval=1000.0)
    try:
        listener.received.until_type(StreamOpened)
        rng = random.Random(4)
        index = 0
        for _ in range(60):
            size = rng.choice([1, 1, 2, 3, 10, 100, 700])
            burst = [progress(index + offset) for offset in range(size)]
            index += size
            publisher = threading.Thread(target=server.publish_many, args=(burst,))
            publisher.start()
            got = notifications_in([listener.received.next() for _ in burst])
            publisher.join(HANG)
            assert got == burst
    finally:
        listener.stop()
        server.close()


def test_a_stalled_listener_loses_only_its_own_notifications(runner: Runner) -> None:
    hub = Hub(queue_size=16)
    server = runner.serve(hub)
    listener = runner.listen(server.url, events=True, policy=policy())
    endpoint = parse_url(server.url)
    stalled = socket.socket()
    try:
        listener.received.until_type(StreamOpened)
        # Asks, then never reads, with a small receive buffer.
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect((endpoint.host, endpoint.port))
        stalled.sendall(ProxyConnection(endpoint.authority).data_to_send())
        wait_until(lambda: server.subscribers() == 2, "the stalled subscription")
        filler = "x" * 2000  # 4000 of these outgrow every kernel buffer on the way
        queued = 0
        for start in range(0, 4000, 8):
            batch = [
                Notification("notifications/message", {"level": "info", "data": [index, filler]})
                for index in range(start, start + 8)
            ]
            queued += sum(server.publish_many(batch))
            # Keep pace with the listener that reads: its queue never fills.
            got = [listener.received.next() for _ in batch]
            assert notifications_in(got) == batch
        assert queued < 2 * 4000, "the stalled listener lost nothing"
    finally:
        stalled.close()
        listener.stop()
        server.close()


def test_clean_end_by_the_server_asks_again(runner: Runner) -> None:
    sent = [progress(index) for index in range(3)]

    def script(index: int, connection: ScriptedConnection) -> None:
        if index == 0:
            connection.open_path(*sent)
            connection.send(connection.connection.end_path())
        else:
            connection.open_path(progress(99))
            connection.hold(scripted.stop, keepalive=KEEPALIVE / 2)

    with ScriptedServer(script) as scripted:
        listener = runner.listen(scripted.url, events=True, policy=policy(), random=lambda: HALF)
        try:
            first = listener.received.until_type(StreamEnded)
            assert notifications_in(first) == sent
            after = listener.received.until(
                lambda item: (
                    isinstance(item, NotificationReceived) and item.notification == progress(99)
                )
            )
            kinds = [type(item) for item in after]
            assert kinds[:3] == [ReaskNeeded, RetryScheduled, StreamOpened]
            assert scripted.asks == 2
        finally:
            listener.stop()


def test_abrupt_close_by_the_server_asks_again(runner: Runner) -> None:
    def script(index: int, connection: ScriptedConnection) -> None:
        if index == 0:
            connection.open_path(progress(0), progress(1))
            connection.socket.shutdown(socket.SHUT_RDWR)  # no last chunk: abrupt
        else:
            connection.open_path(progress(2))
            connection.hold(scripted.stop, keepalive=KEEPALIVE / 2)

    with ScriptedServer(script) as scripted:
        listener = runner.listen(scripted.url, events=True, policy=policy(), random=lambda: HALF)
        try:
            first = listener.received.until_type(StreamBroken)
            assert notifications_in(first) == [progress(0), progress(1)]
            after = listener.received.until(
                lambda item: (
                    isinstance(item, NotificationReceived) and item.notification == progress(2)
                )
            )
            assert [type(item) for item in after[:3]] == [ReaskNeeded, RetryScheduled, StreamOpened]
            assert scripted.asks == 2
        finally:
            listener.stop()


def test_server_down_at_start_then_up(runner: Runner) -> None:
    port = free_port()
    listener = runner.listen(
        f"http://127.0.0.1:{port}", events=True, policy=policy(), random=lambda: HALF
    )
    server: ServerHandle | None = None
    try:
        delays: list[float] = []
        for _ in range(4):
            failed = listener.received.next()
            assert isinstance(failed, ConnectionFailed)
            assert failed.reason.startswith("ECONNREFUSED: ")
            retry = listener.received.next()
            assert isinstance(retry, RetryScheduled)
            delays.append(retry.delay)
        # Full jitter with a fixed draw: half of base * 2**failures, until the cap.
        assert delays == [HALF * BACKOFF.ceiling(failures) for failures in range(1, 5)]
        assert delays == sorted(delays) and delays[0] < delays[-1]
        server = runner.serve(Hub(), port=port)
        listener.received.until_type(StreamOpened)
    finally:
        listener.stop()
        if server is not None:
            server.close()


def test_silent_path_times_out_and_asks_again(runner: Runner) -> None:
    def script(index: int, connection: ScriptedConnection) -> None:
        if index == 0:
            connection.open_path()  # the head, then silence: not even a keep-alive
            connection.hold(scripted.stop, keepalive=None)
        else:
            connection.open_path(progress(index))
            connection.hold(scripted.stop, keepalive=KEEPALIVE / 2)

    with ScriptedServer(script) as scripted:
        listener = runner.listen(scripted.url, events=True, policy=policy())
        try:
            first = listener.received.until_type(StreamBroken)
            broken = first[-1]
            assert isinstance(broken, StreamBroken)
            assert broken.reason == idle_timeout_reason(3 * KEEPALIVE)
            assert broken.reason == "idle timeout: no data for 0.3 s"
            assert len(first) == 2 and isinstance(first[0], StreamOpened)
            listener.received.until(
                lambda item: (
                    isinstance(item, NotificationReceived) and item.notification == progress(1)
                )
            )
            # The listener closed the silent connection when it gave up on it.
            assert scripted.connections[0].peer_closed.wait(HANG)
        finally:
            listener.stop()


def test_not_served_asks_again_with_backoff_and_no_spin(runner: Runner) -> None:
    with ScriptedServer(decline) as scripted:
        started = time.monotonic()
        listener = runner.listen(scripted.url, events=True, policy=policy(), random=lambda: HALF)
        try:
            retries: list[RetryScheduled] = []
            while len(retries) < 8:
                item = listener.received.next()
                if isinstance(item, RetryScheduled):
                    retries.append(item)
                elif isinstance(item, NotServed):
                    assert item.status == 200
        finally:
            listener.stop()
        elapsed = time.monotonic() - started
        # Every not-served path counts as a failure: the delay grows to the cap.
        assert [retry.attempt for retry in retries] == list(range(2, 10))
        assert [retry.delay for retry in retries] == [
            HALF * BACKOFF.ceiling(failures) for failures in range(1, 9)
        ]
        # No spin: the asks made fit in the time the backoff allowed, whatever
        # the machine's speed (a slower machine only makes fewer).
        allowed = 1
        budget = elapsed
        failures = 1
        while budget >= 0:
            budget -= HALF * BACKOFF.ceiling(failures)
            failures += 1
            allowed += 1
        assert 8 <= scripted.asks <= allowed


def test_attempts_exhausted_ends_the_listener(runner: Runner) -> None:
    port = free_port()
    listener = runner.listen(f"http://127.0.0.1:{port}", events=True, policy=policy(max_attempts=3))
    items = listener.received.until_type(AttemptsExhausted)
    assert [type(item) for item in items] == [
        ConnectionFailed,
        RetryScheduled,
        ConnectionFailed,
        RetryScheduled,
        ConnectionFailed,
        AttemptsExhausted,
    ]
    exhausted = items[-1]
    assert isinstance(exhausted, AttemptsExhausted) and exhausted.attempts == 3
    assert listener.received.finished.wait(HANG), "the listener goes on after AttemptsExhausted"
    listener.stop()


def test_cancelled_listener_closes_and_asks_no_more(runner: Runner) -> None:
    def script(index: int, connection: ScriptedConnection) -> None:
        connection.open_path(progress(index))
        connection.hold(scripted.stop, keepalive=KEEPALIVE / 2)

    with ScriptedServer(script) as scripted:
        listener = runner.listen(scripted.url, events=True, policy=policy())
        listener.received.until_type(NotificationReceived)
        listener.stop()
        assert scripted.connections[0].peer_closed.wait(HANG), "the socket stayed open"
        # Give a re-ask every chance to happen (many backoff ceilings), then count.
        time.sleep(20 * BACKOFF.base)
        assert scripted.asks == 1
        assert listener.received.drain() == []


def test_server_close_ends_every_path_cleanly(runner: Runner) -> None:
    hub = Hub()
    server = runner.serve(hub)
    listeners = [runner.listen(server.url, events=True, policy=policy()) for _ in range(3)]
    try:
        for listener in listeners:
            listener.received.until_type(StreamOpened)
        server.publish(progress(1))
        for listener in listeners:
            listener.received.until_type(NotificationReceived)
        server.close()
        for listener in listeners:
            terminal = listener.received.until(
                lambda item: isinstance(item, (StreamEnded, StreamBroken, NotServed))
            )[-1]
            assert isinstance(terminal, StreamEnded)
            assert isinstance(listener.received.next(), ReaskNeeded)
    finally:
        for listener in listeners:
            listener.stop()


def test_server_forgets_a_listener_that_went_away(runner: Runner) -> None:
    hub = Hub()
    server = runner.serve(hub)
    try:
        listener = runner.listen(server.url, events=True, policy=policy())
        listener.received.until_type(StreamOpened)
        assert server.subscribers() == 1
        listener.stop()
        wait_until(lambda: server.subscribers() == 0, "the unsubscription")
    finally:
        server.close()


def test_server_sends_keepalives_on_an_idle_path(runner: Runner) -> None:
    hub = Hub()
    server = runner.serve(hub, keepalive_interval=0.05)
    try:
        endpoint = parse_url(server.url)
        with socket.create_connection((endpoint.host, endpoint.port), timeout=HANG) as sock:
            proxy = ProxyConnection(endpoint.authority)
            sock.sendall(proxy.data_to_send())
            received = b""
            # The head, then at least three keep-alive chunks and nothing else.
            keepalive_chunk = b"4\r\n\x00\x00\x00\x00\r\n"
            while received.count(keepalive_chunk) < 3:
                data = sock.recv(4096)
                assert data, "the server closed an idle path"
                received += data
            proxy.receive_data(received)
            events = []
            while (event := proxy.next_event()) is not NEED_DATA:
                events.append(event)
            assert [type(event) for event in events] == [StreamOpened]
    finally:
        server.close()


def test_server_refuses_and_declines(runner: Runner) -> None:
    hub = Hub()
    server = runner.serve(hub, token="secret")
    try:
        list_tools = Ask(exchange=Exchange.LIST_TOOLS)
        refused = run_exchange(server.url, list_tools)
        assert isinstance(refused[-1], NotServed) and refused[-1].status == 401
        # Without a handler, kinds 0-3 are declined: a clean end with no message.
        declined = run_exchange(server.url, list_tools, token="secret")
        assert isinstance(declined[-1], NotServed) and declined[-1].status == 200

        listener = runner.listen(server.url, events=True, policy=policy(max_attempts=1))
        items = listener.received.until_type(AttemptsExhausted)
        not_served = [item for item in items if isinstance(item, NotServed)]
        assert [item.status for item in not_served] == [401]
        listener.stop()
    finally:
        server.close()


def test_server_answers_exchanges_with_a_handler(runner: Runner) -> None:
    def handler(ask: Ask) -> dict[str, Any] | None:
        if ask.exchange is Exchange.CALL_TOOL:
            if ask.params == {"name": "nan"}:
                return {"value": float("nan")}  # not JSON: answered as an internal error
            raise RuntimeError("no such tool")
        if ask.exchange is Exchange.READ_RESOURCE:
            return None
        return {"tools": [], "asked": ask.exchange.name}

    hub = Hub()
    server = runner.serve(hub, exchange_handler=handler)
    try:
        answered = run_exchange(server.url, Ask(exchange=Exchange.LIST_TOOLS))
        results = [event for event in answered if isinstance(event, ResultReceived)]
        assert [result.result for result in results] == [{"tools": [], "asked": "LIST_TOOLS"}]
        assert isinstance(answered[-1], StreamEnded)
        failed = run_exchange(server.url, Ask(exchange=Exchange.CALL_TOOL, params={"name": "x"}))
        assert isinstance(failed[-1], StreamErrored)
        assert failed[-1].error.code == -32603
        assert "no such tool" in failed[-1].error.message
        invalid = run_exchange(server.url, Ask(exchange=Exchange.CALL_TOOL, params={"name": "nan"}))
        assert isinstance(invalid[-1], StreamErrored) and invalid[-1].error.code == -32603
        declined = run_exchange(server.url, Ask(exchange=Exchange.READ_RESOURCE, params={}))
        assert isinstance(declined[-1], NotServed)
    finally:
        server.close()


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (a reset is a close too)."""
    received = b""
    while True:
        try:
            data = sock.recv(4096)
        except ConnectionResetError:
            return received
        except TimeoutError:
            raise AssertionError(f"the server held the connection for {HANG} s") from None
        if not data:
            return received
        received += data


@pytest.mark.parametrize(
    "sent",
    [
        pytest.param(b"", id="silent"),
        pytest.param(b"POST /requests HTTP/1.1\r\nHost: x\r\n", id="half-head"),
        pytest.param(ProxyConnection("x").data_to_send()[:-2], id="half-body"),
    ],
)
def test_server_closes_a_connection_that_never_completes_its_ask(
    runner: Runner, sent: bytes
) -> None:
    server = runner.serve(Hub(), ask_timeout=0.1)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=HANG) as sock:
            if sent:
                sock.sendall(sent)
            # Closed without an answer: the peer never said what it wanted.
            assert read_until_closed(sock) == b""
        # The server goes on serving asks that do arrive.
        declined = run_exchange(server.url, Ask(exchange=Exchange.LIST_TOOLS))
        assert isinstance(declined[-1], NotServed) and declined[-1].status == 200
    finally:
        server.close()


def test_ask_timeout_does_not_limit_an_open_path(runner: Runner) -> None:
    hub = Hub()
    server = runner.serve(hub, ask_timeout=0.05)
    listener = runner.listen(server.url, events=True, policy=policy())
    try:
        assert isinstance(listener.received.next(), StreamOpened)
        time.sleep(0.3)  # several ask timeouts: the path is past its ask
        server.publish(progress(1))
        received = listener.received.next()
        assert isinstance(received, NotificationReceived)
        assert received.notification == progress(1)
    finally:
        listener.stop()
        server.close()


@pytest.mark.parametrize("name", ["asyncio", "trio"])
def test_async_servers_take_a_coroutine_exchange_handler(
    name: str, runners: dict[str, Runner]
) -> None:
    async def handler(ask: Ask) -> dict[str, Any]:
        return {"tools": [{"name": "t"}]}

    server = runners[name].serve(Hub(), exchange_handler=handler)
    try:
        answered = run_exchange(server.url, Ask(exchange=Exchange.LIST_TOOLS))
        results = [event for event in answered if isinstance(event, ResultReceived)]
        assert [result.result for result in results] == [{"tools": [{"name": "t"}]}]
    finally:
        server.close()


# --- things that do not need a network ---------------------------------------------------


def test_parse_url() -> None:
    endpoint = parse_url("http://127.0.0.1:8080")
    assert (endpoint.host, endpoint.port, endpoint.authority, endpoint.target) == (
        "127.0.0.1",
        8080,
        "127.0.0.1:8080",
        "/requests",
    )
    assert parse_url("http://example.test/base/").target == "/base/requests"
    assert parse_url("http://example.test").port == 80
    v6 = parse_url("http://[::1]:9000/x")
    assert (v6.host, v6.authority, v6.target) == ("::1", "[::1]:9000", "/x/requests")
    assert (endpoint.scheme, endpoint.tls) == ("http", False)
    secure = parse_url("HTTPS://example.test/base")
    assert (secure.scheme, secure.tls, secure.port, secure.target) == (
        "https",
        True,
        443,
        "/base/requests",
    )
    assert parse_url("https://example.test:8443").port == 8443
    for bad in ("ftp://h", "http://", "http://u:p@h:1", "http://h:1/?q", "h:1", "wss://h"):
        with pytest.raises(ValueError):
            parse_url(bad)


def test_listen_driver_without_io() -> None:
    # The adapters' shared loop body, driven by hand with a fake clock.
    driver = ListenDriver(
        "http://127.0.0.1:9/base",
        ClientSettings(events=True, keepalive_interval=2.0),
        policy=policy(),
    )
    connect = driver.next_action(100.0)
    assert connect == Connect(host="127.0.0.1", port=9, timeout=DEFAULT_CONNECT_TIMEOUT)
    driver.connected(100.0)
    send = driver.next_action(100.0)
    assert isinstance(send, Send) and send.data.startswith(b"POST /base/requests HTTP/1.1\r\n")
    assert driver.next_action(100.0) == Receive(timeout=6.0)
    server = ServerConnection(target="/base/requests")
    server.receive_data(send.data)
    assert isinstance(server.next_event(), NotificationsAsked)
    driver.data_received(100.1, server.start_path() + server.send_notification(progress(1)))
    delivered = driver.next_action(100.1)
    assert isinstance(delivered, Deliver)
    assert [type(item) for item in delivered.items] == [StreamOpened, NotificationReceived]
    assert driver.next_action(100.1) == Receive(timeout=6.0)
    driver.timed_out(106.1)
    assert driver.next_action(106.1) == Disconnect()
    ended = driver.next_action(106.1)
    assert isinstance(ended, Deliver)
    broken, reask, retry = ended.items
    assert broken == StreamBroken(reason="idle timeout: no data for 6 s")
    assert isinstance(reask, ReaskNeeded) and isinstance(retry, RetryScheduled)
    # A path that delivered, then broke before healthy_after, was not healthy:
    # a poison stream must not reset the count (a clean end would).
    assert retry.attempt == 2
    sleep = driver.next_action(106.1)
    assert isinstance(sleep, Sleep) and sleep.delay == pytest.approx(retry.delay)
    assert isinstance(driver.next_action(106.1 + retry.delay), Connect)
    driver.connect_failed(107.0, "ECONNREFUSED: Connection refused")
    failed = driver.next_action(107.0)
    assert isinstance(failed, Deliver)
    assert failed.items[0] == ConnectionFailed(reason="ECONNREFUSED: Connection refused")


def test_serving_connection_ask_deadline_without_io() -> None:
    hub = Hub()

    def serving(**options: Any) -> ServingConnection:
        settings: ServeSettings[Any] = ServeSettings(ask_timeout=2.0, **options)
        return ServingConnection(hub, settings, wake=lambda: None, now=100.0)

    # Set when the connection is accepted; bytes of the ask do not move it.
    slow = serving()
    assert slow.ask_deadline == 102.0
    slow.receive(b"POST /requests HTTP/1.1\r\n", 101.0)
    assert slow.ask_deadline == 102.0
    slow.check_ask_deadline(101.9)
    assert not slow.done
    slow.check_ask_deadline(102.0)
    assert slow.done and slow.ask_deadline is None
    assert slow.take_output(102.0) == b""  # closed without an answer

    # Cleared once the ask is complete: a notification path...
    path = serving()
    path.receive(ProxyConnection("x").data_to_send(), 101.0)
    assert path.path_open and path.ask_deadline is None
    path.check_ask_deadline(1000.0)
    assert not path.done and path.path_open
    # ...an exchange waiting for its handler...
    exchange = serving(exchange_handler=lambda ask: None)
    exchange.receive(ExchangeConnection("x", Ask(exchange=Exchange.LIST_TOOLS)).data_to_send(), 101)
    assert exchange.exchange is not None and exchange.ask_deadline is None
    exchange.check_ask_deadline(1000.0)
    assert not exchange.done and exchange.exchange is not None
    # ...or a refusal.
    refused = serving(token="secret")
    refused.receive(ProxyConnection("x").data_to_send(), 101.0)
    assert refused.done and refused.ask_deadline is None
    assert refused.take_output(101.0).startswith(b"HTTP/1.1 401 ")
    # A connection that ends before its ask has no deadline either.
    gone = serving()
    gone.connection_lost()
    assert gone.ask_deadline is None

    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="ask_timeout must be positive"):
            ServeSettings(ask_timeout=bad)


def test_listen_driver_checks_the_token_as_its_asks_use_it() -> None:
    url = "http://127.0.0.1:9"
    for bad in ("", "s\u00e9cret", "a\nb", "trail ", "a b"):
        with pytest.raises(ValueError):
            ListenDriver(url, ClientSettings(token=bad), policy=policy())
    # A token the server could match, the driver takes and sends.
    driver = ListenDriver(url, ClientSettings(token="a!b~"), policy=policy())
    assert isinstance(driver.next_action(0.0), Connect)
    driver.connected(0.0)
    send = driver.next_action(0.0)
    assert isinstance(send, Send) and b"\r\nAuthorization: Bearer a!b~\r\n" in send.data


def test_importing_the_package_does_not_import_trio() -> None:
    import subprocess
    import sys

    code = (
        "import sys, diverge_notifications, diverge_notifications.adapters, "
        "diverge_notifications.adapters.asyncio, diverge_notifications.adapters.blocking; "
        "assert 'trio' not in sys.modules, 'trio was imported'"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_blocking_listener_closes_from_another_thread() -> None:
    hub = Hub()
    with blocking_adapter.serve(hub, keepalive_interval=KEEPALIVE) as server:
        listener = blocking_adapter.listen(
            server.url, events=True, policy=policy(), keepalive_interval=KEEPALIVE
        )
        got: list[Item] = []
        done = threading.Event()

        def consume() -> None:
            for item in listener:
                got.append(item)
            done.set()

        thread = threading.Thread(target=consume, daemon=True)
        thread.start()
        wait_until(lambda: any(isinstance(item, StreamOpened) for item in got), "the path")
        # The consumer is blocked reading an idle path; close() wakes it.
        listener.close()
        assert done.wait(HANG)
        wait_until(lambda: server.connections == 0, "the server to see the close")


def test_asyncio_listener_stops_on_aclose() -> None:
    async def main() -> list[Item]:
        hub = Hub()
        async with await asyncio_adapter.serve(hub, keepalive_interval=KEEPALIVE) as server:
            items = asyncio_adapter.listen(server.url, events=True, policy=policy())
            got = [await items.__anext__()]
            assert isinstance(got[0], StreamOpened)
            await items.aclose()
            for _ in range(100):
                if hub.subscribers == 0:
                    break
                await asyncio.sleep(0.01)
            assert hub.subscribers == 0
            return got

    assert len(asyncio.run(main())) == 1
