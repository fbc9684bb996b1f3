"""The frame layer: 4-byte big-endian length prefixes on a byte stream."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio import LocalProtocolError, errors
from diverge_notifications.sansio.wire.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    KEEPALIVE,
    KEEPALIVE_FRAME,
    FrameDecoder,
    FrameOrMarker,
    FrameTooLarge,
    encode_frame,
)

Frame = bytes | FrameTooLarge | object


def decode_pieces(
    pieces: list[bytes], *, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
) -> list[Frame]:
    """Every frame (payload, KEEPALIVE or FrameTooLarge) from ``pieces``, taken after each feed."""
    decoder = FrameDecoder(max_frame_size)
    frames: list[Frame] = []
    for piece in pieces:
        decoder.feed(piece)
        while True:
            frame: FrameOrMarker = decoder.next_frame()
            if frame is None:
                break
            frames.append(frame)
            if isinstance(frame, FrameTooLarge):
                return frames
    return frames


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted({cut for cut in cuts if 0 < cut < len(data)}), len(data)]
    return [data[start:end] for start, end in itertools.pairwise(bounds)]


payload_lists = st.lists(st.binary(max_size=300), max_size=12)


def expected_frames(payloads: list[bytes]) -> list[Frame]:
    return [payload if payload else KEEPALIVE for payload in payloads]


def test_encode_frame_is_length_then_payload() -> None:
    assert encode_frame(b"\x00{}") == b"\x00\x00\x00\x03\x00{}"
    assert encode_frame(b"") == KEEPALIVE_FRAME == b"\x00\x00\x00\x00"


def test_keepalive_is_a_marker_not_a_message() -> None:
    assert decode_pieces([KEEPALIVE_FRAME * 3]) == [KEEPALIVE] * 3
    assert repr(KEEPALIVE) == "KEEPALIVE"


@given(payload_lists)
@settings(max_examples=100)
def test_whole_and_one_byte_at_a_time_agree(payloads: list[bytes]) -> None:
    stream = b"".join(encode_frame(payload) for payload in payloads)
    expected = expected_frames(payloads)
    assert decode_pieces([stream]) == expected
    assert decode_pieces([stream[i : i + 1] for i in range(len(stream))]) == expected


@given(payload_lists, st.lists(st.integers(min_value=0, max_value=5000), max_size=20))
@settings(max_examples=150)
def test_any_split_gives_the_same_frames(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(payload) for payload in payloads)
    assert decode_pieces(split(stream, cuts)) == expected_frames(payloads)


@given(payload_lists, st.lists(st.integers(min_value=0, max_value=5000), max_size=10))
@settings(max_examples=50)
def test_feeding_many_times_before_taking_frames(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(payload) for payload in payloads)
    decoder = FrameDecoder()
    for piece in split(stream, cuts):
        decoder.feed(piece)
    frames = []
    while (frame := decoder.next_frame()) is not None:
        frames.append(frame)
    assert frames == expected_frames(payloads)
    assert decoder.at_boundary


def test_bytes_like_input_is_copied_not_kept() -> None:
    data = bytearray(encode_frame(b"abc") + encode_frame(b"de")[:3])
    decoder = FrameDecoder()
    decoder.feed(data)
    data[4:7] = b"XYZ"  # the caller reuses its buffer
    assert decoder.next_frame() == b"abc"
    decoder.feed(memoryview(b"\x02de"))
    assert decoder.next_frame() == b"de"
    assert decoder.next_frame() is None


def test_a_frame_of_exactly_the_limit_is_accepted() -> None:
    assert decode_pieces([encode_frame(b"x" * 10)], max_frame_size=10) == [b"x" * 10]


def test_an_oversized_frame_is_refused_without_buffering_it() -> None:
    decoder = FrameDecoder(max_frame_size=10)
    decoder.feed(encode_frame(b"ok") + (11).to_bytes(4, "big") + b"y" * 5)
    assert decoder.next_frame() == b"ok"
    too_large = decoder.next_frame()
    assert isinstance(too_large, FrameTooLarge)
    assert (too_large.length, too_large.limit) == (11, 10)
    assert str(too_large) == "frame of 11 bytes is larger than the limit of 10 bytes"
    assert FrameTooLarge is errors.FrameTooLarge
    assert decoder.buffered == 0
    decoder.feed(b"z" * 1000)  # ignored: the decoder is finished
    assert decoder.buffered == 0
    assert decoder.next_frame() == too_large
    assert not decoder.at_boundary


def test_a_huge_claimed_length_costs_nothing() -> None:
    # The default limit is 16 MiB; a frame claiming 4 GiB is refused as soon
    # as its prefix is complete, one byte at a time or not.
    frames = decode_pieces([b"\xff", b"\xff", b"\xff", b"\xff", b"data"])
    assert frames == [FrameTooLarge(2**32 - 1, DEFAULT_MAX_FRAME_SIZE)]


def test_partial_frame_and_boundary() -> None:
    decoder = FrameDecoder()
    assert decoder.at_boundary and decoder.partial_frame() == (0, None)
    decoder.feed(b"\x00\x00")
    assert not decoder.at_boundary and decoder.partial_frame() == (2, None)
    decoder.feed(b"\x00\x05ab")
    assert decoder.next_frame() is None
    assert decoder.partial_frame() == (6, 9)
    decoder.feed(b"cde")
    assert decoder.next_frame() == b"abcde"
    assert decoder.at_boundary and decoder.buffered == 0


def test_only_the_partial_frame_is_held_after_a_read() -> None:
    # A big read that ends with the start of a frame: the decoder keeps
    # that start, not the whole read.
    read = encode_frame(b"m" * 60_000) + encode_frame(b"n" * 100)[:30]
    decoder = FrameDecoder()
    decoder.feed(read)
    assert decoder.next_frame() == b"m" * 60_000
    assert decoder.next_frame() is None
    assert decoder.buffered == 30


def test_a_frame_completed_by_a_read_comes_first_and_the_read_is_adopted() -> None:
    # The end of a straddling frame and then whole frames: the straddling
    # one is taken first, the read itself is kept (not copied) for the rest.
    first = encode_frame(b"a" * 50)
    read = first[30:] + encode_frame(b"b" * 40) + encode_frame(b"") + encode_frame(b"c")[:2]
    decoder = FrameDecoder()
    decoder.feed(first[:30])
    decoder.feed(read)
    assert not decoder.at_boundary
    assert decoder._buffer is read  # what is held is the read itself
    assert decoder.next_payloads(1) == [b"a" * 50]
    assert decoder.next_frame() == b"b" * 40
    assert decoder.next_frame() is KEEPALIVE
    assert decoder.next_frame() is None and decoder.partial_frame() == (2, None)


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_a_completed_frame_counts_towards_next_payloads_bounds(limit: int) -> None:
    payloads = [b"x" * 20, b"y" * 20, b"z" * 20]
    stream = b"".join(map(encode_frame, payloads))
    decoder = FrameDecoder()
    decoder.feed(stream[:10])
    decoder.feed(stream[10:])
    assert decoder.next_payloads(limit) == payloads[:limit]
    assert decoder.next_payloads(10, max_bytes=1) == payloads[limit : limit + 1]


def test_a_frame_over_the_limit_is_refused_even_when_a_read_completes_it() -> None:
    decoder = FrameDecoder(max_frame_size=10)
    frame = encode_frame(b"q" * 11)
    decoder.feed(frame[:5])
    decoder.feed(frame[5:])
    assert decoder.next_frame() == FrameTooLarge(11, 10)


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_size=0)
    assert FrameDecoder(max_frame_size=7).max_frame_size == 7


def test_encode_frame_refuses_what_a_prefix_cannot_hold() -> None:
    class Huge(bytes):
        def __len__(self) -> int:
            return 2**32

    with pytest.raises(LocalProtocolError):
        encode_frame(Huge())


def test_one_byte_at_a_time_over_a_large_frame() -> None:
    # Gathering a frame byte by byte appends to one buffer; it must not
    # copy what it already holds on every byte (linear, not quadratic).
    payload = bytes(range(256)) * 200
    stream = encode_frame(payload)
    assert decode_pieces([stream[i : i + 1] for i in range(len(stream))]) == [payload]
