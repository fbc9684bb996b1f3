"""What the three ``Proxy`` classes share on the I/O side.

Every decision of a proxy is taken by the sans-IO
:class:`~diverge_notifications.sansio.drivers.proxy.ProxyDriver`; each exchange
and each notification ask is performed by the adapter's own listener loop.
What is left here is the random source (:func:`proxy_driver`), the
options' type, and :class:`AsyncProxy`, the whole of the asyncio and trio
``Proxy`` but for the loop, the flag and the clock each names.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..sansio.drivers.actions import ClientDriver
from ..sansio.drivers.proxy import (
    ProxyDriver,
    call_tool_ask,
    list_resources_ask,
    list_tools_ask,
    read_resource_ask,
    result_object,
)
from ..sansio.events import Event, ResultReceived
from ..sansio.mcp.model import Notification
from ..sansio.wire.asks import Ask
from ._common import ListenOptions, client_settings, listen_context

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["AsyncProxy", "ProxyOptions", "proxy_driver"]


class ProxyOptions(ListenOptions, total=False):
    """The options of the three ``Proxy`` classes: those of ``listen()``, and one more.

    ``policy`` defaults to ``ProxyPolicy()`` here: the notification ask waits
    for the first answered exchange.
    """

    #: Seconds an exchange's answer may take.
    exchange_timeout: float


def proxy_driver(
    url: str, **options: Unpack[ProxyOptions]
) -> tuple[ProxyDriver, ssl.SSLContext | None]:
    """The :class:`ProxyDriver` of a ``Proxy(url, ...)`` and its TLS context, checked now.

    The jitter source is :func:`random.random` unless ``random`` is given;
    the context follows the URL's scheme as ``listen()``'s does.
    """
    settings, policy, context = client_settings(cast("dict[str, Any]", options))
    driver = ProxyDriver(url, settings, policy=policy)
    return driver, listen_context(driver.endpoint, context)


class _Flag(Protocol):
    """``asyncio.Event`` or ``trio.Event``: what :class:`AsyncProxy` needs of one."""

    def set(self) -> None: ...
    async def wait(self) -> Any: ...


class AsyncProxy:
    """A proxy of the server at ``url`` (``http://host:port[/base]``), on an event loop.

    :meth:`list_tools`, :meth:`list_resources`, :meth:`call_tool` and
    :meth:`read_resource` each make one exchange, on a connection of its
    own, and return the server's result object; an error answer raises
    :class:`~diverge_notifications.sansio.ExchangeError` (its
    ``ErrorData`` in ``error``), no answer
    :class:`~diverge_notifications.sansio.ExchangeFailed`.
    :meth:`notifications` is an async iterator of what the proxy's one
    notification ask brings: it asks once the first exchange was answered
    (waiting until then), and again whenever a path ends, as the ``policy``
    says. The options (``ProxyOptions``, docs/adapters.md) are checked by
    the constructor.
    """

    def __init__(self, url: str, flag: _Flag, **options: Unpack[ProxyOptions]) -> None:
        self.driver, self._tls = proxy_driver(url, **options)
        self._may_listen = flag
        if self.driver.may_listen:
            flag.set()

    def _drive(self, driver: ClientDriver) -> AsyncGenerator[Notification | Event, None]:
        """The adapter's listener loop, performing ``driver``'s actions."""
        raise NotImplementedError

    def _now(self) -> float:
        """The adapter's clock."""
        raise NotImplementedError

    async def exchange(self, ask: Ask) -> ResultReceived:
        """One exchange of kinds 0-3: the result, as parsed and as its bytes (``raw``)."""
        exchange = self.driver.exchange(ask)
        try:
            async with contextlib.aclosing(self._drive(exchange)) as steps:
                async for _ in steps:
                    pass  # an exchange delivers nothing: its outcome is its answer
        finally:
            if self.driver.exchange_ended(exchange, self._now()):
                self._may_listen.set()
        return exchange.answer()

    async def list_tools(self, cursor: str | None = None) -> dict[str, Any]:
        """``tools/list``: the result, ``{"tools": [...]}`` (and ``nextCursor`` for more)."""
        return result_object(await self.exchange(list_tools_ask(cursor)))

    async def list_resources(self, cursor: str | None = None) -> dict[str, Any]:
        """``resources/list``: the result, ``{"resources": [...]}``."""
        return result_object(await self.exchange(list_resources_ask(cursor)))

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress_token: str | int | None = None,
    ) -> dict[str, Any]:
        """``tools/call``: the result; the progress of ``progress_token`` comes on the path."""
        ask = call_tool_ask(name, arguments, progress_token=progress_token)
        return result_object(await self.exchange(ask))

    async def read_resource(self, uri: str) -> dict[str, Any]:
        """``resources/read``: the result, ``{"contents": [...]}``."""
        return result_object(await self.exchange(read_resource_ask(uri)))

    def notifications(self) -> AsyncGenerator[Notification | Event, None]:
        """What the one notification ask brings: each notification (every event with ``events``).

        Waits for the first answered exchange before asking. One reader at
        a time: a second one raises ``LocalProtocolError`` at its first
        step. ``aclose()`` or a cancellation stops reading; a later reader
        asks again after the policy's backoff.
        """
        return self._notifications()

    async def _notifications(self) -> AsyncGenerator[Notification | Event, None]:
        await self._may_listen.wait()
        listener = self.driver.open_notifications()
        try:
            async with contextlib.aclosing(self._drive(listener)) as items:
                async for item in items:
                    yield item
        finally:
            self.driver.close_notifications(self._now())
