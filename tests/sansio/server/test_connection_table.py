"""ServerConnection does what its table says: every reachable state, every input, both profiles.

The generic harness (tests/table_harness.py) brings a fresh connection to
every state its profile's table reaches and applies every input there: the
four that arrive from the peer (a kind-4 ask, a kind 0-3 ask, an invalid
request, the end of file) and the eight writes. A pair in the table must
move the connection to the table's next state and have its outcome's
effect, checked here from outside against the public encoders: the bytes
written, the events produced, the bytes queued. A pair the table lacks must
change nothing: a write raises :class:`LocalProtocolError`; bytes from the
peer after the ask are discarded, and an end of file after the ask is only
reported (one ``ConnectionClosed``, which is no transition).
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest

import diverge_notifications.sansio.server.connection as connection_module
from diverge_notifications.sansio import (
    NEED_DATA,
    Ask,
    ErrorData,
    Exchange,
    LocalProtocolError,
    Notification,
    Profile,
    encode_ask,
    encode_frame,
    encode_message,
)
from diverge_notifications.sansio.events import (
    AskRefused,
    ConnectionClosed,
    Event,
    ExchangeAsked,
    HealthAsked,
    NotificationsAsked,
)
from diverge_notifications.sansio.server.connection import (
    SERVER_TRANSITIONS_BY_PROFILE,
    ServerConnection,
    ServerInput,
    ServerOutcome,
    ServerState,
)
from diverge_notifications.sansio.wire.framing import KEEPALIVE_FRAME
from diverge_notifications.sansio.wire.http import LAST_CHUNK, answer_head, chunk, refusal_response
from diverge_notifications.sansio.wire.messages import NOTIFICATION_TAG_BYTE, NotificationLike
from tests.table_harness import Machine, Step, check_table

PROGRESS = Notification("notifications/progress", {"progressToken": 1, "progress": 50})
BOOM = ErrorData(code=-32603, message="upstream went away")
CALL = Ask(exchange=Exchange.CALL_TOOL, params={"name": "echo", "arguments": {}})
RESULT = b'{"ok":true}'
BUSY = "the broker is lost"


def request(body: bytes) -> bytes:
    head = f"POST /requests HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode("ascii") + body


NOTIFICATIONS_REQUEST = request(b"\x04")
EXCHANGE_REQUEST = request(encode_ask(CALL))
INVALID_REQUEST = b"GET /elsewhere HTTP/1.1\r\nHost: x\r\n\r\n"
HEALTH_REQUEST = b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n"


@attrs.frozen(kw_only=True)
class Effect:
    """What one input did to a connection, seen from outside."""

    before: ServerState
    after: ServerState
    #: What the write returned (b"" for input from the peer).
    written: bytes
    #: The events next_event() gave afterwards.
    events: list[Event]
    #: What data_to_send() held afterwards.
    queued: bytes


def drain(conn: ServerConnection) -> list[Event]:
    events: list[Event] = []
    while (event := conn.next_event()) is not NEED_DATA:
        assert isinstance(event, Event)
        events.append(event)
    return events


def from_peer(data: bytes) -> Callable[[ServerConnection], bytes]:
    def receive(conn: ServerConnection) -> bytes:
        conn.receive_data(data)
        return b""

    return receive


INPUTS: dict[ServerInput, Callable[[ServerConnection], bytes]] = {
    ServerInput.NOTIFICATIONS_ASK: from_peer(NOTIFICATIONS_REQUEST),
    ServerInput.EXCHANGE_ASK: from_peer(EXCHANGE_REQUEST),
    ServerInput.INVALID_ASK: from_peer(INVALID_REQUEST),
    ServerInput.PEER_CLOSED: from_peer(b""),
    ServerInput.START_PATH: lambda c: c.start_path(),
    ServerInput.NOTIFICATION: lambda c: c.send_notification(PROGRESS),
    ServerInput.KEEPALIVE: lambda c: c.send_keepalive(),
    ServerInput.ERROR: lambda c: c.send_error(BOOM),
    ServerInput.END: lambda c: c.end_path(),
    ServerInput.DECLINE: lambda c: c.decline(),
    ServerInput.ANSWER: lambda c: c.answer(RESULT),
    ServerInput.REFUSE: lambda c: c.refuse(503, BUSY, headers=[("Retry-After", "1")]),
    ServerInput.HEALTH_CHECK: from_peer(HEALTH_REQUEST),
    ServerInput.HEALTH_ANSWER: lambda c: c.answer_health(BUSY),
}
READ_INPUTS = {
    ServerInput.HEALTH_CHECK,
    ServerInput.NOTIFICATIONS_ASK,
    ServerInput.EXCHANGE_ASK,
    ServerInput.INVALID_ASK,
    ServerInput.PEER_CLOSED,
}


def apply(conn: ServerConnection, what: ServerInput) -> Effect:
    before = conn.state
    written = INPUTS[what](conn)
    # Bytes from the peer are read when events are asked for.
    events = drain(conn)
    return Effect(
        before=before,
        after=conn.state,
        written=written,
        events=events,
        queued=conn.data_to_send(),
    )


def machine(profile: Profile) -> Machine[ServerConnection, ServerState, ServerInput]:
    return Machine(
        make=lambda: ServerConnection(profile=profile),
        state=lambda conn: conn.state,
        inputs=list(ServerInput),
        apply=apply,
    )


def frame_chunk(payload: bytes) -> bytes:
    """One chunk holding one frame, built with the public encoders."""
    return chunk(encode_frame(payload))


NOTIFICATIONS_HEAD = answer_head("/mcp/notifications/c1")
CALL_HEAD = answer_head("/mcp/call_tool/c1")

#: What each outcome writes.
WRITTEN: dict[ServerOutcome, bytes] = {
    ServerOutcome.NOTIFICATIONS_ASKED: b"",
    ServerOutcome.EXCHANGE_ASKED: b"",
    ServerOutcome.REFUSED: b"",
    ServerOutcome.CLOSED: b"",
    ServerOutcome.HEAD: NOTIFICATIONS_HEAD,
    ServerOutcome.FRAME: frame_chunk(encode_message(PROGRESS)),
    ServerOutcome.KEEPALIVE: chunk(KEEPALIVE_FRAME),
    ServerOutcome.ERROR_AND_END: frame_chunk(encode_message(BOOM)) + LAST_CHUNK,
    ServerOutcome.END: LAST_CHUNK,
    # Either ask may be declined: the head names the exchange asked for.
    ServerOutcome.HEAD_AND_END: b"",
    ServerOutcome.ANSWER: CALL_HEAD + frame_chunk(NOTIFICATION_TAG_BYTE + RESULT) + LAST_CHUNK,
    ServerOutcome.REFUSAL: refusal_response(503, BUSY, extra=[("Retry-After", "1")]),
    ServerOutcome.HEALTH_ASKED: b"",
    ServerOutcome.HEALTH: refusal_response(503, BUSY),
}

#: The events each outcome produces, before the ConnectionClosed of a final state.
EVENTS: dict[ServerOutcome, list[Event]] = {
    ServerOutcome.NOTIFICATIONS_ASKED: [NotificationsAsked(channel="c1")],
    ServerOutcome.EXCHANGE_ASKED: [ExchangeAsked(ask=CALL, channel="c1")],
    ServerOutcome.REFUSED: [
        AskRefused(status=404, reason="this server answers only POST /requests")
    ],
    ServerOutcome.CLOSED: [ConnectionClosed()],
    ServerOutcome.HEALTH_ASKED: [HealthAsked(check="readyz")],
}


def check_effect(profile: Profile) -> Callable[[ServerOutcome, Step[ServerInput]], None]:
    table = SERVER_TRANSITIONS_BY_PROFILE[profile]
    final = set(ServerState) - {state for state, _ in table}

    def check(outcome: ServerOutcome, step: Step[ServerInput]) -> None:
        assert step.error is None, step
        effect = step.result
        assert isinstance(effect, Effect)
        written = WRITTEN[outcome]
        if outcome is ServerOutcome.HEAD_AND_END:
            head = CALL_HEAD if effect.before is ServerState.EXCHANGE_ASKED else NOTIFICATIONS_HEAD
            written = head + LAST_CHUNK
        assert effect.written == written, (step.input, outcome)
        expected = list(EVENTS.get(outcome, []))
        # Entering a state with no row ends the connection: one ConnectionClosed.
        if effect.after in final and ConnectionClosed() not in expected:
            expected.append(ConnectionClosed())
        assert effect.events == expected, (step.input, outcome)
        if outcome is ServerOutcome.REFUSED:
            assert effect.queued.startswith(b"HTTP/1.1 404 Not Found\r\n")
        else:
            assert effect.queued == b""

    return check


def no_transition(step: Step[ServerInput]) -> bool:
    """What a pair outside the table does: a refused write, or input that is not acted on."""
    if step.input not in READ_INPUTS:
        return isinstance(step.error, LocalProtocolError)
    if step.error is not None:
        # Bytes after the end of file are the caller's mistake.
        return isinstance(step.error, LocalProtocolError)
    effect = step.result
    assert isinstance(effect, Effect)
    reported = [ConnectionClosed()] if step.input is ServerInput.PEER_CLOSED else []
    return effect.events in ([], reported) and effect.queued == b""


@pytest.mark.parametrize("profile", list(Profile))
def test_every_state_and_input_does_what_the_table_says(profile: Profile) -> None:
    paths = check_table(
        machine(profile),
        SERVER_TRANSITIONS_BY_PROFILE[profile],
        check_effect=check_effect(profile),
        refused=no_transition,
        expected_states=list(ServerState),
    )
    assert set(paths) == set(ServerState)


def test_an_end_of_file_after_the_ask_is_reported_once_and_changes_nothing() -> None:
    conn = ServerConnection()
    conn.receive_data(NOTIFICATIONS_REQUEST)
    assert drain(conn) == [NotificationsAsked(channel="c1")]
    conn.start_path()
    conn.receive_data(b"")
    assert drain(conn) == [ConnectionClosed()]
    assert conn.state is ServerState.PATH_OPEN
    assert conn.closed
    conn.receive_data(b"")
    assert drain(conn) == []


def test_the_container_profile_names_itself_when_it_refuses() -> None:
    conn = ServerConnection(profile=Profile.CONTAINER)
    conn.receive_data(NOTIFICATIONS_REQUEST)
    drain(conn)
    conn.start_path()
    conn.send_notification(PROGRESS)
    with pytest.raises(LocalProtocolError, match="an error after a notification violates"):
        conn.send_error(BOOM)
    with pytest.raises(LocalProtocolError, match="an end after notifications violates"):
        conn.end_path()
    with pytest.raises(LocalProtocolError, match="decline is not allowed in state PATH_NOTIFYING"):
        conn.decline()
    assert conn.state is ServerState.PATH_NOTIFYING


@pytest.mark.parametrize("profile", list(Profile))
def test_a_batch_writes_what_one_at_a_time_writes(profile: Profile) -> None:
    one = ServerConnection(profile=profile)
    batch = ServerConnection(profile=profile)
    for conn in (one, batch):
        conn.receive_data(NOTIFICATIONS_REQUEST)
        drain(conn)
        conn.start_path()
    items: list[NotificationLike] = [PROGRESS, PROGRESS.to_bytes(), PROGRESS.members]
    frames = b"".join(encode_frame(encode_message(PROGRESS)) for _ in items)
    assert batch.send_notifications(items) == chunk(frames)
    assert (
        b"".join(one.send_notification(item) for item in items)
        == chunk(frames[: len(frames) // 3]) * 3
    )
    assert batch.state is one.state is ServerState.PATH_NOTIFYING


#: The provider table with one entry changed, and what it then does.
CHANGED: list[tuple[tuple[ServerState, ServerInput], tuple[ServerState, ServerOutcome] | None]] = [
    # A keep-alive counts as a notification...
    (
        (ServerState.PATH_OPEN, ServerInput.KEEPALIVE),
        (ServerState.PATH_NOTIFYING, ServerOutcome.KEEPALIVE),
    ),
    # ...a notification keeps the path open, as if none had been written...
    (
        (ServerState.PATH_OPEN, ServerInput.NOTIFICATION),
        (ServerState.PATH_OPEN, ServerOutcome.FRAME),
    ),
    # ...declining a path refuses it...
    (
        (ServerState.NOTIFICATIONS_ASKED, ServerInput.DECLINE),
        (ServerState.REFUSED, ServerOutcome.HEAD_AND_END),
    ),
    # ...and an open path takes no clean end.
    ((ServerState.PATH_OPEN, ServerInput.END), None),
]


@pytest.mark.parametrize(("key", "changed"), CHANGED)
def test_changing_an_entry_changes_the_behaviour(
    monkeypatch: pytest.MonkeyPatch,
    key: tuple[ServerState, ServerInput],
    changed: tuple[ServerState, ServerOutcome] | None,
) -> None:
    original = SERVER_TRANSITIONS_BY_PROFILE[Profile.PROVIDER]
    table = {k: row for k, row in original.items() if k != key}
    if changed is not None:
        table[key] = changed
    monkeypatch.setattr(
        connection_module,
        "SERVER_TRANSITIONS_BY_PROFILE",
        {**SERVER_TRANSITIONS_BY_PROFILE, Profile.PROVIDER: table},
    )
    check = check_effect(Profile.PROVIDER)
    check_table(machine(Profile.PROVIDER), table, check_effect=check, refused=no_transition)
    with pytest.raises(AssertionError):
        check_table(machine(Profile.PROVIDER), original, check_effect=check, refused=no_transition)


def test_every_profile_writes_notifications_after_notifications_as_frames() -> None:
    """The state where a batch of frames moves nothing is the same in every profile's table."""
    for table in SERVER_TRANSITIONS_BY_PROFILE.values():
        loop = (ServerState.PATH_NOTIFYING, ServerOutcome.FRAME)
        assert table[(ServerState.PATH_NOTIFYING, ServerInput.NOTIFICATION)] == loop
        assert table[(ServerState.PATH_OPEN, ServerInput.NOTIFICATION)] == loop
