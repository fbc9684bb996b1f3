"""The serving driver's rules: its states, inputs, outcomes and transition table.

:class:`~.serving.ServingConnection` looks each (state, input) pair up in
:data:`SERVING_TRANSITIONS` and does the outcome found there; a pair the
table lacks is the adapter's mistake (:class:`~._errors.LocalProtocolError`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Final

from ._errors import LocalProtocolError
from .events import AskRefused, ConnectionClosed, Event, ExchangeAsked, NotificationsAsked

__all__ = [
    "DONE",
    "EVENT_INPUTS",
    "EXCHANGING",
    "SERVING_TRANSITIONS",
    "SUBSCRIBED",
    "ServingInput",
    "ServingOutcome",
    "ServingState",
    "event_input",
]


class ServingState(enum.Enum):
    """Where a served connection is."""

    #: Reading the ask; the connection is closed if it is not complete by its deadline.
    ASKING = "asking"
    #: An exchange (kinds 0-3) waits for its handler to be run.
    EXCHANGE = "exchange"
    #: The exchange handler runs (:class:`RunHandler` was returned).
    ANSWERING = "answering"
    #: A notification path is written: batches as they come, keep-alives between.
    PATH = "path"
    #: The server closes: the path's queue and then its end go out with the next output.
    ENDING = "ending"
    #: The answer is complete: what is left to write goes out, then :class:`Close`.
    FINISHING = "finishing"
    #: :class:`Close` was returned, or the connection was lost.
    CLOSED = "closed"


class ServingInput(enum.Enum):
    """What happens to a served connection: a report, or what the ask turned out to be."""

    PATH_ASKED = "data_received(), a notifications ask"
    PATH_REFUSED = "data_received(), a notifications ask while the hub is suspended"
    EXCHANGE_ASKED = "data_received(), an exchange the server answers"
    EXCHANGE_DECLINED = "data_received(), an exchange without a handler"
    ASK_REFUSED = "data_received(), a refused ask"
    PEER_GONE = "data_received(), the peer closed"
    ASK_EXPIRED = "next_action(), past the ask's deadline"
    HANDLER_RUN = "next_action(), the exchange's turn"
    ANSWERED = "handler_answered() or handler_failed()"
    SHUTDOWN = "shutdown()"
    PATH_ENDS = "next_action(), the end of the path"
    PATH_CUT = "next_action(), the hub ended the path's subscription"
    CLOSING = "next_action(), nothing left to write"
    LOST = "connection_lost()"
    BUSY = "made with busy=True: the server has max_connections already"
    STALLED = "write_stalled()"


class ServingOutcome(enum.Enum):
    """What a transition does besides changing the state."""

    NOTHING = "-"
    OPEN_PATH = "write the head (subscribed as the ask was read)"
    REFUSE = "write 'not served now' (503, Retry-After, the hub's reason)"
    HOLD = "keep the exchange for its handler"
    DECLINE = "write 'not served'"
    FINISH = "let the path or exchange go; write what the connection has left"
    SILENCE = "nothing more to write"
    RUN_HANDLER = "RunHandler(ask)"
    ANSWER = "write the handler's answer"
    END_PATH = "write the queue, then the end (the hub's reason, if it ended the path)"
    CLOSE = "Close()"
    DROP = "unsubscribe; forget the exchange"
    REFUSE_BUSY = "write 503 with Retry-After"
    CUT_OFF = "unsubscribe (the queue freed); Close(abort=True)"


_ASKING, _EXCHANGE, _ANSWERING, _PATH, _ENDING, _FINISHING, _CLOSED = ServingState
_In = ServingInput
_Out = ServingOutcome

#: (state, input) -> (next state, outcome). A pair that is not here is a
#: mistake of the adapter and raises :class:`LocalProtocolError`.
SERVING_TRANSITIONS: Final[
    Mapping[tuple[ServingState, ServingInput], tuple[ServingState, ServingOutcome]]
] = {
    # The ask: one per connection, read or given up on.
    (_ASKING, _In.PATH_ASKED): (_PATH, _Out.OPEN_PATH),
    # A suspended hub (its broker is lost) takes no subscription: not served now.
    (_ASKING, _In.PATH_REFUSED): (_FINISHING, _Out.REFUSE),
    (_ASKING, _In.EXCHANGE_ASKED): (_EXCHANGE, _Out.HOLD),
    # A server with no MCP server behind it to ask declines ("not served").
    (_ASKING, _In.EXCHANGE_DECLINED): (_FINISHING, _Out.DECLINE),
    (_ASKING, _In.ASK_REFUSED): (_FINISHING, _Out.FINISH),
    (_ASKING, _In.PEER_GONE): (_FINISHING, _Out.FINISH),
    # A peer that says nothing to answer holds a connection nobody is served by.
    (_ASKING, _In.ASK_EXPIRED): (_FINISHING, _Out.SILENCE),
    (_ASKING, _In.SHUTDOWN): (_FINISHING, _Out.SILENCE),
    # The exchange: its handler runs once, and its answer ends the connection.
    (_EXCHANGE, _In.HANDLER_RUN): (_ANSWERING, _Out.RUN_HANDLER),
    (_EXCHANGE, _In.ANSWERED): (_FINISHING, _Out.ANSWER),
    (_ANSWERING, _In.ANSWERED): (_FINISHING, _Out.ANSWER),
    (_EXCHANGE, _In.PEER_GONE): (_FINISHING, _Out.FINISH),
    (_ANSWERING, _In.PEER_GONE): (_FINISHING, _Out.FINISH),
    # A closing server lets a running handler answer first.
    (_EXCHANGE, _In.SHUTDOWN): (_EXCHANGE, _Out.NOTHING),
    (_ANSWERING, _In.SHUTDOWN): (_ANSWERING, _Out.NOTHING),
    # The peer went away while the handler ran: nobody to answer.
    (_FINISHING, _In.ANSWERED): (_FINISHING, _Out.NOTHING),
    (_CLOSED, _In.ANSWERED): (_CLOSED, _Out.NOTHING),
    # The path: ended cleanly on shutdown, or dropped when its peer goes.
    (_PATH, _In.SHUTDOWN): (_ENDING, _Out.NOTHING),
    (_ENDING, _In.PATH_ENDS): (_FINISHING, _Out.END_PATH),
    # The hub ended the subscription (its broker is lost): the queue, then the reason.
    (_PATH, _In.PATH_CUT): (_FINISHING, _Out.END_PATH),
    (_PATH, _In.PEER_GONE): (_FINISHING, _Out.FINISH),
    (_ENDING, _In.PEER_GONE): (_FINISHING, _Out.FINISH),
    # Beyond max_connections the ask is not even read: 503, and a clean close.
    (_ASKING, _In.BUSY): (_FINISHING, _Out.REFUSE_BUSY),
    # The end.
    (_FINISHING, _In.CLOSING): (_CLOSED, _Out.CLOSE),
    **{(state, _In.LOST): (_CLOSED, _Out.DROP) for state in ServingState},
    # A peer that takes no byte for stall_timeout while output waits is cut
    # off, whatever was being written: nothing more can be written to it.
    **{
        (state, _In.STALLED): (_CLOSED, _Out.CUT_OFF)
        for state in ServingState
        if state is not _CLOSED
    },
    # Shutting down twice, or once the answer is decided, changes nothing.
    (_ENDING, _In.SHUTDOWN): (_ENDING, _Out.NOTHING),
    (_FINISHING, _In.SHUTDOWN): (_FINISHING, _Out.NOTHING),
    (_CLOSED, _In.SHUTDOWN): (_CLOSED, _Out.NOTHING),
}

#: The input each of the server connection's events is (an exchange is one of two; a
#: notifications ask is ``PATH_REFUSED`` instead when the hub takes no subscription).
EVENT_INPUTS: Final[Mapping[type[Event], ServingInput]] = {
    NotificationsAsked: _In.PATH_ASKED,
    AskRefused: _In.ASK_REFUSED,
    ConnectionClosed: _In.PEER_GONE,
}

#: The states in which nothing more is read from the peer: the answer is decided.
DONE: Final = frozenset({_FINISHING, _CLOSED})
#: The states with a hub subscription.
SUBSCRIBED: Final = frozenset({_PATH, _ENDING})
#: The states with an exchange waiting for its answer.
EXCHANGING: Final = frozenset({_EXCHANGE, _ANSWERING})


def event_input(event: Event, answers_exchanges: bool) -> ServingInput:
    """The input the server connection's ``event`` is, by :data:`EVENT_INPUTS`.

    An exchange is ``EXCHANGE_ASKED`` if the server answers exchanges, else
    ``EXCHANGE_DECLINED``. An event a server connection does not produce is
    the adapter's mistake (:class:`~._errors.LocalProtocolError`).
    """
    if type(event) is ExchangeAsked:
        return _In.EXCHANGE_ASKED if answers_exchanges else _In.EXCHANGE_DECLINED
    what = EVENT_INPUTS.get(type(event))
    if what is None:
        raise LocalProtocolError(f"a server connection does not produce {event!r}")
    return what
