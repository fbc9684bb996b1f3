"""Fuzz the agents-begin channel request codec ``[tag][payload]`` (the container request page).

For any bytes, :func:`decode_channel_request` returns a
:class:`ChannelRequest` or raises :class:`AskError`, and nothing else; a
decoded request re-encodes to the bytes it came from, except that tag ``5``
drops whatever follows its tag byte (the container request page: ignored, not rejected).

    python fuzz/fuzz_channel_request.py -max_total_time=60

``SEEDS`` holds one input of every kind; ``DICTIONARY`` the tokens they are made of.
"""

from __future__ import annotations

from _driver import JSON_TOKENS, MCP_PARAMS_TOKENS, check_codec

from diverge_notifications.sansio import AskError
from diverge_notifications.sansio._errors import AskErrorReason
from diverge_notifications.sansio.asks import (
    ChannelRequest,
    ChannelRequestTag,
    decode_channel_request,
    encode_channel_request,
)

SEEDS = [
    b"\x00\x00\x00\x00\x2a",
    b"\x01null",
    b'\x02{"cursor":"c"}',
    b'\x03{"name":"search","arguments":{}}',
    b'\x04{"uri":"a://b"}',
    b"\x05",
    b"\x05trailing",
]

DICTIONARY = [*JSON_TOKENS, *MCP_PARAMS_TOKENS]


def _is_notifications(request: ChannelRequest) -> bool:
    return request.tag is ChannelRequestTag.MCP_NOTIFICATIONS


def TestOneInput(data: bytes) -> None:
    request = check_codec(
        data,
        decode_channel_request,
        encode_channel_request,
        AskError,
        AskErrorReason,
        ignores_rest=_is_notifications,
    )
    if request is None:
        return
    assert isinstance(request, ChannelRequest)
    if request.tag is ChannelRequestTag.POSTGRES:
        assert request.connection_id is not None and len(request.connection_id) == 4


if __name__ == "__main__":
    from _driver import main

    main(TestOneInput)
