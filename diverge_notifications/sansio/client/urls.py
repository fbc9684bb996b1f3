"""Base URLs: where a listener connects and asks, and how a server names itself.

A server's base URL is ``http://host[:port][/base]`` or, over TLS,
``https://host[:port][/base]``; the ask goes to ``/base/requests``
(``/requests`` for a bare host). :func:`parse_url` turns such a URL into an
:class:`Endpoint`, :func:`format_url` writes the URL of a server listening
on a host and port.

A URL may carry a secret (a token as its user information or its query),
so no message shows one as given: :func:`shown_url` writes it with those
parts masked. :func:`check_token_transport` refuses a bearer token over
plain ``http://`` to a host that is not loopback (:func:`is_loopback`),
unless the caller allows it.
"""

from __future__ import annotations

import ipaddress
from typing import Final
from urllib.parse import urlsplit

import attrs

from ..errors import PlaintextTokenRefused

__all__ = [
    "DEFAULT_PORTS",
    "Endpoint",
    "PlaintextTokenRefused",
    "base_url_hint",
    "check_token_transport",
    "format_url",
    "is_loopback",
    "parse_url",
    "shown_url",
]

#: The port of each scheme when the URL names none.
DEFAULT_PORTS: Final = {"http": 80, "https": 443}

#: What stands for a masked part of a URL in messages.
_MASK: Final = "***"


@attrs.frozen(kw_only=True)
class Endpoint:
    """Where a listener connects and what it sends there.

    ``scheme`` is ``"http"`` or ``"https"`` (TLS, which the adapters add);
    ``authority`` is the ``Host`` header (``host:port`` as written in the
    URL), ``target`` the request target of the ask: the URL's path with
    ``/requests`` appended.
    """

    host: str
    port: int
    authority: str
    target: str
    scheme: str = "http"

    @property
    def tls(self) -> bool:
        """Whether the connection runs inside TLS (an ``https://`` URL)."""
        return self.scheme == "https"


def shown_url(url: str) -> str:
    """``url`` as messages show it: user information, query and fragment masked.

    ``https://user:token@example.org/x?key=k`` is shown as
    ``https://***@example.org/x?***``. Any text is accepted, URL or not:
    whatever precedes an ``@`` in the authority (or, without ``//``, before
    the first ``/``) is masked, so no token written there shows.
    """
    scheme, separator, rest = url.partition("//")
    if not separator:
        scheme, rest = "", url
    else:
        scheme += separator
    cut = len(rest)
    for mark in "/?#":
        found = rest.find(mark)
        if 0 <= found < cut:
            cut = found
    authority, tail = rest[:cut], rest[cut:]
    if "@" in authority:
        authority = f"{_MASK}@{authority.rpartition('@')[2]}"
    for index, char in enumerate(tail):
        if char in "?#":
            tail = f"{tail[:index]}{char}{_MASK}"
            break
    return f"{scheme}{authority}{tail}"


def parse_url(url: str) -> Endpoint:
    """Parse a server's base URL, ``http[s]://host[:port][/base]``.

    The ask goes to ``/base/requests``; the port is 80 for ``http`` and 443
    for ``https`` unless given. A URL with user information, a query or a
    fragment is refused, because none of them could mean anything here
    (pass a token as ``token=``). Raises :class:`ValueError`, whose message
    shows the URL through :func:`shown_url`.
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, not {type(url).__name__}")
    shown = shown_url(url)
    try:
        parts = urlsplit(url)
    except ValueError as error:  # an unclosed "[" in the host
        raise ValueError(f"the URL does not parse ({error}): {shown!r}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ValueError(f"only http:// and https:// URLs are supported, not {shown!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"a URL with user information is not supported (give a token on its own): {shown!r}"
        )
    if parts.query or parts.fragment:
        raise ValueError(f"a URL with a query or a fragment is not supported: {shown!r}")
    host = parts.hostname
    if not host:
        raise ValueError(f"the URL names no host: {shown!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"the URL's port is not a port number: {shown!r}") from None
    if port is None:
        port = DEFAULT_PORTS[scheme]
    authority = parts.netloc
    base = parts.path.rstrip("/")
    return Endpoint(
        host=host, port=port, authority=authority, target=f"{base}/requests", scheme=scheme
    )


def base_url_hint(url: str) -> str | None:
    """A hint for a ``url`` whose path ends in ``/requests``, where the ask goes; else ``None``.

    Such a URL is most likely the ask's own address given for the base
    one, and its asks would go to ``.../requests/requests``. The hint names
    the base URL meant (shown through :func:`shown_url`).
    """
    try:
        path = urlsplit(url).path
    except ValueError:  # no URL at all: parse_url says why
        return None
    if not path.rstrip("/").endswith("/requests"):
        return None
    shown = shown_url(url)
    head, _, tail = shown.rpartition("/requests")
    base = head + tail.lstrip("/")
    return (
        f"the URL ends in /requests: give the server's base URL ({base!r}), "
        "to which /requests is added"
    )


def format_url(host: str, port: int, *, tls: bool = False) -> str:
    """The base URL of a server listening on ``host`` and ``port`` (``https://`` with ``tls``)."""
    scheme = "https" if tls else "http"
    if ":" in host:  # an IPv6 address needs brackets in a URL
        return f"{scheme}://[{host}]:{port}"
    return f"{scheme}://{host}:{port}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine for certain, without asking a resolver.

    A loopback address (``127.0.0.0/8``, ``::1``, and ``::ffff:127.x.y.z``)
    or the name ``localhost``. Any other name is not, whatever it resolves
    to today.
    """
    name = host.rstrip(".").lower()
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name.partition("%")[0])  # without an IPv6 zone
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def check_token_transport(
    endpoint: Endpoint, token: str | None, *, allow_plaintext_token: bool = False
) -> None:
    """Refuse to send ``token`` in cleartext to anything but this machine.

    Over ``https://``, or to a loopback host (:func:`is_loopback`), or
    without a token, anything goes. Otherwise the token would cross a
    network in cleartext: :class:`PlaintextTokenRefused` (a
    :class:`ValueError`), unless ``allow_plaintext_token`` says the caller
    means it, as gRPC refuses call credentials on an insecure channel.
    """
    if token is None or endpoint.tls or allow_plaintext_token or is_loopback(endpoint.host):
        return
    raise PlaintextTokenRefused(
        f"refusing to send the bearer token in cleartext over http:// to {endpoint.host}, "
        "which is not a loopback address: use an https:// URL, or allow it explicitly "
        "(allow_plaintext_token=True)"
    )
