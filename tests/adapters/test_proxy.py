"""The three ``Proxy`` classes (asyncio, trio, blocking) against a real server.

The server is the blocking adapter's ``serve`` with an exchange handler
written here, on loopback; each proxy runs in its adapter's own thread
behind the runners of tests/adapters/test_adapters.py, and one scenario drives all
three through :class:`ProxyHandle` (the trio proxy inside ``async
with``, where it keeps its ask in the background; without it, in a test of
its own). The order in which the server saw the exchanges and the
notification asks is recorded on the server's side, so that "the ask
comes after the first answered exchange, and one is kept open" is checked
from outside. No test asserts how long anything took.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final

import pytest
import trio

from diverge_notifications.adapters import asyncio as asyncio_adapter
from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.adapters import trio as trio_adapter
from diverge_notifications.sansio import (
    Ask,
    ErrorData,
    Exchange,
    Hub,
    LocalProtocolError,
    Notification,
    NotificationReceived,
    NotServed,
    ProxyPolicy,
    ReaskNeeded,
    ResultReceived,
    StreamOpened,
)
from diverge_notifications.sansio.drivers.proxy import ExchangeError, ExchangeFailed, list_tools_ask
from diverge_notifications.sansio.events import ConnectionFailed, StreamBroken
from tests.adapters.test_adapters import (
    BACKOFF,
    HANG,
    KEEPALIVE,
    AsyncioRunner,
    BlockingRunner,
    ListenerHandle,
    TrioRunner,
    free_port,
    progress,
    wait_until,
)

NAMES: Final = ("asyncio", "trio", "blocking")


class Server:
    """A blocking server whose handler answers as the test says, and logs what it saw.

    ``log`` holds ``"exchange N"`` for each exchange the handler answered,
    ``"declined N"`` for one it declined, and ``"ask"`` for each
    notification path opened (a hub subscription), in the order they came.
    """

    def __init__(self) -> None:
        self.hub = Hub()
        self.log: list[str] = []
        self.release = threading.Event()
        self.release.set()
        original = self.hub.subscribe

        def subscribe(*args: Any, **keywords: Any) -> Any:
            self.log.append("ask")
            return original(*args, **keywords)

        self.hub.subscribe = subscribe  # type: ignore[method-assign]
        self.server = self._serve(0)
        self.url = self.server.url
        self.port = self.server.port

    def _serve(self, port: int) -> blocking_adapter.Server:
        return blocking_adapter.serve(
            self.hub, "127.0.0.1", port, exchange_handler=self.handle, keepalive_interval=KEEPALIVE
        )

    def handle(self, ask: Ask) -> Any:
        params = ask.params or {}
        if ask.exchange is Exchange.LIST_TOOLS and params.get("cursor") == "decline":
            self.log.append(f"declined {ask.exchange.value}")
            return None
        self.log.append(f"exchange {ask.exchange.value}")
        if ask.exchange is Exchange.CALL_TOOL:
            assert self.release.wait(HANG)
            token = params.get("_meta", {}).get("progressToken")
            if token is not None:
                for step in (1, 2, 3):
                    progress = {"progressToken": token, "progress": step, "total": 3}
                    self.server.publish(Notification("notifications/progress", progress))
            return {"content": [{"type": "text", "text": f"called {params['name']}"}]}
        if ask.exchange is Exchange.READ_RESOURCE:
            return ErrorData(code=-32002, message="no such resource", data={"uri": params["uri"]})
        return {"tools": [{"name": "count"}]}

    def subscribers(self) -> int:
        with self.server.lock:
            return self.hub.subscribers

    def restart(self) -> None:
        """Close the server, which ends every path cleanly, and serve again on its port."""
        self.server.close()
        self.server = self._serve(self.port)

    def close(self) -> None:
        self.release.set()
        self.server.close()


class ProxyHandle:
    """One adapter's ``Proxy``, driven from the test's thread."""

    def __init__(
        self,
        proxy: Any,
        run: Callable[..., Any],
        read: Callable[[], ListenerHandle],
        close: Callable[[], None],
    ) -> None:
        self.proxy = proxy
        self._run = run
        self.read = read
        #: Close the proxy (``aclose()``, leaving ``async with``, ``close()``) and wait for it.
        self.close = close

    def exchange(self, ask: Ask) -> ResultReceived:
        result: ResultReceived = self._run(self.proxy.exchange, ask)
        return result

    def call_tool(self, name: str, **keywords: Any) -> dict[str, Any]:
        result: dict[str, Any] = self._run(
            lambda: self.proxy.call_tool(name, keywords.get("arguments"), **_token(keywords))
        )
        return result

    def method(self, name: str, *args: Any) -> Any:
        return self._run(getattr(self.proxy, name), *args)


def _token(keywords: dict[str, Any]) -> dict[str, Any]:
    return {"progress_token": keywords["progress_token"]} if "progress_token" in keywords else {}


def asyncio_handle(runner: AsyncioRunner, url: str, **options: Any) -> ProxyHandle:
    proxy = runner.call(lambda: asyncio_adapter.Proxy(url, **options))

    def run(function: Callable[..., Any], *args: Any) -> Any:
        return runner.run(function(*args))

    def read() -> ListenerHandle:
        return runner.collect(proxy.notifications, failure_as_item=True)

    return ProxyHandle(proxy, run, read, close=lambda: runner.run(proxy.aclose()))


def trio_handle(
    runner: TrioRunner, url: str, *, inside_with: bool = True, **options: Any
) -> ProxyHandle:
    """A trio proxy, inside ``async with`` held open in the runner's nursery unless told not."""
    proxy = trio_adapter.Proxy(url, **options)  # made outside trio.run, as documented
    leave = runner.call(trio.Event)
    left = threading.Event()

    async def keep(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with proxy:
                task_status.started()
                await leave.wait()
        finally:
            left.set()

    def close() -> None:
        if inside_with:
            runner.call(leave.set)
            assert left.wait(HANG), "the proxy's async with did not end"
        else:
            runner.run(proxy.aclose)

    if inside_with:
        runner.run(runner.nursery.start, keep)

    def run(function: Callable[..., Any], *args: Any) -> Any:
        async def call() -> Any:
            return await function(*args)

        return runner.run(call)

    def read() -> ListenerHandle:
        return runner.collect(proxy.notifications, failure_as_item=True)

    return ProxyHandle(proxy, run, read, close)


def blocking_handle(url: str, **options: Any) -> ProxyHandle:
    proxy = blocking_adapter.Proxy(url, **options)

    def run(function: Callable[..., Any], *args: Any) -> Any:
        return function(*args)

    def read() -> ListenerHandle:
        return BlockingRunner.collect(proxy.notifications(), failure_as_item=True)

    return ProxyHandle(proxy, run, read, close=proxy.close)


@pytest.fixture(scope="module")
def runners() -> Iterator[dict[str, Any]]:
    made: dict[str, Any] = {"asyncio": AsyncioRunner(), "trio": TrioRunner()}
    yield made
    for runner in made.values():
        runner.close()


@pytest.fixture
def server() -> Iterator[Server]:
    made = Server()
    yield made
    made.close()


@pytest.fixture(params=NAMES)
def make_proxy(
    request: pytest.FixtureRequest, runners: dict[str, Any]
) -> Iterator[Callable[..., ProxyHandle]]:
    name = request.param
    made: list[ProxyHandle] = []

    def make(url: str, **options: Any) -> ProxyHandle:
        options.setdefault("keepalive_interval", KEEPALIVE)
        options.setdefault("policy", ProxyPolicy(backoff=BACKOFF))
        if name == "blocking":
            handle = blocking_handle(url, **options)
        elif name == "trio":
            handle = trio_handle(runners["trio"], url, **options)
        else:
            handle = asyncio_handle(runners["asyncio"], url, **options)
        made.append(handle)
        return handle

    yield make
    for handle in made:
        handle.close()  # twice is fine


def _opened(item: object) -> bool:
    return isinstance(item, StreamOpened)


def test_the_ask_comes_after_the_first_answered_exchange_and_hears_the_calls_progress(
    server: Server, make_proxy: Callable[..., ProxyHandle]
) -> None:
    proxy = make_proxy(server.url, events=True)
    reading = proxy.read()  # waits: nothing is answered yet
    with pytest.raises(ExchangeFailed) as declined:
        proxy.exchange(Ask(exchange=Exchange.LIST_TOOLS, params={"cursor": "decline"}))
    assert isinstance(declined.value.event, NotServed)
    assert proxy.method("list_tools") == {"tools": [{"name": "count"}]}
    reading.received.until(_opened)
    assert server.subscribers() == 1
    result = proxy.call_tool("count", arguments={"steps": 3}, progress_token="job-1")
    assert result == {"content": [{"type": "text", "text": "called count"}]}
    heard = reading.received.until(
        lambda item: (
            isinstance(item, NotificationReceived)
            and item.notification.params is not None
            and item.notification.params["progress"] == 3
        )
    )
    progress = [item.notification for item in heard if isinstance(item, NotificationReceived)]
    assert [n.params["progressToken"] for n in progress if n.params] == ["job-1"] * 3
    reading.stop()
    # Declined, answered, the one ask, the call: the ask waited for an answer.
    assert server.log == ["declined 0", "exchange 0", "ask", "exchange 2"]


def test_an_error_answer_completes_the_exchange_and_unlocks_the_ask(
    server: Server, make_proxy: Callable[..., ProxyHandle]
) -> None:
    proxy = make_proxy(server.url, events=True)
    with pytest.raises(ExchangeError) as raised:
        proxy.method("read_resource", "demo://nothing")
    assert raised.value.error == ErrorData(
        code=-32002, message="no such resource", data={"uri": "demo://nothing"}
    )
    reading = proxy.read()
    reading.received.until(_opened)
    reading.stop()
    assert server.log == ["exchange 3", "ask"]


def test_a_path_that_ends_is_asked_again_and_one_ask_is_kept_open(
    server: Server, make_proxy: Callable[..., ProxyHandle]
) -> None:
    proxy = make_proxy(server.url, events=True)
    proxy.method("list_resources")
    reading = proxy.read()
    first = reading.received.until(_opened)[-1]
    server.restart()
    reading.received.until(lambda item: isinstance(item, ReaskNeeded))
    second = reading.received.until(_opened)[-1]
    assert isinstance(first, StreamOpened) and isinstance(second, StreamOpened)
    assert first.channel != second.channel
    assert server.subscribers() == 1
    reading.stop()
    assert server.log == ["exchange 1", "ask", "ask"]


def test_one_reader_at_a_time_and_the_ask_outlives_its_readers(
    server: Server, make_proxy: Callable[..., ProxyHandle]
) -> None:
    proxy = make_proxy(server.url, events=True)
    proxy.method("list_tools")
    reading = proxy.read()
    reading.received.until(_opened)
    second = proxy.read()
    refusal = second.received.next()
    assert isinstance(refusal, LocalProtocolError), refusal
    reading.stop()
    server.server.publish(progress(1))  # nobody reads: the path is open all the same
    again = proxy.read()
    heard = again.received.until(lambda item: isinstance(item, NotificationReceived))
    assert heard[-1].notification == progress(1)  # type: ignore[union-attr]
    assert server.subscribers() == 1
    again.stop()
    assert server.log == ["exchange 0", "ask"]


def _close_and_check_freed(proxy: ProxyHandle, server: Server) -> None:
    """Close ``proxy``: its ask ends on the server, and it holds nothing more."""
    proxy.close()
    wait_until(lambda: server.subscribers() == 0, "the proxy's ask to end")
    driver = proxy.proxy.driver
    assert driver.listener is None and driver.buffered == 0 and driver.over
    thread = getattr(proxy.proxy, "_thread", None)
    assert thread is None or not thread.is_alive()
    task = getattr(proxy.proxy, "_task", None)
    assert task is None or task.done()
    with pytest.raises(blocking_adapter.ProxyClosed):  # the same class in all three adapters
        proxy.method("list_tools")


def test_the_ask_is_kept_open_while_nobody_reads_and_what_comes_waits_in_order(
    server: Server, make_proxy: Callable[..., ProxyHandle]
) -> None:
    proxy = make_proxy(server.url)
    proxy.method("list_tools")
    # The application has not started reading: the ask is open all the same.
    wait_until(lambda: server.subscribers() == 1, "the proxy's ask to open")
    published = [progress(index) for index in range(5)]
    for notification in published:
        server.server.publish(notification)
    wait_until(lambda: proxy.proxy.driver.buffered == 5, "the notifications to reach the proxy")
    reading = proxy.read()
    assert [reading.received.next() for _ in published] == published
    assert proxy.proxy.dropped == 0
    assert server.log == ["exchange 0", "ask"]
    _close_and_check_freed(proxy, server)
    assert reading.received.finished.wait(HANG), "the reader did not end with the proxy"


def test_what_arrives_while_the_buffer_is_full_is_dropped_counted_and_logged(
    server: Server, make_proxy: Callable[..., ProxyHandle], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="diverge_notifications.proxy")
    proxy = make_proxy(server.url, notification_buffer=2)
    proxy.method("list_tools")
    wait_until(lambda: server.subscribers() == 1, "the proxy's ask to open")
    for index in range(5):
        server.server.publish(progress(index))
    wait_until(lambda: proxy.proxy.dropped == 3, "three notifications to be dropped")
    overflows = [r for r in caplog.records if r.name == "diverge_notifications.proxy"]
    assert [r.getMessage() for r in overflows] == [
        "the proxy's notification buffer is full (2 items): what arrives is dropped "
        "until the application reads (1 dropped so far, proxy.dropped)"
    ]
    reading = proxy.read()
    # The first to arrive are kept; the gap is at the end. Then room again.
    assert [reading.received.next() for _ in range(2)] == [progress(0), progress(1)]
    server.server.publish(progress(9))
    assert reading.received.next() == progress(9)
    assert proxy.proxy.dropped == 3
    reading.stop()


def test_a_trio_proxy_without_async_with_asks_while_it_is_read(
    server: Server, runners: dict[str, Any]
) -> None:
    policy = ProxyPolicy(backoff=BACKOFF)
    proxy = trio_handle(
        runners["trio"],
        server.url,
        inside_with=False,
        events=True,
        keepalive_interval=KEEPALIVE,
        policy=policy,
    )
    proxy.method("list_tools")
    assert server.subscribers() == 0  # no nursery, no background: nobody reads yet
    reading = proxy.read()
    reading.received.until(_opened)
    reading.stop()
    wait_until(lambda: server.subscribers() == 0, "the reader's ask to end")
    again = proxy.read()
    again.received.until(_opened)
    again.stop()
    proxy.close()
    assert server.log == ["exchange 0", "ask", "ask"]


def test_no_server_is_a_failure_naming_the_connection(
    make_proxy: Callable[..., ProxyHandle],
) -> None:
    proxy = make_proxy(f"http://127.0.0.1:{free_port()}", connect_timeout=5.0)
    with pytest.raises(ExchangeFailed) as raised:
        proxy.method("list_tools")
    assert isinstance(raised.value.event, ConnectionFailed)
    assert raised.value.reason.startswith("could not connect: ")
    assert not proxy.proxy.driver.may_listen


def test_an_answer_that_takes_too_long_broke_off(
    server: Server, make_proxy: Callable[..., ProxyHandle]
) -> None:
    server.release.clear()
    proxy = make_proxy(server.url, exchange_timeout=0.2)
    with pytest.raises(ExchangeFailed) as raised:
        proxy.call_tool("count")
    assert isinstance(raised.value.event, StreamBroken)
    assert "no answer within 0.2 s" in raised.value.reason
    server.release.set()


def test_the_result_keeps_the_bytes_the_server_wrote(
    server: Server, make_proxy: Callable[..., ProxyHandle]
) -> None:
    answer = proxy_result = make_proxy(server.url).exchange(list_tools_ask())
    assert answer.raw == b'{"tools":[{"name":"count"}]}'
    assert proxy_result.result == {"tools": [{"name": "count"}]}


@pytest.mark.parametrize(
    "kind", [asyncio_adapter.Proxy, trio_adapter.Proxy, blocking_adapter.Proxy]
)
def test_options_are_checked_when_the_proxy_is_made(kind: Any) -> None:
    with pytest.raises(ValueError):
        kind("http://127.0.0.1:9", token="not\na token")
    with pytest.raises(ValueError):
        kind("ftp://127.0.0.1:9")
    with pytest.raises(ValueError):
        kind("http://127.0.0.1:9", exchange_timeout=-1.0)


def test_blocking_close_stops_a_reader_and_a_call_from_another_thread(server: Server) -> None:
    proxy = blocking_adapter.Proxy(server.url, events=True, keepalive_interval=KEEPALIVE)
    waiting = proxy.notifications()  # before any exchange: it waits
    waited: list[object] = []
    waiter = threading.Thread(target=lambda: waited.extend(waiting), daemon=True)
    waiter.start()
    server.release.clear()
    failures: list[BaseException] = []

    def call() -> None:
        try:
            proxy.call_tool("count")
        except BaseException as error:
            failures.append(error)

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    wait_until(lambda: "exchange 2" in server.log, "the call to reach the server")
    proxy.close()
    caller.join(HANG)
    waiter.join(HANG)
    assert not caller.is_alive() and not waiter.is_alive()
    assert waited == []
    (failure,) = failures
    assert isinstance(failure, ExchangeFailed), failure
    with pytest.raises(blocking_adapter.ProxyClosed):
        proxy.list_tools()
    assert blocking_adapter.ProxyClosed is asyncio_adapter.ProxyClosed is trio_adapter.ProxyClosed
    assert list(proxy.notifications()) == []
    proxy.close()  # twice is fine
    assert "ask" not in server.log
