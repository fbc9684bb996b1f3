"""The proxy policy: when to ask for notifications, and when to ask again.

The Diverge 2.3.0 specification page for kind 4 of the provider protocol
(``/mcp/notifications/{channel}``) says the proxy asks for notifications
after its first exchange of kinds 0-3, keeps exactly one such ask open, and
asks again whenever a path ends. This module decides *when*; it never
waits, reads a clock or draws a random number. The caller passes ``now``
(any monotonic clock, in seconds) and a uniform random float in ``[0, 1)``,
and gets back the time of the next ask.

The delay before a re-ask is exponential backoff with full jitter::

    delay = random * min(cap, base * factor ** failures)

where ``failures`` counts the consecutive *unhealthy* path ends. A path is
healthy when it stayed open for ``healthy_after`` seconds, or when it
delivered at least one notification and ended cleanly (``ask_ended(...,
clean=True)``: the server ended it, by its end or its error); only a
healthy path resets the count. So a server that accepts an ask and closes
it at once makes the delay grow up to ``cap`` instead of making the proxy
reconnect in a tight loop, and so does one that sends a good notification
and then breaks every path (a frame too large, say): a delivery alone
resets nothing unless the path lived ``healthy_after``. The optional
``max_attempts`` ends a run of unhealthy ends with an
:class:`AttemptsExhausted` event rather than giving up silently.

The states and what moves between them are one table,
:data:`POLICY_TRANSITIONS`, and the table decides: every call is a move of
:class:`~..transitions.TableMachine`, which looks its ``(state, input)``
pair up, refuses it when the pair is missing, and otherwise runs the
handler of the outcome it finds there (one per :class:`PolicyOutcome`), so
an entry changed in the table changes what the policy does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Final, NamedTuple, cast

import attrs

from ..errors import LocalProtocolError
from ..events import AttemptsExhausted, RetryScheduled
from ..transitions import Handler, TableEnum, TableMachine

__all__ = [
    "DEFAULT_BACKOFF",
    "POLICY_TRANSITIONS",
    "Backoff",
    "PolicyInput",
    "PolicyOutcome",
    "PolicyState",
    "ProxyPolicy",
]


def _check_number(name: str, value: object) -> float:
    """``value`` as a float; TypeError unless it is a real number (bools are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    return float(value)


def _check_finite(name: str, value: object) -> float:
    number = _check_number(name, value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {number!r}")
    return number


def _check_time(name: str, value: object) -> float:
    """A time from the caller's clock: finite and not negative."""
    number = _check_finite(name, value)
    if number < 0:
        raise ValueError(f"{name} must not be negative, got {number!r}")
    return number


def _check_random(value: object) -> float:
    """A draw from a uniform random source: a float in ``[0, 1)``."""
    number = _check_number("random", value)
    # Written so that NaN fails too: every comparison with NaN is false.
    if not 0.0 <= number < 1.0:
        raise ValueError(f"random must be in [0, 1), got {number!r}")
    return number


def _validate_base(_instance: object, _attribute: object, value: object) -> None:
    if _check_finite("base", value) <= 0:
        raise ValueError(f"base must be positive, got {value!r}")


def _validate_factor(_instance: object, _attribute: object, value: object) -> None:
    if _check_finite("factor", value) < 1:
        raise ValueError(f"factor must be at least 1, got {value!r}")


def _validate_cap(_instance: object, _attribute: object, value: object) -> None:
    # A finite cap is required: an infinite delay would be a silent give-up.
    _check_finite("cap", value)


@attrs.frozen(kw_only=True)
class Backoff:
    """Exponential backoff with full jitter.

    The ceiling after ``failures`` consecutive failures is
    ``min(cap, base * factor ** failures)``; the delay is a uniform draw
    below that ceiling. ``base`` must be positive, ``factor`` at least 1,
    ``cap`` finite and at least ``base`` (all in seconds, except ``factor``);
    anything else raises :class:`ValueError` (:class:`TypeError` for a
    value that is not a number).
    """

    #: The ceiling with no failure, in seconds.
    base: float = attrs.field(default=0.5, validator=_validate_base)
    #: How much the ceiling grows with each failure.
    factor: float = attrs.field(default=2.0, validator=_validate_factor)
    #: The largest ceiling, in seconds.
    cap: float = attrs.field(default=30.0, validator=_validate_cap)

    def __attrs_post_init__(self) -> None:
        if self.cap < self.base:
            raise ValueError(f"cap ({self.cap!r}) must be at least base ({self.base!r})")

    def ceiling(self, failures: int) -> float:
        """``min(cap, base * factor ** failures)``: the delay is drawn below this."""
        if isinstance(failures, bool) or not isinstance(failures, int):
            raise TypeError(f"failures must be an int, not {type(failures).__name__}")
        if failures < 0:
            raise ValueError(f"failures must not be negative, got {failures!r}")
        try:
            grown = self.base * float(self.factor) ** failures
        except OverflowError:
            # factor ** failures beyond the float range: far past the cap.
            return float(self.cap)
        return float(min(self.cap, grown))

    def delay(self, failures: int, random: float) -> float:
        """The delay, in seconds, after ``failures`` consecutive failures.

        ``random`` is a draw from a uniform source in ``[0, 1)``, so the
        delay is in ``[0, ceiling(failures))`` ("full jitter").
        """
        draw = _check_random(random)
        return draw * self.ceiling(failures)


#: The defaults: 0.5 s, doubling, at most 30 s.
DEFAULT_BACKOFF: Final = Backoff()


class PolicyState(TableEnum):
    """Where the policy is."""

    #: No completed exchange of kinds 0-3 yet: asking is not allowed.
    LOCKED = "locked"
    #: No ask open; the next one may start at ``ask_at()``.
    IDLE = "idle"
    #: An ask started; the server has not opened a path yet.
    ASKING = "asking"
    #: The path is open (``StreamOpened`` was seen).
    OPEN = "open"
    #: ``max_attempts`` unhealthy ends in a row: the policy asks no more.
    EXHAUSTED = "exhausted"


class PolicyInput(TableEnum):
    """What the caller tells the policy.

    ``ask_ended()`` is one of five inputs, chosen by what the path did:
    open for ``healthy_after`` seconds; shorter, but ended cleanly after a
    notification; shorter and broken after a notification; shorter with no
    notification; or either of the last two when it reaches ``max_attempts``.
    """

    EXCHANGE_COMPLETED = "exchange_completed()"
    ASK_STARTED = "ask_started()"
    PATH_OPENED = "path_opened()"
    NOTIFICATION = "notification_received()"
    HEALTHY_END = "ask_ended(), open for healthy_after"
    CLEAN_END = "ask_ended(), clean, after a notification"
    BROKEN_END = "ask_ended(), broken, after a notification"
    UNHEALTHY_END = "ask_ended(), nothing delivered"
    LAST_END = "ask_ended(), unhealthy, limit reached"


class PolicyOutcome(TableEnum):
    """What a transition does besides changing the state.

    Each member has one handler. The three that answer
    ``ask_ended()`` also forget the path that ended (its opening time and
    its deliveries), so the next path starts from nothing.
    """

    NOTHING = "-"
    NOTE_OPEN = "opening time noted"
    NOTE_DELIVERY = "delivery noted"
    RETRY_RESET = "failures = 0; RetryScheduled"
    RETRY_COUNTED = "failures + 1; RetryScheduled"
    GIVE_UP = "failures + 1; AttemptsExhausted"


_LOCKED, _IDLE, _ASKING, _OPEN, _EXHAUSTED = (
    PolicyState.LOCKED,
    PolicyState.IDLE,
    PolicyState.ASKING,
    PolicyState.OPEN,
    PolicyState.EXHAUSTED,
)

#: (state, input) -> (next state, outcome). A pair that is not in the table
#: is a mistake of the caller and raises :class:`LocalProtocolError`. Where
#: the table allows ``ask_started()``, ``ask_at()`` is the earliest time it
#: may come; before that it raises :class:`LocalProtocolError` too.
POLICY_TRANSITIONS: Final[
    Mapping[tuple[PolicyState, PolicyInput], tuple[PolicyState, PolicyOutcome]]
] = {
    # Exchanges go on for the proxy's whole life; only the first one matters.
    (_LOCKED, PolicyInput.EXCHANGE_COMPLETED): (_IDLE, PolicyOutcome.NOTHING),
    (_IDLE, PolicyInput.EXCHANGE_COMPLETED): (_IDLE, PolicyOutcome.NOTHING),
    (_ASKING, PolicyInput.EXCHANGE_COMPLETED): (_ASKING, PolicyOutcome.NOTHING),
    (_OPEN, PolicyInput.EXCHANGE_COMPLETED): (_OPEN, PolicyOutcome.NOTHING),
    (_EXHAUSTED, PolicyInput.EXCHANGE_COMPLETED): (_EXHAUSTED, PolicyOutcome.NOTHING),
    # One ask open at a time.
    (_IDLE, PolicyInput.ASK_STARTED): (_ASKING, PolicyOutcome.NOTHING),
    (_ASKING, PolicyInput.PATH_OPENED): (_OPEN, PolicyOutcome.NOTE_OPEN),
    (_OPEN, PolicyInput.NOTIFICATION): (_OPEN, PolicyOutcome.NOTE_DELIVERY),
    # A path that never opened (no connection, refused, not served before
    # the head) delivered nothing and was open for no time: never healthy.
    (_ASKING, PolicyInput.UNHEALTHY_END): (_IDLE, PolicyOutcome.RETRY_COUNTED),
    (_ASKING, PolicyInput.LAST_END): (_EXHAUSTED, PolicyOutcome.GIVE_UP),
    (_OPEN, PolicyInput.HEALTHY_END): (_IDLE, PolicyOutcome.RETRY_RESET),
    # A short path that delivered resets the count only if the server ended
    # it: one that breaks every path after a good notification (a poison
    # stream) must not be asked again at the base delay for ever.
    (_OPEN, PolicyInput.CLEAN_END): (_IDLE, PolicyOutcome.RETRY_RESET),
    (_OPEN, PolicyInput.BROKEN_END): (_IDLE, PolicyOutcome.RETRY_COUNTED),
    (_OPEN, PolicyInput.UNHEALTHY_END): (_IDLE, PolicyOutcome.RETRY_COUNTED),
    (_OPEN, PolicyInput.LAST_END): (_EXHAUSTED, PolicyOutcome.GIVE_UP),
}

_WHY_NOT: Final[Mapping[PolicyState, str]] = {
    _LOCKED: "no exchange of kinds 0-3 has completed yet (see require_exchange)",
    _IDLE: "no notification ask is open",
    _ASKING: "a notification ask is already open",
    _OPEN: "a notification ask is already open",
    _EXHAUSTED: "the policy gave up after max_attempts unhealthy ends in a row",
}
# Where the state's general reason would mislead.
_WHY_NOT_FOR: Final[Mapping[tuple[PolicyState, PolicyInput], str]] = {
    (_ASKING, PolicyInput.NOTIFICATION): "the path is not open yet (path_opened() comes first)",
    (_OPEN, PolicyInput.PATH_OPENED): "the path is already open",
}


class _End(NamedTuple):
    """What ``ask_ended()`` brings: its time and its random draw."""

    now: float
    random: float


class ProxyPolicy(TableMachine[PolicyState, PolicyInput]):
    """Decides when the proxy asks for notifications (kind 4), time passed in.

    Drive it with what happens: :meth:`exchange_completed` after each
    exchange of kinds 0-3 (the first one unlocks asking unless
    ``require_exchange`` is false), :meth:`ask_started` when a notification
    ask is sent, :meth:`path_opened` on ``StreamOpened``,
    :meth:`notification_received` on each ``NotificationReceived``, and
    :meth:`ask_ended` when the path ended (any terminal event) or the
    connection could not be made. :meth:`ask_ended` returns
    :class:`RetryScheduled` or, once ``max_attempts`` unhealthy ends in a row
    are reached, :class:`AttemptsExhausted`; the caller should pass either on
    to the application.

    ``now`` is any monotonic clock in seconds (finite, not negative, never
    going back); ``random`` is a uniform draw in ``[0, 1)``. Bad values raise
    :class:`ValueError`; calls the current state does not allow (see
    :data:`POLICY_TRANSITIONS`) raise :class:`LocalProtocolError`.

    ``healthy_after`` (seconds, positive, may be ``math.inf`` so that only a
    clean end after a notification counts) is how long a path must stay
    open to reset the failure count; a shorter one resets it only when it
    delivered a notification and ended cleanly. ``max_attempts`` (a positive int, or
    ``None`` for no limit) bounds the consecutive unhealthy ends.
    """

    __slots__ = (
        "_ask_at",
        "_backoff",
        "_delivered",
        "_failures",
        "_healthy_after",
        "_last_now",
        "_max_attempts",
        "_opened_at",
        "_state",
    )

    def __init__(
        self,
        *,
        backoff: Backoff = DEFAULT_BACKOFF,
        healthy_after: float = 10.0,
        max_attempts: int | None = None,
        require_exchange: bool = True,
    ) -> None:
        if not isinstance(backoff, Backoff):
            raise TypeError(f"backoff must be a Backoff, not {type(backoff).__name__}")
        healthy = _check_number("healthy_after", healthy_after)
        # Not zero: a path that closes at once would count as healthy and the
        # proxy would re-ask within `base` forever (the spin this prevents).
        if not healthy > 0:
            raise ValueError(f"healthy_after must be positive, got {healthy_after!r}")
        if max_attempts is not None:
            if isinstance(max_attempts, bool) or not isinstance(max_attempts, int):
                raise TypeError(
                    f"max_attempts must be an int or None, not {type(max_attempts).__name__}"
                )
            if max_attempts < 1:
                raise ValueError(f"max_attempts must be at least 1, got {max_attempts!r}")
        if not isinstance(require_exchange, bool):
            raise TypeError("require_exchange must be a bool")
        self._backoff = backoff
        self._healthy_after = healthy
        self._max_attempts = max_attempts
        self._state = PolicyState.LOCKED if require_exchange else PolicyState.IDLE
        self._failures = 0
        # The first ask may start at once: every valid `now` is >= 0.0.
        self._ask_at = 0.0
        self._opened_at: float | None = None
        self._delivered = 0
        self._last_now: float | None = None

    def __repr__(self) -> str:
        return (
            f"<ProxyPolicy {self._state.name} failures={self._failures} ask_at={self.ask_at()!r}>"
        )

    # -- what the caller reads ------------------------------------------------

    @property
    def state(self) -> PolicyState:
        """The policy's state."""
        return self._state

    @property
    def backoff(self) -> Backoff:
        """The backoff in force."""
        return self._backoff

    @property
    def healthy_after(self) -> float:
        """Seconds a path must stay open, with no notification, to count as healthy."""
        return self._healthy_after

    @property
    def max_attempts(self) -> int | None:
        """The limit on consecutive unhealthy ends, or ``None``."""
        return self._max_attempts

    @property
    def failures(self) -> int:
        """Consecutive unhealthy ends since the last healthy path."""
        return self._failures

    @property
    def exhausted(self) -> bool:
        """Whether ``max_attempts`` was reached: no ask will be allowed again."""
        return self._state is PolicyState.EXHAUSTED

    def ask_at(self) -> float | None:
        """The earliest ``now`` at which the next ask may start.

        ``0.0`` before the first ask (at once); ``None`` where the table
        allows no ask: while locked on the first exchange, while an ask is
        open, and after exhaustion.
        """
        if self._may_ask():
            return self._ask_at
        return None

    def can_ask(self, now: float) -> bool:
        """Whether :meth:`ask_started` would be accepted at ``now``."""
        moment = _check_time("now", now)
        return self._may_ask() and moment >= self._ask_at

    # -- what the caller reports ----------------------------------------------

    def exchange_completed(self) -> None:
        """An exchange of kinds 0-3 completed; the first one unlocks asking."""
        self._fire(POLICY_TRANSITIONS, _HANDLERS, PolicyInput.EXCHANGE_COMPLETED)

    def ask_started(self, now: float) -> None:
        """A notification ask is being sent at ``now``.

        Raises :class:`LocalProtocolError` unless :meth:`can_ask` is true.
        """
        moment = self._moment(now)
        if self._may_ask() and moment < self._ask_at:
            raise LocalProtocolError(
                f"the next notification ask may start at {self._ask_at!r}, not at {moment!r}"
            )
        self._fire(POLICY_TRANSITIONS, _HANDLERS, PolicyInput.ASK_STARTED, moment)
        self._last_now = moment

    def path_opened(self, now: float) -> None:
        """The server opened the path (``StreamOpened``) at ``now``."""
        moment = self._moment(now)
        self._fire(POLICY_TRANSITIONS, _HANDLERS, PolicyInput.PATH_OPENED, moment)
        self._last_now = moment

    def notification_received(self) -> None:
        """A notification arrived on the open path."""
        self._fire(POLICY_TRANSITIONS, _HANDLERS, PolicyInput.NOTIFICATION)

    def ask_ended(
        self, now: float, random: float, *, clean: bool = False
    ) -> RetryScheduled | AttemptsExhausted:
        """The ask is over at ``now``: its path ended, or no connection was made.

        ``random`` is a uniform draw in ``[0, 1)`` for the jitter. ``clean``:
        the server ended the path (``StreamEnded`` or ``StreamErrored``), not
        a break (``StreamBroken``, a lost connection). Returns
        :class:`RetryScheduled` (the next ask may start ``delay`` seconds
        from ``now``, see :meth:`ask_at`) or :class:`AttemptsExhausted`.
        """
        moment = self._moment(now)
        end = _End(moment, _check_random(random))
        what = self._end_input(moment, clean is True)
        answer = self._fire(POLICY_TRANSITIONS, _HANDLERS, what, end)
        self._last_now = moment
        # Not None: the table answers each of the three ends.
        return cast("RetryScheduled | AttemptsExhausted", answer)

    # -- internals ------------------------------------------------------------

    def _may_ask(self) -> bool:
        """Whether the table allows an ask in the current state."""
        return (self._state, PolicyInput.ASK_STARTED) in POLICY_TRANSITIONS

    def _end_input(self, now: float, clean: bool) -> PolicyInput:
        """Which of the ``ask_ended()`` inputs an end at ``now`` is (``clean``: by the server).

        A path never noted open (the ask was refused, not served, or found
        no server) delivered nothing and lived no time; what the table does
        with each input is the rule.
        """
        opened_at = self._opened_at
        if opened_at is None:
            delivered = False
        elif now - opened_at >= self._healthy_after:
            return PolicyInput.HEALTHY_END
        else:
            delivered = self._delivered > 0
            if delivered and clean:
                return PolicyInput.CLEAN_END
        if self._max_attempts is not None and self._failures + 1 >= self._max_attempts:
            return PolicyInput.LAST_END
        return PolicyInput.BROKEN_END if delivered else PolicyInput.UNHEALTHY_END

    def _moment(self, now: object) -> float:
        """Validate ``now``: a time, and not before one already accepted.

        It is remembered only once the call's move was made, so a refused
        call changes nothing.
        """
        moment = _check_time("now", now)
        if self._last_now is not None and moment < self._last_now:
            raise ValueError(f"now went back from {self._last_now!r} to {moment!r}")
        return moment

    def _refusal(self, what: PolicyInput) -> str:
        """Why ``what`` is refused in the current state, said for the call."""
        state = self._state
        call = what.value.split(",")[0]
        reason = _WHY_NOT_FOR.get((state, what), _WHY_NOT[state])
        return f"{call} is not allowed in state {state.name}: {reason}"

    # -- the outcomes' handlers: one per PolicyOutcome, named in _HANDLERS ------
    # Each takes what its call brings: nothing, the call's time, or (for
    # ask_ended()) its time and random draw.

    def _do_nothing(self, brought: object) -> _Answer:
        return None

    def _note_open(self, now: float) -> _Answer:
        self._opened_at = now
        return None

    def _note_delivery(self, brought: object) -> _Answer:
        self._delivered += 1
        return None

    def _retry_reset(self, end: _End) -> _Answer:
        self._failures = 0
        return self._schedule(end)

    def _retry_counted(self, end: _End) -> _Answer:
        self._failures += 1
        return self._schedule(end)

    def _give_up(self, end: _End) -> _Answer:
        self._failures += 1
        self._forget_path()
        return AttemptsExhausted(attempts=self._failures)

    def _schedule(self, end: _End) -> RetryScheduled:
        """The next ask after ``failures`` consecutive unhealthy ends."""
        delay = self._backoff.delay(self._failures, end.random)
        self._ask_at = end.now + delay
        self._forget_path()
        return RetryScheduled(delay=delay, attempt=self._failures + 1)

    def _forget_path(self) -> None:
        self._opened_at = None
        self._delivered = 0


#: What a transition hands back: ``ask_ended()``'s answer, or nothing.
_Answer = RetryScheduled | AttemptsExhausted | None

#: What each outcome of :data:`POLICY_TRANSITIONS` does.
_HANDLERS: Final[Mapping[PolicyOutcome, Handler[_Answer]]] = {
    PolicyOutcome.NOTHING: ProxyPolicy._do_nothing,
    PolicyOutcome.NOTE_OPEN: ProxyPolicy._note_open,
    PolicyOutcome.NOTE_DELIVERY: ProxyPolicy._note_delivery,
    PolicyOutcome.RETRY_RESET: ProxyPolicy._retry_reset,
    PolicyOutcome.RETRY_COUNTED: ProxyPolicy._retry_counted,
    PolicyOutcome.GIVE_UP: ProxyPolicy._give_up,
}
