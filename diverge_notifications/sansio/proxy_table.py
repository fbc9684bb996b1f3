"""The states of one ask on the proxy side, and the table between them .

:data:`PROXY_TRANSITIONS` says, for each state of an ask and each thing
that can happen to it (a :class:`ProxyInput`), the state it moves to and
what is done (a :class:`ProxyOutcome`). :mod:`.proxy`, whose connections
read the answer, names what the bytes are, looks the pair up here and does
what the outcome found says; ``docs/states.md`` is drawn from this table.

Any table is followed as it is, and a row that cannot work fails loudly
(:func:`why_misfit`). The one shortcut, reading frames a batch at a time,
is taken only where the table allows it (:func:`takes_frames_in_batches`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from typing import Final

__all__ = [
    "PROXY_TRANSITIONS",
    "TAKES",
    "Brings",
    "ProxyInput",
    "ProxyOutcome",
    "ProxyState",
    "brought",
    "takes_frames_in_batches",
    "why_misfit",
]


class ProxyState(enum.Enum):
    """Where one ask on one connection is."""

    #: Built; the ask's bytes have not been taken with ``data_to_send()``.
    SENDING_ASK = "sending ask"
    #: The ask is out; waiting for the answer's head (1xx heads are skipped).
    AWAITING_HEAD = "awaiting head"
    #: A 2xx messages head opened the path; frames are read from the body.
    STREAMING = "streaming"
    #: A non-2xx head refused the ask; its body is read for the reason.
    REFUSED = "reading refusal"
    #: The terminal event is queued; whatever arrives now is discarded.
    DONE = "done"


class ProxyInput(enum.Enum):
    """What can happen to one ask on one connection."""

    ASK_TAKEN = "ask taken"
    INFORMATIONAL = "1xx head"
    PATH_HEAD = "2xx messages head"
    REFUSAL_HEAD = "non-2xx head"
    UNUSABLE_HEAD = "unusable 2xx head"
    KEEPALIVE = "keep-alive frame"
    MESSAGE = "message frame"
    PATH_OVER = "rules ended the path"
    BODY_END = "clean end of body"
    REFUSAL_READ = "refusal read"
    ABRUPT_END = "abrupt end"
    CONNECTION_LOST = "connection lost"


class ProxyOutcome(enum.Enum):
    """What a transition of :data:`PROXY_TRANSITIONS` does."""

    NOTHING = "nothing"
    SKIPPED = "skipped"
    OPENED = "StreamOpened"
    MESSAGE = "message to the rules"
    FINISH = "clean end to the rules"
    RULES_TERMINAL = "terminal from the rules"
    NOT_SERVED = "NotServed"
    BROKEN = "StreamBroken"


_S, _I, _O = ProxyState, ProxyInput, ProxyOutcome

#: (state, input) -> (next state, outcome) for the HTTP and framing layers
#: of one ask. "The rules" are the front-end's: the profile rules of
#: :class:`~.sequence.SequenceMachine` for a
#: :class:`~.proxy.ProxyConnection`, those of :class:`~.exchange.AnswerMachine`
#: for an :class:`~.proxy.ExchangeConnection`. Inputs in ``DONE`` are
#: discarded and are not in the table; neither is anything a state cannot
#: receive.
PROXY_TRANSITIONS: Final[
    Mapping[tuple[ProxyState, ProxyInput], tuple[ProxyState, ProxyOutcome]]
] = {
    (_S.SENDING_ASK, _I.ASK_TAKEN): (_S.AWAITING_HEAD, _O.NOTHING),
    (_S.SENDING_ASK, _I.CONNECTION_LOST): (_S.DONE, _O.BROKEN),
    (_S.AWAITING_HEAD, _I.INFORMATIONAL): (_S.AWAITING_HEAD, _O.SKIPPED),
    (_S.AWAITING_HEAD, _I.PATH_HEAD): (_S.STREAMING, _O.OPENED),
    (_S.AWAITING_HEAD, _I.REFUSAL_HEAD): (_S.REFUSED, _O.NOTHING),
    (_S.AWAITING_HEAD, _I.UNUSABLE_HEAD): (_S.DONE, _O.BROKEN),
    (_S.AWAITING_HEAD, _I.ABRUPT_END): (_S.DONE, _O.BROKEN),
    (_S.AWAITING_HEAD, _I.CONNECTION_LOST): (_S.DONE, _O.BROKEN),
    (_S.STREAMING, _I.KEEPALIVE): (_S.STREAMING, _O.SKIPPED),
    (_S.STREAMING, _I.MESSAGE): (_S.STREAMING, _O.MESSAGE),
    (_S.STREAMING, _I.PATH_OVER): (_S.DONE, _O.RULES_TERMINAL),
    (_S.STREAMING, _I.BODY_END): (_S.DONE, _O.FINISH),
    (_S.STREAMING, _I.ABRUPT_END): (_S.DONE, _O.BROKEN),
    # connection_lost(): abrupt whatever the body's framing, even where the
    # end of file would have ended a close-delimited body cleanly.
    (_S.STREAMING, _I.CONNECTION_LOST): (_S.DONE, _O.BROKEN),
    (_S.REFUSED, _I.REFUSAL_READ): (_S.DONE, _O.NOT_SERVED),
    # A refusal whose body is cut short is still a refusal: its status is
    # what matters, and it is known.
    (_S.REFUSED, _I.ABRUPT_END): (_S.DONE, _O.NOT_SERVED),
    (_S.REFUSED, _I.CONNECTION_LOST): (_S.DONE, _O.NOT_SERVED),
}


class Brings(enum.Enum):
    """What an input hands to the outcome of its row."""

    NOTHING = "nothing"
    DETAIL = "a channel, a head or a reason"
    FRAMES = "frames"


def brought(detail: str | None, payloads: Sequence[bytes] | None) -> Brings:
    """What an input that hands on ``detail`` and ``payloads`` brings."""
    if payloads is not None:
        return Brings.FRAMES
    return Brings.NOTHING if detail is None else Brings.DETAIL


_B = Brings
#: What each outcome can act on. ``SKIPPED`` drops what it is given, so it
#: needs something to drop; the others take what they use, and nothing they
#: would lose.
TAKES: Final[Mapping[ProxyOutcome, frozenset[Brings]]] = {
    _O.NOTHING: frozenset({_B.NOTHING}),
    _O.SKIPPED: frozenset({_B.DETAIL, _B.FRAMES}),
    _O.OPENED: frozenset({_B.DETAIL}),
    _O.MESSAGE: frozenset({_B.FRAMES}),
    _O.FINISH: frozenset({_B.NOTHING}),
    _O.RULES_TERMINAL: frozenset({_B.NOTHING}),
    # A refusal cut short is still a refusal: the reason of its end is not its.
    _O.NOT_SERVED: frozenset({_B.NOTHING, _B.DETAIL}),
    _O.BROKEN: frozenset({_B.DETAIL}),
}


def why_misfit(
    outcome: ProxyOutcome, brings: Brings, *, rules_ended: bool, refusal_read: bool
) -> str:
    """Why ``outcome`` cannot act on what its input ``brings``; ``""`` when it can.

    So that a row that cannot work fails loudly rather than quietly doing
    something else: once the rules have ended the path only their terminal
    stands (anything else would be told to rules that no longer listen),
    and ``NOT_SERVED`` needs the head of a refusal.
    """
    if rules_ended is not (outcome is _O.RULES_TERMINAL):
        return "but the rules have " + ("ended the path" if rules_ended else "not ended it")
    if brings not in TAKES[outcome]:
        return f"which cannot take {brings.value}"
    if outcome is _O.NOT_SERVED and not refusal_read:
        return "but no refusal was read"
    return ""


def takes_frames_in_batches(
    table: Mapping[tuple[ProxyState, ProxyInput], tuple[ProxyState, ProxyOutcome]],
) -> bool:
    """Whether ``table`` lets the frames of a path be read a batch at a time.

    A batch (:meth:`~.framing.FrameDecoder.next_payloads`) hands every
    message to the rules and skips every keep-alive without looking each
    up: that is what the table says only when, while streaming, a message
    goes to the rules and a keep-alive is skipped, both keeping the state.
    Otherwise frames are read one at a time, each looked up.
    """
    streaming = ProxyState.STREAMING
    message = table.get((streaming, ProxyInput.MESSAGE))
    keepalive = table.get((streaming, ProxyInput.KEEPALIVE))
    return message == (streaming, _O.MESSAGE) and keepalive == (streaming, _O.SKIPPED)
