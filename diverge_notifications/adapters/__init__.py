"""Drivers of the sans-IO core: asyncio, trio and blocking sockets.

Each of :mod:`.asyncio`, :mod:`.trio` and :mod:`.blocking` offers ``listen``
(a client that asks for notifications, asks again with backoff and jitter,
and yields what arrives) and ``serve`` (a server of a :class:`Hub`). Import
the one you use; :mod:`.trio` needs the ``trio`` extra and is never
imported by this package. The defaults of their options are here.
"""

from ..sansio.events import ConnectionFailed
from ..sansio.listening import DEFAULT_CONNECT_TIMEOUT
from ..sansio.serving_defaults import (
    DEFAULT_ASK_TIMEOUT,
    DEFAULT_CLOSE_TIMEOUT,
    DEFAULT_KEEPALIVE_INTERVAL,
    DEFAULT_MAX_BATCH,
)
from ..sansio.urls import Endpoint, parse_url

__all__ = [
    "DEFAULT_ASK_TIMEOUT",
    "DEFAULT_CLOSE_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_KEEPALIVE_INTERVAL",
    "DEFAULT_MAX_BATCH",
    "ConnectionFailed",
    "Endpoint",
    "parse_url",
]
