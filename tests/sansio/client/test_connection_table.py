"""The proxy side does what its tables say: PROXY_TRANSITIONS and ANSWER_TRANSITIONS.

The generic harness (tests/table_harness.py) brings a fresh machine to every
state its table reaches and applies every input there.

For :data:`PROXY_TRANSITIONS` the machine is a whole connection (a
:class:`ProxyConnection`, and an :class:`ExchangeConnection`, which share
its core), driven from outside: an input is the call that makes it
(``data_to_send()``, ``connection_lost()``, the end of file) or the bytes
that mean it in the state where they mean it (a head while the head is
awaited, a chunk while streaming, the rest of a refusal's body while one is
read). The same bytes in another live state would be another input (a
frame where a head is awaited is a broken head), so there they are not
produced at all; before the ask is taken they are refused
(:class:`LocalProtocolError`), and once the path is over they are
discarded. The effect of an outcome is the events the input produced and
the bytes sent.

For :data:`ANSWER_TRANSITIONS` the machine is an :class:`AnswerMachine`,
driven with its methods.

The mutation tests change one entry of a table at a time and watch the
behaviour change: the code follows whatever table it is given, so it no
longer does what the original says. Two kinds of change are left out, as
nothing outside can tell them: an outcome changed to one that does the same
(outcomes that share a handler), and what the rules are told once they
have ended the path (they discard it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import attrs
import pytest

import diverge_notifications.sansio.client.answer as exchange_module
import diverge_notifications.sansio.client.connection as proxy_module
from diverge_notifications.sansio import (
    NEED_DATA,
    Ask,
    ErrorData,
    Exchange,
    ExchangeConnection,
    LocalProtocolError,
    MessageRejected,
    NotificationReceived,
    NotServed,
    ProxyConnection,
    ReaskNeeded,
    ResultReceived,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
    encode_ask,
    encode_message,
)
from diverge_notifications.sansio.client.answer import (
    ANSWER_TRANSITIONS,
    AnswerInput,
    AnswerMachine,
    AnswerOutcome,
    AnswerState,
)
from diverge_notifications.sansio.client.connection import (
    PROXY_TRANSITIONS,
    ProxyInput,
    ProxyOutcome,
    ProxyState,
)
from diverge_notifications.sansio.events import Event
from diverge_notifications.sansio.mcp.model import ErrorCode
from diverge_notifications.sansio.wire.framing import KEEPALIVE_FRAME
from tests.proxy_scripts import (
    AUTHORITY,
    CHANNEL,
    LAST_CHUNK,
    NOTIFICATIONS,
    SCRIPTS,
    ask_request,
    bytewise,
    chunk,
    chunked,
    error_frame,
    frame,
    notification_frame,
    path_head,
    whole,
)
from tests.table_harness import Machine, Step, check_table

ProxyTable = Mapping[tuple[ProxyState, ProxyInput], tuple[ProxyState, ProxyOutcome]]
AnswerTable = Mapping[tuple[AnswerState, AnswerInput], tuple[AnswerState, AnswerOutcome]]

#: The tables as their modules define them, kept before any test changes them.
PROXY_ORIGINAL: ProxyTable = dict(PROXY_TRANSITIONS)
ANSWER_ORIGINAL: AnswerTable = dict(ANSWER_TRANSITIONS)

ERROR = ErrorData(code=ErrorCode.INTERNAL_ERROR, message="the MCP server went away")
RESULT_BYTES = b'{"content":[],"isError":false}'
RESULT = {"content": [], "isError": False}
CALL = Ask(exchange=Exchange.LIST_TOOLS)
LOST = "reset"

_S, _I, _O = ProxyState, ProxyInput, ProxyOutcome


#: The events that end an ask.
TERMINAL = (StreamErrored, NotServed, StreamEnded, StreamBroken)


class Impossible(Exception):
    """The input cannot be made in this state: its bytes would be another input there."""


@attrs.frozen(kw_only=True)
class Effect:
    """What one input did, seen from outside."""

    events: list[Event]
    #: What ``data_to_send()`` returned (``b""`` for every other input).
    sent: bytes = b""
    #: The connection's state as each event was taken.
    states: list[ProxyState] = attrs.field(factory=list, eq=False)


def drain(connection: ProxyConnection | ExchangeConnection) -> list[Event]:
    events: list[Event] = []
    while (event := connection.next_event()) is not NEED_DATA:
        assert isinstance(event, Event)
        events.append(event)
    return events


@attrs.frozen(kw_only=True)
class FrontEnd:
    """One of the two connections on the shared core, and what its rules make."""

    name: str
    make: Any
    ask: bytes
    #: The frame of one message, and the event the rules make of it.
    message: bytes
    received: Event
    #: What follows a terminal event.
    after_terminal: list[Event]
    #: The reason of a clean end with no message.
    no_message: str


PROXY = FrontEnd(
    name="ProxyConnection",
    make=lambda: ProxyConnection(AUTHORITY),
    ask=ask_request(),
    message=notification_frame(NOTIFICATIONS[0]),
    received=NotificationReceived(notification=NOTIFICATIONS[0]),
    after_terminal=[ReaskNeeded()],
    no_message="the path ended with no message",
)
EXCHANGE = FrontEnd(
    name="ExchangeConnection",
    make=lambda: ExchangeConnection(AUTHORITY, CALL),
    ask=ask_request(encode_ask(CALL)),
    message=frame(b"\x00" + RESULT_BYTES),
    received=ResultReceived(result=RESULT, raw=RESULT_BYTES),
    after_terminal=[],
    no_message="the exchange ended with no answer",
)

#: A refusal's head and the start of its 4-byte body: the rest is b"sy".
REFUSAL = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbu"


def from_peer(front: FrontEnd) -> dict[ProxyInput, tuple[ProxyState, bytes]]:
    """The bytes that make each input, and the state in which they make it."""
    return {
        _I.INFORMATIONAL: (_S.AWAITING_HEAD, b"HTTP/1.1 100 Continue\r\n\r\n"),
        _I.PATH_HEAD: (_S.AWAITING_HEAD, path_head()),
        _I.REFUSAL_HEAD: (_S.AWAITING_HEAD, REFUSAL),
        _I.UNUSABLE_HEAD: (_S.AWAITING_HEAD, path_head(content_type="text/html")),
        _I.KEEPALIVE: (_S.STREAMING, chunk(KEEPALIVE_FRAME)),
        _I.MESSAGE: (_S.STREAMING, chunk(front.message)),
        _I.PATH_OVER: (_S.STREAMING, chunk(error_frame(ERROR))),
        _I.BODY_END: (_S.STREAMING, LAST_CHUNK),
        _I.REFUSAL_READ: (_S.REFUSED, b"sy"),
    }


def proxy_machine(front: FrontEnd) -> Machine[Any, ProxyState, ProxyInput]:
    peer = from_peer(front)

    def apply(connection: ProxyConnection | ExchangeConnection, what: ProxyInput) -> Effect:
        sent = b""
        if what is _I.ASK_TAKEN:
            sent = connection.data_to_send()
        elif what is _I.CONNECTION_LOST:
            connection.connection_lost(LOST)
        elif what is _I.ABRUPT_END:
            connection.receive_data(b"")
        else:
            home, data = peer[what]
            if connection.state not in (home, _S.SENDING_ASK, _S.DONE):
                raise Impossible(f"{what.name} in {connection.state.name}")
            connection.receive_data(data)
        events: list[Event] = []
        states: list[ProxyState] = []
        while (event := connection.next_event()) is not NEED_DATA:
            assert isinstance(event, Event)
            events.append(event)
            states.append(connection.state)
        return Effect(events=events, sent=sent, states=states)

    return Machine(make=front.make, state=lambda c: c.state, inputs=list(ProxyInput), apply=apply)


def proxy_refused(step: Step[ProxyInput]) -> bool:
    # Refused by the machine, not makeable here, or discarded without a trace.
    if step.error is not None:
        return isinstance(step.error, (LocalProtocolError, Impossible))
    return bool(step.result == Effect(events=[]))


def proxy_effect(front: FrontEnd) -> Any:
    def check(outcome: ProxyOutcome, step: Step[ProxyInput]) -> None:
        assert step.error is None, f"{step.input.name} raised {step.error!r}"
        effect = step.result
        assert isinstance(effect, Effect)
        assert effect.sent == (front.ask if step.input is _I.ASK_TAKEN else b"")
        events, after = effect.events, front.after_terminal
        # The ask is over once its terminal event is out.
        for event, state in zip(events, effect.states, strict=True):
            if isinstance(event, TERMINAL):
                assert state is _S.DONE, f"{type(event).__name__} taken in {state.name}"
        if outcome in (_O.NOTHING, _O.SKIPPED):
            assert events == []
        elif outcome is _O.OPENED:
            assert events == [StreamOpened(channel=CHANNEL)]
        elif outcome is _O.MESSAGE:
            assert events == [front.received]
        elif outcome is _O.RULES_TERMINAL:
            # The rules ended the path on the error; the core adds nothing.
            assert events == [StreamErrored(error=ERROR), *after]
        elif outcome is _O.FINISH:
            assert events == [NotServed(status=200, reason=front.no_message), *after]
        elif outcome is _O.NOT_SERVED:
            body = "busy" if step.input is _I.REFUSAL_READ else "bu"
            reason = f"503 Service Unavailable: {body}"
            assert events == [NotServed(status=503, reason=reason), *after]
        else:
            assert outcome is _O.BROKEN
            assert len(events) == 1 + len(after) and events[1:] == after
            broken = events[0]
            assert isinstance(broken, StreamBroken)
            assert (broken.reason == LOST) is (step.input is _I.CONNECTION_LOST)

    return check


def check_proxy(table: ProxyTable, front: FrontEnd = PROXY) -> None:
    check_table(
        proxy_machine(front),
        table,
        check_effect=proxy_effect(front),
        refused=proxy_refused,
        expected_states=set(ProxyState),
    )


@pytest.mark.parametrize("front", [PROXY, EXCHANGE], ids=lambda front: front.name)
def test_every_state_and_input_does_what_the_proxy_table_says(front: FrontEnd) -> None:
    check_proxy(PROXY_TRANSITIONS, front)


def test_every_proxy_outcome_has_a_handler() -> None:
    assert set(proxy_module._ON_OUTCOME) == set(ProxyOutcome)


# --- the table changed; frames a batch at a time, or one at a time ----------------


class GoingRound(AssertionError):
    """The connection went round and round without an event or a need for bytes."""


#: How many steps in a row may make no event before a connection is said to go round.
ROUNDS = 10_000


def follow(monkeypatch: pytest.MonkeyPatch, table: ProxyTable) -> None:
    """Have the connections run on ``table``.

    A table can have a step go round for ever (say, an abrupt end that
    leaves the head awaited, at the end of file): that is reported as
    :class:`GoingRound` rather than waited for.
    """
    monkeypatch.setattr(proxy_module, "PROXY_TRANSITIONS", table)
    advance = proxy_module._AskConnection._advance
    rounds = 0

    def bounded(connection: Any) -> bool:
        nonlocal rounds
        stepped = advance(connection)
        rounds = rounds + 1 if stepped and not connection._queued else 0
        if rounds > ROUNDS:
            rounds = 0
            raise GoingRound(f"{ROUNDS} steps in {connection.state.name} made no event")
        return stepped

    monkeypatch.setattr(proxy_module._AskConnection, "_advance", bounded)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_frames_read_one_at_a_time_give_what_batches_give(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    # A keep-alive that does nothing rather than being skipped: the same
    # effect, but not the row under which a batch skips keep-alives.
    key = (_S.STREAMING, _I.KEEPALIVE)
    follow(monkeypatch, {**PROXY_ORIGINAL, key: (_S.STREAMING, _O.NOTHING)})
    script = SCRIPTS[name]
    assert script.run(whole(script.answer)) == list(script.events)
    assert script.run(bytewise(script.answer)) == list(script.events)


# --- the table decides: change it, and the behaviour changes -----------------------


def run(answer: bytes) -> list[Event]:
    connection = ProxyConnection(AUTHORITY)
    connection.data_to_send()
    connection.receive_data(answer)
    connection.receive_data(b"")
    return drain(connection)


def test_keepalives_between_messages_do_what_the_table_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A keep-alive that goes to the rules, as a message: an empty one.
    key = (_S.STREAMING, _I.KEEPALIVE)
    follow(monkeypatch, {**PROXY_ORIGINAL, key: (_S.STREAMING, _O.MESSAGE)})
    frames = notification_frame(NOTIFICATIONS[0]) + KEEPALIVE_FRAME
    events = run(path_head() + chunked(frames + notification_frame(NOTIFICATIONS[1])))
    assert [type(event) for event in events] == [
        StreamOpened,
        NotificationReceived,
        MessageRejected,
        NotificationReceived,
        StreamEnded,
        ReaskNeeded,
    ]
    rejected = events[2]
    assert isinstance(rejected, MessageRejected) and rejected.payload == b""


def test_a_refusal_the_table_ends_at_its_head_is_not_read_further(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = (_S.AWAITING_HEAD, _I.REFUSAL_HEAD)
    follow(monkeypatch, {**PROXY_ORIGINAL, key: (_S.DONE, _O.NOT_SERVED)})
    assert run(REFUSAL + b"sy") == [
        NotServed(status=503, reason="503 Service Unavailable"),
        ReaskNeeded(),
    ]


def test_messages_the_table_skips_are_not_delivered(monkeypatch: pytest.MonkeyPatch) -> None:
    key = (_S.STREAMING, _I.MESSAGE)
    follow(monkeypatch, {**PROXY_ORIGINAL, key: (_S.STREAMING, _O.SKIPPED)})
    answer = path_head() + chunked(notification_frame(NOTIFICATIONS[0]), KEEPALIVE_FRAME)
    assert run(answer) == [
        StreamOpened(channel=CHANNEL),
        NotServed(status=200, reason="the path ended with no message"),
        ReaskNeeded(),
    ]


def single_changes(
    table: Mapping[tuple[Any, Any], tuple[Any, Any]],
    handlers: Mapping[Any, object],
    *,
    unseen: Mapping[str, str] | None = None,
) -> Iterator[Any]:
    """Every table that differs from ``table`` in one entry: its state, its outcome, or gone.

    An outcome is changed only to one that does something else: outcomes
    that share a handler (``handlers``) name the same deed. ``unseen``
    names, with why, the changes that cannot be seen from outside.
    """
    states = {state for state, _ in table.values()} | {state for state, _ in table}
    outcomes = type(next(iter(table.values()))[1])
    changes: list[Any] = []
    for key, (following, outcome) in table.items():
        name = f"{key[0].name}+{key[1].name}"
        for other in outcomes:
            if handlers[other] is not handlers[outcome]:
                changes.append(
                    pytest.param({**table, key: (following, other)}, id=f"{name}/{other.name}")
                )
        for state in states:
            if state is not following:
                changes.append(
                    pytest.param({**table, key: (state, outcome)}, id=f"{name}->{state.name}")
                )
        removed = {pair: row for pair, row in table.items() if pair != key}
        changes.append(pytest.param(removed, id=f"{name} removed"))
    named = {change.id for change in changes}
    assert named >= set(unseen or {}), set(unseen or {}) - named
    yield from (change for change in changes if change.id not in (unseen or {}))


#: The changes to PROXY_TRANSITIONS whose behaviour no one can tell from the original's.
PROXY_UNSEEN = {
    # Once the rules have ended the path they discard what they are told.
    "STREAMING+PATH_OVER/FINISH": "a clean end told to rules that ended the path",
    "STREAMING+PATH_OVER/BROKEN": "an abrupt end told to rules that ended the path",
}


@pytest.mark.parametrize(
    "changed", list(single_changes(PROXY_ORIGINAL, proxy_module._ON_OUTCOME, unseen=PROXY_UNSEEN))
)
def test_any_change_to_the_proxy_table_changes_the_behaviour(
    monkeypatch: pytest.MonkeyPatch, changed: ProxyTable
) -> None:
    follow(monkeypatch, changed)
    with pytest.raises(AssertionError):
        check_proxy(PROXY_ORIGINAL)


# --- ANSWER_TRANSITIONS -------------------------------------------------------------

NO_ANSWER = "the exchange ended with no answer"
UNKNOWN_TAG = (
    "the exchange's answer did not decode: unknown message tag 9 (0 is a result, 1 an error)"
)
MORE_THAN_ONE = "the exchange was answered with more than one message"

ANSWER_CALLS = {
    AnswerInput.RESULT: lambda m: m.receive_payloads([b"\x00" + RESULT_BYTES]),
    AnswerInput.ERROR: lambda m: m.receive_payloads([encode_message(ERROR)]),
    AnswerInput.UNDECODABLE: lambda m: m.receive_payloads([b"\x09{}"]),
    AnswerInput.FINISH: lambda m: m.receive_finish(status=200),
    AnswerInput.LOST: lambda m: m.connection_lost(LOST),
}


def answer_apply(machine: AnswerMachine, what: AnswerInput) -> tuple[AnswerState, list[Event]]:
    """The state the input found, and the events it produced."""
    before = machine.state
    ANSWER_CALLS[what](machine)
    events: list[Event] = []
    while (event := machine.next_event()) is not NEED_DATA:
        assert isinstance(event, Event)
        events.append(event)
    return before, events


ANSWER_MACHINE: Machine[AnswerMachine, AnswerState, AnswerInput] = Machine(
    make=AnswerMachine,
    state=lambda machine: machine.state,
    inputs=list(AnswerInput),
    apply=answer_apply,
)


def answer_effect(outcome: AnswerOutcome, step: Step[AnswerInput]) -> None:
    assert step.error is None, f"{step.input.name} raised {step.error!r}"
    before, events = step.result
    if outcome is AnswerOutcome.RESULT:
        assert events == [ResultReceived(result=RESULT, raw=RESULT_BYTES)]
    elif outcome is AnswerOutcome.ERRORED:
        assert events == [StreamErrored(error=ERROR)]
    elif outcome is AnswerOutcome.NOT_SERVED:
        assert events == [NotServed(status=200, reason=NO_ANSWER)]
    elif outcome is AnswerOutcome.ENDED:
        assert events == [StreamEnded()]
    elif outcome is AnswerOutcome.VIOLATION:
        # A second message breaks the rules whatever it holds; a first one
        # only when it does not decode, and the reason says which.
        reason = MORE_THAN_ONE if before is AnswerState.ANSWERED else UNKNOWN_TAG
        assert events == [StreamBroken(reason=reason)]
    else:
        assert outcome is AnswerOutcome.BROKEN
        assert events == [StreamBroken(reason=LOST)]


def check_answer(table: AnswerTable) -> None:
    check_table(
        ANSWER_MACHINE,
        table,
        check_effect=answer_effect,
        # Once the answer is over, whatever arrives is discarded.
        refused=lambda step: step.error is None and step.result[1] == [],
        expected_states=set(AnswerState),
    )


def test_every_state_and_input_does_what_the_answer_table_says() -> None:
    check_answer(ANSWER_TRANSITIONS)


@pytest.mark.parametrize(
    "changed", list(single_changes(ANSWER_ORIGINAL, exchange_module._HANDLERS))
)
def test_any_change_to_the_answer_table_changes_the_behaviour(
    monkeypatch: pytest.MonkeyPatch, changed: AnswerTable
) -> None:
    monkeypatch.setattr(exchange_module, "ANSWER_TRANSITIONS", changed)
    with pytest.raises(AssertionError):
        check_answer(ANSWER_ORIGINAL)
