"""The hub: publish a notification once, and every open path gets it.

An application publishes into a :class:`Hub` without knowing who is
reading; each open path holds a :class:`Subscriber`, a bounded queue the
path's writer drains. Nothing is replayed: a subscriber gets what is
published while it is subscribed, and a new subscription starts empty.

**Bounded queues.** A notification that arrives while a subscriber's queue
is full is not queued for it. The loss is not reported on the wire (the
Diverge 2.3.0 specification page for the container proxy's notification
response: "the sequence does not report the loss"); it is counted in
:attr:`Subscriber.dropped`, exactly.

**Filters** (after the MCP server library's notifications page, named after
MCP 2026-07-28's ``SubscriptionFilter``).
A subscriber with an :class:`Interest` narrows four topics, routed by the
notification's ``method``:

=======================================  =============================================
published method                         reaches a subscriber whose interest has
=======================================  =============================================
``notifications/resources/updated``      its ``params.uri`` in ``resource_subscriptions``
``notifications/resources/list_changed`` ``resources_list_changed``
``notifications/tools/list_changed``     ``tools_list_changed``
``notifications/prompts/list_changed``   ``prompts_list_changed``
``notifications/message``                a ``log_level`` at or below the message's level
                                         (none when ``log_level`` is ``None``)
=======================================  =============================================

Every other method (progress, cancelled, elicitation, tasks, custom ones)
reaches every subscriber: kind 4 relays the whole union, deliberately (the
Diverge 2.3.0 specification page ``/mcp/notifications/{channel}``), and a
filter narrows only the topics it names. A subscriber with no interest at
all (``None``) gets everything.

Publishing costs O(subscribers it reaches): subscribers are indexed by URI,
by list-changed flag and by log level, so a ``resources/updated`` for one
URI does not look at the subscribers of other URIs.

**Suspension.** A hub fed from somewhere that can be lost (a broker between
replicas, see ``docs/cluster.md``) can be :meth:`Hub.suspend`-ed: every open
subscriber is ended with a reason (:attr:`Subscriber.end_reason`; its
writer drains what is queued and ends the path with that reason) and
:meth:`Hub.subscribe` raises :class:`HubSuspended` until :meth:`Hub.resume`.
A hub nobody suspends behaves exactly as if the feature did not exist.

The hub is not thread-safe by itself (sans-IO cannot lock): an adapter that
publishes from several threads serialises hub calls with its own lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Final

import attrs

from .mcp import LogLevel, Notification

__all__ = [
    "DEFAULT_QUEUE_SIZE",
    "LIST_CHANGED_METHODS",
    "LOG_METHOD",
    "RESOURCE_UPDATED_METHOD",
    "Hub",
    "HubSuspended",
    "Interest",
    "Subscriber",
    "as_notification",
]

#: Queue size of a subscriber unless the hub or the subscription says otherwise.
DEFAULT_QUEUE_SIZE: Final = 1024

RESOURCE_UPDATED_METHOD: Final = "notifications/resources/updated"
LOG_METHOD: Final = "notifications/message"
#: The list-changed methods and the :class:`Interest` flag each one needs.
LIST_CHANGED_METHODS: Final = {
    "notifications/resources/list_changed": "resources_list_changed",
    "notifications/tools/list_changed": "tools_list_changed",
    "notifications/prompts/list_changed": "prompts_list_changed",
}


def _uri_set(value: Iterable[str]) -> frozenset[str]:
    if isinstance(value, (str, bytes)):
        raise TypeError("resource_subscriptions is a collection of URIs, not one string")
    uris = frozenset(value)
    for uri in uris:
        if not isinstance(uri, str):
            raise TypeError(f"a resource URI is a str, not {type(uri).__name__}")
    return uris


def _log_level(value: LogLevel | str | None) -> LogLevel | None:
    if value is None or isinstance(value, LogLevel):
        return value
    level = LogLevel.from_wire(value)
    if level is None:
        raise ValueError(f"not a log level: {value!r} (debug, info, notice, warning, ...)")
    return level


@attrs.frozen(kw_only=True)
class Interest:
    """What a subscriber wants to hear of the topics a filter can narrow.

    ``resource_subscriptions``: the URIs whose ``resources/updated`` it
    wants; the three ``*_list_changed`` flags; ``log_level``: the least
    severe log message it wants (a :class:`LogLevel` or its wire name), or
    ``None`` for no log messages. Notifications of other methods are not
    narrowed by an interest (see the module's documentation).
    """

    resource_subscriptions: frozenset[str] = attrs.field(default=frozenset(), converter=_uri_set)
    resources_list_changed: bool = False
    tools_list_changed: bool = False
    prompts_list_changed: bool = False
    log_level: LogLevel | None = attrs.field(default=None, converter=_log_level)

    def wants(self, notification: Notification) -> bool:
        """True if a subscriber with this interest receives ``notification``.

        The hub does not call this (it uses its indexes); it states the rule
        in one place, for readers and tests.
        """
        method = notification.method
        params = notification.params or {}
        if method == RESOURCE_UPDATED_METHOD:
            uri = params.get("uri")
            return isinstance(uri, str) and uri in self.resource_subscriptions
        flag = LIST_CHANGED_METHODS.get(method)
        if flag is not None:
            wanted: bool = getattr(self, flag)
            return wanted
        if method == LOG_METHOD:
            level = LogLevel.from_wire(params.get("level"))
            return level is not None and self.log_level is not None and level >= self.log_level
        return True


class HubSuspended(Exception):
    """:meth:`Hub.subscribe` was called while the hub is suspended.

    ``reason`` is the reason given to :meth:`Hub.suspend`. A server answers
    the ask as not served for now (``503`` with ``Retry-After``) instead of
    opening a path that would hear nothing.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"the hub is suspended: {reason}")
        self.reason = reason


class Subscriber:
    """One subscription: a bounded queue of notifications, in publishing order.

    Made by :meth:`Hub.subscribe`. The path's writer drains it with
    :meth:`take`; :meth:`close` unsubscribes and empties it.
    """

    __slots__ = (
        "_dropped",
        "_end_reason",
        "_hub",
        "_interest",
        "_on_ready",
        "_queue",
        "_queue_size",
    )

    def __init__(
        self,
        hub: Hub,
        interest: Interest | None,
        queue_size: int,
        on_ready: Callable[[], None] | None,
    ) -> None:
        self._hub: Hub | None = hub
        self._interest = interest
        self._queue_size = queue_size
        self._on_ready = on_ready
        self._queue: deque[Notification] = deque()
        self._dropped = 0
        self._end_reason: str | None = None

    @property
    def interest(self) -> Interest | None:
        """The filter, or ``None`` for everything."""
        return self._interest

    @property
    def queue_size(self) -> int:
        """How many notifications the queue holds at most."""
        return self._queue_size

    @property
    def dropped(self) -> int:
        """How many notifications were not queued because the queue was full."""
        return self._dropped

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (or the hub ended the subscription)."""
        return self._hub is None

    @property
    def end_reason(self) -> str | None:
        """Why the subscription was ended from outside, or ``None``.

        Set by ``close(reason=...)`` and by :meth:`Hub.suspend`. A writer that
        finds it set, once :meth:`take` returns nothing more, ends its path
        with this reason (the server's error message) instead of cleanly.
        """
        return self._end_reason

    def __len__(self) -> int:
        return len(self._queue)

    def take(self, max_items: int | None = None) -> list[Notification]:
        """Remove and return queued notifications, oldest first (at most ``max_items``)."""
        queue = self._queue
        if max_items is not None and max_items < 0:
            raise ValueError("max_items must not be negative")
        if max_items is None or max_items >= len(queue):
            items = list(queue)
            queue.clear()
            return items
        return [queue.popleft() for _ in range(max_items)]

    def close(self, *, reason: str | None = None) -> None:
        """Unsubscribe. Closing twice is harmless.

        Without ``reason`` (the path's writer is done with it) whatever is
        queued is dropped. With ``reason`` the subscription is ended from
        outside: nothing more is queued, what is queued stays for the writer
        to :meth:`take`, :attr:`end_reason` is set, and ``on_ready`` is called
        once, so that a writer waiting for work wakes up, drains the queue and
        ends the path with the reason. A subscriber already closed keeps the
        reason it had (if any).
        """
        if reason is None:
            self._detach()
            self._queue.clear()
            return
        wake = self._end(reason)
        if wake is not None:
            wake()

    def _detach(self) -> bool:
        """Leave the hub; True if this call did it."""
        hub = self._hub
        if hub is None:
            return False
        self._hub = None
        hub._remove(self)
        return True

    def _end(self, reason: str) -> Callable[[], None] | None:
        """End from outside with ``reason``; the ``on_ready`` to call, if any."""
        _check_reason(reason)
        if not self._detach():
            return None
        self._end_reason = reason
        return self._on_ready

    def __repr__(self) -> str:
        state = "closed" if self._hub is None else f"{len(self._queue)}/{self._queue_size} queued"
        if self._end_reason is not None:
            state = f"ended ({self._end_reason}), {len(self._queue)} queued"
        return f"<Subscriber {state}, {self._dropped} dropped, interest={self._interest!r}>"


# Ordered sets (dicts with None values): iteration order is subscription
# order, so fan-out is deterministic.
_Group = dict[Subscriber, None]


def as_notification(item: object) -> Notification | None:
    """``item`` as a :class:`Notification`, or ``None`` if it is not one.

    Accepts a :class:`Notification`, a mapping, or JSON as ``bytes`` /
    ``str``. Never raises for what it is given.
    """
    if isinstance(item, Notification):
        return item
    try:
        if isinstance(item, (bytes, bytearray, memoryview)):
            return Notification.from_bytes(item)
        if isinstance(item, str):
            return Notification.from_json(item)
        if isinstance(item, Mapping):
            return Notification.from_json(item)
    except (ValueError, TypeError, RecursionError):  # FrameError is a ValueError
        return None
    return None


class Hub:
    """Fans published notifications out to subscribers' bounded queues.

    ``queue_size`` is the default size of a subscriber's queue.
    """

    def __init__(self, *, queue_size: int = DEFAULT_QUEUE_SIZE) -> None:
        if queue_size < 1:
            raise ValueError("queue_size must be at least 1")
        self._queue_size = queue_size
        self._all: _Group = {}  # every open subscriber
        self._everything: _Group = {}  # subscribers without an interest
        self._by_uri: dict[str, _Group] = {}
        self._list_changed: dict[str, _Group] = {method: {} for method in LIST_CHANGED_METHODS}
        self._by_level: list[_Group] = [{} for _ in LogLevel]
        self._suspended: str | None = None

    @property
    def queue_size(self) -> int:
        """The default queue size of a new subscriber."""
        return self._queue_size

    @property
    def subscribers(self) -> int:
        """How many subscribers are open."""
        return len(self._all)

    @property
    def suspended(self) -> str | None:
        """The reason given to :meth:`suspend` while suspended, else ``None``."""
        return self._suspended

    def suspend(self, reason: str) -> int:
        """End every open subscriber with ``reason`` and refuse new ones until :meth:`resume`.

        Each open subscriber is closed as by ``close(reason=reason)``: what
        it has queued stays for its writer, and its ``on_ready`` is called
        (after all of them are closed; if one raises, the others still run
        and the first exception is re-raised). While suspended,
        :meth:`subscribe` raises :class:`HubSuspended`. Suspending a
        suspended hub replaces the reason. Returns how many subscribers were
        ended.
        """
        _check_reason(reason)
        self._suspended = reason
        ended = list(self._all)
        wakes = [subscriber._end(reason) for subscriber in ended]
        _call_all([wake for wake in wakes if wake is not None])
        return len(ended)

    def resume(self) -> None:
        """Accept subscriptions again after :meth:`suspend` (harmless if not suspended)."""
        self._suspended = None

    def subscribe(
        self,
        interest: Interest | None = None,
        *,
        queue_size: int | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> Subscriber:
        """A new subscriber, starting empty.

        ``interest`` narrows what it gets (``None``: everything). ``on_ready``
        is called synchronously from :meth:`publish` whenever the queue goes
        from empty to non-empty: the moment a writer waiting for work should
        wake up; and once when the subscription is ended from outside
        (``close(reason=...)``, :meth:`suspend`).

        Raises :class:`HubSuspended` while the hub is suspended (see
        :meth:`suspend`).
        """
        if self._suspended is not None:
            raise HubSuspended(self._suspended)
        size = self._queue_size if queue_size is None else queue_size
        if size < 1:
            raise ValueError("queue_size must be at least 1")
        if interest is not None and not isinstance(interest, Interest):
            raise TypeError(f"interest must be an Interest or None, not {type(interest).__name__}")
        subscriber = Subscriber(self, interest, size, on_ready)
        self._all[subscriber] = None
        for group in self._groups_of(interest):
            group[subscriber] = None
        return subscriber

    def _groups_of(self, interest: Interest | None) -> list[_Group]:
        """The index groups a subscriber with ``interest`` belongs to (URI groups created)."""
        if interest is None:
            return [self._everything]
        by_uri = self._by_uri
        groups = [by_uri.setdefault(uri, {}) for uri in interest.resource_subscriptions]
        for method, flag in LIST_CHANGED_METHODS.items():
            if getattr(interest, flag):
                groups.append(self._list_changed[method])
        if interest.log_level is not None:
            groups.append(self._by_level[interest.log_level])
        return groups

    def _remove(self, subscriber: Subscriber) -> None:
        self._all.pop(subscriber, None)
        interest = subscriber.interest
        for group in self._groups_of(interest):
            group.pop(subscriber, None)
        if interest is not None:
            # Empty URI groups go, so the index does not grow with URIs
            # nobody is subscribed to any more.
            for uri in interest.resource_subscriptions:
                if not self._by_uri[uri]:
                    del self._by_uri[uri]

    def _route(self, notification: Notification) -> tuple[_Group, ...]:
        """The groups of subscribers ``notification`` reaches; they never overlap."""
        method = notification.method
        if method == RESOURCE_UPDATED_METHOD:
            params = notification.params
            uri = params.get("uri") if params is not None else None
            group = self._by_uri.get(uri) if isinstance(uri, str) else None
            return (self._everything, group) if group else (self._everything,)
        list_group = self._list_changed.get(method)
        if list_group is not None:
            return (self._everything, list_group)
        if method == LOG_METHOD:
            params = notification.params
            level = LogLevel.from_wire(params.get("level")) if params is not None else None
            if level is None:
                return (self._everything,)
            return (self._everything, *self._by_level[: level + 1])
        return (self._all,)

    def publish(self, item: object) -> int:
        """Queue ``item`` for every subscriber it reaches; returns how many queued it.

        ``item`` is a :class:`Notification`, a mapping, or JSON bytes/str.
        Anything that is not a notification (another type, bad JSON, not an
        object, no string ``method``) is ignored and 0 returned, so the hub
        can share a bus with other traffic. A subscriber whose queue is full
        does not get it; its :attr:`~Subscriber.dropped` count goes up.

        ``on_ready`` callbacks run after every queue was filled; if one
        raises, the others still run and the first exception is re-raised.
        """
        notification = as_notification(item)
        if notification is None:
            return 0
        queued = 0
        ready: list[Callable[[], None]] | None = None
        for group in self._route(notification):
            for subscriber in group:
                queue = subscriber._queue
                if len(queue) >= subscriber._queue_size:
                    subscriber._dropped += 1
                    continue
                queue.append(notification)
                queued += 1
                if len(queue) == 1 and subscriber._on_ready is not None:
                    if ready is None:
                        ready = []
                    ready.append(subscriber._on_ready)
        if ready is not None:
            _call_all(ready)
        return queued


def _check_reason(reason: object) -> None:
    if not isinstance(reason, str):
        raise TypeError(f"a reason is a str, not {type(reason).__name__}")
    if not reason:
        raise ValueError("a reason must not be empty")


def _call_all(callbacks: list[Callable[[], None]]) -> None:
    first: BaseException | None = None
    for callback in callbacks:
        try:
            callback()
        except Exception as error:
            if first is None:
                first = error
    if first is not None:
        raise first
