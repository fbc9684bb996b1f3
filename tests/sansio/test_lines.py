"""The line splitter shared by ``serve --stdin`` and the bridge: bounded by the frame limit.

A line kept becomes one message, so one frame (its tag byte, then the
line): the longest line kept by default fills a frame of the default limit,
and one byte more is refused, by the splitter as by the frame decoder.
"""

from __future__ import annotations

import inspect
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio.lines import (
    DEFAULT_MAX_LINE_SIZE,
    LineSplitter,
    PlainLineSplitter,
)
from diverge_notifications.sansio.mcp.model import Notification
from diverge_notifications.sansio.wire.framing import (
    DEFAULT_MAX_FRAME_SIZE,
    FrameDecoder,
    FrameTooLarge,
    encode_frame,
)
from diverge_notifications.sansio.wire.messages import encode_message

MIB = 1024 * 1024
#: The size ``serve --stdin`` reads standard input in.
READ_SIZE = 65536


def notification_line(size: int) -> bytes:
    """A JSON notification of exactly ``size`` bytes."""
    head, tail = b'{"method":"x/big","params":{"pad":"', b'"}}'
    line = head + b"a" * (size - len(head) - len(tail)) + tail
    assert len(line) == size
    return line


def pieces(data: bytes, size: int) -> list[bytes]:
    return [data[start : start + size] for start in range(0, len(data), size)]


def test_the_default_limit_is_the_frame_limit_less_the_tag_byte() -> None:
    assert DEFAULT_MAX_LINE_SIZE == 16 * MIB - 1
    assert LineSplitter().max_size == PlainLineSplitter().max_size == DEFAULT_MAX_LINE_SIZE


@pytest.mark.parametrize("chunk", [None, READ_SIZE], ids=["whole", "in-reads"])
@pytest.mark.parametrize("size", [16 * MIB - 1, 16 * MIB], ids=["16MiB-1", "16MiB"])
def test_a_line_is_kept_when_its_frame_fits_the_frame_limit(size: int, chunk: int | None) -> None:
    line = notification_line(size)
    stream = line + b"\n" + b'{"method":"after"}\n'
    feeds = [stream] if chunk is None else pieces(stream, chunk)
    fits = size <= DEFAULT_MAX_FRAME_SIZE - 1

    numbered = LineSplitter()
    lines = [item for data in feeds for item in numbered.feed(data)] + numbered.close()
    assert lines == [(1, line if fits else None), (2, b'{"method":"after"}')]
    assert numbered.dropped == (0 if fits else 1)

    plain = PlainLineSplitter()
    kept = [item for data in feeds for item in plain.feed(data)]
    assert kept == ([line] if fits else []) + [b'{"method":"after"}']
    assert plain.dropped == (0 if fits else 1)

    # The frame decoder draws the same line: the frame of a line kept is accepted.
    decoder = FrameDecoder()
    decoder.feed(encode_frame(encode_message(Notification.from_bytes(line))))
    frame = decoder.next_frame()
    if fits:
        assert isinstance(frame, bytes) and len(frame) == DEFAULT_MAX_FRAME_SIZE
    else:
        assert frame == FrameTooLarge(DEFAULT_MAX_FRAME_SIZE + 1, DEFAULT_MAX_FRAME_SIZE)


@pytest.mark.parametrize("size", [16 * MIB - 1, 16 * MIB], ids=["16MiB-1", "16MiB"])
def test_a_last_line_without_newline_has_the_same_limit(size: int) -> None:
    line = notification_line(size)
    splitter = LineSplitter()
    fed = [item for data in pieces(line, READ_SIZE) for item in splitter.feed(data)]
    if size <= DEFAULT_MAX_LINE_SIZE:
        assert fed == []
        assert splitter.close() == [(1, line)]
    else:
        # Known to be too long as soon as it outgrows the limit, not at the end.
        assert fed == [(1, None)]
        assert splitter.close() == []


def test_max_size_must_be_positive() -> None:
    for make in (LineSplitter, PlainLineSplitter):
        with pytest.raises(ValueError, match="max_size must be positive"):
            make(0)


def test_each_drop_is_reported_once() -> None:
    drops: list[None] = []
    splitter = PlainLineSplitter(4, on_drop=lambda: drops.append(None))
    stream = b"abcd\nabcde\n" + b"x" * 50 + b"\nok\n"
    assert [line for data in pieces(stream, 3) for line in splitter.feed(data)] == [b"abcd", b"ok"]
    assert splitter.dropped == len(drops) == 2


#: Lines around a limit of 4 bytes: empty, shorter, exactly 4, one over, far over.
SAMPLE_LINES = [b"", b"a", b"abcd", b"abcde", b"x" * 30, b"\r", b"ab\r"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(SAMPLE_LINES), max_size=8),
    st.binary(max_size=12).filter(lambda tail: b"\n" not in tail),
    st.lists(st.integers(min_value=0, max_value=400), max_size=10),
)
def test_both_views_split_the_same_at_any_split(
    lines: list[bytes], tail: bytes, cuts: list[int]
) -> None:
    stream = b"".join(line + b"\n" for line in lines) + tail
    bounds = [0, *sorted(cut for cut in cuts if cut <= len(stream)), len(stream)]
    splits = [
        [stream],
        pieces(stream, 1),
        [stream[start:end] for start, end in itertools.pairwise(bounds)],
    ]
    expected = [
        (number, line if len(line) <= 4 else None) for number, line in enumerate(lines, start=1)
    ]
    last = [(len(lines) + 1, tail)] if tail and len(tail) <= 4 else []
    outgrown = [(len(lines) + 1, None)] if len(tail) > 4 else []
    for feeds in splits:
        numbered = LineSplitter(4)
        plain = PlainLineSplitter(4)
        got = [item for data in feeds for item in numbered.feed(data)]
        assert got == expected + outgrown
        assert numbered.close() == last
        kept = [line for data in feeds for line in plain.feed(data)]
        assert kept == [line for _number, line in expected if line is not None]
        assert plain.dropped == numbered.dropped == len(expected) - len(kept) + len(outgrown)


def test_the_bridge_uses_the_default_limit() -> None:
    pytest.importorskip("mcp", reason="the bridge needs the 'mcp' extra")
    from diverge_notifications.bridge import run_bridge
    from diverge_notifications.bridge._stdio import stdio_transport

    for function in (run_bridge, stdio_transport):
        default = inspect.signature(function).parameters["max_line_size"].default
        assert default == DEFAULT_MAX_LINE_SIZE
