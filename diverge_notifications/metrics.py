"""Prometheus metrics of a server (the ``metrics`` extra: ``prometheus_client``).

:class:`ServerCollector` is a ``prometheus_client`` collector over a
server's ``stats()`` and its hub's counts (and, if given, a broker's and an
MCP relay's connections): register it in the application's own registry,
and each scrape reads the counts then, on the thread that scrapes::

    registry = prometheus_client.CollectorRegistry()
    registry.register(ServerCollector(server))

The counts are read without a lock: scrape on the thread that runs the
server (:func:`serve_metrics` does, on the running asyncio loop; with the
blocking adapter, collect while holding ``server.lock``). The metrics, all
named ``diverge_notifications_...``:

========================================== ======= ==========================================
name                                       type    what
========================================== ======= ==========================================
``paths_open``                             gauge   notification paths open now
``connections_open``                       gauge   connections being served now
``queued``                                 gauge   notifications queued now, over every path
``hub_suspended``                          gauge   1 while the hub is suspended, else 0
``published_total``                        counter notifications the hub accepted
``sent_total``                             counter notifications written to paths
``dropped_total``                          counter notifications that reached a path, not sent
``refusals_total{status}``                 counter asks refused, by HTTP status
``paths_opened_total``                     counter notification paths opened
``paths_ended_total{how}``                 counter paths ended, by how (``clean``,
                                                   ``peer_closed``, ``stalled``, ``lost``,
                                                   ``suspended``)
``exchanges_answered_total``               counter exchanges (kinds 0-3) answered
``handler_failures_total``                 counter exchange handlers that failed
``asks_expired_total``                     counter connections closed with no ask in time
``tls_failures_total``                     counter connections whose TLS handshake failed
``broker_connected``                       gauge   1 while the broker is subscribed, else 0
``mcp_server_connected{server}``           gauge   1 while that MCP server is connected
========================================== ======= ==========================================
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator, Mapping
from typing import Final, Protocol

import h11
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .adapters.asyncio import within
from .sansio.server.counts import ServerStats
from .sansio.server.hub import Hub

__all__ = ["PREFIX", "ServerCollector", "serve_metrics"]

#: What every metric's name starts with.
PREFIX: Final = "diverge_notifications_"


class _Server(Protocol):
    """What the collector reads of a server: any adapter's ``Server``."""

    @property
    def hub(self) -> Hub: ...

    def stats(self) -> ServerStats: ...


class _BrokerStats(Protocol):
    @property
    def connected(self) -> bool: ...


class _Broker(Protocol):
    """What the collector reads of a broker (``diverge_notifications.cluster``)."""

    def stats(self) -> _BrokerStats: ...


class _McpStatus(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def connected(self) -> bool: ...


class _Relay(Protocol):
    """What the collector reads of an MCP relay (``diverge_notifications.bridge.McpRelay``)."""

    def status(self) -> Iterable[_McpStatus]: ...


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(PREFIX + name, documentation, value=value)


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(PREFIX + name, documentation, value=value)


def _labelled(
    name: str, documentation: str, label: str, values: Mapping[int, int] | Mapping[str, int]
) -> CounterMetricFamily:
    family = CounterMetricFamily(PREFIX + name, documentation, labels=[label])
    for key, value in values.items():
        family.add_metric([str(key)], value)
    return family


class ServerCollector(Collector):
    """The metrics of ``server`` (see the module's table), read at each scrape.

    ``server`` is any adapter's ``Server`` (its ``stats()`` and its
    ``hub``); ``broker`` (a ``RedisBroker`` or any broker with ``stats()``)
    adds ``broker_connected``; ``relay`` (an ``McpRelay``, or anything with
    ``status()``) adds ``mcp_server_connected{server}``, one sample per MCP
    server.
    """

    def __init__(
        self, server: _Server, *, broker: _Broker | None = None, relay: _Relay | None = None
    ) -> None:
        self._server = server
        self._broker = broker
        self._relay = relay

    def collect(self) -> Iterator[Metric]:
        """The metrics now."""
        stats = self._server.stats()
        hub = self._server.hub
        counts = hub.counts()
        yield _gauge("paths_open", "Notification paths open now.", stats.open_paths)
        yield _gauge("connections_open", "Connections being served now.", stats.connections)
        yield _gauge("queued", "Notifications queued now, over every path.", counts.queued)
        suspended = 0 if hub.suspended is None else 1
        yield _gauge("hub_suspended", "1 while the hub is suspended (its broker lost).", suspended)
        yield _counter("published_total", "Notifications the hub accepted.", counts.published)
        yield _counter("sent_total", "Notifications written to paths.", stats.notifications_sent)
        yield _counter(
            "dropped_total",
            "Notifications that reached a path and were not sent.",
            stats.notifications_dropped,
        )
        yield _labelled("refusals_total", "Asks refused, by HTTP status.", "status", stats.refusals)
        yield _counter("paths_opened_total", "Notification paths opened.", stats.paths_served)
        yield _labelled("paths_ended_total", "Paths ended, by how.", "how", stats.paths_ended)
        yield _counter(
            "exchanges_answered_total", "Exchanges (kinds 0-3) answered.", stats.exchanges_answered
        )
        yield _counter(
            "handler_failures_total", "Exchange handlers that failed.", stats.handler_failures
        )
        yield _counter(
            "asks_expired_total", "Connections closed with no ask in time.", stats.asks_expired
        )
        yield _counter(
            "tls_failures_total", "Connections whose TLS handshake failed.", stats.tls_failures
        )
        if self._broker is not None:
            connected = 1 if self._broker.stats().connected else 0
            yield _gauge("broker_connected", "1 while the broker is subscribed.", connected)
        if self._relay is not None:
            family = GaugeMetricFamily(
                PREFIX + "mcp_server_connected",
                "1 while the MCP server is connected.",
                labels=["server"],
            )
            for status in self._relay.status():
                family.add_metric([status.name], 1 if status.connected else 0)
            yield family


#: The longest request head the metrics endpoint reads.
_MAX_HEAD: Final = 16 * 1024
#: Seconds a scraper has to send its request.
_REQUEST_TIMEOUT: Final = 10.0


async def serve_metrics(registry: Collector, host: str, port: int) -> asyncio.Server:
    """Serve ``GET /metrics`` of ``registry`` on ``host``:``port``, on the running loop.

    The scrape runs on the loop's thread, as the server does, so that the
    collectors read counts nobody changes meanwhile. Anything but ``GET``
    (or ``HEAD``) of ``/metrics`` is answered ``404``; one request per
    connection. Raises :class:`OSError` if it cannot listen.
    """

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await within(_read_request(reader), _REQUEST_TIMEOUT)
            if request is not None:
                writer.write(_response(registry, request))
                await writer.drain()
        except (OSError, asyncio.TimeoutError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    return await asyncio.start_server(answer, host, port)


async def _read_request(reader: asyncio.StreamReader) -> h11.Request | None:
    """The request of one connection, or ``None`` if it is not one."""
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD)
    while True:
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError:
            return None
        if isinstance(event, h11.Request):
            return event
        if event is not h11.NEED_DATA:
            return None
        connection.receive_data(await reader.read(4096))


def _response(registry: Collector, request: h11.Request) -> bytes:
    """The whole response to ``request``: the metrics, or ``404``."""
    wanted = request.target.partition(b"?")[0] == b"/metrics"
    if wanted and request.method in (b"GET", b"HEAD"):
        status, body, content_type = b"200 OK", generate_latest(registry), CONTENT_TYPE_LATEST
    else:
        status, body, content_type = b"404 Not Found", b"GET /metrics only\n", "text/plain"
    head = b"HTTP/1.1 %b\r\nContent-Type: %b\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
    head %= (status, content_type.encode("ascii"), len(body))
    return head if request.method == b"HEAD" else head + body
