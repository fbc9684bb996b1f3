"""The MCP bridge: a real MCP server, built with the official SDK, relayed unchanged.

End to end, each test runs the example server
(:mod:`diverge_notifications.examples.mcp_server`) and the chain
``run_bridge -> Hub -> serve -> listen`` in one event loop, and compares what
the listener got with what the SDK wrote on its own wire: for stdio, the
server runs behind a small tee process that copies every line it writes to
a file; for Streamable HTTP, the server runs in-process behind an ASGI
wrapper that keeps the data of every server-sent event. Both MCP revisions
the SDK speaks are covered: 2025-11-25 (the ``initialize`` handshake) and
2026-07-28 (``subscriptions/listen``).

Every wait has a deadline that only guards against a hang; no test asserts
how long anything took.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp")


from diverge_notifications.adapters.asyncio import listen, serve
from diverge_notifications.bridge import (
    DEFAULT_MAX_LINE_SIZE,
    BridgeExhausted,
    McpConnected,
    McpDisconnected,
    McpSubscribed,
    ServerSpec,
    run_bridge,
)
from diverge_notifications.bridge._core import Bridge, BridgeSettings
from diverge_notifications.bridge._subscribe import Flag
from diverge_notifications.examples.mcp_server import CLOCK_URI, LEVELS, TICK_METHOD
from diverge_notifications.sansio import (
    Event,
    Hub,
    Notification,
    NotificationKind,
    NotificationReceived,
    ProxyPolicy,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
)
from diverge_notifications.sansio.events import AttemptsExhausted, NotServed
from diverge_notifications.sansio.lines import PlainLineSplitter as LineSplitter
from diverge_notifications.sansio.wire.framing import DEFAULT_MAX_FRAME_SIZE
from tests.relay_support import (
    FAST,
    HANG,
    TEE,
    example_command,
    free_port,
    http_example,
    is_notification,
    server_env,
)

pytestmark = pytest.mark.filterwarnings(
    # The example server sends log messages the 2025-11-25 way on purpose.
    "ignore::mcp.shared.exceptions.MCPDeprecationWarning"
)

#: Seconds before each burst of the example server.
INTERVAL: Final = "0.1"
#: Notifications per burst: 2 progress, 4 log messages, a tools list change,
#: a resource update and the custom tick.
PER_BURST: Final = 9


def fast_policy(**options: Any) -> ProxyPolicy:
    return ProxyPolicy(require_exchange=False, backoff=FAST, **options)


def ordered(raw: bytes) -> Any:
    """The JSON value with every object as its list of members, in order."""
    return json.loads(raw, object_pairs_hook=list)


def ticks(notifications: list[Notification]) -> list[Notification]:
    return [n for n in notifications if n.method == TICK_METHOD]


def pid_of(tick: Notification) -> int:
    assert tick.params is not None
    pid: int = tick.params["pid"]
    return pid


def assert_same_as_wire(received: list[Notification], wire: list[bytes]) -> None:
    """Member for member, in order, and byte for byte."""
    assert [ordered(n.to_bytes()) for n in received] == [ordered(raw) for raw in wire]
    assert [n.to_bytes() for n in received] == wire


def assert_everything_heard(received: list[Notification]) -> None:
    kinds = {n.kind for n in received}
    assert {
        NotificationKind.PROGRESS,
        NotificationKind.LOGGING_MESSAGE,
        NotificationKind.TOOL_LIST_CHANGED,
        NotificationKind.RESOURCE_UPDATED,
        NotificationKind.CUSTOM,
    } <= kinds
    levels = [
        n.params["level"]
        for n in received
        if n.kind is NotificationKind.LOGGING_MESSAGE and n.params
    ]
    assert set(levels) == set(LEVELS)
    updated = [n for n in received if n.kind is NotificationKind.RESOURCE_UPDATED]
    assert all(n.params and n.params["uri"] == CLOCK_URI for n in updated)
    tick = ticks(received)[0]
    assert tick.kind is NotificationKind.CUSTOM
    assert tick.meta == {"diverge.example/origin": "ticker"}


class Relay:
    """``serve(hub)`` with one ``listen`` consumer, and the bridge publishing into the hub."""

    def __init__(self) -> None:
        self.hub = Hub()
        self.received: list[Notification] = []
        self.listener_events: list[Event] = []
        self.bridge_events: list[Event] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.bridge: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Relay:
        self.server = await serve(self.hub)
        self._tasks.append(asyncio.create_task(self._listen()))
        await self.wait_for(lambda: any(isinstance(e, StreamOpened) for e in self.listener_events))
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for task in [self.bridge, *self._tasks]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        await self.server.close()

    async def _listen(self) -> None:
        async for item in listen(self.server.url, events=True, policy=fast_policy()):
            assert isinstance(item, Event)
            self.listener_events.append(item)
            if isinstance(item, NotificationReceived):
                self.received.append(item.notification)

    def start_bridge(self, **options: Any) -> None:
        self.bridge = asyncio.create_task(
            run_bridge(
                self.hub, policy=fast_policy(), on_event=self.bridge_events.append, **options
            )
        )

    async def wait_for(self, condition: Callable[[], bool]) -> None:
        deadline = asyncio.get_running_loop().time() + HANG
        while not condition():
            if self.bridge is not None and self.bridge.done():
                self.bridge.result()  # the bridge must run until cancelled
                raise AssertionError("the bridge returned")
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(
                    f"still waiting after {HANG} s; received {len(self.received)}: "
                    f"{self.received[-3:]!r}; bridge events {self.bridge_events!r}"
                )
            await asyncio.sleep(0.02)

    def assert_path_stayed_open(self) -> None:
        opened = [e for e in self.listener_events if isinstance(e, StreamOpened)]
        ended = [
            e
            for e in self.listener_events
            if isinstance(e, StreamEnded | StreamBroken | StreamErrored | NotServed)
        ]
        assert len(opened) == 1 and ended == []


def _expected(revision: str, bursts: int) -> int:
    # On 2026-07-28 the listen stream starts with the server's acknowledgment.
    return bursts * PER_BURST + (1 if revision == "2026-07-28" else 0)


REVISIONS: Final = [
    pytest.param("legacy", "2025-11-25", id="2025-11-25"),
    pytest.param("auto", "2026-07-28", id="2026-07-28"),
]

# --- stdio ---------------------------------------------------------------------


def tee_command(tmp_path: Path, *options: str) -> tuple[list[str], Path, Path]:
    tee = tmp_path / "tee.py"
    tee.write_text(TEE)
    wire = tmp_path / "wire.jsonl"
    pid_file = tmp_path / "server.pid"
    command = [sys.executable, str(tee), str(wire), str(pid_file), *example_command(*options)]
    return command, wire, pid_file


def wire_lines(wire: Path) -> list[bytes]:
    if not wire.exists():
        return []
    lines = [line.rstrip(b"\r") for line in wire.read_bytes().split(b"\n")[:-1]]
    return [line for line in lines if line.strip() and is_notification(line)]


@pytest.mark.parametrize(("mode", "revision"), REVISIONS)
def test_stdio_relay_is_the_wire(tmp_path: Path, mode: str, revision: str) -> None:
    command, wire, _ = tee_command(tmp_path, "--interval", INTERVAL, "--bursts", "2")
    expected = _expected(revision, 2)

    async def scenario() -> None:
        async with Relay() as relay:
            relay.start_bridge(stdio_command=command, mode=mode, env=server_env())
            await relay.wait_for(
                lambda: len(relay.received) >= expected and len(wire_lines(wire)) >= expected
            )
            assert_same_as_wire(relay.received, wire_lines(wire))
            assert len(relay.received) == expected
            assert_everything_heard(relay.received)
            relay.assert_path_stayed_open()
            connected = [e for e in relay.bridge_events if isinstance(e, McpConnected)]
            assert [e.protocol_version for e in connected] == [revision]
            subscribed = [e for e in relay.bridge_events if isinstance(e, McpSubscribed)]
            assert len(subscribed) == 1
            assert subscribed[0].log_level == "debug"
            assert subscribed[0].resources == (CLOCK_URI,)

    asyncio.run(scenario())


@pytest.mark.parametrize(("mode", "revision"), REVISIONS)
def test_stdio_server_killed_and_restarted(tmp_path: Path, mode: str, revision: str) -> None:
    command, _, pid_file = tee_command(tmp_path, "--interval", INTERVAL)

    async def scenario() -> None:
        async with Relay() as relay:
            relay.start_bridge(stdio_command=command, mode=mode, env=server_env())
            await relay.wait_for(lambda: len(ticks(relay.received)) >= 1)
            first = int(pid_file.read_text())
            assert pid_of(ticks(relay.received)[0]) == first
            os.kill(first, signal.SIGKILL)

            def new_ticks() -> list[Notification]:
                return [t for t in ticks(relay.received) if pid_of(t) != first]

            await relay.wait_for(lambda: len(new_ticks()) >= 2)
            # One whole burst of the new server lies between its first two ticks;
            # the resource update and the debug message show the bridge asked again.
            start = relay.received.index(new_ticks()[0])
            end = relay.received.index(new_ticks()[1])
            between = relay.received[start + 1 : end]
            assert any(n.kind is NotificationKind.RESOURCE_UPDATED for n in between)
            assert any(n.params and n.params.get("level") == "debug" for n in between)
            relay.assert_path_stayed_open()
            events = relay.bridge_events
            assert [type(e) for e in events if isinstance(e, McpConnected | McpDisconnected)][
                :3
            ] == [McpConnected, McpDisconnected, McpConnected]
            assert [e.protocol_version for e in events if isinstance(e, McpConnected)][:2] == [
                revision,
                revision,
            ]
            assert sum(isinstance(e, McpSubscribed) for e in events) >= 2

    asyncio.run(scenario())


# --- Streamable HTTP -----------------------------------------------------------


@pytest.mark.parametrize(("mode", "revision"), REVISIONS)
def test_http_relay_is_the_wire(mode: str, revision: str) -> None:
    expected = _expected(revision, 2)

    async def scenario() -> None:
        async with (
            http_example(interval=float(INTERVAL), bursts=2) as (url, recorder, _),
            Relay() as relay,
        ):
            relay.start_bridge(url=url, mode=mode)
            await relay.wait_for(
                lambda: (
                    len(relay.received) >= expected and len(recorder.notifications()) >= expected
                )
            )
            assert_same_as_wire(relay.received, recorder.notifications())
            assert len(relay.received) == expected
            assert_everything_heard(relay.received)
            relay.assert_path_stayed_open()
            connected = [e for e in relay.bridge_events if isinstance(e, McpConnected)]
            assert [e.protocol_version for e in connected] == [revision]

    asyncio.run(scenario())


@pytest.mark.parametrize(("mode", "revision"), REVISIONS)
def test_a_new_resource_is_subscribed_to(mode: str, revision: str) -> None:
    extra = "demo://extra"

    def updates(relay: Relay) -> list[Notification]:
        return [
            n
            for n in relay.received
            if n.kind is NotificationKind.RESOURCE_UPDATED and n.params and n.params["uri"] == extra
        ]

    async def scenario() -> None:
        # No bursts: the first one would come after an hour.
        async with http_example(interval=3600.0) as (url, _, example), Relay() as relay:
            relay.start_bridge(url=url, mode=mode)
            await relay.wait_for(
                lambda: any(isinstance(e, McpSubscribed) for e in relay.bridge_events)
            )
            await example.add_resource(extra, "more")
            await relay.wait_for(
                lambda: any(
                    isinstance(e, McpSubscribed) and extra in e.resources
                    for e in relay.bridge_events
                )
            )
            while not updates(relay):
                await example.resource_changed(extra)
                await relay.wait_for(lambda: True)
                await asyncio.sleep(0.05)
            assert any(n.kind is NotificationKind.RESOURCE_LIST_CHANGED for n in relay.received)
            connected = [e for e in relay.bridge_events if isinstance(e, McpConnected)]
            assert [e.protocol_version for e in connected] == [revision]

    asyncio.run(scenario())


@contextlib.contextmanager
def http_server_process(port: int) -> Iterator[subprocess.Popen[bytes]]:
    """The example server over Streamable HTTP, as a process of its own."""
    process = subprocess.Popen(
        example_command("--interval", INTERVAL, "--http", f"127.0.0.1:{port}"),
        env={**os.environ, **server_env()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield process
    finally:
        process.kill()
        process.wait(HANG)


def test_http_server_killed_and_restarted() -> None:
    """2025-11-25 over HTTP: the GET stream breaks, the bridge starts a new session."""
    port = free_port()

    async def scenario() -> None:
        async with Relay() as relay:
            with http_server_process(port) as first:
                relay.start_bridge(url=f"http://127.0.0.1:{port}/mcp", mode="legacy")
                await relay.wait_for(lambda: len(ticks(relay.received)) >= 1)
                assert pid_of(ticks(relay.received)[0]) == first.pid
            with http_server_process(port) as second:

                def new_ticks() -> list[Notification]:
                    return [t for t in ticks(relay.received) if pid_of(t) == second.pid]

                await relay.wait_for(lambda: len(new_ticks()) >= 2)
                start = relay.received.index(new_ticks()[0])
                between = relay.received[start + 1 : relay.received.index(new_ticks()[1])]
                assert any(n.kind is NotificationKind.RESOURCE_UPDATED for n in between)
                assert any(n.params and n.params.get("level") == "debug" for n in between)
            relay.assert_path_stayed_open()
            connected = [e for e in relay.bridge_events if isinstance(e, McpConnected)]
            assert len(connected) >= 2
            assert all(e.protocol_version == "2025-11-25" for e in connected)
            assert any(isinstance(e, McpDisconnected) for e in relay.bridge_events)

    asyncio.run(scenario())


# --- giving up, arguments, what is relayed -------------------------------------


def test_gives_up_after_max_attempts() -> None:
    events: list[Event] = []

    async def scenario() -> None:
        await run_bridge(
            Hub(),
            stdio_command=[sys.executable, "-c", "pass"],
            policy=fast_policy(max_attempts=2),
            on_event=events.append,
        )

    with pytest.raises(BridgeExhausted) as caught:
        asyncio.run(scenario())
    assert caught.value.attempts == 2
    assert [type(e) for e in events] == [
        McpDisconnected,
        type(events[1]),  # RetryScheduled
        McpDisconnected,
        AttemptsExhausted,
    ]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({}, ValueError),
        ({"stdio_command": "x", "url": "http://127.0.0.1:1/mcp"}, ValueError),
        ({"url": "http://127.0.0.1:1/mcp", "log_level": "INFO"}, ValueError),
        ({"url": "http://127.0.0.1:1/mcp", "mode": "2025-11-25"}, ValueError),
        ({"stdio_command": ""}, ValueError),
        ({"stdio_command": "no-such-mcp-server-command --flag"}, FileNotFoundError),
    ],
)
def test_bad_arguments_fail_before_connecting(options: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        asyncio.run(run_bridge(Hub(), **options))


def test_only_notifications_are_published() -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    raws = [
        b'{"jsonrpc":"2.0","id":1,"result":{}}',
        b'{"jsonrpc":"2.0","id":"r","method":"roots/list"}',
        b'{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"no"}}',
        b"not json",
        b"[1, 2]",
        b'{"z":1,"method":"vendor/x","jsonrpc":"2.0","params":{"b":[1.50,2],"a":{}}}',
        b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}',
    ]

    async def scenario() -> None:
        bridge = Bridge(
            hub,
            ServerSpec.http("x", "http://127.0.0.1:1/mcp"),
            settings=BridgeSettings(),
            policy=fast_policy(),
            random=lambda: 0.5,
        )
        for raw in raws:
            bridge._relay(raw, Flag())

    asyncio.run(scenario())
    assert [n.to_bytes() for n in subscriber.take()] == raws[-2:]


# --- line splitting ----------------------------------------------------------------

LINES: Final = [b'{"a":1}', b"", b'{"method":"x","params":{"t":"\\n"}}', b"\xff", b"x" * 40]
STREAM: Final = b"\n".join(LINES) + b"\n" + b"tail without newline"


def split_all(pieces: list[bytes], max_size: int = 1 << 20) -> tuple[list[bytes], int]:
    splitter = LineSplitter(max_size)
    lines = [line for piece in pieces for line in splitter.feed(piece)]
    return lines, splitter.dropped


def test_lines_whole_and_byte_at_a_time() -> None:
    whole = split_all([STREAM])
    assert whole == (LINES, 0)
    assert split_all([STREAM[i : i + 1] for i in range(len(STREAM))]) == whole


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=12))
def test_lines_at_random_splits(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(STREAM)]
    pieces = [STREAM[a:b] for a, b in itertools.pairwise(bounds)]
    assert split_all(pieces) == (LINES, 0)


def test_a_line_over_the_limit_is_dropped_whole() -> None:
    stream = b"ok\n" + b"y" * 100 + b"\nafter\n"
    expected = ([b"ok", b"after"], 1)
    assert split_all([stream], max_size=10) == expected
    assert split_all([stream[i : i + 1] for i in range(len(stream))], max_size=10) == expected


def test_a_line_of_16_mib_is_one_byte_too_long() -> None:
    """A frame is a tag byte plus the JSON, and at most DEFAULT_MAX_FRAME_SIZE bytes."""
    fits = b"x" * (DEFAULT_MAX_FRAME_SIZE - 1)
    splitter = LineSplitter()
    stream = fits + b"\n" + b"y" * DEFAULT_MAX_FRAME_SIZE + b"\nok\n"
    assert splitter.feed(stream) == [fits, b"ok"]
    assert splitter.dropped == 1
    assert DEFAULT_MAX_LINE_SIZE == DEFAULT_MAX_FRAME_SIZE - 1


# --- the core install does not need mcp ------------------------------------------


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **server_env()},
        timeout=HANG,
    )


def test_core_does_not_import_mcp() -> None:
    result = _run_python(
        "import sys\n"
        "import diverge_notifications, diverge_notifications.sansio\n"
        "import diverge_notifications.adapters.asyncio, diverge_notifications.cli\n"
        "import diverge_notifications.examples\n"
        "loaded = [m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')]\n"
        "assert not loaded, loaded\n"
    )
    assert result.returncode == 0, result.stderr


def test_bridge_without_mcp_names_the_extra() -> None:
    result = _run_python(
        "import sys\n"
        "sys.modules['mcp'] = None\n"
        "try:\n"
        "    import diverge_notifications.bridge\n"
        "except ImportError as error:\n"
        "    print(error)\n"
        "    print(error.name)\n"
    )
    assert result.returncode == 0, result.stderr
    message, name = result.stdout.splitlines()
    assert "pip install 'diverge-notifications[mcp]'" in message
    assert name == "mcp"
