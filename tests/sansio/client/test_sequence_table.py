"""The sequence machine and the container writer do what their tables say, and the tables
agree with the one profile grammar they are derived from.

With the generic harness (tests/table_harness.py): every reachable state of
a :class:`SequenceMachine` and of a :class:`ContainerWriter`, in both
profiles, takes every input; a pair in the table must reach the table's
next state with its outcome's effect (the events produced, the payload
written), a pair outside it must change nothing (the reader discards what
arrives after the path's end; the writer refuses with
:class:`LocalProtocolError`).

Then the grammar itself, pair by pair: for each profile, each point of a
path (nothing yet, after a notification, after the error) and each part
that may or may not come next, the reader's table, the server's tables and
refusals, and the writer's table say what :data:`PROFILE_GRAMMAR` says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

import diverge_notifications.sansio.client.sequence as sequence_module
from diverge_notifications.sansio import (
    NEED_DATA,
    ErrorData,
    Event,
    LocalProtocolError,
    MessageRejected,
    Notification,
    NotificationReceived,
    NotServed,
    Profile,
    ReaskNeeded,
    SequenceMachine,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    encode_message,
)
from diverge_notifications.sansio.client.sequence import TRANSITIONS, Input, Outcome, PathState
from diverge_notifications.sansio.server.connection import (
    SERVER_TRANSITIONS_BY_PROFILE,
    ServerConnection,
    ServerInput,
    ServerOutcome,
    ServerState,
)
from diverge_notifications.sansio.server.writer import (
    WRITER_TRANSITIONS,
    ContainerWriter,
    WriterInput,
    WriterOutcome,
    WriterState,
)
from diverge_notifications.sansio.wire.profiles import (
    GRAMMAR_POINTS,
    PROFILE_GRAMMAR,
    GrammarPoint,
    Part,
)
from tests.table_harness import Machine, Step, check_table

NOTIFICATION = Notification("notifications/progress", {"progressToken": 1, "progress": 2})
ERROR = ErrorData(code=-32603, message="down")
UNDECODABLE = b"\x00[1, 2"

#: The reader's table as its module defines it, kept before any test changes it.
ORIGINAL: Mapping[Any, tuple[PathState, Outcome]] = dict(TRANSITIONS)


def per_profile(table: Mapping[tuple[Profile, Any, Any], Any], profile: Profile) -> dict[Any, Any]:
    """The rows of one profile, keyed (state, input)."""
    return {(state, what): row for (p, state, what), row in table.items() if p is profile}


# --- the reader ------------------------------------------------------------------------------

READ: dict[Input, Callable[[SequenceMachine], None]] = {
    Input.NOTIFICATION: lambda m: m.receive_payload(encode_message(NOTIFICATION)),
    Input.REJECTED: lambda m: m.receive_payload(UNDECODABLE),
    Input.ERROR: lambda m: m.receive_payload(encode_message(ERROR)),
    Input.FINISH: lambda m: m.receive_finish(status=200),
    Input.LOST: lambda m: m.connection_lost("gone"),
}


def read(machine: SequenceMachine, what: Input) -> list[Event]:
    READ[what](machine)
    events: list[Event] = []
    while (event := machine.next_event()) is not NEED_DATA:
        assert isinstance(event, Event)
        events.append(event)
    return events


def reader_effect(profile: Profile) -> Callable[[Outcome, Step[Input]], None]:
    def check(outcome: Outcome, step: Step[Input]) -> None:
        assert step.error is None, step
        events = step.result
        assert isinstance(events, list)
        first = events[0]
        if outcome is Outcome.NOTIFICATION:
            assert events == [NotificationReceived(notification=NOTIFICATION)]
            return
        if outcome is Outcome.REJECTED:
            assert len(events) == 1 and isinstance(first, MessageRejected)
            assert first.payload == UNDECODABLE
            return
        # Every other outcome ends the path: its event, then ReaskNeeded.
        assert events[1:] == [ReaskNeeded()], events
        if outcome is Outcome.ERRORED:
            assert first == StreamErrored(error=ERROR)
        elif outcome is Outcome.NOT_SERVED:
            assert isinstance(first, NotServed) and first.status == 200
        elif outcome is Outcome.ENDED:
            assert first == StreamEnded()
        elif outcome is Outcome.BROKEN:
            assert first == StreamBroken(reason="gone")
        else:
            assert outcome is Outcome.VIOLATION
            assert isinstance(first, StreamBroken) and isinstance(first.reason, str)
            assert f"violates the {profile.value} profile" in first.reason

    return check


def discarded(step: Step[Input]) -> bool:
    """Outside the table (the path is over): nothing happens, or the caller is told it is over."""
    if step.error is not None:
        return isinstance(step.error, LocalProtocolError)
    return bool(step.result == [])


@pytest.mark.parametrize("profile", list(Profile))
def test_the_reader_does_what_its_table_says(
    profile: Profile, table: Mapping[Any, tuple[PathState, Outcome]] = TRANSITIONS
) -> None:
    check_table(
        Machine(
            make=lambda: SequenceMachine(profile),
            state=lambda machine: machine.state,
            inputs=list(Input),
            apply=read,
        ),
        per_profile(table, profile),
        check_effect=reader_effect(profile),
        refused=discarded,
        expected_states=list(PathState),
    )


def reader_changes() -> Iterator[Any]:
    """Every reader table that differs from :data:`TRANSITIONS` in one entry.

    Its outcome, its next state, or the row gone.
    """
    for key, (following, outcome) in ORIGINAL.items():
        name = "+".join(part.name for part in key)
        for other in Outcome:
            if other is not outcome:
                yield pytest.param({**ORIGINAL, key: (following, other)}, id=f"{name}/{other.name}")
        for state in PathState:
            if state is not following:
                yield pytest.param({**ORIGINAL, key: (state, outcome)}, id=f"{name}->{state.name}")
        removed = {pair: row for pair, row in ORIGINAL.items() if pair != key}
        yield pytest.param(removed, id=f"{name} removed")


@pytest.mark.parametrize("changed", list(reader_changes()))
def test_any_change_to_the_reader_table_changes_the_behaviour(
    monkeypatch: pytest.MonkeyPatch, changed: Mapping[Any, tuple[PathState, Outcome]]
) -> None:
    monkeypatch.setattr(sequence_module, "TRANSITIONS", changed)
    with pytest.raises(AssertionError):
        for profile in Profile:
            test_the_reader_does_what_its_table_says(profile, ORIGINAL)


# --- the container writer ----------------------------------------------------------------------

WRITE: dict[WriterInput, Callable[[ContainerWriter], bytes | None]] = {
    WriterInput.NOTIFICATION: lambda w: w.notification(NOTIFICATION),
    WriterInput.ERROR: lambda w: w.error(ERROR),
    WriterInput.FINISH: lambda w: w.finish(),
}

#: What each outcome of the writer's table writes: what the write returns.
WRITTEN: dict[WriterOutcome, bytes | None] = {
    WriterOutcome.NOTIFICATION: encode_message(NOTIFICATION),
    WriterOutcome.ERROR: encode_message(ERROR),
    WriterOutcome.FINISH: None,
}


def writer_effect(outcome: WriterOutcome, step: Step[WriterInput]) -> None:
    assert step.error is None, step
    assert step.result == WRITTEN[outcome]


@pytest.mark.parametrize("profile", list(Profile))
def test_the_container_writer_does_what_its_table_says(profile: Profile) -> None:
    check_table(
        Machine(
            make=lambda: ContainerWriter(profile),
            state=lambda writer: writer.state,
            inputs=list(WriterInput),
            apply=lambda writer, what: WRITE[what](writer),
        ),
        per_profile(WRITER_TRANSITIONS, profile),
        check_effect=writer_effect,
        refused=lambda step: isinstance(step.error, LocalProtocolError),
        expected_states=list(WriterState),
    )


# --- one grammar ---------------------------------------------------------------------------------

# Written out here, independently of the modules' own maps, so that a
# derivation that drifts from the grammar is caught.
READER_STATE: dict[GrammarPoint, PathState] = {
    None: PathState.EMPTY,
    Part.NOTIFICATION: PathState.RECEIVING,
}
READER_INPUT = {
    Part.NOTIFICATION: Input.NOTIFICATION,
    Part.ERROR: Input.ERROR,
    Part.FINISH: Input.FINISH,
}
SERVER_STATE: dict[GrammarPoint, ServerState] = {
    None: ServerState.PATH_OPEN,
    Part.NOTIFICATION: ServerState.PATH_NOTIFYING,
}
SERVER_INPUT = {
    Part.NOTIFICATION: ServerInput.NOTIFICATION,
    Part.ERROR: ServerInput.ERROR,
    Part.FINISH: ServerInput.END,
}
WRITER_STATE: dict[GrammarPoint, WriterState] = {
    None: WriterState.EMPTY,
    Part.NOTIFICATION: WriterState.NOTIFYING,
    Part.ERROR: WriterState.ERRORED,
}
WRITER_INPUT = {
    Part.NOTIFICATION: WriterInput.NOTIFICATION,
    Part.ERROR: WriterInput.ERROR,
    Part.FINISH: WriterInput.FINISH,
}
PAIRS = [(profile, after, part) for profile in Profile for after in GRAMMAR_POINTS for part in Part]


def test_the_grammar_is_what_the_specification_pages_say() -> None:
    n, e, f = Part.NOTIFICATION, Part.ERROR, Part.FINISH
    # Seed 000: [0]* then at most one [1], then the end.
    assert PROFILE_GRAMMAR[Profile.PROVIDER] == {None: (n, e, f), n: (n, e, f), e: (f,)}
    # Seeds 001/003: [0]* and no finish, or one [1] first and then the finish.
    assert PROFILE_GRAMMAR[Profile.CONTAINER] == {None: (n, e, f), n: (n,), e: (f,)}


@pytest.mark.parametrize(("profile", "after", "part"), PAIRS)
def test_the_reader_table_agrees_with_the_grammar(
    profile: Profile, after: GrammarPoint, part: Part
) -> None:
    if after not in READER_STATE:
        return  # the reader ends the path at the error: nothing is read after it
    allowed = part in PROFILE_GRAMMAR[profile][after]
    _, outcome = TRANSITIONS[(profile, READER_STATE[after], READER_INPUT[part])]
    assert (outcome is not Outcome.VIOLATION) is allowed


@pytest.mark.parametrize(("profile", "after", "part"), PAIRS)
def test_the_server_table_agrees_with_the_grammar(
    profile: Profile, after: GrammarPoint, part: Part
) -> None:
    if after not in SERVER_STATE:
        return  # the server writes the end with the error: nothing is written after it
    allowed = part in PROFILE_GRAMMAR[profile][after]
    table = SERVER_TRANSITIONS_BY_PROFILE[profile]
    assert ((SERVER_STATE[after], SERVER_INPUT[part]) in table) is allowed
    if part is Part.ERROR and allowed:
        # Nothing but the finish follows an error, so it is written with the error.
        assert table[(SERVER_STATE[after], SERVER_INPUT[part])] == (
            ServerState.DONE,
            ServerOutcome.ERROR_AND_END,
        )


@pytest.mark.parametrize(("profile", "after", "part"), PAIRS)
def test_the_server_refusals_agree_with_the_grammar(
    profile: Profile, after: GrammarPoint, part: Part
) -> None:
    if after not in SERVER_STATE:
        return
    conn = ServerConnection(profile=profile)
    conn.receive_data(b"POST /requests HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n\x04")
    conn.next_event()
    conn.start_path()
    if after is Part.NOTIFICATION:
        conn.send_notification(NOTIFICATION)
    write = {
        Part.NOTIFICATION: lambda: conn.send_notification(NOTIFICATION),
        Part.ERROR: lambda: conn.send_error(ERROR),
        Part.FINISH: conn.end_path,
    }[part]
    if part in PROFILE_GRAMMAR[profile][after]:
        write()
        return
    with pytest.raises(LocalProtocolError, match=f"violates the {profile.value} profile"):
        write()


@pytest.mark.parametrize(("profile", "after", "part"), PAIRS)
def test_the_writer_table_agrees_with_the_grammar(
    profile: Profile, after: GrammarPoint, part: Part
) -> None:
    allowed = part in PROFILE_GRAMMAR[profile][after]
    assert ((profile, WRITER_STATE[after], WRITER_INPUT[part]) in WRITER_TRANSITIONS) is allowed


def test_declining_is_the_finish_with_nothing_before_it() -> None:
    for profile, table in SERVER_TRANSITIONS_BY_PROFILE.items():
        allowed = Part.FINISH in PROFILE_GRAMMAR[profile][None]
        assert ((ServerState.NOTIFICATIONS_ASKED, ServerInput.DECLINE) in table) is allowed
        assert ((ServerState.PATH_OPEN, ServerInput.DECLINE) in table) is allowed
        assert (ServerState.PATH_NOTIFYING, ServerInput.DECLINE) not in table
