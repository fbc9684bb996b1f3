"""The body readers against h11: the same encodings fed to both.

``diverge_notifications.sansio.bodies`` lists, in its docstring, where its
readers deliberately differ from h11's. Each case here is the head of an
answer and a body (chunked, ``Content-Length`` or close-delimited, valid or
not) fed to h11, as a client reading the response, and to the reader
``body_reader`` picks for the same head. The verdict is the content and a
clean end, or a refusal. It must be the same for both, except in the cases
marked with the number of a listed difference, where it must be exactly
that difference: the side the list says accepts does, and the other
refuses. Every case runs whole and a byte at a time for both, and at
random splits for the reader.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio.client import bodies
from diverge_notifications.sansio.client.bodies import END, body_reader
from tests.proxy_scripts import bytewise, split_at, whole

Verdict = tuple[bool, bytes]
#: The verdict on a body refused, whatever was read of it first.
REFUSED: Verdict = (False, b"")

CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
CLOSE = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n"
#: h11's default limit on an incomplete event; the reader gets the same.
LIMIT = 16 * 1024


def length(n: int) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % n


def h11_verdict(head: bytes, pieces: list[bytes], limit: int = LIMIT) -> Verdict:
    """What h11 makes of the body: its content if it ends cleanly, else a refusal."""
    client = h11.Connection(h11.CLIENT, max_incomplete_event_size=limit)
    client.send(h11.Request(method="POST", target="/requests", headers=[("Host", "x")]))
    client.send(h11.EndOfMessage())
    content = b""
    ended = False
    try:
        for piece in [head, *pieces, b""]:
            client.receive_data(piece)
            while True:
                event = client.next_event()
                if event in (h11.NEED_DATA, h11.PAUSED) or isinstance(event, h11.ConnectionClosed):
                    break
                if isinstance(event, h11.Data):
                    content += event.data
                elif isinstance(event, h11.EndOfMessage):
                    ended = True
    except h11.ProtocolError:
        return REFUSED
    return (True, content) if ended else REFUSED


def reader_verdict(head: bytes, pieces: list[bytes], limit: int = LIMIT) -> Verdict:
    """What the reader for ``head`` makes of the body, judged as the proxy judges it."""
    parser = h11.Connection(h11.CLIENT)
    parser.send(h11.Request(method="POST", target="/requests", headers=[("Host", "x")]))
    parser.send(h11.EndOfMessage())
    parser.receive_data(head)
    response = parser.next_event()
    assert isinstance(response, h11.Response)
    reader = body_reader(response, limit)
    content = b""
    for piece in [*pieces, b""]:
        reader.feed(piece)
        while True:
            got = reader.read()
            if type(got) is bytes:
                content += got
                continue
            if got is END:
                return (True, content)
            if got is not None:
                return REFUSED  # a Bad: the body breaks HTTP/1.1
            break
    # The end of file: the clean end of a close-delimited body only.
    return (True, content) if reader.ends_at_eof else REFUSED


#: The listed differences, by number: whether h11 is the side that accepts.
H11_ACCEPTS = {1: True, 2: False, 3: True, 4: True, 5: True, 6: True, 7: False, 8: True, 9: False}

#: (head, body, difference): the difference of bodies.py's list the case
#: shows, or None where both must give the same verdict.
CASES: dict[str, tuple[bytes, bytes, int | None]] = {
    # valid, read alike
    "one chunk": (CHUNKED, b"5\r\nhello\r\n0\r\n\r\n", None),
    "two chunks": (CHUNKED, b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", None),
    "no chunks": (CHUNKED, b"0\r\n\r\n", None),
    "upper-case hex": (CHUNKED, b"A\r\n0123456789\r\n0\r\n\r\n", None),
    "16 digits": (CHUNKED, b"0000000000000005\r\nhello\r\n0\r\n\r\n", None),
    "zeros in the last chunk": (CHUNKED, b"5\r\nhello\r\n000\r\n\r\n", None),
    "extensions": (CHUNKED, b"5;a=b;c\r\nhello\r\n0;last\r\n\r\n", None),
    "a quoted extension": (CHUNKED, b'5;a="b c"\r\nhello\r\n0\r\n\r\n', None),
    "an empty extension": (CHUNKED, b"5;\r\nhello\r\n0\r\n\r\n", None),
    "a NUL in an extension": (CHUNKED, b"5;a\x00b\r\nhello\r\n0\r\n\r\n", None),
    "white space after the size": (CHUNKED, b"5 \t\r\nhello\r\n0\r\n\r\n", None),
    "white space after an extension": (CHUNKED, b"5;a=b \r\nhello\r\n0\r\n\r\n", None),
    "trailer fields": (CHUNKED, b"5\r\nhello\r\n0\r\nX-A: 1\r\nX-B:  two  words \r\n\r\n", None),
    "an empty trailer value": (CHUNKED, b"5\r\nhello\r\n0\r\nX:\r\n\r\n", None),
    "obs-text in a trailer": (CHUNKED, b"5\r\nhello\r\n0\r\nX: caf\xc3\xa9\xff\r\n\r\n", None),
    "a trailer Transfer-Encoding: chunked": (
        CHUNKED,
        b"5\r\nhello\r\n0\r\nTransfer-Encoding: chunked\r\n\r\n",
        None,
    ),
    "a valid trailer Content-Length": (
        CHUNKED,
        b"5\r\nhello\r\n0\r\nContent-Length: 5\r\n\r\n",
        None,
    ),
    # invalid, refused alike
    "a size that is not hex": (CHUNKED, b"g\r\nhello\r\n0\r\n\r\n", None),
    "a 0x size": (CHUNKED, b"0x5\r\nhello\r\n0\r\n\r\n", None),
    "a negative size": (CHUNKED, b"-5\r\nhello\r\n0\r\n\r\n", None),
    "a space before the size": (CHUNKED, b" 5\r\nhello\r\n0\r\n\r\n", None),
    "an empty size line": (CHUNKED, b"\r\nhello\r\n0\r\n\r\n", None),
    "a bare LF after the size": (CHUNKED, b"5\nhello\r\n0\r\n\r\n", None),
    "a bare LF in an extension": (CHUNKED, b"5;a\nb\r\nhello\r\n0\r\n\r\n", None),
    "a bare CR after the size": (CHUNKED, b"5\r\r\nhello\r\n0\r\n\r\n", None),
    "data longer than its size": (CHUNKED, b"5\r\nhello!\r\n0\r\n\r\n", None),
    "a bare LF after the data": (CHUNKED, b"5\r\nhello\n0\r\n\r\n", None),
    "a trailer line without a colon": (CHUNKED, b"5\r\nhello\r\n0\r\nX-A\r\n\r\n", None),
    "a space before a trailer colon": (CHUNKED, b"5\r\nhello\r\n0\r\nX : y\r\n\r\n", None),
    "a trailer line starting with a colon": (CHUNKED, b"5\r\nhello\r\n0\r\n: y\r\n\r\n", None),
    "a form feed in a trailer": (CHUNKED, b"5\r\nhello\r\n0\r\nX: a\x0cb\r\n\r\n", None),
    "a NUL in a trailer": (CHUNKED, b"5\r\nhello\r\n0\r\nX: a\x00b\r\n\r\n", None),
    "a folded first trailer line": (CHUNKED, b"5\r\nhello\r\n0\r\n X: y\r\n\r\n", None),
    "cut in a size line": (CHUNKED, b"5\r\nhello\r\n1", None),
    "cut in the data": (CHUNKED, b"5\r\nhel", None),
    "cut after the data": (CHUNKED, b"5\r\nhello\r", None),
    "cut after the last chunk": (CHUNKED, b"5\r\nhello\r\n0\r\n", None),
    "cut in the trailer": (CHUNKED, b"5\r\nhello\r\n0\r\nX: y\r\n", None),
    "a huge size, cut": (CHUNKED, b"FFFFFFFFFFFFFFFF\r\nhello", None),
    # other framings
    "Content-Length": (length(5), b"hello", None),
    "Content-Length 0": (length(0), b"", None),
    "Content-Length, cut": (length(5), b"hel", None),
    "close-delimited": (CLOSE, b"anything\r\n0\r\n\x00", None),
    "close-delimited, empty": (CLOSE, b"", None),
    "204 has no body": (b"HTTP/1.1 204 No Content\r\n\r\n", b"", None),
    "chunked beats a length": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        b"5\r\nhello\r\n0\r\n\r\n",
        None,
    ),
    # the listed differences
    "17 digits": (CHUNKED, b"00000000000000005\r\nhello\r\n0\r\n\r\n", 1),
    "20 digits": (CHUNKED, b"00000000000000000005\r\nhello\r\n0\r\n\r\n", 1),
    "a space before an extension": (CHUNKED, b"5 ;a=b\r\nhello\r\n0\r\n\r\n", 2),
    "a tab before an extension": (CHUNKED, b"5\t;a\r\nhello\r\n0\r\n\r\n", 2),
    "a bare CR in an extension": (CHUNKED, b"5;a\rb\r\nhello\r\n0\r\n\r\n", 3),
    "a bare LF ends the trailer": (CHUNKED, b"5\r\nhello\r\n0\r\n\n", 4),
    "a bare LF ends a trailer line": (CHUNKED, b"5\r\nhello\r\n0\r\nX: y\n\r\n", 4),
    "bare LFs in the trailer": (CHUNKED, b"5\r\nhello\r\n0\r\nX: y\n\n", 4),
    "a folded trailer line": (CHUNKED, b"5\r\nhello\r\n0\r\nX: y\r\n  z\r\n\r\n", 5),
    "a tab-folded trailer line": (CHUNKED, b"5\r\nhello\r\n0\r\nX: y\r\n\tz\r\n\r\n", 5),
    "a control character in a trailer": (CHUNKED, b"5\r\nhello\r\n0\r\nX: a\x01b\r\n\r\n", 6),
    "a DEL in a trailer": (CHUNKED, b"5\r\nhello\r\n0\r\nX: a\x7fb\r\n\r\n", 6),
    "an escape in a trailer": (CHUNKED, b"5\r\nhello\r\n0\r\nX: \x1b[0m\r\n\r\n", 6),
    "a bad trailer Content-Length": (CHUNKED, b"5\r\nhello\r\n0\r\nContent-Length: x\r\n\r\n", 7),
    "two trailer Content-Lengths": (
        CHUNKED,
        b"5\r\nhello\r\n0\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        7,
    ),
    "a trailer Transfer-Encoding: gzip": (
        CHUNKED,
        b"5\r\nhello\r\n0\r\nTransfer-Encoding: gzip\r\n\r\n",
        7,
    ),
    "bytes after a chunked body": (CHUNKED, b"5\r\nhello\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n", 9),
    "bytes after a Content-Length body": (length(5), b"hello, and more", 9),
}


def expected_reader_verdict(name: str) -> Verdict:
    """The reader's verdict on a case: h11's, or exactly the listed difference from it."""
    head, body, difference = CASES[name]
    h11_says = h11_verdict(head, whole(body))
    if difference is None:
        return h11_says
    if H11_ACCEPTS[difference]:
        assert h11_says[0], f"{name}: h11 was to accept it (difference {difference})"
        return REFUSED
    assert not h11_says[0], f"{name}: h11 was to refuse it (difference {difference})"
    return (True, b"hello")  # what each such case's body holds


@pytest.mark.parametrize("name", list(CASES))
def test_the_reader_and_h11_differ_only_as_listed(name: str) -> None:
    head, body, _ = CASES[name]
    # h11's own verdict does not depend on the split at these sizes.
    assert h11_verdict(head, bytewise(body)) == h11_verdict(head, whole(body))
    expected = expected_reader_verdict(name)
    assert reader_verdict(head, whole(body)) == expected
    assert reader_verdict(head, bytewise(body)) == expected


@pytest.mark.parametrize("name", list(CASES))
@given(cuts=st.lists(st.integers(min_value=1, max_value=120), max_size=8))
@settings(max_examples=15, deadline=None)
def test_the_reader_gives_one_verdict_however_the_body_is_split(name: str, cuts: list[int]) -> None:
    head, body, _ = CASES[name]
    assert reader_verdict(head, split_at(body, cuts)) == reader_verdict(head, whole(body))


SMALL = 64
SMALL_HEAD = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def size_line_body(size: int) -> bytes:
    """A body whose first chunk-size line is ``size`` bytes, CRLF included."""
    return b"5;" + b"a" * (size - 4) + b"\r\nhello\r\n0\r\n\r\n"


def trailer_body(size: int) -> bytes:
    """A body whose trailer section is ``size`` bytes, its blank line included."""
    return b"5\r\nhello\r\n0\r\nX: " + b"a" * (size - 7) + b"\r\n\r\n"


@pytest.mark.parametrize("make", [size_line_body, trailer_body], ids=["size line", "trailer"])
@pytest.mark.parametrize("over", [-8, -1, 0, 1, 2, 3, 100])
def test_the_line_limits_are_exact_where_h11_is_not(
    make: Callable[[int], bytes], over: int
) -> None:
    # Difference 8: the reader's limit holds however the bytes arrive; h11's
    # holds only while a line is incomplete, against all of it but its LF.
    size = SMALL + over
    body = make(size)
    assert h11_verdict(SMALL_HEAD, whole(body), SMALL) == (True, b"hello")
    assert h11_verdict(SMALL_HEAD, bytewise(body), SMALL)[0] is (size <= SMALL + 1)
    verdict = (True, b"hello") if size <= SMALL else REFUSED
    for pieces in (whole(body), bytewise(body), split_at(body, range(3, len(body), 7))):
        assert reader_verdict(SMALL_HEAD, pieces, SMALL) == verdict


def test_every_listed_difference_is_shown_and_nothing_else_is_listed() -> None:
    assert bodies.__doc__ is not None
    listed = {int(number) for number in re.findall(r"^(\d+)\. \*\*", bodies.__doc__, re.M)}
    shown = {difference for _, _, difference in CASES.values() if difference is not None}
    assert listed == set(H11_ACCEPTS) == shown | {8}
