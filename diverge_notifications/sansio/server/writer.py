"""The payload-level writer: the sequence of channel responses, with no HTTP.

The container response page's rules, written at payload level.

:class:`ContainerWriter` writes the payloads of a path (``[0][JSON]`` and
``[1][JSON]``, as :func:`~.messages.encode_message` encodes them) and
records its finish, for the container protocol, whose transport is the
caller's. It follows one table, :data:`WRITER_TRANSITIONS`, derived from
the profile grammar (:data:`~.sequence.PROFILE_GRAMMAR`) that the reader
and the server follow too; anything the table does not allow raises
:class:`LocalProtocolError` and changes nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

from ..errors import LocalProtocolError
from ..mcp.model import ErrorData
from ..wire.messages import NotificationLike, encode_message, to_error, to_notification
from ..wire.profiles import GrammarPoint, Part, Profile, allows, violates_profile

__all__ = ["WRITER_TRANSITIONS", "ContainerWriter", "WriterInput", "WriterState"]


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
#: Where each part leaves the writer.
_AFTER: Final[Mapping[Part, WriterState]] = {
    Part.NOTIFICATION: _WS.NOTIFYING,
    Part.ERROR: _WS.ERRORED,
    Part.FINISH: _WS.FINISHED,
}

#: (profile, state, input) -> next state, derived from the profile grammar.
#: A triple that is not in the table raises :class:`LocalProtocolError`.
WRITER_TRANSITIONS: Final[Mapping[tuple[Profile, WriterState, WriterInput], WriterState]] = {
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


class ContainerWriter:
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
        """The state the table gives for ``what``, or :class:`LocalProtocolError`."""
        found = WRITER_TRANSITIONS.get((self._profile, self._state, what))
        if found is None:
            raise LocalProtocolError(_why_refused(self._profile, self._state, what))
        return found

    def notification(self, notification: NotificationLike) -> bytes:
        """The payload of one notification: ``[0]`` + its JSON (raw bytes relayed unchanged)."""
        state = self._next(WriterInput.NOTIFICATION)
        payload = encode_message(to_notification(notification))
        self._state = state
        return payload

    def error(self, error: ErrorData) -> bytes:
        """The payload of the error, ``[1]`` + its JSON; :meth:`finish` is required next."""
        state = self._next(WriterInput.ERROR)
        payload = encode_message(to_error(error))
        self._state = state
        return payload

    def finish(self) -> None:
        """Record the finish; raises :class:`LocalProtocolError` where the profile forbids it."""
        self._state = self._next(WriterInput.FINISH)
