"""The envelope between replicas: notifications carried through a broker, unchanged.

Replicas of a server share one notification stream through a broker
(``docs/cluster.md``). What one replica publishes travels as one broker
message, an *envelope*: the notifications' JSON bytes exactly as they were
published, who published them (the *origin*, one id per publishing broker)
and the sequence number the origin gave the first of them, so that a
receiver can count what it never got (:class:`GapCounter`). Under load
one envelope carries several notifications.

Version 1, byte by byte (integers are unsigned, big-endian)::

    offset     size  field
    0          4     magic, b"DVNE"
    4          1     version, 1
    5          1     L, length of the origin id: 1..64
    6          L     origin id: bytes 0x21..0x7E (visible ASCII, no space)
    6+L        8     S, sequence number of the first notification
    14+L       4     N, number of notifications: 1..max_items
    18+L       ...   N times: a 4-byte length M (0..max_notification_size)
                     and M bytes of notification JSON

The notifications are numbered ``S, S+1, ..., S+N-1`` (at most
``2**64 - 1``). Nothing may follow the last one.

Version 2 carries the *audience* each notification was published to
(``Hub.publish(item, audience=...)``: the paths of one token, see
``docs/cluster.md``). It is version 1 with a version byte of 2 and, before
each notification's length, one byte A (0..64) and A bytes of audience
(visible ASCII; A = 0: published to everyone). An envelope whose
notifications all go to everyone is written as version 1, so replicas that
use no audiences exchange exactly what they did before audiences existed;
a version 2 envelope that names no audience is refused.

The encoding is canonical: every envelope has exactly one encoding, so
``encode(decode(b)) == b`` for every ``b`` that decodes.

:func:`decode_envelope` is total: for any bytes it returns an
:class:`Envelope` or raises :class:`EnvelopeError`, never anything else, in
time and memory linear in the input, within the explicit
:class:`EnvelopeLimits`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

import attrs

from .errors import (
    EnvelopeError,
    EnvelopeErrorReason,
    FrameError,
    LocalProtocolError,
    check_positive_int,
    positive_int,
)
from .mcp.model import Notification
from .wire.framing import DEFAULT_MAX_FRAME_SIZE

__all__ = [
    "AUDIENCE_VERSION",
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_ENVELOPE_SIZE",
    "DEFAULT_MAX_ITEMS",
    "DEFAULT_MAX_NOTIFICATION_SIZE",
    "DEFAULT_MAX_ORIGINS",
    "ITEM_OVERHEAD",
    "MAGIC",
    "MAX_ORIGIN_LENGTH",
    "MAX_SEQUENCE",
    "VERSION",
    "Envelope",
    "EnvelopeError",
    "EnvelopeErrorReason",
    "EnvelopeLimits",
    "GapCounter",
    "check_audience",
    "check_origin",
    "decode_envelope",
    "encode_envelope",
    "header_size",
]

#: The first four bytes of every envelope.
MAGIC: Final = b"DVNE"
#: The version of envelopes whose notifications all go to everyone.
VERSION: Final = 1
#: The version of envelopes that carry an audience for some notification.
AUDIENCE_VERSION: Final = 2
#: The longest origin id, in bytes.
MAX_ORIGIN_LENGTH: Final = 64
#: The largest sequence number.
MAX_SEQUENCE: Final = 2**64 - 1
#: Bytes each notification adds besides its JSON (its length).
ITEM_OVERHEAD: Final = 4
_FIXED: Final = len(MAGIC) + 1 + 1 + 8 + 4
_MAX_ITEM_LENGTH: Final = 2**32 - 1
_ORIGIN: Final = re.compile(rb"[\x21-\x7e]{1,%d}" % MAX_ORIGIN_LENGTH)

#: Most notifications in one envelope, by default.
DEFAULT_MAX_ITEMS: Final = 1024
#: Largest notification JSON, by default: what one frame can carry (tag + JSON).
DEFAULT_MAX_NOTIFICATION_SIZE: Final = DEFAULT_MAX_FRAME_SIZE - 1
#: Largest envelope, by default: 32 MiB.
DEFAULT_MAX_ENVELOPE_SIZE: Final = 32 * 1024 * 1024
#: Most origins a :class:`GapCounter` remembers, by default.
DEFAULT_MAX_ORIGINS: Final = 1024


def header_size(origin: str) -> int:
    """Bytes of an envelope before its first notification, for ``origin``."""
    return _FIXED + len(origin)


@attrs.frozen(kw_only=True)
class EnvelopeLimits:
    """What :func:`decode_envelope` accepts at most (all positive ints).

    ``max_size`` bounds the whole envelope in bytes, ``max_items`` the
    notifications in it, ``max_notification_size`` the JSON of each one. An
    envelope of one notification of ``max_notification_size`` bytes with
    the longest origin must fit in ``max_size``.
    """

    max_size: int = attrs.field(default=DEFAULT_MAX_ENVELOPE_SIZE, validator=positive_int)
    max_items: int = attrs.field(default=DEFAULT_MAX_ITEMS, validator=positive_int)
    max_notification_size: int = attrs.field(
        default=DEFAULT_MAX_NOTIFICATION_SIZE, validator=positive_int
    )

    def __attrs_post_init__(self) -> None:
        smallest = _FIXED + MAX_ORIGIN_LENGTH + ITEM_OVERHEAD + self.max_notification_size
        if self.max_size < smallest:
            raise ValueError(
                f"max_size ({self.max_size}) must hold one notification of "
                f"max_notification_size bytes: at least {smallest}"
            )


#: The limits :func:`decode_envelope` applies unless given others.
DEFAULT_LIMITS: Final = EnvelopeLimits()


def check_origin(origin: str) -> str:
    """``origin`` if it is an origin id (1-64 visible ASCII characters, no space).

    :class:`TypeError` if it is not a str, :class:`ValueError` otherwise.
    """
    if not isinstance(origin, str):
        raise TypeError(f"origin must be a str, not {type(origin).__name__}")
    if not origin.isascii() or _ORIGIN.fullmatch(origin.encode("ascii")) is None:
        raise ValueError(
            f"origin must be 1-{MAX_ORIGIN_LENGTH} visible ASCII characters (no space), "
            f"not {origin!r}"
        )
    return origin


def _check_origin(_instance: object, _attribute: object, value: str) -> None:
    check_origin(value)


def _check_sequence(_instance: object, _attribute: object, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"sequence must be an int, not {type(value).__name__}")
    if not 0 <= value <= MAX_SEQUENCE:
        raise ValueError(f"sequence must be in 0..2**64-1, got {value!r}")


def check_audience(audience: str) -> str:
    """``audience`` if an envelope can carry it (1-64 visible ASCII characters, no space).

    :class:`TypeError` if it is not a str, :class:`ValueError` otherwise.
    """
    if not isinstance(audience, str):
        raise TypeError(f"an audience is a str or None, not {type(audience).__name__}")
    if not audience.isascii() or _ORIGIN.fullmatch(audience.encode("ascii")) is None:
        raise ValueError(
            f"an audience is 1-{MAX_ORIGIN_LENGTH} visible ASCII characters, not {audience!r}"
        )
    return audience


def _audience_tuple(value: Iterable[str | None]) -> tuple[str | None, ...]:
    items = tuple(value)
    for item in items:
        if item is not None:
            check_audience(item)
    # Everyone's (no audience named) is said one way only: no audiences.
    return items if any(item is not None for item in items) else ()


def _notification_tuple(value: Iterable[Notification]) -> tuple[Notification, ...]:
    items = tuple(value)
    for item in items:
        if not isinstance(item, Notification):
            raise TypeError(f"an envelope carries Notifications, not {type(item).__name__}")
    return items


@attrs.frozen(kw_only=True)
class Envelope:
    """Notifications published by ``origin``, numbered from ``sequence``.

    ``notifications`` holds at least one; each is carried as its
    :meth:`Notification.to_bytes`, so a decoded notification travels byte
    for byte. Equality compares the notifications as
    :class:`Notification` does (by JSON value).

    ``audiences`` gives, one for each notification, the audience it was
    published to (``None``: everyone); ``()`` (the default, and what any
    all-``None`` tuple becomes) means everyone's, every one of them.
    """

    origin: str = attrs.field(validator=_check_origin)
    sequence: int = attrs.field(validator=_check_sequence)
    notifications: tuple[Notification, ...] = attrs.field(converter=_notification_tuple)
    audiences: tuple[str | None, ...] = attrs.field(default=(), converter=_audience_tuple)

    def __attrs_post_init__(self) -> None:
        if not self.notifications:
            raise ValueError("an envelope carries at least one notification")
        if self.audiences and len(self.audiences) != len(self.notifications):
            raise ValueError("an envelope gives one audience for each notification, or none")
        if self.last > MAX_SEQUENCE:
            raise ValueError("the last notification's sequence number is beyond 2**64-1")

    @property
    def last(self) -> int:
        """The sequence number of the last notification."""
        return self.sequence + len(self.notifications) - 1


def encode_envelope(envelope: Envelope) -> bytes:
    """The bytes of ``envelope``; the inverse of :func:`decode_envelope`.

    Version :data:`VERSION`, or :data:`AUDIENCE_VERSION` when it names an audience.

    Limits are the receiver's to apply. A notification over 4 GiB, which the
    format cannot carry, raises :class:`LocalProtocolError`.
    """
    if not isinstance(envelope, Envelope):
        raise TypeError(f"expected an Envelope, not {type(envelope).__name__}")
    origin = envelope.origin.encode("ascii")
    items = envelope.notifications
    audiences = envelope.audiences
    parts = [
        MAGIC,
        bytes((AUDIENCE_VERSION if audiences else VERSION, len(origin))),
        origin,
        envelope.sequence.to_bytes(8, "big"),
        len(items).to_bytes(4, "big"),
    ]
    for index, notification in enumerate(items):
        raw = notification.to_bytes()
        if len(raw) > _MAX_ITEM_LENGTH:
            raise LocalProtocolError("an envelope carries notifications of at most 4 GiB - 1")
        if audiences:
            audience = (audiences[index] or "").encode("ascii")
            parts.append(bytes((len(audience),)))
            parts.append(audience)
        parts.append(len(raw).to_bytes(4, "big"))
        parts.append(raw)
    return b"".join(parts)


def _error(reason: EnvelopeErrorReason, detail: str, index: int | None = None) -> EnvelopeError:
    return EnvelopeError(reason, detail, index=index)


def decode_envelope(
    data: bytes | bytearray | memoryview, *, limits: EnvelopeLimits = DEFAULT_LIMITS
) -> Envelope:
    """Decode one envelope; :class:`EnvelopeError` for anything that is not one.

    The checks, in order: size (``max_size``), magic, version, origin,
    number of notifications (``max_items``), sequence range, then each
    notification (in version 2 its audience first, then
    ``max_notification_size``, then its JSON, as
    :meth:`Notification.from_bytes` checks it), then trailing bytes, then
    (version 2) that some audience is named.
    """
    raw = data if type(data) is bytes else bytes(data)
    size = len(raw)
    if size > limits.max_size:
        raise _error(
            EnvelopeErrorReason.TOO_LARGE,
            f"envelope of {size} bytes is larger than the limit of {limits.max_size} bytes",
        )
    if raw[:4] != MAGIC:
        raise _error(EnvelopeErrorReason.NOT_AN_ENVELOPE, f"no envelope magic {MAGIC!r}")
    if size < 6:
        raise _error(EnvelopeErrorReason.TRUNCATED, "envelope ends inside its header")
    version = raw[4]
    if version != VERSION and version != AUDIENCE_VERSION:
        raise _error(
            EnvelopeErrorReason.UNKNOWN_VERSION,
            f"envelope version {version} (this version reads {VERSION} and {AUDIENCE_VERSION})",
        )
    addressed = version == AUDIENCE_VERSION
    origin_end = 6 + raw[5]
    if raw[5] == 0 or raw[5] > MAX_ORIGIN_LENGTH:
        raise _error(
            EnvelopeErrorReason.ORIGIN, f"origin id of {raw[5]} bytes (1-{MAX_ORIGIN_LENGTH})"
        )
    position = origin_end + 12
    if size < position:
        raise _error(EnvelopeErrorReason.TRUNCATED, "envelope ends inside its header")
    origin = raw[6:origin_end]
    if _ORIGIN.fullmatch(origin) is None:
        raise _error(EnvelopeErrorReason.ORIGIN, "origin id is not visible ASCII (0x21-0x7E)")
    first = int.from_bytes(raw[origin_end : origin_end + 8], "big")
    count = int.from_bytes(raw[origin_end + 8 : position], "big")
    if not 1 <= count <= limits.max_items:
        raise _error(
            EnvelopeErrorReason.COUNT,
            f"envelope of {count} notifications (1-{limits.max_items})",
        )
    if first + count - 1 > MAX_SEQUENCE:
        raise _error(EnvelopeErrorReason.SEQUENCE, "sequence numbers run beyond 2**64-1")
    notifications = []
    audiences: list[str | None] = []
    limit = limits.max_notification_size
    for index in range(count):
        if addressed:
            audience, position = _read_audience(raw, position, index)
            audiences.append(audience)
        start = position + ITEM_OVERHEAD
        if size < start:
            raise _error(
                EnvelopeErrorReason.TRUNCATED, f"envelope ends inside notification {index}"
            )
        length = int.from_bytes(raw[position:start], "big")
        if length > limit:
            raise _error(
                EnvelopeErrorReason.TOO_LARGE,
                f"notification {index} of {length} bytes is larger than the limit of {limit}",
                index,
            )
        position = start + length
        if size < position:
            raise _error(
                EnvelopeErrorReason.TRUNCATED, f"envelope ends inside notification {index}"
            )
        try:
            notifications.append(Notification.from_bytes(raw[start:position]))
        except FrameError as error:
            raise _error(
                EnvelopeErrorReason.NOTIFICATION, f"notification {index}: {error.detail}", index
            ) from None
    if position != size:
        raise _error(
            EnvelopeErrorReason.TRAILING,
            f"{size - position} bytes after the last notification",
        )
    if addressed and not any(audience is not None for audience in audiences):
        raise _error(
            EnvelopeErrorReason.AUDIENCE,
            f"a version {AUDIENCE_VERSION} envelope names no audience (version {VERSION} is that)",
        )
    return Envelope(
        origin=origin.decode("ascii"),
        sequence=first,
        notifications=notifications,
        audiences=audiences,
    )


def _read_audience(raw: bytes, position: int, index: int) -> tuple[str | None, int]:
    """The audience of notification ``index`` at ``position`` (version 2), and what follows it."""
    if len(raw) <= position:
        raise _error(EnvelopeErrorReason.TRUNCATED, f"envelope ends inside notification {index}")
    length = raw[position]
    end = position + 1 + length
    if length > MAX_ORIGIN_LENGTH:
        raise _error(
            EnvelopeErrorReason.AUDIENCE,
            f"audience of notification {index} of {length} bytes (0-{MAX_ORIGIN_LENGTH})",
            index,
        )
    if len(raw) < end:
        raise _error(EnvelopeErrorReason.TRUNCATED, f"envelope ends inside notification {index}")
    if not length:
        return None, end
    audience = raw[position + 1 : end]
    if _ORIGIN.fullmatch(audience) is None:
        raise _error(
            EnvelopeErrorReason.AUDIENCE,
            f"audience of notification {index} is not visible ASCII (0x21-0x7E)",
            index,
        )
    return audience.decode("ascii"), end


class GapCounter:
    """Counts the notifications a receiver never got, per origin.

    Feed it every envelope received, in order (:meth:`observe`). An
    envelope whose first number is past the origin's last one plus one
    reveals a *gap*: the notifications in between were published and never
    arrived. The first envelope of an origin reveals nothing (what came
    before it is not this receiver's to know). A number at or before the
    last one is a *rewind* (the origin started again under the same id):
    counted, and counting goes on from there.

    At most ``max_origins`` origins are remembered; a new one beyond that
    forgets the one heard from least recently (counted in :attr:`evicted`).
    After a receiver knowingly missed messages (it was unsubscribed), call
    :meth:`forget`, so that only unexplained losses count as gaps.
    """

    __slots__ = ("_evicted", "_gaps", "_last", "_max_origins", "_missing", "_rewinds")

    def __init__(self, *, max_origins: int = DEFAULT_MAX_ORIGINS) -> None:
        self._max_origins = check_positive_int("max_origins", max_origins)
        # Insertion order is recency: an origin heard from moves to the end.
        self._last: dict[str, int] = {}
        self._gaps = 0
        self._missing = 0
        self._rewinds = 0
        self._evicted = 0

    @property
    def gaps(self) -> int:
        """How many gaps were seen."""
        return self._gaps

    @property
    def missing(self) -> int:
        """How many notifications the gaps held, in all."""
        return self._missing

    @property
    def rewinds(self) -> int:
        """How many envelopes were numbered at or before their origin's last one."""
        return self._rewinds

    @property
    def evicted(self) -> int:
        """How many origins were forgotten to stay within ``max_origins``."""
        return self._evicted

    @property
    def origins(self) -> int:
        """How many origins are remembered."""
        return len(self._last)

    def observe(self, envelope: Envelope) -> int:
        """Note ``envelope``; returns how many notifications are missing right before it."""
        last = self._last.pop(envelope.origin, None)
        missing = 0
        if last is None:
            if len(self._last) >= self._max_origins:
                del self._last[next(iter(self._last))]
                self._evicted += 1
        elif envelope.sequence > last + 1:
            missing = envelope.sequence - last - 1
            self._gaps += 1
            self._missing += missing
        elif envelope.sequence <= last:
            self._rewinds += 1
        self._last[envelope.origin] = envelope.last
        return missing

    def forget(self) -> None:
        """Forget every origin's position (the counts stay)."""
        self._last.clear()
