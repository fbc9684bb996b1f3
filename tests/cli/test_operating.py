"""What an operator of ``serve`` sees: metrics, health checks, the log, the warnings.

Real ``python -m diverge_notifications`` processes: ``serve --metrics``
scraped with :mod:`http.client` and read with ``prometheus_client``'s own
parser; ``/healthz`` and ``/readyz`` asked without the token; ``/readyz``
answering ``503`` while a real ``redis-server`` is gone; the log's lines
read as text and as JSON. Waits have generous deadlines only.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from diverge_notifications.cli import EXIT_OK, EXIT_USAGE
from tests.interop import (
    HANG_GUARD,
    LOG_PREFIX,
    ROOT,
    CliProcess,
    ListenProcess,
    ServeProcess,
    cli_env,
    free_port,
    log_message,
)
from tests.redis_server import RedisServer, redis_server, wait_for

__all__ = ["redis_server"]  # the fixture, imported to be found

TOKEN = "operator-test-token-0123456789"
PROGRESS = '{{"method":"notifications/progress","params":{{"progressToken":"t","progress":{}}}}}'


def request(base: str, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    """``method path`` to the server at ``base`` (no token): the status and the body."""
    parts = urlsplit(base)
    assert parts.hostname is not None
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=HANG_GUARD)
    try:
        connection.request(method, path, body=body)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def metrics_url(serve: ServeProcess) -> str:
    line = serve.stderr.wait_for_text("metrics on ")
    return line.decode().split("metrics on ", 1)[1].strip()


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The samples of ``GET /metrics``, parsed by prometheus_client, by name and labels."""
    parser = pytest.importorskip("prometheus_client.parser")
    status, body = request(url, "GET", "/metrics")
    assert status == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in parser.text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


@pytest.fixture
def served() -> Iterator[ServeProcess]:
    """``serve --stdin --metrics 127.0.0.1:0`` with a token, and a listener with 5 notifications."""
    pytest.importorskip("prometheus_client", reason="the 'metrics' extra is not installed")
    env = cli_env(DIVERGE_TOKEN=TOKEN)
    with ServeProcess("--stdin", "--metrics", "127.0.0.1:0", env=env) as serve:
        yield serve


def test_metrics_health_and_the_log_of_a_served_listener_and_a_refused_ask(
    served: ServeProcess,
) -> None:
    scraped = metrics_url(served)
    with ListenProcess(
        served.url, "--events", "--once", env=cli_env(DIVERGE_TOKEN=TOKEN)
    ) as listen:
        listen.wait_for_event("StreamOpened")
        for index in range(5):
            served.send_line(PROGRESS.format(index))
        assert listen.stdout is not None
        listen.stdout.wait_for_count(5)
        # Without the token: refused, but the health checks answer.
        assert request(served.url, "POST", "/requests", b"\x04")[0] == 401
        assert request(served.url, "GET", "/healthz") == (200, b"ok\n")
        assert request(served.url, "GET", "/readyz") == (200, b"ok\n")
        samples = scrape(scraped)
        assert samples[("diverge_notifications_paths_open", ())] == 1
        assert samples[("diverge_notifications_connections_open", ())] == 1
        assert samples[("diverge_notifications_sent_total", ())] >= 5
        assert samples[("diverge_notifications_published_total", ())] == 5
        assert samples[("diverge_notifications_dropped_total", ())] == 0
        assert samples[("diverge_notifications_refusals_total", (("status", "401"),))] == 1
        assert served.interrupt() == EXIT_OK
        assert listen.wait() == EXIT_OK
    # The refusal's line: the time, then who asked and why.
    refused = served.stderr.wait_for_text("refused: 401")
    assert LOG_PREFIX.match(refused), refused
    assert re.search(rb" INFO server: ask from 127\.0\.0\.1:\d+ refused: 401 \(", refused)
    assert all(LOG_PREFIX.match(line) for line in served.stderr.lines), served.stderr.text()
    assert log_message(served.stderr.lines[-1]).startswith(b"served 1 asks")


def test_with_log_format_json_every_line_of_a_run_is_a_json_object() -> None:
    with ServeProcess("--stdin", "--log-format", "json", "--host", "0.0.0.0") as serve:
        local = f"http://127.0.0.1:{serve.port}"
        with ListenProcess(local, "--once", "--events") as listen:
            listen.wait_for_event("StreamOpened")
            serve.send_line("not json")
            serve.send_line(PROGRESS.format(1))
            assert listen.stdout is not None
            listen.stdout.wait_for_count(1)
            assert request(local, "GET", "/nowhere")[0] == 404
            assert serve.interrupt() == EXIT_OK
            assert listen.wait() == EXIT_OK
    records = [json.loads(line) for line in serve.stderr.lines]
    assert all({"time", "level", "logger", "message"} <= set(record) for record in records)
    messages = [(record["level"], record["logger"], record["message"]) for record in records]
    levels = {level for level, _logger, _message in messages}
    assert {"WARNING", "INFO"} <= levels, messages
    assert any(logger == "diverge_notifications.server" for _level, logger, _ in messages)
    assert any(message.startswith("line 1: ") for _level, _logger, message in messages)


def test_serving_on_every_address_without_a_token_or_tls_is_warned_of() -> None:
    port = free_port()
    with CliProcess("serve", "--host", "0.0.0.0", "--port", str(port), "-q") as serve:
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: _answers(base), "serve to answer /healthz")
        assert serve.interrupt() == EXIT_OK
    warnings = [log_message(line) for line in serve.stderr.lines if b" WARNING " in line]
    assert len(warnings) == 2, serve.stderr.text()
    assert b"without a token" in warnings[0] and b"DIVERGE_TOKEN" in warnings[0]
    assert b"without TLS" in warnings[1]
    # -q: nothing but warnings and errors (serving on ... is information).
    assert all(b" INFO " not in line for line in serve.stderr.lines)


def _answers(base: str) -> bool:
    try:
        return request(base, "GET", "/healthz")[0] == 200
    except OSError:
        return False


def test_serving_on_loopback_warns_of_nothing() -> None:
    with ServeProcess() as serve:
        assert serve.interrupt() == EXIT_OK
    assert not [line for line in serve.stderr.lines if b" WARNING " in line]


def test_metrics_without_prometheus_client_is_one_line_naming_the_extra() -> None:
    script = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "from diverge_notifications.cli import main\n"
        "sys.exit(main(['serve', '--metrics', ':0']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=HANG_GUARD,
        check=False,
    )
    assert result.returncode == EXIT_USAGE
    assert result.stderr == (
        b"serve --metrics needs the 'metrics' extra: pip install 'diverge-notifications[metrics]'\n"
    )


def test_readyz_answers_503_while_redis_is_down(redis_server: RedisServer) -> None:
    with ServeProcess("--redis", redis_server.url) as serve:
        wait_for(lambda: request(serve.url, "GET", "/readyz")[0] == 200, "readyz 200")
        redis_server.kill()
        wait_for(lambda: request(serve.url, "GET", "/readyz")[0] == 503, "readyz 503")
        status, body = request(serve.url, "GET", "/readyz")
        assert status == 503 and redis_server.url.encode() in body, body
        assert request(serve.url, "GET", "/healthz") == (200, b"ok\n")
        assert serve.interrupt() == EXIT_OK
