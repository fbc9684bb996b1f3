"""Reading the one HTTP/1.1 request of a server connection: an ask, or why not.

:class:`AskReader` is the request layer of :class:`~.connection.ServerConnection`:
it takes the received bytes from the front of the connection's buffer, hands
the request head to h11 once it is complete (so that what it decides does
not depend on how the bytes were split), checks the target, the method, the
HTTP version, the bearer token and the sizes, and gives one verdict: the
decoded :class:`~..wire.asks.Ask`, a :class:`Refusal` (the status and the
reason the refusal response says), or a :class:`HealthCheck` (a ``GET`` or
``HEAD`` of ``/healthz`` or ``/readyz``, which needs no token and is decided
on its head). What to do with the verdict is the connection's table's
business.

Limits: the head may be at most ``max_head_size`` bytes (else 431), the ask
body at most ``max_ask_size`` bytes (else 413: decided on ``Content-Length``
before the body is read, and while a chunked body is read, which may spend
up to ``max_head_size`` more on chunk lines and trailers).
"""

from __future__ import annotations

import enum
import hmac
from typing import Final, NamedTuple

import h11

from ..errors import AskError
from ..wire.asks import Ask, decode_ask
from ..wire.http import CONTINUE_RESPONSE, HEAD_END, audience_of, target_path

__all__ = ["HEALTH_CHECKS", "AskReader", "HealthCheck", "Refusal"]


class Refusal(NamedTuple):
    """Why a request is refused: what its refusal response says."""

    status: int
    reason: str
    #: Headers the response carries besides the usual ones.
    extra: tuple[tuple[str, str], ...] = ()
    #: The request was a HEAD: the response has no body.
    head_only: bool = False


class HealthCheck(NamedTuple):
    """A health check: ``GET`` (or ``HEAD``) of one of :data:`HEALTH_CHECKS`."""

    #: ``"healthz"`` (is the process serving?) or ``"readyz"`` (would an ask be served?).
    check: str
    #: The request was a HEAD: the response has no body.
    head_only: bool = False


#: The health checks by their path: always at the root, whatever the ask's path,
#: so that a probe need not know the base path the server is reached under.
HEALTH_CHECKS: Final[dict[bytes, str]] = {b"/healthz": "healthz", b"/readyz": "readyz"}
_HEALTH_METHODS: Final = frozenset({b"GET", b"HEAD"})


class _Reading(enum.Enum):
    HEAD = "head"  # waiting for the end of the request head
    HTTP = "http"  # the head is complete; h11 parses head and body
    OVER = "over"  # the request was read (or refused); further bytes are discarded


_REASON_NOT_FOUND: Final = "this server answers only POST {path}"
_REASON_METHOD: Final = "{path} takes POST only"
_REASON_VERSION: Final = "an ask needs HTTP/1.1"
_REASON_UNAUTHORIZED: Final = "a valid bearer token is required"
_REASON_TOO_LARGE: Final = "the ask is larger than the limit of {limit} bytes"
_REASON_HEAD_TOO_LARGE: Final = "the request head is larger than the limit of {limit} bytes"
_REASON_BAD_LINE: Final = "malformed HTTP request: illegal request line"
_REASON_HEAD_CUT: Final = "malformed HTTP request: the connection ended inside the request head"
_REASON_BODY_CUT: Final = "malformed HTTP request: the connection ended inside the request body"
_REASON_BAD_BODY: Final = "malformed HTTP request: invalid chunked body"


def _body_reason(h11_message: str) -> str:
    if h11_message.startswith("peer closed") or h11_message.startswith("peer unexpectedly"):
        return _REASON_BODY_CUT
    return _REASON_BAD_BODY


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class AskReader:
    """Reads one ask request from the front of a buffer (see the module's docstring).

    Call :meth:`read` with the connection's receive buffer after bytes
    arrived; it takes what it reads from the buffer's front and returns
    ``None`` until it has a verdict, then the verdict, once. Never raises
    for any bytes. :meth:`take_interim` gives the ``100 Continue`` to send,
    if the request asked for one. ``tokens`` (none: no token is asked for)
    are checked by the caller; with more than one, :attr:`audience` names the
    one the request carried.
    """

    def __init__(
        self, *, tokens: tuple[str, ...], target: str, max_ask_size: int, max_head_size: int
    ) -> None:
        self._tokens = tuple(token.encode("ascii") for token in tokens)
        #: The audience of the token the request carried, when several are accepted.
        self.audience: str | None = None
        self._max_ask_size = max_ask_size
        self._max_head_size = max_head_size
        self._ask_path = target
        self._ask_path_bytes = target.encode("ascii")
        # A chunked body may spend up to max_head_size on chunk lines and
        # trailers on top of the ask itself; past that it is refused (413).
        self._body_cap = max_ask_size + max_head_size
        self._reading = _Reading.HEAD
        self._verdict: Ask | Refusal | HealthCheck | None = None
        self._interim = b""
        self._scanned = 0
        self._head_size = 0
        self._fed = 0
        self._body = bytearray()
        self._head_request = False
        self._request_seen = False
        self._http = h11.Connection(
            h11.SERVER, max_incomplete_event_size=max_head_size + self._body_cap + 1
        )

    @property
    def over(self) -> bool:
        """True once the verdict was given: what arrives after it is not read."""
        return self._reading is _Reading.OVER

    @property
    def room(self) -> int:
        """How many more bytes may be buffered for it: past them no byte can change the verdict."""
        return self._max_head_size + self._body_cap - self._fed

    def read(self, buffer: bytearray, eof: bool) -> Ask | Refusal | HealthCheck | None:
        """Read what ``buffer`` holds (taking it from its front); the verdict, once there is one.

        ``eof`` says that nothing more will arrive.
        """
        if self._reading is _Reading.HEAD:
            self._read_head(buffer, eof)
        if self._reading is _Reading.HTTP:
            self._read_http(buffer, eof)
        verdict, self._verdict = self._verdict, None
        return verdict

    def take_interim(self) -> bytes:
        """The ``100 Continue`` to send before the verdict, once (else ``b""``)."""
        interim, self._interim = self._interim, b""
        return interim

    def _read_head(self, buffer: bytearray, eof: bool) -> None:
        # The head is handed to h11 only once it is complete (or cannot be),
        # so that the verdict depends on the bytes and never on how they
        # were split: h11 alone would answer 431 or 400 differently for a
        # head fed whole and the same head fed byte by byte.
        if not buffer:
            return
        if buffer[0] < 0x21:
            self._refuse(400, _REASON_BAD_LINE)
            return
        limit = self._max_head_size
        end = min(len(buffer), limit)
        match = HEAD_END.search(buffer, max(0, self._scanned - 2), end)
        if match is None:
            self._scanned = end
            if len(buffer) >= limit:
                self._refuse(431, _REASON_HEAD_TOO_LARGE.format(limit=limit))
            elif eof:
                self._refuse(400, _REASON_HEAD_CUT)
            return
        self._head_size = match.end()
        self._reading = _Reading.HTTP

    def _read_http(self, buffer: bytearray, eof: bool) -> None:
        while self._reading is _Reading.HTTP:
            cap = self._head_size + self._body_cap
            if buffer and self._fed < cap:
                take = min(len(buffer), cap - self._fed)
                self._http.receive_data(bytes(buffer[:take]))
                del buffer[:take]
                self._fed += take
            if eof and not buffer:
                self._http.receive_data(b"")
            try:
                event = self._http.next_event()
            except h11.RemoteProtocolError as error:
                status = error.error_status_hint
                if status == 431:  # not reached with the head gated above; kept total
                    self._refuse(431, _REASON_HEAD_TOO_LARGE.format(limit=self._max_head_size))
                elif self._request_seen:
                    # In the body h11's messages quote however many bytes it
                    # had buffered, which depends on the split: say it plainly.
                    self._refuse(status, _body_reason(str(error)))
                else:
                    detail = _shorten(str(error)) or "the request is not valid HTTP/1.1"
                    self._refuse(status, f"malformed HTTP request: {detail}")
                return
            except Exception as error:
                # h11 lets a few conversion errors through (e.g. ValueError for
                # a Content-Length with more digits than int() accepts).
                self._refuse(400, f"malformed HTTP request: {_shorten(str(error))}")
                return
            if event is h11.NEED_DATA:
                if self._fed >= cap:
                    self._refuse(413, _REASON_TOO_LARGE.format(limit=self._max_ask_size))
                return
            if isinstance(event, h11.Request):
                self._on_request(event)
            elif isinstance(event, h11.Data):
                self._body += event.data
                if len(self._body) > self._max_ask_size:
                    self._refuse(413, _REASON_TOO_LARGE.format(limit=self._max_ask_size))
            elif isinstance(event, h11.EndOfMessage):
                self._reading = _Reading.OVER
                try:
                    self._verdict = decode_ask(self._body)
                except AskError as error:
                    self._refuse(400, f"malformed ask: {error.detail}")
                self._body = bytearray()
            else:  # pragma: no cover - h11 produces nothing else before the request ends
                self._refuse(400, "malformed HTTP request")

    def _on_request(self, request: h11.Request) -> None:
        self._request_seen = True
        method = request.method
        self._head_request = method == b"HEAD"
        path = target_path(request.target)
        check = HEALTH_CHECKS.get(path)
        if check is not None and method in _HEALTH_METHODS:
            # Decided on the head, with no token: a probe learns whether the
            # server serves, and nothing else.
            self._reading = _Reading.OVER
            self._body = bytearray()
            self._verdict = HealthCheck(check, self._head_request)
            return
        if path != self._ask_path_bytes:
            self._refuse(404, _REASON_NOT_FOUND.format(path=self._ask_path))
            return
        if method != b"POST":
            self._refuse(
                405, _REASON_METHOD.format(path=self._ask_path), extra=(("Allow", "POST"),)
            )
            return
        if request.http_version != b"1.1":
            self._refuse(505, _REASON_VERSION)
            return
        authorizations: list[bytes] = []
        content_length: int | None = None
        expect_continue = False
        for name, value in request.headers:
            if name == b"authorization":
                authorizations.append(value)
            elif name == b"content-length":
                content_length = int(value)  # h11 checked it is one decimal number
            elif name == b"expect" and value.lower() == b"100-continue":
                expect_continue = True
        if self._tokens:
            matched = self._authorized(authorizations)
            if matched is None:
                self._refuse(401, _REASON_UNAUTHORIZED, extra=(("WWW-Authenticate", "Bearer"),))
                return
            if len(self._tokens) > 1:
                # With one token every path belongs to it: no audience to tell apart.
                self.audience = audience_of(matched.decode("ascii"))
        if content_length is not None and content_length > self._max_ask_size:
            self._refuse(413, _REASON_TOO_LARGE.format(limit=self._max_ask_size))
            return
        if expect_continue:
            self._interim = CONTINUE_RESPONSE

    def _authorized(self, authorizations: list[bytes]) -> bytes | None:
        """The accepted token the request carried, or ``None``."""
        if len(authorizations) != 1:
            return None
        scheme, _, credentials = authorizations[0].partition(b" ")
        if scheme.lower() != b"bearer":
            return None
        credentials = credentials.strip(b" \t")
        # Constant time in the tokens' content, so that timing does not
        # reveal how much of a guess was right: every token is compared,
        # whichever matched.
        matched: bytes | None = None
        for token in self._tokens:
            if hmac.compare_digest(credentials, token):
                matched = token
        return matched

    def _refuse(self, status: int, reason: str, *, extra: tuple[tuple[str, str], ...] = ()) -> None:
        self._reading = _Reading.OVER
        self._body = bytearray()
        self._verdict = Refusal(status, reason, extra, self._head_request)
