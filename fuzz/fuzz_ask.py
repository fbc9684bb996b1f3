"""Fuzz the provider ask codec ``[kind][payload]``.

For any bytes, :func:`decode_ask` returns an :class:`Ask` or raises
:class:`AskError`, and nothing else; a decoded ask re-encodes to the bytes
it came from, except that kind ``4`` drops whatever follows its kind byte
(the provider notifications page: those bytes are ignored, not rejected).

    python fuzz/fuzz_ask.py -max_total_time=60

``SEEDS`` holds one input of every kind; ``DICTIONARY`` the tokens they are made of.
"""

from __future__ import annotations

from _driver import JSON_TOKENS, MCP_PARAMS_TOKENS, check_codec

from diverge_notifications.sansio import Ask, AskError, Exchange, decode_ask, encode_ask
from diverge_notifications.sansio._errors import AskErrorReason

SEEDS = [
    b"\x04",
    b"\x04trailing",
    b"\x00null",
    b'\x00{"cursor":"c"}',
    b"\x01{}",
    b'\x02{"name":"search","arguments":{"q":"mcp"}}',
    b'\x03 {"uri":"a://b"} ',
]

DICTIONARY = [*JSON_TOKENS, *MCP_PARAMS_TOKENS, b"\\ud800"]


def _is_notifications(ask: Ask) -> bool:
    return ask.exchange is Exchange.NOTIFICATIONS


def TestOneInput(data: bytes) -> None:
    ask = check_codec(
        data, decode_ask, encode_ask, AskError, AskErrorReason, ignores_rest=_is_notifications
    )
    if ask is None:
        return
    assert isinstance(ask, Ask)
    if _is_notifications(ask):
        assert ask.params is None


if __name__ == "__main__":
    from _driver import main

    main(TestOneInput)
