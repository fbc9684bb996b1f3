"""Base URLs: where a listener connects and asks, and how a server names itself.

A server's base URL is ``http://host[:port][/base]``; the ask goes to
``/base/requests`` (``/requests`` for a bare host). :func:`parse_url`
turns such a URL into an :class:`Endpoint`, :func:`format_url` writes the
URL of a server listening on a host and port.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import attrs

__all__ = ["Endpoint", "format_url", "parse_url"]


@attrs.frozen(kw_only=True)
class Endpoint:
    """Where a listener connects and what it sends there.

    ``authority`` is the ``Host`` header (``host:port`` as written in the
    URL), ``target`` the request target of the ask: the URL's path with
    ``/requests`` appended.
    """

    host: str
    port: int
    authority: str
    target: str


def parse_url(url: str) -> Endpoint:
    """Parse a server's base URL, ``http://host[:port][/base]``.

    The ask goes to ``/base/requests``. Only ``http`` is supported; a URL
    with user information, a query or a fragment is refused, because none
    of them could mean anything here. Raises :class:`ValueError`.
    """
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, not {type(url).__name__}")
    parts = urlsplit(url)
    if parts.scheme.lower() != "http":
        raise ValueError(f"only http:// URLs are supported, not {url!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"a URL with user information is not supported: {url!r}")
    if parts.query or parts.fragment:
        raise ValueError(f"a URL with a query or a fragment is not supported: {url!r}")
    host = parts.hostname
    if not host:
        raise ValueError(f"the URL names no host: {url!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"the URL's port is not a port number: {url!r}") from None
    if port is None:
        port = 80
    authority = parts.netloc
    base = parts.path.rstrip("/")
    return Endpoint(host=host, port=port, authority=authority, target=f"{base}/requests")


def format_url(host: str, port: int) -> str:
    """The base URL of a server listening on ``host`` and ``port``."""
    if ":" in host:  # an IPv6 address needs brackets in a URL
        return f"http://[{host}]:{port}"
    return f"http://{host}:{port}"
