"""The options of a server, checked once: what each ``serve()`` takes, and their defaults.

A serving adapter's ``Server`` holds one :class:`ServeSettings`; it makes
the :class:`~.serving.ServingConnection` of every accepted connection, mints
their channels and holds the :class:`~.counts.ServingTotals` they count
into. ``docs/adapters.md`` lists the options, the limits and their defaults.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import attrs

from .actions import ExchangeHandler
from .counts import ServingTotals
from .http import ChannelIds
from .hub import Hub
from .reports import ServeReport
from .sequence import Profile
from .server import ServerConnection
from .serving import ServingConnection
from .serving_defaults import (
    DEFAULT_ASK_TIMEOUT,
    DEFAULT_BACKLOG,
    DEFAULT_CLOSE_TIMEOUT,
    DEFAULT_EXCHANGE_TIMEOUT,
    DEFAULT_KEEPALIVE_INTERVAL,
    DEFAULT_LINGER,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_DISCARD,
    DEFAULT_STALL_TIMEOUT,
    DEFAULT_WRITE_BUFFER,
    check_positive,
)

__all__ = ["ServeSettings"]


def _check_positive(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    check_positive(attribute.name, value)


def _check_no_limit_or_positive(
    _instance: object, attribute: attrs.Attribute[Any], value: float | None
) -> None:
    if value is not None:
        check_positive(attribute.name, value)


def _check_token(_instance: object, _attribute: attrs.Attribute[Any], token: str | None) -> None:
    # The very check each connection's ServerConnection makes, made once here
    # (ValueError), not by every connection later.
    ServerConnection(token=token)


#: Any :data:`ExchangeHandler` (async adapters), or one returning its answer (blocking).
_Handler = TypeVar("_Handler", bound=ExchangeHandler)


@attrs.frozen(kw_only=True)
class ServeSettings(Generic[_Handler]):
    """The options of a serving adapter's ``Server`` (the defaults of ``serve()``), checked once.

    A ``token`` the :class:`ServerConnection` refuses (it is one or more
    visible ASCII characters), or a timeout, interval or size that is not
    positive, is a :class:`ValueError` here. :meth:`serving_connection` makes
    each accepted connection's driver; ``channel_ids`` mints all their
    channels, and they count into ``totals``. ``on_report`` is called with
    every :mod:`.reports` record (the command line prints the end of each
    path). The limits and their defaults are in ``docs/adapters.md``.
    """

    token: str | None = attrs.field(default=None, validator=_check_token)
    keepalive_interval: float = attrs.field(
        default=DEFAULT_KEEPALIVE_INTERVAL, validator=_check_positive
    )
    profile: Profile = Profile.PROVIDER
    exchange_handler: _Handler | None = None
    queue_size: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(_check_positive)
    )
    max_batch: int = attrs.field(default=DEFAULT_MAX_BATCH, validator=_check_positive)
    close_timeout: float = attrs.field(default=DEFAULT_CLOSE_TIMEOUT, validator=_check_positive)
    ask_timeout: float = attrs.field(default=DEFAULT_ASK_TIMEOUT, validator=_check_positive)
    queue_bytes: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(_check_positive)
    )
    write_buffer: int = attrs.field(default=DEFAULT_WRITE_BUFFER, validator=_check_positive)
    stall_timeout: float = attrs.field(default=DEFAULT_STALL_TIMEOUT, validator=_check_positive)
    max_connections: int | None = attrs.field(
        default=DEFAULT_MAX_CONNECTIONS, validator=_check_no_limit_or_positive
    )
    backlog: int = attrs.field(default=DEFAULT_BACKLOG, validator=_check_positive)
    exchange_timeout: float = attrs.field(
        default=DEFAULT_EXCHANGE_TIMEOUT, validator=_check_positive
    )
    linger: float = attrs.field(default=DEFAULT_LINGER, validator=_check_positive)
    max_discard: int = attrs.field(default=DEFAULT_MAX_DISCARD, validator=_check_positive)
    send_buffer: int | None = attrs.field(default=None, validator=_check_no_limit_or_positive)
    on_report: Callable[[ServeReport], None] | None = attrs.field(default=None, eq=False)
    channel_ids: ChannelIds = attrs.field(init=False, factory=ChannelIds, eq=False, repr=False)
    totals: ServingTotals = attrs.field(init=False, factory=ServingTotals, eq=False, repr=False)

    def serving_connection(
        self,
        hub: Hub,
        *,
        wake: Callable[[], None],
        now: float,
        peer: str = "",
        report: Callable[[ServeReport], None] | None = None,
        hub_lock: contextlib.AbstractContextManager[Any] | None = None,
    ) -> ServingConnection:
        """The :class:`ServingConnection` of a connection accepted at ``now``; see its arguments.

        It is made ``busy`` (answered 503) when ``max_connections``
        connections are being served already.
        """
        limit = self.max_connections
        return ServingConnection(
            hub,
            wake=wake,
            now=now,
            ask_timeout=self.ask_timeout,
            keepalive_interval=self.keepalive_interval,
            token=self.token,
            profile=self.profile,
            channel_ids=self.channel_ids,
            answers_exchanges=self.exchange_handler is not None,
            queue_size=self.queue_size,
            queue_bytes=self.queue_bytes,
            max_batch=self.max_batch,
            write_buffer=self.write_buffer,
            stall_timeout=self.stall_timeout,
            linger=self.linger,
            max_discard=self.max_discard,
            busy=limit is not None and self.totals.connections >= limit,
            peer=peer,
            totals=self.totals,
            report=report,
            hub_lock=hub_lock,
        )
