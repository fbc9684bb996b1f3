"""What the asyncio and blocking Redis brokers share: connections made once, replies read.

Both brokers drive redis-py's *connections* (``redis.asyncio.Connection``,
``redis.Connection``) directly, not its ``Redis`` client or ``PubSub``
object, because those reconnect by themselves: ``PubSub``'s failure
handler reconnects and subscribes again before it re-raises, even with a
``Retry`` of zero retries, and a client takes a fresh connection from its
pool for the next command. A broker here makes each connection once, with

* ``retry=Retry(NoBackoff(), 0)``: one attempt at connecting and at each
  command, no retry (a given ``Retry`` also keeps ``retry_on_timeout`` in
  a URL from adding one);
* ``health_check_interval=0``: no PING of redis-py's own before commands;
* ``protocol=2``: RESP2, where a subscribed connection receives plain
  replies (redis-py 8 defaults to RESP3, whose maintenance notifications
  move and reconnect connections by themselves);
* no maintenance notifications: the pool redis-py 8 makes from the URL
  configures them for RESP3 and hands every connection their handler,
  which RESP2 without hiredis refuses ("only supported with hiredis and
  RESP3 parsers"), so the ``redis`` extra as installed (no hiredis) could
  not connect; those options are removed from the connections' options;

and, when one fails, drops it and makes new ones after its own backoff.
"""

from __future__ import annotations

import contextlib
import random as random_module
import socket
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Final

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.exceptions import RedisError
except ImportError as error:  # pragma: no cover - the extra is installed in development
    raise ImportError(
        "diverge_notifications.cluster's Redis brokers need the 'redis' extra: "
        "pip install 'diverge-notifications[redis]'",
        name="redis",
    ) from error

from ..sansio.client.policy import DEFAULT_BACKOFF, Backoff, ProxyPolicy
from ..sansio.errors import check_positive
from ..sansio.events import RetryScheduled
from ..sansio.server.hub import Hub
from ._core import DEFAULT_CHANNEL, Broker, BrokerCore, BrokerSettings, broker_settings, redact_url

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._core import BrokerOptions

__all__ = [
    "DEFAULT_PING_INTERVAL",
    "DEFAULT_PUBLISH_TIMEOUT",
    "DEFAULT_REDIS_CONNECT_TIMEOUT",
    "FAILURES",
    "Reconnects",
    "RedisBrokerBase",
    "RedisError",
    "check_subscribed",
    "connection_factory",
    "describe",
    "description",
    "message_data",
]

#: Seconds to connect to Redis and subscribe, by default.
DEFAULT_REDIS_CONNECT_TIMEOUT: Final = 5.0
#: Seconds a PUBLISH may take before the connection counts as lost, by default.
DEFAULT_PUBLISH_TIMEOUT: Final = 5.0

#: Seconds of silence on the subscription before a PING, and then before it counts as lost.
DEFAULT_PING_INTERVAL: Final = 5.0

#: What a lost or unusable connection raises.
FAILURES: Final = (RedisError, OSError, TimeoutError, EOFError)

#: The connection options the broker sets itself.
_OWNED: Final = (
    "retry",
    "health_check_interval",
    "protocol",
    "socket_timeout",
    "socket_connect_timeout",
    "maint_notifications_config",
)
#: The options redis-py 8's pool adds for RESP3 maintenance notifications, removed (the
#: connections speak RESP2; see the module's docstring).
_MAINTENANCE: Final = (
    "maint_notifications_config",
    "maint_notifications_pool_handler",
    "oss_cluster_maint_notifications_handler",
)
#: TCP keep-alive for TCP connections: a peer gone without a word is found
#: within about 45 s of silence, whatever redis-py's default is (it was the
#: system's, two hours, before redis-py 8).
_KEEPALIVE: Final = {
    option: value
    for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3))
    if (option := getattr(socket, name, None)) is not None
}


def connection_factory(
    pool_class: Any,
    tcp_class: type,
    url: str,
    *,
    retry: Any,
    socket_timeout: float | None,
    connect_timeout: float,
    client_name: str,
    extra: Mapping[str, Any] | None,
) -> Callable[[], Any]:
    """A maker of unconnected connections to ``url``, from ``pool_class.from_url``.

    The pool is used only to turn the URL and ``extra`` (more redis-py
    connection options: ``password=``, ``ssl_ca_certs=``, ...) into
    connection options; each connection is made by hand, used until it
    fails, and never made again. What turns redis-py's own recovery off, and
    the timeouts, are set after the URL, whose query could otherwise change
    them; ``extra`` may not set them at all. TCP connections (``tcp_class``
    and its subclasses, TLS included) get TCP keep-alive unless ``extra``
    says otherwise. One connection is made here, so that options redis-py
    refuses fail now and not in the broker's task; it is the first one the
    maker hands out. redis-py's connections are typed loosely, hence ``Any``.
    """
    options: dict[str, Any] = dict(extra or {})
    owned = sorted(set(options) & set(_OWNED))
    if owned:
        raise ValueError(
            f"redis_options may not set {', '.join(owned)}: the broker sets them "
            "(see connect_timeout, publish_timeout and ping_interval)"
        )
    options.setdefault("client_name", client_name)
    pool = pool_class.from_url(url, **options)
    kwargs = pool.connection_kwargs
    kwargs.update(
        retry=retry,
        health_check_interval=0,
        protocol=2,
        socket_timeout=socket_timeout,
        socket_connect_timeout=connect_timeout,
    )
    for option in _MAINTENANCE:
        kwargs.pop(option, None)
    if issubclass(pool.connection_class, tcp_class):
        kwargs.setdefault("socket_keepalive", True)
        if kwargs["socket_keepalive"]:
            kwargs.setdefault("socket_keepalive_options", _KEEPALIVE)
    make: Callable[[], Any] = pool.make_connection
    made = [make()]

    def connection() -> Any:
        return made.pop() if made else make()

    return connection


def description(url: str, channel: str) -> str:
    """How a Redis broker is named in reasons and logs: its URL (no password) and channel."""
    return f"Redis broker {redact_url(url)} channel {channel!r}"


def describe(error: BaseException) -> str:
    """One line for what ended a connection."""
    text = str(error)
    name = type(error).__name__
    return f"{name}: {text}" if text else name


def check_subscribed(reply: object, channel: bytes) -> None:
    """Raise ``redis.ConnectionError`` unless ``reply`` confirms the SUBSCRIBE to ``channel``."""
    if (
        isinstance(reply, list)
        and len(reply) == 3
        and reply[0] == b"subscribe"
        and reply[1] == channel
    ):
        return
    raise redis.ConnectionError(f"unexpected answer to SUBSCRIBE: {reply!r:.200}")


def message_data(reply: object, channel: bytes) -> bytes | None:
    """The data of a ``message`` reply on ``channel``, or ``None`` for any other reply."""
    if (
        isinstance(reply, list)
        and len(reply) == 3
        and reply[0] == b"message"
        and reply[1] == channel
        and isinstance(reply[2], bytes)
    ):
        return reply[2]
    return None


class Reconnects:
    """When a broker connects again: the proxy's own policy, with its backoff and jitter.

    A connection that lost Redis, or an attempt that failed, is followed by
    a delay drawn by :class:`~diverge_notifications.sansio.client.policy.ProxyPolicy`
    (``backoff``, full jitter from ``random``). A connection counts as
    healthy, and resets the backoff, once it delivered a message or stayed
    subscribed for ``healthy_after`` seconds; so a Redis that accepts and
    drops connections is retried ever more slowly, up to the cap, and never
    given up on. ``clock`` is a monotonic clock in seconds.
    """

    def __init__(
        self,
        *,
        clock: Callable[[], float],
        random: Callable[[], float],
        backoff: Backoff = DEFAULT_BACKOFF,
        healthy_after: float = 10.0,
    ) -> None:
        self._policy = ProxyPolicy(
            backoff=backoff, healthy_after=healthy_after, require_exchange=False
        )
        self._clock = clock
        self._random = random
        self._started = clock()
        self._last = 0.0

    def _now(self) -> float:
        # Seconds since the start, never going back: the policy's clock.
        self._last = max(self._last, self._clock() - self._started)
        return self._last

    def delay(self) -> float:
        """Seconds to wait before the next attempt (0 for the first)."""
        ask_at = self._policy.ask_at()
        assert ask_at is not None  # no max_attempts: never exhausted
        return max(0.0, ask_at - self._now())

    def started(self) -> None:
        """An attempt starts now (after :meth:`delay`)."""
        ask_at = self._policy.ask_at()
        assert ask_at is not None
        # Never before ask_at, even if the wait woke a hair early.
        self._last = max(self._now(), ask_at)
        self._policy.ask_started(self._last)

    def subscribed(self) -> None:
        """The attempt subscribed."""
        self._policy.path_opened(self._now())

    def heard(self) -> None:
        """A message arrived on the subscription."""
        self._policy.notification_received()

    def ended(self) -> float:
        """The attempt or the connection is over; returns the delay before the next one."""
        outcome = self._policy.ask_ended(self._now(), self._random())
        assert isinstance(outcome, RetryScheduled)
        return outcome.delay


class RedisBrokerBase(Broker):
    """What the asyncio and the blocking Redis brokers share: options, core, connections.

    Feeds ``hub`` from the Redis ``channel`` at ``url`` and publishes
    through it. Until the broker has subscribed, and whenever it loses
    Redis, the hub is suspended: its open paths end with a reason naming
    this broker (its URL without the password, and the channel), and it
    takes no new subscription.

    ``hub_lock`` serialises the calls into the hub (the blocking server's
    ``lock``; an asyncio broker runs on its loop's thread and needs none).
    ``backoff``, ``random`` (uniform in ``[0, 1)``, default
    :func:`random.random`) and ``healthy_after`` pace reconnecting (see
    :class:`Reconnects`). ``connect_timeout`` bounds connecting and
    subscribing, ``publish_timeout`` one PUBLISH; after ``ping_interval``
    seconds with nothing on the subscription the broker sends a PING, and
    after as long again with still nothing the connection counts as lost
    (a Redis that hangs, or a peer gone without a word). ``redis_options``
    adds redis-py connection options (``password=``, ``ssl_ca_certs=``,
    ...), though not ``retry``, ``health_check_interval``, ``protocol`` or
    the socket timeouts, which the broker sets even over the URL's query.

    The options every broker has (``origin``, ``limits``, the outbox's and
    the envelopes' bounds, ``max_origins``: see
    :class:`~._core.BrokerSettings`) are given whole as ``settings``, or
    one by one as keywords. A bad option is a :class:`TypeError` (the
    wrong type) or a :class:`ValueError` (a wrong value), raised here.
    """

    #: redis-py's connection pool, TCP connection and ``Retry`` of the flavour.
    _pool_class: ClassVar[Any]
    _tcp_class: ClassVar[type]
    _retry_class: ClassVar[Any]
    #: Whether the subscriber waits for messages with no timeout (else it
    #: polls, and a message must arrive whole within ``connect_timeout``).
    _subscriber_waits: ClassVar[bool]

    def __init__(
        self,
        hub: Hub,
        url: str,
        channel: str = DEFAULT_CHANNEL,
        *,
        hub_lock: contextlib.AbstractContextManager[Any] | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        random: Callable[[], float] | None = None,
        healthy_after: float = 10.0,
        connect_timeout: float = DEFAULT_REDIS_CONNECT_TIMEOUT,
        publish_timeout: float = DEFAULT_PUBLISH_TIMEOUT,
        ping_interval: float = DEFAULT_PING_INTERVAL,
        redis_options: Mapping[str, Any] | None = None,
        settings: BrokerSettings | None = None,
        **options: Unpack[BrokerOptions],
    ) -> None:
        if not isinstance(channel, str):
            raise TypeError(f"channel must be a str, not {type(channel).__name__}")
        if not channel:
            raise ValueError("channel must not be empty")
        check_positive("connect_timeout", connect_timeout)
        check_positive("publish_timeout", publish_timeout)
        check_positive("ping_interval", ping_interval)
        checked = broker_settings(settings, options)
        self.channel = channel
        self._channel = channel.encode("utf-8")
        self._connect_timeout = connect_timeout
        self._ping_interval = ping_interval
        self._prepare()
        self._core = BrokerCore(
            hub,
            description=description(url, channel),
            settings=checked,
            hub_lock=hub_lock,
            on_ready=self._wake_sender,
        )
        self._reconnects = Reconnects(
            clock=time.monotonic,  # an asyncio loop's clock too
            random=random if random is not None else random_module.random,
            backoff=backoff,
            healthy_after=healthy_after,
        )
        name = f"diverge-notifications-{self._core.origin}"
        retry = self._retry_class(NoBackoff(), 0)
        makers = [
            connection_factory(
                self._pool_class,
                self._tcp_class,
                url,
                retry=retry,
                socket_timeout=timeout,
                connect_timeout=connect_timeout,
                client_name=f"{name}-{role}",
                extra=redis_options,
            )
            for role, timeout in (
                ("sub", None if self._subscriber_waits else connect_timeout),
                ("pub", publish_timeout),
            )
        ]
        self._subscriber, self._publisher = makers
        self._begin()

    # -- what a flavour adds -------------------------------------------------------

    def _prepare(self) -> None:
        """Make the flavour's own state, before anything else is made."""

    def _begin(self) -> None:
        """Everything is made: start, if the flavour starts at once."""

    def _wake_sender(self) -> None:
        """The outbox took a notification (called from :meth:`publish`)."""
        raise NotImplementedError
