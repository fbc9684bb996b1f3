"""``serve --redis``: replicas as processes sharing one stream through a real Redis.

Two ``serve --redis`` processes share the default channel; the publisher
is ``--stdin`` on one of them, and ``listen --events`` runs against each.
Every listener gets every notification, in the publisher's order, once;
a raw-socket reader checks the bytes themselves. Redis is then killed
mid-stream: every path ends with ``StreamErrored`` naming the broker, an
ask is answered ``503`` with ``Retry-After`` until Redis is back, and the
listeners are back by themselves with nothing twice and nothing out of
order. These tests start their own ``redis-server`` (``redis_server.py``)
and skip when it or redis-py is missing; waits have generous deadlines and
nothing asserts how long anything took.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from diverge_notifications.sansio import (
    NEED_DATA,
    Notification,
    NotificationReceived,
    ProxyConnection,
)
from diverge_notifications.sansio.envelope import Envelope, encode_envelope
from tests.interop import HANG_GUARD, ListenProcess, ServeProcess, run_cli
from tests.redis_server import RedisServer, redis_server, wait_for
from tests.replicas import ODD, numbered

__all__ = ["redis_server"]  # the fixture, imported to be found


def subscribed(serve: ServeProcess) -> ServeProcess:
    """``serve`` once its broker has subscribed."""
    serve.stderr.wait_for_text("': subscribed")
    return serve


def numbers(listen: ListenProcess) -> list[int]:
    """The ``i`` of every numbered notification ``listen`` printed, in order."""
    found = []
    for line in listen.notification_lines():
        record = json.loads(line)
        if record.get("method") == "x/n":
            found.append(record["params"]["i"])
    return found


def reopened(listen: ListenProcess) -> bool:
    """Whether ``listen`` opened a second path."""
    return sum(1 for record in listen.events() if record["event"] == "StreamOpened") >= 2


def heard(listen: ListenProcess, i: int) -> bool:
    return i in numbers(listen)


def ask(port: int) -> bytes:
    """A raw notification ask to ``port``: everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD) as sock:
        sock.sendall(ProxyConnection(f"127.0.0.1:{port}").data_to_send())
        answer = b""
        while data := sock.recv(65536):
            answer += data
    return answer


class RawListener:
    """One notification path read with :class:`ProxyConnection` on a thread: the exact bytes."""

    def __init__(self, port: int) -> None:
        self.connection = ProxyConnection(f"127.0.0.1:{port}")
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD)
        self.sock.sendall(self.connection.data_to_send())
        self.received: list[bytes] = []
        self.events: list[object] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            self.connection.receive_data(data)
            while (event := self.connection.next_event()) is not NEED_DATA:
                with self._changed:
                    self.events.append(event)
                    if isinstance(event, NotificationReceived):
                        self.received.append(event.notification.to_bytes())
                    self._changed.notify_all()
            if not data:
                return

    def wait_for(self, count: int) -> list[bytes]:
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.received) >= count, HANG_GUARD):
                raise AssertionError(f"only {len(self.received)} of {count} notifications")
            return list(self.received)

    def close(self) -> None:
        self.sock.close()
        self._thread.join(HANG_GUARD)


@pytest.fixture
def replicas(redis_server: RedisServer) -> Iterator[tuple[ServeProcess, ServeProcess]]:
    url = redis_server.url
    with (
        ServeProcess("--stdin", "--redis", url, "--keepalive", "0.5") as publisher,
        ServeProcess("--redis", url, "--keepalive", "0.5", stdin=False) as other,
    ):
        yield subscribed(publisher), subscribed(other)


def test_every_listener_of_every_replica_gets_every_notification_once_in_order(
    replicas: tuple[ServeProcess, ServeProcess],
) -> None:
    publisher, other = replicas
    raw = RawListener(other.port)
    with (
        ListenProcess(publisher.url, "--events") as here,
        ListenProcess(other.url, "--events") as there,
    ):
        for listen in (here, there):
            listen.wait_for_event("StreamOpened")
        wait_for(lambda: len(raw.events) >= 1, "the raw path to open")
        lines = [text.strip() for text in ODD] + [numbered(i) for i in range(300)]
        for line in lines:
            publisher.send_line(line)
        for listen in (here, there):
            assert listen.stdout is not None
            listen.stdout.wait_for_count(len(lines))
        # The exact bytes the publisher wrote, on the replica that did not publish.
        assert raw.wait_for(len(lines)) == lines
        assert here.notification_lines() == there.notification_lines()
        assert numbers(here) == list(range(300))
        assert [json.loads(line) for line in here.notification_lines()[: len(ODD)]] == [
            json.loads(text) for text in ODD
        ]
    raw.close()


def test_killing_redis_ends_every_path_refuses_asks_and_listeners_come_back(
    redis_server: RedisServer, replicas: tuple[ServeProcess, ServeProcess]
) -> None:
    publisher, other = replicas
    broker = f"Redis broker {redis_server.url} channel 'diverge:notifications'"
    stop = threading.Event()
    sent: list[int] = []

    def publish() -> None:
        # A steady stream on standard input; while Redis is gone serve waits.
        i = 0
        while not stop.is_set():
            publisher.send_line(numbered(i))
            sent.append(i)
            i += 1
            stop.wait(0.01)

    with (
        ListenProcess(publisher.url, "--events") as here,
        ListenProcess(other.url, "--events") as there,
    ):
        listeners = (here, there)
        for listen in listeners:
            listen.wait_for_event("StreamOpened")
        feeder = threading.Thread(target=publish, daemon=True)
        feeder.start()
        try:
            for listen in listeners:
                assert listen.stdout is not None
                listen.stdout.wait_for_count(20)
            redis_server.kill()
            for listen in listeners:
                errored = listen.wait_for_event("StreamErrored")
                assert errored["error"]["message"].startswith(f"{broker}: connection lost")
            # Until Redis is back, each replica answers an ask 503, naming the broker.
            for serve in replicas:
                answer = ask(serve.port)
                assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n"), answer
                assert b"\r\nRetry-After: 1\r\n" in answer and broker.encode() in answer
            # The listeners re-ask by themselves meanwhile, and are refused.
            for listen in listeners:
                refused = listen.wait_for_event("NotServed")
                assert refused["status"] == 503 and broker in refused["reason"]
            redis_server.start()
            for listen in listeners:
                wait_for(partial(reopened, listen), "the listener to be back")
            mark = len(numbers(here)), len(numbers(there))
            wait_for(
                lambda: len(numbers(here)) > mark[0] + 20 and len(numbers(there)) > mark[1] + 20,
                "notifications after the listeners are back",
            )
        finally:
            stop.set()
            feeder.join(HANG_GUARD)
        last = sent[-1]
        for listen in listeners:
            wait_for(partial(heard, listen, last), "the last notification")
            got = numbers(listen)
            # Nothing twice, nothing out of order; the gap is what Redis's loss cost.
            assert got == sorted(set(got)), got
            assert set(got) <= set(sent)
        for serve in replicas:
            serve.stderr.wait_for_text("': subscribed again")
        for listen in listeners:
            names = [record["event"] for record in listen.events()]
            assert "StreamOpened" in names[names.index("StreamErrored") :]
            # Any ask the listener made meanwhile was refused the same way.
            for record in listen.events():
                if record["event"] == "NotServed":
                    assert record["status"] == 503 and broker in record["reason"]
    log = publisher.stderr.text()
    assert "ended 1 open paths" in log and "asks not served while the hub is suspended" in log


def test_an_mcp_server_relayed_on_one_replica_reaches_the_listeners_of_another(
    redis_server: RedisServer,
) -> None:
    pytest.importorskip("mcp", reason="the 'mcp' extra is not installed")
    example = f"{sys.executable} -m diverge_notifications.examples.mcp_server --interval 0.2"
    url = redis_server.url
    with (
        ServeProcess("--redis", url, stdin=False) as other,
        ServeProcess("--mcp-stdio", example, "--redis", url, stdin=False) as relaying,
    ):
        subscribed(other)
        subscribed(relaying)
        with ListenProcess(other.url, "--events") as listen:
            assert listen.stdout is not None
            listen.stdout.wait(lambda lines: any(b"/example/tick" in line for line in lines))
        assert relaying.interrupt() == 0
    # The broker's counts, then the server's summary, last.
    assert b"cluster: counts: published " in relaying.stderr.messages[-2]
    assert relaying.stderr.messages[-1].startswith(b"served ")


def test_the_channel_is_the_one_named(redis_server: RedisServer) -> None:
    with ServeProcess("--redis", redis_server.url, "--redis-channel", "elsewhere") as serve:
        subscribed(serve)
        raw = RawListener(serve.port)
        wait_for(lambda: len(raw.events) >= 1, "the path to open")
        client: Any = redis_server.client()
        sent = [Notification.from_bytes(numbered(i)) for i in (1, 2)]
        client.publish("diverge:notifications", encode_envelope(_envelope(sent[:1])))
        client.publish("elsewhere", encode_envelope(_envelope(sent[1:])))
        assert raw.wait_for(1) == [numbered(2)]  # only what came on its channel
        raw.close()


def _envelope(notifications: list[Notification]) -> Envelope:
    return Envelope(origin="test", sequence=1, notifications=notifications)


def test_without_the_redis_extra_serve_redis_exits_2() -> None:
    hide = (
        "import sys; sys.modules['redis'] = None\n"
        "from diverge_notifications.cli import main\n"
        "raise SystemExit(main(['serve', '--port', '0', '--redis', 'redis://127.0.0.1:1']))\n"
    )
    result = run_cli([sys.executable, "-c", hide])
    assert result.returncode == 2
    assert b"pip install 'diverge-notifications[redis]'" in result.stderr


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--redis-channel", "x"], b"--redis-channel needs --redis"),
        (["--redis", "ftp://127.0.0.1:1"], b"--redis:"),
        (["--redis", "redis://127.0.0.1:1", "--redis-channel", ""], b"--redis:"),
    ],
)
def test_unusable_redis_options_exit_2(argv: list[str], said: bytes) -> None:
    pytest.importorskip("redis", reason="redis-py is not installed (the 'redis' extra)")
    result = run_cli([sys.executable, "-m", "diverge_notifications", "serve", "--port", "0", *argv])
    assert result.returncode == 2, result.stderr
    assert said in result.stderr
