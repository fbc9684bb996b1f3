"""The arguments of ``python -m diverge_notifications``, and the checks of their values.

:func:`build_parser` parses the command line; a usage error names the
command and exits 2. :func:`check_listen_url` and :func:`check_token` check
the values no parser type can, with the library's own rules.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any, Final

from ..sansio import Exchange, LogLevel
from .running import EXIT_USAGE, PROG

__all__ = ["ASK_KINDS", "build_parser", "check_listen_url", "check_token"]

#: The ``KIND`` names of ``ask``, and the exchange each one is.
ASK_KINDS: Final[Mapping[str, Exchange]] = {
    "list-tools": Exchange.LIST_TOOLS,
    "list-resources": Exchange.LIST_RESOURCES,
    "call-tool": Exchange.CALL_TOOL,
    "read-resource": Exchange.READ_RESOURCE,
}


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


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535: {text!r}")
    return value


def _positive_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _relay_options(serve: argparse.ArgumentParser) -> None:
    """``serve``'s MCP servers (docs/relay.md): what they are, and how to reach them."""
    relay = serve.add_argument_group(
        "MCP servers",
        "relay the notifications of MCP servers and forward the exchanges of kinds 0-3 "
        "to them (the 'mcp' extra)",
    )
    relay.add_argument(
        "--mcp-config",
        metavar="FILE",
        help="the MCP servers of an mcpServers JSON file, as MCP clients write it",
    )
    relay.add_argument(
        "--mcp-stdio",
        metavar="CMD",
        action="append",
        help="an MCP server started by this command line (repeatable)",
    )
    relay.add_argument(
        "--mcp-url",
        metavar="URL",
        action="append",
        help="an MCP server at this Streamable HTTP URL (repeatable)",
    )
    relay.add_argument(
        "--mcp-env",
        metavar="K=V",
        action="append",
        help="add to the environment of every --mcp-stdio server (repeatable)",
    )
    relay.add_argument(
        "--mcp-header",
        metavar="'K: V'",
        action="append",
        help="send with every request to every --mcp-url server (repeatable)",
    )
    relay.add_argument(
        "--mcp-resource",
        metavar="URI",
        action="append",
        help="subscribe to this resource of the --mcp-stdio/--mcp-url servers only "
        "(repeatable; default: every listed resource)",
    )
    relay.add_argument(
        "--mcp-mode",
        metavar="auto|listen|legacy",
        help="how the --mcp-stdio/--mcp-url servers are asked for notifications (auto)",
    )
    relay.add_argument(
        "--mcp-max-attempts",
        type=_positive_count,
        metavar="N",
        help="give a server up after N failed connections in a row, and exit 1 once every "
        "server is given up (default: retry for ever)",
    )


def _ask_command(commands: Any) -> None:
    """``ask URL KIND [PARAMS_JSON]``: one exchange of kinds 0-3."""
    ask = commands.add_parser(
        "ask",
        help="make one exchange of kinds 0-3 and print its result",
        description=(
            "Make one exchange of kinds 0-3 with the server at URL (its base, e.g. "
            "http://127.0.0.1:8080) and print its result as one JSON line on standard "
            "output; an error answer is printed on standard error (exit status 3)."
        ),
    )
    ask.add_argument("url", metavar="URL", help="the server's base URL, http://HOST:PORT[/BASE]")
    ask.add_argument("kind", metavar="KIND", choices=list(ASK_KINDS), help=", ".join(ASK_KINDS))
    ask.add_argument(
        "params",
        metavar="PARAMS_JSON",
        nargs="?",
        help='the MCP params, a JSON object, e.g. \'{"name": "echo", "arguments": {}}\'',
    )
    ask.add_argument("--token", help="bearer token to send with the ask")


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m diverge_notifications``."""
    parser = _Parser(
        prog=PROG,
        description=(
            "Serve, listen to and demonstrate Diverge MCP notification paths, "
            "and ask the exchanges of kinds 0-3."
        ),
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
    _relay_options(serve)
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
    _ask_command(commands)
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
