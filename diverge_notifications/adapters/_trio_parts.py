"""The trio adapter's server-side I/O helpers (needs the ``trio`` extra).

Sending with a stall deadline, lingering after a refusal, bounding an
exchange handler's time: what ``adapters/trio.py`` does for
the serving driver's actions, kept here so that the adapter stays a loop.
"""

from __future__ import annotations

import contextlib

import trio

from ..sansio.actions import Close, ExchangeHandler
from ..sansio.asks import Ask
from ..sansio.serve_settings import ServeSettings
from ..sansio.serving import ServingConnection
from ._common import READ_SIZE, handler_timed_out, reset_on_close, run_exchange_handler

__all__ = ["STREAM_ERRORS", "answer_within", "close_as", "linger", "sent"]

#: What a broken or closed stream raises.
STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)
#: Bytes sent at a time: a peer that takes none of a piece for stall_timeout is stalled.
_PIECE = 64 * 1024


async def sent(stream: trio.abc.Stream, data: bytes, stall_timeout: float) -> bool:
    """Send ``data``; False if the peer took none of a piece of it for ``stall_timeout`` seconds.

    Progress is seen a piece (``_PIECE`` bytes) at a time.
    """
    view = memoryview(data)
    for start in range(0, len(view), _PIECE):
        with trio.move_on_after(stall_timeout):
            await stream.send_all(view[start : start + _PIECE])
            continue
        return False
    return True


async def close_as(stream: trio.abc.Stream, close: Close) -> None:
    """Before ``stream`` is closed: make it a reset (``abort``), or linger (``linger`` seconds)."""
    if close.abort:
        # Over TLS the socket is under the SSLStream.
        reset_on_close(getattr(getattr(stream, "transport_stream", stream), "socket", None))
    elif close.linger:
        await linger(stream, close.linger)


async def linger(stream: trio.abc.Stream, seconds: float) -> None:
    """Half-close, then read and discard until the peer closes or ``seconds`` pass.

    A TLS stream has no half-close: it is only read.
    """
    with trio.move_on_after(seconds), contextlib.suppress(*STREAM_ERRORS):
        if isinstance(stream, trio.abc.HalfCloseableStream):
            await stream.send_eof()
        while await stream.receive_some(READ_SIZE):
            pass  # discarded: the peer reads its refusal, not a reset


async def answer_within(
    serving: ServingConnection, settings: ServeSettings[ExchangeHandler], ask: Ask
) -> None:
    """Perform ``RunHandler(ask)``, cancelling the handler past ``exchange_timeout``."""
    assert settings.exchange_handler is not None
    with trio.move_on_after(settings.exchange_timeout) as scope:
        await run_exchange_handler(serving, settings.exchange_handler, ask)
    if scope.cancelled_caught:
        handler_timed_out(serving, ask, settings.exchange_timeout)
