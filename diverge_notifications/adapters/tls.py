"""TLS for the adapters: the contexts they make, and a failed handshake said in one line.

The sans-IO core sees the same bytes with or without TLS; encryption is the
adapters' business. A listener given an ``https://`` URL and no ``ssl=``
context uses :func:`client_context` (the system's trust, hostnames
verified); a server is given a context made by :func:`server_context` (or
its own). Both offer ALPN ``http/1.1``, the one protocol spoken here.

:func:`describe_tls_error` turns an :class:`ssl.SSLError` into the short,
stable reason that ``ConnectionFailed`` and ``StreamBroken`` carry, e.g.
``"certificate verify failed: self-signed certificate"``.

The blocking adapter's sockets get their TLS here too: :func:`connect`
(a listener's connection, handshake included), :func:`secure_accepted`
(a server's, with a handshake deadline) and :func:`receive_ready` (a read
that a selector said could not block, which TLS must keep true).
"""

from __future__ import annotations

import re
import socket
import ssl
import sys
from collections.abc import Callable, Mapping
from typing import Any, Final

__all__ = [
    "ALPN_PROTOCOLS",
    "asyncio_tls_options",
    "client_context",
    "connect",
    "describe_load_error",
    "describe_tls_error",
    "receive_ready",
    "secure_accepted",
    "server_context",
]

#: What a TLS client offers and a TLS server accepts in ALPN.
ALPN_PROTOCOLS: Final = ("http/1.1",)


def client_context(cafile: str | None = None) -> ssl.SSLContext:
    """The context of a TLS listener: the system's trust, plus the CA in ``cafile`` if given.

    Certificates and hostnames are verified (``ssl.create_default_context()``);
    ``cafile`` (PEM) adds to the system's certificate authorities, it does
    not replace them. Raises :class:`OSError` or :class:`ssl.SSLError` if
    ``cafile`` cannot be read or holds no certificate.
    """
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if cafile is not None:
        context.load_verify_locations(cafile=cafile)
    context.set_alpn_protocols(list(ALPN_PROTOCOLS))
    return context


def _no_password() -> bytes:
    # Without this, OpenSSL would prompt on the terminal, and a server
    # started by a service manager would wait for ever.
    raise ssl.SSLError(1, "the private key is encrypted and no password was given")


def server_context(
    certfile: str,
    keyfile: str | None = None,
    *,
    password: str | bytes | Callable[[], str | bytes] | None = None,
) -> ssl.SSLContext:
    """The context of a TLS server presenting the certificate chain in ``certfile`` (PEM).

    The private key is read from ``keyfile``, or from ``certfile`` when
    that holds it too; an encrypted key needs its ``password`` (never
    prompted for). Raises :class:`OSError` or :class:`ssl.SSLError` if a
    file cannot be read, or the key does not match the certificate.
    """
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile, keyfile, password if password is not None else _no_password)
    context.set_alpn_protocols(list(ALPN_PROTOCOLS))
    return context


#: OpenSSL's reasons that deserve more than their own words.
_REASONS: Final[Mapping[str, str]] = {
    # A TLS client got something that is no TLS record: most likely an HTTP answer.
    "WRONG_VERSION_NUMBER": "TLS handshake failed: the peer does not speak TLS (wrong version)",
    "RECORD_LAYER_FAILURE": "TLS handshake failed: the peer does not speak TLS (record layer)",
    # A TLS server got the start of an HTTP request.
    "HTTP_REQUEST": "TLS handshake failed: a plain HTTP request on a TLS port",
    "HTTPS_PROXY_REQUEST": "TLS handshake failed: a plain HTTP proxy request on a TLS port",
    "NO_APPLICATION_PROTOCOL": "TLS handshake failed: no common application protocol (ALPN)",
    "TLSV1_ALERT_NO_APPLICATION_PROTOCOL": (
        "TLS handshake failed: the peer speaks no common application protocol (ALPN)"
    ),
    "UNEXPECTED_EOF_WHILE_READING": "TLS: the connection closed without a TLS close",
}

#: ``[SSL: SOME_REASON] `` at the start and `` (_ssl.c:1000)`` at the end of an ``SSLError``.
_DECORATIONS: Final = re.compile(r"^\[[^\]]*\]\s*|\s*\(_ssl\.c:\d+\)$")


def _one_line(text: str) -> str:
    return " ".join(text.split()).rstrip(".")


def _words(error: ssl.SSLError) -> str:
    """OpenSSL's reason for ``error`` in lowercase words, without the decorations."""
    reason = getattr(error, "reason", None)
    if isinstance(reason, str):
        return reason.lower().replace("_", " ")
    return _one_line(_DECORATIONS.sub("", str(error.args[-1] if error.args else error)))


def describe_tls_error(error: ssl.SSLError) -> str:
    """A short, stable, one-line reason for a TLS failure.

    A certificate that does not verify is ``"certificate verify failed: "``
    and OpenSSL's words (``self-signed certificate``, ``certificate has
    expired``, ``unable to get local issuer certificate``, ``Hostname
    mismatch, certificate is not valid for 'example.org'``); a peer that
    does not speak TLS, or plain HTTP on a TLS port, is said so; an alert
    from the peer is named (``TLS handshake failed: the peer refused:
    unknown ca``); any other failure is ``"TLS error: "`` and OpenSSL's
    reason in words.
    """
    if isinstance(error, ssl.SSLCertVerificationError):
        detail = error.verify_message or _DECORATIONS.sub("", str(error.args[-1]))
        return f"certificate verify failed: {_one_line(str(detail))}"
    reason = getattr(error, "reason", None)
    if isinstance(reason, str):
        known = _REASONS.get(reason)
        if known is not None:
            return known
        _, alert, what = reason.partition("ALERT_")
        if alert:
            return f"TLS handshake failed: the peer refused: {what.lower().replace('_', ' ')}"
    elif isinstance(error, ssl.SSLEOFError):
        return _REASONS["UNEXPECTED_EOF_WHILE_READING"]
    words = _words(error)
    return f"TLS error: {words}" if words else "TLS error"


def describe_load_error(error: OSError) -> str:
    """Why a certificate, key or CA file could not be loaded, in a few words.

    A file that cannot be read says so (``No such file or directory``);
    one that OpenSSL cannot use gives OpenSSL's reason (``no certificate
    or crl found``, ``key values mismatch``), and its catch-all "PEM lib"
    is said as what it means.
    """
    if not isinstance(error, ssl.SSLError):
        return error.strerror or str(error)
    words = _words(error)
    if words.lower() == "pem lib":
        return "no usable PEM certificate chain and private key"
    return words


def asyncio_tls_options(handshake_timeout: float, shutdown_timeout: float) -> dict[str, Any]:
    """The keyword arguments of ``loop.start_tls`` for a server's side of a connection.

    Both ends of a TLS connection are bounded: the handshake by
    ``handshake_timeout``, and (from Python 3.11, where asyncio waits for
    the peer's own TLS close) the closing by ``shutdown_timeout``.
    """
    options: dict[str, Any] = {"server_side": True, "ssl_handshake_timeout": handshake_timeout}
    if sys.version_info >= (3, 11):
        options["ssl_shutdown_timeout"] = shutdown_timeout
    return options


# --- blocking sockets ------------------------------------------------------------------------


def connect(host: str, port: int, timeout: float, context: ssl.SSLContext | None) -> socket.socket:
    """A blocking connection to ``host``:``port``, inside TLS when ``context`` is given.

    ``timeout`` bounds the TCP connection and then, separately, the TLS
    handshake (which verifies the certificate for ``host``). The socket is
    closed if the handshake fails. Raises :class:`OSError` (an
    :class:`ssl.SSLError` for TLS).
    """
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if context is not None:
            # wrap_socket() takes the descriptor over, and closes it if the handshake fails.
            return context.wrap_socket(sock, server_hostname=host)
    except BaseException:
        sock.close()
        raise
    return sock


def secure_accepted(
    sock: socket.socket, context: ssl.SSLContext | None, timeout: float
) -> socket.socket:
    """An accepted connection inside TLS, its handshake done within ``timeout`` seconds.

    Without a ``context``, ``sock`` as it is. The socket is left blocking,
    without a timeout, as it came. Raises :class:`OSError` (an
    :class:`ssl.SSLError`, or ``TimeoutError``), and the connection is then
    closed.
    """
    if context is None:
        return sock
    secured = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
    try:
        secured.settimeout(timeout)
        secured.do_handshake()
        secured.settimeout(None)
    except BaseException:
        secured.close()
        raise
    return secured


def receive_ready(sock: socket.socket, size: int) -> bytes | None:
    """Read from a socket a selector reported readable, without blocking; ``b""`` at its end.

    A plain socket has bytes (or its end) to give. Inside TLS the bytes
    that woke the selector may be only part of a record, and a blocking
    read would wait for the rest for as long as the peer likes: then
    ``None``, nothing to decrypt yet.
    """
    if not isinstance(sock, ssl.SSLSocket):
        return sock.recv(size)
    sock.setblocking(False)
    try:
        return sock.recv(size)
    except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return None
    finally:
        sock.setblocking(True)
