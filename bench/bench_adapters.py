"""Notifications per second, end to end on loopback: the three adapters and the MCP SDK.

For each adapter: one server, one listener, N progress notifications
published into the hub and received by the listener over a TCP loopback
connection (HTTP/1.1, chunked, frames). The clock runs from the first
publish to the last notification received.

Each adapter is measured over TLS too (``https://``, a certificate made
with trustme, the dev dependency; TLS 1.3 on loopback), beside plain HTTP,
and the bench prints the ratio TLS / plain for each: what encryption
costs on a path.

For comparison, the official MCP Python SDK (``mcp`` 2.x) delivers the same
number of progress notifications from an ``MCPServer`` tool
(``ctx.report_progress`` in a loop) to a client session's progress callback.
The headline comparison uses the stdio transport: the server in a child
process, JSON-RPC over pipes. It is the SDK's most favourable transport that
still moves bytes between two processes, as deployments do (Streamable HTTP
adds an HTTP server and SSE on top). The in-memory transport (JSON-RPC
objects passed between tasks, nothing serialised) is printed for reference.

The ASGI application (``adapters.asgi.asgi_app``) is measured on uvicorn
beside the native asyncio server, each in a child process of its own on
the same event loop (asyncio's) so that the server's CPU is its own: the
deliveries per second the listener sees, and the server process's CPU per
delivery (``time.process_time`` from the first publish to the last
notification received, publishing included), and their ratios.

Run: ``python bench/bench_adapters.py [N]`` (default 20000). Takes well
under a minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any, NamedTuple

import trio

try:
    # At module level: the SDK resolves the tool's annotations in this module.
    from mcp.server.mcpserver import Context, MCPServer
except ImportError:  # the SDK comparison is skipped
    HAVE_SDK = False
else:
    HAVE_SDK = True

from diverge_notifications.adapters import asyncio as asyncio_adapter
from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.adapters import trio as trio_adapter
from diverge_notifications.sansio import Hub, Notification, NotificationReceived, StreamOpened
from diverge_notifications.sansio.client.policy import ProxyPolicy
from diverge_notifications.sansio.events import Event

DEFAULT_N = 20_000


class Tls(NamedTuple):
    """The two ends of TLS for one measurement: the server's context and the listener's."""

    server: ssl.SSLContext
    client: ssl.SSLContext


def make_tls() -> Tls | None:
    """A loopback certificate and the contexts that use it; ``None`` without trustme."""
    try:
        import trustme
    except ImportError:
        return None
    from diverge_notifications.adapters.tls import ALPN_PROTOCOLS

    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    for context in (server, client):
        context.set_alpn_protocols(list(ALPN_PROTOCOLS))
    return Tls(server=server, client=client)


def serve_options(tls: Tls | None) -> dict[str, Any]:
    return {} if tls is None else {"ssl": tls.server}


def listen_options(tls: Tls | None) -> dict[str, Any]:
    return {"events": True, "policy": policy(), **({} if tls is None else {"ssl": tls.client})}


def progress(index: int, total: int) -> Notification:
    return Notification(
        "notifications/progress", {"progressToken": "bench", "progress": index, "total": total}
    )


def policy() -> ProxyPolicy:
    return ProxyPolicy(require_exchange=False)


#: Every notification of a run fits its path's queue: the hub's byte bound
#: (1 MiB by default) would drop most of a burst published at once.
QUEUE_BYTES = 2**30


# --- this library ---------------------------------------------------------------------


async def measure_async(
    items: AsyncGenerator[Notification | Event, None], hub: Hub, notifications: list[Notification]
) -> float:
    """Wait for the stream, publish every notification, and time until all are received."""
    n = len(notifications)
    async with contextlib.aclosing(items):
        async for item in items:
            if isinstance(item, StreamOpened):
                break
        started = time.perf_counter()
        for notification in notifications:
            hub.publish(notification)
        received = 0
        async for item in items:
            if type(item) is NotificationReceived:
                received += 1
                if received == n:
                    break
        return n / (time.perf_counter() - started)


def bench_asyncio(n: int, tls: Tls | None = None) -> float:
    async def main() -> float:
        notifications = [progress(index, n) for index in range(n)]
        hub = Hub(queue_size=n, queue_bytes=QUEUE_BYTES)  # throughput, not the queue bound
        async with asyncio_adapter.serve(hub, **serve_options(tls)) as server:
            items = asyncio_adapter.listen(server.url, **listen_options(tls))
            return await measure_async(items, hub, notifications)

    return asyncio.run(main())


def bench_trio(n: int, tls: Tls | None = None) -> float:
    async def main() -> float:
        notifications = [progress(index, n) for index in range(n)]
        hub = Hub(queue_size=n, queue_bytes=QUEUE_BYTES)
        async with trio_adapter.serve(hub, **serve_options(tls)) as server:
            items = trio_adapter.listen(server.url, **listen_options(tls))
            return await measure_async(items, hub, notifications)

    return trio.run(main)


def bench_blocking(n: int, tls: Tls | None = None) -> float:
    notifications = [progress(index, n) for index in range(n)]
    hub = Hub(queue_size=n, queue_bytes=QUEUE_BYTES)

    with (
        blocking_adapter.serve(hub, **serve_options(tls)) as server,
        blocking_adapter.listen(server.url, **listen_options(tls)) as items,
    ):
        for item in items:
            if isinstance(item, StreamOpened):
                break

        def publish() -> None:
            for notification in notifications:
                server.publish(notification)

        started = time.perf_counter()
        publisher = threading.Thread(target=publish)
        publisher.start()
        received = 0
        for item in items:
            if type(item) is NotificationReceived:
                received += 1
                if received == n:
                    break
        elapsed = time.perf_counter() - started
        publisher.join()
    return n / elapsed


# --- the MCP Python SDK -------------------------------------------------------------------


def make_mcp_server() -> Any:
    server = MCPServer("bench")

    @server.tool()
    async def emit(n: int, ctx: Context) -> str:
        """Send ``n`` progress notifications for this call."""
        for index in range(n):
            await ctx.report_progress(index, n)
        return "done"

    return server


async def _sdk_run(target: Any, n: int, **options: Any) -> float:
    from mcp import Client

    received = 0

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        nonlocal received
        received += 1

    async with Client(target, **options) as client:
        started = time.perf_counter()
        await client.call_tool("emit", {"n": n}, progress_callback=on_progress)
        elapsed = time.perf_counter() - started
    if received != n:
        raise RuntimeError(f"the SDK delivered {received} of {n} notifications")
    return n / elapsed


def bench_sdk_stdio(n: int) -> float:
    from mcp.client.stdio import StdioServerParameters

    parameters = StdioServerParameters(command=sys.executable, args=[__file__, "--mcp-server"])
    return asyncio.run(_sdk_run(parameters, n))


def bench_sdk_memory(n: int) -> float:
    # "legacy" keeps the JSON-RPC session over in-memory streams; the default
    # for an in-process server calls the callback directly, with no transport.
    return asyncio.run(_sdk_run(make_mcp_server(), n, mode="legacy"))


# --- the ASGI application beside the native server ---------------------------------------


async def serve_in_child(kind: str, n: int) -> None:
    """In the child: serve on a free port, print the base URL, publish ``n`` on ``go``.

    ``go`` publishes them at once (the paths write batches); ``trickle``
    lets the event loop run after each, so that each goes out on its own.
    On ``done`` it prints the CPU this process spent since ``go``; it stops
    at the end of its standard input.
    """
    loop = asyncio.get_running_loop()
    notifications = [progress(index, n) for index in range(n)]
    hub = Hub(queue_size=n, queue_bytes=QUEUE_BYTES)
    commands: asyncio.Queue[str] = asyncio.Queue()

    def read_commands() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(commands.put_nowait, line.strip())
        loop.call_soon_threadsafe(commands.put_nowait, "")

    async with contextlib.AsyncExitStack() as stack:
        if kind == "native":
            server = await stack.enter_async_context(asyncio_adapter.serve(hub))
            url = server.url
        else:
            import uvicorn

            from diverge_notifications.adapters.asgi import asgi_app

            config = uvicorn.Config(
                asgi_app(hub), port=0, loop="asyncio", log_level="warning", lifespan="off"
            )
            asgi_server = uvicorn.Server(config)
            serving = asyncio.create_task(asgi_server.serve())
            while not asgi_server.started:
                await asyncio.sleep(0.01)
            port = asgi_server.servers[0].sockets[0].getsockname()[1]
            url = f"http://127.0.0.1:{port}"

            async def stop() -> None:
                asgi_server.should_exit = True
                asgi_server.force_exit = True
                await serving

            stack.push_async_callback(stop)
        print(url, flush=True)
        threading.Thread(target=read_commands, daemon=True).start()
        while (command := await commands.get()) in ("go", "trickle"):
            cpu = time.process_time()
            for notification in notifications:
                hub.publish(notification)
                if command == "trickle":
                    await asyncio.sleep(0)
            if await commands.get() != "done":
                break
            print(json.dumps({"cpu": time.process_time() - cpu}), flush=True)


def bench_served(kind: str, n: int, command: str = "go") -> tuple[float, float]:
    """Deliveries per second from a server child of ``kind``, and its CPU seconds per delivery.

    ``command`` is ``go`` (a burst) or ``trickle`` (one at a time).
    """
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind, str(n)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    stdin = child.stdin
    try:
        url = child.stdout.readline().strip()

        async def receive() -> float:
            items = asyncio_adapter.listen(url, events=True, policy=policy())
            async with contextlib.aclosing(items):
                async for item in items:
                    if isinstance(item, StreamOpened):
                        break
                started = time.perf_counter()
                stdin.write(command + "\n")
                stdin.flush()
                received = 0
                async for item in items:
                    if type(item) is NotificationReceived:
                        received += 1
                        if received == n:
                            break
                return n / (time.perf_counter() - started)

        rate = asyncio.run(receive())
        child.stdin.write("done\n")
        child.stdin.flush()
        cpu = float(json.loads(child.stdout.readline())["cpu"])
    finally:
        child.stdin.close()
        child.wait(30)
    return rate, cpu / n


def compare_asgi(n: int) -> None:
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        print("  (uvicorn is not installed: no ASGI rows)")
        return
    names = {"native": "diverge asyncio serve()", "uvicorn": "diverge ASGI app on uvicorn"}
    print(f"{n} notifications, one listener, the server in a child process (best of 3)")
    for command, how in (("go", "published at once"), ("trickle", "published one at a time")):
        runs = {kind: [bench_served(kind, n, command) for _ in range(3)] for kind in names}
        # The best of 3 of each: the highest rate, the least CPU.
        best = {
            kind: (max(r for r, _ in rows), min(c for _, c in rows)) for kind, rows in runs.items()
        }
        print(f" {how}:")
        for kind, (rate, cpu) in best.items():
            print(
                f"  {names[kind]:32} {rate:12,.0f} deliveries/s {cpu * 1e6:8.2f} us server CPU each"
            )
        (native_rate, native_cpu), (asgi_rate, asgi_cpu) = best["native"], best["uvicorn"]
        rate, cpu = asgi_rate / native_rate, asgi_cpu / native_cpu
        print(f"  ASGI on uvicorn / native: {rate:.2f}x the deliveries per second, ", end="")
        print(f"{cpu:.2f}x the server CPU per delivery")


# --- main -------------------------------------------------------------------------------


def best_of(runs: int, bench: Callable[..., float], n: int, *args: Any) -> float:
    return max(bench(n, *args) for _ in range(runs))


ADAPTERS: dict[str, Callable[..., float]] = {
    "diverge asyncio": bench_asyncio,
    "diverge trio": bench_trio,
    "diverge blocking": bench_blocking,
}


def main() -> None:
    if sys.argv[1:] == ["--mcp-server"]:
        make_mcp_server().run("stdio")
        return
    if sys.argv[1:2] == ["--serve"]:
        asyncio.run(serve_in_child(sys.argv[2], int(sys.argv[3])))
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_N
    have_sdk = HAVE_SDK
    tls = make_tls()
    print(f"{n} notifications, one server, one listener, TCP loopback (best of 3)")
    results: dict[str, float] = {}
    for name, bench in ADAPTERS.items():
        results[name] = best_of(3, bench, n)
        if tls is not None:
            results[f"{name} over TLS"] = best_of(3, bench, n, tls)
    if have_sdk:
        results["MCP SDK stdio"] = best_of(3, bench_sdk_stdio, n)
        results["MCP SDK in-memory (reference)"] = best_of(3, bench_sdk_memory, n)
    for name, rate in results.items():
        print(f"  {name:32} {rate:12,.0f} notifications/s")
    if have_sdk:
        sdk = results["MCP SDK stdio"]
        for name in ADAPTERS:
            print(f"  {name} / MCP SDK stdio: {results[name] / sdk:.1f}x")
        memory = results["MCP SDK in-memory (reference)"]
        print(f"  diverge asyncio / MCP SDK in-memory: {results['diverge asyncio'] / memory:.1f}x")
    else:
        print("  (the 'mcp' package is not installed: no SDK comparison)")
    if tls is not None:
        for name in ADAPTERS:
            ratio = results[f"{name} over TLS"] / results[name]
            print(f"  {name} over TLS / plain: {ratio:.2f}x")
    else:
        print("  (the 'trustme' package is not installed: no TLS rows)")
    compare_asgi(n)


if __name__ == "__main__":
    main()
