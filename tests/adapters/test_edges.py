"""The adapters at their edges: the container profile, options that cannot work,
a server closed twice, and a server out of file descriptors.

In the container profile a notification path has no finish while the
connection lives: a server that shuts down after sending notifications can
only close the connection, and the listener sees the path broken (then asks
again). A path that carried nothing may still be declined cleanly.

A token or an option that cannot work is refused when the server or the
listener is made, before any connection: never by every connection later.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Final
from unittest import mock

import pytest
import trio
import trio.testing

from diverge_notifications.adapters import asyncio as asyncio_adapter
from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.adapters import trio as trio_adapter
from diverge_notifications.adapters._common import READ_SIZE
from diverge_notifications.sansio import (
    Ask,
    Exchange,
    ExchangeConnection,
    Hub,
    Notification,
    NotificationReceived,
    NotServed,
    Profile,
    StreamBroken,
    StreamOpened,
)
from diverge_notifications.sansio.client.policy import Backoff, ProxyPolicy
from diverge_notifications.sansio.drivers.actions import Deliver, Disconnect
from diverge_notifications.sansio.drivers.listen import ListenDriver
from diverge_notifications.sansio.drivers.settings import ClientSettings, ServeSettings

HANG = 30.0


def container_path_closed_by_the_server(*, publish: Notification | None) -> list[object]:
    """Every event of one container-profile path that the server closes.

    The server publishes ``publish`` (if any) once the path is open, and
    closes as soon as the listener has it (or at once, with nothing).
    """

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
                    if publish is None:
                        await server.close()
                    else:
                        hub.publish(publish)
                if isinstance(item, NotificationReceived):
                    await server.close()
                if isinstance(item, (StreamBroken, NotServed)):
                    return

        await asyncio.wait_for(watch(), HANG)
        await listener.aclose()
        return seen

    return asyncio.run(scenario())


def test_shutdown_after_notifications_breaks_the_path_without_a_finish() -> None:
    progress = Notification("notifications/progress", {"progressToken": 1, "progress": 1})
    events = container_path_closed_by_the_server(publish=progress)
    terminals = [event for event in events if isinstance(event, (StreamBroken, NotServed))]
    # The server closed the connection without a finish, which the container
    # profile forbids after notifications; the listener saw the path break.
    assert any(isinstance(event, NotificationReceived) for event in events)
    assert len(terminals) == 1 and isinstance(terminals[0], StreamBroken)


def test_shutdown_with_nothing_sent_declines_cleanly() -> None:
    events = container_path_closed_by_the_server(publish=None)
    assert isinstance(events[-1], NotServed)


ADAPTERS: Final = ("asyncio", "trio", "blocking")


def start_and_close(adapter: str, **options: Any) -> None:
    """Start a server of ``adapter`` on a free port with ``options``, then close it."""
    if adapter == "asyncio":

        async def on_asyncio() -> None:
            server = await asyncio_adapter.serve(Hub(), **options)
            await server.close()

        asyncio.run(on_asyncio())
    elif adapter == "trio":

        async def on_trio() -> None:
            async with trio_adapter.serve(Hub(), **options):
                pass

        trio.run(on_trio)
    else:
        blocking_adapter.serve(Hub(), **options).close()


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize(
    "option",
    [
        {"keepalive_interval": 0},
        {"queue_size": 0},
        {"max_batch": 0},
        {"close_timeout": -1.0},
        {"keepalive_interval": float("nan")},
        {"ask_timeout": 0},
        {"ask_timeout": -1.0},
        {"ask_timeout": float("nan")},
    ],
)
def test_serve_refuses_options_that_cannot_work(adapter: str, option: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        start_and_close(adapter, **option)


#: Tokens no ServerConnection takes: a token is one or more visible ASCII characters.
SERVER_REFUSES: Final = ["", "a b", "s\u00e9cret", "a\nb", " lead", "trail ", "tab\t", "\x7f"]


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("token", SERVER_REFUSES)
def test_serve_refuses_a_token_no_connection_could_check(adapter: str, token: str) -> None:
    # Taken, such a token made every accepted connection fail instead.
    with pytest.raises(ValueError, match="token"):
        start_and_close(adapter, token=token)


def test_serve_settings_check_the_token_as_the_server_connection_does() -> None:
    options: dict[str, Any] = {
        "keepalive_interval": 1.0,
        "profile": Profile.PROVIDER,
        "exchange_handler": None,
        "queue_size": None,
        "max_batch": 1,
        "close_timeout": 1.0,
    }
    for refused in SERVER_REFUSES:
        with pytest.raises(ValueError, match="token"):
            ServeSettings(token=refused, **options)
    for taken in (None, "secret", "!~", "a" * 1000):
        settings: ServeSettings[Any] = ServeSettings(token=taken, **options)
        assert settings.token == taken


#: Tokens no ProxyConnection can put into an ask.
LISTENER_REFUSES: Final = ["", "s\u00e9cret", "a\nb", "a\r\nX-Injected: 1", "trail "]


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("token", LISTENER_REFUSES)
def test_listen_refuses_a_token_it_cannot_send_when_called(adapter: str, token: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"
        if adapter == "asyncio":

            async def on_asyncio() -> None:
                with pytest.raises(ValueError):
                    asyncio_adapter.listen(url, token=token)

            asyncio.run(on_asyncio())
        elif adapter == "trio":

            async def on_trio() -> None:
                with pytest.raises(ValueError):
                    trio_adapter.listen(url, token=token)

            trio.run(on_trio)
        else:
            with pytest.raises(ValueError):
                blocking_adapter.listen(url, token=token)
        # Refused before any connection was made.
        probe.setblocking(False)
        with pytest.raises(BlockingIOError):
            probe.accept()


# --- one shape for the three serve() -----------------------------------------------------


def test_asyncio_serve_is_entered_as_trio_s_is_and_can_be_awaited_too() -> None:
    async def first_notification(url: str, hub: Hub) -> object:
        policy = ProxyPolicy(require_exchange=False, backoff=Backoff(base=0.01, cap=0.05))
        listener = asyncio_adapter.listen(url, events=True, policy=policy)
        try:
            async for item in listener:
                if isinstance(item, StreamOpened):
                    hub.publish(PROGRESS)
                elif isinstance(item, NotificationReceived):
                    return item.notification
        finally:
            await listener.aclose()
        raise AssertionError("the listener ended")

    async def scenario() -> list[int]:
        hub = Hub()
        ports = []
        async with asyncio_adapter.serve(hub) as server:
            assert await asyncio.wait_for(first_notification(server.url, hub), HANG) == PROGRESS
            ports.append(server.port)
        async with await asyncio_adapter.serve(hub) as server:
            assert await asyncio.wait_for(first_notification(server.url, hub), HANG) == PROGRESS
            ports.append(server.port)
        server = await asyncio_adapter.serve(hub)
        ports.append(server.port)
        await server.close()
        return ports

    for port in asyncio.run(scenario()):
        # Each was closed: nothing listens there any more.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=HANG).close()


PROGRESS: Final = Notification("notifications/progress", {"progressToken": 1, "progress": 1})


# --- close() called twice ---------------------------------------------------------------


def send_exchange_ask(port: int) -> socket.socket:
    """A connection to the server on ``port`` whose exchange ask is sent."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=HANG)
    ask = ExchangeConnection(f"127.0.0.1:{port}", Ask(exchange=Exchange.LIST_TOOLS))
    sock.sendall(ask.data_to_send())
    return sock


@contextlib.asynccontextmanager
async def asyncio_server_held_by_an_exchange() -> AsyncIterator[
    tuple[asyncio_adapter.Server, asyncio.Event]
]:
    """An asyncio server whose exchange handler has been entered and waits for the event."""
    entered = asyncio.Event()
    release = asyncio.Event()

    async def handler(ask: Ask) -> dict[str, Any]:
        entered.set()
        await release.wait()  # a close() waits for this answer
        return {"tools": []}

    server = await asyncio_adapter.serve(Hub(), exchange_handler=handler, close_timeout=HANG)
    sock = await asyncio.to_thread(send_exchange_ask, server.port)
    try:
        await asyncio.wait_for(entered.wait(), HANG)
        yield server, release
    finally:
        sock.close()


def trio_held_exchange_handler() -> tuple[
    trio.Event, trio.Event, Callable[[Ask], Awaitable[dict[str, Any]]]
]:
    """A trio exchange handler that sets the first event and answers once the second is set."""
    entered = trio.Event()
    release = trio.Event()

    async def handler(ask: Ask) -> dict[str, Any]:
        entered.set()
        await release.wait()
        return {"tools": []}

    return entered, release, handler


def test_asyncio_close_twice_waits_for_the_same_completion() -> None:
    async def scenario() -> None:
        async with asyncio_server_held_by_an_exchange() as (server, release):
            first = asyncio.create_task(server.close())
            second = asyncio.create_task(server.close())
            for _ in range(20):
                await asyncio.sleep(0)
            assert not first.done()
            assert not second.done(), "the second close() returned while the first still closes"
            release.set()
            await asyncio.wait_for(second, HANG)
            assert server.connections == 0
            await asyncio.wait_for(first, HANG)
            await asyncio.wait_for(server.close(), HANG)  # a third, after the end: at once

    asyncio.run(scenario())


def test_asyncio_close_goes_on_when_its_first_caller_is_cancelled() -> None:
    async def scenario() -> None:
        async with asyncio_server_held_by_an_exchange() as (server, release):
            first = asyncio.create_task(server.close())
            await asyncio.sleep(0)
            first.cancel()
            with pytest.raises(asyncio.CancelledError):
                await first
            second = asyncio.create_task(server.close())
            for _ in range(20):
                await asyncio.sleep(0)
            assert not second.done(), "close() returned while the server still closes"
            release.set()
            await asyncio.wait_for(second, HANG)
            assert server.connections == 0

    asyncio.run(scenario())


def test_trio_close_twice_waits_for_the_same_completion() -> None:
    async def scenario() -> None:
        entered, release, handler = trio_held_exchange_handler()
        returned: list[int] = []

        with trio.fail_after(HANG):
            async with (
                trio_adapter.serve(Hub(), exchange_handler=handler, close_timeout=HANG) as server,
                trio.open_nursery() as nursery,
            ):
                sock = await trio.to_thread.run_sync(send_exchange_ask, server.port)
                try:
                    await entered.wait()

                    async def close() -> None:
                        await server.close()
                        returned.append(server.connections)

                    nursery.start_soon(close)
                    nursery.start_soon(close)
                    await trio.testing.wait_all_tasks_blocked()
                    assert returned == [], "a close() returned while the server still closes"
                    release.set()
                finally:
                    sock.close()
        assert returned == [0, 0]

    trio.run(scenario)


def test_trio_close_goes_on_when_its_first_caller_is_cancelled() -> None:
    async def scenario() -> None:
        entered, release, handler = trio_held_exchange_handler()

        async with trio_adapter.serve(
            Hub(), exchange_handler=handler, close_timeout=HANG
        ) as server:
            sock = await trio.to_thread.run_sync(send_exchange_ask, server.port)
            try:
                await entered.wait()
                with trio.CancelScope() as scope:
                    scope.cancel()
                    await server.close()
                release.set()
                await server.close()
                assert server.connections == 0
            finally:
                sock.close()

    # A close() cancelled half way must not leave the server half closed:
    # serve() closes it again, shielded, when its block is left, and no
    # cancellation can end that wait. So the guard is a thread's.
    errors: list[BaseException] = []

    def run() -> None:
        try:
            trio.run(scenario)
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG)
    assert not thread.is_alive(), "the server never finished closing"
    if errors:
        raise errors[0]


def test_blocking_close_twice_waits_for_the_same_completion() -> None:
    entered = threading.Event()
    release = threading.Event()

    def handler(ask: Ask) -> dict[str, Any]:
        entered.set()
        release.wait(HANG)
        return {"tools": []}

    server = blocking_adapter.serve(Hub(), exchange_handler=handler, close_timeout=HANG)
    sock = send_exchange_ask(server.port)
    returned: list[int] = []

    def close() -> None:
        server.close()
        returned.append(server.connections)

    try:
        assert entered.wait(HANG)
        closers = [threading.Thread(target=close, daemon=True) for _ in range(2)]
        for closer in closers:
            closer.start()
        # Neither returns while the handler holds the connection open.
        closers[1].join(0.2)
        assert returned == [], "a close() returned while the server still closes"
        release.set()
        for closer in closers:
            closer.join(HANG)
            assert not closer.is_alive()
        assert returned == [0, 0]
    finally:
        release.set()
        sock.close()
        server.close()


# --- the blocking server out of file descriptors ----------------------------------------------

#: Runs in a fresh interpreter with a low descriptor limit: a blocking server
#: accepts a connection with ``SPARE`` descriptors left, so that setting the
#: connection up fails, then serves the next one once descriptors are back.
_OUT_OF_DESCRIPTORS = """
import errno, os, resource, socket, sys, time

from diverge_notifications.adapters import blocking
from diverge_notifications.sansio import Hub, ProxyConnection

GUARD = 10.0
SPARE = int(sys.argv[1])

def wait_until(predicate, what):
    deadline = time.monotonic() + GUARD
    while not predicate():
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.01)

def ask(port):
    # A notifications ask; the head of the answer.
    with socket.create_connection(("127.0.0.1", port), timeout=GUARD) as sock:
        sock.sendall(ProxyConnection(f"127.0.0.1:{port}").data_to_send())
        head = b""
        while b"\\r\\n\\r\\n" not in head:
            data = sock.recv(4096)
            if not data:
                break
            head += data
    return head

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
limit = 256 if hard == resource.RLIM_INFINITY else min(256, hard)
resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
server = blocking.serve(Hub(), keepalive_interval=60.0)
# Everything the second ask needs is loaded and used once before descriptors run out.
assert ask(server.port).startswith(b"HTTP/1.1 200 "), "the first ask"
wait_until(lambda: server.connections == 0, "the first connection to end")

spare = []
while True:
    try:
        spare.append(os.open(os.devnull, os.O_RDONLY))
    except OSError as error:
        assert error.errno == errno.EMFILE, error
        break
for _ in range(SPARE):
    os.close(spare.pop())
# One descriptor for this end, one for the accepted end: what is left (if
# anything) does not make a connection's wake-up pair, or its selector.
client = socket.socket()
client.settimeout(GUARD)
client.connect(("127.0.0.1", server.port))
try:
    data = client.recv(1)
except ConnectionResetError:
    data = b""
except TimeoutError:
    sys.exit("the server kept a connection it could not serve")
assert data == b"", data
client.close()
wait_until(lambda: server.connections == 0, "the failed connection to be forgotten")

for descriptor in spare:
    os.close(descriptor)
try:
    head = ask(server.port)
except TimeoutError:
    sys.exit("no answer once descriptors were back: the server stopped accepting")
assert head.startswith(b"HTTP/1.1 200 "), head
wait_until(lambda: server.connections == 0, "the last connection to end")
server.close()
print("served")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is POSIX")
@pytest.mark.parametrize(
    "spare",
    [
        pytest.param(2, id="no-wakeup-pair"),
        pytest.param(4, id="no-selector"),
    ],
)
def test_blocking_server_survives_running_out_of_descriptors(spare: int) -> None:
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_OUT_OF_DESCRIPTORS), str(spare)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "served"


def _close_delimited_listener() -> ListenDriver:
    driver = ListenDriver(
        "http://127.0.0.1:9",
        ClientSettings(events=True, keepalive_interval=2.0),
        policy=ProxyPolicy(require_exchange=False, backoff=Backoff(base=0.01, cap=0.05)),
    )
    driver.next_action(100.0)
    driver.connected(100.0)
    driver.next_action(100.0)  # the ask
    head = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.diverge.messages\r\n"
        b"Content-Location: /mcp/notifications/c1\r\nConnection: close\r\n\r\n"
    )
    driver.data_received(100.1, head)
    driver.next_action(100.1)  # StreamOpened
    return driver


def _ending(driver: ListenDriver, now: float) -> list[object]:
    assert driver.next_action(now) == Disconnect()
    delivered = driver.next_action(now)
    assert isinstance(delivered, Deliver)
    return list(delivered.items)


@pytest.mark.parametrize("how", ["timed out", "lost"])
def test_a_close_delimited_path_cut_on_a_frame_boundary_is_broken(how: str) -> None:
    # The body would end cleanly at end of file here; a reset or a silence is not that.
    driver = _close_delimited_listener()
    if how == "timed out":
        driver.timed_out(106.1)
        reason = "idle timeout: no data for 6 s"
    else:
        driver.connection_lost(106.1, "ECONNRESET: Connection reset by peer")
        reason = "the connection was lost: ECONNRESET: Connection reset by peer"
    assert _ending(driver, 106.1)[0] == StreamBroken(reason=reason)


def test_a_real_end_of_file_still_ends_a_close_delimited_path_cleanly() -> None:
    driver = _close_delimited_listener()
    driver.data_received(100.2, b"")
    assert _ending(driver, 100.2)[0] == NotServed(
        status=200, reason="the path ended with no message"
    )


def test_the_asyncio_listener_hands_on_each_read_apart_from_its_buffer() -> None:
    # The transport reads into one buffer kept for the connection's life:
    # each read is handed on as bytes of its own (a large read in pieces of
    # READ_SIZE at most, one a Receive), so the next read, into the same
    # buffer, changes nothing already read.
    class Reads:
        def __init__(self) -> None:
            self.data: list[bytes] = []

        def data_received(self, now: float, data: bytes) -> None:
            self.data.append(data)

    async def main() -> list[bytes]:
        received = asyncio_adapter.Received(asyncio.get_running_loop())
        received.transport = mock.Mock()  # paused and resumed as what is held grows and shrinks
        buffer = received.get_buffer(-1)
        assert len(buffer) >= 2 * READ_SIZE and received.get_buffer(1 << 20) is buffer
        buffer[:5] = b"first"
        received.buffer_updated(5)
        large = bytes(range(256)) * (len(buffer) // 256)
        buffer[:] = large
        received.buffer_updated(len(buffer))
        buffer[:6] = b"second"
        received.buffer_updated(6)
        reads = Reads()
        while len(reads.data) < 2 + len(large) // READ_SIZE:
            await received.receive(reads, 1.0)  # type: ignore[arg-type]
        assert b"".join(reads.data[1:-1]) == large
        return reads.data

    data = asyncio.run(main())
    assert data[0] == b"first" and data[-1] == b"second"
    assert all(len(piece) == READ_SIZE for piece in data[1:-1])
