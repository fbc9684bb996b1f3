"""A notification's message is decoded in place, after its tag byte, as if its JSON were alone.

``decode_message`` reads the JSON of a tag-0 message without slicing it out
first; the notification, its bytes and every error must be the ones
``Notification.from_bytes`` gives for that JSON.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio import FrameError, Notification, decode_message, encode_message

GOOD = [
    b'{"method":"notifications/progress","params":{"progressToken":1,"progress":2}}',
    b' {"method":"x"} ',
    b'{"method":"x","params":null,"extra":[1,2.5,"\\u00e9"]}',
    b'{"method":"x","params":{"data":"' + b"y" * 400 + b'"}}',
]
BAD = [
    b"",
    b"   ",
    b"{",
    b'{"method":1}',
    b'{"method":"x"} {}',
    b'{"method":"x","params":[1]}',
    b'{"method":"x","a":NaN}',
    b'{"method":"x","a":1e400}',
    b'{"method":"\\ud800"}',
    b'{"method":"x","a":"\xff"}',
    b"[" * 200 + b"]" * 200,
]


@pytest.mark.parametrize("body", GOOD)
def test_decoded_in_place_is_the_same_notification(body: bytes) -> None:
    message = b"\x00" + body
    decoded = decode_message(message)
    alone = Notification.from_bytes(body)
    assert isinstance(decoded, Notification)
    assert decoded.members == alone.members
    assert decoded == alone
    assert decoded.kind is alone.kind
    assert decoded.to_bytes() == body  # lossless: the JSON after the tag byte
    assert encode_message(decoded) == message


@pytest.mark.parametrize("body", BAD)
def test_errors_in_place_are_the_same(body: bytes) -> None:
    with pytest.raises(FrameError) as alone:
        Notification.from_bytes(body)
    with pytest.raises(FrameError) as in_place:
        decode_message(b"\x00" + body)
    assert in_place.value.detail == alone.value.detail
    assert in_place.value.reason is alone.value.reason


@settings(max_examples=200)
@given(st.binary(max_size=300))
def test_any_bytes_in_place(body: bytes) -> None:
    try:
        alone: Notification | str = Notification.from_bytes(body)
    except FrameError as error:
        alone = error.detail
    try:
        decoded = decode_message(b"\x00" + body)
    except FrameError as error:
        assert alone == error.detail
    else:
        assert isinstance(alone, Notification)
        assert decoded == alone
        assert decoded.to_bytes() == body
