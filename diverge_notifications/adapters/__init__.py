"""Drivers of the sans-IO core: asyncio, trio and blocking sockets.

Each of :mod:`.asyncio`, :mod:`.trio` and :mod:`.blocking` offers the same
three things, with the same options: ``listen`` (a client that asks for
notifications, asks again with backoff and jitter, and yields what
arrives), ``serve`` (a server of a :class:`~diverge_notifications.sansio.Hub`)
and ``Proxy`` (the exchanges of kinds 0-3 and the notifications they
unlock; it raises ``ExchangeError`` and ``ExchangeFailed``, which each
module re-exports). Import the one you use; :mod:`.trio` needs the ``trio``
extra and is never imported by this package. :mod:`.tls` makes the TLS
contexts. Here are the defaults of their options, :func:`parse_url` (the
URLs they take) and :class:`ConnectionFailed` (what a listener yields when
no connection could be made).
"""

from ..sansio.client.urls import Endpoint, parse_url
from ..sansio.drivers.settings import (
    DEFAULT_ASK_TIMEOUT,
    DEFAULT_CLOSE_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
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
