"""``ask URL KIND [PARAMS_JSON]``: one exchange of kinds 0-3, its result printed.

``KIND`` is ``list-tools``, ``list-resources``, ``call-tool`` or
``read-resource``; ``PARAMS_JSON`` the MCP params, a JSON object (or
``null``), sent as typed. The result is printed as one compact JSON line on
standard output (the bytes the server sent, whitespace between tokens
removed); an error answer is its ``ErrorData``, as one JSON line on
standard error, exit status 3. No connection, or no answer (a clean end
with nothing, status 200): status 1; a refusal (a status that is not 2xx:
401, 404, 503...): status 5; an answer that broke off: status 4; usage
errors: status 2. A URL that ends in ``/requests`` gets a hint that the
base URL is wanted.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys

from ..sansio import Ask, AskError, NotServed, StreamBroken, decode_ask
from ..sansio.client.urls import base_url_hint
from .output import closed_stdout, compact_json, say, silence_stdout
from .parser import ASK_KINDS, listener_connection
from .running import (
    EXIT_BROKEN,
    EXIT_ERRORED,
    EXIT_NO_CONNECTION,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    PROG,
    UsageError,
    interrupted,
    is_refusal,
)

__all__ = ["ask_of", "run_ask"]


def ask_of(kind: str, params: str | None) -> Ask:
    """The ask of ``KIND`` and ``PARAMS_JSON``; :class:`ValueError` saying why it cannot be made.

    The params are checked by the ask codec itself (strict JSON, an object
    or ``null``) and sent as typed.
    """
    exchange = ASK_KINDS[kind]
    if params is None:
        return Ask(exchange=exchange)
    try:
        raw = params.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("PARAMS_JSON is not valid text") from None
    try:
        return decode_ask(bytes((exchange,)) + raw)
    except AskError as error:
        raise ValueError(f"PARAMS_JSON: {error.detail}") from None


async def _ask(
    args: argparse.Namespace, ask: Ask, *, token: str | None, tls: ssl.SSLContext | None
) -> int:
    from ..adapters.asyncio import ExchangeError, ExchangeFailed, Proxy

    try:
        proxy = Proxy(
            args.url,
            token=token,
            allow_plaintext_token=args.allow_plaintext_token,
            ssl=tls,
        )
    except ValueError as error:
        raise UsageError(str(error)) from None
    # Closed as soon as the exchange is over: the notification ask its answer
    # unlocks is not made (ask is not a whole proxy).
    async with proxy:
        try:
            answer = await proxy.exchange(ask)
        except ExchangeError as error:
            say(compact_json(error.error.to_bytes()).decode("utf-8"))
            return EXIT_ERRORED
        except ExchangeFailed as error:
            say(f"ask: {error.reason}")
            return _failed_status(error.event)
    stdout = sys.stdout
    if stdout is None:
        raise closed_stdout()
    stdout.buffer.write(compact_json(answer.raw) + b"\n")
    stdout.flush()
    return EXIT_OK


def _failed_status(event: object) -> int:
    """The exit status of an exchange with no answer: broke off, refused, or not served."""
    if isinstance(event, StreamBroken):
        return EXIT_BROKEN
    if isinstance(event, NotServed) and is_refusal(event.status):
        return EXIT_REFUSED
    return EXIT_NO_CONNECTION


def run_ask(args: argparse.Namespace) -> int:
    """Run ``ask`` with its parsed arguments; return the exit status."""
    try:
        token, tls = listener_connection(args)
        ask = ask_of(args.kind, args.params)
    except ValueError as error:
        say(f"{PROG} ask: error: {error}")
        return EXIT_USAGE
    hint = base_url_hint(args.url)
    if hint is not None:
        say(f"ask: hint: {hint}")
    try:
        return asyncio.run(_ask(args, ask, token=token, tls=tls))
    except UsageError as error:
        say(f"{PROG} ask: error: {error}")
        return EXIT_USAGE
    except BrokenPipeError:
        # Nobody reads standard output (``ask ... | true``), or there is none.
        silence_stdout()
        return EXIT_OK
    except KeyboardInterrupt:
        return interrupted()
