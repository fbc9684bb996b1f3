"""What a server does while its hub is suspended: asks not served now, paths ended with why.

A hub fed by a broker between replicas (docs/cluster.md) is suspended while
the broker is lost: :meth:`~.hub.Hub.subscribe` raises
:class:`~.hub.HubSuspended` and every open subscriber is ended with the
reason (:attr:`~.hub.Subscriber.end_reason`). The serving driver
(:mod:`.serving`) then answers a notification ask with
:func:`not_served_now` (``503`` with ``Retry-After``) and ends each open
path with :func:`path_end`, after what it had queued. Both are counted in
the server's :class:`~.counts.ServingTotals` (``asks_suspended``,
``paths_suspended`` in its ``stats()``) and reported
(:class:`~.reports.RefusalReport`, :class:`~.reports.PathEndedReport` with
:attr:`~.reports.PathEnd.SUSPENDED`), so that whoever runs the server can
log them (nothing here does I/O).
"""

from __future__ import annotations

from typing import Final

from ._errors import LocalProtocolError
from .mcp import ErrorCode, ErrorData
from .server import ServerConnection

__all__ = ["NOT_SERVED_STATUS", "RETRY_AFTER", "internal_error", "not_served_now", "path_end"]

#: The status of an ask refused while the hub is suspended.
NOT_SERVED_STATUS: Final = 503
#: The ``Retry-After`` hint, in seconds: listeners re-ask with their own backoff anyway.
RETRY_AFTER: Final = 1


def internal_error(message: str) -> ErrorData:
    """An internal-error ``ErrorData`` saying ``message`` (a path's end, a handler's failure)."""
    return ErrorData(code=int(ErrorCode.INTERNAL_ERROR), message=message)


def not_served_now(connection: ServerConnection, reason: str) -> bytes:
    """The answer to a notification ask while the hub is suspended: ``503``, the reason as body."""
    return connection.refuse(NOT_SERVED_STATUS, reason, headers=[("Retry-After", str(RETRY_AFTER))])


def path_end(connection: ServerConnection, reason: str | None) -> bytes:
    """The end of an open path: clean (``reason`` is ``None``), or the hub's reason as an error.

    The error goes where the profile allows one (the provider profile, and
    the container profile before any notification), with the finish after
    it; where the profile allows neither an error nor a finish (the
    container profile after notifications) this is ``b""``: the path ends
    with the connection, without the end of its body.
    """
    try:
        if reason is None:
            return connection.end_path()
        return connection.send_error(internal_error(reason))
    except LocalProtocolError:
        return b""
