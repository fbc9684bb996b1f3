"""How every state machine of the core runs its table: one way, written once.

Each machine's rules are one table in the machine's own module,
``(state, input) -> (next state, outcome)``, and one handler per outcome.
A machine derives from :class:`TableMachine` and makes every move with
:meth:`TableMachine._fire`: the pair is looked up, a pair the table lacks
is refused with :class:`~.errors.LocalProtocolError` (the caller asked for
something the protocol does not allow now) and leaves the state as it was,
the state moves to the table's next state, and the outcome's handler runs.

Every handler has one signature, ``handler(machine, value) -> result``: the
machine and the one value the move carries (``None`` when it carries none;
a small tuple when it carries several). The table and the handlers are
passed on each move, read from the machine's module at that moment, so a
test that changes an entry of a table changes what the machine does.

The states, inputs and outcomes of every table are :class:`TableEnum`
members, which hash by identity so that a lookup stays cheap.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Hashable, Mapping
from typing import Any, ClassVar, Generic, TypeVar

from .errors import LocalProtocolError

__all__ = ["Handler", "TableEnum", "TableMachine"]

S = TypeVar("S", bound=enum.Enum)
I = TypeVar("I", bound=enum.Enum)  # noqa: E741 (the input, as in the tables)
O = TypeVar("O", bound=enum.Enum)  # noqa: E741
R = TypeVar("R")


class TableEnum(enum.Enum):
    """The states, inputs and outcomes of a table (and the profiles some are keyed by).

    Hashed by identity, which is what an enum member's equality already is:
    ``Enum.__hash__`` is a call into Python, two of them in every lookup of a
    ``(state, input)`` pair, and identity hashing makes a move about a third
    cheaper (bench/bench_proxy.py, bench/bench_hub.py).
    """

    __hash__ = object.__hash__


#: What an outcome does: called with the machine and the move's value.
Handler = Callable[[Any, Any], R]


class TableMachine(Generic[S, I]):
    """A state machine whose every move is a row of its table.

    Subclasses set ``_state`` in ``__init__``. A machine whose table is keyed
    by ``(profile, state, input)`` sets ``_BY_PROFILE`` and a ``_profile``;
    one with a better refusal than the generic one overrides :meth:`_refusal`.
    """

    # Empty, so that a slotted machine (ContainerWriter, the proxy's rules)
    # stays slot-only: an idle path's memory, bench/bench_proxy.py.
    __slots__ = ()

    _state: S
    _profile: Hashable
    #: The table is keyed by ``(profile, state, input)``.
    _BY_PROFILE: ClassVar[bool] = False

    def _refusal(self, what: I) -> str:
        """Why ``what`` is refused in the current state."""
        return f"{what.value} is not allowed now: the state is {self._state.value}"

    def _fire(
        self,
        table: Mapping[Any, tuple[S, O]],
        handlers: Mapping[O, Handler[R]],
        what: I,
        value: Any = None,
    ) -> R:
        """Make the move ``table`` gives ``what`` in the current state, and return its result."""
        try:
            following, outcome = table[
                (self._profile, self._state, what) if self._BY_PROFILE else (self._state, what)
            ]
        except KeyError:
            raise LocalProtocolError(self._refusal(what)) from None
        # The subclass holds _state (in its own __slots__ or its __dict__).
        self._state = following  # type: ignore[misc]
        return handlers[outcome](self, value)
