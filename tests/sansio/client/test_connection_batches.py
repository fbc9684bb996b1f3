"""The batched receive paths agree with their one-at-a-time counterparts.

* ``FrameDecoder.next_payloads(limit)`` gives the payloads ``next_frame()``
  gives, in the same order, with the same oversized-frame outcome;
* ``SequenceMachine.receive_payloads`` gives the events ``receive_payload``
  gives, message by message;
* the chunked body reader's whole-chunk fast path gives the events the
  step-by-step reading gives, whatever the split of the answer and however
  many reads arrive between two looks at the events.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio import (
    NEED_DATA,
    ErrorData,
    Event,
    Notification,
    NotificationReceived,
    Profile,
    ProxyConnection,
    ReaskNeeded,
    StreamEnded,
    StreamOpened,
    encode_message,
)
from diverge_notifications.sansio.client.bodies import END as _END
from diverge_notifications.sansio.client.bodies import Bad as _Bad
from diverge_notifications.sansio.client.bodies import ChunkedBody as _ChunkedBody
from diverge_notifications.sansio.client.sequence import SequenceMachine
from diverge_notifications.sansio.wire.framing import (
    KEEPALIVE,
    KEEPALIVE_FRAME,
    FrameDecoder,
    FrameTooLarge,
    encode_frame,
)
from tests.proxy_scripts import (
    AUTHORITY,
    CHANNEL,
    NOTIFICATIONS,
    bytewise,
    chunk,
    error_frame,
    frame,
    notification_frame,
    path_head,
    run_proxy,
    split_at,
    whole,
)
from tests.strategies import error_datas, message_bytes, notifications

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- frames -------------------------------------------------------------------------


@st.composite
def frame_streams(draw: st.DrawFn) -> tuple[bytes, int, list[bytes], FrameTooLarge | None]:
    """A stream of frames for a small ``max_frame_size``; maybe an oversized frame in it.

    Returns the stream, the limit, the payloads before any oversized frame
    and the ``FrameTooLarge`` the decoder must end with (or ``None``).
    """
    limit = draw(st.integers(min_value=1, max_value=12))
    items = draw(
        st.lists(
            st.one_of(st.binary(min_size=1, max_size=limit), st.just(b"")),
            max_size=25,
        )
    )
    stream = b"".join(encode_frame(item) for item in items)
    payloads = [item for item in items if item]
    too_large: FrameTooLarge | None = None
    if draw(st.booleans()):
        at = draw(st.integers(min_value=0, max_value=len(items)))
        before = items[:at]
        length = draw(
            st.one_of(
                st.integers(min_value=limit + 1, max_value=limit + 5),
                st.just(2**32 - 1),
            )
        )
        # What follows the oversized prefix is never read: valid frames,
        # part of the frame it claims, or nothing.
        after = draw(st.sampled_from([b"", b"x" * limit, stream]))
        stream = b"".join(encode_frame(item) for item in before)
        stream += length.to_bytes(4, "big") + after
        payloads = [item for item in before if item]
        too_large = FrameTooLarge(length, limit)
    return stream, limit, payloads, too_large


cut_lists = st.lists(st.integers(min_value=0, max_value=600), max_size=12)


def one_at_a_time(pieces: Sequence[bytes], limit: int) -> tuple[list[Any], list[Any]]:
    """Payloads and oversized outcome with ``next_frame``; and the decoder's state per piece."""
    decoder = FrameDecoder(limit)
    taken: list[Any] = []
    states: list[Any] = []
    for piece in pieces:
        decoder.feed(piece)
        while True:
            got = decoder.next_frame()
            if got is None or isinstance(got, FrameTooLarge):
                break
            if got is not KEEPALIVE:
                taken.append(got)
        if isinstance(got, FrameTooLarge):
            taken.append(got)
            break
        states.append((decoder.buffered, decoder.at_boundary, decoder.partial_frame()))
    return taken, states


def batched(
    pieces: Sequence[bytes],
    limit: int,
    batch_limits: Iterator[int],
    interleave: Iterator[bool],
    byte_limits: Iterator[int | None] | None = None,
) -> tuple[list[Any], list[Any]]:
    """The same with ``next_payloads``, interleaved with ``next_frame`` at random.

    With ``byte_limits``, each batch is also bounded in bytes.
    """
    decoder = FrameDecoder(limit)
    taken: list[Any] = []
    states: list[Any] = []
    for piece in pieces:
        decoder.feed(piece)
        while True:
            if next(interleave):
                got = decoder.next_frame()
                if got is None:
                    break
                if isinstance(got, FrameTooLarge):
                    taken.append(got)
                    return taken, states
                if got is not KEEPALIVE:
                    taken.append(got)
                continue
            batch_limit = next(batch_limits)
            max_bytes = next(byte_limits) if byte_limits is not None else None
            payloads = decoder.next_payloads(batch_limit, max_bytes)
            if payloads is None:
                failed = decoder.next_frame()
                assert isinstance(failed, FrameTooLarge)
                # Finished: every later call says so again, and feeding is ignored.
                decoder.feed(b"\x00\x00\x00\x01x")
                assert decoder.next_payloads(batch_limit) is None
                assert decoder.next_frame() == failed
                assert not decoder.at_boundary
                taken.append(failed)
                return taken, states
            assert len(payloads) <= batch_limit
            if max_bytes is not None:
                # None is taken once those taken hold max_bytes.
                assert sum(map(len, payloads[:-1])) < max_bytes
            assert all(type(payload) is bytes for payload in payloads)
            taken.extend(payloads)
            if not payloads:
                break
        states.append((decoder.buffered, decoder.at_boundary, decoder.partial_frame()))
    return taken, states


@given(
    frame_streams(),
    cut_lists,
    st.lists(st.integers(min_value=1, max_value=4), min_size=1),
    st.lists(st.booleans(), min_size=1),
    st.lists(st.one_of(st.none(), st.integers(min_value=1, max_value=40)), min_size=1),
)
@FAST
def test_next_payloads_gives_what_next_frame_gives(
    case: tuple[bytes, int, list[bytes], FrameTooLarge | None],
    cuts: list[int],
    batch_limits: list[int],
    interleave: list[bool],
    byte_limits: list[int | None],
) -> None:
    stream, limit, payloads, too_large = case
    expected = [*payloads, too_large] if too_large is not None else payloads
    for pieces in (split_at(stream, cuts), bytewise(stream), whole(stream)):
        reference = one_at_a_time(pieces, limit)
        assert reference[0] == expected
        only_batches = batched(pieces, limit, cycle(batch_limits), cycle([False]))
        assert only_batches == reference
        mixed = batched(pieces, limit, cycle(batch_limits), cycle(interleave))
        assert mixed == reference
        bounded = batched(pieces, limit, cycle(batch_limits), cycle(interleave), cycle(byte_limits))
        assert bounded == reference


def cycle(values: Sequence[Any]) -> Iterator[Any]:
    while True:
        yield from values


@pytest.mark.parametrize("batch_limit", [1, 2, 3, 100])
def test_next_payloads_stops_at_the_limit_before_an_oversized_frame(batch_limit: int) -> None:
    decoder = FrameDecoder(4)
    decoder.feed(encode_frame(b"a") + KEEPALIVE_FRAME + encode_frame(b"bc") + b"\x00\x00\x00\x05")
    taken: list[bytes] = []
    while (payloads := decoder.next_payloads(batch_limit)) is not None:
        assert payloads  # every frame before the oversized one is complete
        taken += payloads
    assert taken == [b"a", b"bc"]
    assert decoder.next_frame() == FrameTooLarge(5, 4)


def test_next_payloads_on_a_gathered_buffer() -> None:
    # Frames that straddle many feeds are gathered in a bytearray: the
    # payloads taken out of it are bytes, and do not change when it does.
    stream = encode_frame(b"abcdef") + encode_frame(b"gh") + KEEPALIVE_FRAME + encode_frame(b"i")
    decoder = FrameDecoder()
    decoder.feed(stream[:9])
    for index in range(9, len(stream) - 2):
        decoder.feed(stream[index : index + 1])
    first = decoder.next_payloads(1)
    assert first == [b"abcdef"]
    assert decoder.next_payloads(5) == [b"gh"]
    decoder.feed(stream[-2:])
    assert decoder.next_payloads(5) == [b"i"]
    assert decoder.at_boundary
    assert first == [b"abcdef"]


# --- the sequence machine ------------------------------------------------------------

# Undecodable messages, from the shared strategies and a few fixed ones.
_UNDECODABLE = [b"", b"\x00", b"\x00{not json", b"\x07{}", b"\x01{}", b"\x00[]", b"\xff"]

payloads = st.one_of(
    notifications().map(encode_message),
    notifications().map(encode_message),
    error_datas().map(encode_message),
    message_bytes(),
    st.sampled_from(_UNDECODABLE),
)


def machine_events(
    profile: Profile,
    batches: Sequence[Sequence[bytes]],
    *,
    opened: bool,
    end: str,
    batched: bool,
) -> tuple[list[Event], int, Any]:
    machine = SequenceMachine(profile)
    if opened:
        machine.open(CHANNEL)
    events: list[Event] = []
    for batch in batches:
        if batched:
            # Sometimes a one-shot iterator rather than a list.
            machine.receive_payloads(iter(batch) if len(batch) % 2 else list(batch))
        else:
            for payload in batch:
                machine.receive_payload(payload)
        while (event := machine.next_event()) is not NEED_DATA:
            assert isinstance(event, Event)
            events.append(event)
    if end == "finish":
        machine.receive_finish(status=200)
    elif end == "lost":
        machine.connection_lost()
    while (event := machine.next_event()) is not NEED_DATA:
        assert isinstance(event, Event)
        events.append(event)
    return events, machine.messages, machine.state


def event_bytes(events: Sequence[Event]) -> list[Any]:
    """What equality of events does not compare: the exact bytes of each message."""
    out: list[Any] = []
    for event in events:
        if isinstance(event, NotificationReceived):
            out.append(event.notification.to_bytes())
        else:
            out.append(repr(event))
    return out


@given(
    st.sampled_from(list(Profile)),
    st.lists(st.lists(payloads, max_size=6), max_size=5),
    st.booleans(),
    st.sampled_from(["open", "finish", "lost"]),
)
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_receive_payloads_gives_what_receive_payload_gives(
    profile: Profile, batches: list[list[bytes]], opened: bool, end: str
) -> None:
    one_by_one = machine_events(profile, batches, opened=opened, end=end, batched=False)
    together = machine_events(profile, batches, opened=opened, end=end, batched=True)
    assert together == one_by_one
    assert event_bytes(together[0]) == event_bytes(one_by_one[0])
    # And the batches are only a grouping: all at once gives the same.
    flat = [[payload for batch in batches for payload in batch]]
    assert machine_events(profile, flat, opened=opened, end=end, batched=True) == one_by_one


@pytest.mark.parametrize("profile", list(Profile))
def test_receive_payloads_discards_what_follows_the_end(profile: Profile) -> None:
    error = encode_message(ErrorData(code=-1, message="gone"))
    note = encode_message(NOTIFICATIONS[0])
    batch = [note, b"\x07", error, note, b"", error]
    one_by_one = machine_events(profile, [batch], opened=True, end="open", batched=False)
    together = machine_events(profile, [batch], opened=True, end="open", batched=True)
    assert together == one_by_one
    events, messages, _ = together
    assert messages == 3
    assert isinstance(events[-1], ReaskNeeded)


# --- the chunked body reader ------------------------------------------------------------

_ERROR = ErrorData(code=-32000, message="over")
_FRAME_POOL = [
    *(notification_frame(note) for note in NOTIFICATIONS),
    KEEPALIVE_FRAME,
    frame(b"\x00{not json"),
    frame(b"\x07{}"),
]


@st.composite
def size_lines(draw: st.DrawFn, size: int) -> bytes:
    """A chunk-size line for ``size``: maybe zero-padded, upper case, with extensions."""
    digits = b"%x" % size
    if draw(st.booleans()):
        digits = digits.upper()
    digits = b"0" * draw(st.integers(min_value=0, max_value=16 - len(digits))) + digits
    extension = draw(
        st.sampled_from([b"", b"", b";x", b";x=yz", b" ;name=value;flag", b'\t;q="a b"', b";"])
    )
    return digits + extension + b"\r\n"


@st.composite
def chunked_answers(draw: st.DrawFn) -> tuple[bytes, Profile]:
    """A whole answer with a chunked body: frames re-chunked at random, odd size lines."""
    profile = draw(st.sampled_from(list(Profile)))
    frames = draw(st.lists(st.sampled_from(_FRAME_POOL), max_size=8))
    if draw(st.booleans()):
        frames.append(error_frame(_ERROR))
    body = b"".join(frames)
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(body) - 1)), max_size=8))))
    pieces = split_at(body, cuts) if body else []
    answer = path_head()
    for piece in pieces:
        answer += draw(size_lines(len(piece))) + piece + b"\r\n"
    ending = draw(st.sampled_from(["last", "last", "trailers", "none"]))
    if ending == "last":
        answer += draw(size_lines(0)) + b"\r\n"
    elif ending == "trailers":
        answer += b"0\r\nX-Checksum: 1\r\nX-Other: two\r\n\r\n"
    return answer, profile


def run_in_groups(
    pieces: Sequence[bytes], groups: Iterator[int], *, eof: bool = True, **options: Any
) -> list[Event]:
    """Every event, with one to three reads fed between two looks at the events."""
    connection = ProxyConnection(AUTHORITY, **options)
    connection.data_to_send()
    events: list[Event] = []
    index = 0
    while index < len(pieces):
        for piece in pieces[index : index + next(groups)]:
            connection.receive_data(piece)
            index += 1
        drain(connection, events)
    if eof:
        connection.receive_data(b"")
        drain(connection, events)
    return events


def drain(connection: ProxyConnection, events: list[Event]) -> None:
    while (event := connection.next_event()) is not NEED_DATA:
        assert isinstance(event, Event)
        events.append(event)


@given(
    chunked_answers(),
    st.lists(st.integers(min_value=0, max_value=1200), max_size=14),
    st.lists(st.integers(min_value=1, max_value=3), min_size=1, max_size=6),
)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_chunked_reading_does_not_depend_on_the_split(
    case: tuple[bytes, Profile], cuts: list[int], groups: list[int]
) -> None:
    answer, profile = case
    reference = run_proxy(bytewise(answer), profile=profile)
    assert isinstance(reference[0], StreamOpened)
    assert run_proxy(whole(answer), profile=profile) == reference
    assert run_proxy(split_at(answer, cuts), profile=profile) == reference
    assert run_in_groups(split_at(answer, cuts), cycle(groups), profile=profile) == reference
    assert run_in_groups(bytewise(answer), cycle(groups), profile=profile) == reference


def read_chunked(pieces: Sequence[bytes], max_line: int) -> list[Any]:
    """What a chunked body reader gives: its data joined, then how it stopped."""
    body = _ChunkedBody(max_line)
    data = b""
    for piece in pieces:
        body.feed(piece)
        while True:
            got = body.read()
            if type(got) is bytes:
                data += got
                continue
            if got is None:
                break
            return [data, got.reason if isinstance(got, _Bad) else got]
    return [data, None]


@pytest.mark.parametrize("max_line", [16, 17, 18, 19, 20])
@pytest.mark.parametrize("digits", [14, 15, 16])
def test_size_line_limit_is_exact_with_and_without_the_fast_path(
    max_line: int, digits: int
) -> None:
    # Below 18 bytes a plain size line of 16 digits may not fit, and whole
    # chunks are not taken at once: the limit must hold either way.
    line = b"%0*x\r\n" % (digits, 3)
    body = line + b"abc\r\n" + line + b"def\r\n0\r\n\r\n"
    expected: list[Any]
    if len(line) <= max_line:
        expected = [b"abcdef", _END]
    else:
        expected = [
            b"",
            f"the answer's chunk-size line is larger than max_head_size ({max_line} bytes)",
        ]
    assert read_chunked(whole(body), max_line) == expected
    assert read_chunked(bytewise(body), max_line) == expected
    assert read_chunked(split_at(body, [len(line) + 5]), max_line) == expected


# --- the regression: a size line with an extension straddling reads ---------------------


def straddling_answer() -> tuple[list[bytes], bytes]:
    """The reads of the regression, and the same answer whole.

    A notification frame ends the body: all but its last three bytes in an
    ordinary chunk, then ``1\\r\\n<A>\\r\\n``, then the size line
    ``00000002;x=yz`` of a chunk ``<BB>``, where ``A`` and ``BB`` are the
    frame's last three bytes. The size line is cut after its seventh digit
    and again after ``2;x``.
    """
    note = notification_frame(NOTIFICATIONS[1])
    a, bb = note[-3:-2], note[-2:]
    before = path_head() + chunk(KEEPALIVE_FRAME + note[:-3])
    reads = [
        before,
        b"1\r\n" + a + b"\r\n0000000",
        b"2;x",
        b"=yz\r\n" + bb + b"\r\n0\r\n\r\n",
    ]
    return reads, b"".join(reads)


EXPECTED_STRADDLING = [
    StreamOpened(channel=CHANNEL),
    NotificationReceived(notification=NOTIFICATIONS[1]),
    StreamEnded(),
    ReaskNeeded(),
]


def test_size_line_with_extension_straddling_reads() -> None:
    reads, answer = straddling_answer()
    connection = ProxyConnection(AUTHORITY)
    connection.data_to_send()
    events: list[Event] = []
    connection.receive_data(reads[0])
    drain(connection, events)
    assert events == [StreamOpened(channel=CHANNEL)]
    connection.receive_data(reads[1])
    connection.receive_data(reads[2])
    drain(connection, events)
    assert events == [StreamOpened(channel=CHANNEL)]
    connection.receive_data(reads[3])
    drain(connection, events)
    connection.receive_data(b"")
    drain(connection, events)
    assert events == run_proxy(whole(answer)) == EXPECTED_STRADDLING


@pytest.mark.parametrize(
    "grouping", [[1, 1, 1, 1], [1, 2, 1], [2, 2], [1, 3], [4], [2, 1, 1], [3, 1]]
)
@pytest.mark.parametrize("profile", list(Profile))
def test_size_line_with_extension_straddling_reads_any_grouping(
    grouping: list[int], profile: Profile
) -> None:
    reads, answer = straddling_answer()
    events = run_in_groups(reads, iter(grouping), profile=profile)
    assert events == run_proxy(whole(answer), profile=profile)
    assert events == run_proxy(bytewise(answer), profile=profile)
    if profile is Profile.PROVIDER:
        assert events == EXPECTED_STRADDLING


@pytest.mark.parametrize("cut", range(1, 40))
def test_straddling_tail_cut_anywhere(cut: int) -> None:
    reads, answer = straddling_answer()
    tail = b"".join(reads[1:])
    pieces = [reads[0], *split_at(tail, [cut, cut + 3])]
    for groups in ([1], [2], [3], [1, 2]):
        assert run_in_groups(pieces, cycle(groups)) == EXPECTED_STRADDLING
    assert run_proxy(whole(answer)) == EXPECTED_STRADDLING


def straddling_bodies() -> list[bytes]:
    """Chunked bodies mixing plain size lines, zero-padded ones and ones with extensions."""
    note = notification_frame(NOTIFICATIONS[3])
    first, second, third = note[:5], note[5:7], note[7:]
    return [
        b"1\r\n" + first[:1] + b"\r\n00000002;x=yz\r\n" + first[1:3] + b"\r\n"
        b"%x\r\n" % len(first[3:] + second) + first[3:] + second + b"\r\n"
        b"%x;e\r\n" % len(third) + third + b"\r\n0\r\n\r\n",
        b"00000005\r\n" + first + b"\r\n2;x\r\n" + second + b"\r\n"
        b"%X\r\n" % len(third) + third + b"\r\n0;end\r\n\r\n",
    ]


@pytest.mark.parametrize("body", straddling_bodies())
@pytest.mark.parametrize("drain_between", [True, False])
def test_every_three_way_split_of_the_body(body: bytes, drain_between: bool) -> None:
    # Each read ends anywhere: in a size line, before or after its
    # extension, in the data, in a CRLF. The events are always those of the
    # whole answer.
    head = path_head()
    expected = run_proxy(whole(head + body))
    assert expected == [
        StreamOpened(channel=CHANNEL),
        NotificationReceived(notification=NOTIFICATIONS[3]),
        StreamEnded(),
        ReaskNeeded(),
    ]
    for first in range(1, len(body)):
        for second in range(first + 1, len(body)):
            reads = [head, body[:first], body[first:second], body[second:]]
            grouping = [1, 1, 1, 1] if drain_between else [1, 2, 1]
            assert run_in_groups(reads, iter(grouping)) == expected, (first, second)


def decoded_before_the_first_is_taken(payload_size: int, count: int) -> int:
    """How many of ``count`` notifications, all in one read, one step decodes."""
    data = {"text": "x" * payload_size}
    note = Notification.from_json({"method": "notifications/message", "params": data})
    connection = ProxyConnection(AUTHORITY)
    connection.data_to_send()
    connection.receive_data(path_head() + chunk(notification_frame(note) * count))
    assert connection.next_event() == StreamOpened(channel=CHANNEL)
    assert connection.next_event() == NotificationReceived(notification=note)
    return connection.messages


def test_a_step_decodes_a_run_of_short_messages_but_a_large_one_alone() -> None:
    # What one step decodes stays alive until the caller takes it: short
    # messages are decoded 64 at a time, or 6 KiB of them, a large one on
    # its own.
    assert decoded_before_the_first_is_taken(1, 100) == 64
    assert 32 < decoded_before_the_first_is_taken(100, 100) < 64
    assert decoded_before_the_first_is_taken(3500, 8) == 2
    assert decoded_before_the_first_is_taken(8000, 8) == 1
