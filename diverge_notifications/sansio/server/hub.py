"""The hub: publish a notification once, and every open path gets it.

An application publishes into a :class:`Hub` without knowing who is
reading; each open path holds a :class:`Subscriber`, a bounded queue the
path's writer drains. Nothing is replayed: a subscriber gets what is
published while it is subscribed, and a new subscription starts empty.

**Bounded queues.** A queue is bounded in notifications (``queue_size``)
and in bytes of frames (``queue_bytes``); an empty queue takes any one
frame. What arrives while a queue is full is not queued for it. The loss is
not reported on the wire (the Diverge 2.3.0 specification page for the
container proxy's notification response: "the sequence does not report the
loss"); it is counted in :attr:`Subscriber.dropped`, exactly, with what is
still queued when a subscriber closes.

**One frame per notification.** :meth:`Hub.publish` builds a notification's
frame (length, tag byte, JSON) once; every queue it reaches holds that same
``bytes``, which writers take with :meth:`Subscriber.take_frames`. One larger
than ``max_frame_size`` is refused there (:class:`NotificationTooLarge`).

**Publishers that can wait** ask :meth:`Hub.room_for` and, on ``False``,
register with :meth:`Hub.when_room`; :meth:`Hub.publish` itself never waits.
:meth:`Hub.counts` gives totals that outlive subscribers.

**Filters** (after the MCP server library's notifications page, named after
MCP 2026-07-28's ``SubscriptionFilter``).
A subscriber with an :class:`Interest` narrows four topics, routed by the
notification's ``method``:

=======================================  =============================================
published method                         reaches a subscriber whose interest has
=======================================  =============================================
``notifications/resources/updated``      its ``params.uri`` in ``resource_subscriptions``,
                                         or ``all_resources``
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

**Audiences.** A subscriber may belong to an *audience* (``subscribe(...,
audience=...)``: a server that accepts several tokens gives each path the
audience of the token it was asked with, :func:`~..wire.http.audience_of`,
a short digest, never the token). ``publish(item, audience=...)`` reaches
only the subscribers of that audience, and those that belong to none
(``audience=None``, which hear every audience, as a subscriber without an
interest hears every topic); the filters apply as always. A publish
without an audience reaches everyone, as if audiences did not exist, at
the same cost. A publish to an audience costs O(subscribers reached) for
the notifications no filter narrows (progress, cancellations: the ones a
relay addresses), and O(the audience's subscribers) for the others.

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

from collections.abc import Callable, Hashable, Mapping
from typing import NoReturn

from ..errors import HubSuspended, NotificationTooLarge, check_positive_int
from ..mcp.model import LogLevel, Notification
from ..wire.framing import DEFAULT_MAX_FRAME_SIZE, PREFIX_SIZE
from ..wire.messages import NOTIFICATION_TAG, pack_frame_head
from .counts import HubCounts, HubTotals
from .filters import LIST_CHANGED_METHODS, LOG_METHOD, RESOURCE_UPDATED_METHOD, Interest
from .subscriber import DEFAULT_QUEUE_BYTES, DEFAULT_QUEUE_SIZE, Subscriber, check_reason

__all__ = [
    "DEFAULT_QUEUE_BYTES",
    "DEFAULT_QUEUE_SIZE",
    "LIST_CHANGED_METHODS",
    "LOG_METHOD",
    "RESOURCE_UPDATED_METHOD",
    "Hub",
    "HubCounts",
    "HubSuspended",
    "Interest",
    "NotificationTooLarge",
    "Subscriber",
    "as_notification",
    "is_request",
]


# Ordered sets (dicts with None values): iteration order is subscription
# order, so fan-out is deterministic.
_Group = dict[Subscriber, None]


def as_notification(item: object) -> Notification | None:
    """``item`` as a :class:`Notification`, or ``None`` if it is not one.

    Accepts a :class:`Notification`, a mapping, or JSON as ``bytes`` /
    ``str``. A message with an ``"id"`` member is a JSON-RPC request (or
    response), not a notification: ``None``. Never raises for what it is
    given.
    """
    notification: Notification | None = None
    try:
        if isinstance(item, Notification):
            notification = item
        elif isinstance(item, (bytes, bytearray, memoryview)):
            notification = Notification.from_bytes(item)
        elif isinstance(item, (str, Mapping)):
            notification = Notification.from_json(item)
    except (ValueError, TypeError, RecursionError):  # FrameError is a ValueError
        return None
    if notification is None or is_request(notification):
        return None
    return notification


def is_request(notification: Notification) -> bool:
    """True if ``notification`` has an ``"id"``: a JSON-RPC request, never relayed as one."""
    return "id" in notification.members


class Hub:
    """Fans published notifications out to subscribers' bounded queues.

    ``queue_size`` (notifications) and ``queue_bytes`` (bytes of frames) are
    the default bounds of a subscriber's queue; ``max_frame_size`` is the
    largest message (tag byte and JSON) :meth:`publish` accepts, the
    proxy's default frame limit unless said otherwise.
    """

    def __init__(
        self,
        *,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
    ) -> None:
        self._queue_size = check_positive_int("queue_size", queue_size)
        self._queue_bytes = check_positive_int("queue_bytes", queue_bytes)
        self._max_frame_size = check_positive_int("max_frame_size", max_frame_size)
        self._totals = HubTotals()
        self._room_waiters: list[Callable[[], None]] = []
        self._slow_at: float | None = None
        self._suspended: str | None = None
        # Who holds the hub suspended, and why (the newest last): suspended while any does.
        self._holds: dict[Hashable, str] = {}
        self._all: _Group = {}  # every open subscriber
        self._everything: _Group = {}  # subscribers without an interest
        self._by_uri: dict[str, _Group] = {}
        self._all_resources: _Group = {}  # subscribers with an interest in every URI
        self._list_changed: dict[str, _Group] = {method: {} for method in LIST_CHANGED_METHODS}
        self._by_level: list[_Group] = [{} for _ in LogLevel]
        self._unscoped: _Group = {}  # subscribers of no audience: they hear every one
        self._by_audience: dict[str, _Group] = {}

    @property
    def queue_size(self) -> int:
        """The default queue size of a new subscriber."""
        return self._queue_size

    @property
    def queue_bytes(self) -> int:
        """The default byte bound of a new subscriber's queue."""
        return self._queue_bytes

    @property
    def max_frame_size(self) -> int:
        """The largest message (tag byte and JSON) :meth:`publish` accepts."""
        return self._max_frame_size

    @property
    def subscribers(self) -> int:
        """How many subscribers are open."""
        return len(self._all)

    @property
    def suspended(self) -> str | None:
        """The reason given to :meth:`suspend` while suspended, else ``None``."""
        return self._suspended

    def suspend(self, reason: str, *, holder: Hashable = None) -> int:
        """End every open subscriber with ``reason`` and refuse new ones until :meth:`resume`.

        Each open subscriber is closed as by ``close(reason=reason)``: what
        it has queued stays for its writer, and its ``on_ready`` is called
        (after all of them are closed; if one raises, the others still run
        and the first exception is re-raised). While suspended,
        :meth:`subscribe` raises :class:`HubSuspended`. Suspending a
        suspended hub replaces the reason. Returns how many subscribers were
        ended.

        Two sources that can each be lost (a broker, and the MCP servers of
        a relay) suspend the hub each as its own ``holder``: it serves again
        once every holder resumed it, and while suspended its reason is the
        newest of those still held.
        """
        check_reason(reason)
        self._holds.pop(holder, None)
        self._holds[holder] = reason
        self._suspended = reason
        ended = list(self._all)
        wakes = [subscriber._end(reason) for subscriber in ended]
        _call_all([wake for wake in wakes if wake is not None])
        return len(ended)

    def resume(self, *, holder: Hashable = None) -> None:
        """Accept subscriptions again after :meth:`suspend` (harmless if not suspended).

        Only ``holder``'s suspension ends: while another holder's stands,
        the hub stays suspended with that one's reason.
        """
        self._holds.pop(holder, None)
        self._suspended = next(reversed(self._holds.values()), None)

    def counts(self) -> HubCounts:
        """The hub's counts now (a snapshot; O(open subscribers) for ``queued``)."""
        totals = self._totals
        return HubCounts(
            subscribers=len(self._all),
            subscribed=totals.subscribed,
            published=totals.published,
            ignored=totals.ignored,
            refused=totals.refused,
            sent=totals.sent,
            dropped=totals.dropped,
            queued=sum(len(subscriber._queue) for subscriber in self._all),
        )

    def audiences(self) -> dict[str, int]:
        """How many open subscribers each audience has (those of none are not counted)."""
        return {audience: len(group) for audience, group in self._by_audience.items()}

    def room_for(
        self,
        item: object,
        *,
        audience: str | None = None,
        now: float | None = None,
        slow_after: float | None = None,
    ) -> bool:
        """True if :meth:`publish` of ``item`` now would queue it for every subscriber it reaches.

        With ``now`` (the clock its writers tell :meth:`Subscriber.moved`)
        and ``slow_after``, a full queue whose path has not moved for
        ``slow_after`` seconds (its writer took nothing, and no call found
        the queue empty) is not waited for: what does not fit it is dropped
        and counted, as for any full queue, so that one listener that does
        not read holds up no publisher for longer than ``slow_after``.

        Also true for what :meth:`publish` does not queue anywhere whatever
        the queues hold (an item that is not a notification, or one too
        large), so that a publisher waiting for room never waits for those.
        Each subscriber found without room is remembered: after a ``False``,
        register with :meth:`when_room` (with no other hub call in between)
        to learn when one of them takes notifications out or closes.
        ``audience`` is the one :meth:`publish` would be given.
        """
        notification = as_notification(item)
        if notification is None:
            return True
        payload = len(notification.to_bytes()) + 1
        if payload > self._max_frame_size:
            return True
        size = payload + PREFIX_SIZE
        room = True
        self._slow_at = None
        groups = (
            self._route(notification)
            if audience is None
            else self._route_to(notification, audience)
        )
        for group in groups:
            for subscriber in group:
                queue = subscriber._queue
                if not queue:
                    if now is not None:
                        subscriber._moved_at = now  # caught up: nothing waits for it
                elif (
                    len(queue) >= subscriber._queue_size
                    or subscriber._bytes + size > subscriber._queue_bytes
                ):
                    if now is not None and slow_after is not None:
                        moved_at = subscriber._moved_at
                        if moved_at is not None:
                            if now - moved_at >= slow_after:
                                continue  # not moving: not waited for
                            slow_at = moved_at + slow_after
                            if self._slow_at is None or slow_at < self._slow_at:
                                self._slow_at = slow_at
                    subscriber._awaited = True
                    room = False
        return room

    @property
    def slow_at(self) -> float | None:
        """After :meth:`room_for` said ``False`` (told the time): when to ask again at the latest.

        The earliest time at which one of the full queues it waits for has
        not moved for ``slow_after`` seconds, and stops being waited for
        (``None``: no such queue, or ``room_for`` was not told the time).
        """
        return self._slow_at

    def when_room(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once, when a queue :meth:`room_for` found full takes or closes.

        It is called from inside :meth:`Subscriber.take_frames`,
        :meth:`Subscriber.take` or :meth:`Subscriber.close`, after the queue
        changed: it should only wake the publisher, which then asks
        :meth:`room_for` again (the room may be taken by then, or another
        queue may still be full). If a callback raises, the others still run,
        the take that ran them is undone, and the first exception propagates.
        """
        self._room_waiters.append(callback)

    def _room_made(self) -> None:
        waiters = self._room_waiters
        if waiters:
            self._room_waiters = []
            _call_all(waiters)

    def subscribe(
        self,
        interest: Interest | None = None,
        *,
        queue_size: int | None = None,
        on_ready: Callable[[], None] | None = None,
        queue_bytes: int | None = None,
        audience: str | None = None,
    ) -> Subscriber:
        """A new subscriber, starting empty.

        ``interest`` narrows what it gets (``None``: everything). ``on_ready``
        is called synchronously from :meth:`publish` whenever the queue goes
        from empty to non-empty: the moment a writer waiting for work should
        wake up; and once when the subscription is ended from outside
        (``close(reason=...)``, :meth:`suspend`). ``queue_size`` and
        ``queue_bytes`` bound its queue (the hub's defaults unless given).
        ``audience`` is the audience it belongs to: it gets what is published
        to everyone and to that audience (``None``: to any audience).

        Raises :class:`HubSuspended` while the hub is suspended (see
        :meth:`suspend`).
        """
        if self._suspended is not None:
            raise HubSuspended(self._suspended)
        size = self._queue_size if queue_size is None else queue_size
        if size < 1:
            raise ValueError("queue_size must be at least 1")
        bytes_bound = self._queue_bytes if queue_bytes is None else queue_bytes
        if bytes_bound < 1:
            raise ValueError("queue_bytes must be at least 1")
        if interest is not None and not isinstance(interest, Interest):
            raise TypeError(f"interest must be an Interest or None, not {type(interest).__name__}")
        if audience is not None:
            _check_audience(audience)
        subscriber = Subscriber(self, interest, size, on_ready, bytes_bound, audience)
        self._totals.subscribed += 1
        self._all[subscriber] = None
        for group in self._groups_of(interest):
            group[subscriber] = None
        if audience is None:
            self._unscoped[subscriber] = None
        else:
            self._by_audience.setdefault(audience, {})[subscriber] = None
        return subscriber

    def _groups_of(self, interest: Interest | None) -> list[_Group]:
        """The index groups a subscriber with ``interest`` belongs to (URI groups created)."""
        if interest is None:
            return [self._everything]
        if interest.all_resources:
            groups = [self._all_resources]  # in no URI's group: the groups never overlap
        else:
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
        if interest is not None and not interest.all_resources:
            # Empty URI groups go, so the index does not grow with URIs
            # nobody is subscribed to any more.
            for uri in interest.resource_subscriptions:
                if not self._by_uri[uri]:
                    del self._by_uri[uri]
        audience = subscriber.audience
        if audience is None:
            self._unscoped.pop(subscriber, None)
        else:
            members = self._by_audience[audience]
            members.pop(subscriber, None)
            if not members:
                del self._by_audience[audience]
        if subscriber._awaited:
            # A publisher waits for this queue: gone, it holds nobody up.
            subscriber._awaited = False
            self._room_made()

    def _route(self, notification: Notification) -> tuple[_Group, ...]:
        """The groups of subscribers ``notification`` reaches; they never overlap."""
        method = notification.method
        if method == RESOURCE_UPDATED_METHOD:
            params = notification.params
            uri = params.get("uri") if params is not None else None
            group = self._by_uri.get(uri) if isinstance(uri, str) else None
            every = self._all_resources
            if every:
                return (self._everything, every, group) if group else (self._everything, every)
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

    def _route_to(self, notification: Notification, audience: str) -> tuple[_Group, ...]:
        """The groups ``notification`` published to ``audience`` reaches; they never overlap."""
        _check_audience(audience)
        members = self._by_audience.get(audience)
        routed = self._route(notification)
        if routed[0] is self._all:
            # No filter narrows it: the audience and those of none, as they are.
            return (self._unscoped, members) if members else (self._unscoped,)
        # Narrowed by the filters as well: each member that the topic's groups hold.
        return tuple(
            {subscriber: None for subscriber in group if any(subscriber in g for g in routed)}
            for group in ((self._unscoped, members) if members else (self._unscoped,))
        )

    def publish(self, item: object, *, audience: str | None = None) -> int:
        """Queue ``item`` for every subscriber it reaches; returns how many queued it.

        ``item`` is a :class:`Notification`, a mapping, or JSON bytes/str.
        Anything that is not a notification (another type, bad JSON, not an
        object, no string ``method``, or an ``"id"``: a JSON-RPC request or
        response) is ignored, counted in ``counts().ignored``, and 0
        returned, so the hub can share a bus with other traffic. A subscriber whose queue is full
        does not get it; its :attr:`~Subscriber.dropped` count goes up.

        A notification whose message (tag byte and JSON) is larger than
        :attr:`max_frame_size` is queued nowhere: :class:`NotificationTooLarge`
        is raised, and the refusal counted. The notification's frame is built
        once, here, and shared by every queue it reaches.

        ``audience`` narrows it to the subscribers of that audience and those
        of none (see the module's docstring); ``None`` (the default): everyone.

        ``on_ready`` callbacks run after every queue was filled; if one
        raises, the others still run and the first exception is re-raised.
        """
        notification = as_notification(item)
        totals = self._totals
        if notification is None:
            totals.ignored += 1
            return 0
        json = notification.to_bytes()
        payload = len(json) + 1
        groups = (
            self._route(notification)
            if audience is None
            else self._route_to(notification, audience)
        )
        if payload > self._max_frame_size:
            self._refuse(groups, payload)
        frame = pack_frame_head(payload, NOTIFICATION_TAG) + json
        size = len(frame)
        entry = (frame, notification, audience)
        totals.published += 1
        reached = 0
        dropped = 0
        ready: list[Callable[[], None]] | None = None
        for group in groups:
            reached += len(group)
            for subscriber in group:
                queue = subscriber._queue
                if not queue:
                    # An empty queue takes any one frame: the byte bound
                    # never keeps a notification from a path that has room.
                    queue.append(entry)
                    subscriber._bytes = size
                    if subscriber._on_ready is not None:
                        if ready is None:
                            ready = []
                        ready.append(subscriber._on_ready)
                elif (
                    len(queue) >= subscriber._queue_size
                    or subscriber._bytes + size > subscriber._queue_bytes
                ):
                    subscriber._dropped += 1
                    dropped += 1
                else:
                    queue.append(entry)
                    subscriber._bytes += size
        if dropped:
            totals.dropped += dropped
        if ready is not None:
            _call_all(ready)
        return reached - dropped

    def _refuse(self, groups: tuple[_Group, ...], payload: int) -> NoReturn:
        """Count a notification too large for a frame (``groups`` it reaches), then raise."""
        self._totals.refused += 1
        for group in groups:
            for subscriber in group:
                subscriber._refused += 1
        raise NotificationTooLarge(payload, self._max_frame_size)


def _check_audience(audience: object) -> None:
    """Raise unless ``audience`` is a non-empty str (see :func:`~..wire.http.audience_of`)."""
    if not isinstance(audience, str):
        raise TypeError(f"an audience is a str or None, not {type(audience).__name__}")
    if not audience:
        raise ValueError("an audience must not be empty")


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
