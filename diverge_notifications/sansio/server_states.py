"""The server side's rules: its states, inputs, outcomes and transition tables.

:class:`~.server.ServerConnection` runs on one table per profile,
:data:`SERVER_TRANSITIONS` (provider) and :data:`CONTAINER_SERVER_TRANSITIONS`,
mapping (state, input) to (next state, outcome). The ask's rows are written
here; the path's rows are derived from the profile grammar
(:data:`~.sequence.PROFILE_GRAMMAR`) when the module is imported, and so is
what a connection reads off its table once (:data:`SERVER_RULES`): the
final states, the state in which a notification needs no lookup, and why
the grammar refuses what it refuses.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from typing import Final, NamedTuple

from .sequence import GrammarPoint, Part, Profile, allows, violates_profile

__all__ = [
    "CONTAINER_SERVER_TRANSITIONS",
    "SERVER_RULES",
    "SERVER_TRANSITIONS",
    "SERVER_TRANSITIONS_BY_PROFILE",
    "ServerInput",
    "ServerOutcome",
    "ServerRules",
    "ServerState",
]


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
    #: The ask was refused (the error response queued, or returned by ``refuse()``); close.
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
    REFUSE = "refuse"


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
    REFUSAL = "error response (not served now)"


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


class ServerRules(NamedTuple):
    """What a connection reads off its profile's table, once."""

    #: The table itself.
    table: _ServerTable
    #: The states with no row: entering one ends the connection.
    final: frozenset[ServerState]
    #: Where a notification is a frame that keeps the state (no lookup there).
    frame_loop: ServerState | None
    #: Why the profile's grammar refuses a write (others get a plain reason).
    why_refused: Mapping[tuple[ServerState, ServerInput], str]


#: The rules of each profile.
SERVER_RULES: Final[Mapping[Profile, ServerRules]] = {
    profile: ServerRules(table, _final_states(table), _frame_loop(table), _why_refused(profile))
    for profile, table in SERVER_TRANSITIONS_BY_PROFILE.items()
}
