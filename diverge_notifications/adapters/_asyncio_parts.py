"""The asyncio adapter's helpers: waits with a deadline, flow control, handlers, lingering.

Kept apart from :mod:`.asyncio` so that the adapter itself stays a loop
over the drivers' actions; everything here is I/O on asyncio streams.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ..sansio.actions import ClientDriver, ExchangeHandler
from ..sansio.asks import Ask
from ..sansio.serve_settings import ServeSettings
from ..sansio.serving import ServingConnection
from ._common import READ_SIZE, describe_error, handler_timed_out, run_exchange_handler

__all__ = ["answer_within", "asyncio_receive", "drained", "linger", "within"]

_T = TypeVar("_T")

# asyncio.timeout() (Python 3.11) puts the deadline on the awaiting task
# itself. asyncio.wait_for() is not used anywhere: before Python 3.12 it
# loses a cancellation that arrives as the awaited operation finishes
# (CPython gh-86296), so that a listener stopped while a connection is
# being refused would go on asking; it also makes a task of every read,
# which costs a read that carries one notification more than decoding it.
_asyncio_timeout: Any = getattr(asyncio, "timeout", None)


async def within(awaitable: Awaitable[_T], timeout: float) -> _T:
    """``await awaitable``, raising ``asyncio.TimeoutError`` after ``timeout`` seconds.

    What ``asyncio.wait_for`` should be: a cancellation of the caller is
    never lost, even when it arrives as ``awaitable`` finishes, and the
    awaited work is stopped before this returns.
    """
    if _asyncio_timeout is None:  # Python 3.10
        return await _within_by_wait(awaitable, timeout)
    async with _asyncio_timeout(timeout):
        return await awaitable


async def _within_by_wait(awaitable: Awaitable[_T], timeout: float) -> _T:
    """:func:`within` for Python 3.10, which has no ``asyncio.timeout()``."""
    task = asyncio.ensure_future(awaitable)
    try:
        # asyncio.wait() returns at the deadline and never swallows our own
        # cancellation; the task's outcome is read below.
        done, _ = await asyncio.wait((task,), timeout=timeout)
    finally:
        if not task.done():  # past the deadline, or we were cancelled
            task.cancel()
            await asyncio.wait((task,))
    if not done:
        raise asyncio.TimeoutError
    return task.result()


async def asyncio_receive(
    driver: ClientDriver, reader: asyncio.StreamReader, timeout: float, clock: Callable[[], float]
) -> None:
    """The asyncio listener's ``Receive``: one read of ``reader``, reported to ``driver``."""
    try:
        if _asyncio_timeout is None:  # pragma: no cover - Python 3.10
            data = await within(reader.read(READ_SIZE), timeout)
        else:  # inline: the listener's hot path, one coroutine fewer per read
            async with _asyncio_timeout(timeout):
                data = await reader.read(READ_SIZE)
    except (OSError, asyncio.TimeoutError) as error:
        if isinstance(error, asyncio.TimeoutError) and not getattr(error, "errno", 0):
            driver.timed_out(clock())  # the deadline's timeout, not the socket's
        else:
            driver.connection_lost(clock(), describe_error(error))
    else:
        driver.data_received(clock(), data)


async def drained(writer: asyncio.StreamWriter, stall_timeout: float) -> bool:
    """Wait for the socket to take what was written (asyncio's flow control).

    False if the peer took no byte for ``stall_timeout`` seconds: the bytes
    the transport holds did not go down meanwhile. They are looked at a few
    times per ``stall_timeout`` (at least once a second), so that a stall is
    noticed within that much of its deadline.
    """
    transport = writer.transport
    loop = asyncio.get_running_loop()
    step = min(1.0, stall_timeout / 4)
    left = transport.get_write_buffer_size()
    progressed = loop.time()
    while True:
        try:
            await within(writer.drain(), step)
            return True
        except asyncio.TimeoutError:
            now_left = transport.get_write_buffer_size()
            if now_left < left:
                left, progressed = now_left, loop.time()
            elif loop.time() - progressed >= stall_timeout:
                return False


async def answer_within(
    serving: ServingConnection, settings: ServeSettings[ExchangeHandler], ask: Ask
) -> None:
    """Perform ``RunHandler(ask)`` (asyncio), cancelling the handler past ``exchange_timeout``."""
    assert settings.exchange_handler is not None
    running = run_exchange_handler(serving, settings.exchange_handler, ask)
    try:
        await within(running, settings.exchange_timeout)
    except asyncio.TimeoutError:
        handler_timed_out(serving, ask, settings.exchange_timeout)


async def linger(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seconds: float
) -> None:
    """Half-close, then read and discard until the peer closes or ``seconds`` pass (asyncio)."""

    async def discard() -> None:
        if writer.can_write_eof():
            writer.write_eof()
        while await reader.read(READ_SIZE):
            pass

    with contextlib.suppress(OSError, asyncio.TimeoutError):
        await within(discard(), seconds)
