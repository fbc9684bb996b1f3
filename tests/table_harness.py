"""A generic check that a state machine does what its transition table says.

In the style of h2's state tests: bring a fresh machine to every state it
can reach (breadth first, replaying the shortest sequence of inputs that
gets there), apply every input in every reachable state, and compare what
happened with the table:

* a pair the table has must move the machine to the table's next state and
  have the effect the table's outcome names (``check_effect`` decides what
  an outcome looks like from outside: the events, bytes or exception the
  input produced);
* a pair the table lacks must be refused (``refused`` says what a refusal
  is, usually :class:`LocalProtocolError`) and leave the state unchanged.

Every machine's test module describes its machine with a :class:`Machine`
and calls :func:`check_table`; the harness knows nothing about any one of
them, so changing any entry of a table makes that machine's test fail.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import attrs

M = TypeVar("M")
S = TypeVar("S", bound=Hashable)
I = TypeVar("I", bound=Hashable)  # noqa: E741


@attrs.frozen(kw_only=True)
class Step(Generic[I]):
    """What one input did: the value it returned, or the exception it raised."""

    input: I
    result: Any = None
    error: BaseException | None = None


@attrs.frozen(kw_only=True)
class Machine(Generic[M, S, I]):
    """How to drive one state machine from outside."""

    #: A fresh machine in its initial state.
    make: Callable[[], M]
    #: The machine's current state.
    state: Callable[[M], S]
    #: Every input there is.
    inputs: Sequence[I]
    #: Performs one input on the machine and returns what it produced.
    apply: Callable[[M, I], Any]


def perform(machine: Machine[M, S, I], instance: M, what: I) -> Step[I]:
    """Apply one input, catching what it raises."""
    try:
        return Step(input=what, result=machine.apply(instance, what))
    except Exception as error:  # the harness records every refusal, of any kind
        return Step(input=what, error=error)


def replay(machine: Machine[M, S, I], inputs: Iterable[I]) -> M:
    """A fresh machine with ``inputs`` applied in order (each must succeed)."""
    instance = machine.make()
    for what in inputs:
        step = perform(machine, instance, what)
        if step.error is not None:
            raise AssertionError(f"replaying {what!r} failed: {step.error!r}")
    return instance


def reachable(
    machine: Machine[M, S, I], table: Mapping[tuple[S, I], object]
) -> dict[S, tuple[I, ...]]:
    """Every state reachable through the table's inputs, with the shortest way there."""
    start = machine.state(machine.make())
    paths: dict[S, tuple[I, ...]] = {start: ()}
    queue: deque[S] = deque([start])
    while queue:
        state = queue.popleft()
        for what in machine.inputs:
            if (state, what) not in table:
                continue
            instance = replay(machine, paths[state])
            step = perform(machine, instance, what)
            if step.error is not None:
                continue  # the check below reports it against the table
            following = machine.state(instance)
            if following not in paths:
                paths[following] = (*paths[state], what)
                queue.append(following)
    return paths


def check_table(
    machine: Machine[M, S, I],
    table: Mapping[tuple[S, I], tuple[S, Any]],
    *,
    check_effect: Callable[[Any, Step[I]], None],
    refused: Callable[[Step[I]], bool],
    expected_states: Iterable[S] | None = None,
) -> dict[S, tuple[I, ...]]:
    """Check every (reachable state, input) pair against ``table``.

    ``table`` maps ``(state, input)`` to ``(next state, outcome)``;
    ``check_effect(outcome, step)`` raises unless the step shows that
    outcome. ``expected_states``, when given, must all be reachable.
    Returns the reachable states with their paths, for further checks.
    """
    paths = reachable(machine, table)
    if expected_states is not None:
        missing = set(expected_states) - set(paths)
        assert not missing, f"states never reached: {missing}"
    for state, path in paths.items():
        for what in machine.inputs:
            instance = replay(machine, path)
            step = perform(machine, instance, what)
            entry = table.get((state, what))
            if entry is None:
                assert refused(step), f"{state} + {what}: not in the table, yet {step!r}"
                assert machine.state(instance) == state, f"{state} + {what}: refused yet moved"
                continue
            following, outcome = entry
            assert step.error is None or not refused(step), (
                f"{state} + {what}: the table says {entry}, yet it was refused: {step.error!r}"
            )
            assert machine.state(instance) == following, (
                f"{state} + {what}: table says {following}, machine is in {machine.state(instance)}"
            )
            check_effect(outcome, step)
    return paths
