"""The ASGI application inside a real host application, on real ASGI servers.

``tests/asgi_host.py`` (Starlette, the hub's application mounted at
``/diverge``) runs under uvicorn or hypercorn in a subprocess; the
project's ``listen``, curl, the blocking proxy and raw sockets are its
peers, and the native ``serve`` is the reference for the bytes. Skipped
when uvicorn, hypercorn or starlette are not installed (the dev extra).
"""

from __future__ import annotations

import importlib.util
import json
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.sansio import list_tools_ask
from diverge_notifications.sansio.wire.asks import encode_ask
from tests.interop import (
    HANG_GUARD,
    ROOT,
    LineReader,
    ListenProcess,
    ServeProcess,
    cli_env,
    find_binary,
    free_port,
    kill_if_running,
    wait_for_port,
    wait_until,
)

SERVERS = ("uvicorn", "hypercorn")
MISSING = [name for name in (*SERVERS, "starlette") if importlib.util.find_spec(name) is None]
pytestmark = pytest.mark.skipif(
    bool(MISSING), reason=f"not installed: {', '.join(MISSING)} (the dev extra)"
)
CURL = find_binary("curl")

TOKEN = "s3cret"
ASK = b"\x04"
ASK_HEADERS = {"Content-Type": "application/vnd.diverge.ask"}


def progress(index: int, size: int = 0) -> bytes:
    """One notification as a JSON line, ``size`` bytes of padding in it."""
    params = {"progressToken": "asgi", "progress": index, "pad": "x" * size}
    return json.dumps(
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": params},
        separators=(",", ":"),
    ).encode()


class AsgiServer:
    """``tests.asgi_host:app`` served by ``server`` (uvicorn or hypercorn) on a free port.

    ``uvicorn-aclose`` is uvicorn run by ``tests/asgi_host.py`` itself, ending
    the paths before uvicorn's own shutdown, as docs/asgi.md recommends.
    """

    def __init__(self, server: str, **env: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/diverge"
        command = [sys.executable, "-m", server, "tests.asgi_host:app"]
        if server == "uvicorn-aclose":
            command, args = [sys.executable, "-m", "tests.asgi_host", str(self.port)], []
        elif server == "uvicorn":
            args = ["--port", str(self.port), "--timeout-graceful-shutdown", "1"]
            args += ["--no-access-log"]
        else:
            # One process (no worker processes), so that the test ends what it started.
            args = ["--bind", f"127.0.0.1:{self.port}", "--graceful-timeout", "1", "-w", "0"]
        self.proc = subprocess.Popen(
            [*command, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=cli_env(**{f"DIVERGE_ASGI_{name.upper()}": value for name, value in env.items()}),
            cwd=ROOT,
        )
        assert self.proc.stderr is not None
        self.stderr = LineReader(self.proc.stderr, server)
        try:
            wait_for_port("127.0.0.1", self.port)
        except AssertionError:
            kill_if_running(self.proc)
            raise AssertionError(f"{server} did not start:\n{self.stderr.text()}") from None

    def http(
        self,
        method: str,
        path: str,
        body: bytes | Iterable[bytes] | None = None,
        headers: Mapping[str, str] = {},
    ) -> tuple[int, Mapping[str, str], bytes]:
        """One request to the host application: the status, the headers and the body.

        A body given as an iterable of pieces goes in chunks, without ``Content-Length``.
        """
        request = urllib.request.Request(
            self.base + path, data=body, method=method, headers=dict(headers)
        )
        try:
            with urllib.request.urlopen(request, timeout=HANG_GUARD) as response:
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def stats(self) -> dict[str, Any]:
        status, _, body = self.http("GET", "/stats")
        assert status == 200
        counts: dict[str, Any] = json.loads(body)
        return counts

    def publish(self, lines: list[bytes]) -> None:
        status, _, body = self.http("POST", "/publish", b"\n".join(lines))
        assert (status, body) == (200, str(len(lines)).encode())

    def __enter__(self) -> AsgiServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        kill_if_running(self.proc)
        self.stderr.join()


@pytest.mark.parametrize("server", SERVERS)
def test_listen_gets_every_notification_through_a_mounted_app(server: str) -> None:
    lines = [progress(index) for index in range(2000)]
    with (
        AsgiServer(server, token=TOKEN) as asgi,
        ListenProcess(asgi.url, "--token", TOKEN, "--events", "--once") as listen,
    ):
        listen.wait_for_event("StreamOpened")
        asgi.publish(lines)
        assert listen.stdout is not None
        listen.stdout.wait_for_count(len(lines))
        # The host application's own routes, a wrong token and an exchange, beside the path.
        assert asgi.http("GET", "/")[::2] == (200, b"host")
        wrong = {**ASK_HEADERS, "Authorization": "Bearer wrong"}
        status, headers, body = asgi.http("POST", "/diverge/requests", ASK, wrong)
        assert status == 401 and headers["www-authenticate"] == "Bearer"
        assert body == b"401 Unauthorized: a valid bearer token is required\n"
        proxy = blocking_adapter.Proxy(asgi.url, token=TOKEN)
        assert proxy.list_tools() == {"tools": [], "asked": "list_tools"}
        # Closing ends the path cleanly: listen --once sees StreamEnded and exits 0.
        assert asgi.http("POST", "/close")[::2] == (200, b"closed")
        assert listen.wait() == 0, listen.stderr.text()
        assert listen.notification_lines() == lines  # in order, byte for byte
        assert listen.events()[-1]["event"] == "StreamEnded"
        stats = asgi.stats()
    assert stats["notifications_sent"] == len(lines)
    assert stats["notifications_dropped"] == 0
    assert stats["refusals"] == {"401": 1}
    assert stats["exchanges_answered"] == 1
    assert stats["open_paths"] == 0


def _curl_path(url: str, body: Path) -> subprocess.Popen[bytes]:
    assert CURL is not None
    ask = body.with_suffix(".ask")
    ask.write_bytes(ASK)
    head = body.with_suffix(".head")
    command = [CURL, "-sS", "--no-buffer", "-D", str(head), "-X", "POST"]
    command += ["-H", "Content-Type: application/vnd.diverge.ask", "--data-binary", f"@{ask}"]
    process = subprocess.Popen(
        [*command, "-o", str(body), f"{url}/requests"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    wait_until(lambda: head.exists() and b"\r\n\r\n" in head.read_bytes(), "the head")
    return process


@pytest.mark.skipif(CURL is None, reason="curl is not installed (apt-get install curl)")
@pytest.mark.parametrize("server", [*SERVERS, "uvicorn-aclose"])
def test_curl_gets_the_bytes_the_native_server_writes(server: str, tmp_path: Path) -> None:
    lines = [progress(0), progress(1, 5000), b'{"method":"vendor/x","params":{"a":[1,2]},"y":1}']
    with (
        ServeProcess("--stdin", "--keepalive", "120") as native,
        AsgiServer(server) as asgi,
    ):
        native_curl = _curl_path(native.url, tmp_path / "native")
        asgi_curl = _curl_path(asgi.url, tmp_path / "asgi")
        try:
            for line in lines:
                native.send_line(line)
            asgi.publish(lines)
            wait_until(lambda: asgi.stats()["notifications_sent"] == len(lines), "the sends")
            # serve --stdin reads its lines on its own time: interrupted before it has
            # sent them, it would end the path with none of them (curl makes the file
            # with the first byte of the body).
            native_file = tmp_path / "native"
            wait_until(
                lambda: native_file.exists() and lines[-1] in native_file.read_bytes(),
                "the native sends",
            )
            assert native.interrupt() == 0
            if server == "uvicorn":
                # SIGTERM: uvicorn waits for the answer, then cancels it; the path ends
                # cleanly (curl keeps up, so the end leaves before uvicorn exits).
                asgi.proc.send_signal(signal.SIGTERM)
                # uvicorn raises the signal again once it has shut down.
                assert asgi.proc.wait(HANG_GUARD) in (0, -signal.SIGTERM)
            elif server == "uvicorn-aclose":
                # SIGTERM: the paths end first, then uvicorn waits for them to drain.
                asgi.proc.send_signal(signal.SIGTERM)
                assert asgi.proc.wait(HANG_GUARD) in (0, -signal.SIGTERM)
                asgi.stderr.join()
                assert "graceful shutdown exceeded" not in asgi.stderr.text()  # nothing cancelled
            else:
                assert asgi.http("POST", "/close")[0] == 200
            _, native_err = native_curl.communicate(timeout=HANG_GUARD)
            _, asgi_err = asgi_curl.communicate(timeout=HANG_GUARD)
        finally:
            kill_if_running(native_curl)
            kill_if_running(asgi_curl)
    # Exit 0: both chunked bodies ended with their last chunk.
    assert (native_curl.returncode, asgi_curl.returncode) == (0, 0), (native_err, asgi_err)
    native_body = (tmp_path / "native").read_bytes()
    assert len(native_body) > 5000
    assert (tmp_path / "asgi").read_bytes() == native_body
    head = (tmp_path / "asgi.head").read_bytes().lower()
    assert b"content-type: application/vnd.diverge.messages\r\n" in head
    assert b"content-location: /mcp/notifications/c1\r\n" in head


@pytest.mark.parametrize("server", SERVERS)
def test_a_stalled_listener_is_cut_off_and_its_neighbour_loses_nothing(server: str) -> None:
    # 400 notifications of 20 kB: far more than a socket that is not read holds.
    lines = [progress(index, 20_000) for index in range(400)]
    with (
        AsgiServer(server, stall="2") as asgi,
        ListenProcess(asgi.url, "--events") as listen,
        socket.socket() as stalled,
    ):
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        stalled.connect(("127.0.0.1", asgi.port))
        stalled.sendall(
            b"POST /diverge/requests HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n" + ASK
        )
        listen.wait_for_event("StreamOpened")
        wait_until(lambda: asgi.stats()["open_paths"] == 2, "both paths opening")
        # The publisher waits for room: the stalled path holds it up until it is cut off.
        asgi.publish(lines)
        wait_until(lambda: asgi.stats()["paths_stalled"] == 1, "the cut-off")
        assert listen.stdout is not None
        listen.stdout.wait_for_count(len(lines))
        assert listen.notification_lines() == lines
        asgi.stderr.wait_for_text("stalled: no byte taken for 2 s")
        stats = asgi.stats()
    assert stats["open_paths"] == 1
    assert stats["notifications_dropped"] > 0  # what the stalled path had queued, freed


def test_refusals_are_the_native_servers() -> None:
    with AsgiServer("hypercorn", token=TOKEN) as asgi:
        authorized = {**ASK_HEADERS, "Authorization": f"Bearer {TOKEN}"}
        status, headers, _ = asgi.http("GET", "/diverge/requests")
        assert (status, headers["allow"]) == (405, "POST")
        assert asgi.http("POST", "/diverge/elsewhere", ASK, authorized)[0] == 404
        status, _, body = asgi.http("POST", "/diverge/requests", b"\x04" * 70_000, authorized)
        assert (status, body) == (
            413,
            b"413 Content Too Large: the ask is larger than the limit of 65536 bytes\n",
        )
        # Without Content-Length the body reaches the driver in chunks, and is judged as it comes.
        chunked = asgi.http("POST", "/diverge/requests", iter([ASK * 70_000]), authorized)
        assert chunked[0] == 413
        ask = encode_ask(list_tools_ask())
        status, _, body = asgi.http(
            "POST", "/diverge/requests", iter([ask[:1], ask[1:]]), authorized
        )
        assert status == 200 and b'"asked":"list_tools"' in body
        assert asgi.http("POST", "/suspend")[0] == 200
        status, headers, body = asgi.http("POST", "/diverge/requests", ASK, authorized)
        assert (status, headers["retry-after"]) == (503, "1")
        assert body == b"503 Service Unavailable: the broker is lost\n"
        stats = asgi.stats()
    assert stats["refusals"] == {"404": 1, "405": 1, "413": 2, "503": 1}
    assert stats["asks_suspended"] == 1
    assert stats["exchanges_answered"] == 1
