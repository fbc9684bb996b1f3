"""The options of the drivers, checked once, and their defaults.

A serving adapter's ``Server`` holds one :class:`ServeSettings` (what
``serve()`` takes) and makes the :class:`~.serve.ServingConnection` of
every accepted connection with it; the settings mint their channels and
hold the :class:`~..server.counts.ServingTotals` they count into. A
client's :class:`ClientSettings` (what ``listen()`` and a proxy take) go
whole to each of its :class:`~.listen.ListenDriver` and
:class:`~.proxy.ExchangeDriver`. ``docs/adapters.md`` lists the options,
the limits and their defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final, Generic, TypeVar

import attrs

from ..errors import check_positive, positive, positive_int
from ..server.admission import Admission
from ..server.counts import ServingTotals
from ..server.filters import Interest
from ..wire.framing import DEFAULT_MAX_FRAME_SIZE
from ..wire.http import ChannelIds, check_token, check_tokens
from ..wire.profiles import Profile
from .actions import ExchangeHandler
from .reports import ServeReport

__all__ = [
    "DEFAULT_ADDRESS_SHARE",
    "DEFAULT_ANSWER_TIMEOUT",
    "DEFAULT_ASK_TIMEOUT",
    "DEFAULT_BACKLOG",
    "DEFAULT_CLOSE_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_EXCHANGE_TIMEOUT",
    "DEFAULT_HANDLER_TIMEOUT",
    "DEFAULT_HEAD_TIMEOUT",
    "DEFAULT_KEEPALIVE_INTERVAL",
    "DEFAULT_LINGER",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_DISCARD",
    "DEFAULT_NOTIFICATION_BUFFER",
    "DEFAULT_SLOW_AFTER",
    "DEFAULT_STALL_TIMEOUT",
    "DEFAULT_WRITE_BUFFER",
    "ClientSettings",
    "ServeSettings",
    "check_positive",
]


#: Seconds without output after which a server writes a keep-alive frame.
DEFAULT_KEEPALIVE_INTERVAL: Final = 15.0
#: Notifications a server writes per HTTP chunk at most.
DEFAULT_MAX_BATCH: Final = 1024
#: Seconds a closing server waits for its listeners to take the end of their paths.
DEFAULT_CLOSE_TIMEOUT: Final = 5.0
#: Seconds a server gives a new connection to complete its ask before closing it.
DEFAULT_ASK_TIMEOUT: Final = 10.0
#: Seconds a path's peer may take no byte while output waits before it is cut off.
DEFAULT_STALL_TIMEOUT: Final = 30.0
#: Bytes one ``Write`` of a path carries at most (one larger frame goes alone).
DEFAULT_WRITE_BUFFER: Final = 256 * 1024
#: Connections served at once; beyond, a new one is answered 503 with ``Retry-After``.
DEFAULT_MAX_CONNECTIONS: Final = 1024
#: The share of ``max_connections`` one peer address may hold at once (at least one).
DEFAULT_ADDRESS_SHARE: Final = 0.5
#: Seconds a path may take no byte before a publisher waiting for room stops waiting for it.
DEFAULT_SLOW_AFTER: Final = 1.0
#: Connections the listening socket holds before they are accepted.
DEFAULT_BACKLOG: Final = 128
#: Seconds an exchange handler may run before it is cancelled and answered an internal error.
DEFAULT_HANDLER_TIMEOUT: Final = 30.0
#: Seconds a refused connection is read (and what comes discarded) after its answer.
DEFAULT_LINGER: Final = 2.0
#: Bytes read (and discarded) after the ask; past that the server stops reading.
DEFAULT_MAX_DISCARD: Final = 64 * 1024

#: Seconds a relay gives a forwarded call or read (``serve --exchange-timeout``); ``serve``
#: lets its exchange handler run as long when it relays MCP servers.
DEFAULT_EXCHANGE_TIMEOUT: Final = 300.0

#: Seconds a client waits for a TCP connection (and, over TLS, its handshake) to be made.
DEFAULT_CONNECT_TIMEOUT: Final = 10.0
#: Seconds a listener waits for the head of an answer (after its ask is sent) to be complete.
DEFAULT_HEAD_TIMEOUT: Final = 10.0
#: Seconds a proxy waits for an exchange's answer: longer than a relay gives a forwarded
#: call (:data:`DEFAULT_EXCHANGE_TIMEOUT`, 300 s), so that the relay's own timeout error
#: is what arrives, not a silence.
DEFAULT_ANSWER_TIMEOUT: Final = 330.0
#: Notifications (events, with ``events=True``) a proxy keeps until its application reads
#: them; what arrives beyond is dropped and counted (``proxy.dropped``).
DEFAULT_NOTIFICATION_BUFFER: Final = 1024


def _check_no_limit_or_positive(
    _instance: object, attribute: attrs.Attribute[Any], value: float | None
) -> None:
    if value is not None:
        check_positive(attribute.name, value)


def _check_token(_instance: object, _attribute: attrs.Attribute[Any], token: str | None) -> None:
    # The check each connection makes of its token (a server's, or an ask's), made once here.
    check_token(token)


def _tokens(tokens: Iterable[str] | None) -> tuple[str, ...] | None:
    if tokens is None:
        return None
    if isinstance(tokens, (str, bytes)):
        # Its characters are not tokens: refused now, with the rule's own words.
        check_tokens(None, tokens)
    return tuple(tokens)


def _check_share(_instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if not 0 < value <= 1:
        raise ValueError(f"{attribute.name} must be more than 0 and at most 1, not {value!r}")


def _admission(settings: ServeSettings[Any]) -> Admission:
    return Admission(settings.max_connections, settings.address_share)


def _profile(profile: Profile | str) -> Profile:
    return Profile(profile)


#: Any :data:`ExchangeHandler` (async adapters), or one returning its answer (blocking).
_Handler = TypeVar("_Handler", bound=ExchangeHandler)


@attrs.frozen(kw_only=True)
class ServeSettings(Generic[_Handler]):
    """The options of a serving adapter's ``Server`` (the defaults of ``serve()``), checked once.

    A ``token`` the :class:`ServerConnection` refuses (it is one or more
    visible ASCII characters), or a timeout, interval or size that is not
    positive, is a :class:`ValueError` here. Each accepted connection's
    :class:`~.serve.ServingConnection` is made with these settings whole;
    ``channel_ids`` mints all their
    channels, and they count into ``totals``. ``on_report`` is called with
    every :mod:`.reports` record (the command line prints the end of each
    path). One peer address holds at most ``address_share`` of
    ``max_connections`` at once (:mod:`~..server.admission`, which
    ``admission`` is). A publisher that waits for room waits only for paths
    that took bytes within ``slow_after`` seconds. The limits and their
    defaults are in ``docs/adapters.md``.

    ``tokens`` accepts several tokens instead of one ``token`` (not both; an
    empty list, or a str, is a :class:`ValueError`): every one is accepted,
    each path and exchange belongs to the audience of the one it was asked
    with (:func:`~..wire.http.audience_of`), and :attr:`accepted` is the
    tokens in use either way.
    """

    token: str | None = attrs.field(default=None, validator=_check_token, repr=False)
    keepalive_interval: float = attrs.field(default=DEFAULT_KEEPALIVE_INTERVAL, validator=positive)
    profile: Profile = Profile.PROVIDER
    exchange_handler: _Handler | None = None
    queue_size: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(positive)
    )
    max_batch: int = attrs.field(default=DEFAULT_MAX_BATCH, validator=positive)
    close_timeout: float = attrs.field(default=DEFAULT_CLOSE_TIMEOUT, validator=positive)
    ask_timeout: float = attrs.field(default=DEFAULT_ASK_TIMEOUT, validator=positive)
    queue_bytes: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(positive)
    )
    write_buffer: int = attrs.field(default=DEFAULT_WRITE_BUFFER, validator=positive)
    stall_timeout: float = attrs.field(default=DEFAULT_STALL_TIMEOUT, validator=positive)
    max_connections: int | None = attrs.field(
        default=DEFAULT_MAX_CONNECTIONS, validator=_check_no_limit_or_positive
    )
    backlog: int = attrs.field(default=DEFAULT_BACKLOG, validator=positive)
    exchange_timeout: float = attrs.field(default=DEFAULT_HANDLER_TIMEOUT, validator=positive)
    linger: float = attrs.field(default=DEFAULT_LINGER, validator=positive)
    max_discard: int = attrs.field(default=DEFAULT_MAX_DISCARD, validator=positive)
    send_buffer: int | None = attrs.field(default=None, validator=_check_no_limit_or_positive)
    on_report: Callable[[ServeReport], None] | None = attrs.field(default=None, eq=False)
    channel_ids: ChannelIds = attrs.field(init=False, factory=ChannelIds, eq=False, repr=False)
    totals: ServingTotals = attrs.field(init=False, factory=ServingTotals, eq=False, repr=False)
    address_share: float = attrs.field(default=DEFAULT_ADDRESS_SHARE, validator=_check_share)
    slow_after: float = attrs.field(default=DEFAULT_SLOW_AFTER, validator=positive)
    admission: Admission = attrs.field(
        init=False, default=attrs.Factory(_admission, takes_self=True), eq=False, repr=False
    )
    #: What every path subscribes to (``None``: everything); see :class:`Interest`.
    interest: Interest | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(Interest))
    )
    tokens: tuple[str, ...] | None = attrs.field(default=None, converter=_tokens, repr=False)
    #: The tokens accepted, from ``token`` or ``tokens`` (empty: no token is asked for).
    accepted: tuple[str, ...] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "accepted", check_tokens(self.token, self.tokens))


@attrs.frozen(kw_only=True)
class ClientSettings:
    """The options of a client's asks (those of ``listen()``, and a proxy's), checked once.

    A :class:`~.listen.ListenDriver` and each :class:`~.proxy.ExchangeDriver`
    of a :class:`~.proxy.ProxyDriver` are made with these settings whole.
    A ``token`` the server could never match (it is one or more visible
    ASCII characters), a timeout, interval or size that is not positive,
    or a ``profile`` that names none, is a :class:`ValueError` here. Whether
    the token may go to a URL in cleartext (``allow_plaintext_token``) is
    the driver's to check, with the URL. ``exchange_timeout`` is a proxy's:
    a listener makes no exchange.
    """

    #: Sent as ``Authorization: Bearer <token>``.
    token: str | None = attrs.field(default=None, validator=_check_token)
    #: Deliver every event, not just notifications.
    events: bool = False
    #: The server's keep-alive interval; three times that much silence is a broken path.
    keepalive_interval: float = attrs.field(default=DEFAULT_KEEPALIVE_INTERVAL, validator=positive)
    #: The sequence rules a path follows.
    profile: Profile = attrs.field(default=Profile.PROVIDER, converter=_profile)
    #: A longer frame breaks the path.
    max_frame_size: int = attrs.field(default=DEFAULT_MAX_FRAME_SIZE, validator=positive)
    #: The jitter source, a uniform float in ``[0, 1)``; ``None``: the middle of each range.
    random: Callable[[], float] | None = attrs.field(default=None, eq=False)
    #: Seconds a connection may take.
    connect_timeout: float = attrs.field(default=DEFAULT_CONNECT_TIMEOUT, validator=positive)
    #: Seconds a proxy waits for an exchange's answer.
    exchange_timeout: float = attrs.field(default=DEFAULT_ANSWER_TIMEOUT, validator=positive)
    #: Send the token over plain ``http://`` to a host that is not loopback.
    allow_plaintext_token: bool = False
    #: Items a proxy keeps until its application reads them (a listener keeps none).
    notification_buffer: int = attrs.field(
        default=DEFAULT_NOTIFICATION_BUFFER, validator=positive_int
    )
    #: Seconds a listener's answer may take to complete its head (1xx heads do not count).
    head_timeout: float = attrs.field(default=DEFAULT_HEAD_TIMEOUT, validator=positive)
