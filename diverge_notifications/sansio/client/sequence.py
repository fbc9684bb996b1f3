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
writer's. The reader does what its
table says, and the documentation's state diagram is generated from it.
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Final

from ..errors import FrameError, LocalProtocolError
from ..events import (
    NEED_DATA,
    Event,
    EventOrNeedData,
    MessageRejected,
    NotificationReceived,
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
from ..wire.messages import decode_message, decode_notifications
from ..wire.profiles import GrammarPoint, Part, Profile, allows

__all__ = [
    "TRANSITIONS",
    "Input",
    "Outcome",
    "PathState",
    "SequenceMachine",
]


class PathState(enum.Enum):
    """Where a path is."""

    #: Open, no message yet (keep-alives do not count).
    EMPTY = "empty"
    #: Open, one or more messages received.
    RECEIVING = "receiving"
    #: A terminal event was produced; whatever arrives now is discarded.
    DONE = "done"


class Input(enum.Enum):
    """What can happen to a path."""

    NOTIFICATION = "notification"
    REJECTED = "undecodable message"
    ERROR = "error"
    FINISH = "clean end"
    LOST = "connection lost"


class Outcome(enum.Enum):
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

# Why a violation ends the path, by input and by whether a notification
# arrived before it (or only undecodable messages did).
_VIOLATIONS: Final = {
    (Input.ERROR, True): "an error after a notification violates the {profile} profile",
    (Input.FINISH, True): "a finish after notifications violates the {profile} profile",
    (Input.ERROR, False): "an error after an undecodable message violates the {profile} profile",
    (Input.FINISH, False): "a finish after an undecodable message violates the {profile} profile",
}


class SequenceMachine:
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
    """

    __slots__ = (
        "_events",
        "_lost",
        "_messages",
        "_notification_stays",
        "_opened",
        "_profile",
        "_reask",
        "_rejected",
        "_state",
    )

    def __init__(self, profile: Profile = Profile.PROVIDER, *, reask: bool = True) -> None:
        self._profile = Profile(profile)
        self._reask = reask
        self._events: deque[Event] = deque()
        self._lost = False
        self._opened = False
        self._messages = 0
        self._rejected = 0
        self._enter(PathState.EMPTY)

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
        append = self._events.append
        # The common case, read from the table once per state rather than
        # once per message: a notification keeps the state.
        stays = self._notification_stays
        if stays and type(payloads) is list and len(payloads) > 1:
            # A run of notifications that keep the state: decoded at once.
            notifications = decode_notifications(payloads)
            if notifications is not None:
                self._messages += len(notifications)
                self._events.extend(notifications_received(notifications))
                return
        for payload in payloads:
            try:
                message = decode_message(payload)
            except FrameError as error:
                rejected = MessageRejected(error=error, payload=bytes(payload))
                state = self._apply(Input.REJECTED, rejected)
            else:
                self._messages += 1
                if type(message) is Notification:
                    if stays:
                        append(notification_received(message))
                        continue
                    state = self._apply(Input.NOTIFICATION, notification_received(message))
                else:
                    assert type(message) is ErrorData
                    state = self._apply(Input.ERROR, StreamErrored(error=message))
            if state is _D:
                return
            stays = self._notification_stays

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
        if self._state is PathState.DONE:
            return
        self._messages += 1
        if isinstance(message, Notification):
            self._apply(Input.NOTIFICATION, NotificationReceived(notification=message))
        else:
            self._apply(Input.ERROR, StreamErrored(error=message))

    def receive_finish(self, *, status: int | None = None) -> None:
        """The path ended cleanly. ``status`` is carried into :class:`NotServed`."""
        self._check_not_lost()
        if self._state is PathState.DONE:
            return
        self._apply(Input.FINISH, None, status=status)

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
        self._apply(Input.FINISH, None, status=status, reason=reason)

    def connection_lost(self, reason: str = "the connection ended before the path did") -> None:
        """The path ended abruptly. May be called more than once."""
        if self._lost:
            return
        self._lost = True
        if self._state is not PathState.DONE:
            self._apply(Input.LOST, StreamBroken(reason=reason))

    def violation(self, reason: str) -> None:
        """End the path as broken for a reason found below this layer (bad HTTP, framing)."""
        if self._state is not PathState.DONE:
            self._finish(StreamBroken(reason=reason))

    @property
    def queued(self) -> deque[Event]:
        """The events not taken yet, in order: :meth:`next_event` pops the first.

        For a connection that takes the events itself, one call less per event.
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

    def _enter(self, state: PathState) -> None:
        self._state = state
        self._notification_stays = TRANSITIONS.get((self._profile, state, Input.NOTIFICATION)) == (
            state,
            Outcome.NOTIFICATION,
        )

    def _apply(
        self,
        what: Input,
        event: Event | None,
        *,
        status: int | None = None,
        reason: str = "the path ended with no message",
    ) -> PathState:
        """Apply the table to ``what`` and queue the event; the new state."""
        if what is Input.REJECTED:
            self._messages += 1
            self._rejected += 1
        state, outcome = TRANSITIONS[(self._profile, self._state, what)]
        if outcome is Outcome.NOT_SERVED:
            event = NotServed(status=status, reason=reason)
        elif outcome is Outcome.ENDED:
            event = StreamEnded()
        elif outcome is Outcome.VIOLATION:
            # The messages counted so far are the rejected ones, the
            # notifications and (for an error) this error: nothing follows one.
            errors = 1 if what is Input.ERROR else 0
            notified = self._messages - self._rejected - errors > 0
            reason = _VIOLATIONS[what, notified].format(profile=self._profile.value)
            event = StreamBroken(reason=reason)
        assert event is not None
        if state is PathState.DONE:
            self._finish(event)
        else:
            if state is not self._state:
                self._enter(state)
            self._events.append(event)
        return state

    def _finish(self, terminal: Event) -> None:
        self._enter(PathState.DONE)
        self._events.append(terminal)
        if self._reask:
            self._events.append(ReaskNeeded())
