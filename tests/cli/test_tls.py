"""``serve --certfile/--keyfile`` and ``listen https://... --cafile``, as an operator runs them.

Certificates are made by trustme (``tls.py``). Each TLS failure is one
plain line on standard error, the same reason ``--events`` gives, and
``--once`` exits 1 as for any connection that could not be made; the
options that cannot work are usage errors (status 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import diverge_notifications.adapters.asyncio as asyncio_adapter
from diverge_notifications.cli import EXIT_BROKEN, EXIT_NO_CONNECTION, EXIT_OK, EXIT_USAGE, main
from diverge_notifications.sansio.drivers.listen import TLS_HINT
from tests.interop import ListenProcess, ServeProcess
from tests.tls import requires_trustme, tls_files, tls_serve

pytestmark = requires_trustme

NOTIFICATION = (
    b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}'
)


def test_serve_over_tls_and_listen_with_the_cafile(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    with tls_serve(files, "--stdin", "--token", "s3cret", stdin=True) as serve:
        assert serve.url.startswith("https://127.0.0.1:")
        url = serve.url.replace("127.0.0.1", "localhost")  # the name is verified too
        args = ("--once", "--events", "--cafile", str(files.ca), "--token", "s3cret")
        with ListenProcess(url, *args) as listen:
            listen.wait_for_event("StreamOpened")
            serve.send_line(NOTIFICATION)
            assert listen.stdout is not None
            listen.stdout.wait_for_count(1)
            assert serve.interrupt() == EXIT_OK
            assert listen.wait() == EXIT_OK
            assert listen.notification_lines() == [NOTIFICATION]
            assert [record["event"] for record in listen.events()] == [
                "StreamOpened",
                "NotificationReceived",
                "StreamEnded",
            ]


def test_the_key_may_be_in_the_certfile(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    both = tmp_path / "both.pem"
    both.write_bytes(files.key.read_bytes() + files.cert.read_bytes())
    with ServeProcess("--certfile", str(both)) as serve:
        assert serve.url.startswith("https://")
        with ListenProcess(serve.url, "--events", "--cafile", str(files.ca)) as listen:
            listen.wait_for_event("StreamOpened")
            assert listen.interrupt() == EXIT_OK
        assert serve.interrupt() == EXIT_OK


@pytest.mark.parametrize(
    ("made", "host", "reason"),
    [
        ({"trusted": False}, "127.0.0.1", "unable to get local issuer certificate"),
        ({"expired": True}, "127.0.0.1", "certificate has expired"),
        (
            {"names": ["127.0.0.1"]},
            "localhost",
            "Hostname mismatch, certificate is not valid for 'localhost'",
        ),
    ],
    ids=["untrusted CA", "expired", "wrong hostname"],
)
def test_a_certificate_that_does_not_verify_exits_1_with_its_reason(
    made: dict[str, Any], host: str, reason: str, tmp_path: Path
) -> None:
    files = tls_files(tmp_path, **made)
    with tls_serve(files) as serve:
        url = f"https://{host}:{serve.port}"
        with ListenProcess(url, "--once", "--cafile", str(files.ca)) as listen:
            assert listen.wait() == EXIT_NO_CONNECTION
            lines = listen.stderr.lines
        assert lines == [f"listen: could not connect: certificate verify failed: {reason}".encode()]
        with ListenProcess(url, "--once", "--events", "--cafile", str(files.ca)) as events:
            assert events.wait() == EXIT_NO_CONNECTION
            assert events.events() == [
                {"event": "ConnectionFailed", "reason": f"certificate verify failed: {reason}"}
            ]
        assert serve.interrupt() == EXIT_OK


def test_without_the_cafile_the_system_trust_refuses_a_test_certificate(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    with tls_serve(files) as serve:
        with ListenProcess(serve.url, "--once") as listen:
            assert listen.wait() == EXIT_NO_CONNECTION
            assert listen.stderr.lines == [
                b"listen: could not connect: certificate verify failed: "
                b"unable to get local issuer certificate"
            ]
        assert serve.interrupt() == EXIT_OK


def test_plain_http_to_tls_and_tls_to_plain_http(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    with tls_serve(files) as serve:
        with ListenProcess(serve.url.replace("https://", "http://"), "--once") as listen:
            assert listen.wait() == EXIT_BROKEN
            (line,) = listen.stderr.lines
        assert line.startswith(b"listen: the path broke: ")
        assert line.endswith(TLS_HINT.encode())
        assert serve.interrupt() == EXIT_OK
    with ServeProcess(stdin=False) as plain:
        url = plain.url.replace("http://", "https://")
        with ListenProcess(url, "--once", "--cafile", str(files.ca)) as listen:
            assert listen.wait() == EXIT_NO_CONNECTION
            assert listen.stderr.lines == [
                b"listen: could not connect: "
                b"TLS handshake failed: the peer does not speak TLS (wrong version)"
            ]
        assert plain.interrupt() == EXIT_OK


# --- usage errors -----------------------------------------------------------------------------


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    return err


def test_tls_options_that_cannot_work_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = tls_files(tmp_path)
    other = tls_files(tmp_path / "other")
    missing = str(tmp_path / "missing.pem")
    serve = ["serve", "--port", "0"]
    prefix = "python -m diverge_notifications"
    assert _usage_error([*serve, "--keyfile", str(files.key)], capsys) == (
        f"{prefix} serve: error: --keyfile needs --certfile\n"
    )
    assert _usage_error([*serve, "--certfile", missing], capsys) == (
        f"{prefix} serve: error: cannot load --certfile {missing}: No such file or directory\n"
    )
    assert _usage_error([*serve, "--certfile", str(files.cert)], capsys) == (
        f"{prefix} serve: error: cannot load --certfile {files.cert}: "
        "no usable PEM certificate chain and private key\n"
    )
    mismatched = [*serve, "--certfile", str(files.cert), "--keyfile", str(other.key)]
    assert _usage_error(mismatched, capsys) == (
        f"{prefix} serve: error: cannot load --certfile {files.cert} --keyfile {other.key}: "
        "key values mismatch\n"
    )
    listen = ["listen", "https://127.0.0.1:1", "--once"]
    assert _usage_error([*listen, "--cafile", missing], capsys) == (
        f"{prefix} listen: error: cannot load --cafile {missing}: No such file or directory\n"
    )
    assert _usage_error([*listen, "--cafile", str(files.key)], capsys) == (
        f"{prefix} listen: error: cannot load --cafile {files.key}: no certificate or crl found\n"
    )
    assert _usage_error(["listen", "http://127.0.0.1:1", "--cafile", str(files.ca)], capsys) == (
        f"{prefix} listen: error: --cafile is for https:// URLs: nothing is verified over http://\n"
    )


def test_a_token_in_cleartext_to_another_host_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _usage_error(["listen", "http://example.test:8080", "--token", "s3cret"], capsys)
    assert err == (
        "python -m diverge_notifications listen: error: refusing to send the token in "
        "cleartext over http:// to example.test, which is not a loopback address: "
        "use an https:// URL, or --allow-plaintext-token\n"
    )


def test_allow_plaintext_token_and_cafile_reach_the_listener(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = tls_files(tmp_path)
    seen: list[dict[str, Any]] = []

    async def recording(url: str, **options: Any) -> Any:
        seen.append(dict(options, url=url))
        return
        yield  # pragma: no cover - an async generator

    monkeypatch.setattr(asyncio_adapter, "listen", recording)
    argv = ["listen", "http://example.test:8080", "--token", "s3cret", "--allow-plaintext-token"]
    assert main(argv) == EXIT_OK
    assert seen[-1]["allow_plaintext_token"] is True and seen[-1]["ssl"] is None
    assert main(["listen", "https://example.test", "--cafile", str(files.ca)]) == EXIT_OK
    assert seen[-1]["allow_plaintext_token"] is False
    context = seen[-1]["ssl"]
    assert context.get_ca_certs()  # the CA of the file, beside the system's
