"""ListenDriver does what LISTEN_TRANSITIONS says, entry by entry.

The generic harness (tests/table_harness.py) brings a fresh driver to every
state it can reach and applies every input there; this module says what
each input is as a call and what each outcome looks like from outside: the
action returned, the actions queued, whether an ask is in progress.

``next_action()`` is six inputs, told apart by the policy and by what
waits (see ``_next_input``); the table checks pin that choice to the input under test,
so that every input can be tried in every state, and the last test checks
the choice itself. ``data_received()`` is two, told apart by whether the
data ended the path: a partial status line goes on, the end of file ends.
"""

from __future__ import annotations

from typing import Any, cast

import attrs
import pytest

import diverge_notifications.sansio.drivers.listen as listening_module
from diverge_notifications.sansio import LocalProtocolError, ReaskNeeded, StreamBroken
from diverge_notifications.sansio.client.policy import ProxyPolicy
from diverge_notifications.sansio.drivers.actions import (
    Connect,
    Deliver,
    Disconnect,
    ListenAction,
    Receive,
    Send,
    Sleep,
    Stop,
)
from diverge_notifications.sansio.drivers.listen import (
    LISTEN_TRANSITIONS,
    TLS_HINT,
    ListenDriver,
    ListenInput,
    ListenOutcome,
    ListenState,
)
from diverge_notifications.sansio.drivers.settings import ClientSettings
from diverge_notifications.sansio.events import ConnectionFailed, RetryScheduled
from tests.table_harness import Machine, Step, check_table

In = ListenInput
Out = ListenOutcome

NEXT_INPUTS = frozenset({In.ASK_DUE, In.ASK_LATER, In.GIVE_UP, In.READ, In.MORE, In.HEAD_LATE})
#: The table as the module defines it, kept before any test changes the module's.
ORIGINAL = dict(LISTEN_TRANSITIONS)


class Pinned(ListenDriver):
    """A ListenDriver whose next ``next_action()`` is the input the test names."""

    pinned: ListenInput = In.READ

    def _next_input(self, now: float) -> ListenInput:
        return self.pinned


@attrs.define
class Driven:
    driver: Pinned
    now: float = 0.0


@attrs.frozen(kw_only=True)
class Effect:
    returned: object
    queued: list[ListenAction]
    asking: bool
    #: Nothing had come back on the plain HTTP connection: a cut then says TLS_HINT.
    unanswered: bool


def make() -> Driven:
    policy = ProxyPolicy(require_exchange=False)
    settings = ClientSettings(events=True, keepalive_interval=2.0)
    return Driven(Pinned("http://127.0.0.1:9", settings, policy=policy))


def _call(driven: Driven, what: ListenInput) -> object:
    driver = driven.driver
    driven.now += 1.0
    if what in NEXT_INPUTS:
        driver._actions.clear()  # the adapter performed what was queued
        driver.pinned = what
        ask_at = driver.policy.ask_at()
        if what is In.ASK_DUE and ask_at is not None:
            driven.now = max(driven.now, ask_at)
        if what is In.ASK_LATER and ask_at is not None:
            return driver.next_action(ask_at - 1.0)
        return driver.next_action(driven.now)
    if what is In.CONNECTED:
        driver.connected(driven.now)
    elif what is In.CONNECT_FAILED:
        driver.connect_failed(driven.now, "ECONNREFUSED: Connection refused")
    elif what is In.DATA:
        driver.data_received(driven.now, b"H")  # a status line, unfinished
    elif what is In.DATA_ENDS:
        driver.data_received(driven.now, b"")
    elif what is In.LOST:
        driver.connection_lost(driven.now, "ECONNRESET: Connection reset by peer")
    else:
        assert what is In.TIMED_OUT
        driver.timed_out(driven.now)
    return None


def apply(driven: Driven, what: ListenInput) -> Effect:
    queued_before = len(driven.driver._actions)
    unanswered = driven.driver._tls_unsaid
    returned = _call(driven, what)
    queued = list(driven.driver._actions)[queued_before:] if what not in NEXT_INPUTS else []
    if what is In.HEAD_LATE and driven.driver.state is ListenState.IDLE:
        # The path ended at next_action(): it returned the first of what it queued.
        queued = [cast(ListenAction, returned), *driven.driver._actions]
    asking = driven.driver.connection is not None
    return Effect(returned=returned, queued=queued, asking=asking, unanswered=unanswered)


MACHINE: Machine[Driven, ListenState, ListenInput] = Machine(
    make=make, state=lambda driven: driven.driver.state, inputs=list(ListenInput), apply=apply
)


def _ended(effect: Effect, reason: str | None) -> None:
    """A Disconnect, then what the path's end delivers, ending with the policy's answer."""
    assert not effect.asking
    disconnect, deliver = effect.queued
    assert disconnect == Disconnect() and isinstance(deliver, Deliver)
    *_, reask, retry = deliver.items
    assert isinstance(reask, ReaskNeeded) and isinstance(retry, RetryScheduled)
    if reason is not None:
        broken = [item for item in deliver.items if isinstance(item, StreamBroken)]
        assert [item.reason for item in broken] == [reason]


def check_effect(outcome: ListenOutcome, step: Step[ListenInput]) -> None:
    assert step.error is None, f"{step.input}: {outcome} raised {step.error!r}"
    effect: Effect = step.result
    if outcome is Out.CONNECT:
        assert effect.returned == Connect(host="127.0.0.1", port=9, timeout=10.0)
        assert effect.asking
    elif outcome is Out.SLEEP:
        assert effect.returned == Sleep(delay=1.0)
    elif outcome is Out.STOP:
        assert effect.returned == Stop()
    elif outcome is Out.RECEIVE:
        assert effect.returned == Receive(timeout=6.0)
    elif outcome is Out.DELIVER_MORE:
        # Nothing was read that waits: all of it is delivered, the next read comes.
        assert effect.returned == Receive(timeout=6.0) and effect.asking
    elif outcome is Out.SEND_ASK:
        (send,) = effect.queued
        assert isinstance(send, Send) and send.data.startswith(b"POST /requests HTTP/1.1\r\n")
    elif outcome is Out.FAIL:
        (deliver,) = effect.queued
        assert isinstance(deliver, Deliver) and not effect.asking
        failed, retry = deliver.items
        assert failed == ConnectionFailed(reason="ECONNREFUSED: Connection refused")
        assert isinstance(retry, RetryScheduled)
    elif outcome is Out.DELIVER:
        assert effect.queued == [] and effect.asking  # an unfinished line delivers nothing
    elif outcome is Out.END:
        _ended(effect, None)
    elif outcome is Out.CUT:
        hint = TLS_HINT if effect.unanswered else ""
        _ended(effect, f"the connection was lost: ECONNRESET: Connection reset by peer{hint}")
    elif outcome is Out.LATE:
        _ended(effect, "head timeout: the answer's head was not complete within 10 s")
    else:
        assert outcome is Out.SILENCE
        _ended(effect, "idle timeout: no data for 6 s")


def refused(step: Step[ListenInput]) -> bool:
    return isinstance(step.error, LocalProtocolError)


def check(table: dict[Any, Any]) -> dict[ListenState, Any]:
    return check_table(MACHINE, table, check_effect=check_effect, refused=refused)


def test_every_reachable_state_and_input_does_what_the_table_says() -> None:
    assert set(check(ORIGINAL)) == set(ListenState)


def test_every_outcome_has_a_handler() -> None:
    assert set(listening_module._HANDLERS) == set(ListenOutcome)


@pytest.mark.parametrize(
    ("key", "changed"),
    [
        # A connection that cannot be made no longer goes through the policy...
        ((ListenState.CONNECTING, In.CONNECT_FAILED), (ListenState.IDLE, Out.END)),
        # ...and a silence no longer ends the path.
        ((ListenState.OPEN, In.TIMED_OUT), (ListenState.OPEN, Out.DELIVER)),
    ],
)
def test_changing_an_entry_changes_the_behaviour(
    monkeypatch: pytest.MonkeyPatch,
    key: tuple[ListenState, ListenInput],
    changed: tuple[ListenState, ListenOutcome],
) -> None:
    table = {**ORIGINAL, key: changed}
    monkeypatch.setattr(listening_module, "LISTEN_TRANSITIONS", table)
    with pytest.raises(AssertionError):
        check(ORIGINAL)


def test_next_action_is_the_input_the_policy_says() -> None:
    policy = ProxyPolicy(require_exchange=False, max_attempts=1)
    driver = ListenDriver("http://127.0.0.1:9", ClientSettings(events=True), policy=policy)
    assert driver._next_input(0.0) is In.ASK_DUE
    driver.next_action(0.0)
    assert driver._next_input(0.0) is In.READ  # an ask is open: connecting
    driver.connected(0.0)
    assert driver._next_input(0.0) is In.READ
    driver.next_action(0.0)  # the ask
    driver.timed_out(1.0)
    assert driver._next_input(1.0) is In.GIVE_UP  # the one attempt was unhealthy
    patient = ListenDriver("http://127.0.0.1:9", policy=ProxyPolicy(require_exchange=False))
    patient.next_action(0.0)
    patient.connect_failed(0.0, "refused")
    ask_at = patient.policy.ask_at()
    assert ask_at is not None and ask_at > 0.0
    assert patient._next_input(0.0) is In.ASK_LATER
    assert patient._next_input(ask_at) is In.ASK_DUE
