"""A failed TLS handshake is counted and logged with the peer's address (every server).

Plain HTTP sent to a TLS port fails the handshake: the server logs
``TLS handshake with <peer> failed: <why>`` (logger
``diverge_notifications.server``) and counts it in ``stats().tls_failures``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from pathlib import Path

import pytest

from diverge_notifications.adapters import asyncio as asyncio_adapter
from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.sansio import Hub
from tests.adapters.test_tls import _closed_by_the_server, served
from tests.interop import HANG_GUARD
from tests.redis_server import wait_for
from tests.tls import requires_trustme, tls_files

pytestmark = requires_trustme

PLAIN_HTTP = b"POST /requests HTTP/1.1\r\nHost: x\r\n\r\n"
LOGGED = re.compile(
    r"^TLS handshake with 127\.0\.0\.1:\d+ failed: "
    r"TLS handshake failed: a plain HTTP request on a TLS port$"
)


@pytest.mark.parametrize("server", ["asyncio", "trio", "blocking"])
def test_a_failed_handshake_is_logged_with_the_peer(
    server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="diverge_notifications.server")
    with served(server, ssl=tls_files(tmp_path).server_context()) as (url, _):
        assert _closed_by_the_server(int(url.rsplit(":", 1)[1]), PLAIN_HTTP)

        def logged() -> list[str]:
            return [r.getMessage() for r in caplog.records if LOGGED.match(r.getMessage())]

        wait_for(lambda: len(logged()) == 1, "the failed handshake's log line")


def test_a_failed_handshake_is_counted(tmp_path: Path) -> None:
    context = tls_files(tmp_path).server_context()
    with blocking_adapter.serve(Hub(), ssl=context) as server:
        assert _closed_by_the_server(server.port, PLAIN_HTTP)
        wait_for(lambda: server.stats().tls_failures == 1, "the failure counted")
        stats = server.stats()
        assert (stats.connections, dict(stats.refusals)) == (0, {})


def test_asyncio_counts_a_failed_and_a_silent_handshake_at_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Concurrently: the silent peer's handshake, waiting for ask_timeout,
    # holds up neither the other failure nor a TLS client served meanwhile.
    caplog.set_level(logging.INFO, logger="diverge_notifications.server")
    files = tls_files(tmp_path)

    async def main() -> tuple[int, int, bytes]:
        context = files.server_context()
        async with asyncio_adapter.serve(Hub(), ssl=context, ask_timeout=0.5) as server:

            async def closed(send: bytes) -> None:
                reader, writer = await asyncio.open_connection(server.host, server.port)
                writer.write(send)
                with contextlib.suppress(ConnectionResetError):
                    while await reader.read(65536):
                        pass
                writer.close()

            async def answered() -> bytes:
                reader, writer = await asyncio.open_connection(
                    server.host,
                    server.port,
                    ssl=files.client_context(),
                    server_hostname="localhost",
                )
                writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
                line = await reader.readline()
                writer.close()
                return line

            waiting = asyncio.gather(closed(PLAIN_HTTP), closed(b""), answered())
            _, _, answer = await asyncio_adapter.within(waiting, HANG_GUARD)
            stats = server.stats()
            return stats.tls_failures, stats.connections, answer

    tls_failures, connections, answer = asyncio.run(main())
    assert (tls_failures, connections, answer) == (2, 0, b"HTTP/1.1 200 OK\r\n")
    reasons = sorted(
        r.getMessage().partition(" failed: ")[2]
        for r in caplog.records
        if r.getMessage().startswith("TLS handshake with 127.0.0.1:")
    )
    assert reasons == [
        "TLS handshake failed: a plain HTTP request on a TLS port",
        "TLS handshake failed: not complete within ask_timeout",
    ]
