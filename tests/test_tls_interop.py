"""TLS with independent peers: curl as a client of ``serve``, nginx on either side of TLS.

- curl (``--cacert``) asks ``serve --certfile/--keyfile`` for a path over TLS
  and must get exactly the frames published, over HTTP/1.1 (the one ALPN
  protocol offered); without the CA it refuses the certificate, and over
  plain ``http://`` it gets nothing, at once.
- nginx terminates TLS in front of a plain ``serve``: ``listen https://``
  with ``--cafile`` talks TLS to nginx, which passes the path on, re-chunked.
- nginx is a TLS client of ``serve --certfile``: it verifies the
  certificate against the CA (``proxy_ssl_verify on``) and passes the path
  to a plain ``listen``.

Certificates are made by trustme (``tls.py``). Skipped when curl, nginx or
trustme is missing.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from diverge_notifications.sansio import Notification, encode_frame, encode_message
from tests.interop import (
    HANG_GUARD,
    NGINX_STREAMING,
    ListenProcess,
    ServeProcess,
    find_binary,
    free_port,
    kill_if_running,
    listen_through,
    running_nginx,
)
from tests.tls import requires_trustme, tls_files, tls_serve

CURL = find_binary("curl")
NGINX = find_binary("nginx")
pytestmark = requires_trustme
needs_curl = pytest.mark.skipif(CURL is None, reason="curl is not installed (apt-get install curl)")
needs_nginx = pytest.mark.skipif(
    NGINX is None, reason="nginx is not installed (apt-get install nginx-light)"
)


def _published(count: int) -> list[bytes]:
    """Notifications of varying sizes, some far larger than a TLS record (16 KiB)."""
    sizes = [0, 100, 5000, 17000, 70000]
    lines = []
    for index in range(count):
        params = {"index": index, "pad": "é" * (sizes[index % len(sizes)] // 2)}
        body = {"jsonrpc": "2.0", "method": "notifications/acme/blob", "params": params}
        lines.append(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode())
    return lines


def _frames(lines: list[bytes]) -> bytes:
    return b"".join(encode_frame(encode_message(Notification.from_bytes(line))) for line in lines)


# --- curl ----------------------------------------------------------------------------------


def _curl(*args: str) -> list[str]:
    assert CURL is not None
    return [CURL, "-sS", "--no-buffer", *args]


def _ask_args(tmp_path: Path) -> list[str]:
    ask = tmp_path / "ask"
    ask.write_bytes(b"\x04")
    content_type = "Content-Type: application/vnd.diverge.ask"
    return ["-X", "POST", "-H", content_type, "--data-binary", f"@{ask}"]


@needs_curl
def test_curl_over_tls_receives_exactly_the_frames(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    published = _published(10)
    head, body = tmp_path / "head", tmp_path / "body"
    with tls_serve(files, "--stdin", "--keepalive", "120", stdin=True) as serve:
        url = f"https://localhost:{serve.port}/requests"
        curl = subprocess.Popen(
            _curl(
                "--cacert",
                str(files.ca),
                *_ask_args(tmp_path),
                "-D",
                str(head),
                "-o",
                str(body),
                "-w",
                "%{http_version} %{ssl_verify_result}",
                url,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + HANG_GUARD
            while not (head.exists() and b"\r\n\r\n" in head.read_bytes()):
                assert curl.poll() is None, curl.communicate()[1]
                assert time.monotonic() < deadline, "curl got no head"
                time.sleep(0.02)
            for line in published:
                serve.send_line(line)
            expected = _frames(published)
            while not (body.exists() and body.stat().st_size >= len(expected)):
                assert time.monotonic() < deadline, "curl got no body"
                time.sleep(0.02)
            assert serve.interrupt() == 0  # the clean end of the path, inside TLS
            out, err = curl.communicate(timeout=HANG_GUARD)
        finally:
            kill_if_running(curl)
    assert curl.returncode == 0, err
    assert out == b"1.1 0"  # HTTP/1.1, and the certificate verified
    assert head.read_bytes().startswith(b"HTTP/1.1 200 OK\r\n")
    assert body.read_bytes() == expected


@needs_curl
def test_curl_refuses_the_certificate_without_the_ca_and_gets_nothing_over_http(
    tmp_path: Path,
) -> None:
    files = tls_files(tmp_path)
    with tls_serve(files) as serve:
        untrusted = subprocess.run(
            _curl(*_ask_args(tmp_path), "-o", "/dev/null", f"{serve.url}/requests"),
            capture_output=True,
            timeout=HANG_GUARD,
            check=False,
        )
        plain = subprocess.run(
            _curl(
                *_ask_args(tmp_path), "-o", "/dev/null", f"http://127.0.0.1:{serve.port}/requests"
            ),
            capture_output=True,
            timeout=HANG_GUARD,
            check=False,
        )
        assert serve.interrupt() == 0
    assert untrusted.returncode == 60, untrusted.stderr  # curl: peer certificate not verified
    assert b"certificate" in untrusted.stderr
    # 52: empty reply, 56: a reset while receiving; never a hang.
    assert plain.returncode in (52, 56), plain.stderr


# --- nginx -----------------------------------------------------------------------------------

#: nginx serving TLS with a trustme certificate, passing paths to a plain upstream.
TLS_IN_FRONT = """\
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
{streaming}
        }}
    }}"""

#: nginx serving plain HTTP, passing paths to an upstream that speaks TLS, verified.
TLS_UPSTREAM = """\
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass https://127.0.0.1:{upstream};
            proxy_ssl_verify on;
            proxy_ssl_trusted_certificate {ca};
            proxy_ssl_name localhost;
            proxy_ssl_server_name on;
{streaming}
        }}
    }}"""


@contextlib.contextmanager
def _nginx(folder: Path, block: str, **values: object) -> Iterator[int]:
    """nginx running the server ``block`` (filled with ``values``) on a free port."""
    port = free_port()
    with running_nginx(folder, block.format(port=port, streaming=NGINX_STREAMING, **values), port):
        yield port


@needs_nginx
def test_listen_over_tls_to_nginx_in_front_of_a_plain_serve(tmp_path: Path) -> None:
    files = tls_files(tmp_path / "certificates")
    published = _published(20)
    with ServeProcess("--stdin", "--keepalive", "0.5") as serve:
        block = TLS_IN_FRONT
        values = {"upstream": serve.port, "cert": files.cert, "key": files.key}
        with _nginx(tmp_path, block, **values) as port:
            url = f"https://localhost:{port}"
            listen_through(url, serve, published, "--cafile", str(files.ca))


@needs_nginx
def test_nginx_verifies_a_tls_serve_and_passes_the_path_on(tmp_path: Path) -> None:
    files = tls_files(tmp_path / "certificates")
    published = _published(20)
    serve = tls_serve(files, "--stdin", "--keepalive", "0.5", stdin=True)
    with serve, _nginx(tmp_path, TLS_UPSTREAM, upstream=serve.port, ca=files.ca) as port:
        listen_through(f"http://127.0.0.1:{port}", serve, published)


@needs_nginx
def test_nginx_refuses_a_serve_whose_certificate_it_cannot_verify(tmp_path: Path) -> None:
    files = tls_files(tmp_path / "certificates", trusted=False)
    serve = tls_serve(files)
    with serve, _nginx(tmp_path, TLS_UPSTREAM, upstream=serve.port, ca=files.ca) as port:
        with ListenProcess(f"http://127.0.0.1:{port}", "--once", "--events") as listen:
            assert listen.wait() == 5  # refused
            events = listen.events()
        assert serve.interrupt() == 0
    assert [record["event"] for record in events] == ["NotServed"]
    assert events[0]["status"] == 502  # nginx: bad gateway
    log = (tmp_path / "error.log").read_text("utf-8", "replace")
    assert "upstream SSL certificate verify error" in log
