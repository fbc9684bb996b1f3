"""The arguments of ``python -m diverge_notifications``, and the checks of their values.

:func:`build_parser` parses the command line; a usage error names the
command and exits 2. :func:`check_listen_url` and :func:`check_token` check
the values no parser type can, with the library's own rules.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..sansio import LogLevel
from .running import EXIT_USAGE, PROG

__all__ = ["build_parser", "check_listen_url", "check_token"]


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors name the command and exit 2."""

    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def _keepalive_option(parser: argparse.ArgumentParser, text: str) -> None:
    from ..sansio.serving import DEFAULT_KEEPALIVE_INTERVAL

    parser.add_argument(
        "--keepalive",
        type=_positive_seconds,
        default=DEFAULT_KEEPALIVE_INTERVAL,
        metavar="SECONDS",
        help=text,
    )


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _serve_limits(parser: argparse.ArgumentParser) -> None:
    """``serve``'s limits: what a stalled, slow or crowding peer may cost (docs/cli.md)."""
    from ..sansio.hub import DEFAULT_QUEUE_BYTES, DEFAULT_QUEUE_SIZE
    from ..sansio.serving import DEFAULT_BACKLOG, DEFAULT_MAX_CONNECTIONS, DEFAULT_STALL_TIMEOUT

    parser.add_argument(
        "--stall-timeout",
        type=_positive_seconds,
        default=DEFAULT_STALL_TIMEOUT,
        metavar="SECONDS",
        help="cut a path off when its listener takes no byte for this long while output "
        f"waits ({DEFAULT_STALL_TIMEOUT:g})",
    )
    parser.add_argument(
        "--max-connections",
        type=_count,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help=f"connections served at once; beyond, 503 and Retry-After ({DEFAULT_MAX_CONNECTIONS})",
    )
    parser.add_argument(
        "--queue-size",
        type=_count,
        default=DEFAULT_QUEUE_SIZE,
        metavar="N",
        help=f"notifications queued per path at most ({DEFAULT_QUEUE_SIZE})",
    )
    parser.add_argument(
        "--queue-bytes",
        type=_count,
        default=DEFAULT_QUEUE_BYTES,
        metavar="BYTES",
        help=f"bytes of notifications queued per path at most ({DEFAULT_QUEUE_BYTES})",
    )
    parser.add_argument(
        "--backlog",
        type=_count,
        default=DEFAULT_BACKLOG,
        metavar="N",
        help=f"connections the listening socket holds before they are accepted ({DEFAULT_BACKLOG})",
    )


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m diverge_notifications``."""
    parser = _Parser(
        prog=PROG,
        description="Serve, listen to and demonstrate Diverge MCP notification paths.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    demo = commands.add_parser(
        "demo",
        help="serve and listen in one process on a scripted MCP server's notifications",
        description=(
            "Serve and listen in one process on a scripted MCP server's notifications: "
            "progress, log messages, list changes, a resource update, a custom notification, "
            "an abrupt cut of the path and the re-ask. Finishes by itself."
        ),
    )
    demo.add_argument(
        "--mcp",
        action="store_true",
        help=(
            "take the notifications from the bundled example MCP server, started over "
            "stdio and relayed by the bridge, instead of the scripted one (the 'mcp' extra)"
        ),
    )

    serve = commands.add_parser(
        "serve",
        help="serve a hub of notifications until interrupted",
        description=(
            "Serve notification paths on POST /requests until interrupted (SIGINT or "
            "SIGTERM ends every open path cleanly and exits 0). The listening URL is "
            "printed on standard error: 'serving on http://HOST:PORT'."
        ),
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8080, help="port (8080; 0 picks a free one)")
    serve.add_argument("--token", help="bearer token every ask must carry")
    serve.add_argument(
        "--stdin",
        action="store_true",
        help="publish each JSON notification line read from standard input",
    )
    _keepalive_option(serve, "write a keep-alive frame after this much silence (15)")
    _serve_limits(serve)
    relay = serve.add_mutually_exclusive_group()
    relay.add_argument(
        "--mcp-stdio",
        metavar="CMD",
        help="relay the notifications of the MCP server started by this command line",
    )
    relay.add_argument(
        "--mcp-url",
        metavar="URL",
        help="relay the notifications of the MCP server at this Streamable HTTP URL",
    )
    serve.add_argument(
        "--log-level",
        choices=[level.wire for level in LogLevel],
        metavar="LEVEL",
        help="log level to ask the relayed MCP server for (debug ... emergency; default debug)",
    )

    listen = commands.add_parser(
        "listen",
        help="ask a server for notifications and print them",
        description=(
            "Ask the server at URL (its base, e.g. http://127.0.0.1:8080) for notifications "
            "and print each as one JSON line on standard output; ask again whenever a path "
            "ends, until interrupted."
        ),
    )
    listen.add_argument("url", metavar="URL", help="the server's base URL, http://HOST:PORT[/BASE]")
    listen.add_argument("--token", help="bearer token to send with each ask")
    listen.add_argument(
        "--events",
        action="store_true",
        help="print every event as one JSON line on standard error",
    )
    listen.add_argument(
        "--once",
        action="store_true",
        help="stop after the first path ends; the exit status says how it ended",
    )
    _keepalive_option(
        listen,
        "the server's keep-alive interval, as given to its --keepalive (15); "
        "three of them without data count as a broken path",
    )
    return parser


def check_listen_url(url: str) -> str:
    """Check a server base URL for ``listen``: return it, or raise ``ValueError`` saying why.

    The URL must parse, and an ask must be buildable with its host and path
    (no characters that cannot go into an HTTP request).
    """
    from ..sansio import LocalProtocolError, ProxyConnection
    from ..sansio.urls import parse_url

    try:
        endpoint = parse_url(url)
        ProxyConnection(endpoint.authority, target=endpoint.target).data_to_send()
    except (LocalProtocolError, ValueError) as error:
        raise ValueError(f"malformed URL: {error}") from None
    return url


def check_token(token: str, *, listening: bool) -> str:
    """Check a ``--token``: return it, or raise ``ValueError`` saying why it cannot be used.

    The rule is the library's own: a server refuses to be made with a token
    that is not one or more visible ASCII characters, and a listener's ask
    must be buildable with it in an ``Authorization`` field (``listening``).
    """
    from ..sansio import LocalProtocolError, ProxyConnection, ServerConnection

    try:
        ServerConnection(token=token)
        if listening:
            ProxyConnection("h:1", token=token).data_to_send()
    except (LocalProtocolError, ValueError) as error:
        # The token itself is not repeated: it may be a secret, slightly mangled.
        raise ValueError(f"unusable token: {error}") from None
    return token
