"""Drivers of the sans-IO core: asyncio, trio and blocking sockets.

Each of :mod:`.asyncio`, :mod:`.trio` and :mod:`.blocking` offers ``listen``
(a client that asks for notifications, asks again with backoff and jitter,
and yields what arrives) and ``serve`` (a server of a :class:`Hub`). Import
the one you use; :mod:`.trio` needs the ``trio`` extra and is never
imported by this package. The defaults of their options are here.
"""

from ..sansio.client.urls import Endpoint, parse_url
from ..sansio.drivers.listen import DEFAULT_CONNECT_TIMEOUT
from ..sansio.drivers.settings import (
    DEFAULT_ASK_TIMEOUT,
    DEFAULT_CLOSE_TIMEOUT,
    DEFAULT_KEEPALIVE_INTERVAL,
    DEFAULT_MAX_BATCH,
)
from ..sansio.events import ConnectionFailed

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
