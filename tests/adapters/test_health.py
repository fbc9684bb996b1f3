"""Health checks: ``GET /healthz`` and ``GET /readyz`` on the serving port, without a token.

The sans-IO server reads them (no token, decided on the head) and the
serving driver answers ``/readyz`` by its hub: ``503`` with the hub's reason
while it is suspended. The three adapters serve them over real sockets,
asked by :mod:`http.client`.
"""

from __future__ import annotations

import http.client
from typing import Any
from urllib.parse import urlsplit

import pytest

from diverge_notifications.sansio import (
    NEED_DATA,
    AskRefused,
    ConnectionClosed,
    HealthAsked,
    Hub,
    LocalProtocolError,
    ServerConnection,
)
from diverge_notifications.sansio.drivers.serve import ServingConnection
from diverge_notifications.sansio.drivers.settings import ServeSettings
from tests.adapters.test_adapters import Runner, runners
from tests.adapters.test_suspension import REASON, Served, runner

__all__ = ["runner", "runners"]  # the fixtures, imported to be found


def _events(conn: ServerConnection, data: bytes) -> list[object]:
    conn.receive_data(data)
    events: list[object] = []
    while (event := conn.next_event()) is not NEED_DATA:
        events.append(event)
    return events


@pytest.mark.parametrize(
    ("request_line", "check"),
    [
        (b"GET /healthz HTTP/1.1", "healthz"),
        (b"GET /readyz?verbose HTTP/1.1", "readyz"),
        (b"HEAD /readyz HTTP/1.1", "readyz"),
        (b"GET /healthz HTTP/1.0", "healthz"),
    ],
)
def test_a_health_check_needs_no_token(request_line: bytes, check: str) -> None:
    conn = ServerConnection(token="s3cret-token-value")
    events = _events(conn, request_line + b"\r\nHost: x\r\n\r\n")
    assert events == [HealthAsked(check=check)]
    answer = conn.answer_health()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"\r\nConnection: close" in head
    assert body == (b"" if request_line.startswith(b"HEAD") else b"ok\n")
    assert conn.next_event() == ConnectionClosed()


def test_a_health_check_says_why_an_ask_would_not_be_served() -> None:
    conn = ServerConnection()
    _events(conn, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = conn.answer_health(REASON)
    assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
    assert answer.endswith(f"503 Service Unavailable: {REASON}\n".encode())
    with pytest.raises(LocalProtocolError):
        conn.answer_health()  # answered once


@pytest.mark.parametrize(
    "request_line",
    [b"POST /healthz HTTP/1.1", b"GET /healthz/x HTTP/1.1", b"GET /metrics HTTP/1.1"],
)
def test_what_is_not_a_health_check_is_refused_as_before(request_line: bytes) -> None:
    events = _events(ServerConnection(), request_line + b"\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
    assert isinstance(events[0], AskRefused) and events[0].status == 404


def test_an_answer_without_a_health_check_is_the_callers_mistake() -> None:
    with pytest.raises(LocalProtocolError):
        ServerConnection().answer_health()


def test_the_serving_driver_answers_readyz_by_its_hub_and_counts_no_refusal() -> None:
    hub = Hub()
    settings: ServeSettings[Any] = ServeSettings(token="s3cret-token-value")
    outputs = []
    for suspended in (None, REASON):
        if suspended is not None:
            hub.suspend(suspended)
        serving = ServingConnection(hub, settings, wake=lambda: None, now=0.0)
        serving.data_received(0.0, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        outputs.append(serving.take_output(0.0))
        assert serving.done
    assert outputs[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert outputs[1].startswith(b"HTTP/1.1 503 ") and outputs[1].endswith(REASON.encode() + b"\n")
    stats = settings.totals.snapshot()
    assert (dict(stats.refusals), stats.asks_served) == ({}, 0)


def get(url: str, path: str) -> tuple[int, bytes]:
    """``GET path`` of the server at ``url``: the status and the body."""
    parts = urlsplit(url)
    assert parts.hostname is not None
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_every_adapter_answers_health_checks_by_its_hub(runner: Runner) -> None:
    hub = Hub()
    served = Served(runner, hub)
    try:
        assert get(served.url, "/healthz") == (200, b"ok\n")
        assert get(served.url, "/readyz") == (200, b"ok\n")
        served.call(lambda: hub.suspend(REASON))
        assert get(served.url, "/healthz") == (200, b"ok\n")
        status, body = get(served.url, "/readyz")
        assert (status, body) == (503, f"503 Service Unavailable: {REASON}\n".encode())
        served.call(hub.resume)
        assert get(served.url, "/readyz") == (200, b"ok\n")
    finally:
        served.close()
