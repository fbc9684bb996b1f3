"""The asyncio proxy: :class:`Proxy`, exchanges of kinds 0-3 and the notifications they unlock.

Every decision is the sans-IO :class:`~diverge_notifications.sansio.proxying.ProxyDriver`'s;
each exchange and the notification ask run on the asyncio adapter's
listener loop, so they move bytes exactly as :func:`~.asyncio.listen` does.
The methods are :class:`~._proxy.AsyncProxy`'s (docs/adapters.md).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING

from ..sansio.actions import ClientDriver
from ..sansio.events import Event
from ..sansio.mcp import Notification
from ..sansio.proxying import ExchangeError, ExchangeFailed
from ._proxy import AsyncProxy
from .asyncio import _listen

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._proxy import ProxyOptions

__all__ = ["ExchangeError", "ExchangeFailed", "Proxy"]


class Proxy(AsyncProxy):
    """A proxy of the server at ``url`` (``http://host:port[/base]``), on asyncio.

    ``list_tools()``, ``list_resources()``, ``call_tool(name, arguments,
    progress_token=...)`` and ``read_resource(uri)`` make one exchange each
    and return its result (:class:`ExchangeError`, :class:`ExchangeFailed`
    otherwise); ``notifications()`` iterates the one notification ask, made
    once the first exchange was answered. See ``AsyncProxy``.
    """

    def __init__(self, url: str, **options: Unpack[ProxyOptions]) -> None:
        super().__init__(url, asyncio.Event(), **options)

    def _drive(self, driver: ClientDriver) -> AsyncGenerator[Notification | Event, None]:
        return _listen(driver, self._tls)

    def _now(self) -> float:
        return asyncio.get_running_loop().time()
