"""The server side: reading an ask, answering it, and writing a notification path.

A :class:`ServerConnection` serves exactly one ask on one HTTP/1.1
connection (the wire mapping in docs/protocol.md: one ask per connection, ``Connection: close`` on
every response). Its :class:`~.request.AskReader` reads the request
(with h11) and the connection turns the verdict into one of three events:

* :class:`NotificationsAsked` — a valid kind-4 ask; the application writes
  the path with :meth:`ServerConnection.start_path`,
  :meth:`~ServerConnection.send_notification`, ... and ends it;
* :class:`ExchangeAsked` — a valid kind 0-3 ask; the application answers
  once (:meth:`~ServerConnection.answer`,
  :meth:`~ServerConnection.answer_error`) or declines;
* :class:`HealthAsked` — a health check (``GET /healthz`` or ``/readyz``,
  no token needed); the application answers it with
  :meth:`~ServerConnection.answer_health`;
* :class:`AskRefused` — anything else; the HTTP error response is already
  queued in :meth:`~ServerConnection.data_to_send`.

Every connection ends with exactly one :class:`ConnectionClosed`: when the
peer closes, or when this side's answer is complete (the ask refused, the
path or the answer ended). Then close the socket once the bytes are out.

Both sides of the connection follow one transition table,
:data:`SERVER_TRANSITIONS` (provider profile; the table in force for each
profile is in :data:`SERVER_TRANSITIONS_BY_PROFILE`): an ask arriving, a
refusal and the peer closing before it asked are inputs of the table as
much as every write is. Each input is looked up, as every machine of the
core looks its table up (:class:`~..transitions.TableMachine`), and the
connection does what the outcome found there says (``_EFFECTS``, one
method per outcome); a write the table does not allow raises
:class:`LocalProtocolError` and changes nothing. The path's rows come from
the profile grammar (:data:`~..wire.profiles.PROFILE_GRAMMAR`), which the
reader and the container writer (:mod:`.writer`) follow too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, NamedTuple

import attrs
import h11

from ..errors import LocalProtocolError
from ..events import (
    NEED_DATA,
    AskRefused,
    ConnectionClosed,
    Event,
    EventOrNeedData,
    ExchangeAsked,
    HealthAsked,
    NotificationsAsked,
)
from ..mcp.model import ErrorCode, ErrorData, Notification
from ..transitions import Handler, TableEnum, TableMachine
from ..wire.asks import Ask, Exchange
from ..wire.framing import DEFAULT_MAX_FRAME_SIZE, PREFIX_SIZE, pack_length
from ..wire.http import (
    ASK_PATH,
    KEEPALIVE_CHUNK,
    LAST_CHUNK,
    ChannelIds,
    answer_head,
    check_tokens,
    chunk,
    plain_response,
    refusal_response,
)
from ..wire.messages import (
    ERROR_TAG,
    NOTIFICATION_TAG,
    NotificationLike,
    pack_frame_head,
    result_json,
    to_error,
    to_notification,
)
from ..wire.profiles import GrammarPoint, Part, Profile, allows, violates_profile
from .request import AskReader, HealthCheck, Refusal

__all__ = [
    "CONTAINER_SERVER_TRANSITIONS",
    "NOT_SERVED_STATUS",
    "RETRY_AFTER",
    "SERVER_TRANSITIONS",
    "SERVER_TRANSITIONS_BY_PROFILE",
    "ServerConnection",
    "ServerInput",
    "ServerOutcome",
    "ServerState",
    "internal_error",
    "not_served_now",
    "path_end",
]


class ServerState(TableEnum):
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
    #: The ask was refused (the error response queued, or returned by ``refuse()``); close.
    REFUSED = "refused"
    #: The peer closed the connection before asking.
    CLOSED = "closed"
    #: A health check arrived; nothing written yet.
    HEALTH_ASKED = "health asked"


class ServerInput(TableEnum):
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
    REFUSE = "refuse"
    HEALTH_CHECK = "health check"
    HEALTH_ANSWER = "answer_health"


class ServerOutcome(TableEnum):
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
    REFUSAL = "error response (not served now)"
    HEALTH_ASKED = "HealthAsked"
    HEALTH = "health response (200, or 503 and why)"


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
        # A valid ask the server cannot serve now (its hub is suspended): an error response.
        (_S.NOTIFICATIONS_ASKED, _I.REFUSE): (_S.REFUSED, _O.REFUSAL),
        # A health check: no token, no channel; answered once, then the connection ends.
        (_S.AWAITING_ASK, _I.HEALTH_CHECK): (_S.HEALTH_ASKED, _O.HEALTH_ASKED),
        (_S.HEALTH_ASKED, _I.HEALTH_ANSWER): (_S.DONE, _O.HEALTH),
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


#: (state, input) -> (next state, outcome) for the provider profile
#: (the provider notifications page):
#: notifications, then at most one error, then the clean end. A pair that is
#: not in the table is refused with :class:`LocalProtocolError`.
SERVER_TRANSITIONS: Final[_ServerTable] = _server_table(Profile.PROVIDER)

#: The container profile (the container response page/003): once a notification is written the
#: path takes neither an error nor an end; an error comes first or not at all.
CONTAINER_SERVER_TRANSITIONS: Final[_ServerTable] = _server_table(Profile.CONTAINER)

#: The table in force for each profile.
SERVER_TRANSITIONS_BY_PROFILE: Final[Mapping[Profile, _ServerTable]] = {
    Profile.PROVIDER: SERVER_TRANSITIONS,
    Profile.CONTAINER: CONTAINER_SERVER_TRANSITIONS,
}


#: The states no table has a row from: entering one ends the connection.
_FINAL: Final = frozenset({_S.DONE, _S.REFUSED, _S.CLOSED})

#: The state in which every profile's table makes a notification a frame
#: that keeps the state (the grammar lets a notification follow a
#: notification in every profile): a batch written there moves nothing.
_FRAME_LOOP: Final = _S.PATH_NOTIFYING


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


#: Why each profile refuses the writes its grammar forbids.
_WHY_REFUSED: Final[Mapping[Profile, Mapping[tuple[ServerState, ServerInput], str]]] = {
    profile: _why_refused(profile) for profile in Profile
}


# --- encoding helpers ----------------------------------------------------------


def _check_payload(json: bytes, limit: int) -> None:
    if len(json) + 1 > limit:
        raise LocalProtocolError(
            f"a message of {len(json) + 1} bytes is larger than the frame limit of {limit} bytes"
        )


def _notifications_chunk(notifications: Iterable[NotificationLike], limit: int) -> bytes:
    """One HTTP chunk holding a frame for each notification (``b""`` for none).

    Each is checked to be a notification whose message fits a frame of
    ``limit`` bytes before anything is returned.
    """
    parts: list[bytes] = [b""]
    size = 0
    for item in notifications:
        json = item.to_bytes() if type(item) is Notification else to_notification(item).to_bytes()
        payload = len(json) + 1
        if payload > limit:
            _check_payload(json, limit)
        parts.append(pack_frame_head(payload, NOTIFICATION_TAG))
        parts.append(json)
        size += payload + PREFIX_SIZE
    if not size:
        return b""
    parts[0] = b"%x\r\n" % size
    parts.append(b"\r\n")
    return b"".join(parts)


#: One HTTP chunk holding one frame, by the message's tag: the chunk's size,
#: the frame's length prefix and the JSON are put in with one ``%``. Against
#: building the frame and then its chunk, this halves what writing a lone
#: notification costs (bench/bench_write.py, ``send_notification``).
_MESSAGE_CHUNK: Final[Mapping[int, bytes]] = {
    tag: b"%x\r\n%b" + bytes((tag,)) + b"%b\r\n" for tag in (NOTIFICATION_TAG, ERROR_TAG)
}


def _chunk_of_one(tag: int, json: bytes) -> bytes:
    """One HTTP chunk holding the one frame of the message ``tag`` + ``json``."""
    payload = len(json) + 1
    return _MESSAGE_CHUNK[tag] % (payload + PREFIX_SIZE, pack_length(payload), json)


#: The last lone frame a path wrote (:func:`_chunk_of_frame`), and its chunk.
#: The hub shares one frame among every path it reaches, and with one
#: notification per turn each path's writer asks for the chunk of that same
#: frame, one after the other: it is made once (a quarter of a delivery's
#: cost, bench/bench_hub.py, 200 paths, batch 1). One entry, replaced whole
#: (so that no reader pairs one frame with another's chunk); only a ``bytes``
#: frame (which cannot change) of at most :data:`_KEPT_FRAME_SIZE` bytes is
#: kept, so that what stays behind once every path wrote it is small.
_last_chunk: tuple[bytes | None, bytes] = (None, b"")
_KEPT_FRAME_SIZE: Final = 64 * 1024


def _chunk_of_frame(frame: bytes) -> bytes:
    """One HTTP chunk holding ``frame``, formatted in one step (and kept, see above)."""
    global _last_chunk
    data = chunk(frame)
    if type(frame) is bytes and len(frame) <= _KEPT_FRAME_SIZE:
        _last_chunk = (frame, data)
    return data


def _usable_refusal(status: int, reason: str, extra: Iterable[tuple[str, str]]) -> Refusal:
    """A refusal the server may write: a 4xx or 5xx status, a ``str`` reason, sound headers."""
    headers = tuple(extra)
    if type(status) is not int or not 400 <= status <= 599 or not isinstance(reason, str):
        raise LocalProtocolError("a refusal is a 4xx or 5xx status and a str reason")
    try:
        # The extra headers are checked as h11 checks a response's.
        h11.Response(status_code=status, headers=list(headers))
    except (h11.LocalProtocolError, TypeError, ValueError) as error:
        raise LocalProtocolError(f"unusable refusal headers: {error}") from None
    return Refusal(status, reason, headers)


class ServerConnection(TableMachine[ServerState, ServerInput]):
    """One ask on one HTTP/1.1 connection, from the server's side.

    Feed received bytes with :meth:`receive_data` (``b""`` = end of file) and
    read events with :meth:`next_event`; after each call, send
    :meth:`data_to_send` (refusals and ``100 Continue`` are queued there).
    After :class:`NotificationsAsked` write the path with :meth:`start_path`,
    :meth:`send_notification`, :meth:`send_notifications`,
    :meth:`send_keepalive`, and end it with :meth:`end_path` or
    :meth:`send_error` (or :meth:`decline` or :meth:`refuse` it); after :class:`ExchangeAsked`
    call :meth:`answer`, :meth:`answer_error` or :meth:`decline`. Each write
    returns the bytes to send.

    Limits: the request head may be at most ``max_head_size`` bytes (else
    431) and the ask body at most ``max_ask_size`` bytes (else 413; decided
    on ``Content-Length`` before the body is read, and while a chunked body
    is read). Messages written are at most ``max_frame_size`` bytes, the
    proxy's default limit, so that a write the peer would reject as an
    abrupt end is refused here instead.

    ``target`` is the path asks are posted to (``/requests``, or a base
    path's ``/base/requests``), as :class:`~..client.connection.ProxyConnection` names it;
    it must start with ``/``. A ``token`` that is not usable (see
    :func:`check_token`) is a :class:`ValueError`. ``tokens`` accepts
    several instead (give one of ``token`` and ``tokens``, see
    :func:`check_tokens`): every one is accepted, and the ask is the
    :attr:`audience` of the one it carried.

    ``next_event()`` never raises for any bytes received: every peer
    mistake is an :class:`AskRefused`. The events it produces do not depend
    on how the bytes were split across :meth:`receive_data` calls.
    """

    _profile: Profile

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
        tokens: Iterable[str] | None = None,
    ) -> None:
        accepted = check_tokens(token, tokens)
        if max_ask_size < 1 or max_head_size < 16 or max_frame_size < 1:
            raise ValueError("max_ask_size and max_frame_size must be >= 1, max_head_size >= 16")
        if not target.startswith("/"):
            raise ValueError("target must start with '/'")
        self._profile = Profile(profile)
        self._channel_ids = channel_ids if channel_ids is not None else ChannelIds()
        self._max_frame_size = max_frame_size
        self._state = ServerState.AWAITING_ASK
        self._events: deque[Event] = deque()
        self._outgoing = bytearray()
        self._closed_queued = False
        self._eof = False
        self._channel: str | None = None
        self._ask: Ask | None = None
        self._health: HealthCheck | None = None
        # What was received and not yet read; the reader takes from its front.
        self._buffer = bytearray()
        self._reader = AskReader(
            tokens=accepted, target=target, max_ask_size=max_ask_size, max_head_size=max_head_size
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
    def audience(self) -> str | None:
        """The audience of the token the ask carried, when several are accepted, else ``None``.

        Known once an ask was accepted (:func:`~..wire.http.audience_of`).
        """
        return self._reader.audience

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
        return self._eof or self._state in _FINAL

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
        if self._reader.over:
            return  # one ask per connection: what follows it is discarded
        # Bytes past what the reader may read can never change the verdict,
        # so they are not kept.
        room = self._reader.room - len(self._buffer)
        if room > 0:
            self._buffer += data[:room] if len(data) > room else data

    def next_event(self) -> EventOrNeedData:
        """The next event, or :data:`NEED_DATA`. Never raises for anything the peer sent."""
        if not self._events and not self._reader.over:
            self._read_ask()
        if self._events:
            return self._events.popleft()
        if not self._closed_queued and self._eof:
            if (self._state, _I.PEER_CLOSED) in self._table():
                self._move(_I.PEER_CLOSED)
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

    def _read_ask(self) -> None:
        """Let the reader read; put its verdict, if there is one, through the table."""
        verdict = self._reader.read(self._buffer, self._eof)
        self._outgoing += self._reader.take_interim()
        if verdict is None:
            return
        self._buffer = bytearray()
        if isinstance(verdict, Refusal):
            self._move(_I.INVALID_ASK, verdict)
            return
        if isinstance(verdict, HealthCheck):
            self._health = verdict
            self._move(_I.HEALTH_CHECK)
            return
        audience = self._reader.audience
        self._ask = verdict if audience is None else attrs.evolve(verdict, audience=audience)
        try:
            self._channel = self._channel_ids.mint()
        except LocalProtocolError:
            # Only reachable by a ChannelIds pushed past 10**20 ids: the
            # server's trouble, answered as such rather than raised at the peer.
            refusal = Refusal(503, "the server has no channel id left to give")
            self._move(_I.INVALID_ASK, refusal)
            return
        if verdict.exchange is Exchange.NOTIFICATIONS:
            self._move(_I.NOTIFICATIONS_ASK)
        else:
            self._move(_I.EXCHANGE_ASK)

    def _queue_closed(self) -> None:
        if not self._closed_queued:
            self._closed_queued = True
            self._events.append(ConnectionClosed())

    # --- the table -----------------------------------------------------------

    def _table(self) -> _ServerTable:
        """The table of this connection's profile, as the module has it now."""
        return SERVER_TRANSITIONS_BY_PROFILE[self._profile]

    def _refusal(self, what: ServerInput) -> str:
        state = self._state
        why = _WHY_REFUSED[self._profile].get((state, what))
        return why or f"{what.value} is not allowed in state {state.name}"

    def _move(self, what: ServerInput, value: Any = None) -> bytes:
        """Make the move the table gives ``what``, and return the bytes its outcome writes.

        ``value`` is what the input carries, checked and encoded already (a
        write that fails on its value fails before the move, changing
        nothing). Entering a state the table has no row from ends the
        connection: the one :class:`ConnectionClosed` is queued.
        """
        data: bytes = self._fire(self._table(), _EFFECTS, what, value)
        if self._state in _FINAL:
            self._queue_closed()
        return data

    def _write_frames(self, data: bytes) -> bytes:
        """A chunk of notification frames (``b""`` for none), written as one notification's move.

        Every state a notification reaches takes the next one as a frame
        that keeps the state (the grammar lets a notification follow a
        notification in every profile), so one move stands for the whole
        batch, and in that state no move is made. An empty batch writes
        nothing and moves nothing, but is refused where a notification
        would be.
        """
        if self._state is _FRAME_LOOP and data:
            # No move: it would cost twice what the rest of a delivery does
            # (bench/bench_hub.py, 200 paths, batch 1) and 2.5 times what
            # the rest of a lone notification's write does
            # (bench/bench_write.py, send_notification).
            return data
        if data:
            return self._move(_I.NOTIFICATION, data)
        if (self._state, _I.NOTIFICATION) not in self._table():
            raise LocalProtocolError(self._refusal(_I.NOTIFICATION))
        return b""

    # --- the effects of the outcomes -------------------------------------------
    # One method per ServerOutcome (see _EFFECTS): each returns the bytes to
    # write (b"" for an event).

    def _announce_notifications(self, _: object) -> bytes:
        assert self._channel is not None
        self._events.append(
            NotificationsAsked(channel=self._channel, audience=self._reader.audience)
        )
        return b""

    def _announce_exchange(self, _: object) -> bytes:
        assert self._ask is not None and self._channel is not None
        self._events.append(ExchangeAsked(ask=self._ask, channel=self._channel))
        return b""

    def _queue_refusal(self, refusal: Refusal) -> bytes:
        self._outgoing += refusal_response(
            refusal.status, refusal.reason, extra=refusal.extra, head_only=refusal.head_only
        )
        self._events.append(AskRefused(status=refusal.status, reason=refusal.reason))
        return b""

    def _announce_health(self, _: object) -> bytes:
        assert self._health is not None
        self._events.append(HealthAsked(check=self._health.check))
        return b""

    def _health_response(self, problem: str | None) -> bytes:
        assert self._health is not None
        head_only = self._health.head_only
        if problem is None:
            return plain_response(200, "OK", "ok", head_only=head_only)
        return refusal_response(NOT_SERVED_STATUS, problem, head_only=head_only)

    def _report_closed(self, _: object) -> bytes:
        self._queue_closed()
        return b""

    def _head(self, _: object) -> bytes:
        return answer_head(self._location())

    def _frames(self, data: bytes) -> bytes:
        # The chunk of the frames the write made before the move.
        return data

    def _keepalive(self, _: object) -> bytes:
        return KEEPALIVE_CHUNK

    def _error_and_end(self, json: bytes) -> bytes:
        return _chunk_of_one(ERROR_TAG, json) + LAST_CHUNK

    def _end(self, _: object) -> bytes:
        return LAST_CHUNK

    def _head_and_end(self, _: object) -> bytes:
        return answer_head(self._location()) + LAST_CHUNK

    def _answer(self, answer: _Answer) -> bytes:
        return answer_head(self._location()) + _chunk_of_one(answer.tag, answer.json) + LAST_CHUNK

    def _refuse_now(self, refusal: Refusal) -> bytes:
        return refusal_response(refusal.status, refusal.reason, extra=refusal.extra)

    def _location(self) -> str:
        assert self._ask is not None and self._channel is not None
        return f"/mcp/{self._ask.exchange.name.lower()}/{self._channel}"

    # --- writing -----------------------------------------------------------

    def start_path(self) -> bytes:
        """The 200 head that opens the path, after :class:`NotificationsAsked`."""
        return self._move(_I.START_PATH)

    def send_notification(self, notification: NotificationLike) -> bytes:
        """One notification, as one frame in one HTTP chunk.

        ``notification`` is a :class:`Notification`, a mapping (encoded as
        compact JSON), or raw JSON bytes that are checked to decode as a
        notification and then relayed unchanged. Raises
        :class:`LocalProtocolError` if it is not a notification, if the
        message exceeds ``max_frame_size``, or if the path does not take one.
        """
        if type(notification) is Notification:
            json = notification.to_bytes()
        else:
            json = to_notification(notification).to_bytes()
        if len(json) >= self._max_frame_size:
            _check_payload(json, self._max_frame_size)
        return self._write_frames(_chunk_of_one(NOTIFICATION_TAG, json))

    def send_notifications(self, notifications: Iterable[NotificationLike]) -> bytes:
        """Several notifications, one frame each, in ONE HTTP chunk.

        Every item is checked before anything changes, as for
        :meth:`send_notification`. An empty iterable returns ``b""`` (an empty
        chunk would end the body), or raises where a notification would.
        """
        return self._write_frames(_notifications_chunk(notifications, self._max_frame_size))

    def send_frames(self, frames: list[bytes]) -> bytes:
        """Notification frames already built (:meth:`.hub.Subscriber.take_frames`), in ONE chunk.

        Each frame is the 4-byte length, tag ``0`` and the JSON of one
        notification, as the hub builds it once for every path it reaches:
        nothing is encoded here, and the frames are trusted to be
        notifications within ``max_frame_size`` (the hub refuses larger
        ones). The table is followed as for :meth:`send_notifications`; an
        empty list returns ``b""``.
        """
        if len(frames) == 1:
            frame = frames[0]
            last = _last_chunk
            data = last[1] if last[0] is frame else _chunk_of_frame(frame)
        elif frames:
            data = b"".join((b"%x\r\n" % sum(map(len, frames)), *frames, b"\r\n"))
        else:
            return self._write_frames(b"")
        if self._state is _FRAME_LOOP:
            # _write_frames' shortcut without the call: this is every turn of
            # a served path (bench/bench_floor.py, section 3, one at a time).
            return data
        return self._write_frames(data)

    def send_keepalive(self) -> bytes:
        """A keep-alive frame (a zero length), so that an idle path survives."""
        return self._move(_I.KEEPALIVE)

    def send_error(self, error: ErrorData) -> bytes:
        """The error message, then the clean end: the path is over."""
        json = to_error(error).to_bytes()
        _check_payload(json, self._max_frame_size)
        return self._move(_I.ERROR, json)

    def end_path(self) -> bytes:
        """The clean end of the path (with no message before it: not served)."""
        return self._move(_I.END)

    def decline(self) -> bytes:
        """Not served: the 200 head (unless already written) and a clean, empty end."""
        return self._move(_I.DECLINE)

    def refuse(self, status: int, reason: str, *, headers: Iterable[tuple[str, str]] = ()) -> bytes:
        """Not served now, after :class:`NotificationsAsked`: an error response, then close.

        ``status`` is 4xx or 5xx (a server whose hub is suspended answers
        ``503`` with ``Retry-After``); ``reason`` is the plain-text body;
        ``headers`` are added to the usual ones. Raises
        :class:`LocalProtocolError` for anything else, or once the path is open.
        """
        return self._move(_I.REFUSE, _usable_refusal(status, reason, headers))

    def answer_health(self, problem: str | None = None) -> bytes:
        """Answer :class:`HealthAsked`: ``200 ok``, or with ``problem`` ``503`` saying it.

        ``problem`` is why an ask would not be served now (``None``: it
        would). The body is one plain-text line and says nothing else.
        Raises :class:`LocalProtocolError` unless a health check was asked.
        """
        if problem is not None and not isinstance(problem, str):
            raise LocalProtocolError("the problem of a health answer is a str or None")
        return self._move(_I.HEALTH_ANSWER, problem)

    def answer(self, result: Mapping[str, Any] | bytes) -> bytes:
        """Answer a kind 0-3 ask: the 200 head, ``[0][result]`` and the clean end.

        ``result`` is the MCP result object, as a mapping or as raw JSON
        bytes (checked to be one JSON object, then relayed unchanged).
        Raises :class:`LocalProtocolError` if it is not one (a mapping's
        values are checked as a notification's are) or if the message
        exceeds ``max_frame_size``.
        """
        json = result_json(result)
        _check_payload(json, self._max_frame_size)
        return self._move(_I.ANSWER, _Answer(NOTIFICATION_TAG, json))

    def answer_error(self, error: ErrorData) -> bytes:
        """Answer a kind 0-3 ask with an error: the 200 head, ``[1][error]`` and the clean end."""
        json = to_error(error).to_bytes()
        _check_payload(json, self._max_frame_size)
        return self._move(_I.ANSWER, _Answer(ERROR_TAG, json))


class _Answer(NamedTuple):
    """What an answer carries into the table: its tag and the JSON of the result or the error."""

    tag: int
    json: bytes


#: What each outcome of the table does (:meth:`ServerConnection._move`).
_EFFECTS: Final[Mapping[ServerOutcome, Handler[bytes]]] = {
    _O.NOTIFICATIONS_ASKED: ServerConnection._announce_notifications,
    _O.EXCHANGE_ASKED: ServerConnection._announce_exchange,
    _O.REFUSED: ServerConnection._queue_refusal,
    _O.CLOSED: ServerConnection._report_closed,
    _O.HEAD: ServerConnection._head,
    _O.FRAME: ServerConnection._frames,
    _O.KEEPALIVE: ServerConnection._keepalive,
    _O.ERROR_AND_END: ServerConnection._error_and_end,
    _O.END: ServerConnection._end,
    _O.HEAD_AND_END: ServerConnection._head_and_end,
    _O.ANSWER: ServerConnection._answer,
    _O.REFUSAL: ServerConnection._refuse_now,
    _O.HEALTH_ASKED: ServerConnection._announce_health,
    _O.HEALTH: ServerConnection._health_response,
}


#: The status of an ask refused while the hub is suspended.
NOT_SERVED_STATUS: Final = 503
#: The ``Retry-After`` hint, in seconds: listeners re-ask with their own backoff anyway.
RETRY_AFTER: Final = 1


def internal_error(message: str) -> ErrorData:
    """An internal-error ``ErrorData`` saying ``message`` (a path's end, a handler's failure)."""
    return ErrorData(code=int(ErrorCode.INTERNAL_ERROR), message=message)


def not_served_now(connection: ServerConnection, reason: str) -> bytes:
    """The answer to a notification ask while the hub is suspended: ``503``, the reason as body."""
    return connection.refuse(NOT_SERVED_STATUS, reason, headers=[("Retry-After", str(RETRY_AFTER))])


def path_end(connection: ServerConnection, reason: str | None) -> bytes:
    """The end of an open path: clean (``reason`` is ``None``), or the hub's reason as an error.

    The error goes where the profile allows one (the provider profile, and
    the container profile before any notification), with the finish after
    it; where the profile allows neither an error nor a finish (the
    container profile after notifications) this is ``b""``: the path ends
    with the connection, without the end of its body.
    """
    try:
        if reason is None:
            return connection.end_path()
        return connection.send_error(internal_error(reason))
    except LocalProtocolError:
        return b""
