"""The envelope between replicas: round trips, byte identity, totality, limits, gap counting."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio import Notification, errors
from diverge_notifications.sansio.envelope import (
    AUDIENCE_VERSION,
    DEFAULT_LIMITS,
    DEFAULT_MAX_NOTIFICATION_SIZE,
    ITEM_OVERHEAD,
    MAGIC,
    MAX_ORIGIN_LENGTH,
    MAX_SEQUENCE,
    VERSION,
    Envelope,
    EnvelopeError,
    EnvelopeErrorReason,
    EnvelopeLimits,
    GapCounter,
    check_origin,
    decode_envelope,
    encode_envelope,
    header_size,
)
from diverge_notifications.sansio.wire.framing import DEFAULT_MAX_FRAME_SIZE
from tests.strategies import json_texts, notification_members, notifications

Reason = EnvelopeErrorReason

origins = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E),
    min_size=1,
    max_size=MAX_ORIGIN_LENGTH,
)
sequences = st.integers(min_value=0, max_value=MAX_SEQUENCE - 64)
#: A notification's JSON as someone might have written it: odd whitespace,
#: member order, escapes and number spellings.
odd_texts = notification_members().flatmap(json_texts).map(lambda text: text.encode("utf-8"))


def raw_envelope(origin: bytes, first: int, *items: bytes, version: int = VERSION) -> bytes:
    """An envelope written by hand, field by field, as docs/cluster.md draws it."""
    body = b"".join(len(item).to_bytes(4, "big") + item for item in items)
    return (
        MAGIC
        + bytes((version, len(origin)))
        + origin
        + first.to_bytes(8, "big")
        + len(items).to_bytes(4, "big")
        + body
    )


ONE = b'{"method":"notifications/tools/list_changed"}'


@st.composite
def envelopes(draw: st.DrawFn) -> Envelope:
    items = draw(st.lists(notifications(), min_size=1, max_size=6))
    return Envelope(origin=draw(origins), sequence=draw(sequences), notifications=items)


@st.composite
def envelope_bytes(draw: st.DrawFn) -> bytes:
    """Mostly well-formed envelopes of oddly spelled notifications, often damaged."""
    item = st.one_of(odd_texts, odd_texts, odd_texts, st.binary(max_size=20))
    items = draw(st.lists(item, min_size=0, max_size=4))
    good_origin = origins.map(lambda origin: origin.encode("ascii"))
    origin = draw(st.one_of(good_origin, good_origin, good_origin, st.binary(max_size=70)))
    data = bytearray(raw_envelope(origin, draw(sequences), *items))
    if draw(st.booleans()):
        how = draw(st.sampled_from(["cut", "flip", "append", "count"]))
        if how == "cut":
            del data[draw(st.integers(min_value=0, max_value=len(data))) :]
        elif how == "flip":
            index = draw(st.integers(min_value=0, max_value=len(data) - 1))
            data[index] ^= draw(st.integers(min_value=1, max_value=255))
        elif how == "append":
            data += draw(st.binary(min_size=1, max_size=8))
        else:
            at = 6 + len(origin) + 8  # the count field
            data[at : at + 4] = draw(st.integers(0, 2**32 - 1)).to_bytes(4, "big")
    return bytes(data)


# --- round trips ---------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(envelopes())
def test_an_envelope_survives_encoding(envelope: Envelope) -> None:
    data = encode_envelope(envelope)
    decoded = decode_envelope(data)
    assert decoded == envelope
    assert [n.to_bytes() for n in decoded.notifications] == [
        n.to_bytes() for n in envelope.notifications
    ]
    assert encode_envelope(decoded) == data
    assert len(data) == header_size(envelope.origin) + sum(
        ITEM_OVERHEAD + len(n.to_bytes()) for n in envelope.notifications
    )


@settings(max_examples=200, deadline=None)
@given(st.lists(odd_texts, min_size=1, max_size=5), origins, sequences)
def test_notifications_travel_byte_for_byte(texts: list[bytes], origin: str, first: int) -> None:
    data = raw_envelope(origin.encode("ascii"), first, *texts)
    envelope = decode_envelope(data)
    assert [n.to_bytes() for n in envelope.notifications] == texts
    assert envelope.origin == origin and envelope.sequence == first
    assert envelope.last == first + len(texts) - 1
    assert encode_envelope(envelope) == data


@pytest.mark.parametrize(
    "text",
    [
        b' \t\r\n{ "params" :{ "b":1 ,"a" : 2 } ,\n"method":"x/y" }\n',
        b'{"method":"notifications/message","params":{"data":"\\u00e9\\ud83d\\ude00\\/\\"",'
        b'"level":"info"}}',
        b'{"x":1.50e+3,"method":"m","params":null,"jsonrpc":"2.0","_":[{}, [], -0]}',
        '{"method":"\u00e9\u4e2d\U0001f600"}'.encode(),
    ],
    ids=["whitespace-and-order", "escapes", "numbers-and-extras", "raw-unicode"],
)
def test_odd_bytes_are_kept_exactly(text: bytes) -> None:
    envelope = decode_envelope(raw_envelope(b"r1", 5, text, ONE))
    assert [n.to_bytes() for n in envelope.notifications] == [text, ONE]
    again = decode_envelope(encode_envelope(envelope))
    assert again.notifications[0].to_bytes() == text


def test_an_eight_mebibyte_notification_travels_whole() -> None:
    text = b'{"method":"x/big","params":{"blob":"' + b"\xc3\xa9" * (4 * 1024 * 1024) + b'"}}'
    notification = Notification.from_bytes(text)
    data = encode_envelope(Envelope(origin="big", sequence=1, notifications=[notification]))
    assert decode_envelope(data).notifications[0].to_bytes() == text


def test_bytes_like_inputs_decode_alike() -> None:
    data = raw_envelope(b"o", 3, ONE)
    expected = decode_envelope(data)
    assert decode_envelope(bytearray(data)) == expected
    assert decode_envelope(memoryview(data)) == expected


def test_the_header_is_as_documented() -> None:
    data = encode_envelope(
        Envelope(origin="ab", sequence=258, notifications=[Notification.from_bytes(ONE)])
    )
    assert data[:4] == b"DVNE"
    assert data[4] == 1  # version
    assert data[5] == 2 and data[6:8] == b"ab"  # origin
    assert data[8:16] == b"\x00\x00\x00\x00\x00\x00\x01\x02"  # first number
    assert data[16:20] == b"\x00\x00\x00\x01"  # one notification
    assert data[20:24] == len(ONE).to_bytes(4, "big") and data[24:] == ONE


# --- totality ------------------------------------------------------------------------------


def check_total(data: bytes, limits: EnvelopeLimits = DEFAULT_LIMITS) -> Envelope | None:
    try:
        envelope = decode_envelope(data, limits=limits)
    except EnvelopeError as error:
        assert isinstance(error.reason, EnvelopeErrorReason)
        assert error.detail and str(error) == error.detail
        assert error == EnvelopeError(error.reason, error.detail, index=error.index)
        assert hash(error) == hash(EnvelopeError(error.reason, error.detail, index=error.index))
        repr(error)
        return None
    assert encode_envelope(envelope) == data
    return envelope


@settings(max_examples=400, deadline=None)
@given(envelope_bytes())
def test_decoding_plausible_bytes_is_total(data: bytes) -> None:
    check_total(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_decoding_random_bytes_is_total(data: bytes) -> None:
    assert check_total(data) is None or data.startswith(MAGIC)


@settings(max_examples=100, deadline=None)
@given(envelope_bytes(), st.integers(min_value=1, max_value=64))
def test_small_limits_are_declared_errors_too(data: bytes, scale: int) -> None:
    limits = EnvelopeLimits(
        max_size=scale * 8 + 200, max_items=1 + scale % 3, max_notification_size=scale * 8
    )
    envelope = check_total(data, limits)
    if envelope is not None:
        assert len(envelope.notifications) <= limits.max_items
        assert all(
            len(n.to_bytes()) <= limits.max_notification_size for n in envelope.notifications
        )


@pytest.mark.parametrize(
    ("data", "reason", "index"),
    [
        (b"", Reason.NOT_AN_ENVELOPE, None),
        (b"DVN", Reason.NOT_AN_ENVELOPE, None),
        (b'{"method":"m"}', Reason.NOT_AN_ENVELOPE, None),
        (MAGIC, Reason.TRUNCATED, None),
        (MAGIC + b"\x01", Reason.TRUNCATED, None),
        (raw_envelope(b"o", 0, ONE, version=3), Reason.UNKNOWN_VERSION, None),
        (raw_envelope(b"o", 0, ONE, version=0), Reason.UNKNOWN_VERSION, None),
        (raw_envelope(b"", 0, ONE), Reason.ORIGIN, None),
        (raw_envelope(b"x" * 65, 0, ONE), Reason.ORIGIN, None),
        (raw_envelope(b"a b", 0, ONE), Reason.ORIGIN, None),
        (raw_envelope(b"\xc3\xa9", 0, ONE), Reason.ORIGIN, None),
        (raw_envelope(b"o", 0, ONE)[:12], Reason.TRUNCATED, None),
        (raw_envelope(b"o", 0), Reason.COUNT, None),
        (raw_envelope(b"o", MAX_SEQUENCE, ONE, ONE), Reason.SEQUENCE, None),
        (raw_envelope(b"o", 0, ONE)[:-1], Reason.TRUNCATED, None),
        (raw_envelope(b"o", 0, ONE, ONE)[: -len(ONE) - 2], Reason.TRUNCATED, None),
        (raw_envelope(b"o", 0, ONE) + b"\x00", Reason.TRAILING, None),
        (raw_envelope(b"o", 0, ONE, b'{"method":7}'), Reason.NOTIFICATION, 1),
        (raw_envelope(b"o", 0, b""), Reason.NOTIFICATION, 0),
        (raw_envelope(b"o", 0, b'{"method":"m","x":NaN}'), Reason.NOTIFICATION, 0),
        (raw_envelope(b"o", 0, b"[" * 100_000), Reason.NOTIFICATION, 0),
    ],
)
def test_each_failure_has_its_reason(data: bytes, reason: Reason, index: int | None) -> None:
    with pytest.raises(EnvelopeError) as caught:
        decode_envelope(data)
    assert caught.value.reason is reason
    assert caught.value.index == index
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, errors.DecodeError)
    assert EnvelopeError is errors.EnvelopeError and Reason is errors.EnvelopeErrorReason


def test_the_last_number_may_be_the_largest() -> None:
    envelope = decode_envelope(raw_envelope(b"o", MAX_SEQUENCE - 1, ONE, ONE))
    assert envelope.last == MAX_SEQUENCE


# --- limits --------------------------------------------------------------------------------


def test_limits_default_to_what_a_frame_carries() -> None:
    assert DEFAULT_MAX_NOTIFICATION_SIZE == DEFAULT_MAX_FRAME_SIZE - 1
    assert EnvelopeLimits() == DEFAULT_LIMITS


@pytest.mark.parametrize(
    ("limits", "data", "reason"),
    [
        (EnvelopeLimits(max_size=200, max_notification_size=100), b"x" * 201, Reason.TOO_LARGE),
        (EnvelopeLimits(max_items=1), raw_envelope(b"o", 0, ONE, ONE), Reason.COUNT),
        (
            EnvelopeLimits(max_size=300, max_notification_size=len(ONE) - 1),
            raw_envelope(b"o", 0, ONE),
            Reason.TOO_LARGE,
        ),
    ],
    ids=["max_size", "max_items", "max_notification_size"],
)
def test_limits_are_applied(limits: EnvelopeLimits, data: bytes, reason: Reason) -> None:
    with pytest.raises(EnvelopeError) as caught:
        decode_envelope(data, limits=limits)
    assert caught.value.reason is reason


def test_an_item_length_over_the_limit_is_refused_before_reading_it() -> None:
    # A length field of 4 GiB in a short message: refused, nothing allocated.
    data = raw_envelope(b"o", 0, ONE)
    data = data[: header_size("o")] + b"\xff\xff\xff\xff"
    with pytest.raises(EnvelopeError) as caught:
        decode_envelope(data)
    assert caught.value.reason is Reason.TOO_LARGE and caught.value.index == 0


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"max_items": 0}, ValueError),
        ({"max_size": -1}, ValueError),
        ({"max_notification_size": True}, TypeError),
        ({"max_size": 1.5}, TypeError),
        ({"max_size": 100, "max_notification_size": 100}, ValueError),
    ],
)
def test_bad_limits_are_refused(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        EnvelopeLimits(**options)


# --- building envelopes --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"origin": ""}, ValueError),
        ({"origin": "a b"}, ValueError),
        ({"origin": "é"}, ValueError),
        ({"origin": "x" * 65}, ValueError),
        ({"origin": b"ab"}, TypeError),
        ({"sequence": -1}, ValueError),
        ({"sequence": 2**64}, ValueError),
        ({"sequence": True}, TypeError),
        (
            {"sequence": MAX_SEQUENCE, "notifications": [Notification("a"), Notification("b")]},
            ValueError,
        ),
        ({"notifications": []}, ValueError),
        ({"notifications": [b'{"method":"m"}']}, TypeError),
    ],
)
def test_bad_envelopes_cannot_be_built(options: dict[str, Any], error: type[Exception]) -> None:
    values: dict[str, Any] = {"origin": "o", "sequence": 0, "notifications": [Notification("m")]}
    values.update(options)
    with pytest.raises(error):
        Envelope(**values)


def test_check_origin_returns_a_good_origin() -> None:
    assert check_origin("replica-1:a.b") == "replica-1:a.b"
    with pytest.raises(ValueError):
        check_origin("x\n")


def test_encoding_takes_only_envelopes() -> None:
    with pytest.raises(TypeError):
        encode_envelope(ONE)  # type: ignore[arg-type]


# --- gaps ----------------------------------------------------------------------------------


def envelope(origin: str, first: int, count: int = 1) -> Envelope:
    return Envelope(origin=origin, sequence=first, notifications=[Notification("m")] * count)


def test_contiguous_envelopes_reveal_no_gap() -> None:
    counter = GapCounter()
    assert counter.observe(envelope("a", 7, 3)) == 0  # first sight: nothing known before
    assert counter.observe(envelope("a", 10)) == 0
    assert counter.observe(envelope("b", 1)) == 0
    assert counter.observe(envelope("a", 11, 2)) == 0
    assert (counter.gaps, counter.missing, counter.rewinds, counter.origins) == (0, 0, 0, 2)


def test_a_gap_counts_what_never_arrived() -> None:
    counter = GapCounter()
    counter.observe(envelope("a", 1, 2))  # 1, 2
    assert counter.observe(envelope("a", 6)) == 3  # 3, 4, 5 missing
    assert counter.observe(envelope("b", 1)) == 0
    assert counter.observe(envelope("b", 3)) == 1
    assert (counter.gaps, counter.missing) == (2, 4)


def test_a_rewind_is_counted_and_counting_goes_on_from_it() -> None:
    counter = GapCounter()
    counter.observe(envelope("a", 10))
    assert counter.observe(envelope("a", 1)) == 0
    assert counter.rewinds == 1
    assert counter.observe(envelope("a", 2)) == 0
    assert counter.observe(envelope("a", 2)) == 0
    assert (counter.rewinds, counter.gaps) == (2, 0)


def test_forget_starts_every_origin_afresh_and_keeps_the_counts() -> None:
    counter = GapCounter()
    counter.observe(envelope("a", 1))
    counter.observe(envelope("a", 3))
    counter.forget()
    assert counter.origins == 0
    assert counter.observe(envelope("a", 100)) == 0
    assert (counter.gaps, counter.missing) == (1, 1)


def test_origins_are_bounded_and_the_least_recent_is_forgotten() -> None:
    counter = GapCounter(max_origins=2)
    counter.observe(envelope("a", 1))
    counter.observe(envelope("b", 1))
    counter.observe(envelope("a", 2))  # a is now the most recent
    counter.observe(envelope("c", 1))  # b goes
    assert (counter.origins, counter.evicted) == (2, 1)
    assert counter.observe(envelope("a", 3)) == 0
    assert counter.observe(envelope("b", 5)) == 0  # b is new again: nothing known
    assert counter.evicted == 2


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 4), st.booleans()), max_size=40))
def test_the_gap_count_is_exactly_what_was_skipped(steps: list[tuple[str, int, bool]]) -> None:
    counter = GapCounter()
    next_number: dict[str, int] = {}
    skipped = 0
    for origin, count, skip in steps:
        first = next_number.get(origin, 1)
        if skip and origin in next_number:
            first += count
            skipped += count
        counter.observe(envelope(origin, first, count))
        next_number[origin] = first + count
    assert counter.missing == skipped
    assert counter.rewinds == 0


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (True, TypeError)])
def test_bad_max_origins_are_refused(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        GapCounter(max_origins=value)


# --- audiences (version 2) ---------------------------------------------------------------------

audience_values = st.one_of(st.none(), origins)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(notifications(), audience_values), min_size=1, max_size=6), origins)
def test_audiences_travel_with_their_notifications(
    items: list[tuple[Notification, str | None]], origin: str
) -> None:
    envelope = Envelope(
        origin=origin,
        sequence=1,
        notifications=[n for n, _ in items],
        audiences=[a for _, a in items],
    )
    data = encode_envelope(envelope)
    decoded = decode_envelope(data)
    assert decoded == envelope
    assert encode_envelope(decoded) == data
    named = any(a is not None for _, a in items)
    assert data[4] == (AUDIENCE_VERSION if named else VERSION)
    assert decoded.audiences == (tuple(a for _, a in items) if named else ())


def test_an_envelope_of_everyones_notifications_is_version_1_as_before() -> None:
    plain = Envelope(origin="o", sequence=0, notifications=[Notification.from_bytes(ONE)])
    everyone = Envelope(
        origin="o", sequence=0, notifications=[Notification.from_bytes(ONE)], audiences=[None]
    )
    assert everyone == plain and everyone.audiences == ()
    assert encode_envelope(everyone) == raw_envelope(b"o", 0, ONE)


def test_the_audience_layout_is_as_documented() -> None:
    two = Envelope(
        origin="o",
        sequence=5,
        notifications=[Notification.from_bytes(ONE)] * 2,
        audiences=["ab12", None],
    )
    item = len(ONE).to_bytes(4, "big") + ONE
    assert encode_envelope(two) == (
        MAGIC + b"\x02\x01o" + (5).to_bytes(8, "big") + (2).to_bytes(4, "big")
        + b"\x04ab12" + item + b"\x00" + item
    )  # fmt: skip


def addressed(*items: tuple[bytes, bytes]) -> bytes:
    """A version 2 envelope of origin ``o`` written by hand: (audience, JSON) pairs."""
    body = b"".join(
        bytes((len(audience),)) + audience + len(text).to_bytes(4, "big") + text
        for audience, text in items
    )
    header = MAGIC + bytes((AUDIENCE_VERSION, 1)) + b"o" + (0).to_bytes(8, "big")
    return header + len(items).to_bytes(4, "big") + body


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (addressed((b"", ONE)), Reason.AUDIENCE),  # names none: version 1 says that
        (addressed((b"x" * 65, ONE)), Reason.AUDIENCE),
        (addressed((b"a b", ONE)), Reason.AUDIENCE),
        (addressed((b"a", ONE))[: -len(ONE) - 6], Reason.TRUNCATED),
        (addressed((b"abc", ONE))[: -len(ONE) - 6], Reason.TRUNCATED),
        (addressed((b"a", ONE)) + b"\x00", Reason.TRAILING),
    ],
)
def test_a_bad_audience_is_refused_with_its_reason(data: bytes, reason: Reason) -> None:
    with pytest.raises(EnvelopeError) as raised:
        decode_envelope(data)
    assert raised.value.reason is reason


@pytest.mark.parametrize(
    ("audiences", "error"),
    [(["a", "b"], ValueError), (["a b"], ValueError), ([""], ValueError), ([7], TypeError)],
)
def test_bad_audiences_cannot_be_built(audiences: list[Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        Envelope(
            origin="o",
            sequence=0,
            notifications=[Notification.from_bytes(ONE)],
            audiences=audiences,
        )
