"""One subscription to a :class:`~.hub.Hub`: the bounded queue a path's writer drains.

A :class:`Subscriber` is made by :meth:`Hub.subscribe <.hub.Hub.subscribe>`
and holds, in publishing order, what was published to it: each entry is a
notification's frame (built once by the hub, shared by every queue it
reaches) and the notification. Its queue is bounded in notifications
(:data:`DEFAULT_QUEUE_SIZE`) and in bytes of frames
(:data:`DEFAULT_QUEUE_BYTES`); the hub fills it, the writer takes from it
(:meth:`Subscriber.take_frames`), and its counts go into the hub's totals
directly, so that they outlive it. See :mod:`.hub` for the rules.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Final, Protocol

from ..mcp.model import Notification
from .filters import Interest

__all__ = ["DEFAULT_QUEUE_BYTES", "DEFAULT_QUEUE_SIZE", "Subscriber", "check_reason"]

#: Queue size of a subscriber unless the hub or the subscription says otherwise.
DEFAULT_QUEUE_SIZE: Final = 1024
#: Bytes of frames a subscriber's queue holds at most, unless the hub or the
#: subscription says otherwise (an empty queue takes one frame of any size).
DEFAULT_QUEUE_BYTES: Final = 1024 * 1024

#: One queued notification: its frame, the notification and the audience it
#: was published to (``None``: everyone), shared by every queue it reaches.
Entry = tuple[bytes, Notification, str | None]


class _Totals(Protocol):
    """The hub's running counts a subscriber counts into (:class:`~.counts.HubTotals`)."""

    sent: int
    dropped: int


class _Owner(Protocol):
    """What a subscriber needs of its :class:`~.hub.Hub` (so that neither imports the other)."""

    @property
    def _totals(self) -> _Totals: ...

    def _remove(self, subscriber: Subscriber) -> None: ...

    def _room_made(self) -> None: ...


def check_reason(reason: object) -> None:
    """Raise unless ``reason`` (why a subscription is ended from outside) is a non-empty str."""
    if not isinstance(reason, str):
        raise TypeError(f"a reason is a str, not {type(reason).__name__}")
    if not reason:
        raise ValueError("a reason must not be empty")


class Subscriber:
    """One subscription: a bounded queue of notifications, in publishing order.

    Made by :meth:`~.hub.Hub.subscribe`. The path's writer drains it with
    :meth:`take_frames` (or :meth:`take`); :meth:`close` unsubscribes and
    empties it. The queue holds at most :attr:`queue_size` notifications and
    :attr:`queue_bytes` bytes of frames (an empty queue takes one frame of any
    size).
    """

    __slots__ = (
        "_audience",
        "_awaited",
        "_bytes",
        "_dropped",
        "_end_reason",
        "_hub",
        "_interest",
        "_moved_at",
        "_on_ready",
        "_queue",
        "_queue_bytes",
        "_queue_size",
        "_refused",
        "_sent",
        "_totals",
    )

    def __init__(
        self,
        hub: _Owner,
        interest: Interest | None,
        queue_size: int,
        on_ready: Callable[[], None] | None,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        audience: str | None = None,
    ) -> None:
        self._hub: _Owner | None = hub
        self._audience = audience
        self._interest = interest
        self._queue_size = queue_size
        self._on_ready = on_ready
        self._queue: deque[Entry] = deque()
        self._dropped = 0
        self._end_reason: str | None = None
        self._queue_bytes = queue_bytes
        #: Bytes of the frames queued now.
        self._bytes = 0
        self._sent = 0
        self._refused = 0
        #: Set when Hub.room_for found this queue without room: its next
        #: take or close runs the hub's when_room callbacks.
        self._awaited = False
        #: When the path last moved: its writer took frames (moved()), or
        #: Hub.room_for, told the time, found the queue empty. None: never told.
        self._moved_at: float | None = None
        # The hub's totals, kept by reference so that they are counted even
        # after the subscriber left the hub.
        self._totals = hub._totals

    @property
    def interest(self) -> Interest | None:
        """The filter, or ``None`` for everything."""
        return self._interest

    @property
    def audience(self) -> str | None:
        """The audience it belongs to (see :meth:`~.hub.Hub.subscribe`), or ``None``: every one."""
        return self._audience

    @property
    def queue_size(self) -> int:
        """How many notifications the queue holds at most."""
        return self._queue_size

    @property
    def queue_bytes(self) -> int:
        """How many bytes of frames the queue holds at most (an empty queue takes any one)."""
        return self._queue_bytes

    @property
    def bytes_queued(self) -> int:
        """How many bytes of frames are queued now."""
        return self._bytes

    @property
    def dropped(self) -> int:
        """Notifications that reached this subscriber and will never be sent.

        Those not queued because the queue was full, and those still queued
        when it was closed.
        """
        return self._dropped

    @property
    def sent(self) -> int:
        """Notifications taken out of the queue by the path's writer."""
        return self._sent

    @property
    def refused(self) -> int:
        """Notifications for it that :meth:`~.hub.Hub.publish` refused as too large."""
        return self._refused

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (or the hub ended the subscription)."""
        return self._hub is None

    @property
    def end_reason(self) -> str | None:
        """Why the subscription was ended from outside, or ``None``.

        Set by ``close(reason=...)`` and by :meth:`~.hub.Hub.suspend`. A writer that
        finds it set, once :meth:`take` returns nothing more, ends its path
        with this reason (the server's error message) instead of cleanly.
        """
        return self._end_reason

    @property
    def moved_at(self) -> float | None:
        """When the path last moved (see :meth:`moved`), or ``None`` if nobody said."""
        return self._moved_at

    def moved(self, now: float) -> None:
        """The path's writer took frames at ``now`` (its clock): the path moves.

        A publisher that waits for room with ``slow_after``
        (:meth:`~.hub.Hub.room_for`) waits only for a full queue whose path
        moved within ``slow_after`` seconds; a queue found empty counts as
        moving too (nothing was waiting for it).
        """
        self._moved_at = now

    def __len__(self) -> int:
        return len(self._queue)

    def take(self, max_items: int | None = None) -> list[Notification]:
        """Remove and return queued notifications, oldest first (at most ``max_items``)."""
        return [entry[1] for entry in self._take(max_items, None)]

    def take_addressed(self, max_items: int | None = None) -> list[tuple[Notification, str | None]]:
        """As :meth:`take`, each notification with the audience it was published to.

        For a subscriber that passes notifications on (a broker's inlet), so
        that their audiences go with them; ``None`` is published to everyone.
        """
        return [(entry[1], entry[2]) for entry in self._take(max_items, None)]

    def take_frames(
        self, max_items: int | None = None, max_bytes: int | None = None, now: float | None = None
    ) -> list[bytes]:
        """Remove and return the frames of queued notifications, oldest first.

        Each frame is the 4-byte length, the tag byte and the JSON, ready to
        write; the same ``bytes`` object is shared by every queue the
        notification reached. At most ``max_items`` frames and at most
        ``max_bytes`` bytes are taken, but always at least one frame when the
        queue is not empty (a frame larger than ``max_bytes`` is taken alone).
        With ``now`` (the writer's clock), a take of frames is also
        :meth:`moved` at ``now``: the path's writer takes them to write.
        """
        queue = self._queue
        count = len(queue)
        # A busy path's writer mostly takes the whole queue, within its
        # limits, with no publisher waiting for room: that is taken here,
        # without the general loop and its list of entries. Limits a
        # non-empty queue fits are valid ones (at least one item, at least
        # its bytes, and a frame is never empty); any others go to _take,
        # which checks them.
        if (
            count
            and not self._awaited
            and (max_items is None or max_items >= count)
            and (max_bytes is None or max_bytes >= self._bytes)
        ):
            if count == 1:
                frames = [queue.popleft()[0]]
            else:
                frames = [entry[0] for entry in queue]
                queue.clear()
            self._bytes = 0
            self._sent += count
            self._totals.sent += count
            if now is not None:
                self._moved_at = now
            return frames
        frames = [entry[0] for entry in self._take(max_items, max_bytes)]
        if frames and now is not None:
            self._moved_at = now
        return frames

    def _take(self, max_items: int | None, max_bytes: int | None) -> list[Entry]:
        queue = self._queue
        count = len(queue)
        if max_items is not None:
            if max_items < 0:
                raise ValueError("max_items must not be negative")
            count = min(count, max_items)
        if max_bytes is not None and max_bytes < 1:
            raise ValueError("max_bytes must be at least 1")
        if count == len(queue) and (max_bytes is None or self._bytes <= max_bytes):
            entries = list(queue)
            taken = self._bytes
            queue.clear()
        else:
            entries = []
            taken = 0
            limit = max_bytes if max_bytes is not None else self._bytes
            while len(entries) < count:
                size = len(queue[0][0])
                if entries and taken + size > limit:
                    break
                entries.append(queue.popleft())
                taken += size
        self._bytes -= taken
        if entries:
            self._sent += len(entries)
            self._totals.sent += len(entries)
            if self._awaited:
                self._room_made(entries, taken)
        return entries

    def _room_made(self, entries: list[Entry], taken: int) -> None:
        """Run the hub's ``when_room`` callbacks; if one raises, the take is undone."""
        self._awaited = False
        hub = self._hub
        if hub is None:
            return
        try:
            hub._room_made()
        except BaseException:
            self._queue.extendleft(reversed(entries))
            self._bytes += taken
            self._sent -= len(entries)
            self._totals.sent -= len(entries)
            raise

    def close(self, *, reason: str | None = None) -> int:
        """Unsubscribe. Closing twice is harmless.

        Without ``reason`` (the path's writer is done with it) whatever is
        queued is dropped, and counted in :attr:`dropped`; returns how many
        notifications that was. With ``reason`` the subscription is ended
        from outside: nothing more is queued, what is queued stays for the
        writer to :meth:`take`, :attr:`end_reason` is set, and ``on_ready`` is
        called once, so that a writer waiting for work wakes up, drains the
        queue and ends the path with the reason (returns 0). A subscriber
        already closed keeps the reason it had (if any).
        """
        if reason is None:
            self._detach()
            return self._free()
        wake = self._end(reason)
        if wake is not None:
            wake()
        return 0

    def _free(self) -> int:
        """Drop what is queued, counting it; how many that was."""
        freed = len(self._queue)
        if freed:
            self._queue.clear()
            self._bytes = 0
            self._dropped += freed
            self._totals.dropped += freed
        return freed

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
        check_reason(reason)
        if not self._detach():
            return None
        self._end_reason = reason
        return self._on_ready

    def __repr__(self) -> str:
        state = "closed" if self._hub is None else f"{len(self._queue)}/{self._queue_size} queued"
        if self._end_reason is not None:
            state = f"ended ({self._end_reason}), {len(self._queue)} queued"
        return (
            f"<Subscriber {state}, {self._sent} sent, {self._dropped} dropped, "
            f"interest={self._interest!r}"
            + ("" if self._audience is None else f", audience={self._audience}")
            + ">"
        )
