"""Tests of the proxy policy, on a fake clock with fixed random draws.

Time here is simulated: every assertion about waiting is about the sum of
the delays the policy chose, never about how long the test took.
"""

from __future__ import annotations

import ast
import contextlib
import io
import math
import random as random_module
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

import diverge_notifications.sansio.client.policy as policy_module
from diverge_notifications.sansio import LocalProtocolError
from diverge_notifications.sansio.client.policy import (
    DEFAULT_BACKOFF,
    POLICY_TRANSITIONS,
    Backoff,
    PolicyInput,
    PolicyOutcome,
    PolicyState,
    ProxyPolicy,
)
from diverge_notifications.sansio.events import AttemptsExhausted, Event, RetryScheduled

DOCS = Path(__file__).resolve().parents[3] / "docs" / "policy.md"

randoms = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)
backoffs = st.builds(
    lambda base, factor, extra: Backoff(base=base, factor=factor, cap=base + extra),
    base=st.floats(min_value=1e-3, max_value=60.0),
    factor=st.floats(min_value=1.0, max_value=10.0),
    extra=st.floats(min_value=0.0, max_value=600.0),
)


def unlocked(**options: Any) -> ProxyPolicy:
    """A policy that may ask at once."""
    return ProxyPolicy(require_exchange=False, **options)


def state_of(policy: ProxyPolicy) -> PolicyState:
    """The state, read through a call so that mypy does not narrow it between calls."""
    return policy.state


def retry(outcome: RetryScheduled | AttemptsExhausted) -> RetryScheduled:
    assert isinstance(outcome, RetryScheduled), outcome
    return outcome


def next_ask(policy: ProxyPolicy) -> float:
    at = policy.ask_at()
    assert at is not None
    return at


def closing_at_once(policy: ProxyPolicy, now: float, draw: float) -> RetryScheduled:
    """One cycle against a server that accepts the ask and ends the path at once."""
    policy.ask_started(now)
    policy.path_opened(now)
    return retry(policy.ask_ended(now, draw))


# -- Backoff ------------------------------------------------------------------


def test_backoff_defaults() -> None:
    assert Backoff() == Backoff(base=0.5, factor=2.0, cap=30.0) == DEFAULT_BACKOFF
    assert ProxyPolicy().backoff == DEFAULT_BACKOFF
    assert ProxyPolicy().healthy_after == 10.0
    assert ProxyPolicy().max_attempts is None


def test_backoff_full_jitter_values() -> None:
    backoff = Backoff()
    assert backoff.delay(0, 0.5) == 0.25
    assert backoff.delay(1, 0.5) == 0.5
    assert backoff.delay(3, 0.5) == 2.0
    assert backoff.delay(6, 0.5) == 15.0  # 0.5 * 2**6 = 32 is capped at 30
    assert backoff.delay(4, 0.0) == 0.0
    assert [backoff.ceiling(n) for n in range(8)] == [0.5, 1, 2, 4, 8, 16, 30, 30]


def test_backoff_ceiling_survives_huge_failure_counts() -> None:
    # factor ** failures leaves the float range; the cap still applies.
    backoff = Backoff(base=1.0, factor=10.0, cap=60.0)
    assert backoff.ceiling(10**6) == 60.0
    assert backoff.delay(10**6, 0.5) == 30.0
    assert Backoff(base=2.0, factor=1.0, cap=5.0).ceiling(10**9) == 2.0


@settings(max_examples=200)
@given(backoff=backoffs, failures=st.integers(min_value=0, max_value=5000), draw=randoms)
def test_backoff_delay_within_bounds(backoff: Backoff, failures: int, draw: float) -> None:
    ceiling = backoff.ceiling(failures)
    assert backoff.base <= ceiling <= backoff.cap
    try:
        grown = backoff.base * backoff.factor**failures
    except OverflowError:  # far beyond any cap
        grown = math.inf
    assert ceiling == min(backoff.cap, grown)
    delay = backoff.delay(failures, draw)
    assert 0.0 <= delay <= ceiling
    assert delay < ceiling or ceiling == 0.0
    assert delay == draw * ceiling


@settings(max_examples=200)
@given(backoff=backoffs, failures=st.integers(min_value=0, max_value=500), draw=randoms)
def test_backoff_grows_with_failures_and_stops_at_cap(
    backoff: Backoff, failures: int, draw: float
) -> None:
    assert backoff.ceiling(failures) <= backoff.ceiling(failures + 1)
    assert backoff.delay(failures, draw) <= backoff.delay(failures + 1, draw)
    assert backoff.delay(failures + 10_000, draw) <= backoff.cap


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"base": 0.0}, ValueError),
        ({"base": -1.0}, ValueError),
        ({"base": math.nan}, ValueError),
        ({"base": math.inf}, ValueError),
        ({"factor": 0.5}, ValueError),
        ({"factor": 0.0}, ValueError),
        ({"factor": math.nan}, ValueError),
        ({"factor": math.inf}, ValueError),
        ({"cap": 0.25}, ValueError),  # below the default base
        ({"cap": math.inf}, ValueError),
        ({"cap": math.nan}, ValueError),
        ({"base": 2.0, "cap": 1.0}, ValueError),
        ({"base": "0.5"}, TypeError),
        ({"factor": True}, TypeError),
        ({"cap": None}, TypeError),
    ],
)
def test_backoff_validation(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        Backoff(**options)


def test_backoff_accepts_edge_values() -> None:
    assert Backoff(base=1, factor=1, cap=1).delay(5, 0.5) == 0.5


@pytest.mark.parametrize("draw", [1.0, -0.1, 1.5, math.nan, math.inf, -math.inf])
def test_delay_rejects_random_outside_unit_interval(draw: float) -> None:
    with pytest.raises(ValueError):
        Backoff().delay(0, draw)


@pytest.mark.parametrize(
    ("failures", "draw", "error"),
    [(-1, 0.5, ValueError), (1.0, 0.5, TypeError), (True, 0.5, TypeError), (0, "0.5", TypeError)],
)
def test_delay_rejects_bad_arguments(failures: Any, draw: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        Backoff().delay(failures, draw)


# -- gating on the first exchange, one ask open ---------------------------------


def test_no_ask_before_the_first_exchange() -> None:
    policy = ProxyPolicy()
    assert state_of(policy) is PolicyState.LOCKED
    assert policy.ask_at() is None
    assert not policy.can_ask(0.0)
    assert not policy.can_ask(1e9)
    with pytest.raises(LocalProtocolError, match="exchange"):
        policy.ask_started(5.0)
    policy.exchange_completed()
    assert state_of(policy) is PolicyState.IDLE
    assert policy.ask_at() == 0.0  # at once
    assert policy.can_ask(0.0)
    policy.ask_started(5.0)
    assert state_of(policy) is PolicyState.ASKING


def test_require_exchange_false_asks_at_once() -> None:
    policy = unlocked()
    assert state_of(policy) is PolicyState.IDLE
    assert policy.ask_at() == 0.0
    assert policy.can_ask(0.0)


def test_later_exchanges_change_nothing() -> None:
    policy = ProxyPolicy()
    policy.exchange_completed()
    policy.exchange_completed()
    assert state_of(policy) is PolicyState.IDLE
    policy.ask_started(1.0)
    policy.exchange_completed()
    assert state_of(policy) is PolicyState.ASKING
    policy.path_opened(1.5)
    policy.exchange_completed()
    assert state_of(policy) is PolicyState.OPEN
    retry(policy.ask_ended(2.0, 0.5))
    policy.exchange_completed()
    assert state_of(policy) is PolicyState.IDLE
    assert policy.failures == 1


def test_exactly_one_ask_open() -> None:
    policy = unlocked()
    policy.ask_started(1.0)
    assert policy.ask_at() is None
    assert not policy.can_ask(1.0)
    assert not policy.can_ask(1e6)
    with pytest.raises(LocalProtocolError, match="already open"):
        policy.ask_started(1.0)
    policy.path_opened(1.0)
    with pytest.raises(LocalProtocolError, match="already open"):
        policy.ask_started(2.0)
    scheduled = retry(policy.ask_ended(3.0, 0.5))
    assert policy.ask_at() == 3.0 + scheduled.delay
    with pytest.raises(LocalProtocolError, match="may start at"):
        policy.ask_started(3.0)
    assert not policy.can_ask(3.0)
    assert policy.can_ask(3.0 + scheduled.delay)
    policy.ask_started(3.0 + scheduled.delay)
    assert state_of(policy) is PolicyState.ASKING


@pytest.mark.parametrize("require_exchange", [True, False])
def test_calls_outside_an_ask_are_refused(require_exchange: bool) -> None:
    policy = ProxyPolicy(require_exchange=require_exchange)
    state = policy.state
    with pytest.raises(LocalProtocolError):
        policy.path_opened(1.0)
    with pytest.raises(LocalProtocolError):
        policy.notification_received()
    with pytest.raises(LocalProtocolError):
        policy.ask_ended(1.0, 0.5)
    assert state_of(policy) is state
    assert policy.failures == 0


def test_path_events_in_the_wrong_order_are_refused() -> None:
    policy = unlocked()
    policy.ask_started(1.0)
    with pytest.raises(LocalProtocolError, match="not open yet"):
        policy.notification_received()  # before StreamOpened
    policy.path_opened(1.0)
    with pytest.raises(LocalProtocolError, match="already open"):
        policy.path_opened(1.0)  # opened twice
    assert state_of(policy) is PolicyState.OPEN
    assert repr(policy) == "<ProxyPolicy OPEN failures=0 ask_at=None>"


def test_a_refused_call_changes_nothing() -> None:
    policy = unlocked()
    policy.ask_started(1.0)
    retry(policy.ask_ended(1.0, 0.0))  # delay 0: the next ask may start at 1.0
    with pytest.raises(LocalProtocolError):
        policy.path_opened(50.0)  # no ask open; 50.0 must not be remembered
    policy.ask_started(1.0)
    assert state_of(policy) is PolicyState.ASKING


# -- delays over many attempts ------------------------------------------------


@settings(max_examples=100)
@given(
    backoff=backoffs,
    draws=st.lists(randoms, min_size=1, max_size=60),
    open_first=st.booleans(),
)
def test_delays_within_bounds_over_many_unhealthy_ends(
    backoff: Backoff, draws: list[float], open_first: bool
) -> None:
    policy = unlocked(backoff=backoff)
    now = 0.0
    for count, draw in enumerate(draws, start=1):
        policy.ask_started(now)
        if open_first:
            policy.path_opened(now)
        scheduled = retry(policy.ask_ended(now, draw))
        assert policy.failures == count
        assert scheduled.attempt == count + 1
        ceiling = min(backoff.cap, backoff.ceiling(count))
        assert 0.0 <= scheduled.delay <= ceiling
        assert scheduled.delay == backoff.delay(count, draw)
        assert policy.ask_at() == now + scheduled.delay
        now = next_ask(policy)


def test_growth_is_capped() -> None:
    policy = unlocked()
    now = 0.0
    delays = []
    for _ in range(40):
        delays.append(closing_at_once(policy, now, 0.999).delay)
        now = next_ask(policy)
    assert delays == sorted(delays)
    assert max(delays) == pytest.approx(0.999 * 30.0)
    assert all(delay <= 30.0 for delay in delays)
    assert delays[-20:] == [0.999 * 30.0] * 20


# -- the reset rule -------------------------------------------------------------


def fail_times(policy: ProxyPolicy, count: int, now: float) -> float:
    for _ in range(count):
        closing_at_once(policy, now, 0.5)
        now = next_ask(policy)
    return now


def test_a_delivered_notification_and_a_clean_end_reset_the_count() -> None:
    policy = unlocked()
    now = fail_times(policy, 5, 0.0)
    assert policy.failures == 5
    policy.ask_started(now)
    policy.path_opened(now)
    policy.notification_received()
    # Ended fast, but it delivered and the server ended it.
    scheduled = retry(policy.ask_ended(now + 0.01, 0.999, clean=True))
    assert policy.failures == 0
    assert scheduled.attempt == 1
    assert 0.0 <= scheduled.delay < Backoff().base


def test_a_poison_stream_that_delivers_then_breaks_makes_the_backoff_grow() -> None:
    policy = unlocked()
    now = 0.0
    for failures in range(1, 8):
        policy.ask_started(now)
        policy.path_opened(now)
        policy.notification_received()
        scheduled = retry(policy.ask_ended(now + 0.01, 0.999))  # a good one, then a break
        assert policy.failures == failures
        assert scheduled.delay == pytest.approx(0.999 * Backoff().ceiling(failures))
        now = next_ask(policy)


def test_a_path_open_long_enough_resets_the_count() -> None:
    policy = unlocked(healthy_after=10.0)
    now = fail_times(policy, 4, 0.0)
    policy.ask_started(now)
    policy.path_opened(now + 1.0)
    scheduled = retry(policy.ask_ended(now + 11.0, 0.5))  # exactly healthy_after
    assert policy.failures == 0
    assert scheduled == RetryScheduled(delay=0.25, attempt=1)


def test_a_path_open_not_quite_long_enough_counts_as_a_failure() -> None:
    policy = unlocked(healthy_after=10.0)
    policy.ask_started(0.0)
    policy.path_opened(0.0)
    scheduled = retry(policy.ask_ended(9.999, 0.5))
    assert policy.failures == 1
    assert scheduled == RetryScheduled(delay=0.5, attempt=2)


def test_time_open_is_measured_from_the_path_opening() -> None:
    # Asked at 0, the server took 9 s to answer, the path lived 6 s: unhealthy.
    policy = unlocked(healthy_after=10.0)
    policy.ask_started(0.0)
    policy.path_opened(9.0)
    retry(policy.ask_ended(15.0, 0.5))
    assert policy.failures == 1


def test_opened_and_closed_at_once_does_not_reset_and_the_delay_grows() -> None:
    policy = unlocked()
    now = 0.0
    delays = []
    for _ in range(8):
        delays.append(closing_at_once(policy, now, 0.5).delay)
        now = next_ask(policy)
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 15.0, 15.0]
    assert policy.failures == 8


def test_a_connection_that_could_not_be_made_counts_as_a_failure() -> None:
    policy = unlocked()
    now = 0.0
    for expected in (1, 2, 3):
        policy.ask_started(now)
        scheduled = retry(policy.ask_ended(now + 0.1, 0.5))
        assert policy.failures == expected
        assert scheduled.attempt == expected + 1
        now = next_ask(policy)


def test_rejected_messages_alone_are_not_a_delivery() -> None:
    # Only notification_received() counts; an open path with nothing in it
    # and a short life is a failure whatever terminal event ended it.
    policy = unlocked()
    policy.ask_started(0.0)
    policy.path_opened(0.0)
    retry(policy.ask_ended(2.0, 0.5))
    assert policy.failures == 1


def test_infinite_healthy_after_means_only_notifications_and_a_clean_end_reset() -> None:
    policy = unlocked(healthy_after=math.inf)
    policy.ask_started(0.0)
    policy.path_opened(0.0)
    retry(policy.ask_ended(1e9, 0.5))
    assert policy.failures == 1
    policy.ask_started(2e9)
    policy.path_opened(2e9)
    policy.notification_received()
    retry(policy.ask_ended(2e9, 0.5, clean=True))
    assert policy.failures == 0


def test_first_reask_after_a_healthy_path_is_below_base() -> None:
    for draw in (0.0, 0.3, 0.999999):
        policy = unlocked()
        policy.ask_started(0.0)
        policy.path_opened(0.0)
        policy.notification_received()
        scheduled = retry(policy.ask_ended(1.0, draw, clean=True))
        assert 0.0 <= scheduled.delay < 0.5
        assert scheduled.attempt == 1


# -- the attempt limit ----------------------------------------------------------


def test_attempt_limit_ends_in_one_attempts_exhausted() -> None:
    policy = unlocked(max_attempts=3)
    now = 0.0
    outcomes: list[RetryScheduled | AttemptsExhausted] = []
    for _ in range(3):
        policy.ask_started(now)
        policy.path_opened(now)
        outcomes.append(policy.ask_ended(now, 0.5))
        at = policy.ask_at()
        if at is not None:
            now = at
    assert outcomes == [
        RetryScheduled(delay=0.5, attempt=2),
        RetryScheduled(delay=1.0, attempt=3),
        AttemptsExhausted(attempts=3),
    ]
    assert policy.exhausted
    assert state_of(policy) is PolicyState.EXHAUSTED
    assert policy.failures == 3
    assert policy.ask_at() is None
    for moment in (now, now + 1.0, 1e12):
        assert not policy.can_ask(moment)
    with pytest.raises(LocalProtocolError, match="max_attempts"):
        policy.ask_started(now + 100.0)
    with pytest.raises(LocalProtocolError):
        policy.ask_ended(now + 100.0, 0.5)
    with pytest.raises(LocalProtocolError):
        policy.path_opened(now + 100.0)
    policy.exchange_completed()  # does not revive it
    assert policy.exhausted
    assert policy.ask_at() is None


def test_attempt_limit_of_one() -> None:
    policy = unlocked(max_attempts=1)
    policy.ask_started(0.0)
    assert policy.ask_ended(0.5, 0.5) == AttemptsExhausted(attempts=1)
    assert policy.exhausted


def test_attempt_limit_counts_consecutive_ends_only() -> None:
    policy = unlocked(max_attempts=3)
    now = fail_times(policy, 2, 0.0)
    policy.ask_started(now)
    policy.path_opened(now)
    policy.notification_received()
    retry(policy.ask_ended(now, 0.5, clean=True))  # healthy: the run starts over
    now = fail_times(policy, 2, next_ask(policy))
    assert not policy.exhausted
    assert policy.failures == 2
    policy.ask_started(now)
    assert policy.ask_ended(now, 0.5) == AttemptsExhausted(attempts=3)


def test_events_are_events() -> None:
    assert isinstance(RetryScheduled(delay=1.0, attempt=1), Event)
    assert isinstance(AttemptsExhausted(attempts=1), Event)
    with pytest.raises(TypeError):
        RetryScheduled(1.0, 1)  # type: ignore[call-arg]


# -- no spin --------------------------------------------------------------------


def test_server_closing_at_once_for_1000_cycles_does_not_spin() -> None:
    source = random_module.Random(3257)
    policy = unlocked()
    now = 0.0
    asks_at: list[float] = []
    delays: list[float] = []
    for _ in range(1000):
        asks_at.append(now)
        delays.append(closing_at_once(policy, now, source.random()).delay)
        now = next_ask(policy)
    total_wait = sum(delays)
    assert policy.failures == 1000
    assert now == pytest.approx(total_wait)
    # A policy that reset on every opened path would wait less than
    # 1000 * base = 500 s in all; this one waits about cap / 2 per cycle.
    assert total_wait > 10_000.0
    assert sum(delays[-100:]) / 100 > 10.0
    # Within the first simulated minute only a handful of asks happened.
    assert sum(1 for moment in asks_at if moment < 60.0) < 20
    # The ceiling reached the cap and stayed there.
    assert Backoff().ceiling(policy.failures) == 30.0


def test_the_same_draws_give_the_same_schedule() -> None:
    def schedule(seed: int) -> list[float]:
        source = random_module.Random(seed)
        policy = unlocked()
        now, out = 0.0, []
        for _ in range(50):
            out.append(closing_at_once(policy, now, source.random()).delay)
            now = next_ask(policy)
        return out

    assert schedule(7) == schedule(7)
    assert schedule(7) != schedule(8)


# -- validation -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"healthy_after": 0.0}, ValueError),
        ({"healthy_after": -1.0}, ValueError),
        ({"healthy_after": math.nan}, ValueError),
        ({"healthy_after": "10"}, TypeError),
        ({"max_attempts": 0}, ValueError),
        ({"max_attempts": -3}, ValueError),
        ({"max_attempts": 2.0}, TypeError),
        ({"max_attempts": True}, TypeError),
        ({"backoff": None}, TypeError),
        ({"backoff": 0.5}, TypeError),
        ({"require_exchange": 1}, TypeError),
    ],
)
def test_policy_validation(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        ProxyPolicy(**options)


@pytest.mark.parametrize("bad", [-1.0, -1e-9, math.nan, math.inf, -math.inf])
def test_bad_times_are_refused(bad: float) -> None:
    policy = unlocked()
    with pytest.raises(ValueError):
        policy.can_ask(bad)
    with pytest.raises(ValueError):
        policy.ask_started(bad)
    policy.ask_started(1.0)
    with pytest.raises(ValueError):
        policy.path_opened(bad)
    with pytest.raises(ValueError):
        policy.ask_ended(bad, 0.5)
    assert state_of(policy) is PolicyState.ASKING


@pytest.mark.parametrize("draw", [1.0, -0.0001, 2.0, math.nan, math.inf])
def test_ask_ended_rejects_random_outside_unit_interval(draw: float) -> None:
    policy = unlocked()
    policy.ask_started(0.0)
    with pytest.raises(ValueError, match="random"):
        policy.ask_ended(1.0, draw)
    assert state_of(policy) is PolicyState.ASKING  # nothing changed
    assert policy.failures == 0


def test_non_numbers_are_type_errors() -> None:
    policy = unlocked()
    with pytest.raises(TypeError):
        policy.can_ask("1")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        policy.ask_started(None)  # type: ignore[arg-type]
    policy.ask_started(0.0)
    with pytest.raises(TypeError):
        policy.ask_ended(1.0, True)


def test_a_clock_going_back_is_refused() -> None:
    policy = unlocked()
    policy.ask_started(10.0)
    with pytest.raises(ValueError, match="went back"):
        policy.path_opened(9.0)
    policy.path_opened(10.0)
    with pytest.raises(ValueError, match="went back"):
        policy.ask_ended(5.0, 0.5)
    assert state_of(policy) is PolicyState.OPEN


def test_integer_times_are_accepted() -> None:
    policy = unlocked()
    policy.ask_started(0)
    policy.path_opened(1)
    policy.notification_received()
    assert retry(policy.ask_ended(2, 0, clean=True)) == RetryScheduled(delay=0.0, attempt=1)
    assert policy.can_ask(2)


# -- the transition table --------------------------------------------------------


def test_transition_table_covers_the_calls() -> None:
    pairs = set(POLICY_TRANSITIONS)
    for state in PolicyState:
        assert (state, PolicyInput.EXCHANGE_COMPLETED) in pairs
    assert {state for state, what in pairs if what is PolicyInput.ASK_STARTED} == {PolicyState.IDLE}
    # Every state is reached, and EXHAUSTED only by the last end.
    assert {target for target, _ in POLICY_TRANSITIONS.values()} == set(PolicyState) - {
        PolicyState.LOCKED
    }
    for (_state, what), (target, outcome) in POLICY_TRANSITIONS.items():
        assert (target is PolicyState.EXHAUSTED) == (outcome is PolicyOutcome.GIVE_UP) or (
            what is PolicyInput.EXCHANGE_COMPLETED
        )


def render_table() -> list[str]:
    return [
        f"| `{state.name}` | {what.value} | `{target.name}` | {outcome.value} |"
        for (state, what), (target, outcome) in POLICY_TRANSITIONS.items()
    ]


def test_documented_table_is_the_code_table() -> None:
    text = DOCS.read_text(encoding="utf-8")
    documented = [
        line for line in text.splitlines() if re.match(r"\| `[A-Z]+` \| [a-z_]+\(\)", line)
    ]
    assert documented == render_table()


def python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_documented_example_runs() -> None:
    blocks = python_blocks(DOCS.read_text(encoding="utf-8"))
    assert blocks
    for block in blocks:
        output = io.StringIO()
        with contextlib.redirect_stdout(output):
            exec(compile(block, str(DOCS), "exec"), {"__name__": "__docs__"})
        assert "[0.5, 1.0, 2.0, 4.0]" in output.getvalue()
        assert "AttemptsExhausted(attempts=5)" in output.getvalue()


def test_policy_module_does_no_io() -> None:
    source = Path(policy_module.__file__).read_text(encoding="utf-8")
    forbidden = {"socket", "asyncio", "trio", "threading", "time", "random", "select", "selectors"}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = {node.module.split(".")[0]}
        else:
            continue
        assert not names & forbidden, names


# -- a state machine over the whole API ---------------------------------------------


class PolicyMachine(RuleBasedStateMachine):
    """Random calls, right and wrong, against a small model of the rules."""

    policy: ProxyPolicy

    @initialize(
        backoff=backoffs,
        healthy_after=st.sampled_from([0.5, 10.0, math.inf]),
        max_attempts=st.none() | st.integers(min_value=1, max_value=6),
        require_exchange=st.booleans(),
    )
    def setup(
        self,
        backoff: Backoff,
        healthy_after: float,
        max_attempts: int | None,
        require_exchange: bool,
    ) -> None:
        self.policy = ProxyPolicy(
            backoff=backoff,
            healthy_after=healthy_after,
            max_attempts=max_attempts,
            require_exchange=require_exchange,
        )
        self.backoff = backoff
        self.healthy_after = healthy_after
        self.max_attempts = max_attempts
        self.now = 0.0
        self.state = PolicyState.LOCKED if require_exchange else PolicyState.IDLE
        self.failures = 0
        self.ask_at = 0.0
        self.opened_at: float | None = None
        self.delivered = 0
        self.exhaustions = 0

    @rule(dt=st.floats(min_value=0.0, max_value=100.0))
    def tick(self, dt: float) -> None:
        self.now += dt

    @rule()
    def exchange_completed(self) -> None:
        self.policy.exchange_completed()
        if self.state is PolicyState.LOCKED:
            self.state = PolicyState.IDLE

    @rule()
    def ask_started(self) -> None:
        allowed = self.state is PolicyState.IDLE and self.now >= self.ask_at
        if not allowed:
            with pytest.raises(LocalProtocolError):
                self.policy.ask_started(self.now)
            return
        self.policy.ask_started(self.now)
        self.state = PolicyState.ASKING
        self.opened_at = None
        self.delivered = 0

    @precondition(lambda self: self.state is PolicyState.IDLE)
    @rule()
    def wait_then_ask(self) -> None:
        self.now = max(self.now, self.ask_at)
        self.ask_started()

    @rule()
    def path_opened(self) -> None:
        if self.state is not PolicyState.ASKING:
            with pytest.raises(LocalProtocolError):
                self.policy.path_opened(self.now)
            return
        self.policy.path_opened(self.now)
        self.state = PolicyState.OPEN
        self.opened_at = self.now

    @rule()
    def notification_received(self) -> None:
        if self.state is not PolicyState.OPEN:
            with pytest.raises(LocalProtocolError):
                self.policy.notification_received()
            return
        self.policy.notification_received()
        self.delivered += 1

    @rule(draw=randoms, clean=st.booleans())
    def ask_ended(self, draw: float, clean: bool) -> None:
        if self.state not in (PolicyState.ASKING, PolicyState.OPEN):
            with pytest.raises(LocalProtocolError):
                self.policy.ask_ended(self.now, draw, clean=clean)
            return
        outcome = self.policy.ask_ended(self.now, draw, clean=clean)
        healthy = self.opened_at is not None and (
            (self.delivered > 0 and clean) or self.now - self.opened_at >= self.healthy_after
        )
        self.failures = 0 if healthy else self.failures + 1
        if self.max_attempts is not None and self.failures >= self.max_attempts:
            assert outcome == AttemptsExhausted(attempts=self.max_attempts)
            self.state = PolicyState.EXHAUSTED
            self.exhaustions += 1
            return
        assert isinstance(outcome, RetryScheduled)
        assert outcome.attempt == self.failures + 1
        assert 0.0 <= outcome.delay <= self.backoff.ceiling(self.failures)
        assert outcome.delay == self.backoff.delay(self.failures, draw)
        self.ask_at = self.now + outcome.delay
        self.state = PolicyState.IDLE

    @rule(bad=st.sampled_from([-1.0, math.nan, math.inf]))
    def bad_time_changes_nothing(self, bad: float) -> None:
        with pytest.raises(ValueError):
            self.policy.path_opened(bad)

    @invariant()
    def agrees_with_the_model(self) -> None:
        policy = self.policy
        assert state_of(policy) is self.state
        assert policy.failures == self.failures
        assert policy.exhausted is (self.state is PolicyState.EXHAUSTED)
        assert self.exhaustions <= 1

    @invariant()
    def ask_at_and_can_ask_agree(self) -> None:
        policy = self.policy
        at = policy.ask_at()
        if self.state is PolicyState.IDLE:
            assert at == self.ask_at
            assert policy.can_ask(self.now) is (self.now >= self.ask_at)
            assert policy.can_ask(max(self.now, self.ask_at))
        else:
            assert at is None
            assert not policy.can_ask(self.now)

    @invariant()
    def failures_within_the_limit(self) -> None:
        if self.max_attempts is not None:
            assert self.policy.failures <= self.max_attempts
            if self.policy.failures == self.max_attempts:
                assert self.policy.exhausted


PolicyMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=50, deadline=None)
TestPolicyMachine = PolicyMachine.TestCase
