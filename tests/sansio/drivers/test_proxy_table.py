"""ExchangeDriver does what EXCHANGE_DRIVER_TRANSITIONS says, entry by entry.

The generic harness (tests/table_harness.py) brings a fresh driver to every
state it can reach and applies every input there; this module says what
each input is as a call and what each outcome looks like from outside: the
action returned, the actions queued, and the outcome :meth:`answer` gives.

``next_action()`` is three inputs, told apart by the state; the checks pin
the choice to the input under test so that every input can be tried in
every state, and the last test checks the choice itself.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest

import diverge_notifications.sansio.drivers.proxy as proxying_module
from diverge_notifications.sansio import LocalProtocolError, StreamBroken
from diverge_notifications.sansio.client.urls import parse_url
from diverge_notifications.sansio.drivers.actions import (
    Connect,
    Disconnect,
    ListenAction,
    Receive,
    Send,
    Stop,
)
from diverge_notifications.sansio.drivers.proxy import (
    EXCHANGE_DRIVER_TRANSITIONS,
    ExchangeDriver,
    ExchangeDriverInput,
    ExchangeDriverOutcome,
    ExchangeDriverState,
    ExchangeFailed,
    list_tools_ask,
)
from diverge_notifications.sansio.drivers.settings import ClientSettings
from diverge_notifications.sansio.events import ConnectionFailed
from tests.table_harness import Machine, Step, check_table

In = ExchangeDriverInput
Out = ExchangeDriverOutcome

NEXT_INPUTS = frozenset({In.START, In.READ, In.FINISHED})
#: The table as the module defines it, kept before any test changes the module's.
ORIGINAL = dict(EXCHANGE_DRIVER_TRANSITIONS)


class Pinned(ExchangeDriver):
    """An ExchangeDriver whose next ``next_action()`` is the input the test names."""

    pinned: ExchangeDriverInput = In.READ

    def _next_input(self, now: float) -> ExchangeDriverInput:
        return self.pinned


@attrs.frozen(kw_only=True)
class Effect:
    returned: object
    queued: list[ListenAction]
    outcome: object


def make() -> Pinned:
    return Pinned(
        parse_url("http://127.0.0.1:9"), list_tools_ask(), ClientSettings(exchange_timeout=4.0)
    )


def _call(driver: Pinned, what: ExchangeDriverInput) -> object:
    if what in NEXT_INPUTS:
        driver._actions.clear()  # the adapter performed what was queued
        driver.pinned = what
        return driver.next_action(1.0)
    if what is In.CONNECTED:
        driver.connected(1.0)
    elif what is In.CONNECT_FAILED:
        driver.connect_failed(1.0, "ECONNREFUSED: Connection refused")
    elif what is In.DATA:
        driver.data_received(1.0, b"H")  # a status line, unfinished
    elif what is In.DATA_ENDS:
        driver.data_received(1.0, b"")
    elif what is In.LOST:
        driver.connection_lost(1.0, "ECONNRESET: Connection reset by peer")
    else:
        assert what is In.TIMED_OUT
        driver.timed_out(1.0)
    return None


def _outcome(driver: Pinned) -> object:
    if driver.state is not ExchangeDriverState.DONE:
        return None
    try:
        return driver.answer()
    except ExchangeFailed as failure:
        return failure.event


def apply(driver: Pinned, what: ExchangeDriverInput) -> Effect:
    queued_before = len(driver._actions)
    returned = _call(driver, what)
    queued = list(driver._actions)[queued_before:] if what not in NEXT_INPUTS else []
    return Effect(returned=returned, queued=queued, outcome=_outcome(driver))


MACHINE: Machine[Pinned, ExchangeDriverState, ExchangeDriverInput] = Machine(
    make=make, state=lambda driver: driver.state, inputs=list(ExchangeDriverInput), apply=apply
)


def _broken(effect: Effect, reason: str) -> None:
    assert effect.queued == [Disconnect()]
    assert isinstance(effect.outcome, StreamBroken), effect.outcome
    assert reason in effect.outcome.reason


def check_effect(outcome: ExchangeDriverOutcome, step: Step[ExchangeDriverInput]) -> None:
    assert step.error is None, f"{step.input}: {outcome} raised {step.error!r}"
    effect: Effect = step.result
    if outcome is Out.CONNECT:
        assert effect.returned == Connect(host="127.0.0.1", port=9, timeout=10.0)
    elif outcome is Out.SEND_ASK:
        (send,) = effect.queued
        assert isinstance(send, Send) and send.data.startswith(b"POST /requests HTTP/1.1\r\n")
    elif outcome is Out.RECEIVE:
        assert effect.returned == Receive(timeout=4.0)
    elif outcome is Out.NOTHING:
        assert effect.returned is None and effect.queued == [] and effect.outcome is None
    elif outcome is Out.FAIL:
        assert effect.queued == []
        assert effect.outcome == ConnectionFailed(reason="ECONNREFUSED: Connection refused")
    elif outcome is Out.END:
        _broken(effect, "the connection closed")  # the end of file came before a head
    elif outcome is Out.CUT:
        _broken(effect, "the connection was lost: ECONNRESET: Connection reset by peer")
    elif outcome is Out.SILENCE:
        _broken(effect, "no answer within 4 s")
    else:
        assert outcome is Out.STOP
        assert effect.returned == Stop()


def refused(step: Step[ExchangeDriverInput]) -> bool:
    return isinstance(step.error, LocalProtocolError)


def check(table: dict[Any, Any]) -> dict[ExchangeDriverState, Any]:
    return check_table(MACHINE, table, check_effect=check_effect, refused=refused)


def test_every_reachable_state_and_input_does_what_the_table_says() -> None:
    assert set(check(ORIGINAL)) == set(ExchangeDriverState)


def test_every_outcome_has_a_handler() -> None:
    assert set(proxying_module._EXCHANGE_HANDLERS) == set(ExchangeDriverOutcome)


@pytest.mark.parametrize(
    ("key", "changed"),
    [
        # A connection that cannot be made no longer fails the exchange...
        ((ExchangeDriverState.CONNECTING, In.CONNECT_FAILED), (ExchangeDriverState.DONE, Out.END)),
        # ...a silence no longer ends it...
        ((ExchangeDriverState.OPEN, In.TIMED_OUT), (ExchangeDriverState.OPEN, Out.NOTHING)),
        # ...and an exchange that is over connects again.
        ((ExchangeDriverState.DONE, In.FINISHED), (ExchangeDriverState.CONNECTING, Out.CONNECT)),
    ],
)
def test_changing_an_entry_changes_the_behaviour(
    monkeypatch: pytest.MonkeyPatch,
    key: tuple[ExchangeDriverState, ExchangeDriverInput],
    changed: tuple[ExchangeDriverState, ExchangeDriverOutcome],
) -> None:
    table = {**ORIGINAL, key: changed}
    monkeypatch.setattr(proxying_module, "EXCHANGE_DRIVER_TRANSITIONS", table)
    with pytest.raises(AssertionError):
        check(ORIGINAL)


def test_next_action_is_the_input_the_state_says() -> None:
    driver = ExchangeDriver(parse_url("http://127.0.0.1:9"), list_tools_ask())
    assert driver._next_input(0.0) is In.START
    driver.next_action(0.0)
    assert driver._next_input(0.0) is In.READ  # connecting: its outcome comes first
    driver.connected(0.0)
    assert driver._next_input(0.0) is In.READ
    driver.timed_out(1.0)
    assert driver._next_input(0.0) is In.FINISHED
