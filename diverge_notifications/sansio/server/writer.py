"""The payload-level writer: the sequence of channel responses, with no HTTP.

The container response page's rules, written at payload level.

:class:`ContainerWriter` writes the payloads of a path (``[0][JSON]`` and
``[1][JSON]``, as :func:`~..wire.messages.encode_message` encodes them) and
records its finish, for the container protocol, whose transport is the
caller's. It follows one table, :data:`WRITER_TRANSITIONS`, derived from
the profile grammar (:data:`~..wire.profiles.PROFILE_GRAMMAR`) that the reader
and the server follow too, and runs it as every machine of the core runs
its table (:class:`~..transitions.TableMachine`); anything the table does
not allow raises :class:`LocalProtocolError` and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..mcp.model import ErrorData
from ..transitions import Handler, TableEnum, TableMachine
from ..wire.messages import NotificationLike, encode_message, to_error, to_notification
from ..wire.profiles import GrammarPoint, Part, Profile, allows, violates_profile

__all__ = ["WRITER_TRANSITIONS", "ContainerWriter", "WriterInput", "WriterOutcome", "WriterState"]


class WriterState(TableEnum):
    """Where a :class:`ContainerWriter` is."""

    #: Nothing written yet.
    EMPTY = "empty"
    #: One or more notifications written.
    NOTIFYING = "notifying"
    #: The error was written; the finish must follow.
    ERRORED = "errored"
    #: Finished; nothing more may be written.
    FINISHED = "finished"


class WriterInput(TableEnum):
    """What a :class:`ContainerWriter` is asked to write."""

    NOTIFICATION = "notification"
    ERROR = "error"
    FINISH = "finish"


class WriterOutcome(TableEnum):
    """What a :class:`ContainerWriter`'s move writes."""

    NOTIFICATION = "[0][JSON]"
    ERROR = "[1][JSON]"
    FINISH = "finish recorded"


_WS = WriterState
_WI = WriterInput
_WO = WriterOutcome

#: The writer's live states, by the grammar point each stands for.
_POINTS: Final[Mapping[WriterState, GrammarPoint]] = {
    _WS.EMPTY: None,
    _WS.NOTIFYING: Part.NOTIFICATION,
    _WS.ERRORED: Part.ERROR,
}
#: Each input is one part of the grammar.
_PARTS: Final[Mapping[WriterInput, Part]] = {
    _WI.NOTIFICATION: Part.NOTIFICATION,
    _WI.ERROR: Part.ERROR,
    _WI.FINISH: Part.FINISH,
}
#: Where each part leaves the writer, and what writing it is.
_AFTER: Final[Mapping[Part, tuple[WriterState, WriterOutcome]]] = {
    Part.NOTIFICATION: (_WS.NOTIFYING, _WO.NOTIFICATION),
    Part.ERROR: (_WS.ERRORED, _WO.ERROR),
    Part.FINISH: (_WS.FINISHED, _WO.FINISH),
}

#: (profile, state, input) -> (next state, outcome), derived from the profile
#: grammar. A triple that is not in the table raises :class:`LocalProtocolError`.
WRITER_TRANSITIONS: Final[
    Mapping[tuple[Profile, WriterState, WriterInput], tuple[WriterState, WriterOutcome]]
] = {
    (profile, state, what): _AFTER[_PARTS[what]]
    for profile in (Profile.CONTAINER, Profile.PROVIDER)
    for state, after in _POINTS.items()
    for what in WriterInput
    if allows(profile, after, _PARTS[what])
}


def _why_refused(profile: Profile, state: WriterState, what: WriterInput) -> str:
    after = _POINTS.get(state)
    if after is Part.NOTIFICATION and violates_profile(profile, after, _PARTS[what]):
        return f"{what.value} after a notification violates the {profile.value} profile"
    return f"{what.value} is not allowed in state {state.name}"


class ContainerWriter(TableMachine[WriterState, WriterInput]):
    """Writes the container response page's sequence of channel responses, payload by payload.

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
    _BY_PROFILE = True
    _profile: Profile

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

    def _refusal(self, what: WriterInput) -> str:
        return _why_refused(self._profile, self._state, what)

    # The message is encoded before the move, so that one the writer cannot
    # encode changes nothing: the move carries the payload, and writing it
    # is returning it.

    def notification(self, notification: NotificationLike) -> bytes:
        """The payload of one notification: ``[0]`` + its JSON (raw bytes relayed unchanged)."""
        payload = encode_message(to_notification(notification))
        return self._fire(WRITER_TRANSITIONS, _HANDLERS, _WI.NOTIFICATION, payload)

    def error(self, error: ErrorData) -> bytes:
        """The payload of the error, ``[1]`` + its JSON; :meth:`finish` is required next."""
        payload = encode_message(to_error(error))
        return self._fire(WRITER_TRANSITIONS, _HANDLERS, _WI.ERROR, payload)

    def finish(self) -> None:
        """Record the finish; raises :class:`LocalProtocolError` where the profile forbids it."""
        self._fire(WRITER_TRANSITIONS, _HANDLERS, _WI.FINISH)

    def _payload(self, payload: bytes) -> bytes:
        return payload

    def _finished(self, _: None) -> bytes:
        return b""  # the finish is no payload: the caller's transport sends it


#: What each outcome of the table does (:meth:`ContainerWriter._fire`).
_HANDLERS: Final[Mapping[WriterOutcome, Handler[bytes]]] = {
    _WO.NOTIFICATION: ContainerWriter._payload,
    _WO.ERROR: ContainerWriter._payload,
    _WO.FINISH: ContainerWriter._finished,
}
