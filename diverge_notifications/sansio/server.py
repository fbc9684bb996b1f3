"""The server side: reading an ask, answering it, and writing a notification path.

A :class:`ServerConnection` serves exactly one ask on one HTTP/1.1
connection (DESIGN §4: one ask per connection, ``Connection: close`` on
every response). It reads the request with h11 and turns it into one of
three events:

* :class:`NotificationsAsked` — a valid kind-4 ask; the application writes
  the path with :meth:`ServerConnection.start_path`,
  :meth:`~ServerConnection.send_notification`, ... and ends it;
* :class:`ExchangeAsked` — a valid kind 0-3 ask; the application answers
  once (:meth:`~ServerConnection.answer`,
  :meth:`~ServerConnection.answer_error`) or declines;
* :class:`AskRefused` — anything else; the HTTP error response is already
  queued in :meth:`~ServerConnection.data_to_send`.

Every connection ends with exactly one :class:`ConnectionClosed`: when the
peer closes, or when this side's answer is complete (the ask refused, the
path or the answer ended). Then close the socket once the bytes are out.

The writing side follows one transition table, :data:`SERVER_TRANSITIONS`
(provider profile) and :data:`SERVER_TRANSITIONS_BY_PROFILE`; anything the
table does not allow raises :class:`LocalProtocolError` and changes nothing.

:class:`ContainerWriter` applies the same sequence rules at payload level
(seed 001's channel responses), with no HTTP at all.
"""

from __future__ import annotations

import enum
import hmac
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, Final

import h11

from ._errors import AskError, FrameError, LocalProtocolError
from ._json import JsonError, dumps, parse
from .asks import Ask, Exchange, decode_ask
from .events import (
    NEED_DATA,
    AskRefused,
    ConnectionClosed,
    Event,
    EventOrNeedData,
    ExchangeAsked,
    NotificationsAsked,
)
from .framing import DEFAULT_MAX_FRAME_SIZE
from .http import (
    ASK_PATH,
    CONTINUE_RESPONSE,
    HEAD_END,
    KEEPALIVE_CHUNK,
    LAST_CHUNK,
    ChannelIds,
    answer_head,
    check_token,
    pack_length,
    refusal_response,
    target_path,
)
from .mcp import ErrorData, Notification
from .sequence import Profile

__all__ = [
    "CONTAINER_SERVER_TRANSITIONS",
    "SERVER_TRANSITIONS",
    "SERVER_TRANSITIONS_BY_PROFILE",
    "WRITER_TRANSITIONS",
    "ContainerWriter",
    "NotificationLike",
    "ServerConnection",
    "ServerInput",
    "ServerOutcome",
    "ServerState",
    "WriterInput",
    "WriterState",
]

#: What a notification may be given as: an object, a mapping, or raw JSON bytes.
NotificationLike = Notification | Mapping[str, Any] | bytes | bytearray | memoryview
# --- the transition table ------------------------------------------------------


class ServerState(enum.Enum):
    """Where a :class:`ServerConnection` is."""

    #: Reading the request.
    AWAITING_ASK = "awaiting ask"
    #: A kind-4 ask arrived; nothing written yet.
    NOTIFICATIONS_ASKED = "notifications asked"
    #: A kind 0-3 ask arrived; nothing written yet.
    EXCHANGE_ASKED = "exchange asked"
    #: The 200 head is written; no notification yet (keep-alives do not count).
    PATH_OPEN = "path open"
    #: One or more notifications written.
    PATH_NOTIFYING = "path notifying"
    #: The answer is complete (clean end written); close the connection.
    DONE = "done"
    #: The ask was refused; the error response is queued; close the connection.
    REFUSED = "refused"
    #: The peer closed the connection before asking.
    CLOSED = "closed"


class ServerInput(enum.Enum):
    """What can happen to a :class:`ServerConnection`: an ask arriving, or a write."""

    NOTIFICATIONS_ASK = "kind-4 ask"
    EXCHANGE_ASK = "kind 0-3 ask"
    INVALID_ASK = "invalid request"
    PEER_CLOSED = "peer closed"
    START_PATH = "start_path"
    NOTIFICATION = "send_notification"
    KEEPALIVE = "send_keepalive"
    ERROR = "send_error"
    END = "end_path"
    DECLINE = "decline"
    ANSWER = "answer / answer_error"


class ServerOutcome(enum.Enum):
    """What a transition produces: an event, or bytes to write."""

    NOTIFICATIONS_ASKED = "NotificationsAsked"
    EXCHANGE_ASKED = "ExchangeAsked"
    REFUSED = "AskRefused (error response queued)"
    CLOSED = "ConnectionClosed"
    HEAD = "200 head"
    FRAME = "notification frame"
    KEEPALIVE = "keep-alive frame"
    ERROR_AND_END = "error frame + clean end"
    END = "clean end"
    HEAD_AND_END = "200 head + clean end (not served)"
    ANSWER = "200 head + one frame + clean end"


_S = ServerState
_I = ServerInput
_O = ServerOutcome

_ServerTable = Mapping[tuple[ServerState, ServerInput], tuple[ServerState, ServerOutcome]]

#: (state, input) -> (next state, outcome) for the provider profile (seed 000):
#: notifications, then at most one error, then the clean end. A pair that is
#: not in the table is refused with :class:`LocalProtocolError`.
SERVER_TRANSITIONS: Final[_ServerTable] = {
    (_S.AWAITING_ASK, _I.NOTIFICATIONS_ASK): (_S.NOTIFICATIONS_ASKED, _O.NOTIFICATIONS_ASKED),
    (_S.AWAITING_ASK, _I.EXCHANGE_ASK): (_S.EXCHANGE_ASKED, _O.EXCHANGE_ASKED),
    (_S.AWAITING_ASK, _I.INVALID_ASK): (_S.REFUSED, _O.REFUSED),
    (_S.AWAITING_ASK, _I.PEER_CLOSED): (_S.CLOSED, _O.CLOSED),
    (_S.NOTIFICATIONS_ASKED, _I.START_PATH): (_S.PATH_OPEN, _O.HEAD),
    (_S.NOTIFICATIONS_ASKED, _I.DECLINE): (_S.DONE, _O.HEAD_AND_END),
    (_S.EXCHANGE_ASKED, _I.ANSWER): (_S.DONE, _O.ANSWER),
    (_S.EXCHANGE_ASKED, _I.DECLINE): (_S.DONE, _O.HEAD_AND_END),
    (_S.PATH_OPEN, _I.NOTIFICATION): (_S.PATH_NOTIFYING, _O.FRAME),
    (_S.PATH_OPEN, _I.KEEPALIVE): (_S.PATH_OPEN, _O.KEEPALIVE),
    (_S.PATH_OPEN, _I.ERROR): (_S.DONE, _O.ERROR_AND_END),
    (_S.PATH_OPEN, _I.END): (_S.DONE, _O.END),
    (_S.PATH_OPEN, _I.DECLINE): (_S.DONE, _O.END),
    (_S.PATH_NOTIFYING, _I.NOTIFICATION): (_S.PATH_NOTIFYING, _O.FRAME),
    (_S.PATH_NOTIFYING, _I.KEEPALIVE): (_S.PATH_NOTIFYING, _O.KEEPALIVE),
    (_S.PATH_NOTIFYING, _I.ERROR): (_S.DONE, _O.ERROR_AND_END),
    (_S.PATH_NOTIFYING, _I.END): (_S.DONE, _O.END),
}

#: The container profile (seeds 001/003): once a notification is written the
#: path takes neither an error nor an end; an error comes first or not at all.
CONTAINER_SERVER_TRANSITIONS: Final[_ServerTable] = {
    key: value
    for key, value in SERVER_TRANSITIONS.items()
    if key not in {(_S.PATH_NOTIFYING, _I.ERROR), (_S.PATH_NOTIFYING, _I.END)}
}

#: The table in force for each profile.
SERVER_TRANSITIONS_BY_PROFILE: Final[Mapping[Profile, _ServerTable]] = {
    Profile.PROVIDER: SERVER_TRANSITIONS,
    Profile.CONTAINER: CONTAINER_SERVER_TRANSITIONS,
}

_NOTIFYING: Final = ServerState.PATH_NOTIFYING
_IN_NOTIFICATION: Final = ServerInput.NOTIFICATION
# send_notification skips the table on its hot path; this is what it assumes.
assert all(
    table[(_NOTIFYING, _IN_NOTIFICATION)] == (_NOTIFYING, ServerOutcome.FRAME)
    for table in SERVER_TRANSITIONS_BY_PROFILE.values()
)

_WHY_REFUSED: Final[Mapping[tuple[ServerState, ServerInput], str]] = {
    (_S.PATH_NOTIFYING, _I.ERROR): "an error after a notification violates the container profile",
    (_S.PATH_NOTIFYING, _I.END): "an end after notifications violates the container profile",
}


# --- encoding helpers ----------------------------------------------------------


def _notification_json(item: NotificationLike) -> bytes:
    """The JSON bytes of a notification given as an object, a mapping or raw JSON."""
    if isinstance(item, Notification):
        return item.to_bytes()
    try:
        if isinstance(item, (bytes, bytearray, memoryview)):
            raw = bytes(item)
            Notification.from_bytes(raw)  # validation only: the bytes go out unchanged
            return raw
        if isinstance(item, Mapping):
            return Notification.from_json(item).to_bytes()
    except FrameError as error:
        raise LocalProtocolError(f"not a notification: {error.detail}") from None
    raise TypeError(f"expected a Notification, a mapping or JSON bytes, not {type(item).__name__}")


def _result_json(result: Mapping[str, Any] | bytes) -> bytes:
    """The JSON bytes of a one-shot result: a JSON object."""
    if isinstance(result, (bytes, bytearray, memoryview)):
        raw = bytes(result)
        try:
            value = parse(raw)
        except JsonError as error:
            raise LocalProtocolError(f"the result is not valid JSON: {error}") from None
        if not isinstance(value, dict):
            raise LocalProtocolError("the result must be a JSON object")
        return raw
    if isinstance(result, Mapping):
        try:
            raw = dumps(dict(result))
        except (TypeError, ValueError) as error:
            raise LocalProtocolError(f"the result is not JSON-encodable: {error}") from None
        try:
            # Encodable is not enough: too deep or too large a number is
            # refused here exactly as the proxy would refuse it.
            parse(raw)
        except JsonError as error:
            raise LocalProtocolError(f"the result is not valid JSON: {error}") from None
        return raw
    raise TypeError(f"expected a mapping or JSON bytes, not {type(result).__name__}")


def _check_payload(json: bytes, limit: int) -> None:
    if len(json) + 1 > limit:
        raise LocalProtocolError(
            f"a message of {len(json) + 1} bytes is larger than the frame limit of {limit} bytes"
        )


def _chunk_of_one(tag: bytes, json: bytes) -> bytes:
    # One HTTP chunk holding one frame, built in a single formatting step:
    # chunk size line, 4-byte length, tag, JSON, chunk end.
    payload = len(json) + 1
    return b"%x\r\n%b%b%b\r\n" % (payload + 4, pack_length(payload), tag, json)


_NOTIFICATION_TAG: Final = b"\x00"
_ERROR_TAG: Final = b"\x01"


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- reading the request -------------------------------------------------------


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


class ServerConnection:
    """One ask on one HTTP/1.1 connection, from the server's side.

    Feed received bytes with :meth:`receive_data` (``b""`` = end of file) and
    read events with :meth:`next_event`; after each call, send
    :meth:`data_to_send` (refusals and ``100 Continue`` are queued there).
    After :class:`NotificationsAsked` write the path with :meth:`start_path`,
    :meth:`send_notification`, :meth:`send_notifications`,
    :meth:`send_keepalive`, and end it with :meth:`end_path` or
    :meth:`send_error` (or :meth:`decline` it); after :class:`ExchangeAsked`
    call :meth:`answer`, :meth:`answer_error` or :meth:`decline`. Each write
    returns the bytes to send.

    Limits: the request head may be at most ``max_head_size`` bytes (else
    431) and the ask body at most ``max_ask_size`` bytes (else 413; decided
    on ``Content-Length`` before the body is read, and while a chunked body
    is read). Messages written are at most ``max_frame_size`` bytes, the
    proxy's default limit, so that a write the peer would reject as an
    abrupt end is refused here instead.

    ``target`` is the path asks are posted to (``/requests``, or a base
    path's ``/base/requests``), as :class:`~.proxy.ProxyConnection` names it;
    it must start with ``/``. A ``token`` that is not usable (see
    :func:`check_token`) is a :class:`ValueError`.

    ``next_event()`` never raises for any bytes received: every peer
    mistake is an :class:`AskRefused`. The events it produces do not depend
    on how the bytes were split across :meth:`receive_data` calls.
    """

    def __init__(
        self,
        *,
        token: str | None = None,
        profile: Profile = Profile.PROVIDER,
        channel_ids: ChannelIds | None = None,
        max_ask_size: int = 64 * 1024,
        max_head_size: int = 16 * 1024,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        target: str = ASK_PATH,
    ) -> None:
        check_token(token)
        if max_ask_size < 1 or max_head_size < 16 or max_frame_size < 1:
            raise ValueError("max_ask_size and max_frame_size must be >= 1, max_head_size >= 16")
        if not target.startswith("/"):
            raise ValueError("target must start with '/'")
        self._token = None if token is None else token.encode("ascii")
        self._profile = Profile(profile)
        self._table = SERVER_TRANSITIONS_BY_PROFILE[self._profile]
        self._channel_ids = channel_ids if channel_ids is not None else ChannelIds()
        self._max_ask_size = max_ask_size
        self._max_head_size = max_head_size
        self._max_frame_size = max_frame_size
        self._ask_path = target
        self._ask_path_bytes = target.encode("ascii")
        # A chunked body may spend up to max_head_size on chunk lines and
        # trailers on top of the ask itself; past that it is refused (413).
        self._body_cap = max_ask_size + max_head_size
        self._state = ServerState.AWAITING_ASK
        self._events: deque[Event] = deque()
        self._outgoing = bytearray()
        self._closed_queued = False
        self._eof = False
        self._channel: str | None = None
        self._ask: Ask | None = None
        # Reading state.
        self._reading = _Reading.HEAD
        self._buffer = bytearray()
        self._scanned = 0
        self._head_size = 0
        self._fed = 0
        self._body = bytearray()
        self._head_request = False
        self._request_seen = False
        self._http = h11.Connection(
            h11.SERVER, max_incomplete_event_size=max_head_size + self._body_cap + 1
        )

    # --- properties --------------------------------------------------------

    @property
    def state(self) -> ServerState:
        """The state of this side (see :data:`SERVER_TRANSITIONS`)."""
        return self._state

    @property
    def profile(self) -> Profile:
        """The sequence rules writes follow."""
        return self._profile

    @property
    def channel(self) -> str | None:
        """The channel minted for the ask, once one was accepted."""
        return self._channel

    @property
    def ask(self) -> Ask | None:
        """The accepted ask, once one was accepted."""
        return self._ask

    @property
    def path_open(self) -> bool:
        """True between :meth:`start_path` and the path's end."""
        return self._state in (ServerState.PATH_OPEN, ServerState.PATH_NOTIFYING)

    @property
    def peer_closed(self) -> bool:
        """True once end of file was received."""
        return self._eof

    @property
    def closed(self) -> bool:
        """True once the connection has nothing left to do but close.

        That is: the ask was refused, the answer or path ended, or the peer
        closed the connection. Send what is queued, then close the socket.
        """
        return self._eof or self._state in (ServerState.DONE, ServerState.REFUSED, _S.CLOSED)

    # --- receiving ---------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Bytes received from the peer; ``b""`` means end of file (may be repeated).

        Raises :class:`LocalProtocolError` for data after end of file.
        """
        if not data:
            self._eof = True
            return
        if self._eof:
            raise LocalProtocolError("data received after end of file")
        if self._reading is _Reading.OVER:
            return  # one ask per connection: what follows it is discarded
        # Bytes past the head limit plus the body cap can never change the
        # verdict (see _advance), so they are not kept.
        room = self._max_head_size + self._body_cap - self._fed - len(self._buffer)
        if room > 0:
            self._buffer += data[:room] if len(data) > room else data

    def next_event(self) -> EventOrNeedData:
        """The next event, or :data:`NEED_DATA`. Never raises for anything the peer sent."""
        if not self._events and self._reading is not _Reading.OVER:
            self._advance()
        if self._events:
            return self._events.popleft()
        if not self._closed_queued and self._eof:
            if self._state is ServerState.AWAITING_ASK:
                self._state = ServerState.CLOSED
            self._closed_queued = True
            return ConnectionClosed()
        return NEED_DATA

    def data_to_send(self) -> bytes:
        """Bytes the library queued on its own (refusals, ``100 Continue``), once."""
        data = bytes(self._outgoing)
        self._outgoing.clear()
        return data

    def _advance(self) -> None:
        if self._reading is _Reading.HEAD:
            self._read_head()
        if self._reading is _Reading.HTTP:
            self._read_http()

    def _read_head(self) -> None:
        # The head is handed to h11 only once it is complete (or cannot be),
        # so that the verdict depends on the bytes and never on how they
        # were split: h11 alone would answer 431 or 400 differently for a
        # head fed whole and the same head fed byte by byte.
        buffer = self._buffer
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
            elif self._eof:
                self._refuse(400, _REASON_HEAD_CUT)
            return
        self._head_size = match.end()
        self._reading = _Reading.HTTP

    def _read_http(self) -> None:
        while self._reading is _Reading.HTTP:
            cap = self._head_size + self._body_cap
            if self._buffer and self._fed < cap:
                take = min(len(self._buffer), cap - self._fed)
                self._http.receive_data(bytes(self._buffer[:take]))
                del self._buffer[:take]
                self._fed += take
            if self._eof and not self._buffer:
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
                self._on_body_complete()
            else:  # pragma: no cover - h11 produces nothing else before the request ends
                self._refuse(400, "malformed HTTP request")

    def _on_request(self, request: h11.Request) -> None:
        self._request_seen = True
        method = request.method
        self._head_request = method == b"HEAD"
        if target_path(request.target) != self._ask_path_bytes:
            self._refuse(404, _REASON_NOT_FOUND.format(path=self._ask_path))
            return
        if method != b"POST":
            self._refuse(405, _REASON_METHOD.format(path=self._ask_path), extra=[("Allow", "POST")])
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
        if self._token is not None and not self._authorized(authorizations):
            self._refuse(401, _REASON_UNAUTHORIZED, extra=[("WWW-Authenticate", "Bearer")])
            return
        if content_length is not None and content_length > self._max_ask_size:
            self._refuse(413, _REASON_TOO_LARGE.format(limit=self._max_ask_size))
            return
        if expect_continue:
            self._outgoing += CONTINUE_RESPONSE

    def _authorized(self, authorizations: list[bytes]) -> bool:
        assert self._token is not None
        if len(authorizations) != 1:
            return False
        scheme, _, credentials = authorizations[0].partition(b" ")
        if scheme.lower() != b"bearer":
            return False
        # Constant time in the token's content, so that timing does not
        # reveal how much of a guess was right.
        return hmac.compare_digest(credentials.strip(b" \t"), self._token)

    def _on_body_complete(self) -> None:
        self._reading = _Reading.OVER
        self._buffer = bytearray()
        try:
            ask = decode_ask(self._body)
        except AskError as error:
            self._refuse(400, f"malformed ask: {error.detail}")
            return
        self._body = bytearray()
        self._ask = ask
        try:
            self._channel = self._channel_ids.mint()
        except LocalProtocolError:
            # Only reachable by a ChannelIds pushed past 10**20 ids: the
            # server's trouble, answered as such rather than raised at the peer.
            self._refuse(503, "the server has no channel id left to give")
            return
        if ask.exchange is Exchange.NOTIFICATIONS:
            self._state = ServerState.NOTIFICATIONS_ASKED
            self._events.append(NotificationsAsked(channel=self._channel))
        else:
            self._state = ServerState.EXCHANGE_ASKED
            self._events.append(ExchangeAsked(ask=ask, channel=self._channel))

    def _refuse(self, status: int, reason: str, *, extra: Iterable[tuple[str, str]] = ()) -> None:
        self._reading = _Reading.OVER
        self._buffer = bytearray()
        self._body = bytearray()
        self._state = ServerState.REFUSED
        self._outgoing += refusal_response(
            status, reason, extra=extra, head_only=self._head_request
        )
        self._events.append(AskRefused(status=status, reason=reason))
        self._queue_closed()

    def _queue_closed(self) -> None:
        if not self._closed_queued:
            self._closed_queued = True
            self._events.append(ConnectionClosed())

    # --- writing -----------------------------------------------------------

    def _next_state(self, what: ServerInput) -> ServerState:
        """The state after ``what``, or :class:`LocalProtocolError`; changes nothing."""
        found = self._table.get((self._state, what))
        if found is None:
            why = _WHY_REFUSED.get((self._state, what))
            if why is None or self._profile is not Profile.CONTAINER:
                why = f"{what.value} is not allowed in state {self._state.name}"
            raise LocalProtocolError(why)
        return found[0]

    def _enter(self, state: ServerState) -> None:
        self._state = state
        if state is ServerState.DONE:
            self._queue_closed()

    def _location(self) -> str:
        assert self._ask is not None and self._channel is not None
        return f"/mcp/{self._ask.exchange.name.lower()}/{self._channel}"

    def start_path(self) -> bytes:
        """The 200 head that opens the path, after :class:`NotificationsAsked`."""
        state = self._next_state(ServerInput.START_PATH)
        head = answer_head(self._location())
        self._enter(state)
        return head

    def send_notification(self, notification: NotificationLike) -> bytes:
        """One notification, as one frame in one HTTP chunk.

        ``notification`` is a :class:`Notification`, a mapping (encoded as
        compact JSON), or raw JSON bytes that are checked to decode as a
        notification and then relayed unchanged. Raises
        :class:`LocalProtocolError` if it is not a notification, if the
        message exceeds ``max_frame_size``, or if the path does not take one.
        """
        # The hot path of a busy server: once a path carries notifications it
        # takes more in every profile (checked against the table at import),
        # so the table lookup is skipped; enum hashing costs more than the
        # rest of this method.
        state = self._state
        following = state if state is _NOTIFYING else self._next_state(_IN_NOTIFICATION)
        if type(notification) is Notification:
            json = notification.to_bytes()
        else:
            json = _notification_json(notification)
        payload = len(json) + 1
        if payload > self._max_frame_size:
            _check_payload(json, self._max_frame_size)
        self._state = following
        return b"%x\r\n%b\x00%b\r\n" % (payload + 4, pack_length(payload), json)

    def send_notifications(self, notifications: Iterable[NotificationLike]) -> bytes:
        """Several notifications, one frame each, in ONE HTTP chunk.

        Every item is checked before anything changes, as for
        :meth:`send_notification`. An empty iterable returns ``b""`` (an empty
        chunk would end the body).
        """
        state = self._state
        state = state if state is _NOTIFYING else self._next_state(_IN_NOTIFICATION)
        parts: list[bytes] = [b""]
        size = 0
        limit = self._max_frame_size
        for item in notifications:
            json = item.to_bytes() if type(item) is Notification else _notification_json(item)
            payload = len(json) + 1
            if payload > limit:
                _check_payload(json, limit)
            parts.append(pack_length(payload) + _NOTIFICATION_TAG)
            parts.append(json)
            size += payload + 4
        if size == 0:
            return b""
        parts[0] = b"%x\r\n" % size
        parts.append(b"\r\n")
        self._state = state
        return b"".join(parts)

    def send_keepalive(self) -> bytes:
        """A keep-alive frame (a zero length), so that an idle path survives."""
        self._enter(self._next_state(ServerInput.KEEPALIVE))
        return KEEPALIVE_CHUNK

    def send_error(self, error: ErrorData) -> bytes:
        """The error message, then the clean end: the path is over."""
        state = self._next_state(ServerInput.ERROR)
        json = _error_json(error)
        _check_payload(json, self._max_frame_size)
        self._enter(state)
        return _chunk_of_one(_ERROR_TAG, json) + LAST_CHUNK

    def end_path(self) -> bytes:
        """The clean end of the path (with no message before it: not served)."""
        self._enter(self._next_state(ServerInput.END))
        return LAST_CHUNK

    def decline(self) -> bytes:
        """Not served: the 200 head (unless already written) and a clean, empty end."""
        state = self._next_state(ServerInput.DECLINE)
        data = LAST_CHUNK if self.path_open else answer_head(self._location()) + LAST_CHUNK
        self._enter(state)
        return data

    def answer(self, result: Mapping[str, Any] | bytes) -> bytes:
        """Answer a kind 0-3 ask: the 200 head, ``[0][result]`` and the clean end.

        ``result`` is the MCP result object, as a mapping or as raw JSON
        bytes (checked to be one JSON object, then relayed unchanged).
        Raises :class:`LocalProtocolError` if it is not one (a mapping's
        values are checked as a notification's are) or if the message
        exceeds ``max_frame_size``.
        """
        state = self._next_state(ServerInput.ANSWER)
        json = _result_json(result)
        _check_payload(json, self._max_frame_size)
        data = answer_head(self._location()) + _chunk_of_one(_NOTIFICATION_TAG, json) + LAST_CHUNK
        self._enter(state)
        return data

    def answer_error(self, error: ErrorData) -> bytes:
        """Answer a kind 0-3 ask with an error: the 200 head, ``[1][error]`` and the clean end."""
        state = self._next_state(ServerInput.ANSWER)
        json = _error_json(error)
        _check_payload(json, self._max_frame_size)
        data = answer_head(self._location()) + _chunk_of_one(_ERROR_TAG, json) + LAST_CHUNK
        self._enter(state)
        return data


def _error_json(error: ErrorData) -> bytes:
    if not isinstance(error, ErrorData):
        raise TypeError(f"expected an ErrorData, not {type(error).__name__}")
    return error.to_bytes()


# --- the payload-level writer ----------------------------------------------------


class WriterState(enum.Enum):
    """Where a :class:`ContainerWriter` is."""

    #: Nothing written yet.
    EMPTY = "empty"
    #: One or more notifications written.
    NOTIFYING = "notifying"
    #: The error was written; the finish must follow.
    ERRORED = "errored"
    #: Finished; nothing more may be written.
    FINISHED = "finished"


class WriterInput(enum.Enum):
    """What a :class:`ContainerWriter` is asked to write."""

    NOTIFICATION = "notification"
    ERROR = "error"
    FINISH = "finish"


_WS = WriterState
_WI = WriterInput

#: (profile, state, input) -> next state. A triple that is not in the table
#: raises :class:`LocalProtocolError`.
WRITER_TRANSITIONS: Final[Mapping[tuple[Profile, WriterState, WriterInput], WriterState]] = {
    # container (seed 001): [0]* and no finish, or one [1] first and then the finish
    (Profile.CONTAINER, _WS.EMPTY, _WI.NOTIFICATION): _WS.NOTIFYING,
    (Profile.CONTAINER, _WS.EMPTY, _WI.ERROR): _WS.ERRORED,
    (Profile.CONTAINER, _WS.EMPTY, _WI.FINISH): _WS.FINISHED,
    (Profile.CONTAINER, _WS.NOTIFYING, _WI.NOTIFICATION): _WS.NOTIFYING,
    (Profile.CONTAINER, _WS.ERRORED, _WI.FINISH): _WS.FINISHED,
    # provider (seed 000): [0]* then at most one [1], then the end
    (Profile.PROVIDER, _WS.EMPTY, _WI.NOTIFICATION): _WS.NOTIFYING,
    (Profile.PROVIDER, _WS.EMPTY, _WI.ERROR): _WS.ERRORED,
    (Profile.PROVIDER, _WS.EMPTY, _WI.FINISH): _WS.FINISHED,
    (Profile.PROVIDER, _WS.NOTIFYING, _WI.NOTIFICATION): _WS.NOTIFYING,
    (Profile.PROVIDER, _WS.NOTIFYING, _WI.ERROR): _WS.ERRORED,
    (Profile.PROVIDER, _WS.NOTIFYING, _WI.FINISH): _WS.FINISHED,
    (Profile.PROVIDER, _WS.ERRORED, _WI.FINISH): _WS.FINISHED,
}


class ContainerWriter:
    """Writes seed 001's sequence of channel responses, payload by payload.

    :meth:`notification` returns the payload ``[0][JSON]`` and
    :meth:`error` the payload ``[1][JSON]``; :meth:`finish` records the
    channel response finish, which the caller's transport sends. The
    profile's rules are enforced: in the container profile (the default) a
    channel carries notifications and is never finished while the
    connection lives, or carries one error first and is then finished; a
    finish with nothing before it says the ask was not served. Anything
    else raises :class:`LocalProtocolError` and changes nothing.
    """

    __slots__ = ("_profile", "_state")

    def __init__(self, profile: Profile = Profile.CONTAINER) -> None:
        self._profile = Profile(profile)
        self._state = WriterState.EMPTY

    @property
    def profile(self) -> Profile:
        """The sequence rules in force."""
        return self._profile

    @property
    def state(self) -> WriterState:
        """Where the sequence is."""
        return self._state

    @property
    def finish_required(self) -> bool:
        """True after the error: :meth:`finish` must come next."""
        return self._state is WriterState.ERRORED

    def _next(self, what: WriterInput) -> WriterState:
        found = WRITER_TRANSITIONS.get((self._profile, self._state, what))
        if found is None:
            if self._state is WriterState.NOTIFYING and self._profile is Profile.CONTAINER:
                raise LocalProtocolError(
                    f"{what.value} after a notification violates the container profile"
                )
            raise LocalProtocolError(f"{what.value} is not allowed in state {self._state.name}")
        return found

    def notification(self, notification: NotificationLike) -> bytes:
        """The payload of one notification: ``[0]`` + its JSON (raw bytes relayed unchanged)."""
        state = self._next(WriterInput.NOTIFICATION)
        payload = _NOTIFICATION_TAG + _notification_json(notification)
        self._state = state
        return payload

    def error(self, error: ErrorData) -> bytes:
        """The payload of the error, ``[1]`` + its JSON; :meth:`finish` is required next."""
        state = self._next(WriterInput.ERROR)
        payload = _ERROR_TAG + _error_json(error)
        self._state = state
        return payload

    def finish(self) -> None:
        """Record the finish; raises :class:`LocalProtocolError` where the profile forbids it."""
        self._state = self._next(WriterInput.FINISH)
