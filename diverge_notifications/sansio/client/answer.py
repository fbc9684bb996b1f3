"""The rules of a one-shot exchange's answer (kinds 0-3, the wire mapping in docs/protocol.md).

An exchange is answered with exactly one message, a result (tag 0, a JSON
object) or an error (tag 1, ``ErrorData``), and then the clean end.
:class:`AnswerMachine` applies those rules to the messages of an answer as
:class:`~.connection.ExchangeConnection` reads them, by one table,
:data:`ANSWER_TRANSITIONS`: each input is a move of
:class:`~..transitions.TableMachine`, and the handler of the outcome found
there makes the event.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, Final, NamedTuple

from ..errors import FrameError
from ..events import (
    NEED_DATA,
    Event,
    EventOrNeedData,
    NotServed,
    ResultReceived,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
)
from ..mcp.json import JsonError, parse
from ..mcp.model import ErrorData
from ..transitions import Handler, TableEnum, TableMachine
from ..wire.messages import ERROR_TAG, NOTIFICATION_TAG
from .heads import clip

__all__ = [
    "ANSWER_TRANSITIONS",
    "AnswerInput",
    "AnswerMachine",
    "AnswerOutcome",
    "AnswerState",
]


class AnswerState(TableEnum):
    """Where the answer of a one-shot exchange is."""

    #: Nothing but keep-alives yet.
    AWAITING = "awaiting answer"
    #: The one message arrived; only the clean end may follow.
    ANSWERED = "answered"
    #: The terminal event is queued.
    DONE = "done"


class AnswerInput(TableEnum):
    """What can arrive on the answer of a one-shot exchange."""

    RESULT = "result message"
    ERROR = "error message"
    UNDECODABLE = "undecodable message"
    FINISH = "clean end"
    LOST = "abrupt end"


class AnswerOutcome(TableEnum):
    """The event a transition of :data:`ANSWER_TRANSITIONS` produces."""

    RESULT = "ResultReceived"
    ERRORED = "StreamErrored"
    NOT_SERVED = "NotServed"
    ENDED = "StreamEnded"
    VIOLATION = "StreamBroken (violation)"
    BROKEN = "StreamBroken"


_AS, _AI, _AO = AnswerState, AnswerInput, AnswerOutcome

#: (state, input) -> (next state, outcome): the rules of a one-shot answer,
#: one message (a result or an error) and then the clean end. Inputs in
#: ``DONE`` are discarded and are not in the table.
ANSWER_TRANSITIONS: Final[
    Mapping[tuple[AnswerState, AnswerInput], tuple[AnswerState, AnswerOutcome]]
] = {
    (_AS.AWAITING, _AI.RESULT): (_AS.ANSWERED, _AO.RESULT),
    (_AS.AWAITING, _AI.ERROR): (_AS.DONE, _AO.ERRORED),
    (_AS.AWAITING, _AI.UNDECODABLE): (_AS.DONE, _AO.VIOLATION),
    (_AS.AWAITING, _AI.FINISH): (_AS.DONE, _AO.NOT_SERVED),
    (_AS.AWAITING, _AI.LOST): (_AS.DONE, _AO.BROKEN),
    (_AS.ANSWERED, _AI.RESULT): (_AS.DONE, _AO.VIOLATION),
    (_AS.ANSWERED, _AI.ERROR): (_AS.DONE, _AO.VIOLATION),
    (_AS.ANSWERED, _AI.UNDECODABLE): (_AS.DONE, _AO.VIOLATION),
    (_AS.ANSWERED, _AI.FINISH): (_AS.DONE, _AO.ENDED),
    (_AS.ANSWERED, _AI.LOST): (_AS.DONE, _AO.BROKEN),
}

_NO_ANSWER: Final = "the exchange ended with no answer"
_MORE_THAN_ONE: Final = "the exchange was answered with more than one message"
_BROKEN_RULES: Final = "the answer broke the rules of the exchange"


class _Arrival(NamedTuple):
    """What one input brings: what the events of the outcomes are made of."""

    #: The result object of a result message, and its JSON.
    result: dict[str, Any] | None = None
    raw: bytes = b""
    #: The error of an error message.
    error: ErrorData | None = None
    #: The status of the answer that ended (a non-2xx one, or the 2xx one).
    status: int | None = None
    #: Why the answer ended without its message (a refusal, the connection).
    reason: str = _NO_ANSWER
    #: Why the input breaks the rules, where the table says it does.
    violation: str = _BROKEN_RULES


class AnswerMachine(TableMachine[AnswerState, AnswerInput]):
    """Applies the rules of a one-shot answer to what arrives on it.

    Driven as :class:`~.sequence.SequenceMachine` drives a path: the
    messages (``[tag][JSON]``) with :meth:`receive_payloads`, the clean end
    with :meth:`receive_finish`, an abrupt end with :meth:`connection_lost`,
    a non-2xx answer with :meth:`refused`; events from :meth:`next_event`.
    Exactly one terminal event is produced (after a
    :class:`ResultReceived`, when the result came); whatever arrives after
    it is discarded.
    """

    __slots__ = ("_events", "_state")

    def __init__(self) -> None:
        self._events: deque[Event] = deque()
        self._state = AnswerState.AWAITING

    @property
    def state(self) -> AnswerState:
        """Where the answer is (see :data:`ANSWER_TRANSITIONS`)."""
        return self._state

    def open(self, channel: str) -> None:
        """Queue :class:`StreamOpened`: the answer's head named ``channel``."""
        self._events.append(StreamOpened(channel=channel))

    def receive_payloads(self, payloads: Iterable[bytes]) -> None:
        """Messages that arrived, in order; those after the terminal event are discarded."""
        for payload in payloads:
            self._move(*self._classify(payload))

    def receive_finish(self, *, status: int | None = None) -> None:
        """The answer ended cleanly; ``status`` is carried into :class:`NotServed`."""
        self._move(AnswerInput.FINISH, _Arrival(status=status))

    def refused(self, status: int | None, reason: str) -> None:
        """The answer was not 2xx: the ask was not served, for ``reason``."""
        self._move(AnswerInput.FINISH, _Arrival(status=status, reason=reason))

    def connection_lost(self, reason: str = "the connection ended before the answer did") -> None:
        """The answer ended abruptly, for ``reason``."""
        self._move(AnswerInput.LOST, _Arrival(reason=reason))

    @property
    def queued(self) -> deque[Event]:
        """The events not taken yet, in order: :meth:`next_event` pops the first.

        A connection that drives the machine pops them from here.
        """
        return self._events

    def next_event(self) -> EventOrNeedData:
        """The next event, or :data:`NEED_DATA`."""
        events = self._events
        return events.popleft() if events else NEED_DATA

    def _move(self, what: AnswerInput, arrival: _Arrival) -> None:
        """The move ``what`` makes; none once the answer is over."""
        if self._state is not AnswerState.DONE:
            self._fire(ANSWER_TRANSITIONS, _HANDLERS, what, arrival)

    def _classify(self, payload: bytes) -> tuple[AnswerInput, _Arrival]:
        """Which input a message is, and what it brings.

        A message that decodes breaks the rules only by following the
        answer; one that does not, by that too, or else by not decoding.
        """
        tag = payload[0] if payload else None  # a frame of length 0 is a keep-alive
        body = memoryview(payload)[1:]
        if tag is None:
            detail = "the message is empty"
        elif tag == NOTIFICATION_TAG:
            try:
                result = parse(body)
            except JsonError as error:
                detail = f"the result is not valid JSON: {error}"
            else:
                if isinstance(result, dict):
                    arrival = _Arrival(result=result, raw=bytes(body), violation=_MORE_THAN_ONE)
                    return AnswerInput.RESULT, arrival
                detail = "the result is not a JSON object"
        elif tag == ERROR_TAG:
            try:
                error_data = ErrorData.from_bytes(body)
            except FrameError as error:
                detail = error.detail
            else:
                return AnswerInput.ERROR, _Arrival(error=error_data, violation=_MORE_THAN_ONE)
        else:
            detail = f"unknown message tag {tag} (0 is a result, 1 an error)"
        if self._state is AnswerState.ANSWERED:
            violation = _MORE_THAN_ONE
        else:
            violation = f"the exchange's answer did not decode: {clip(detail)}"
        return AnswerInput.UNDECODABLE, _Arrival(violation=violation)

    # -- the outcomes' handlers: one per AnswerOutcome, named in _HANDLERS -----------

    def _result(self, arrival: _Arrival) -> None:
        self._events.append(ResultReceived(result=arrival.result, raw=arrival.raw))

    def _errored(self, arrival: _Arrival) -> None:
        assert arrival.error is not None  # the table errs only on an error message
        self._events.append(StreamErrored(error=arrival.error))

    def _not_served(self, arrival: _Arrival) -> None:
        self._events.append(NotServed(status=arrival.status, reason=arrival.reason))

    def _ended(self, arrival: _Arrival) -> None:
        self._events.append(StreamEnded())

    def _violation(self, arrival: _Arrival) -> None:
        self._events.append(StreamBroken(reason=arrival.violation))

    def _broken(self, arrival: _Arrival) -> None:
        self._events.append(StreamBroken(reason=arrival.reason))


#: What each outcome of :data:`ANSWER_TRANSITIONS` makes of what arrived.
_HANDLERS: Final[Mapping[AnswerOutcome, Handler[None]]] = {
    _AO.RESULT: AnswerMachine._result,
    _AO.ERRORED: AnswerMachine._errored,
    _AO.NOT_SERVED: AnswerMachine._not_served,
    _AO.ENDED: AnswerMachine._ended,
    _AO.VIOLATION: AnswerMachine._violation,
    _AO.BROKEN: AnswerMachine._broken,
}
