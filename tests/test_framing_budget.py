"""Batches bounded in bytes (``next_payloads(limit, max_bytes)``) give what ``next_frame`` gives.

A batch takes no payload once those taken hold ``max_bytes`` bytes (the
first is always taken), and whatever the bound, the frames come out in the
same order, with the same state left in the decoder, as one at a time:
whole, byte at a time and at random splits.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from proxy_scripts import bytewise, split_at, whole

from diverge_notifications.sansio.framing import KEEPALIVE, FrameDecoder, encode_frame

payload_lists = st.lists(st.binary(min_size=0, max_size=40), max_size=12)


def one_at_a_time(pieces: list[bytes]) -> tuple[list[bytes], list[tuple[int, bool]]]:
    decoder = FrameDecoder()
    taken: list[bytes] = []
    states = []
    for piece in pieces:
        decoder.feed(piece)
        while (frame := decoder.next_frame()) is not None:
            if frame is not KEEPALIVE:
                assert isinstance(frame, bytes)
                taken.append(frame)
        states.append((decoder.buffered, decoder.at_boundary))
    return taken, states


def in_budgets(
    pieces: list[bytes], limit: int, max_bytes: int
) -> tuple[list[bytes], list[tuple[int, bool]]]:
    decoder = FrameDecoder()
    taken: list[bytes] = []
    states = []
    for piece in pieces:
        decoder.feed(piece)
        while payloads := decoder.next_payloads(limit, max_bytes):
            assert len(payloads) <= limit
            # Stopped as soon as the bound was reached: all but the last are below it.
            assert sum(map(len, payloads[:-1])) < max_bytes
            taken += payloads
        states.append((decoder.buffered, decoder.at_boundary))
    return taken, states


@settings(max_examples=200, deadline=None)
@given(
    payload_lists,
    st.lists(st.integers(min_value=0, max_value=10**6), max_size=6),
    st.integers(min_value=1, max_value=5),
    st.integers(min_value=1, max_value=120),
)
def test_budgets_give_what_next_frame_gives(
    payloads: list[bytes], cuts: list[int], limit: int, max_bytes: int
) -> None:
    stream = b"".join(encode_frame(payload) for payload in payloads)
    offsets = [cut % (len(stream) + 1) for cut in cuts]
    for pieces in (whole(stream), bytewise(stream), split_at(stream, offsets)):
        reference = one_at_a_time(pieces)
        assert reference[0] == [payload for payload in payloads if payload]
        assert in_budgets(pieces, limit, max_bytes) == reference


def test_the_first_payload_is_taken_whatever_the_budget() -> None:
    decoder = FrameDecoder()
    decoder.feed(encode_frame(b"x" * 50) + encode_frame(b"y") + encode_frame(b"z"))
    assert decoder.next_payloads(10, 1) == [b"x" * 50]
    assert decoder.next_payloads(10, 2) == [b"y", b"z"]
    assert decoder.next_payloads(10, 2) == []
    assert decoder.at_boundary
