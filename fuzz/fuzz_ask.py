"""Fuzz the provider ask codec ``[kind][payload]``.

For any bytes, :func:`decode_ask` returns an :class:`Ask` or raises
:class:`AskError`, and nothing else; a decoded ask re-encodes to the bytes
it came from, except that kind ``4`` drops whatever follows its kind byte
(the provider notifications page: those bytes are ignored, not rejected).
The same payload under the agents-begin channel request codec (tag = kind
+ 1, the container request page) gets the same verdict and the same params,
and a ``bytearray`` the same as ``bytes``.

    python fuzz/fuzz_ask.py -max_total_time=60

``SEEDS`` holds one input of every kind; ``DICTIONARY`` the tokens they are made of.
"""

from __future__ import annotations

from _driver import JSON_TOKENS, MCP_PARAMS_TOKENS, check_codec

from diverge_notifications.sansio import (
    Ask,
    AskError,
    AskErrorReason,
    Exchange,
    decode_ask,
    encode_ask,
)
from diverge_notifications.sansio.wire.asks import (
    channel_request_for,
    decode_channel_request,
    encode_channel_request,
)

#: The module fuzzed (tests/test_fuzz_coverage.py measures how much of it the seeds run).
TARGET = decode_ask.__module__

SEEDS = [
    b"\x04",
    b"\x04trailing",
    b"\x00null",
    b'\x00{"cursor":"c"}',
    b"\x01{}",
    b'\x02{"name":"search","arguments":{"q":"mcp"}}',
    b'\x03 {"uri":"a://b"} ',
    b"\x02[1]",
    b"\x01{",
    b"\x07",
    b"",
]

DICTIONARY = [*JSON_TOKENS, *MCP_PARAMS_TOKENS, b"\\ud800"]


def _is_notifications(ask: Ask) -> bool:
    return ask.exchange is Exchange.NOTIFICATIONS


def _same_as_channel_request(data: bytes, ask: Ask | None) -> None:
    """Kind ``k`` and tag ``k + 1`` share their payload codec (the container request page)."""
    if not data or data[0] > Exchange.NOTIFICATIONS:
        return
    shifted = bytes((data[0] + 1,)) + data[1:]
    try:
        request = decode_channel_request(shifted)
    except AskError as error:
        assert ask is None and error.reason is AskErrorReason.MCP_PARAMS, error
        return
    assert ask is not None, request
    assert (request.exchange, request.params) == (ask.exchange, ask.params)
    rebuilt = channel_request_for(ask.exchange, ask.params)
    assert decode_channel_request(encode_channel_request(rebuilt)) == request


def TestOneInput(data: bytes) -> None:
    ask = check_codec(
        data, decode_ask, encode_ask, AskError, AskErrorReason, ignores_rest=_is_notifications
    )
    _same_as_channel_request(data, ask)
    if ask is None:
        return
    assert isinstance(ask, Ask)
    assert decode_ask(bytearray(data)) == ask
    if _is_notifications(ask):
        assert ask.params is None
    else:
        # The notifications ask carries no params, and params are an object.
        try:
            Ask(exchange=Exchange.NOTIFICATIONS, params=ask.params or {})
        except ValueError:
            pass
        else:
            raise AssertionError("the notifications ask was given params")
        try:
            Ask(exchange=ask.exchange, params=[ask.params])  # type: ignore[arg-type]
        except TypeError:
            pass
        else:
            raise AssertionError("Ask accepted a list as params")


if __name__ == "__main__":
    from _driver import main

    main(TestOneInput)
