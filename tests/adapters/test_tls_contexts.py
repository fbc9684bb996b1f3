"""The adapters' TLS contexts and their one-line reasons, over real loopback handshakes.

Each case runs a real TLS handshake between two sockets of a loopback
connection, a server thread and a client, with certificates made by trustme
(``tls.py``): what each side reports is :func:`describe_tls_error` of what
the ``ssl`` module raised. The adapters' own listeners and servers are
tested end to end in ``tests/adapters/test_tls.py``.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from diverge_notifications.adapters.tls import (
    ALPN_PROTOCOLS,
    client_context,
    describe_load_error,
    describe_tls_error,
    server_context,
)
from tests.interop import HANG_GUARD
from tests.tls import requires_trustme, tls_files, untrusted_ca

pytestmark = requires_trustme

#: What one side of a handshake ended with: the ALPN protocol agreed, or the reason it failed.
Outcome = str


def _outcome(handshake: Callable[[], ssl.SSLSocket]) -> Outcome:
    try:
        with handshake() as secured:
            return f"ok {secured.selected_alpn_protocol()}"
    except ssl.SSLError as error:
        return describe_tls_error(error)
    except OSError as error:
        return f"{type(error).__name__}"


def _handshake(
    server: ssl.SSLContext | None,
    client: ssl.SSLContext | None,
    *,
    hostname: str = "localhost",
    plain_answer: bytes = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
) -> tuple[Outcome, Outcome]:
    """Connect a client to a server over loopback; each side ``None`` speaks plain HTTP.

    Returns what the server and the client each ended with.
    """
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(HANG_GUARD)
        port = listener.getsockname()[1]
        results: dict[str, Outcome] = {}

        def serve() -> None:
            connection, _ = listener.accept()
            connection.settimeout(HANG_GUARD)
            with connection:
                if server is None:
                    connection.recv(65536)
                    connection.sendall(plain_answer)
                    results["server"] = "plain"
                    return
                results["server"] = _outcome(
                    lambda: server.wrap_socket(connection, server_side=True)
                )

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        raw = socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD)
        with raw:
            if client is None:
                raw.sendall(b"POST /requests HTTP/1.1\r\nHost: localhost\r\n\r\n")
                try:
                    results["client"] = f"plain {raw.recv(65536)!r}"
                except OSError as error:
                    results["client"] = type(error).__name__
            else:
                results["client"] = _outcome(
                    lambda: client.wrap_socket(raw, server_hostname=hostname)
                )
        thread.join(HANG_GUARD)
    return results["server"], results["client"]


def test_a_trusted_certificate_agrees_on_http_1_1(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    server = server_context(str(files.cert), str(files.key))
    assert _handshake(server, client_context(str(files.ca))) == ("ok http/1.1", "ok http/1.1")
    assert ALPN_PROTOCOLS == ("http/1.1",)


def test_the_key_may_be_in_the_certificate_file(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    both = tmp_path / "both.pem"
    both.write_bytes(files.key.read_bytes() + files.cert.read_bytes())
    server = server_context(str(both))
    assert _handshake(server, client_context(str(files.ca)))[1] == "ok http/1.1"


def test_the_cafile_adds_to_the_system_trust(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    system = ssl.create_default_context().cert_store_stats()["x509_ca"]
    assert client_context(str(files.ca)).cert_store_stats()["x509_ca"] == system + 1
    assert client_context().cert_store_stats()["x509_ca"] == system


def test_the_system_trust_alone_refuses_a_test_certificate(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    server = server_context(str(files.cert), str(files.key))
    assert _handshake(server, client_context()) == (
        "TLS handshake failed: the peer refused: unknown ca",
        "certificate verify failed: unable to get local issuer certificate",
    )


def test_a_certificate_of_another_ca(tmp_path: Path) -> None:
    files = tls_files(tmp_path, trusted=False)
    server = server_context(str(files.cert), str(files.key))
    assert _handshake(server, client_context(str(files.ca)))[1] == (
        "certificate verify failed: unable to get local issuer certificate"
    )


def test_a_self_signed_certificate(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    other = untrusted_ca()  # a CA's own certificate is signed by itself
    cert, key = tmp_path / "self.pem", tmp_path / "self.key"
    other.cert_pem.write_to_path(str(cert))
    other.private_key_pem.write_to_path(str(key))
    server = server_context(str(cert), str(key))
    assert _handshake(server, client_context(str(files.ca)))[1] == (
        "certificate verify failed: self-signed certificate"
    )


def test_an_expired_certificate(tmp_path: Path) -> None:
    files = tls_files(tmp_path, expired=True)
    server = server_context(str(files.cert), str(files.key))
    assert _handshake(server, client_context(str(files.ca))) == (
        "TLS handshake failed: the peer refused: certificate expired",
        "certificate verify failed: certificate has expired",
    )


def test_a_wrong_hostname(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    server = server_context(str(files.cert), str(files.key))
    client = client_context(str(files.ca))
    assert _handshake(server, client, hostname="wrong.example")[1] == (
        "certificate verify failed: Hostname mismatch, certificate is not valid for 'wrong.example'"
    )


def test_tls_to_a_plain_http_server(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    assert _handshake(None, client_context(str(files.ca))) == (
        "plain",
        "TLS handshake failed: the peer does not speak TLS (wrong version)",
    )


def test_plain_http_to_a_tls_server(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    server = server_context(str(files.cert), str(files.key))
    outcome = _handshake(server, None)
    assert outcome[0] == "TLS handshake failed: a plain HTTP request on a TLS port"


# --- files that cannot be loaded ----------------------------------------------------------


def _load_error(load: Callable[[], object]) -> str:
    with pytest.raises(OSError) as raised:
        load()
    return describe_load_error(raised.value)


def test_files_that_cannot_be_loaded(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    other = tls_files(tmp_path / "other")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n", encoding="ascii")
    missing = str(tmp_path / "missing.pem")
    assert _load_error(lambda: client_context(missing)) == "No such file or directory"
    assert _load_error(lambda: client_context(str(garbage))) == "no certificate or crl found"
    assert _load_error(lambda: client_context(str(files.key))) == "no certificate or crl found"
    assert _load_error(lambda: server_context(missing)) == "No such file or directory"
    assert _load_error(lambda: server_context(str(files.cert))) == (
        "no usable PEM certificate chain and private key"
    )
    assert _load_error(lambda: server_context(str(files.cert), str(other.key))) == (
        "key values mismatch"
    )


def test_an_encrypted_key_is_refused_without_prompting(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    files = tls_files(tmp_path)
    key = serialization.load_pem_private_key(files.key.read_bytes(), password=None)
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pass phrase"),
        )
    )
    assert _load_error(lambda: server_context(str(files.cert), str(encrypted))) == (
        "the private key is encrypted and no password was given"
    )
    server = server_context(str(files.cert), str(encrypted), password="pass phrase")
    assert _handshake(server, client_context(str(files.ca)))[1] == "ok http/1.1"
