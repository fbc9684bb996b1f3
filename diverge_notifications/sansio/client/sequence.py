"""The sequence machine: a path's messages, finish and loss in; events out.

This is the part of the proxy side that knows the profile rules
and nothing about bytes on a socket. :class:`ProxyConnection` drives it from
HTTP; the container protocol, which has no byte transport of its own in the
specification pages, drives it directly at payload level with :meth:`receive_payload`,
:meth:`receive_finish` and :meth:`connection_lost`.

The profile rules are written once, as a grammar
(:data:`~..wire.profiles.PROFILE_GRAMMAR`: per profile, which parts may
follow which); the reader's table, :data:`TRANSITIONS`, keyed by profile,
state and input, is derived from it, as are the server's and the container
writer's. The reader does what its table says (every input is a move of
:class:`~..transitions.TableMachine`, and each outcome has one handler), and
the documentation's state diagram is generated from it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Final, NamedTuple

from ..errors import FrameError, LocalProtocolError
from ..events import (
    NEED_DATA,
    Event,
    EventOrNeedData,
    MessageRejected,
    NotServed,
    ReaskNeeded,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
    notification_received,
    notifications_received,
)
from ..mcp.model import ErrorData, Notification
from ..transitions import Handler, TableEnum, TableMachine
from ..wire.messages import decode_message, decode_notifications
from ..wire.profiles import GrammarPoint, Part, Profile, allows

__all__ = [
    "TRANSITIONS",
    "Input",
    "Outcome",
    "PathState",
    "SequenceMachine",
]


class PathState(TableEnum):
    """Where a path is."""

    # Hashed on every move (bench/bench_proxy.py): a member equals only
    # itself, so identity hashing is exact, and unlike Enum's own (which
    # hashes the name) it makes no Python call.

    #: Open, no message yet (keep-alives do not count).
    EMPTY = "empty"
    #: Open, one or more messages received.
    RECEIVING = "receiving"
    #: A terminal event was produced; whatever arrives now is discarded.
    DONE = "done"


class Input(TableEnum):
    """What can happen to a path."""

    NOTIFICATION = "notification"
    REJECTED = "undecodable message"
    ERROR = "error"
    FINISH = "clean end"
    LOST = "connection lost"


class Outcome(TableEnum):
    """The event a transition produces."""

    NOTIFICATION = "NotificationReceived"
    REJECTED = "MessageRejected"
    ERRORED = "StreamErrored"
    NOT_SERVED = "NotServed"
    ENDED = "StreamEnded"
    VIOLATION = "StreamBroken (violation)"
    BROKEN = "StreamBroken"


_N, _ER, _F = Part.NOTIFICATION, Part.ERROR, Part.FINISH
_E, _R, _D = PathState.EMPTY, PathState.RECEIVING, PathState.DONE
#: The reader's live states, by the grammar point they stand for (an
#: undecodable message counts as a message of unknown kind: it moves the path
#: on as a notification does, and the reader reports it).
_READER_POINTS: Final[Mapping[PathState, GrammarPoint]] = {_E: None, _R: _N}


#: The reader's inputs that are parts of the grammar.
_READER_PARTS: Final[Mapping[Input, Part]] = {
    Input.NOTIFICATION: _N,
    Input.ERROR: _ER,
    Input.FINISH: _F,
}


def _reader_row(profile: Profile, state: PathState, what: Input) -> tuple[PathState, Outcome]:
    """One row of :data:`TRANSITIONS`, as the grammar has it."""
    if what is Input.REJECTED:
        return _R, Outcome.REJECTED
    if what is Input.LOST:
        return _D, Outcome.BROKEN
    after = _READER_POINTS[state]
    part = _READER_PARTS[what]
    if not allows(profile, after, part):
        return _D, Outcome.VIOLATION
    if part is _N:
        return _R, Outcome.NOTIFICATION
    if part is _ER:
        return _D, Outcome.ERRORED
    return _D, Outcome.NOT_SERVED if after is None else Outcome.ENDED


#: (profile, state, input) -> (next state, outcome), derived from
#: :data:`PROFILE_GRAMMAR`. Inputs in ``DONE`` are discarded and are not in
#: the table.
TRANSITIONS: Final[Mapping[tuple[Profile, PathState, Input], tuple[PathState, Outcome]]] = {
    (profile, state, what): _reader_row(profile, state, what)
    for profile in Profile
    for state in _READER_POINTS
    for what in Input
}


# Why a violation ends the path, by whether it is an error (or the clean end)
# and by whether a notification arrived before it (or only undecodable
# messages did).
_VIOLATIONS: Final = {
    (True, True): "an error after a notification violates the {profile} profile",
    (False, True): "a finish after notifications violates the {profile} profile",
    (True, False): "an error after an undecodable message violates the {profile} profile",
    (False, False): "a finish after an undecodable message violates the {profile} profile",
}

_NO_MESSAGE: Final = "the path ended with no message"
# Enum members by module names: on Python before 3.12 reading one from its
# class goes through the enum type's __getattr__, several times a global.
_NOTIFICATION: Final = Input.NOTIFICATION
_NOTIFIED: Final = Outcome.NOTIFICATION


class _Finish(NamedTuple):
    """What the clean end brings: the status and the reason a :class:`NotServed` gives."""

    status: int | None
    reason: str


class SequenceMachine(TableMachine[PathState, Input]):
    """Applies a profile's rules to one path's messages.

    Feed it with :meth:`receive_payload` (one message, ``[tag][JSON]``; or
    several in order with :meth:`receive_payloads`),
    :meth:`receive_finish` (the clean end) and :meth:`connection_lost` (the
    abrupt end); read events with :meth:`next_event`. Exactly one terminal
    event is produced, followed by one :class:`ReaskNeeded` when
    ``reask`` is true (the default). Whatever arrives after the terminal
    event is discarded.

    :meth:`open` announces the path (``StreamOpened``); a caller at payload
    level that does not need that event may skip it.

    Every input is a move of :data:`TRANSITIONS` for the machine's profile;
    what each input brings to its outcome's handler: a list of decoded
    notifications, the :class:`MessageRejected` of an undecodable message,
    the :class:`ErrorData` of an error, the status and reason of the clean
    end, the reason of the abrupt one.
    """

    __slots__ = (
        "_events",
        "_lost",
        "_messages",
        "_opened",
        "_profile",
        "_reask",
        "_rejected",
        "_state",
    )

    _BY_PROFILE = True
    _profile: Profile

    def __init__(self, profile: Profile = Profile.PROVIDER, *, reask: bool = True) -> None:
        self._profile = Profile(profile)
        self._reask = reask
        self._events: deque[Event] = deque()
        self._lost = False
        self._opened = False
        self._messages = 0
        self._rejected = 0
        self._state = PathState.EMPTY

    @property
    def profile(self) -> Profile:
        """The profile in force."""
        return self._profile

    @property
    def state(self) -> PathState:
        """The path's state."""
        return self._state

    @property
    def messages(self) -> int:
        """How many messages (decodable or not) the path delivered."""
        return self._messages

    def open(self, channel: str) -> None:
        """Queue :class:`StreamOpened` for ``channel``; :class:`LocalProtocolError` if it was."""
        if self._opened:
            raise LocalProtocolError("the path is already open")
        if self._state is not PathState.EMPTY or self._messages:
            raise LocalProtocolError("a path is opened before anything arrives on it")
        self._opened = True
        self._events.append(StreamOpened(channel=channel))

    def receive_payload(self, payload: bytes) -> None:
        """One message arrived. Discarded once the path is over."""
        self.receive_payloads((payload,))

    def receive_payloads(self, payloads: Iterable[bytes]) -> None:
        """Messages that arrived, in order: :meth:`receive_payload` for each, in one call.

        Those that arrive after the message that ends the path are discarded.
        """
        if self._lost:
            self._check_not_lost()
        if self._state is _D:  # (a module name: cheaper than the enum's, once per step)
            return
        # A run of notifications, where the table takes each as a
        # notification and stays put, is decoded at once and taken in one
        # move: one decode and one move per message make the short messages
        # of bench/bench_proxy.py take 1.3 times as long.
        if type(payloads) is list and len(payloads) > 1 and self._notifications_keep_state():
            notifications = decode_notifications(payloads)
            if notifications is not None:
                self._messages += len(notifications)
                self._fire(TRANSITIONS, _HANDLERS, _NOTIFICATION, notifications)
                return
        for payload in payloads:
            try:
                message = decode_message(payload)
            except FrameError as error:
                self._messages += 1
                self._rejected += 1
                rejected = MessageRejected(error=error, payload=bytes(payload))
                self._fire(TRANSITIONS, _HANDLERS, Input.REJECTED, rejected)
            else:
                self._take(message)
            if self._state is _D:
                return

    def receive_message(self, message: Notification | ErrorData) -> None:
        """An already-decoded message arrived (see :meth:`receive_payload`).

        Anything but a :class:`Notification` or an :class:`ErrorData` is a
        :class:`TypeError`.
        """
        if not isinstance(message, (Notification, ErrorData)):
            raise TypeError(
                f"expected a Notification or an ErrorData, not {type(message).__name__}"
            )
        self._check_not_lost()
        if self._state is not PathState.DONE:
            self._take(message)

    def receive_finish(self, *, status: int | None = None) -> None:
        """The path ended cleanly. ``status`` is carried into :class:`NotServed`."""
        self._check_not_lost()
        if self._state is not PathState.DONE:
            self._fire(TRANSITIONS, _HANDLERS, Input.FINISH, _Finish(status, _NO_MESSAGE))

    def refused(self, status: int | None, reason: str) -> None:
        """The ask was refused before any message (say, a non-2xx answer): not served.

        This is the clean end with no message (``NotServed``), with the
        refusal's ``status`` and a ``reason`` for people. Ignored once the
        path is over; :class:`LocalProtocolError` after a message.
        """
        self._check_not_lost()
        if self._state is PathState.DONE:
            return
        if self._state is not PathState.EMPTY:
            raise LocalProtocolError("a path that delivered messages cannot be refused")
        self._fire(TRANSITIONS, _HANDLERS, Input.FINISH, _Finish(status, reason))

    def connection_lost(self, reason: str = "the connection ended before the path did") -> None:
        """The path ended abruptly. May be called more than once."""
        if self._lost:
            return
        self._lost = True
        if self._state is not PathState.DONE:
            self._fire(TRANSITIONS, _HANDLERS, Input.LOST, reason)

    def violation(self, reason: str) -> None:
        """End the path as broken for a reason found below this layer (bad HTTP, framing)."""
        if self._state is not PathState.DONE:
            self._state = PathState.DONE
            self._end(StreamBroken(reason=reason))

    @property
    def queued(self) -> deque[Event]:
        """The events not taken yet, in order: :meth:`next_event` pops the first.

        A connection that drives the machine pops them from here.
        """
        return self._events

    def next_event(self) -> EventOrNeedData:
        """The next event, or :data:`NEED_DATA`."""
        if self._events:
            return self._events.popleft()
        return NEED_DATA

    def _check_not_lost(self) -> None:
        if self._lost:
            raise LocalProtocolError("nothing can be received after connection_lost()")

    def _notifications_keep_state(self) -> bool:
        """Whether the table takes a notification now as a notification, staying put.

        Then a run of notifications is one move: the same state, and the
        same events, as a move for each.
        """
        state = self._state
        row = TRANSITIONS.get((self._profile, state, _NOTIFICATION))
        return row == (state, _NOTIFIED)

    def _take(self, message: Notification | ErrorData) -> None:
        """The move a decoded message makes."""
        self._messages += 1
        if type(message) is Notification:
            self._fire(TRANSITIONS, _HANDLERS, _NOTIFICATION, [message])
        else:
            self._fire(TRANSITIONS, _HANDLERS, Input.ERROR, message)

    def _end(self, terminal: Event) -> None:
        """Queue the terminal event, and :class:`ReaskNeeded` after it when asked to."""
        self._events.append(terminal)
        if self._reask:
            self._events.append(ReaskNeeded())

    # -- the outcomes' handlers: one per Outcome, named in _HANDLERS ------------------

    def _notified(self, notifications: list[Notification]) -> None:
        if len(notifications) == 1:
            self._events.append(notification_received(notifications[0]))
        else:
            self._events.extend(notifications_received(notifications))

    def _rejected_message(self, rejected: MessageRejected) -> None:
        self._events.append(rejected)

    def _errored(self, error: ErrorData) -> None:
        self._end(StreamErrored(error=error))

    def _not_served(self, finish: _Finish) -> None:
        self._end(NotServed(status=finish.status, reason=finish.reason))

    def _ended(self, finish: _Finish) -> None:
        self._end(StreamEnded())

    def _violated(self, brought: ErrorData | _Finish) -> None:
        # The messages counted so far are the rejected ones, the
        # notifications and (for an error) this error: nothing follows one.
        errored = type(brought) is ErrorData
        notified = self._messages - self._rejected - errored > 0
        reason = _VIOLATIONS[errored, notified].format(profile=self._profile.value)
        self._end(StreamBroken(reason=reason))

    def _broken(self, reason: str) -> None:
        self._end(StreamBroken(reason=reason))


#: What each outcome of :data:`TRANSITIONS` does with what its input brought.
_HANDLERS: Final[Mapping[Outcome, Handler[None]]] = {
    Outcome.NOTIFICATION: SequenceMachine._notified,
    Outcome.REJECTED: SequenceMachine._rejected_message,
    Outcome.ERRORED: SequenceMachine._errored,
    Outcome.NOT_SERVED: SequenceMachine._not_served,
    Outcome.ENDED: SequenceMachine._ended,
    Outcome.VIOLATION: SequenceMachine._violated,
    Outcome.BROKEN: SequenceMachine._broken,
}
