"""Progress per second through the relay, end to end, beside the MCP SDK's own client.

The relay: ``python -m diverge_notifications serve --mcp-stdio`` (a process
of its own) starts the bundled example MCP server over stdio; an asyncio
``Proxy`` lists the tools (its first exchange), opens its notification
path, and calls the example's ``count`` tool with a progress token and
``steps=N``. The server sends N progress notifications; the bridge relays
each one into the hub, ``serve`` writes it on the path, and the proxy's own
notification iterator receives it. The clock runs from the call to the
last progress notification received.

The comparison: the official MCP Python SDK's ``Client`` (``mcp`` 2.3)
starts the same server the same way (stdio, its own child process) and
calls the same tool with a progress callback, receiving the same N
progress notifications directly. The clock runs from the call to its
result (every progress callback has run by then).

So the relay's figure includes one more process and two more hops (the
bridge's transport and a notification path over TCP) than the SDK's; both
are paced by the same server. The ratio is printed.

Run: ``python bench/bench_relay.py [N]`` (default 5000, best of 3). Takes
under a minute. Needs the ``mcp`` extra.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from diverge_notifications.adapters.asyncio import Proxy
from diverge_notifications.sansio import NotificationReceived, StreamOpened

DEFAULT_N: Final = 5000
ROOT: Final = Path(__file__).resolve().parent.parent
#: The example server, quiet but for the tool's progress.
SERVER: Final = [sys.executable, "-m", "diverge_notifications.examples.mcp_server"]
SERVER_OPTIONS: Final = ["--interval", "3600"]
#: Seconds any one step may take before the run is given up (a guard, not a measure).
GUARD: Final = 120.0


def _environment() -> dict[str, str]:
    """This checkout first on the path, for ``serve`` and the servers it starts."""
    paths = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


@contextlib.contextmanager
def serve_relay() -> Iterator[str]:
    """``serve --mcp-stdio`` the example server, in a process; yields its URL."""
    command = shlex.join([*SERVER, *SERVER_OPTIONS])
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "diverge_notifications",
            "serve",
            "--port",
            "0",
            "--mcp-stdio",
            command,
            "--mcp-env",
            f"PYTHONPATH={ROOT}",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=_environment(),
    )
    try:
        assert process.stderr is not None
        for raw in process.stderr:
            line = raw.decode("utf-8", "replace")
            if line.startswith("serving on "):
                url = line.removeprefix("serving on ").strip()
                break
        else:
            raise RuntimeError("serve exited before it listened")
        # Its later lines (the bridge's events) are not read: keep the pipe from filling.
        drain = subprocess.Popen(["cat"], stdin=process.stderr, stdout=subprocess.DEVNULL)
        try:
            yield url
        finally:
            drain.kill()
            drain.wait()
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def bench_relay(n: int, run: int) -> tuple[float, int]:
    """Notifications per second through the relay, and how many of ``n`` arrived."""
    token = f"bench-{run}"

    async def main(url: str) -> tuple[float, int]:
        proxy = Proxy(url, events=True)
        await asyncio.wait_for(proxy.list_tools(), GUARD)
        received = 0
        last = 0.0
        async with contextlib.aclosing(proxy.notifications()) as items:

            async def hear() -> None:
                nonlocal received, last
                async for item in items:
                    if type(item) is not NotificationReceived:
                        continue
                    params = item.notification.params or {}
                    if params.get("progressToken") == token:
                        received += 1
                        last = time.perf_counter()
                        if received == n:
                            return

            async for item in items:
                if isinstance(item, StreamOpened):
                    break
            started = time.perf_counter()
            call = asyncio.create_task(proxy.call_tool("count", {"steps": n}, progress_token=token))
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(hear(), GUARD)  # a notification dropped: fewer than n
            result = await asyncio.wait_for(call, GUARD)
        if result.get("structuredContent") != {"result": f"counted to {n}"}:
            raise RuntimeError(f"the call answered {result!r}")
        return received / (last - started), received

    with serve_relay() as url:
        return asyncio.run(main(url))


def bench_sdk(n: int) -> float:
    """Notifications per second straight from the server to the SDK's ``Client``."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, get_default_environment

    received = 0

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        nonlocal received
        received += 1

    async def main() -> float:
        parameters = StdioServerParameters(
            command=SERVER[0],
            args=[*SERVER[1:], *SERVER_OPTIONS],
            env={**get_default_environment(), "PYTHONPATH": str(ROOT)},
        )
        async with Client(parameters) as client:
            started = time.perf_counter()
            await client.call_tool("count", {"steps": n}, progress_callback=on_progress)
            elapsed = time.perf_counter() - started
        if received != n:
            raise RuntimeError(f"the SDK delivered {received} of {n} progress notifications")
        return n / elapsed

    return asyncio.run(main())


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_N
    print(f"{n} progress notifications of one tool call, the example MCP server over stdio")
    relayed = [bench_relay(n, run) for run in range(3)]
    relay_rate = max(rate for rate, _ in relayed)
    lost = n - min(count for _, count in relayed)
    sdk_rate = max(bench_sdk(n) for _ in range(3))
    rates = {
        "Proxy.call_tool -> serve --mcp-stdio -> server -> proxy path": relay_rate,
        "MCP SDK Client.call_tool -> server -> progress callback": sdk_rate,
    }
    for name, rate in rates.items():
        print(f"  {name:62}{rate:10,.0f} notifications/s")
    print(f"  relay / MCP SDK direct: {relay_rate / sdk_rate:.2f}x (best of 3 each)")
    if lost:
        print(f"  {lost} of {n} progress notifications did not reach the proxy in one run")


if __name__ == "__main__":
    main()
