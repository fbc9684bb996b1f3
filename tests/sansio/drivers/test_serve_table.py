"""ServingConnection does what SERVING_TRANSITIONS says, entry by entry.

The generic harness (tests/table_harness.py) brings a fresh serving
connection to every state it can reach and applies every input there; this
module says what each input is from outside and what each outcome looks
like: what the connection has to write, its hub subscription, the exchange
it holds, the action it returned.

The inputs the peer's bytes produce (an ask of each kind, a refusal, the end
of file) are produced by feeding a real ask while the connection reads one,
and the end of file while it reads at all; ``next_action()`` chooses the
exchange's turn, the end of the path and the close by the state it is in.
Elsewhere an input is handed to the connection as if it had happened, and
the table must refuse it.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

import diverge_notifications.sansio.drivers.serve as serving_module
from diverge_notifications.sansio import (
    Ask,
    Event,
    Exchange,
    ExchangeConnection,
    Hub,
    LocalProtocolError,
    Notification,
    ProxyConnection,
)
from diverge_notifications.sansio.drivers.actions import Close, RunHandler
from diverge_notifications.sansio.drivers.serve import (
    SERVING_TRANSITIONS,
    ServingConnection,
    ServingInput,
    ServingOutcome,
    ServingState,
)
from diverge_notifications.sansio.drivers.settings import ServeSettings
from tests.table_harness import Machine, Step, check_table

In = ServingInput
Out = ServingOutcome

ASK = Ask(exchange=Exchange.LIST_TOOLS)
NOTIFICATIONS_ASK = ProxyConnection("x").data_to_send()
EXCHANGE_ASK = ExchangeConnection("x", ASK).data_to_send()
REFUSED_ASK = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
#: What each input the peer's bytes produce is fed as, while an ask is read.
FED: dict[ServingInput, bytes] = {
    In.PATH_ASKED: NOTIFICATIONS_ASK,
    # Fed while the hub is suspended.
    In.PATH_REFUSED: NOTIFICATIONS_ASK,
    In.EXCHANGE_ASKED: EXCHANGE_ASK,
    In.EXCHANGE_DECLINED: EXCHANGE_ASK,
    In.ASK_REFUSED: REFUSED_ASK,
    In.HEALTH_ASKED: b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n",
}
READING = frozenset(
    {
        ServingState.ASKING,
        ServingState.EXCHANGE,
        ServingState.ANSWERING,
        ServingState.PATH,
        ServingState.ENDING,
    }
)
NOW = 50.0
#: The reason the hub is suspended with, where an input needs it suspended.
SUSPENDED = "Redis broker redis://127.0.0.1:1 channel 'c': connection lost"
#: The table as the module defines it, kept before any test changes the module's.
ORIGINAL = dict(SERVING_TRANSITIONS)


class Recording(ServingConnection):
    """A serving connection that notes which inputs the peer's events were."""

    def __init__(self, hub: Hub) -> None:
        super().__init__(hub, ServeSettings(ask_timeout=10.0), wake=lambda: None, now=0.0)
        self.classified: list[ServingInput] = []

    def _event_input(self, event: Event) -> ServingInput:
        what = super()._event_input(event)
        self.classified.append(what)
        return what


@attrs.define
class Served:
    hub: Hub
    serving: Recording


@attrs.frozen(kw_only=True)
class Record:
    """What a transition may change besides the state."""

    output: bytes
    subscribers: int
    exchange: Ask | None
    #: The Close the connection will end with.
    final: Close


def record(served: Served) -> Record:
    serving = served.serving
    return Record(
        output=bytes(serving._outbox),
        subscribers=served.hub.subscribers,
        exchange=serving._exchange,
        final=serving._final,
    )


@attrs.frozen(kw_only=True)
class Effect:
    before: Record
    after: Record
    returned: object


def make() -> Served:
    hub = Hub()
    return Served(hub=hub, serving=Recording(hub))


def _call(served: Served, what: ServingInput) -> object:
    serving = served.serving
    state = serving.state
    if what in FED and state is ServingState.ASKING:
        serving._answers_exchanges = what is In.EXCHANGE_ASKED
        if what is In.PATH_REFUSED:
            served.hub.suspend(SUSPENDED)
        serving.data_received(NOW, FED[what])
    elif what is In.PEER_GONE and state in READING:
        serving.data_received(NOW, b"")
    elif what is In.ASK_EXPIRED and state is ServingState.ASKING:
        serving.check_ask_deadline(NOW)
    elif what is In.ANSWERED:
        serving.handler_answered({"tools": []})
    elif what is In.SHUTDOWN:
        serving.shutdown()
    elif what is In.PATH_CUT and state is ServingState.PATH:
        # The hub ends the subscription with its reason; the next output ends the path.
        served.hub.suspend(SUSPENDED)
        serving._outbox += serving.take_output(NOW)
    elif what is In.LOST:
        serving.connection_lost()
    elif what is In.STALLED:
        serving.write_stalled(NOW)
    elif what is In.HANDSHAKE_FAILED and state is ServingState.ASKING:
        serving.handshake_failed(NOW, "TLS handshake failed: the peer does not speak TLS")
    else:
        # Not something the outside can produce here: as if it had happened.
        return serving._step(what, NOW)
    if what in FED or what is In.PEER_GONE:
        assert serving.classified[-1] is what, serving.classified
    return None


def apply(served: Served, what: ServingInput) -> Effect:
    before = record(served)
    returned = _call(served, what)
    if served.serving.state is ServingState.PATH:
        served.hub.publish(Notification("notifications/tools/list_changed"))
    return Effect(before=before, after=record(served), returned=returned)


MACHINE: Machine[Served, ServingState, ServingInput] = Machine(
    make=make, state=lambda served: served.serving.state, inputs=list(ServingInput), apply=apply
)


def check_effect(outcome: ServingOutcome, step: Step[ServingInput]) -> None:
    assert step.error is None, f"{step.input}: {outcome} raised {step.error!r}"
    effect: Effect = step.result
    before, after, returned = effect.before, effect.after, effect.returned
    added = after.output[len(before.output) :]
    # A cut-off throws away what was left to write; every other outcome adds to it.
    assert outcome is Out.CUT_OFF or after.output.startswith(before.output)
    if outcome is Out.RUN_HANDLER:
        assert returned == RunHandler(ask=ASK)
    elif outcome is Out.CLOSE:
        assert returned == before.final
    else:
        assert returned is None
    if outcome is Out.FINISH and added.startswith(b"HTTP/1.1 4"):
        # A refused ask's close lingers, so that the peer reads its refusal.
        assert after.final == Close(linger=2.0)
    elif outcome not in (Out.REFUSE_BUSY, Out.REFUSE_CROWDED, Out.REFUSE, Out.CUT_OFF):
        assert after.final == before.final
    if outcome in (
        Out.NOTHING,
        Out.SILENCE,
        Out.EXPIRE,
        Out.TLS_FAILED,
        Out.RUN_HANDLER,
        Out.CLOSE,
    ):
        assert (added, after.subscribers, after.exchange) == (
            b"",
            before.subscribers,
            before.exchange,
        )
    elif outcome is Out.OPEN_PATH:
        assert added.startswith(b"HTTP/1.1 200 OK\r\n") and after.subscribers == 1
    elif outcome is Out.ANSWER_HEALTH:
        # No token, no subscription: whether an ask would be served, and nothing else.
        assert added.startswith(b"HTTP/1.1 200 OK\r\n") and added.endswith(b"\r\n\r\nok\n")
        assert after.subscribers == 0
    elif outcome is Out.HOLD:
        assert added == b"" and after.exchange == ASK
    elif outcome is Out.DECLINE:
        assert added.startswith(b"HTTP/1.1 200 OK\r\n") and added.endswith(b"0\r\n\r\n")
    elif outcome is Out.FINISH:
        assert after.subscribers == 0 and after.exchange is None
    elif outcome is Out.ANSWER:
        assert b'{"tools":[]}' in added and after.exchange is None
    elif outcome is Out.REFUSE:
        assert added.startswith(b"HTTP/1.1 503 Service Unavailable\r\n")
        assert b"\r\nRetry-After: 1\r\n" in added and SUSPENDED.encode() in added
        assert after.subscribers == 0 and after.final == Close(linger=2.0)
    elif outcome is Out.END_PATH:
        assert added.endswith(b"0\r\n\r\n") and after.subscribers == 0
        assert b"notifications/tools/list_changed" in added  # the queue went out first
        # Ended by the hub: its reason is the error message before the end.
        assert (SUSPENDED.encode() in added) is (step.input is In.PATH_CUT)
    elif outcome is Out.REFUSE_BUSY:
        assert added.startswith(b"HTTP/1.1 503 ") and b"\r\nRetry-After: 1\r\n" in added
        assert after.final == Close(linger=2.0)
    elif outcome is Out.REFUSE_CROWDED:
        assert added.startswith(b"HTTP/1.1 503 ") and b"\r\nRetry-After: 1\r\n" in added
        assert b"its share of" in added and after.final == Close(linger=2.0)
    elif outcome is Out.CUT_OFF:
        assert after.output == b"" and after.subscribers == 0 and after.exchange is None
        assert after.final == Close(abort=True)
    else:
        assert outcome is Out.DROP
        assert added == b"" and after.subscribers == 0 and after.exchange is None


def refused(step: Step[ServingInput]) -> bool:
    return isinstance(step.error, LocalProtocolError)


def test_every_reachable_state_and_input_does_what_the_table_says() -> None:
    paths = check_table(MACHINE, SERVING_TRANSITIONS, check_effect=check_effect, refused=refused)
    assert set(paths) == set(ServingState)


def test_every_outcome_has_a_handler() -> None:
    assert set(serving_module._HANDLERS) == set(ServingOutcome)


def test_a_refusal_names_the_call_and_the_state() -> None:
    served = make()
    with pytest.raises(
        LocalProtocolError, match=r"^handler_answered\(\) or handler_failed\(\) .* state ASKING$"
    ):
        served.serving.handler_answered({})


@pytest.mark.parametrize(
    ("key", "changed"),
    [
        # A closing server no longer waits for a running handler's answer...
        ((ServingState.ANSWERING, In.SHUTDOWN), (ServingState.FINISHING, Out.SILENCE)),
        # ...or no longer ends a path cleanly.
        ((ServingState.ENDING, In.PATH_ENDS), (ServingState.FINISHING, Out.FINISH)),
        # A peer that goes away keeps its subscription.
        ((ServingState.PATH, In.PEER_GONE), (ServingState.FINISHING, Out.NOTHING)),
    ],
)
def test_changing_an_entry_changes_the_behaviour(
    monkeypatch: pytest.MonkeyPatch,
    key: tuple[ServingState, ServingInput],
    changed: tuple[ServingState, ServingOutcome],
) -> None:
    changed_table: dict[Any, Any] = {**SERVING_TRANSITIONS, key: changed}
    monkeypatch.setattr(serving_module, "SERVING_TRANSITIONS", changed_table)
    check_table(MACHINE, changed_table, check_effect=check_effect, refused=refused)
    with pytest.raises(AssertionError):
        check_table(MACHINE, dict(ORIGINAL), check_effect=check_effect, refused=refused)
