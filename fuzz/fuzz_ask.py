"""Fuzz the provider ask codec ``[kind][payload]``.

For any bytes, :func:`decode_ask` returns an :class:`Ask` or raises
:class:`AskError`, and nothing else; a decoded ask re-encodes to the bytes
it came from, except that kind ``4`` drops whatever follows its kind byte
(seed 000: those bytes are ignored, not rejected).

    python fuzz/fuzz_ask.py -max_total_time=60

``SEEDS`` holds one input of every kind; ``DICTIONARY`` the tokens they are made of.
"""

from __future__ import annotations

from diverge_notifications.sansio import (
    Ask,
    AskError,
    AskErrorReason,
    Exchange,
    decode_ask,
    encode_ask,
)

SEEDS = [
    b"\x04",
    b"\x04trailing",
    b"\x00null",
    b'\x00{"cursor":"c"}',
    b"\x01{}",
    b'\x02{"name":"search","arguments":{"q":"mcp"}}',
    b'\x03 {"uri":"a://b"} ',
]

DICTIONARY = [
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"null",
    b"true",
    b"false",
    b"1e400",
    b"NaN",
    b'"name"',
    b'"arguments"',
    b'"cursor"',
    b'"uri"',
    b"\\ud800",
]


def TestOneInput(data: bytes) -> None:
    try:
        ask = decode_ask(data)
    except AskError as error:
        assert isinstance(error.reason, AskErrorReason), error
        assert error.detail, error
        return
    assert isinstance(ask, Ask)
    encoded = encode_ask(ask)
    if ask.exchange is Exchange.NOTIFICATIONS:
        assert encoded == data[:1]
        assert ask.params is None
    else:
        assert encoded == data
    assert decode_ask(encoded) == ask
    repr(ask)


if __name__ == "__main__":
    from _driver import main

    main(TestOneInput)
