"""``listen`` and ``serve`` through nginx, a reverse proxy that re-chunks the body.

nginx (``proxy_buffering off``, ``proxy_http_version 1.1``, chunked
responses) sits between ``listen`` and ``serve`` on loopback ports. It reads
what ``serve`` writes in pieces of its own buffer size and sends each piece
as a chunk of its own, so frames reach ``listen`` split and packed
differently from how they were written: notifications larger than 8 KiB
cross chunk boundaries. Every notification must arrive intact and in order,
and the clean end must pass through.

The configuration is written into a temporary folder and nginx runs in the
foreground from there (``-p DIR -c nginx.conf -g 'daemon off; ...'``).
Skipped when nginx is not installed (Debian package ``nginx-light`` or
``nginx``).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import h11
import pytest

from diverge_notifications.sansio import encode_frame
from diverge_notifications.sansio.wire.framing import KEEPALIVE_FRAME
from tests.interop import (
    HANG_GUARD,
    NGINX_STREAMING,
    ListenProcess,
    ServeProcess,
    find_binary,
    free_port,
    listen_through,
    running_nginx,
)

NGINX = find_binary("nginx")
pytestmark = pytest.mark.skipif(
    NGINX is None, reason="nginx is not installed (apt-get install nginx-light)"
)

SERVER = """\
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
{streaming}
        }}
    }}"""


@pytest.fixture
def serve() -> Iterator[ServeProcess]:
    with ServeProcess("--stdin", "--keepalive", "0.5") as process:
        yield process


@pytest.fixture
def nginx_url(tmp_path: Path, serve: ServeProcess) -> Iterator[str]:
    port = free_port()
    server = SERVER.format(port=port, upstream=serve.port, streaming=NGINX_STREAMING)
    with running_nginx(tmp_path, server, port):
        yield f"http://127.0.0.1:{port}"


def _notifications(count: int) -> list[bytes]:
    """Notifications of varying sizes, some far larger than nginx's 4-8 KiB buffers."""
    sizes = [0, 10, 100, 1000, 5000, 8192, 9000, 20000, 70000, 200000]
    lines = []
    for index in range(count):
        size = sizes[index % len(sizes)]
        params = {"index": index, "pad": "é" * (size // 2) + "x" * (size % 2)}
        body = {"jsonrpc": "2.0", "method": "notifications/acme/blob", "params": params}
        lines.append(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
    return lines


def test_notifications_pass_nginx_intact_and_in_order(serve: ServeProcess, nginx_url: str) -> None:
    published = _notifications(60)
    assert max(len(line) for line in published) > 8 * 1024
    listen_through(nginx_url, serve, published)


def test_nginx_splits_a_large_frame_across_chunks(serve: ServeProcess, nginx_url: str) -> None:
    # Read the body through nginx with h11, which reports where chunks end,
    # to show that frames do not arrive in the chunks serve wrote.
    port = int(nginx_url.rsplit(":", 1)[1])
    client = h11.Connection(h11.CLIENT)
    big = _notifications(9)[-1]  # 70000 bytes of padding
    assert len(big) > 64 * 1024
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD) as sock:
        request = h11.Request(
            method="POST",
            target="/requests",
            headers=[
                ("Host", f"127.0.0.1:{port}"),
                ("Content-Type", "application/vnd.diverge.ask"),
                ("Content-Length", "1"),
            ],
        )
        sock.sendall(client.send(request) + client.send(h11.Data(data=b"\x04")))
        sock.sendall(client.send(h11.EndOfMessage()))
        response = _next_event(client, sock)
        assert isinstance(response, h11.Response) and response.status_code == 200
        serve.send_line(big)
        body = b""
        chunk_ends = 0
        expected = encode_frame(b"\x00" + big)
        while len(_without_keepalives(body)) < len(expected):
            event = _next_event(client, sock)
            assert isinstance(event, h11.Data), event
            body += event.data
            chunk_ends += bool(event.chunk_end)
    assert _without_keepalives(body)[: len(expected)] == expected
    assert chunk_ends > 1  # one frame, written at once, arrived in several chunks


def _without_keepalives(body: bytes) -> bytes:
    """``body`` without the keep-alive frames (four zero bytes) in front of it."""
    while body.startswith(KEEPALIVE_FRAME):
        body = body[len(KEEPALIVE_FRAME) :]
    return body


def _next_event(client: h11.Connection, sock: socket.socket) -> object:
    while True:
        event = client.next_event()
        if event is not h11.NEED_DATA:
            return event
        client.receive_data(sock.recv(65536))


def test_a_refusal_passes_nginx(serve: ServeProcess, nginx_url: str) -> None:
    with ListenProcess(f"{nginx_url}/elsewhere", "--once", "--events") as listen:
        assert listen.wait() == 5  # refused
        events = listen.events()
    assert [record["event"] for record in events] == ["NotServed"]
    assert events[0]["status"] == 404
