"""The sequence machine: every (profile, state, input) of its table, and walks through it."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    StreamOpened,
    encode_message,
)
from diverge_notifications.sansio.client.sequence import TRANSITIONS, Input, Outcome, PathState
from diverge_notifications.sansio.events import TERMINAL_EVENTS

NOTIFICATION = Notification("notifications/progress", {"progressToken": 1, "progress": 2})
ERROR = ErrorData(code=-32603, message="down")
UNDECODABLE = b"\x00[1, 2"

APPLY: dict[Input, Callable[[SequenceMachine], None]] = {
    Input.NOTIFICATION: lambda m: m.receive_payload(encode_message(NOTIFICATION)),
    Input.REJECTED: lambda m: m.receive_payload(UNDECODABLE),
    Input.ERROR: lambda m: m.receive_payload(encode_message(ERROR)),
    Input.FINISH: lambda m: m.receive_finish(status=200),
    Input.LOST: lambda m: m.connection_lost("gone"),
}

OUTCOME_TYPES: dict[Outcome, type[Event]] = {
    Outcome.NOTIFICATION: NotificationReceived,
    Outcome.REJECTED: MessageRejected,
    Outcome.ERRORED: StreamErrored,
    Outcome.NOT_SERVED: NotServed,
    Outcome.ENDED: StreamEnded,
    Outcome.VIOLATION: StreamBroken,
    Outcome.BROKEN: StreamBroken,
}


def drain(machine: SequenceMachine) -> list[Event]:
    events: list[Event] = []
    while (event := machine.next_event()) is not NEED_DATA:
        assert isinstance(event, Event)
        events.append(event)
    return events


def machine_in(profile: Profile, state: PathState) -> SequenceMachine:
    """A machine of ``profile`` brought to ``state`` by the table's own inputs."""
    machine = SequenceMachine(profile)
    machine.open("c1")
    if state is PathState.RECEIVING:
        APPLY[Input.NOTIFICATION](machine)
    elif state is PathState.DONE:
        APPLY[Input.ERROR](machine)
    drain(machine)
    assert machine.state is state
    return machine


def test_the_table_covers_every_profile_live_state_and_input() -> None:
    live = [PathState.EMPTY, PathState.RECEIVING]
    expected = {(p, s, i) for p in Profile for s in live for i in Input}
    assert set(TRANSITIONS) == expected


@pytest.mark.parametrize("key", list(TRANSITIONS), ids=lambda key: "-".join(k.name for k in key))
def test_every_transition_does_what_the_table_says(
    key: tuple[Profile, PathState, Input],
) -> None:
    profile, state, what = key
    next_state, outcome = TRANSITIONS[key]
    machine = machine_in(profile, state)
    APPLY[what](machine)
    events = drain(machine)
    assert machine.state is next_state
    assert type(events[0]) is OUTCOME_TYPES[outcome]
    if outcome is Outcome.VIOLATION:
        assert isinstance(events[0], StreamBroken)
        assert "violates the container profile" in events[0].reason
    if next_state is PathState.DONE:
        assert events[1:] == [ReaskNeeded()]
    else:
        assert len(events) == 1


@given(st.sampled_from(Profile), st.sampled_from([i for i in Input if i is not Input.LOST]))
def test_inputs_after_the_end_are_discarded(profile: Profile, what: Input) -> None:
    machine = machine_in(profile, PathState.DONE)
    APPLY[what](machine)
    assert drain(machine) == []
    assert machine.state is PathState.DONE


@given(st.sampled_from(Profile), st.lists(st.sampled_from(Input), max_size=12))
@settings(max_examples=200)
def test_random_walks_follow_the_table(profile: Profile, inputs: list[Input]) -> None:
    machine = SequenceMachine(profile)
    machine.open("c9")
    events = drain(machine)
    assert events == [StreamOpened(channel="c9")]
    state = PathState.EMPTY
    lost = False
    for what in inputs:
        if lost and what is not Input.LOST:
            # After connection_lost() nothing more can arrive: the caller's mistake.
            with pytest.raises(LocalProtocolError):
                APPLY[what](machine)
            continue
        APPLY[what](machine)
        lost = lost or what is Input.LOST
        new = drain(machine)
        if state is PathState.DONE:
            assert new == []
            continue
        state, outcome = TRANSITIONS[(profile, state, what)]
        assert type(new[0]) is OUTCOME_TYPES[outcome]
        events += new
    assert machine.state is state
    check_path_rules(events)


def check_path_rules(events: list[Event]) -> None:
    """StreamOpened first; at most one terminal; ReaskNeeded right after it, and last."""
    assert events[0] == StreamOpened(channel="c9")
    terminals = [i for i, event in enumerate(events) if isinstance(event, TERMINAL_EVENTS)]
    assert len(terminals) <= 1
    reasks = [i for i, event in enumerate(events) if isinstance(event, ReaskNeeded)]
    if terminals:
        assert reasks == [terminals[0] + 1] == [len(events) - 1]
    else:
        assert reasks == []


def test_receiving_after_connection_lost_is_the_callers_mistake() -> None:
    machine = SequenceMachine()
    machine.connection_lost("reset")
    machine.connection_lost("again")  # repeatable
    assert drain(machine) == [StreamBroken(reason="reset"), ReaskNeeded()]
    for what in (Input.NOTIFICATION, Input.ERROR, Input.FINISH):
        with pytest.raises(LocalProtocolError):
            APPLY[what](machine)
    with pytest.raises(LocalProtocolError):
        machine.receive_message(NOTIFICATION)
    with pytest.raises(LocalProtocolError):
        machine.refused(500, "x")


def test_open_comes_first_and_once() -> None:
    machine = SequenceMachine()
    APPLY[Input.NOTIFICATION](machine)
    with pytest.raises(LocalProtocolError):
        machine.open("late")


def test_without_reask() -> None:
    machine = SequenceMachine(reask=False)
    APPLY[Input.NOTIFICATION](machine)
    APPLY[Input.FINISH](machine)
    assert [type(e) for e in drain(machine)] == [NotificationReceived, StreamEnded]


def test_refused_is_not_served_with_the_status_and_reason() -> None:
    machine = SequenceMachine()
    machine.refused(401, "401 Unauthorized")
    machine.refused(500, "ignored once over")
    assert drain(machine) == [NotServed(status=401, reason="401 Unauthorized"), ReaskNeeded()]


def test_a_path_with_messages_cannot_be_refused() -> None:
    machine = SequenceMachine()
    APPLY[Input.NOTIFICATION](machine)
    with pytest.raises(LocalProtocolError):
        machine.refused(500, "x")


def test_receive_message_takes_decoded_messages() -> None:
    machine = SequenceMachine(Profile.CONTAINER)
    machine.receive_message(NOTIFICATION)
    machine.receive_message(ERROR)
    assert drain(machine) == [
        NotificationReceived(notification=NOTIFICATION),
        StreamBroken(reason="an error after a notification violates the container profile"),
        ReaskNeeded(),
    ]


def test_messages_counts_decodable_and_undecodable() -> None:
    machine = SequenceMachine()
    APPLY[Input.NOTIFICATION](machine)
    APPLY[Input.REJECTED](machine)
    APPLY[Input.NOTIFICATION](machine)
    assert machine.messages == 3
    assert machine.profile is Profile.PROVIDER


# --- the container profile at payload level (the container response page) -------------------------


def test_container_happy_path_notifications_and_no_finish() -> None:
    machine = SequenceMachine(Profile.CONTAINER)
    for _ in range(5):
        APPLY[Input.NOTIFICATION](machine)
    events = drain(machine)
    assert events == [NotificationReceived(notification=NOTIFICATION)] * 5
    assert machine.state is PathState.RECEIVING


def test_container_happy_path_one_error_then_the_finish() -> None:
    machine = SequenceMachine(Profile.CONTAINER)
    APPLY[Input.ERROR](machine)
    APPLY[Input.FINISH](machine)
    assert drain(machine) == [StreamErrored(error=ERROR), ReaskNeeded()]


def test_container_finish_with_nothing_is_not_served() -> None:
    machine = SequenceMachine(Profile.CONTAINER)
    APPLY[Input.FINISH](machine)
    assert drain(machine) == [
        NotServed(status=200, reason="the path ended with no message"),
        ReaskNeeded(),
    ]


@pytest.mark.parametrize(
    ("last", "reason"),
    [
        (Input.ERROR, "an error after a notification violates the container profile"),
        (Input.FINISH, "a finish after notifications violates the container profile"),
    ],
)
def test_container_violations(last: Input, reason: str) -> None:
    machine = SequenceMachine(Profile.CONTAINER)
    APPLY[Input.NOTIFICATION](machine)
    APPLY[Input.NOTIFICATION](machine)
    APPLY[last](machine)
    events = drain(machine)
    assert events[-2:] == [StreamBroken(reason=reason), ReaskNeeded()]


def test_provider_allows_what_the_container_forbids() -> None:
    machine = SequenceMachine(Profile.PROVIDER)
    APPLY[Input.NOTIFICATION](machine)
    APPLY[Input.ERROR](machine)
    assert drain(machine)[-2:] == [StreamErrored(error=ERROR), ReaskNeeded()]


@pytest.mark.parametrize(
    ("last", "reason"),
    [
        (Input.ERROR, "an error after an undecodable message violates the container profile"),
        (Input.FINISH, "a finish after an undecodable message violates the container profile"),
    ],
)
def test_container_violations_after_undecodable_messages_only(last: Input, reason: str) -> None:
    # No notification arrived: the reason does not say one did.
    machine = SequenceMachine(Profile.CONTAINER)
    APPLY[Input.REJECTED](machine)
    APPLY[Input.REJECTED](machine)
    APPLY[last](machine)
    assert drain(machine)[-2:] == [StreamBroken(reason=reason), ReaskNeeded()]


def test_container_violation_after_a_notification_and_an_undecodable_message() -> None:
    machine = SequenceMachine(Profile.CONTAINER)
    APPLY[Input.REJECTED](machine)
    machine.receive_message(NOTIFICATION)
    APPLY[Input.FINISH](machine)
    reason = "a finish after notifications violates the container profile"
    assert drain(machine)[-2:] == [StreamBroken(reason=reason), ReaskNeeded()]


def test_opening_twice_is_the_callers_mistake() -> None:
    machine = SequenceMachine()
    machine.open("c1")
    with pytest.raises(LocalProtocolError):
        machine.open("c1")
    assert drain(machine) == [StreamOpened(channel="c1")]


@pytest.mark.parametrize("message", [None, "boom", {"method": "m"}, encode_message(NOTIFICATION)])
def test_receive_message_takes_only_decoded_messages(message: object) -> None:
    machine = SequenceMachine()
    with pytest.raises(TypeError):
        machine.receive_message(message)  # type: ignore[arg-type]
    assert machine.state is PathState.EMPTY and machine.messages == 0
    assert drain(machine) == []
