"""A failed TLS handshake is counted and logged with the peer's address (trio, blocking).

Plain HTTP sent to a TLS port fails the handshake: the server logs
``TLS handshake with <peer> failed: <why>`` (logger
``diverge_notifications.server``) and counts it in ``stats().tls_failures``.
The asyncio adapter leaves the handshake to ``asyncio.start_server``, which
tells nobody of a failure (see docs/decisions.md).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.sansio import Hub
from tests.adapters.test_tls import _closed_by_the_server, served
from tests.redis_server import wait_for
from tests.tls import requires_trustme, tls_files

pytestmark = requires_trustme

PLAIN_HTTP = b"POST /requests HTTP/1.1\r\nHost: x\r\n\r\n"
LOGGED = re.compile(
    r"^TLS handshake with 127\.0\.0\.1:\d+ failed: "
    r"TLS handshake failed: a plain HTTP request on a TLS port$"
)


@pytest.mark.parametrize("server", ["trio", "blocking"])
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
