"""ProxyPolicy does what POLICY_TRANSITIONS says, entry by entry.

The generic harness (tests/table_harness.py) brings a fresh policy to every
state it can reach and applies every input there; this module says what
each input is as a call and what each outcome looks like from outside: the
answer ``ask_ended()`` returned, the failure count, the time of the next
ask, and the record of the current path (when it opened, how much it
delivered), which decides whether its end is healthy.

``ask_ended()`` is five inputs, told apart by what the path did (see
``_end_input``). The table checks pin that choice to the input under test,
so that every input can be tried in every state, including the pairs no
path could produce (a healthy end of a path that never opened); the tests
at the end check the choice itself, on unpinned policies.

The mutation tests change the table and watch the behaviour change: the
code must follow any table, and the original table's checks must fail on
the changed code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import attrs
import pytest

import diverge_notifications.sansio.client.policy as policy_module
from diverge_notifications.sansio import LocalProtocolError
from diverge_notifications.sansio.client.policy import (
    DEFAULT_BACKOFF,
    POLICY_TRANSITIONS,
    PolicyInput,
    PolicyOutcome,
    PolicyState,
    ProxyPolicy,
)
from diverge_notifications.sansio.events import AttemptsExhausted, RetryScheduled
from tests.table_harness import Machine, Step, check_table

Table = Mapping[tuple[PolicyState, PolicyInput], tuple[PolicyState, PolicyOutcome]]
Paths = dict[PolicyState, tuple[PolicyInput, ...]]

#: The table as the module defines it, kept before any test changes the module's.
ORIGINAL: Table = dict(POLICY_TRANSITIONS)

#: The random draw every end uses, and how far the clock moves before each call.
DRAW = 0.5
TICK = 1.0

ENDS = frozenset(
    {
        PolicyInput.HEALTHY_END,
        PolicyInput.CLEAN_END,
        PolicyInput.BROKEN_END,
        PolicyInput.UNHEALTHY_END,
        PolicyInput.LAST_END,
    }
)
#: The inputs whose call passes a time.
TIMED = ENDS | {PolicyInput.ASK_STARTED, PolicyInput.PATH_OPENED}
#: The outcomes that answer ``ask_ended()``.
ANSWERS = frozenset({PolicyOutcome.RETRY_RESET, PolicyOutcome.RETRY_COUNTED, PolicyOutcome.GIVE_UP})


@pytest.fixture(autouse=True)
def table_restored() -> Iterator[None]:
    """Every change a test makes to the table is undone, in order, for the tests after it."""
    yield
    assert policy_module.POLICY_TRANSITIONS is POLICY_TRANSITIONS
    assert list(POLICY_TRANSITIONS.items()) == list(ORIGINAL.items())


class PinnedPolicy(ProxyPolicy):
    """A ProxyPolicy whose next ``ask_ended()`` is the input the test names."""

    end: PolicyInput = PolicyInput.UNHEALTHY_END

    def _end_input(self, now: float, clean: bool) -> PolicyInput:
        return self.end


@attrs.frozen(kw_only=True)
class Record:
    """Everything a transition may change besides the state."""

    failures: int
    ask_at: float
    opened_at: float | None
    delivered: int
    last_now: float | None


def record(policy: ProxyPolicy) -> Record:
    # The path record is private: its effect shows only at the path's end,
    # and the harness checks each transition on its own.
    return Record(
        failures=policy.failures,
        ask_at=policy._ask_at,
        opened_at=policy._opened_at,
        delivered=policy._delivered,
        last_now=policy._last_now,
    )


@attrs.define
class Driver:
    """A policy and the fake clock it runs on."""

    policy: ProxyPolicy
    now: float = 0.0


@attrs.frozen(kw_only=True)
class Effect:
    """What one call did: the record before and after, what it returned, when."""

    input: PolicyInput
    before: Record
    after: Record
    returned: object
    now: float


def _call(driver: Driver, what: PolicyInput) -> RetryScheduled | AttemptsExhausted | None:
    """Make the call that is ``what``; only ``ask_ended()`` returns something."""
    policy = driver.policy
    if what is PolicyInput.EXCHANGE_COMPLETED:
        policy.exchange_completed()
    elif what is PolicyInput.NOTIFICATION:
        policy.notification_received()
    elif what is PolicyInput.ASK_STARTED:
        # The driver waits for the next allowed ask, as the adapters do.
        driver.now = max(driver.now, policy.ask_at() or 0.0)
        policy.ask_started(driver.now)
    elif what is PolicyInput.PATH_OPENED:
        policy.path_opened(driver.now)
    else:
        if isinstance(policy, PinnedPolicy):
            policy.end = what
        return policy.ask_ended(driver.now, DRAW)
    return None


def apply(driver: Driver, what: PolicyInput) -> Effect:
    before = record(driver.policy)
    driver.now += TICK
    returned = _call(driver, what)
    return Effect(
        input=what, before=before, after=record(driver.policy), returned=returned, now=driver.now
    )


def machine(require_exchange: bool = True) -> Machine[Driver, PolicyState, PolicyInput]:
    return Machine(
        make=lambda: Driver(PinnedPolicy(require_exchange=require_exchange)),
        state=lambda driver: driver.policy.state,
        inputs=list(PolicyInput),
        apply=apply,
    )


def expected(outcome: PolicyOutcome, effect: Effect) -> tuple[Record, object]:
    """The record after ``effect``'s call, and its return value, as ``outcome`` names them."""
    before, now = effect.before, effect.now
    unchanged = attrs.evolve(before, last_now=now if effect.input in TIMED else before.last_now)
    if outcome is PolicyOutcome.NOTHING:
        return unchanged, None
    if outcome is PolicyOutcome.NOTE_OPEN:
        return attrs.evolve(unchanged, opened_at=now), None
    if outcome is PolicyOutcome.NOTE_DELIVERY:
        return attrs.evolve(unchanged, delivered=before.delivered + 1), None
    # The three answers forget the path that ended.
    ended = attrs.evolve(unchanged, opened_at=None, delivered=0)
    if outcome is PolicyOutcome.GIVE_UP:
        failures = before.failures + 1
        return attrs.evolve(ended, failures=failures), AttemptsExhausted(attempts=failures)
    failures = 0 if outcome is PolicyOutcome.RETRY_RESET else before.failures + 1
    delay = DEFAULT_BACKOFF.delay(failures, DRAW)
    answer = RetryScheduled(delay=delay, attempt=failures + 1)
    return attrs.evolve(ended, failures=failures, ask_at=now + delay), answer


def check_effect(outcome: PolicyOutcome, step: Step[PolicyInput]) -> None:
    assert step.error is None, f"{step.input}: {outcome} raised {step.error!r}"
    effect: Effect = step.result
    after, returned = expected(outcome, effect)
    assert effect.after == after, f"{effect.input}: {outcome} left {effect.after}, not {after}"
    assert effect.returned == returned, f"{effect.input}: {outcome} returned {effect.returned!r}"


def refused(step: Step[PolicyInput]) -> bool:
    return isinstance(step.error, LocalProtocolError)


def check(table: Table, require_exchange: bool = True) -> Paths:
    """Run the harness over ``table``; the reachable states and the way to each."""
    paths: Paths = check_table(
        machine(require_exchange), table, check_effect=check_effect, refused=refused
    )
    return paths


# -- the table as it is ---------------------------------------------------------------------


def test_every_reachable_state_and_input_does_what_the_table_says() -> None:
    paths = check(POLICY_TRANSITIONS)
    assert set(paths) == set(PolicyState)


def test_without_the_exchange_gate_every_state_but_locked_is_reached() -> None:
    paths = check(POLICY_TRANSITIONS, require_exchange=False)
    assert set(paths) == set(PolicyState) - {PolicyState.LOCKED}


def test_a_refusal_changes_nothing_and_names_the_call() -> None:
    for state, path in check(POLICY_TRANSITIONS).items():
        for what in PolicyInput:
            if (state, what) in POLICY_TRANSITIONS:
                continue
            driver = Driver(PinnedPolicy())
            for earlier in path:
                apply(driver, earlier)
            before = record(driver.policy)
            with pytest.raises(LocalProtocolError, match=rf"in state {state.name}:") as caught:
                apply(driver, what)
            assert str(caught.value).startswith(what.value.split(",")[0])
            assert record(driver.policy) == before
            assert driver.policy.state is state


def test_asking_is_allowed_where_the_table_has_ask_started() -> None:
    for state, path in check(POLICY_TRANSITIONS).items():
        driver = Driver(PinnedPolicy())
        for earlier in path:
            apply(driver, earlier)
        allowed = (state, PolicyInput.ASK_STARTED) in POLICY_TRANSITIONS
        assert (driver.policy.ask_at() is not None) is allowed
        assert driver.policy.can_ask(1e9) is allowed


def test_every_outcome_has_a_handler() -> None:
    assert set(policy_module._HANDLERS) == set(PolicyOutcome)


def test_every_row_fits_its_call() -> None:
    # An outcome answers ask_ended() exactly when the input is an end, and a
    # time is noted only by a call that passes one.
    for (state, what), (_, outcome) in POLICY_TRANSITIONS.items():
        assert (outcome in ANSWERS) == (what in ENDS), (state, what, outcome)
        if outcome is PolicyOutcome.NOTE_OPEN:
            assert what in TIMED, (state, what)


# -- the table decides: change it, and the behaviour changes ------------------------------


def fitting_outcomes(what: PolicyInput) -> list[PolicyOutcome]:
    if what in ENDS:
        return sorted(ANSWERS, key=lambda outcome: outcome.name)
    if what in TIMED:
        return [PolicyOutcome.NOTHING, PolicyOutcome.NOTE_OPEN, PolicyOutcome.NOTE_DELIVERY]
    return [PolicyOutcome.NOTHING, PolicyOutcome.NOTE_DELIVERY]


def single_changes() -> Iterator[tuple[str, Table]]:
    """Every table that differs from the original in one entry, and fits its calls."""
    for key, (following, outcome) in ORIGINAL.items():
        name = f"{key[0].name}+{key[1].name}"
        for other in fitting_outcomes(key[1]):
            if other is not outcome:
                yield f"{name}/{other.name}", {**ORIGINAL, key: (following, other)}
        for state in PolicyState:
            if state is not following:
                yield f"{name}->{state.name}", {**ORIGINAL, key: (state, outcome)}
        yield f"{name} removed", {pair: row for pair, row in ORIGINAL.items() if pair != key}
    added = (PolicyState.ASKING, PolicyInput.HEALTHY_END)
    yield (
        "ASKING+HEALTHY_END added",
        {
            **ORIGINAL,
            added: (PolicyState.IDLE, PolicyOutcome.RETRY_RESET),
        },
    )


CHANGES = list(single_changes())


def test_there_are_changes_of_every_kind() -> None:
    # 13 entries: each can lose its row, go to 4 other states, take other outcomes.
    assert len(CHANGES) > 13 * 6


@pytest.mark.parametrize(("name", "changed"), CHANGES, ids=[name for name, _ in CHANGES])
def test_any_change_to_the_table_changes_the_behaviour(
    monkeypatch: pytest.MonkeyPatch, name: str, changed: Table
) -> None:
    monkeypatch.setattr(policy_module, "POLICY_TRANSITIONS", changed)
    check(changed)  # the code follows the changed table...
    with pytest.raises(AssertionError):
        check(ORIGINAL)  # ...so it no longer does what the original said


def unfitting_changes() -> Iterator[tuple[str, Table]]:
    """Every table that differs from the original in one outcome that does not fit its call.

    But for noting the opening of a path at a call that passes no time where
    no path is open: that notes no time, which is what is noted there already.
    """
    for key, (following, outcome) in ORIGINAL.items():
        fitting = fitting_outcomes(key[1])
        for other in PolicyOutcome:
            unnoticed = other is PolicyOutcome.NOTE_OPEN and key[0] is not PolicyState.OPEN
            if other is not outcome and other not in fitting and not unnoticed:
                name = f"{key[0].name}+{key[1].name}/{other.name}"
                yield name, {**ORIGINAL, key: (following, other)}


UNFITTING = list(unfitting_changes())


@pytest.mark.parametrize(("name", "changed"), UNFITTING, ids=[name for name, _ in UNFITTING])
def test_an_outcome_that_does_not_fit_its_call_changes_the_behaviour_too(
    monkeypatch: pytest.MonkeyPatch, name: str, changed: Table
) -> None:
    monkeypatch.setattr(policy_module, "POLICY_TRANSITIONS", changed)
    with pytest.raises(AssertionError):
        check(ORIGINAL)


def ended(
    policy: ProxyPolicy, *, notify: bool, open_for: float, clean: bool = True
) -> RetryScheduled:
    policy.ask_started(0.0)
    policy.path_opened(0.0)
    if notify:
        policy.notification_received()
    outcome = policy.ask_ended(open_for, DRAW, clean=clean)
    assert isinstance(outcome, RetryScheduled)
    return outcome


def test_changing_one_outcome_changes_what_a_delivery_counts_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert ended(ProxyPolicy(require_exchange=False), notify=True, open_for=0.0).attempt == 1
    key = (PolicyState.OPEN, PolicyInput.CLEAN_END)
    monkeypatch.setitem(POLICY_TRANSITIONS, key, (PolicyState.IDLE, PolicyOutcome.RETRY_COUNTED))
    policy = ProxyPolicy(require_exchange=False)
    assert ended(policy, notify=True, open_for=0.0).attempt == 2
    assert policy.failures == 1


def test_a_broken_path_that_delivered_resets_nothing_unless_the_table_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    policy = ProxyPolicy(require_exchange=False)
    assert ended(policy, notify=True, open_for=0.0, clean=False).attempt == 2
    key = (PolicyState.OPEN, PolicyInput.BROKEN_END)
    monkeypatch.setitem(POLICY_TRANSITIONS, key, (PolicyState.IDLE, PolicyOutcome.RETRY_RESET))
    policy = ProxyPolicy(require_exchange=False)
    assert ended(policy, notify=True, open_for=0.0, clean=False).attempt == 1


@pytest.mark.parametrize(
    ("key", "notify", "open_for"),
    [
        ((PolicyState.OPEN, PolicyInput.NOTIFICATION), True, 0.0),
        ((PolicyState.ASKING, PolicyInput.PATH_OPENED), False, 60.0),
    ],
)
def test_a_note_the_table_drops_is_not_taken(
    monkeypatch: pytest.MonkeyPatch,
    key: tuple[PolicyState, PolicyInput],
    notify: bool,
    open_for: float,
) -> None:
    # A delivery, or a path open for longer than healthy_after: healthy...
    assert ended(ProxyPolicy(require_exchange=False), notify=notify, open_for=open_for).attempt == 1
    following, _ = POLICY_TRANSITIONS[key]
    monkeypatch.setitem(POLICY_TRANSITIONS, key, (following, PolicyOutcome.NOTHING))
    # ...until the table stops noting it.
    assert ended(ProxyPolicy(require_exchange=False), notify=notify, open_for=open_for).attempt == 2


def test_a_row_the_table_adds_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = ProxyPolicy(require_exchange=False, max_attempts=1)
    policy.ask_started(0.0)
    assert policy.ask_ended(0.0, DRAW) == AttemptsExhausted(attempts=1)
    assert policy.ask_at() is None and not policy.can_ask(5.0)
    key = (PolicyState.EXHAUSTED, PolicyInput.ASK_STARTED)
    monkeypatch.setitem(POLICY_TRANSITIONS, key, (PolicyState.ASKING, PolicyOutcome.NOTHING))
    assert policy.ask_at() == 0.0 and policy.can_ask(5.0)
    policy.ask_started(5.0)
    assert policy.state is PolicyState.ASKING


def test_a_row_the_table_removes_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    key = (PolicyState.IDLE, PolicyInput.EXCHANGE_COMPLETED)
    # A copy without the row: deleting from the table itself would put the row
    # back at the end, and the table's order is what the docs show.
    without = {pair: row for pair, row in POLICY_TRANSITIONS.items() if pair != key}
    monkeypatch.setattr(policy_module, "POLICY_TRANSITIONS", without)
    policy = ProxyPolicy()
    policy.exchange_completed()
    with pytest.raises(LocalProtocolError, match="exchange_completed"):
        policy.exchange_completed()


# -- which end is which: the choice the table checks pin ----------------------------------


Scenario = Callable[[ProxyPolicy], None]


def _asked(policy: ProxyPolicy) -> None:
    policy.ask_started(0.0)


def _opened(policy: ProxyPolicy) -> None:
    policy.ask_started(0.0)
    policy.path_opened(1.0)


def _delivered(policy: ProxyPolicy) -> None:
    _opened(policy)
    policy.notification_received()


@pytest.mark.parametrize(
    ("scenario", "max_attempts", "end_at", "what", "clean"),
    [
        (_asked, None, 100.0, PolicyInput.UNHEALTHY_END, False),  # never opened: never healthy
        (_asked, 1, 100.0, PolicyInput.LAST_END, False),
        (_asked, None, 100.0, PolicyInput.UNHEALTHY_END, True),  # a clean "not served"
        (_opened, None, 10.5, PolicyInput.UNHEALTHY_END, False),  # open 9.5 s of 10
        (_opened, None, 10.5, PolicyInput.UNHEALTHY_END, True),  # nothing delivered
        (_opened, None, 11.0, PolicyInput.HEALTHY_END, False),  # open 10 s
        (_opened, 1, 10.5, PolicyInput.LAST_END, False),
        (_opened, 1, 11.0, PolicyInput.HEALTHY_END, False),
        (_delivered, 1, 1.0, PolicyInput.CLEAN_END, True),  # a delivery, ended by the server
        (_delivered, None, 1.0, PolicyInput.BROKEN_END, False),  # a delivery, then a break
        (_delivered, 1, 1.0, PolicyInput.LAST_END, False),
        (_delivered, 1, 11.0, PolicyInput.HEALTHY_END, False),  # lived long enough
    ],
)
def test_the_end_is_the_input_its_path_earned(
    scenario: Scenario, max_attempts: int | None, end_at: float, what: PolicyInput, clean: bool
) -> None:
    policy = ProxyPolicy(require_exchange=False, max_attempts=max_attempts)
    scenario(policy)
    assert policy._end_input(end_at, clean) is what
    # And the unpinned call does what the table's row for that input says.
    state = policy.state
    following, outcome = POLICY_TRANSITIONS[(state, what)]
    before = record(policy)
    returned = policy.ask_ended(end_at, DRAW, clean=clean)
    effect = Effect(input=what, before=before, after=record(policy), returned=returned, now=end_at)
    check_effect(outcome, Step(input=what, result=effect))
    assert policy.state is following
