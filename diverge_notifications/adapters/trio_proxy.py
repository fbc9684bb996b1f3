"""The trio proxy: :class:`Proxy`, exchanges of kinds 0-3 and the notifications they unlock.

Every decision is the sans-IO :class:`~diverge_notifications.sansio.proxying.ProxyDriver`'s;
each exchange and the notification ask run on the trio adapter's listener
loop, so they move bytes exactly as :func:`~.trio.listen` does. The
methods are :class:`~._proxy.AsyncProxy`'s (docs/adapters.md). Needs the
``trio`` extra.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

import trio

from ..sansio.actions import ClientDriver
from ..sansio.events import Event
from ..sansio.mcp import Notification
from ..sansio.proxying import ExchangeError, ExchangeFailed
from ._proxy import AsyncProxy
from .trio import _listen

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._proxy import ProxyOptions

__all__ = ["ExchangeError", "ExchangeFailed", "Proxy"]


class Proxy(AsyncProxy):
    """A proxy of the server at ``url`` (``http://host:port[/base]``), on trio.

    The methods of the asyncio ``Proxy``, with the same behaviour. Iterate
    ``notifications()`` inside ``contextlib.aclosing(...)``, as trio's
    ``listen``. The proxy may be made outside ``trio.run``.
    """

    def __init__(self, url: str, **options: Unpack[ProxyOptions]) -> None:
        super().__init__(url, trio.Event(), **options)

    def _drive(self, driver: ClientDriver) -> AsyncGenerator[Notification | Event, None]:
        return _listen(driver, self._tls)

    def _now(self) -> float:
        return trio.current_time()
