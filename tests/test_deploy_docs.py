"""docs/deploy.md is what runs: its nginx configuration in a real nginx, its systemd unit verified.

The ```nginx block of docs/deploy.md is taken as written, with only the
test's ports and certificate files put in place of the example's, and run
by nginx in front of ``serve --token``: ``listen https://...`` through it
gets every notification intact, in order, with keep-alive frames every half
second and the clean end; a listener without the token gets ``401`` through
nginx. The ```ini block (the systemd unit) must pass ``systemd-analyze
verify`` without a word, with this interpreter as its ``ExecStart``.
Skipped when nginx, trustme (the certificates) or systemd-analyze are
missing.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.interop import (
    HANG_GUARD,
    ROOT,
    ListenProcess,
    ServeProcess,
    find_binary,
    free_port,
    listen_through,
    running_nginx,
)
from tests.tls import tls_files

DEPLOY = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
TOKEN = "deploy-docs-token"


def fenced(language: str) -> str:
    """The one fenced block of ``language`` in docs/deploy.md."""
    blocks: list[str] = re.findall(
        rf"^```{language}\n(.*?)^```", DEPLOY, flags=re.MULTILINE | re.DOTALL
    )
    (block,) = blocks
    return block


def replaced(text: str, replacements: dict[str, str]) -> str:
    """``text`` with each key replaced by its value; every key must be there."""
    for old, new in replacements.items():
        assert old in text, f"docs/deploy.md no longer has {old!r}"
        text = text.replace(old, new)
    return text


def test_the_nginx_configuration_has_what_paths_need() -> None:
    config = fenced("nginx")
    for directive in (
        "proxy_http_version 1.1;",
        "proxy_buffering off;",
        "proxy_request_buffering off;",
        "proxy_read_timeout 120s;",
        "proxy_send_timeout 120s;",
    ):
        assert directive in config


def test_listen_through_the_documented_nginx(tmp_path: Path) -> None:
    if find_binary("nginx") is None:
        pytest.skip("nginx is not installed (apt-get install nginx-light)")
    files = tls_files(tmp_path / "certificates")
    published = [
        json.dumps({"method": "notifications/acme/n", "params": {"i": i, "pad": "x" * 9000 * i}})
        .replace(" ", "")
        .encode()
        for i in range(6)
    ]
    port = free_port()
    with ServeProcess("--stdin", "--keepalive", "0.5", "--token", TOKEN) as serve:
        config = replaced(
            fenced("nginx"),
            {
                "listen 443 ssl;": f"listen 127.0.0.1:{port} ssl;",
                "server 127.0.0.1:8080;": f"server 127.0.0.1:{serve.port};",
                "/etc/ssl/notify.example.org/fullchain.pem": str(files.cert),
                "/etc/ssl/notify.example.org/privkey.pem": str(files.key),
            },
        )
        with running_nginx(tmp_path, config, port):
            url = f"https://localhost:{port}"
            cafile = ("--cafile", str(files.ca))
            with ListenProcess(url, "--once", "--events", *cafile) as refused:
                assert refused.wait_for_event("NotServed")["status"] == 401
            listen_through(url, serve, published, *cafile, "--token", TOKEN)


def test_the_systemd_unit_verifies(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    unit = tmp_path / "diverge-notifications.service"
    script = "/opt/diverge-notifications/.venv/bin/diverge-notifications"
    unit.write_text(replaced(fenced("ini"), {script: sys.executable}), encoding="utf-8")
    result = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, timeout=HANG_GUARD
    )
    assert result.returncode == 0, result.stderr
    assert str(unit) not in result.stdout + result.stderr  # no warning about the unit
