"""What every broker does, without the I/O: the outbox, the counts, the hub's seam.

A broker publishes through its broker only, and publishes into its hub
only what it receives from there (docs/cluster.md). :class:`BrokerCore` is
that rule without a connection: it takes notifications into a bounded
outbox and numbers them, cuts the outbox into envelopes, decodes what
arrives, counts gaps, publishes into the hub, and suspends and resumes the
hub as the connection is lost and made again. The drivers
(:mod:`.memory`, :mod:`.asyncio`, :mod:`.blocking`) move its bytes.

Its state is guarded by one lock, so that the blocking driver's threads may
call it; the hub is always called outside that lock, under the caller's
``hub_lock``.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Final, TypedDict
from urllib.parse import urlsplit, urlunsplit

import attrs

from ..sansio.envelope import (
    DEFAULT_LIMITS,
    DEFAULT_MAX_ORIGINS,
    ITEM_OVERHEAD,
    Envelope,
    EnvelopeError,
    EnvelopeLimits,
    GapCounter,
    check_audience,
    check_origin,
    decode_envelope,
    encode_envelope,
    header_size,
)
from ..sansio.errors import NotificationTooLarge as _NotificationTooLarge
from ..sansio.errors import positive_int
from ..sansio.mcp.model import Notification
from ..sansio.server.hub import Hub, as_notification

logger = logging.getLogger("diverge_notifications.cluster")

#: The Redis channel replicas share unless told otherwise.
DEFAULT_CHANNEL: Final = "diverge:notifications"
#: Notifications the outbox holds at most, by default.
DEFAULT_OUTBOX_SIZE: Final = 4096
#: Bytes of notification JSON the outbox holds at most, by default: 64 MiB.
DEFAULT_OUTBOX_BYTES: Final = 64 * 1024 * 1024
#: Notifications one envelope carries at most, by default.
DEFAULT_MAX_BATCH: Final = 256
#: Bytes one envelope carries at most, by default (a larger notification goes alone): 1 MiB.
DEFAULT_MAX_BATCH_BYTES: Final = 1024 * 1024


class BrokerError(Exception):
    """A notification the broker refused to publish; nothing of it was sent."""


class BrokerUnavailable(BrokerError):
    """The broker is not subscribed to its broker now; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"not published: {reason}")
        self.reason = reason


class OutboxFull(BrokerError):
    """The outbox holds ``size`` notifications (``limit``) or too many bytes already."""

    def __init__(self, size: int, limit: int, queued_bytes: int, byte_limit: int) -> None:
        super().__init__(
            f"not published: the outbox is full ({size} of {limit} notifications, "
            f"{queued_bytes} of {byte_limit} bytes waiting for the broker)"
        )
        self.size = size
        self.limit = limit
        self.queued_bytes = queued_bytes
        self.byte_limit = byte_limit


class NotificationTooLarge(_NotificationTooLarge, BrokerError, ValueError):
    """The notification's JSON is larger than the envelope limit every replica applies.

    ``size`` is the size of its JSON, ``limit`` the ``max_notification_size``
    of the broker's :class:`~diverge_notifications.sansio.envelope.EnvelopeLimits`.
    A :class:`~diverge_notifications.sansio.errors.NotificationTooLarge`,
    as :meth:`Hub.publish <diverge_notifications.sansio.Hub.publish>` raises,
    and a :class:`BrokerError`.
    """

    @staticmethod
    def _describe(size: int, limit: int) -> str:
        return f"not published: a notification of {size} bytes is over {limit} bytes"


def _origin_or_none(_instance: object, _attribute: object, value: str | None) -> None:
    if value is not None:
        check_origin(value)


def _envelope_limits(_instance: object, _attribute: object, value: EnvelopeLimits) -> None:
    if not isinstance(value, EnvelopeLimits):
        raise TypeError(f"limits must be EnvelopeLimits, not {type(value).__name__}")


@attrs.frozen(kw_only=True)
class BrokerSettings:
    """The options of every broker, checked once; a broker is made with them whole.

    ``origin`` is the broker's origin id (``None``: fresh random hex for each
    broker made with these settings). ``outbox_size`` and ``outbox_bytes``
    bound what waits to be published; ``max_batch`` and ``max_batch_bytes``
    bound one envelope sent, within ``limits``, which is what received
    envelopes may hold (the same on every replica); ``max_origins`` is how
    many publishers the gap counter follows. A value of the wrong type is a
    :class:`TypeError`, a wrong value a :class:`ValueError`. The defaults
    are in ``docs/cluster.md``.
    """

    origin: str | None = attrs.field(default=None, validator=_origin_or_none)
    limits: EnvelopeLimits = attrs.field(default=DEFAULT_LIMITS, validator=_envelope_limits)
    outbox_size: int = attrs.field(default=DEFAULT_OUTBOX_SIZE, validator=positive_int)
    outbox_bytes: int = attrs.field(default=DEFAULT_OUTBOX_BYTES, validator=positive_int)
    max_batch: int = attrs.field(default=DEFAULT_MAX_BATCH, validator=positive_int)
    max_batch_bytes: int = attrs.field(default=DEFAULT_MAX_BATCH_BYTES, validator=positive_int)
    max_origins: int = attrs.field(default=DEFAULT_MAX_ORIGINS, validator=positive_int)

    def __attrs_post_init__(self) -> None:
        if self.max_batch > self.limits.max_items:
            raise ValueError(f"max_batch ({self.max_batch}) is over limits.max_items")
        if self.max_batch_bytes > self.limits.max_size:
            raise ValueError(f"max_batch_bytes ({self.max_batch_bytes}) is over limits.max_size")


class BrokerOptions(TypedDict, total=False):
    """The fields of :class:`BrokerSettings`, as keyword arguments of the brokers."""

    #: The broker's origin id (``None``: fresh random hex).
    origin: str | None
    #: What received envelopes may hold, the same on every replica.
    limits: EnvelopeLimits
    #: Notifications waiting to be published at most.
    outbox_size: int
    #: Bytes of notification JSON waiting to be published at most.
    outbox_bytes: int
    #: Notifications per envelope sent at most.
    max_batch: int
    #: Bytes per envelope sent at most (a larger notification goes alone).
    max_batch_bytes: int
    #: Origins the gap counter follows.
    max_origins: int


def broker_settings(settings: BrokerSettings | None, options: BrokerOptions) -> BrokerSettings:
    """The settings of a broker made with ``settings=`` or with their fields as keywords.

    ``options`` are :class:`BrokerSettings` fields, given one by one; with
    ``settings`` too, :class:`TypeError`.
    """
    if settings is None:
        return BrokerSettings(**options)
    if not isinstance(settings, BrokerSettings):
        raise TypeError(f"settings must be BrokerSettings, not {type(settings).__name__}")
    if options:
        raise TypeError(f"give settings or {', '.join(sorted(options))}, not both")
    return settings


@attrs.frozen(kw_only=True)
class BrokerStats:
    """A broker's counts at one moment (:meth:`stats` of every broker)."""

    #: Subscribed to the broker now.
    connected: bool
    #: Notifications handed to the broker (their publish command succeeded).
    published: int
    #: Broker messages (envelopes) published.
    batches: int
    #: Notifications received from the broker and published into the hub.
    received: int
    #: Envelopes received.
    envelopes: int
    #: Messages received that are not an envelope this version reads.
    rejected: int
    #: Gaps seen: notifications of an origin that never arrived (see ``GapCounter``).
    gaps: int
    #: Notifications those gaps held.
    missing: int
    #: Notifications waiting in the outbox now.
    outbox: int
    #: Publishes refused because the outbox was full.
    outbox_full: int
    #: Publishes refused because the broker was not connected.
    unavailable: int
    #: Publishes refused because the notification was too large.
    too_large: int
    #: Notifications taken into the outbox and not known to have reached the
    #: broker: dropped when the connection was lost, or in a failed publish.
    lost: int
    #: Times an established connection was lost.
    disconnects: int
    #: Times the broker subscribed again after a loss.
    reconnects: int
    #: Connection attempts that failed before subscribing.
    failed_attempts: int


@attrs.define
class _Counts:
    """The counts of :class:`BrokerStats`, as they grow."""

    published: int = 0
    batches: int = 0
    received: int = 0
    envelopes: int = 0
    rejected: int = 0
    outbox_full: int = 0
    unavailable: int = 0
    too_large: int = 0
    lost: int = 0
    disconnects: int = 0
    reconnects: int = 0
    failed_attempts: int = 0


def new_origin() -> str:
    """A fresh origin id: 16 random hex digits, so that a restarted replica is a new origin."""
    return secrets.token_hex(8)


def redact_url(url: str) -> str:
    """``url`` without its password, fit for logs and error messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{parts.username}:***@{host}" if parts.username else f":***@{host}"
        if parts.port is not None:
            netloc += f":{parts.port}"
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return "<unparsable URL>"


def _at_power_of_two(count: int) -> bool:
    """Log the 1st, 2nd, 4th, 8th ... of a run: visible, and bounded under a flood."""
    return count & (count - 1) == 0


class BrokerCore:
    """The publishing and receiving rules of one broker, with no connection.

    ``description`` names the broker in every reason it gives (e.g. ``Redis
    broker redis://127.0.0.1:6379 channel 'diverge:notifications'``);
    ``on_ready`` is called (outside any lock) whenever the outbox takes a
    notification, so that the driver's sender wakes up. ``settings`` are
    the broker's options, checked already; ``hub_lock`` serialises the calls
    into the hub. Until :meth:`connected` the hub is suspended.
    """

    def __init__(
        self,
        hub: Hub,
        *,
        description: str,
        settings: BrokerSettings,
        hub_lock: contextlib.AbstractContextManager[Any] | None = None,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        if not isinstance(hub, Hub):
            raise TypeError(f"hub must be a Hub, not {type(hub).__name__}")
        if not isinstance(settings, BrokerSettings):
            raise TypeError(f"settings must be BrokerSettings, not {type(settings).__name__}")
        self.origin = new_origin() if settings.origin is None else settings.origin
        self.hub = hub
        self.description = description
        self.settings = settings
        self.limits = settings.limits
        self._outbox_size = settings.outbox_size
        self._outbox_byte_limit = settings.outbox_bytes
        self._max_batch = settings.max_batch
        self._max_batch_bytes = settings.max_batch_bytes
        self._hub_lock: contextlib.AbstractContextManager[Any] = (
            hub_lock if hub_lock is not None else contextlib.nullcontext()
        )
        self._on_ready = on_ready
        self._lock = threading.Lock()
        self._gaps = GapCounter(max_origins=settings.max_origins)
        # Each notification with the audience it goes to (None: everyone).
        self._outbox: deque[tuple[Notification, str | None]] = deque()
        self._outbox_bytes = 0
        # The number the next notification taken gets; the outbox's first one
        # is numbered `_next - len(_outbox)`. 2**64 of them at a billion a
        # second take 584 years, so the numbers do not wrap.
        self._next = 1
        self._connected = False
        self._ever_connected = False
        self._reason = f"{description}: not subscribed yet"
        self._counts = _Counts()
        self._suspend(self._reason)

    # -- reading -----------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Subscribed to the broker now."""
        return self._connected

    @property
    def reason(self) -> str:
        """Why the broker is not connected (the last reason given), naming the broker."""
        return self._reason

    @property
    def pending(self) -> int:
        """Notifications waiting in the outbox."""
        return len(self._outbox)

    def can_accept(self) -> bool:
        """Whether :meth:`accept` would take a small notification now."""
        with self._lock:
            return self._connected and len(self._outbox) < self._outbox_size

    def stats(self) -> BrokerStats:
        """The counts now."""
        with self._lock:
            return BrokerStats(
                connected=self._connected,
                gaps=self._gaps.gaps,
                missing=self._gaps.missing,
                outbox=len(self._outbox),
                **attrs.asdict(self._counts),
            )

    # -- publishing ----------------------------------------------------------------

    def accept(self, item: object, audience: str | None = None) -> bool:
        """Take ``item`` into the outbox; False (and nothing done) if it is not a notification.

        ``audience`` travels with it to every replica (``Hub.publish``'s,
        ``None``: everyone); one that is not 1-64 visible ASCII characters is
        a :class:`ValueError` (:class:`TypeError` if not a str).

        Raises :class:`NotificationTooLarge`, :class:`BrokerUnavailable` or
        :class:`OutboxFull`, each counted and logged.
        """
        notification = as_notification(item)
        if notification is None:
            return False
        if audience is not None:
            check_audience(audience)
        size = len(notification.to_bytes())
        limit = self.limits.max_notification_size
        with self._lock:
            error: BrokerError | None = None
            if size > limit:
                error = NotificationTooLarge(size, limit)
                count = self._counts.too_large = self._counts.too_large + 1
            elif not self._connected:
                error = BrokerUnavailable(self._reason)
                count = self._counts.unavailable = self._counts.unavailable + 1
            elif len(self._outbox) >= self._outbox_size or (
                self._outbox and self._outbox_bytes + size > self._outbox_byte_limit
            ):
                error = OutboxFull(
                    len(self._outbox),
                    self._outbox_size,
                    self._outbox_bytes,
                    self._outbox_byte_limit,
                )
                count = self._counts.outbox_full = self._counts.outbox_full + 1
            else:
                self._outbox.append((notification, audience))
                self._outbox_bytes += size
                self._next += 1
        if error is not None:
            if _at_power_of_two(count):
                # A BrokerUnavailable's reason names the broker already.
                text = (
                    str(error)
                    if isinstance(error, BrokerUnavailable)
                    else f"{self.description}: {error}"
                )
                logger.warning("%s (refusal %d of its kind)", text, count)
            raise error
        if self._on_ready is not None:
            self._on_ready()
        return True

    def next_batch(self) -> tuple[bytes, int] | None:
        """The next envelope to publish and how many notifications it carries, or ``None``.

        The notifications leave the outbox: report :meth:`sent` or
        :meth:`failed` for them. Never retried: a publish whose outcome is
        unknown may have reached the broker.
        """
        with self._lock:
            outbox = self._outbox
            if not outbox:
                return None
            first = self._next - len(outbox)
            items: list[Notification] = []
            audiences: list[str | None] = []
            total = header_size(self.origin)
            # What naming audiences adds (version 2): a length byte for each
            # notification, and each audience.
            addressing = 0
            addressed = False
            taken = 0
            while outbox and len(items) < self._max_batch:
                notification, audience = outbox[0]
                size = len(notification.to_bytes())
                extra = 1 + len(audience or "")
                grown = total + ITEM_OVERHEAD + size
                if addressed or audience is not None:
                    grown += addressing + extra
                if items and grown > self._max_batch_bytes:
                    break
                outbox.popleft()
                items.append(notification)
                audiences.append(audience)
                total += ITEM_OVERHEAD + size
                addressing += extra
                addressed = addressed or audience is not None
                taken += size
            self._outbox_bytes -= taken
        envelope = Envelope(
            origin=self.origin, sequence=first, notifications=items, audiences=audiences
        )
        return encode_envelope(envelope), len(items)

    def sent(self, count: int) -> None:
        """An envelope of ``count`` notifications was published."""
        with self._lock:
            self._counts.published += count
            self._counts.batches += 1

    def failed(self, count: int, why: str) -> None:
        """The publish of an envelope of ``count`` notifications failed (not retried)."""
        with self._lock:
            self._counts.lost += count
        logger.warning("%s: %d notifications not published: %s", self.description, count, why)

    # -- receiving -----------------------------------------------------------------

    def received(self, payload: bytes) -> int:
        """A message from the broker: decode it and publish its notifications into the hub.

        Returns how many notifications it carried (0 for a message that is
        not an envelope, which is counted as rejected and logged).
        """
        try:
            envelope = decode_envelope(payload, limits=self.limits)
        except EnvelopeError as error:
            with self._lock:
                count = self._counts.rejected = self._counts.rejected + 1
            if _at_power_of_two(count):
                logger.warning(
                    "%s: a message that is not an envelope was ignored (%d so far): %s",
                    self.description,
                    count,
                    error.detail,
                )
            return 0
        with self._lock:
            missing = self._gaps.observe(envelope)
            self._counts.envelopes += 1
            self._counts.received += len(envelope.notifications)
        if missing:
            logger.warning(
                "%s: %d notifications of origin %s never arrived (before number %d)",
                self.description,
                missing,
                envelope.origin,
                envelope.sequence,
            )
        hub = self.hub
        audiences = envelope.audiences
        with self._hub_lock:
            for index, notification in enumerate(envelope.notifications):
                try:
                    hub.publish(notification, audience=audiences[index] if audiences else None)
                except Exception:
                    # A subscriber's wake-up callback failed; the others were served.
                    logger.exception("%s: publishing into the hub failed", self.description)
        return len(envelope.notifications)

    # -- the connection ------------------------------------------------------------

    def subscribed(self) -> None:
        """The broker is subscribed: the hub serves again."""
        with self._lock:
            self._connected = True
            # What was missed while not subscribed is a known loss (the paths
            # were ended for it), not a gap.
            self._gaps.forget()
            again = self._ever_connected
            self._ever_connected = True
            if again:
                self._counts.reconnects += 1
        with self._hub_lock:
            self.hub.resume()
        logger.info("%s: subscribed%s", self.description, " again" if again else "")

    def lost(self, why: str) -> str:
        """The connection is gone, or could not be made: suspend the hub. Returns the reason.

        What waits in the outbox is dropped and counted as lost: it was
        never sent, and sending it later would deliver it after the
        listeners were told that they may have missed something.
        """
        reason = f"{self.description}: {why}"
        was_connected, dropped = self._disconnect(reason)
        with self._lock:
            if was_connected:
                self._counts.disconnects += 1
            else:
                self._counts.failed_attempts += 1
        if was_connected:
            logger.warning("%s (%d unsent notifications dropped)", reason, dropped)
        else:
            logger.info("%s", reason)
        self._suspend(reason)
        return reason

    def closed(self) -> None:
        """The broker was closed: the hub stays suspended, for good."""
        reason = f"{self.description}: closed"
        _, dropped = self._disconnect(reason)
        logger.info("%s (%d unsent notifications dropped)", reason, dropped)
        self._suspend(reason)

    def _disconnect(self, reason: str) -> tuple[bool, int]:
        """Not connected any more, the outbox dropped: (was connected, how many dropped)."""
        with self._lock:
            was_connected = self._connected
            self._connected = False
            self._reason = reason
            dropped = len(self._outbox)
            self._outbox.clear()
            self._outbox_bytes = 0
            self._counts.lost += dropped
        return was_connected, dropped

    def _suspend(self, reason: str) -> None:
        with self._hub_lock:
            try:
                ended = self.hub.suspend(reason)
            except Exception:
                logger.exception("%s: a subscriber's wake-up failed", self.description)
                return
        if ended:
            logger.warning("%s: ended %d open paths", self.description, ended)


class Broker:
    """What every broker offers, over its :class:`BrokerCore` (``_core``)."""

    _core: BrokerCore

    @property
    def hub(self) -> Hub:
        """The hub this broker feeds."""
        return self._core.hub

    @property
    def origin(self) -> str:
        """This broker's origin id."""
        return self._core.origin

    @property
    def connected(self) -> bool:
        """Subscribed to the broker now."""
        return self._core.connected

    def publish(self, item: object, *, audience: str | None = None) -> bool:
        """Queue ``item`` for the broker, without waiting; every hub on the channel gets it.

        ``audience`` goes with it: every hub publishes it to that audience
        (``Hub.publish``'s; ``None``, the default: to everyone).

        ``False`` if ``item`` is not a notification (ignored, as by
        ``Hub.publish``). Raises :class:`BrokerUnavailable` while not
        subscribed, :class:`OutboxFull` when the outbox is full and
        :class:`NotificationTooLarge`; each is counted in :meth:`stats` and
        logged. The hub gets the notification only once it came back from
        the broker.
        """
        return self._core.accept(item, audience)

    def stats(self) -> BrokerStats:
        """The counts now."""
        return self._core.stats()
