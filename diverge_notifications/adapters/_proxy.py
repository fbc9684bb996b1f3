"""What the three ``Proxy`` classes share on the I/O side.

Every decision of a proxy is taken by the sans-IO
:class:`~diverge_notifications.sansio.drivers.proxy.ProxyDriver`; each exchange
and each notification ask is performed by the adapter's own listener loop.
What is left here is the random source (:func:`proxy_driver`), the
options' type, the log line of a full buffer (:func:`log_overflow`), and
:class:`AsyncProxy`, the whole of the asyncio and trio ``Proxy`` but for
the loop, the flag, the clock and the way each runs the background ask.
"""

from __future__ import annotations

import contextlib
import logging
import ssl
from collections.abc import AsyncGenerator, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast

from ..sansio.drivers.actions import ClientDriver
from ..sansio.drivers.listen import ListenDriver
from ..sansio.drivers.proxy import (
    BufferOverflow,
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

__all__ = ["AsyncProxy", "ProxyOptions", "log_overflow", "logger", "proxy_driver"]

#: Where a proxy says that its buffer is full.
logger = logging.getLogger("diverge_notifications.proxy")


class ProxyOptions(ListenOptions, total=False):
    """The options of the three ``Proxy`` classes: those of ``listen()``, and one more.

    ``policy`` defaults to ``ProxyPolicy()`` here: the notification ask waits
    for the first answered exchange.
    """

    #: Seconds an exchange's answer may take.
    exchange_timeout: float
    #: Items kept until the application reads them; beyond, dropped and counted.
    notification_buffer: int


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


def log_overflow(report: BufferOverflow | None) -> None:
    """Log ``report`` (from ``ProxyDriver.keep``), if there is one: the buffer is full."""
    if report is not None:
        logger.warning(
            "the proxy's notification buffer is full (%d items): what arrives is dropped "
            "until the application reads (%d dropped so far, proxy.dropped)",
            report.capacity,
            report.dropped,
        )


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

    Once the first exchange was answered, the proxy makes its notification
    ask in the background and keeps it open for its life, asking again
    whenever a path ends, as the ``policy`` says; what arrives waits in a
    buffer of ``notification_buffer`` items until :meth:`notifications`
    reads it (beyond, it is dropped and counted in :attr:`dropped`).
    :meth:`aclose`, or leaving ``async with``, ends the ask and lets the
    buffer go; exchanges then raise ``ProxyClosed``. The options
    (``ProxyOptions``, docs/adapters.md) are checked by the constructor.
    """

    def __init__(
        self, url: str, flag: Callable[[], _Flag], **options: Unpack[ProxyOptions]
    ) -> None:
        self.driver, self._tls = proxy_driver(url, **options)
        self._flag = flag
        self._may_listen = flag()
        if self.driver.may_listen:
            self._may_listen.set()
        # Set when the background ask brings something, or the proxy closes; a
        # waiting reader makes a new one before it looks at the buffer.
        self._arrived = flag()
        # Set when the background ask's run is over; cancels it while it runs.
        self._listened: _Flag | None = None
        self._stop_listening: Callable[[], object] | None = None

    def _drive(self, driver: ClientDriver) -> AsyncGenerator[Notification | Event, None]:
        """The adapter's listener loop, performing ``driver``'s actions."""
        raise NotImplementedError

    def _now(self) -> float:
        """The adapter's clock."""
        raise NotImplementedError

    def _background(self) -> bool:
        """Whether the ask can run in the background now (else its reader drives it)."""
        raise NotImplementedError

    def _spawn(self, run: Coroutine[Any, Any, None]) -> Callable[[], object]:
        """Run ``run`` in the background; what cancels it."""
        raise NotImplementedError

    @property
    def dropped(self) -> int:
        """How many notifications (events) arrived while the buffer was full, and were dropped."""
        return self.driver.dropped

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
                self._start_listening()
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

        What arrived since the ask was made and was not read yet comes
        first, in order; then what arrives, as it arrives. Waits for the
        first answered exchange. One reader at a time: a second one raises
        ``LocalProtocolError`` at its first step. A reader that stops
        (``aclose()``, a cancellation) leaves the ask open; the iteration
        ends when the proxy closes or the policy gives up.
        """
        return self._notifications()

    async def _notifications(self) -> AsyncGenerator[Notification | Event, None]:
        await self._may_listen.wait()
        if not self._background() and not self.driver.closed:
            async with contextlib.aclosing(self._read_and_drive()) as driven:
                async for item in driven:
                    yield item
            return
        driver = self.driver
        driver.open_reader()
        try:
            self._start_listening()
            while True:
                taken = driver.take()
                if taken is not None:
                    yield taken
                elif driver.over:
                    return
                else:
                    arrived = self._arrived = self._flag()
                    await arrived.wait()
        finally:
            driver.close_reader()

    async def _read_and_drive(self) -> AsyncGenerator[Notification | Event, None]:
        """The reader drives the ask itself (trio without ``async with``) while it reads."""
        listener = self.driver.open_notifications()
        try:
            async with contextlib.aclosing(self._drive(listener)) as items:
                async for item in items:
                    yield item
        finally:
            self.driver.close_notifications(self._now())

    def _start_listening(self) -> None:
        """Start the background ask if it is to start now (the driver says)."""
        if not self._background():
            return
        listener = self.driver.start_listening()
        if listener is not None:
            self._listened = self._flag()
            self._stop_listening = self._spawn(self._listen(listener))

    async def _listen(self, listener: ListenDriver) -> None:
        """The background ask: what it delivers goes into the buffer, until it stops."""
        driver = self.driver
        try:
            async with contextlib.aclosing(self._drive(listener)) as items:
                async for item in items:
                    log_overflow(driver.keep((item,)))
                    self._arrived.set()
        finally:
            self._listen_over()

    def _listen_over(self, *_: object) -> None:
        """The background ask's run is over (also: cancelled before it started); twice is fine."""
        self.driver.close_notifications(self._now())
        self._arrived.set()
        if self._listened is not None:
            self._listened.set()

    async def aclose(self) -> None:
        """Close the proxy: the ask ends, the buffer is let go, readers stop; twice is fine.

        Exchanges raise ``ProxyClosed`` afterwards. Returns once the
        background ask's connection is closed.
        """
        self.driver.close()
        self._may_listen.set()
        self._arrived.set()
        if self._stop_listening is not None:
            self._stop_listening()
        if self._listened is not None:
            await self._listened.wait()
