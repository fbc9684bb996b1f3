"""The blocking proxy: :class:`Proxy`, exchanges of kinds 0-3 and the notifications they unlock.

Every decision is the sans-IO :class:`~diverge_notifications.sansio.proxying.ProxyDriver`'s;
each exchange and the notification ask run on the blocking adapter's
:class:`~._blocking_listener.Listener`, so they move bytes exactly as
:func:`~.blocking.listen` does. Exchanges may be made from several threads
at once and the notifications read on another; :meth:`Proxy.close`, from
any thread, stops them all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..sansio.actions import ClientDriver
from ..sansio.asks import Ask
from ..sansio.events import Event, ResultReceived
from ..sansio.mcp import Notification
from ..sansio.proxying import (
    ExchangeError,
    ExchangeFailed,
    call_tool_ask,
    list_resources_ask,
    list_tools_ask,
    read_resource_ask,
    result_object,
)
from ._blocking_listener import Listener
from ._common import ClosedOnExit
from ._proxy import proxy_driver

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._proxy import ProxyOptions

__all__ = ["ExchangeError", "ExchangeFailed", "Notifications", "Proxy", "ProxyClosed"]


class ProxyClosed(RuntimeError):
    """The proxy was closed: it makes no exchange and reads no notification any more."""


class Proxy(ClosedOnExit):
    """A proxy of the server at ``url`` (``http://host:port[/base]``), on blocking sockets.

    The methods of the asyncio ``Proxy``, blocking: each exchange returns
    its result (or raises :class:`ExchangeError` or :class:`ExchangeFailed`),
    and :meth:`notifications` is a blocking iterator that waits for the
    first answered exchange, then asks. :meth:`close` (or leaving a
    ``with`` block) stops everything from any thread: an exchange in
    progress raises :class:`ExchangeFailed`, the notifications iterator
    stops, and later calls raise :class:`ProxyClosed`.
    """

    def __init__(self, url: str, **options: Unpack[ProxyOptions]) -> None:
        self.driver, self._tls = proxy_driver(url, **options)
        # The driver is not thread-safe: every call into it is made under
        # this lock, but for the listener's own, which only its thread makes.
        self._lock = threading.Lock()
        # Notified when the ask is unlocked, and on every close.
        self._changed = threading.Condition(self._lock)
        self._closed = False
        self._running: set[Listener] = set()

    def _runner(self, driver: ClientDriver) -> Listener:
        """A loop performing ``driver``'s actions, stopped by :meth:`close`; under the lock."""
        if self._closed:
            raise ProxyClosed("the proxy is closed")
        runner = Listener(driver, self._tls)
        self._running.add(runner)
        return runner

    def exchange(self, ask: Ask) -> ResultReceived:
        """One exchange of kinds 0-3: the result, as parsed and as its bytes (``raw``)."""
        with self._lock:
            exchange = self.driver.exchange(ask)
            runner = self._runner(exchange)
        try:
            for _ in runner:
                pass  # an exchange delivers nothing: its outcome is its answer
        finally:
            runner.close()
            with self._lock:
                self._running.discard(runner)
                if self.driver.exchange_ended(exchange, time.monotonic()):
                    self._changed.notify_all()
        return exchange.answer()

    def list_tools(self, cursor: str | None = None) -> dict[str, Any]:
        """``tools/list``: the result, ``{"tools": [...]}`` (and ``nextCursor`` for more)."""
        return result_object(self.exchange(list_tools_ask(cursor)))

    def list_resources(self, cursor: str | None = None) -> dict[str, Any]:
        """``resources/list``: the result, ``{"resources": [...]}``."""
        return result_object(self.exchange(list_resources_ask(cursor)))

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        progress_token: str | int | None = None,
    ) -> dict[str, Any]:
        """``tools/call``: the result; the progress of ``progress_token`` comes on the path."""
        return result_object(
            self.exchange(call_tool_ask(name, arguments, progress_token=progress_token))
        )

    def read_resource(self, uri: str) -> dict[str, Any]:
        """``resources/read``: the result, ``{"contents": [...]}``."""
        return result_object(self.exchange(read_resource_ask(uri)))

    def notifications(self) -> Notifications:
        """What the one notification ask brings: a blocking iterator (every event with ``events``).

        It waits for the first answered exchange (made on another thread)
        before asking. One reader at a time: a second one raises
        ``LocalProtocolError`` at its first ``next()``. Its ``close()``, from
        any thread, stops it; so does :meth:`close`.
        """
        return Notifications(self)

    def _listener(self, reader: Notifications) -> Listener | None:
        """Wait until the ask may be made: its loop, or ``None`` once ``reader`` or all closed."""
        with self._changed:
            while not (self.driver.may_listen or self._closed or reader.closed):
                self._changed.wait()
            if self._closed or reader.closed:
                return None
            return self._runner(self.driver.open_notifications())

    def _listened(self, runner: Listener) -> None:
        """A reader's loop is over: its ask ends (the policy counts it)."""
        runner.close()
        with self._lock:
            self._running.discard(runner)
            self.driver.close_notifications(time.monotonic())

    def _wake(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def close(self) -> None:
        """Stop every exchange and the notifications, from any thread; more than once is fine."""
        with self._changed:
            self._closed = True
            running = list(self._running)
            self._changed.notify_all()
        for runner in running:
            runner.close()


class Notifications(ClosedOnExit, Iterator["Notification | Event"]):
    """The blocking iterator of :meth:`Proxy.notifications`.

    :meth:`close` stops it from the iterating thread or any other: a wait
    for the first exchange, a read or a backoff sleep ends at once, and
    ``next()`` then raises ``StopIteration``.
    """

    def __init__(self, proxy: Proxy) -> None:
        self._proxy = proxy
        self.closed = False
        self._runner: Listener | None = None
        # Held for the whole of each next(), as the listener's own lock is.
        self._next_lock = threading.Lock()
        self._items = self._run()

    def __iter__(self) -> Notifications:
        return self

    def __next__(self) -> Notification | Event:
        with self._next_lock:
            return next(self._items)

    def close(self) -> None:
        """Stop reading; safe from any thread, and more than once."""
        self.closed = True
        runner = self._runner
        if runner is not None:
            runner.close()
        self._proxy._wake()
        if self._next_lock.acquire(blocking=False):
            try:
                self._items.close()  # nobody is inside it: finish it here
            finally:
                self._next_lock.release()

    def _run(self) -> Generator[Notification | Event, None, None]:
        runner = self._runner = self._proxy._listener(self)
        if runner is None:
            return
        try:
            if self.closed:  # closed while the loop was being made
                return
            yield from runner
        finally:
            self._proxy._listened(runner)
