"""Fuzz the envelope codec between replicas.

For any bytes, :func:`decode_envelope` returns an envelope or raises
:class:`EnvelopeError`, and nothing else; a decoded envelope re-encodes to
exactly the bytes it came from (the format is canonical), its notifications
keep their bytes, and the gap counter takes it: a later envelope of the
same origin counts the gap before it, an earlier one a rewind, a second
origin past ``max_origins`` an eviction. An error equals itself, hashes, and
says what it is; a decoded envelope's fields cannot be rebuilt into one the
constructor should refuse.

    python fuzz/fuzz_envelope.py -max_total_time=60

``SEEDS`` holds envelopes of one and of several notifications and a few
near misses; ``DICTIONARY`` the header's fields and the JSON tokens.
"""

from __future__ import annotations

from collections.abc import Callable

from _driver import JSON_TOKENS, check_codec

from diverge_notifications.sansio.envelope import (
    MAGIC,
    MAX_SEQUENCE,
    Envelope,
    EnvelopeError,
    EnvelopeErrorReason,
    EnvelopeLimits,
    GapCounter,
    decode_envelope,
    encode_envelope,
)

# Small limits, so that the fuzzer reaches every one of them.
LIMITS = EnvelopeLimits(max_size=4096, max_items=8, max_notification_size=1024)


def _envelope(origin: bytes, first: int, *items: bytes) -> bytes:
    body = b"".join(len(item).to_bytes(4, "big") + item for item in items)
    return (
        MAGIC
        + bytes((1, len(origin)))
        + origin
        + first.to_bytes(8, "big")
        + len(items).to_bytes(4, "big")
        + body
    )


def _addressed(origin: bytes, first: int, *items: tuple[bytes, bytes]) -> bytes:
    """A version 2 envelope: each notification after its audience (empty: everyone)."""
    body = b"".join(
        bytes((len(audience),)) + audience + len(item).to_bytes(4, "big") + item
        for audience, item in items
    )
    header = MAGIC + bytes((2, len(origin))) + origin + first.to_bytes(8, "big")
    return header + len(items).to_bytes(4, "big") + body


#: The module fuzzed (tests/test_fuzz_coverage.py measures how much of it the seeds run).
TARGET = decode_envelope.__module__

SEEDS = [
    _envelope(b"a1", 1, b'{"method":"notifications/tools/list_changed"}'),
    _envelope(
        b"replica-7",
        2**40,
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":'
        b'{"progressToken":7,"progress":1}}',
        b' { "params" : {"level":"info","data":"\\u00e9"}, "method":"notifications/message" } ',
        b'{"method":"x/custom"}',
    ),
    _envelope(b"z", 2**64 - 1, b'{"method":"m"}'),
    _envelope(b"z", 2**64 - 1, b'{"method":"m"}', b'{"method":"n"}'),  # beyond 2**64-1
    _envelope(b"o", 0, b'{"method":1}'),  # not a notification
    _envelope(b"o", 0),  # no notification
    _envelope(b"bad origin", 0, b'{"method":"m"}'),
    _envelope(b"o", 0, b'{"method":"m"}') + b"\x00",  # trailing
    _envelope(b"o", 0, b'{"method":"m"}')[:-3],  # truncated
    MAGIC + b"\x02",
    b"not an envelope",
    _envelope(b"o", 0, b"{" * 5000),  # larger than the envelope limit
    MAGIC + b"\x01\x00" + b"\x00" * 12,  # no origin
    MAGIC + b"\x01\x41" + b"a" * 65 + b"\x00" * 12,  # origin too long
    MAGIC + b"\x01\x02ab\x00\x00",  # ends inside the header
    MAGIC + b"\x01",  # ends before the origin's length
    _envelope(b"o", 0, *[b'{"method":"m"}'] * 9),  # too many
    _envelope(b"o", 0, b'{"method":"m","params":{"p":"' + b"x" * 1100 + b'"}}'),
    _envelope(b"o", 5, b'{"method":"m"}')[:-20],  # ends inside notification 0
    _envelope(b"o\x7f", 0, b'{"method":"m"}'),  # not visible ASCII
    MAGIC + b"\x03",  # an unknown version
    _addressed(b"o", 3, (b"5f0c2a7d1e9b4c38", b'{"method":"m"}'), (b"", b'{"method":"n"}')),
    _addressed(b"o", 0, (b"", b'{"method":"m"}')),  # version 2 naming no audience
    _addressed(b"o", 0, (b"a" * 65, b'{"method":"m"}')),  # audience too long
    _addressed(b"o", 0, (b"a b", b'{"method":"m"}')),  # audience not visible ASCII
    _addressed(b"o", 0, (b"abc", b'{"method":"m"}'))[:-20],  # ends inside the audience
]

DICTIONARY = [
    *JSON_TOKENS,
    MAGIC,
    MAGIC + b"\x01",
    b"\x00\x00\x00\x01",
    b"\x00\x00\x00\x00\x00\x00\x00\x01",
    b"\xff\xff\xff\xff\xff\xff\xff\xff",
    b'"method"',
    b'"params"',
    b'"notifications/progress"',
]


def TestOneInput(data: bytes) -> None:
    envelope = check_codec(
        data,
        lambda raw: decode_envelope(raw, limits=LIMITS),
        encode_envelope,
        EnvelopeError,
        EnvelopeErrorReason,
    )
    if envelope is None:
        _check_error(data)
        return
    assert 1 <= len(envelope.notifications) <= LIMITS.max_items
    assert envelope.last <= 2**64 - 1
    raws = [notification.to_bytes() for notification in envelope.notifications]
    assert all(raw in data for raw in raws)
    counter = GapCounter(max_origins=1)
    assert counter.observe(envelope) == 0
    assert counter.observe(envelope) == 0 and counter.rewinds == 1
    assert (counter.gaps, counter.missing, counter.evicted, counter.origins) == (0, 0, 0, 1)
    if envelope.last + 3 <= MAX_SEQUENCE:
        first = envelope.notifications[:1]
        later = Envelope(origin=envelope.origin, sequence=envelope.last + 3, notifications=first)
        assert counter.observe(later) == 2 and (counter.gaps, counter.missing) == (1, 2)
    other = "y" if envelope.origin == "x" else "x"
    one = envelope.notifications[:1]
    assert counter.observe(Envelope(origin=other, sequence=0, notifications=one)) == 0
    assert counter.evicted == 1 and counter.origins == 1
    counter.forget()
    assert counter.origins == 0
    _refused(lambda: Envelope(origin=envelope.origin, sequence=envelope.sequence, notifications=()))
    _refused(lambda: Envelope(origin=envelope.origin, sequence=-1, notifications=one))
    _refused(lambda: Envelope(origin=" ", sequence=0, notifications=one))
    _refused(lambda: Envelope(origin=envelope.origin, sequence=0, notifications=raws))  # type: ignore[arg-type]
    _refused(lambda: Envelope(origin=envelope.origin, sequence=MAX_SEQUENCE, notifications=one * 2))
    _refused(lambda: encode_envelope(raws))  # type: ignore[arg-type]


def _refused(make: Callable[[], object]) -> None:
    try:
        make()
    except (TypeError, ValueError):
        return
    raise AssertionError("a value the codec refuses was made")


def decode_error(data: bytes) -> EnvelopeError:
    """The error decoding ``data`` raises (a fresh one each call)."""
    try:
        decode_envelope(data, limits=LIMITS)
    except EnvelopeError as error:
        return error
    raise AssertionError("decoded the second time")


def _check_error(data: bytes) -> None:
    """An envelope error says what it is, equals itself and hashes."""
    try:
        decode_envelope(data, limits=LIMITS)
    except EnvelopeError as error:
        assert error == decode_error(data)
        assert error != data  # compared with something else: not equal
        assert hash(error) == hash(error)
        assert error.reason.name in repr(error)


if __name__ == "__main__":
    from _driver import main

    main(TestOneInput)
