"""Certificates for the TLS tests, made in the tests with trustme.

One certificate authority is made per test session (:func:`session_ca`); each
test writes the PEM files it needs into its own folder (:func:`tls_files`):
the CA's certificate (for ``--cafile`` and ``curl --cacert``), the server's
certificate chain and its private key (for ``serve --certfile/--keyfile``
and nginx). A certificate can be made for other names, or already expired,
and a second, unrelated CA stands for "a CA nobody trusts here".

trustme is a dev dependency. Without it every TLS test is skipped with
:data:`TRUSTME_MISSING` as its reason: a module marks itself with
``pytestmark = requires_trustme``, and the functions here skip the test
that calls them.
"""

from __future__ import annotations

import datetime
import functools
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

import attrs
import pytest

from tests.interop import ServeProcess

try:
    import trustme
except ImportError:
    HAVE_TRUSTME = False
else:
    HAVE_TRUSTME = True

if TYPE_CHECKING:
    import trustme

#: Why the TLS tests are skipped when trustme is missing.
TRUSTME_MISSING: Final = (
    "trustme is not installed: the TLS tests need it to make certificates (pip install -e '.[dev]')"
)

#: Marks a test, or a module (``pytestmark``), that makes certificates.
requires_trustme = pytest.mark.skipif(not HAVE_TRUSTME, reason=TRUSTME_MISSING)

#: The names a test server's certificate is valid for by default.
LOOPBACK_NAMES: Final = ("localhost", "127.0.0.1", "::1")

#: Long past: the end of an expired certificate's validity.
LONG_AGO: Final = datetime.datetime(2001, 1, 1, tzinfo=datetime.timezone.utc)


def _need_trustme() -> None:
    if not HAVE_TRUSTME:
        pytest.skip(TRUSTME_MISSING)


@functools.cache
def session_ca() -> trustme.CA:
    """The certificate authority of this test session (made once: key generation is slow)."""
    _need_trustme()
    return trustme.CA(organization_name="diverge-notifications tests")


@functools.cache
def untrusted_ca() -> trustme.CA:
    """Another certificate authority, which nothing in the tests trusts."""
    _need_trustme()
    return trustme.CA(organization_name="nobody trusts this")


@attrs.frozen(kw_only=True)
class TlsFiles:
    """The PEM files of one TLS server, and the contexts made from them."""

    #: The certificate of the CA that issued :attr:`cert` (``--cafile``, ``curl --cacert``).
    ca: Path
    #: The server's certificate chain.
    cert: Path
    #: The server's private key.
    key: Path

    def client_context(self) -> ssl.SSLContext:
        """A client context trusting only :attr:`ca`, hostnames verified, ALPN ``http/1.1``."""
        context = ssl.create_default_context(cafile=str(self.ca))
        context.set_alpn_protocols(["http/1.1"])
        return context

    def server_context(self) -> ssl.SSLContext:
        """A server context presenting :attr:`cert`, ALPN ``http/1.1``."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(self.cert), str(self.key))
        context.set_alpn_protocols(["http/1.1"])
        return context


def tls_files(
    folder: Path,
    *,
    names: Sequence[str] = LOOPBACK_NAMES,
    expired: bool = False,
    trusted: bool = True,
) -> TlsFiles:
    """Write a server certificate for ``names`` and its CA's certificate into ``folder``.

    ``expired`` makes a certificate whose validity ended long ago;
    ``trusted=False`` has it issued by :func:`untrusted_ca`, while
    :attr:`TlsFiles.ca` is still the session's CA, so a client trusting
    that file rejects the server.
    """
    ca = session_ca()
    issuer = ca if trusted else untrusted_ca()
    if expired:
        before = LONG_AGO - datetime.timedelta(days=30)
        server = issuer.issue_cert(*names, not_before=before, not_after=LONG_AGO)
    else:
        server = issuer.issue_cert(*names)
    folder.mkdir(parents=True, exist_ok=True)
    files = TlsFiles(ca=folder / "ca.pem", cert=folder / "cert.pem", key=folder / "key.pem")
    ca.cert_pem.write_to_path(str(files.ca))
    # The whole chain, leaf first: what --certfile and nginx's ssl_certificate expect.
    files.cert.write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    server.private_key_pem.write_to_path(str(files.key))
    return files


def tls_serve(files: TlsFiles, *args: str, stdin: bool = False) -> ServeProcess:
    """``serve --certfile --keyfile ARGS`` with the certificate of ``files``, started."""
    return ServeProcess(
        "--certfile", str(files.cert), "--keyfile", str(files.key), *args, stdin=stdin
    )
