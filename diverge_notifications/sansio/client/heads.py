"""The heads of an ask and its answer, on the proxy side .

h11 writes the ask's request. Each head of the answer (any number of 1xx
heads, then the final one) is found here, in the bytes read so far, and
handed whole to h11, which parses and validates it: so the head's size
limit is exact, and what h11 says about a head does not depend on how its
bytes were split into reads (:class:`HeadReader`). Then what a final head
means: a 2xx head either opens a path on a channel or cannot
(:func:`path_channel`); any other is a refusal, told to people by its
status, its phrase and the start of its body (:class:`Refusal`).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Final

import h11

from ..errors import LocalProtocolError
from ..wire.http import ASK_CONTENT_TYPE, HEAD_END, MESSAGES_CONTENT_TYPE, channel_from_location
from .bodies import Bad

__all__ = [
    "REFUSAL_BODY_LIMIT",
    "HeadReader",
    "Refusal",
    "clip",
    "path_channel",
]

#: How many bytes of a refusal's body are kept for :attr:`~..events.NotServed.reason`.
REFUSAL_BODY_LIMIT: Final = 200

_STATUS_LINE_START: Final = b"HTTP/"
_REASON_CLIP: Final = 160
_MESSAGES_TYPE: Final = MESSAGES_CONTENT_TYPE.encode("ascii")


def clip(text: str, limit: int = _REASON_CLIP) -> str:
    """``text``, cut to ``limit`` characters (an ellipsis marks the cut): for reasons."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _header_text(value: bytes) -> str:
    return clip(value.decode("latin-1"))


def _printable(data: bytes) -> str:
    text = data.decode("utf-8", "replace")
    return " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())


class HeadReader:
    """One ask's HTTP/1.1 as far as h11 goes: the request, and the heads of the answer.

    :meth:`request` writes the ask's request (once). Feed the bytes of the
    answer with :meth:`feed`; :meth:`read` returns the next head as h11
    parsed it (an ``InformationalResponse`` or the final ``Response``), a
    :class:`~.bodies.Bad` when the bytes cannot be an acceptable head, or
    ``None`` while the head is incomplete. After the final head,
    :meth:`rest` hands over the bytes that follow it (the start of the
    body), which h11 does not read.
    """

    __slots__ = ("_buffer", "_http", "_max_size", "_scan")

    def __init__(self, max_size: int) -> None:
        self._http = h11.Connection(h11.CLIENT, max_incomplete_event_size=max_size)
        self._max_size = max_size
        self._buffer = bytearray()
        self._scan = 0

    def request(self, authority: str, body: bytes, *, token: str | None, target: str) -> bytes:
        """The bytes of the ask: ``body`` posted to ``target``, with its bearer ``token``.

        A value that cannot go into a request (a newline in the token, a
        non-ASCII authority...) is the caller's mistake:
        :class:`LocalProtocolError`.
        """
        headers = [
            ("Host", authority),
            ("Content-Type", ASK_CONTENT_TYPE),
            ("Content-Length", str(len(body))),
        ]
        if token is not None:
            headers.append(("Authorization", f"Bearer {token}"))
        http = self._http
        try:
            request = http.send(h11.Request(method="POST", target=target, headers=headers))
            request += http.send(h11.Data(data=body))
            http.send(h11.EndOfMessage())
        except (h11.ProtocolError, ValueError) as error:
            raise LocalProtocolError(f"cannot build the ask: {error}") from None
        return request

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes of the answer."""
        self._buffer += data

    def read(self) -> h11.InformationalResponse | h11.Response | Bad | None:
        """The next head, why there cannot be one, or ``None`` if it is incomplete."""
        head = self._buffer
        if not _STATUS_LINE_START.startswith(head[: len(_STATUS_LINE_START)]):
            return Bad(
                "the answer does not start with an HTTP/1.x status line: "
                "is this the Diverge server's address?"
            )
        match = HEAD_END.search(head, self._scan)
        if match is None:
            if len(head) > self._max_size:
                return self._too_large()
            self._scan = max(0, len(head) - 2)
            return None
        end = match.end()
        if end > self._max_size:
            return self._too_large()
        self._scan = 0
        http = self._http
        # h11 gets exactly one complete head, so what it says about it does
        # not depend on how the bytes were split.
        http.receive_data(bytes(head[:end]))
        del head[:end]
        try:
            event = http.next_event()
        except h11.RemoteProtocolError as error:
            return Bad(f"the answer's head is not valid HTTP/1.1: {clip(str(error))}")
        if type(event) is h11.InformationalResponse or type(event) is h11.Response:
            return event
        return Bad("the answer's head could not be read")  # pragma: no cover - it was whole

    def eof_reason(self) -> str:
        """Why an end of file now leaves the answer without its head."""
        if not self._buffer:
            return "the connection closed before any answer arrived"
        return "the connection closed in the middle of the answer's head"

    def rest(self) -> bytearray:
        """The bytes after the last head read."""
        return self._buffer

    def _too_large(self) -> Bad:
        return Bad(f"the answer's head is larger than max_head_size ({self._max_size} bytes)")


def path_channel(response: h11.Response) -> str | Bad:
    """The channel a 2xx head opens its path on, or why it cannot open one."""
    content_types: list[bytes] = []
    locations: list[bytes] = []
    encodings: list[bytes] = []
    for name, value in response.headers:
        if name == b"content-type":
            content_types.append(value)
        elif name == b"content-location":
            locations.append(value)
        elif name == b"content-encoding":
            encodings.append(value)
    status = response.status_code
    if not content_types:
        return Bad(
            f"the answer has status {status} but no Content-Type; a path is {MESSAGES_CONTENT_TYPE}"
        )
    if len(content_types) > 1:
        return Bad("the answer has more than one Content-Type")
    media_type = content_types[0].split(b";", 1)[0].strip().lower()
    if media_type != _MESSAGES_TYPE:
        return Bad(
            f"the answer has status {status} and Content-Type "
            f"{_header_text(content_types[0])!r}, not {MESSAGES_CONTENT_TYPE}: "
            "is this the Diverge server's address?"
        )
    for encoding in encodings:
        if encoding.strip().lower() not in (b"", b"identity"):
            return Bad(
                f"the answer's body is content-encoded ({_header_text(encoding)}), "
                "which the ask did not allow"
            )
    if not locations:
        return Bad("the answer has no Content-Location, so the path has no channel")
    if len(locations) > 1:
        return Bad("the answer has more than one Content-Location")
    location = locations[0].decode("latin-1")
    channel = channel_from_location(location)
    if channel is None:
        return Bad(
            f"the answer's Content-Location {clip(location)!r} does not end in a channel "
            "id (1-64 of A-Z a-z 0-9 - _)"
        )
    return channel


class Refusal:
    """A non-2xx answer, told to people: its status and phrase, the start of its body.

    The reason (:attr:`reason`) is the status and its phrase (the standard
    phrase when the server sent none), a redirect's ``Location``, and the
    first :data:`REFUSAL_BODY_LIMIT` bytes of the body, made printable, with
    an ellipsis if there was more.
    """

    __slots__ = ("_body", "_head")

    def __init__(self, response: h11.Response) -> None:
        status = response.status_code
        phrase = response.reason.decode("latin-1").strip()
        if not phrase:
            try:
                phrase = HTTPStatus(status).phrase
            except ValueError:
                phrase = ""
        head = f"{status} {clip(phrase)}".strip()
        if 300 <= status < 400:
            for name, value in response.headers:
                if name == b"location":
                    head += f" (Location: {_header_text(value)})"
                    break
        self._head = head
        self._body = bytearray()

    def take(self, piece: bytes) -> bool:
        """Keep what is wanted of the next ``piece`` of the body; false once that is enough."""
        body = self._body
        body += piece[: REFUSAL_BODY_LIMIT + 1 - len(body)]
        return len(body) <= REFUSAL_BODY_LIMIT

    @property
    def reason(self) -> str:
        """Why the ask was not served, for :attr:`~..events.NotServed.reason`."""
        head, body = self._head, self._body
        shown = _printable(bytes(body[:REFUSAL_BODY_LIMIT]))
        if shown.startswith(head):
            # Many servers' bodies begin by repeating the status line.
            shown = shown[len(head) :].lstrip(" :-")
        if not shown:
            return head
        return f"{head}: {shown}" + ("…" if len(body) > REFUSAL_BODY_LIMIT else "")
