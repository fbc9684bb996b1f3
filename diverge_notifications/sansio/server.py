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

Both sides of the connection follow one transition table,
:data:`SERVER_TRANSITIONS` (provider profile; the table in force for each
profile is in :data:`SERVER_TRANSITIONS_BY_PROFILE`): an ask arriving, a
refusal and the peer closing before it asked are inputs of the table as
much as every write is. Each input is looked up and the connection does
what the outcome found there says; a write the table does not allow raises
:class:`LocalProtocolError` and changes nothing. The path's rows come from
the profile grammar (:data:`~.sequence.PROFILE_GRAMMAR`), which the reader
and the container writer (:mod:`.writer`) follow too.
"""

from __future__ import annotations

import enum
import hmac
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final, NamedTuple

import h11

from ._errors import AskError, LocalProtocolError
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
from .framing import DEFAULT_MAX_FRAME_SIZE, PREFIX_SIZE
from .http import (
    ASK_PATH,
    CONTINUE_RESPONSE,
    HEAD_END,
    KEEPALIVE_CHUNK,
    LAST_CHUNK,
    ChannelIds,
    answer_head,
    check_token,
    refusal_response,
    target_path,
)
from .mcp import ErrorData, Notification
from .messages import (
    ERROR_TAG,
    NOTIFICATION_TAG,
    NotificationLike,
    as_error,
    as_notification,
    pack_frame_head,
)
from .sequence import GrammarPoint, Part, Profile, allows, violates_profile

__all__ = [
    "CONTAINER_SERVER_TRANSITIONS",
    "SERVER_TRANSITIONS",
    "SERVER_TRANSITIONS_BY_PROFILE",
    "ServerConnection",
    "ServerInput",
    "ServerOutcome",
    "ServerState",
]

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
_Row = tuple[tuple[ServerState, ServerInput], tuple[ServerState, ServerOutcome]]

#: The path's states, by the point of the profile grammar each stands for.
_PATH_POINTS: Final[Mapping[ServerState, GrammarPoint]] = {
    _S.PATH_OPEN: None,
    _S.PATH_NOTIFYING: Part.NOTIFICATION,
}
#: The writes that are parts of the grammar.
_PATH_PARTS: Final[Mapping[ServerInput, Part]] = {
    _I.NOTIFICATION: Part.NOTIFICATION,
    _I.ERROR: Part.ERROR,
    _I.END: Part.FINISH,
}


def _path_rows(profile: Profile, state: ServerState, after: GrammarPoint) -> Iterator[_Row]:
    """The rows of one path state: what the grammar lets follow ``after``, and keep-alives."""
    if allows(profile, after, Part.NOTIFICATION):
        yield (state, _I.NOTIFICATION), (_S.PATH_NOTIFYING, _O.FRAME)
    yield (state, _I.KEEPALIVE), (state, _O.KEEPALIVE)
    if allows(profile, after, Part.ERROR):
        # Nothing but the finish may follow an error: it is written with it.
        yield (state, _I.ERROR), (_S.DONE, _O.ERROR_AND_END)
    if allows(profile, after, Part.FINISH):
        yield (state, _I.END), (_S.DONE, _O.END)
        if after is None:
            yield (state, _I.DECLINE), (_S.DONE, _O.END)


def _server_table(profile: Profile) -> _ServerTable:
    """The table of ``profile``: the ask's rows, then the path's from the grammar."""
    table: dict[tuple[ServerState, ServerInput], tuple[ServerState, ServerOutcome]] = {
        (_S.AWAITING_ASK, _I.NOTIFICATIONS_ASK): (_S.NOTIFICATIONS_ASKED, _O.NOTIFICATIONS_ASKED),
        (_S.AWAITING_ASK, _I.EXCHANGE_ASK): (_S.EXCHANGE_ASKED, _O.EXCHANGE_ASKED),
        (_S.AWAITING_ASK, _I.INVALID_ASK): (_S.REFUSED, _O.REFUSED),
        (_S.AWAITING_ASK, _I.PEER_CLOSED): (_S.CLOSED, _O.CLOSED),
        (_S.NOTIFICATIONS_ASKED, _I.START_PATH): (_S.PATH_OPEN, _O.HEAD),
    }
    if allows(profile, None, Part.FINISH):
        # Declining is the finish with nothing before it: not served.
        table[(_S.NOTIFICATIONS_ASKED, _I.DECLINE)] = (_S.DONE, _O.HEAD_AND_END)
    # A one-shot exchange is answered once, whatever the path profile.
    table[(_S.EXCHANGE_ASKED, _I.ANSWER)] = (_S.DONE, _O.ANSWER)
    table[(_S.EXCHANGE_ASKED, _I.DECLINE)] = (_S.DONE, _O.HEAD_AND_END)
    for state, after in _PATH_POINTS.items():
        table.update(_path_rows(profile, state, after))
    return table


#: (state, input) -> (next state, outcome) for the provider profile (seed 000):
#: notifications, then at most one error, then the clean end. A pair that is
#: not in the table is refused with :class:`LocalProtocolError`.
SERVER_TRANSITIONS: Final[_ServerTable] = _server_table(Profile.PROVIDER)

#: The container profile (seeds 001/003): once a notification is written the
#: path takes neither an error nor an end; an error comes first or not at all.
CONTAINER_SERVER_TRANSITIONS: Final[_ServerTable] = _server_table(Profile.CONTAINER)

#: The table in force for each profile.
SERVER_TRANSITIONS_BY_PROFILE: Final[Mapping[Profile, _ServerTable]] = {
    Profile.PROVIDER: SERVER_TRANSITIONS,
    Profile.CONTAINER: CONTAINER_SERVER_TRANSITIONS,
}


def _final_states(table: _ServerTable) -> frozenset[ServerState]:
    """The states the table has no row from: entering one ends the connection."""
    return frozenset(ServerState) - {state for state, _ in table}


def _frame_loop(table: _ServerTable) -> ServerState | None:
    """The state in which a notification is a frame that keeps the state, if there is one.

    :meth:`ServerConnection.send_notification` writes there without a
    lookup (on a busy server, hashing the enum members costs more than the
    rest of the write).
    """
    for (state, what), (following, outcome) in table.items():
        if what is _I.NOTIFICATION and following is state and outcome is _O.FRAME:
            return state
    return None


# How a write the grammar forbids is refused, by the point it came after.
_VIOLATION_TEXT: Final[Mapping[tuple[GrammarPoint, Part], str]] = {
    (Part.NOTIFICATION, Part.ERROR): "an error after a notification",
    (Part.NOTIFICATION, Part.FINISH): "an end after notifications",
}


def _why_refused(profile: Profile) -> Mapping[tuple[ServerState, ServerInput], str]:
    """Why ``profile`` refuses the writes its grammar forbids (others get a plain reason)."""
    reasons = {}
    for state, after in _PATH_POINTS.items():
        for what, part in _PATH_PARTS.items():
            if violates_profile(profile, after, part):
                text = _VIOLATION_TEXT.get((after, part), f"{what.value} in state {state.name}")
                reasons[(state, what)] = f"{text} violates the {profile.value} profile"
    return reasons


class _Rules(NamedTuple):
    """What a connection reads off its profile's table, once."""

    table: _ServerTable
    final: frozenset[ServerState]
    frame_loop: ServerState | None
    why_refused: Mapping[tuple[ServerState, ServerInput], str]


_RULES: Final[Mapping[Profile, _Rules]] = {
    profile: _Rules(table, _final_states(table), _frame_loop(table), _why_refused(profile))
    for profile, table in SERVER_TRANSITIONS_BY_PROFILE.items()
}


# --- encoding helpers ----------------------------------------------------------


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


#: One HTTP chunk holding one frame, filled in one formatting step: the
#: chunk's size line, the frame's head (:data:`~.messages.pack_frame_head`),
#: the JSON, the chunk's end.
_FRAME_CHUNK: Final = b"%x\r\n%b%b\r\n"


def _chunk_of_one(tag: int, json: bytes) -> bytes:
    payload = len(json) + 1
    return _FRAME_CHUNK % (payload + PREFIX_SIZE, pack_frame_head(payload, tag), json)


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
        self._rules = _RULES[self._profile]
        # send_notification's shortcut, kept where it reads it fastest.
        self._frame_loop = self._rules.frame_loop
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
        return self._eof or self._state in self._rules.final

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
            if (self._state, ServerInput.PEER_CLOSED) in self._rules.table:
                self._apply(ServerInput.PEER_CLOSED)
            else:
                # After the ask the peer's end is reported, once, and changes
                # no state: what may still be written is the table's business.
                self._queue_closed()
            return self._events.popleft()
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
            self._apply(ServerInput.NOTIFICATIONS_ASK)
        else:
            self._apply(ServerInput.EXCHANGE_ASK)

    def _refuse(self, status: int, reason: str, *, extra: Iterable[tuple[str, str]] = ()) -> None:
        self._reading = _Reading.OVER
        self._buffer = bytearray()
        self._body = bytearray()
        self._apply(ServerInput.INVALID_ASK, _Refusal(status, reason, tuple(extra)))

    def _queue_closed(self) -> None:
        if not self._closed_queued:
            self._closed_queued = True
            self._events.append(ConnectionClosed())

    # --- the table -----------------------------------------------------------

    def _row(self, state: ServerState, what: ServerInput) -> tuple[ServerState, ServerOutcome]:
        """The table's (next state, outcome) for ``what`` in ``state``; else refused."""
        found = self._rules.table.get((state, what))
        if found is None:
            why = self._rules.why_refused.get((state, what))
            raise LocalProtocolError(why or f"{what.value} is not allowed in state {state.name}")
        return found

    def _apply(self, what: ServerInput, argument: Any = None) -> bytes:
        """Look ``what`` up and do what the outcome found there says, then enter its state.

        ``argument`` is what the input carries (a notification, an error, a
        result, a refusal); the outcome's effect checks it and raises before
        anything changes. Returns the bytes the effect writes.
        """
        following, outcome = self._row(self._state, what)
        data = _EFFECTS[outcome](self, argument)
        self._enter(following)
        return data

    def _enter(self, state: ServerState) -> None:
        self._state = state
        if state in self._rules.final:
            self._queue_closed()

    # --- the effects of the outcomes -------------------------------------------
    # One method per ServerOutcome (see _EFFECTS): each returns the bytes to
    # write (b"" for an event) and checks its argument before queueing anything.

    def _announce_notifications(self, _: object) -> bytes:
        assert self._channel is not None
        self._events.append(NotificationsAsked(channel=self._channel))
        return b""

    def _announce_exchange(self, _: object) -> bytes:
        assert self._ask is not None and self._channel is not None
        self._events.append(ExchangeAsked(ask=self._ask, channel=self._channel))
        return b""

    def _queue_refusal(self, refusal: _Refusal) -> bytes:
        self._outgoing += refusal_response(
            refusal.status, refusal.reason, extra=refusal.extra, head_only=self._head_request
        )
        self._events.append(AskRefused(status=refusal.status, reason=refusal.reason))
        return b""

    def _report_closed(self, _: object) -> bytes:
        self._queue_closed()
        return b""

    def _head(self, _: object) -> bytes:
        return answer_head(self._location())

    def _frame(self, notification: NotificationLike) -> bytes:
        json = as_notification(notification).to_bytes()
        _check_payload(json, self._max_frame_size)
        return _chunk_of_one(NOTIFICATION_TAG, json)

    def _keepalive(self, _: object) -> bytes:
        return KEEPALIVE_CHUNK

    def _error_and_end(self, error: ErrorData) -> bytes:
        json = as_error(error).to_bytes()
        _check_payload(json, self._max_frame_size)
        return _chunk_of_one(ERROR_TAG, json) + LAST_CHUNK

    def _end(self, _: object) -> bytes:
        return LAST_CHUNK

    def _head_and_end(self, _: object) -> bytes:
        return answer_head(self._location()) + LAST_CHUNK

    def _answer(self, answer: _Answer) -> bytes:
        if answer.tag == ERROR_TAG:
            json = as_error(answer.value).to_bytes()
        else:
            json = _result_json(answer.value)
        _check_payload(json, self._max_frame_size)
        return answer_head(self._location()) + _chunk_of_one(answer.tag, json) + LAST_CHUNK

    def _location(self) -> str:
        assert self._ask is not None and self._channel is not None
        return f"/mcp/{self._ask.exchange.name.lower()}/{self._channel}"

    # --- writing -----------------------------------------------------------

    def start_path(self) -> bytes:
        """The 200 head that opens the path, after :class:`NotificationsAsked`."""
        return self._apply(ServerInput.START_PATH)

    def send_notification(self, notification: NotificationLike) -> bytes:
        """One notification, as one frame in one HTTP chunk.

        ``notification`` is a :class:`Notification`, a mapping (encoded as
        compact JSON), or raw JSON bytes that are checked to decode as a
        notification and then relayed unchanged. Raises
        :class:`LocalProtocolError` if it is not a notification, if the
        message exceeds ``max_frame_size``, or if the path does not take one.
        """
        if self._state is not self._frame_loop:
            return self._apply(ServerInput.NOTIFICATION, notification)
        # The hot path of a busy server: in the state where the table makes a
        # notification a frame that keeps the state (found when the table was
        # built), the lookup is skipped. This is _frame, spelled out: a call
        # costs a fifth of the write.
        if type(notification) is Notification:
            json = notification.to_bytes()
        else:
            json = as_notification(notification).to_bytes()
        payload = len(json) + 1
        if payload > self._max_frame_size:
            _check_payload(json, self._max_frame_size)
        return _FRAME_CHUNK % (
            payload + PREFIX_SIZE,
            pack_frame_head(payload, NOTIFICATION_TAG),
            json,
        )

    def send_notifications(self, notifications: Iterable[NotificationLike]) -> bytes:
        """Several notifications, one frame each, in ONE HTTP chunk.

        Every item is checked before anything changes, as for
        :meth:`send_notification`. An empty iterable returns ``b""`` (an empty
        chunk would end the body).
        """
        loop = self._frame_loop
        state = self._state
        # The first notification is looked up even when none follows, so that
        # a path that takes none refuses an empty batch too.
        state = state if state is loop else self._frame_step(state)
        parts: list[bytes] = [b""]
        size = 0
        limit = self._max_frame_size
        for item in notifications:
            json = (
                item.to_bytes() if type(item) is Notification else as_notification(item).to_bytes()
            )
            payload = len(json) + 1
            if payload > limit:
                _check_payload(json, limit)
            parts.append(pack_frame_head(payload, NOTIFICATION_TAG))
            parts.append(json)
            size += payload + PREFIX_SIZE
        if size == 0:
            return b""
        # The notifications after the first, in a state the table does not
        # keep (never, with the tables of this module).
        for _ in range(len(parts) // 2 - 1):
            if state is loop:
                break
            state = self._frame_step(state)
        parts[0] = b"%x\r\n" % size
        parts.append(b"\r\n")
        self._enter(state)
        return b"".join(parts)

    def _frame_step(self, state: ServerState) -> ServerState:
        """The state after one more notification of a batch, which must be a frame."""
        following, outcome = self._row(state, ServerInput.NOTIFICATION)
        if outcome is not ServerOutcome.FRAME:
            raise LocalProtocolError(
                f"send_notifications writes frames only; here a notification is {outcome.value}"
            )
        return following

    def send_keepalive(self) -> bytes:
        """A keep-alive frame (a zero length), so that an idle path survives."""
        return self._apply(ServerInput.KEEPALIVE)

    def send_error(self, error: ErrorData) -> bytes:
        """The error message, then the clean end: the path is over."""
        return self._apply(ServerInput.ERROR, error)

    def end_path(self) -> bytes:
        """The clean end of the path (with no message before it: not served)."""
        return self._apply(ServerInput.END)

    def decline(self) -> bytes:
        """Not served: the 200 head (unless already written) and a clean, empty end."""
        return self._apply(ServerInput.DECLINE)

    def answer(self, result: Mapping[str, Any] | bytes) -> bytes:
        """Answer a kind 0-3 ask: the 200 head, ``[0][result]`` and the clean end.

        ``result`` is the MCP result object, as a mapping or as raw JSON
        bytes (checked to be one JSON object, then relayed unchanged).
        Raises :class:`LocalProtocolError` if it is not one (a mapping's
        values are checked as a notification's are) or if the message
        exceeds ``max_frame_size``.
        """
        return self._apply(ServerInput.ANSWER, _Answer(NOTIFICATION_TAG, result))

    def answer_error(self, error: ErrorData) -> bytes:
        """Answer a kind 0-3 ask with an error: the 200 head, ``[1][error]`` and the clean end."""
        return self._apply(ServerInput.ANSWER, _Answer(ERROR_TAG, error))


class _Refusal(NamedTuple):
    """What an invalid ask carries into the table: the response to queue."""

    status: int
    reason: str
    extra: tuple[tuple[str, str], ...]


class _Answer(NamedTuple):
    """What an answer carries into the table: its tag and the result or the error."""

    tag: int
    value: Any


#: What each outcome of the table does (ServerConnection._apply).
_EFFECTS: Final[Mapping[ServerOutcome, Callable[[ServerConnection, Any], bytes]]] = {
    _O.NOTIFICATIONS_ASKED: ServerConnection._announce_notifications,
    _O.EXCHANGE_ASKED: ServerConnection._announce_exchange,
    _O.REFUSED: ServerConnection._queue_refusal,
    _O.CLOSED: ServerConnection._report_closed,
    _O.HEAD: ServerConnection._head,
    _O.FRAME: ServerConnection._frame,
    _O.KEEPALIVE: ServerConnection._keepalive,
    _O.ERROR_AND_END: ServerConnection._error_and_end,
    _O.END: ServerConnection._end,
    _O.HEAD_AND_END: ServerConnection._head_and_end,
    _O.ANSWER: ServerConnection._answer,
}
