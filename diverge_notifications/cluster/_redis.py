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

and, when one fails, drops it and makes new ones after its own backoff.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

try:
    import redis
    from redis.exceptions import RedisError
except ImportError as error:  # pragma: no cover - the extra is installed in development
    raise ImportError(
        "diverge_notifications.cluster's Redis brokers need the 'redis' extra: "
        "pip install 'diverge-notifications[redis]'",
        name="redis",
    ) from error

from ._core import redact_url

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_PUBLISH_TIMEOUT",
    "FAILURES",
    "RedisError",
    "check_subscribed",
    "connection_factory",
    "connection_options",
    "describe",
    "description",
    "message_data",
]

#: Seconds to connect and subscribe, by default.
DEFAULT_CONNECT_TIMEOUT: Final = 5.0
#: Seconds a PUBLISH may take before the connection counts as lost, by default.
DEFAULT_PUBLISH_TIMEOUT: Final = 5.0

#: What a lost or unusable connection raises.
FAILURES: Final = (RedisError, OSError, TimeoutError, EOFError)

_FORCED: Final = ("retry", "health_check_interval", "protocol")


def connection_options(
    *,
    socket_timeout: float | None,
    connect_timeout: float,
    client_name: str,
    extra: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The keyword arguments of a connection, but ``retry``: the flavour adds its own.

    ``extra`` adds redis-py connection options (``password=``,
    ``ssl_ca_certs=``, ...); it may not set what turns reconnecting off.
    """
    options: dict[str, Any] = dict(extra or {})
    forced = sorted(set(options) & set(_FORCED))
    if forced:
        raise ValueError(f"redis_options may not set {', '.join(forced)}: the broker owns them")
    options.setdefault("client_name", client_name)
    options.update(
        health_check_interval=0,
        protocol=2,
        socket_timeout=socket_timeout,
        socket_connect_timeout=connect_timeout,
        socket_keepalive=True,
    )
    return options


def connection_factory(pool_class: Any, url: str, **options: Any) -> Callable[[], Any]:
    """A maker of unconnected connections to ``url``, from ``pool_class.from_url``.

    The pool is used only to turn the URL into connection options; each
    connection is made by hand, used until it fails, and never made again.
    redis-py's connections are typed loosely, hence ``Any``.
    """
    factory: Callable[[], Any] = pool_class.from_url(url, **options).make_connection
    return factory


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
