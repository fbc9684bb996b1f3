"""Fuzz the agents-begin channel request codec ``[tag][payload]`` (the container request page).

For any bytes, :func:`decode_channel_request` returns a
:class:`ChannelRequest` or raises :class:`AskError`, and nothing else; a
decoded request re-encodes to the bytes it came from, except that tag ``5``
drops whatever follows its tag byte (the container request page: ignored,
not rejected). Tags ``1``-``5`` share the provider ask's payload codec
(kind = tag - 1): the same payload as an ask gets the same verdict and
params. A Postgres request is rebuilt from its id, and the constructor
refuses the combinations that page rules out.

    python fuzz/fuzz_channel_request.py -max_total_time=60

``SEEDS`` holds one input of every kind; ``DICTIONARY`` the tokens they are made of.
"""

from __future__ import annotations

from _driver import JSON_TOKENS, MCP_PARAMS_TOKENS, check_codec

from diverge_notifications.sansio import AskError, AskErrorReason
from diverge_notifications.sansio.wire.asks import (
    ChannelRequest,
    ChannelRequestTag,
    decode_ask,
    decode_channel_request,
    encode_channel_request,
)

#: The module fuzzed (tests/test_fuzz_coverage.py measures how much of it the seeds run).
TARGET = decode_channel_request.__module__

SEEDS = [
    b"\x00\x00\x00\x00\x2a",
    b"\x01null",
    b'\x02{"cursor":"c"}',
    b'\x03{"name":"search","arguments":{}}',
    b'\x04{"uri":"a://b"}',
    b"\x05",
    b"\x05trailing",
    b"\x00\x01\x02",
    b"\x03[]",
    b"\x02{",
    b"\x09",
    b"",
]

DICTIONARY = [*JSON_TOKENS, *MCP_PARAMS_TOKENS]


def _is_notifications(request: ChannelRequest) -> bool:
    return request.tag is ChannelRequestTag.MCP_NOTIFICATIONS


def _same_as_ask(data: bytes, request: ChannelRequest | None) -> None:
    """Tag ``t`` (1-5) and kind ``t - 1`` share a payload codec (the container request page)."""
    if not data or not 1 <= data[0] <= ChannelRequestTag.MCP_NOTIFICATIONS:
        return
    try:
        ask = decode_ask(bytes((data[0] - 1,)) + data[1:])
    except AskError as error:
        assert request is None and error.reason is AskErrorReason.MCP_PARAMS, error
        return
    assert request is not None, ask
    assert (request.exchange, request.params) == (ask.exchange, ask.params)


def _refused(**fields: object) -> None:
    """The constructor refuses ``fields``."""
    try:
        ChannelRequest(**fields)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return
    raise AssertionError(f"ChannelRequest accepted {fields}")


def TestOneInput(data: bytes) -> None:
    request = check_codec(
        data,
        decode_channel_request,
        encode_channel_request,
        AskError,
        AskErrorReason,
        ignores_rest=_is_notifications,
    )
    _same_as_ask(data, request)
    if request is None:
        return
    assert isinstance(request, ChannelRequest)
    assert decode_channel_request(bytearray(data)) == request
    if request.tag is ChannelRequestTag.POSTGRES:
        assert request.connection_id is not None and len(request.connection_id) == 4
        assert request.exchange is None
        _refused(tag=request.tag, connection_id=request.connection_id[:3])
        _refused(tag=request.tag, connection_id=request.connection_id, params={})
    else:
        _refused(tag=request.tag, connection_id=b"\x00\x00\x00\x00")
        _refused(tag=request.tag, params=[request.params])
    if request.tag is ChannelRequestTag.MCP_NOTIFICATIONS:
        _refused(tag=request.tag, params={})


if __name__ == "__main__":
    from _driver import main

    main(TestOneInput)
