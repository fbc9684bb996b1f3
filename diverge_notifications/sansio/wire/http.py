"""The HTTP/1.1 vocabulary both sides share .

What an ask and its answer look like on the wire, in one place: the path
asks are posted to, the content types, the bearer-token rule, channel ids
(minting and reading them back), finding the end of a head, the heads of
answers and refusals, and the chunks a path is written in. The proxy
(:mod:`..client.connection`) reads with these, the server (:mod:`..server.connection`) writes with
them, so the two sides cannot drift apart.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Final

from ..errors import LocalProtocolError
from .framing import KEEPALIVE_FRAME

__all__ = [
    "ASK_CONTENT_TYPE",
    "ASK_PATH",
    "AUDIENCE_LENGTH",
    "CONTINUE_RESPONSE",
    "DEFAULT_MAX_HEAD_SIZE",
    "HEAD_END",
    "KEEPALIVE_CHUNK",
    "LAST_CHUNK",
    "MESSAGES_CONTENT_TYPE",
    "PHRASES",
    "ChannelIds",
    "answer_head",
    "audience_of",
    "channel_from_location",
    "check_token",
    "check_tokens",
    "chunk",
    "plain_response",
    "refusal_response",
    "target_path",
]

#: The one path asks are posted to.
ASK_PATH: Final = "/requests"
#: Content type of the ask's body.
ASK_CONTENT_TYPE: Final = "application/vnd.diverge.ask"
#: Content type of an answer that opens a path: a body of frames.
MESSAGES_CONTENT_TYPE: Final = "application/vnd.diverge.messages"
#: Largest head accepted by default (start line, headers, blank line).
DEFAULT_MAX_HEAD_SIZE: Final = 64 * 1024

#: The end of a head exactly as h11 finds it (h11's receive buffer), so that
#: h11 is handed exactly one complete head at a time.
HEAD_END: Final = re.compile(rb"\n\r?\n")

# --- bearer tokens -------------------------------------------------------------

_TOKEN_RE: Final = re.compile(r"[\x21-\x7e]+\Z")


def check_token(token: str | None) -> None:
    """Raise :class:`ValueError` unless ``token`` is ``None`` or a usable bearer token.

    A usable token is one or more visible ASCII characters: what the server
    compares and what the proxy can send, so both sides refuse the same
    tokens when they are built.
    """
    if token is not None and (not isinstance(token, str) or _TOKEN_RE.match(token) is None):
        raise ValueError("a token is one or more visible ASCII characters")


# --- several tokens: audiences ---------------------------------------------------

#: Hex digits of an audience: 64 bits of the token's SHA-256, enough to tell
#: tokens apart in logs, far too few to find a token from (see ``docs/server.md``).
AUDIENCE_LENGTH: Final = 16
_AUDIENCE_DOMAIN: Final = b"diverge-notifications audience\x00"


def audience_of(token: str) -> str:
    """The audience of ``token``: a short digest that names it in logs, counts and the hub.

    :data:`AUDIENCE_LENGTH` lowercase hex digits of the SHA-256 of the token
    (with a fixed prefix, so that the digest is good for nothing else). The
    token itself never appears where an audience does.
    """
    check_token(token)
    digest = hashlib.sha256(_AUDIENCE_DOMAIN + token.encode("ascii")).hexdigest()
    return digest[:AUDIENCE_LENGTH]


def check_tokens(token: str | None, tokens: Iterable[str] | None) -> tuple[str, ...]:
    """The tokens a server accepts, from its ``token=`` and ``tokens=`` options, checked.

    ``token`` is the one-token form, ``tokens`` several (each one accepted;
    a path belongs to the one it was asked with); give one of them, or
    neither (``()``: no token is asked for). Every token must be usable
    (:func:`check_token`); a token given twice counts once. A :class:`ValueError`
    for both at once, for an empty ``tokens`` (``None`` means no token), and
    for a lone ``str`` as ``tokens`` (its characters are not tokens).
    """
    if tokens is None:
        check_token(token)
        return () if token is None else (token,)
    if token is not None:
        raise ValueError("give token (one) or tokens (several), not both")
    if isinstance(tokens, (str, bytes)):
        raise ValueError("tokens is a list of tokens, not one str: use token= for one")
    accepted = tuple(dict.fromkeys(tokens))
    if not accepted:
        raise ValueError("tokens is empty: give None (or leave it out) for no token")
    for each in accepted:
        check_token(each)
    return accepted


# --- channel ids ---------------------------------------------------------------

_CHANNEL_MAX: Final = 64
_CHANNEL: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
# Room left for the counter: 10**20 ids per server is more than any server
# mints, so minting never runs out for a valid prefix and start.
_COUNTER_DIGITS: Final = 20
_CHANNEL_PREFIX_MAX: Final = _CHANNEL_MAX - _COUNTER_DIGITS
_CHANNEL_PREFIX_RE: Final = re.compile(r"[A-Za-z0-9_-]*\Z")


class ChannelIds:
    """Mints channel ids: ``prefix`` followed by a counter (``c1``, ``c2``, ...).

    Share one instance between every :class:`~..server.connection.ServerConnection` of a
    server so that ids are unique per server. A channel id is 1-64
    characters of ``A-Z a-z 0-9 - _``; the prefix is checked against that
    alphabet and may be empty.
    """

    __slots__ = ("_next", "_prefix")

    def __init__(self, prefix: str = "c", *, start: int = 1) -> None:
        if not isinstance(prefix, str) or _CHANNEL_PREFIX_RE.match(prefix) is None:
            raise ValueError(f"a channel prefix uses only A-Z a-z 0-9 - _, not {prefix!r}")
        if len(prefix) > _CHANNEL_PREFIX_MAX:
            raise ValueError(
                f"a channel prefix is at most {_CHANNEL_PREFIX_MAX} characters, so that "
                f"{_COUNTER_DIGITS} digits of counter still fit in {_CHANNEL_MAX}"
            )
        if not 0 <= start < 10 ** (_COUNTER_DIGITS - 1):
            raise ValueError(f"start must be from 0 to 10**{_COUNTER_DIGITS - 1} - 1")
        self._prefix = prefix
        self._next = start

    @property
    def prefix(self) -> str:
        """The prefix every id starts with."""
        return self._prefix

    def mint(self) -> str:
        """A channel id this instance has not returned before."""
        channel = f"{self._prefix}{self._next}"
        if len(channel) > _CHANNEL_MAX:
            raise LocalProtocolError("channel ids are exhausted: the id would exceed 64 characters")
        self._next += 1
        return channel


def channel_from_location(value: str) -> str | None:
    """The channel named by a ``Content-Location`` value, or ``None``.

    The channel is the last segment of the location's path, which must be
    1-64 of ``A-Z a-z 0-9 - _``. Absolute locations
    (``http://host/mcp/notifications/c1``) and any prefix before the last
    segment are accepted; the query and fragment are ignored.
    """
    location = value.strip().split("#", 1)[0].split("?", 1)[0]
    scheme_end = location.find("://")
    if scheme_end >= 0 or location.startswith("//"):
        after_authority = location[scheme_end + 3 if scheme_end >= 0 else 2 :]
        slash = after_authority.find("/")
        location = after_authority[slash:] if slash >= 0 else ""
    segment = location.rsplit("/", 1)[-1]
    return segment if _CHANNEL.fullmatch(segment) else None


def target_path(target: bytes) -> bytes:
    """The path of a request target (origin form or absolute form), without the query."""
    if target.startswith(b"/"):
        return target.partition(b"?")[0]
    scheme, separator, rest = target.partition(b"://")
    if separator and scheme.lower() in (b"http", b"https"):
        path_start = rest.find(b"/")
        if path_start < 0:
            return b"/"
        return rest[path_start:].partition(b"?")[0]
    return target


# --- response heads ------------------------------------------------------------

#: The interim answer to ``Expect: 100-continue``.
CONTINUE_RESPONSE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"

#: Reason phrases of the statuses a server sends.
PHRASES: Final[Mapping[int, str]] = {
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Content Too Large",
    431: "Request Header Fields Too Large",
    501: "Not Implemented",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}


def answer_head(location: str) -> bytes:
    """The ``200`` head of a served ask, whose chunked body is the path."""
    return (
        "HTTP/1.1 200 OK\r\n"
        f"Content-Type: {MESSAGES_CONTENT_TYPE}\r\n"
        f"Content-Location: {location}\r\n"
        "Cache-Control: no-store\r\n"
        "Transfer-Encoding: chunked\r\n"
        "Connection: close\r\n"
        "\r\n"
    ).encode("ascii")


def refusal_response(
    status: int, reason: str, *, extra: Iterable[tuple[str, str]] = (), head_only: bool = False
) -> bytes:
    """A complete refusal: status, a plain-text body saying why, ``Connection: close``."""
    phrase = PHRASES.get(status, "Error")
    return plain_response(
        status, phrase, f"{status} {phrase}: {reason}", extra=extra, head_only=head_only
    )


def plain_response(
    status: int,
    phrase: str,
    text: str,
    *,
    extra: Iterable[tuple[str, str]] = (),
    head_only: bool = False,
) -> bytes:
    """A complete response: ``status`` and ``phrase``, ``text`` (a line) as a plain-text body."""
    body = f"{text}\n".encode()
    lines = [
        f"HTTP/1.1 {status} {phrase}",
        "Content-Type: text/plain; charset=utf-8",
        f"Content-Length: {len(body)}",
        "Connection: close",
        *(f"{name}: {value}" for name, value in extra),
    ]
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("ascii")
    return head if head_only else head + body


# --- chunks --------------------------------------------------------------------

#: The last chunk: the clean end of a chunked body.
LAST_CHUNK: Final = b"0\r\n\r\n"
#: One chunk holding one keep-alive frame.
KEEPALIVE_CHUNK: Final = b"4\r\n" + KEEPALIVE_FRAME + b"\r\n"


def chunk(data: bytes) -> bytes:
    """``data`` as one HTTP chunk; ``data`` must not be empty (that ends the body)."""
    return b"%x\r\n%b\r\n" % (len(data), data)
