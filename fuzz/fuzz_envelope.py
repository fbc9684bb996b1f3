"""Fuzz the envelope codec between replicas.

For any bytes, :func:`decode_envelope` returns an envelope or raises
:class:`EnvelopeError`, and nothing else; a decoded envelope re-encodes to
exactly the bytes it came from (the format is canonical), its notifications
keep their bytes, and the gap counter takes it.

    python fuzz/fuzz_envelope.py -max_total_time=60

``SEEDS`` holds envelopes of one and of several notifications and a few
near misses; ``DICTIONARY`` the header's fields and the JSON tokens.
"""

from __future__ import annotations

from _driver import JSON_TOKENS, check_codec

from diverge_notifications.sansio.envelope import (
    MAGIC,
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
        return
    assert 1 <= len(envelope.notifications) <= LIMITS.max_items
    assert envelope.last <= 2**64 - 1
    raws = [notification.to_bytes() for notification in envelope.notifications]
    assert all(raw in data for raw in raws)
    counter = GapCounter(max_origins=1)
    assert counter.observe(envelope) == 0
    assert counter.observe(envelope) == 0 and counter.rewinds == 1


if __name__ == "__main__":
    from _driver import main

    main(TestOneInput)
