"""What a served connection tells its server, for the logs and the command line.

A :class:`~.serve.ServingConnection` calls its ``report`` callback with
one of these when something an operator wants to see happens: an ask
refused (with its status and the peer), a TLS handshake failed, a path
opened, a path ended (how, and what it sent and dropped), an exchange
answered (or its caller gone), a connection closed at its ask's deadline.
The adapters log them
(``diverge_notifications.server``); ``serve`` on the command line prints the
end of every path. Like events, reports are frozen, slotted, keyword-only
attrs classes.
"""

from __future__ import annotations

import enum

import attrs

__all__ = [
    "CALLER_GONE",
    "AskExpiredReport",
    "ExchangeReport",
    "PathEnd",
    "PathEndedReport",
    "PathOpenedReport",
    "RefusalReport",
    "ServeReport",
    "TlsFailedReport",
    "audience_note",
]


class PathEnd(enum.Enum):
    """How a notification path ended."""

    #: The server ended it cleanly (it was closing): what was queued went out first.
    CLEAN = "clean"
    #: The listener closed its side (or sent end of file).
    PEER_CLOSED = "peer closed"
    #: The listener took no byte for ``stall_timeout`` while output waited: cut off.
    STALLED = "stalled"
    #: The connection failed (a reset, a broken pipe), or the server gave up on it.
    LOST = "lost"
    #: The hub ended it (suspended: the broker that feeds it is lost): what was
    #: queued went out, then the hub's reason, as an error where the profile allows one.
    SUSPENDED = "broker lost"


@attrs.frozen(kw_only=True)
class RefusalReport:
    """An ask was refused with ``status`` (``reason`` says why); ``peer`` is who asked."""

    peer: str
    status: int
    reason: str


@attrs.frozen(kw_only=True)
class PathOpenedReport:
    """A notification path opened on ``channel`` to ``peer``.

    ``audience`` names the token it was asked with when the server accepts
    several (:func:`~..wire.http.audience_of`; never the token), else ``None``.
    """

    peer: str
    channel: str
    audience: str | None = None


@attrs.frozen(kw_only=True)
class PathEndedReport:
    """The path on ``channel`` to ``peer`` ended ``how``.

    ``sent``: notifications written to it; ``dropped``: notifications that
    reached it and were not sent (its queue was full, or they were still
    queued at its end: ``freed`` of them); ``stall_timeout`` is set when it
    was cut off as stalled; ``reason`` is the hub's reason when the hub ended
    it (:attr:`PathEnd.SUSPENDED`); ``audience`` as in :class:`PathOpenedReport`.
    """

    peer: str
    channel: str
    how: PathEnd
    sent: int
    dropped: int
    freed: int
    stall_timeout: float | None = None
    reason: str | None = None
    audience: str | None = None


@attrs.frozen(kw_only=True)
class ExchangeReport:
    """The exchange (kind 0-3, ``exchange`` its name) on ``channel`` was answered ``outcome``.

    ``outcome`` is ``"result"``, ``"error"``, ``"declined"``,
    ``"internal error: <why>"`` (the handler raised, ran too long, or
    returned what is not a result) or :data:`CALLER_GONE` (the peer closed
    before its answer: nobody was answered); ``audience`` as in
    :class:`PathOpenedReport`.
    """

    peer: str
    channel: str
    exchange: str
    outcome: str
    audience: str | None = None


def audience_note(audience: str | None) -> str:
    """What a log line about a path or an exchange adds for its audience (``""`` for none)."""
    return "" if audience is None else f" (audience {audience})"


@attrs.frozen(kw_only=True)
class AskExpiredReport:
    """The connection from ``peer`` was closed: its ask was not complete within ``ask_timeout``."""

    peer: str
    ask_timeout: float


#: The outcome of an exchange whose caller closed the connection before its answer.
CALLER_GONE = "not answered: the caller hung up"


@attrs.frozen(kw_only=True)
class TlsFailedReport:
    """``peer``'s TLS handshake failed (``reason`` says how): closed before its ask."""

    peer: str
    reason: str


ServeReport = (
    RefusalReport
    | PathOpenedReport
    | PathEndedReport
    | ExchangeReport
    | AskExpiredReport
    | TlsFailedReport
)
