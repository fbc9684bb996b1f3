"""The payload-level writer of the container response page's channel-response sequence."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import diverge_notifications.sansio.server.writer as writer_module
from diverge_notifications.sansio import (
    NEED_DATA,
    ErrorData,
    LocalProtocolError,
    Notification,
    Profile,
    SequenceMachine,
    decode_message,
)
from diverge_notifications.sansio.events import NotificationReceived, StreamBroken
from diverge_notifications.sansio.server.writer import (
    WRITER_TRANSITIONS,
    ContainerWriter,
    WriterInput,
    WriterOutcome,
    WriterState,
)

UPDATED = Notification("notifications/resources/updated", {"uri": "file:///a"})
BOOM = ErrorData(code=-32603, message="the client of the container cannot be reached")


def test_payloads_are_tag_and_json() -> None:
    writer = ContainerWriter()
    assert writer.profile is Profile.CONTAINER
    assert writer.notification(UPDATED) == b"\x00" + UPDATED.to_bytes()
    assert decode_message(writer.notification({"method": "m"})) == Notification.from_json(
        {"method": "m"}
    )
    raw = b'{ "method":"x", "params":{"_meta":{"k":1}} }'
    assert writer.notification(raw) == b"\x00" + raw
    assert writer.state is WriterState.NOTIFYING


def test_container_notifications_then_no_finish() -> None:
    writer = ContainerWriter()
    for _ in range(3):
        writer.notification(UPDATED)
    with pytest.raises(LocalProtocolError, match="container profile"):
        writer.finish()
    with pytest.raises(LocalProtocolError, match="container profile"):
        writer.error(BOOM)
    assert writer.state is WriterState.NOTIFYING
    writer.notification(UPDATED)  # still fine


def test_container_error_first_then_finish_is_required() -> None:
    writer = ContainerWriter()
    assert writer.error(BOOM) == b"\x01" + BOOM.to_bytes()
    assert writer.finish_required
    with pytest.raises(LocalProtocolError):
        writer.notification(UPDATED)
    with pytest.raises(LocalProtocolError):
        writer.error(BOOM)
    writer.finish()
    assert writer.state is WriterState.FINISHED
    for write in (lambda: writer.notification(UPDATED), lambda: writer.error(BOOM), writer.finish):
        with pytest.raises(LocalProtocolError):
            write()


def test_container_finish_with_nothing_is_not_served() -> None:
    writer = ContainerWriter()
    writer.finish()
    assert writer.state is WriterState.FINISHED


def test_provider_profile_allows_error_and_finish_after_notifications() -> None:
    writer = ContainerWriter(Profile.PROVIDER)
    writer.notification(UPDATED)
    writer.error(BOOM)
    with pytest.raises(LocalProtocolError):
        writer.notification(UPDATED)
    writer.finish()
    writer = ContainerWriter(Profile.PROVIDER)
    writer.notification(UPDATED)
    writer.finish()


def test_invalid_notifications_raise_and_change_nothing() -> None:
    writer = ContainerWriter()
    with pytest.raises(LocalProtocolError):
        writer.notification(b"[]")
    with pytest.raises(LocalProtocolError):
        writer.notification({"params": {}})
    with pytest.raises(TypeError):
        writer.error({"code": 1})  # type: ignore[arg-type]
    assert writer.state is WriterState.EMPTY
    writer.error(BOOM)  # an error first is still allowed


_ACTIONS: dict[WriterInput, Callable[[ContainerWriter], object]] = {
    WriterInput.NOTIFICATION: lambda w: w.notification(UPDATED),
    WriterInput.ERROR: lambda w: w.error(BOOM),
    WriterInput.FINISH: lambda w: w.finish(),
}


@settings(max_examples=200, deadline=None)
@given(
    profile=st.sampled_from(list(Profile)),
    actions=st.lists(st.sampled_from(list(WriterInput)), max_size=8),
)
def test_what_the_writer_allows_the_reader_accepts(
    profile: Profile, actions: list[WriterInput]
) -> None:
    """Every sequence the writer lets through reads back without a violation."""
    writer = ContainerWriter(profile)
    reader = SequenceMachine(profile, reask=False)
    for action in actions:
        expected = WRITER_TRANSITIONS.get((profile, writer.state, action))
        if expected is None:
            with pytest.raises(LocalProtocolError):
                _ACTIONS[action](writer)
            continue
        result = _ACTIONS[action](writer)
        assert writer.state is expected[0]
        if action is WriterInput.FINISH:
            reader.receive_finish()
        else:
            assert isinstance(result, bytes)
            reader.receive_payload(result)
    drained = []
    while (event := reader.next_event()) is not NEED_DATA:
        drained.append(event)
    assert not any(isinstance(event, StreamBroken) for event in drained)
    notified = sum(isinstance(event, NotificationReceived) for event in drained)
    assert notified == actions_taken(actions, profile)


def actions_taken(actions: list[WriterInput], profile: Profile) -> int:
    """How many notifications a writer following the table lets through."""
    state = WriterState.EMPTY
    notified = 0
    for action in actions:
        row = WRITER_TRANSITIONS.get((profile, state, action))
        if row is None:
            continue
        notified += action is WriterInput.NOTIFICATION
        state = row[0]
    return notified


def test_the_table_covers_both_profiles() -> None:
    assert {profile for profile, _, _ in WRITER_TRANSITIONS} == set(Profile)
    assert not any(state is WriterState.FINISHED for _, state, _ in WRITER_TRANSITIONS)
    # Each input writes its own part, wherever the grammar allows it.
    assert {(what, outcome) for (_, _, what), (_, outcome) in WRITER_TRANSITIONS.items()} == {
        (WriterInput.NOTIFICATION, WriterOutcome.NOTIFICATION),
        (WriterInput.ERROR, WriterOutcome.ERROR),
        (WriterInput.FINISH, WriterOutcome.FINISH),
    }


def test_the_writer_follows_its_table_as_the_module_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table is read at every write: changing an entry changes what the writer does."""
    notify = (Profile.CONTAINER, WriterState.EMPTY, WriterInput.NOTIFICATION)
    # A copy, so that the module's own table keeps its order (the diagrams follow it).
    table = {key: row for key, row in WRITER_TRANSITIONS.items() if key != notify}
    monkeypatch.setattr(writer_module, "WRITER_TRANSITIONS", table)
    writer = ContainerWriter()
    with pytest.raises(LocalProtocolError, match="notification is not allowed in state EMPTY"):
        writer.notification(UPDATED)
    assert writer.state is WriterState.EMPTY
    ContainerWriter(Profile.PROVIDER).notification(UPDATED)  # the other profile's rows stay
    table[notify] = (WriterState.ERRORED, WriterOutcome.ERROR)
    assert writer.notification(UPDATED) == b"\x00" + UPDATED.to_bytes()
    assert writer.finish_required
