"""The connection ends at every byte offset of an answer.

Whatever the offset, every message completed before the cut is delivered
exactly once and in order, then exactly one terminal event (StreamBroken,
or the proper terminal when the cut falls on a clean end), then one
ReaskNeeded.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio import (
    ErrorData,
    Event,
    NotificationReceived,
    NotServed,
    ReaskNeeded,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
)
from diverge_notifications.sansio.wire.framing import KEEPALIVE_FRAME
from tests.proxy_scripts import (
    CHANNEL,
    LAST_CHUNK,
    NOTIFICATIONS,
    chunk,
    error_frame,
    notification_frame,
    path_head,
    run_proxy,
    split_at,
)

ERROR = ErrorData(code=-32002, message="resource gone")
HEAD = path_head()


def chunked_answer(frames: list[bytes]) -> tuple[bytes, list[int]]:
    """HEAD + one chunk per frame + the last chunk; and where each frame's bytes end."""
    answer = HEAD
    ends = []
    for piece in frames:
        answer += b"%x\r\n" % len(piece)
        answer += piece
        ends.append(len(answer))
        answer += b"\r\n"
    return answer + LAST_CHUNK, ends


def packed_chunked_answer(frames: list[bytes], size: int) -> tuple[bytes, list[int]]:
    """HEAD + the frames packed and re-chunked every ``size`` bytes; and frame ends."""
    body = b"".join(frames)
    answer = HEAD
    position = 0  # offset in body
    body_to_answer: list[int] = []
    for start in range(0, len(body), size):
        piece = body[start : start + size]
        answer += b"%x\r\n" % len(piece)
        body_to_answer.extend(len(answer) + i for i in range(len(piece)))
        answer += piece + b"\r\n"
    ends = []
    for piece in frames:
        position += len(piece)
        ends.append(body_to_answer[position - 1] + 1)
    return answer + LAST_CHUNK, ends


def close_delimited_answer(frames: list[bytes]) -> tuple[bytes, list[int]]:
    head = path_head(body="close")
    answer = head
    ends = []
    for piece in frames:
        answer += piece
        ends.append(len(answer))
    return answer, ends


MESSAGES = [notification_frame(n) for n in NOTIFICATIONS]
FRAMES = [MESSAGES[0], KEEPALIVE_FRAME, MESSAGES[1], MESSAGES[2], KEEPALIVE_FRAME, MESSAGES[3]]
RECEIVED = [NotificationReceived(notification=n) for n in NOTIFICATIONS]


def delivered_before(cut: int, ends: list[int], frames: list[bytes]) -> list[Event]:
    """The notifications whose frames were complete before ``cut``."""
    events: list[Event] = []
    index = 0
    for frame_end, piece in zip(ends, frames, strict=True):
        if piece == KEEPALIVE_FRAME:
            continue
        if frame_end <= cut:
            events.append(RECEIVED[index])
        index += 1
    return events


def check_cut(answer: bytes, cut: int, events: list[Event], expected_messages: list[Event]) -> None:
    if cut < len(HEAD):
        assert len(events) == 2 and isinstance(events[0], StreamBroken)
        assert events[1] == ReaskNeeded()
        return
    assert events[0] == StreamOpened(channel=CHANNEL)
    assert events[1:-2] == expected_messages
    assert events[-1] == ReaskNeeded()
    terminal = events[-2]
    if cut == len(answer):
        assert terminal == StreamEnded()
    else:
        assert isinstance(terminal, StreamBroken)


@pytest.mark.parametrize(
    "build",
    [
        chunked_answer,
        lambda frames: packed_chunked_answer(frames, 97),
        lambda frames: packed_chunked_answer(frames, 3),
    ],
    ids=["chunk-per-frame", "rechunked-97", "rechunked-3"],
)
def test_a_cut_at_every_offset_of_a_chunked_answer(
    build: Callable[[list[bytes]], tuple[bytes, list[int]]],
) -> None:
    answer, ends = build(FRAMES)
    for cut in range(len(answer) + 1):
        events = run_proxy([answer[:cut]])
        check_cut(answer, cut, events, delivered_before(cut, ends, FRAMES))


def test_a_cut_at_every_offset_of_a_close_delimited_answer() -> None:
    # Here the connection's end is the body's end: clean exactly on a frame
    # boundary, broken anywhere else.
    answer, ends = close_delimited_answer(FRAMES)
    head_size = len(answer) - len(b"".join(FRAMES))
    boundaries = {head_size, *ends}
    for cut in range(len(answer) + 1):
        events = run_proxy([answer[:cut]])
        if cut < head_size:
            assert [type(e) for e in events] == [StreamBroken, ReaskNeeded]
            continue
        expected = delivered_before(cut, ends, FRAMES)
        assert events[0] == StreamOpened(channel=CHANNEL)
        assert events[1:-2] == expected
        if cut not in boundaries:
            assert isinstance(events[-2], StreamBroken)
        elif expected:
            assert events[-2] == StreamEnded()
        else:
            assert events[-2] == NotServed(status=200, reason="the path ended with no message")
        assert events[-1] == ReaskNeeded()


def test_a_cut_at_every_offset_of_an_answer_ending_in_an_error() -> None:
    frames = [MESSAGES[0], MESSAGES[1], error_frame(ERROR)]
    answer, ends = chunked_answer(frames)
    for cut in range(len(answer) + 1):
        events = run_proxy([answer[:cut]])
        if cut < len(HEAD):
            assert [type(e) for e in events] == [StreamBroken, ReaskNeeded]
            continue
        if cut >= ends[2]:
            # The error is complete: it is the terminal, whatever follows.
            assert events == [
                StreamOpened(channel=CHANNEL),
                *RECEIVED[:2],
                StreamErrored(error=ERROR),
                ReaskNeeded(),
            ]
        else:
            assert events[1:-2] == delivered_before(cut, ends[:2], frames[:2])
            assert [type(e) for e in events[-2:]] == [StreamBroken, ReaskNeeded]


@given(cut=st.integers(min_value=0), reads=st.lists(st.integers(min_value=1), max_size=10))
@settings(max_examples=100, deadline=None)
def test_a_cut_read_in_pieces_gives_the_same_events(cut: int, reads: list[int]) -> None:
    answer, _ = packed_chunked_answer(FRAMES, 41)
    cut %= len(answer) + 1
    prefix = answer[:cut]
    assert run_proxy(split_at(prefix, reads)) == run_proxy([prefix])


def test_the_cut_layouts_are_right() -> None:
    # The helpers above locate each frame's last byte; check them against
    # the answers they build, so the cut tests test the proxy, not themselves.
    for answer, ends in (
        chunked_answer(FRAMES),
        packed_chunked_answer(FRAMES, 97),
        close_delimited_answer(FRAMES),
    ):
        assert len(ends) == len(FRAMES)
        events = run_proxy([answer])
        assert events[-2] == StreamEnded()
        for frame, end in zip(FRAMES, ends, strict=True):
            assert frame[-1] == answer[end - 1]
    assert chunk(b"ab") == b"2\r\nab\r\n"
