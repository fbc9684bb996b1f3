"""The arguments of ``python -m diverge_notifications``, and the checks of their values.

:func:`build_parser` parses the command line; a usage error names the
command and exits 2. :func:`check_listen_url` and :func:`check_token` check
the values no parser type can, with the library's own rules;
:func:`resolve_token` finds the token of ``serve`` and ``listen`` where
secrets live (:data:`TOKEN_SOURCES`).
"""

from __future__ import annotations

import argparse
import os
import ssl
import sys
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from ..sansio import Exchange, LogLevel
from .running import EXIT_USAGE, PROG

__all__ = [
    "ASK_KINDS",
    "LIST_CHANGED_KINDS",
    "MAX_TOKEN_FILE_LINE",
    "NO_LOG_LEVEL",
    "TOKEN_ENV",
    "TOKEN_SOURCES",
    "build_parser",
    "check_listen_url",
    "check_plaintext_token",
    "check_token",
    "listen_tls_context",
    "listener_connection",
    "read_token_file",
    "read_token_list",
    "resolve_serve_tokens",
    "resolve_token",
    "serve_tls_context",
]

#: The environment variable ``serve`` and ``listen`` take the token from when no option gives one.
TOKEN_ENV: Final = "DIVERGE_TOKEN"
#: The longest first line of a ``--token-file`` read, in bytes (no ask head could hold more).
MAX_TOKEN_FILE_LINE: Final = 64 * 1024
#: The most tokens ``serve --token-file`` reads.
MAX_TOKEN_FILE_TOKENS: Final = 1024
#: What ``serve --token-file`` says it reads.
SERVE_TOKEN_FILE_HELP: Final = (
    f"accept every token listed in this file, one a line (blank lines and lines "
    f"starting with # are skipped); each path hears the progress of the calls made "
    f"under its own token (wins over ${TOKEN_ENV})"
)
#: Where the token comes from, in the help's words: what wins over what.
TOKEN_SOURCES: Final = (
    f"The token comes from --token or --token-file (not both), else from ${TOKEN_ENV}: "
    f"an option wins over the environment. --token is visible to every user of the "
    f"machine in the process list; prefer --token-file or ${TOKEN_ENV}."
)

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
    from ..sansio.drivers.settings import DEFAULT_KEEPALIVE_INTERVAL

    parser.add_argument(
        "--keepalive",
        type=_positive_seconds,
        default=DEFAULT_KEEPALIVE_INTERVAL,
        metavar="SECONDS",
        help=text,
    )


def _client_options(parser: argparse.ArgumentParser, use: str) -> None:
    """What a client of a server (``listen``, ``ask``) is told of tokens and TLS."""
    _token_options(parser, use)
    parser.add_argument(
        "--cafile",
        metavar="PEM",
        help="trust the certificate authorities in this PEM file too, for an https:// URL",
    )
    parser.add_argument(
        "--allow-plaintext-token",
        action="store_true",
        help="send the token over plain http:// to a host that is not loopback",
    )


def _count(text: str) -> int:
    """A whole number of at least 1 (a count or a limit)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _serve_limits(parser: argparse.ArgumentParser) -> None:
    """``serve``'s limits: what a stalled, slow or crowding peer may cost (docs/cli.md)."""
    from ..sansio.drivers.settings import (
        DEFAULT_BACKLOG,
        DEFAULT_MAX_CONNECTIONS,
        DEFAULT_STALL_TIMEOUT,
    )
    from ..sansio.server.hub import DEFAULT_QUEUE_BYTES, DEFAULT_QUEUE_SIZE

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
    _fairness_options(parser)


def _share(text: str) -> float:
    """A fraction more than 0 and at most 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most 1: {text!r}")
    return value


def _fairness_options(parser: argparse.ArgumentParser) -> None:
    """``serve``'s options against one peer harming the others (docs/cli.md)."""
    from ..sansio.drivers.settings import DEFAULT_ADDRESS_SHARE, DEFAULT_SLOW_AFTER

    parser.add_argument(
        "--address-share",
        type=_share,
        default=DEFAULT_ADDRESS_SHARE,
        metavar="FRACTION",
        help="the share of --max-connections one peer address may hold at once; beyond, 503 "
        f"({DEFAULT_ADDRESS_SHARE:g})",
    )
    parser.add_argument(
        "--slow-after",
        type=_positive_seconds,
        default=DEFAULT_SLOW_AFTER,
        metavar="SECONDS",
        help="--stdin waits for room only on paths that took bytes within this long; for "
        f"the others what does not fit is dropped, counted ({DEFAULT_SLOW_AFTER:g})",
    )


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535: {text!r}")
    return value


def _token_options(
    parser: argparse.ArgumentParser, use: str, *, file_help: str | None = None
) -> None:
    """``--token`` and ``--token-file``, which exclude each other (see :data:`TOKEN_SOURCES`)."""
    tokens = parser.add_mutually_exclusive_group()
    tokens.add_argument(
        "--token",
        help=f"{use} (wins over ${TOKEN_ENV}; shown in the process list, prefer the others)",
    )
    tokens.add_argument(
        "--token-file",
        metavar="PATH",
        help=file_help
        or f"read the token from the first line of this file (wins over ${TOKEN_ENV})",
    )


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
        "--mcp-mode",
        metavar="auto|listen|legacy",
        help="how the --mcp-stdio/--mcp-url servers are asked for notifications (auto)",
    )
    relay.add_argument(
        "--mcp-max-attempts",
        type=_count,
        metavar="N",
        help="give a server up after N failed connections in a row, and exit 1 once a "
        "server is given up (default: retry for ever)",
    )
    _exchange_timeout_option(relay)


def _exchange_timeout_option(relay: Any) -> None:
    from ..sansio.drivers.settings import DEFAULT_EXCHANGE_TIMEOUT

    relay.add_argument(
        "--exchange-timeout",
        type=_positive_seconds,
        default=DEFAULT_EXCHANGE_TIMEOUT,
        metavar="SECONDS",
        help=f"answer a forwarded call or read with an error after this long "
        f"({DEFAULT_EXCHANGE_TIMEOUT:g})",
    )


#: ``serve --list-changed``'s kinds, and ``none``.
LIST_CHANGED_KINDS: Final = ("tools", "prompts", "resources")
#: ``serve --log-level none``: no log messages at all.
NO_LOG_LEVEL: Final = "none"


def _list_changed(text: str) -> frozenset[str]:
    """``--list-changed``: a comma-separated list of kinds, or ``none``."""
    kinds = [kind.strip() for kind in text.split(",")]
    if kinds == [NO_LOG_LEVEL]:
        return frozenset()
    unknown = [kind for kind in kinds if kind not in LIST_CHANGED_KINDS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"not a list of {', '.join(LIST_CHANGED_KINDS)} (or none): {text!r}"
        )
    return frozenset(kinds)


def _filter_options(serve: argparse.ArgumentParser) -> None:
    """What ``serve``'s paths carry of the topics a filter narrows (docs/cli.md)."""
    carried = serve.add_argument_group(
        "what paths carry",
        "progress, cancellations, custom and other notifications always pass; "
        "these narrow log messages, list changes and resource updates",
    )
    carried.add_argument(
        "--log-level",
        choices=[*(level.wire for level in LogLevel), NO_LOG_LEVEL],
        default=LogLevel.DEBUG.wire,
        metavar="LEVEL",
        help="carry log messages of LEVEL and above, and ask the MCP servers for LEVEL "
        "(debug ... emergency, or none; default debug)",
    )
    carried.add_argument(
        "--list-changed",
        type=_list_changed,
        default=frozenset(LIST_CHANGED_KINDS),
        metavar="KINDS",
        help="carry these list_changed notifications: a comma-separated list of "
        "tools, prompts, resources, or none (default: all)",
    )
    carried.add_argument(
        "--resource",
        "--mcp-resource",
        dest="mcp_resource",
        metavar="URI",
        action="append",
        help="carry resources/updated for this URI only, and subscribe the MCP servers "
        "to it only (repeatable; default: every resource)",
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
    _client_options(ask, "bearer token to send with the ask")


def _redis_options(serve: argparse.ArgumentParser) -> None:
    from ..cluster import DEFAULT_CHANNEL

    replicas = serve.add_argument_group(
        "replicas", "share one notification stream with other replicas (the 'redis' extra)"
    )
    replicas.add_argument(
        "--redis",
        metavar="URL",
        help="publish through Redis (or Valkey) pub/sub at URL and serve what comes back "
        "(redis://, rediss://, unix://)",
    )
    replicas.add_argument(
        "--redis-channel",
        metavar="NAME",
        help=f"the pub/sub channel the replicas share ({DEFAULT_CHANNEL}); needs --redis",
    )


def _version_option(parser: argparse.ArgumentParser) -> None:
    """``--version``: the distribution's name and the package's ``__version__``, then exit 0."""
    from .. import __version__
    from .running import SCRIPT

    parser.add_argument(
        "--version",
        action="version",
        version=f"{SCRIPT} {__version__}",
        help="print the version and exit",
    )


def _metrics_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` of ``--metrics`` (``[::1]:PORT`` for IPv6; ``:PORT`` is 127.0.0.1)."""
    host, separator, port = text.rpartition(":")
    if not separator:
        raise argparse.ArgumentTypeError(f"not HOST:PORT: {text!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "127.0.0.1", _port(port)


def _operating_options(serve: argparse.ArgumentParser) -> None:
    """What an operator sees: metrics, and the log's format and verbosity."""
    from .logs import LOG_FORMATS

    operating = serve.add_argument_group("operating", "metrics and serve's own log")
    operating.add_argument(
        "--metrics",
        metavar="HOST:PORT",
        type=_metrics_address,
        help="serve Prometheus metrics on GET /metrics at this address, apart from the "
        "serving port (the 'metrics' extra; ':PORT' listens on 127.0.0.1)",
    )
    operating.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        default="text",
        help="standard error as timestamped text lines, or one JSON object a line (text)",
    )
    operating.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="log more: paths opened, exchanges answered (-vv: every library's debug lines)",
    )
    operating.add_argument(
        "-q",
        "--quiet",
        action="count",
        default=0,
        help="log less: warnings and errors only (-qq: errors only)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m diverge_notifications``."""
    parser = _Parser(
        prog=PROG,
        description=(
            "Serve, listen to and demonstrate Diverge MCP notification paths, "
            "and ask the exchanges of kinds 0-3."
        ),
    )
    _version_option(parser)
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
            "printed on standard error: 'serving on http://HOST:PORT' ('https://' "
            "with --certfile)."
        ),
        epilog=TOKEN_SOURCES,
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8080, help="port (8080; 0 picks a free one)")
    _token_options(serve, "bearer token every ask must carry", file_help=SERVE_TOKEN_FILE_HELP)
    serve.add_argument(
        "--certfile",
        metavar="PEM",
        help="serve TLS with the certificate chain in this PEM file (its key too, or --keyfile)",
    )
    serve.add_argument(
        "--keyfile",
        metavar="PEM",
        help="the private key of --certfile, in PEM (default: read from --certfile)",
    )
    serve.add_argument(
        "--stdin",
        action="store_true",
        help="publish each JSON notification line read from standard input",
    )
    _keepalive_option(serve, "write a keep-alive frame after this much silence (15)")
    _serve_limits(serve)
    _relay_options(serve)
    _filter_options(serve)
    _redis_options(serve)
    _operating_options(serve)

    listen = commands.add_parser(
        "listen",
        help="ask a server for notifications and print them",
        description=(
            "Ask the server at URL (its base, e.g. http://127.0.0.1:8080) for notifications "
            "and print each as one JSON line on standard output; ask again whenever a path "
            "ends, until interrupted."
        ),
        epilog=TOKEN_SOURCES,
    )
    listen.add_argument(
        "url", metavar="URL", help="the server's base URL, http[s]://HOST[:PORT][/BASE]"
    )
    _client_options(listen, "bearer token to send with each ask")
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
    from ..sansio.client.urls import parse_url

    try:
        endpoint = parse_url(url)
        ProxyConnection(endpoint.authority, target=endpoint.target).data_to_send()
    except (LocalProtocolError, ValueError) as error:
        raise ValueError(f"malformed URL: {error}") from None
    return url


def check_plaintext_token(url: str, token: str | None, *, allowed: bool) -> None:
    """Refuse, as the listener would, a token in cleartext to a host that is not loopback.

    The listener's own rule (:func:`~..sansio.client.urls.check_token_transport`),
    said with the option that lifts it, ``--allow-plaintext-token``. Raises
    ``ValueError``.
    """
    from ..sansio.client.urls import PlaintextTokenRefused, check_token_transport, parse_url

    endpoint = parse_url(url)
    try:
        check_token_transport(endpoint, token, allow_plaintext_token=allowed)
    except PlaintextTokenRefused:
        raise ValueError(
            f"refusing to send the token in cleartext over http:// to {endpoint.host}, which "
            "is not a loopback address: use an https:// URL, or --allow-plaintext-token"
        ) from None


def check_token(token: str, *, listening: bool, source: str = "--token") -> str:
    """Check a token: return it, or raise ``ValueError`` saying why it cannot be used.

    The rule is the library's own: a server refuses to be made with a token
    that is not one or more visible ASCII characters, and a listener's ask
    must be buildable with it in an ``Authorization`` field (``listening``).
    The message names where the token came from (``source``), never the
    token itself.
    """
    from ..sansio import LocalProtocolError, ProxyConnection, ServerConnection

    try:
        ServerConnection(token=token)
        if listening:
            ProxyConnection("h:1", token=token).data_to_send()
    except (LocalProtocolError, ValueError) as error:
        # The token itself is not repeated: it may be a secret, slightly mangled.
        where = "" if source == "--token" else f" from {source}"
        raise ValueError(f"unusable token{where}: {error}") from None
    return token


def read_token_file(path: str) -> str:
    """The token in the file at ``path``: its first line, the line break removed.

    Only the line break goes (``\\n`` or ``\\r\\n``): any other space is
    part of the line, and :func:`check_token` refuses it. At most
    :data:`MAX_TOKEN_FILE_LINE` bytes are read. Raises ``ValueError``
    saying why the file gives no token; the message names the file, not
    what it holds.
    """
    try:
        with open(path, "rb") as file:
            line = file.readline(MAX_TOKEN_FILE_LINE + 2)
    except OSError as error:
        raise ValueError(f"cannot read --token-file {path}: {error.strerror or error}") from None
    if line.endswith(b"\n"):
        line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
    if len(line) > MAX_TOKEN_FILE_LINE:
        raise ValueError(
            f"the first line of --token-file {path} is longer than {MAX_TOKEN_FILE_LINE} bytes"
        )
    # Latin-1 maps every byte to a character: check_token then refuses what is not ASCII.
    return line.decode("latin-1")


def resolve_token(
    args: argparse.Namespace, *, listening: bool, environ: Mapping[str, str] | None = None
) -> str | None:
    """The token of ``serve`` or ``listen``, checked, or ``None`` when none is given.

    ``--token``, else ``--token-file``, else the environment variable
    :data:`TOKEN_ENV` (the parser lets only one of the two options
    through). A variable that is set but empty is an unusable token, not
    the absence of one: a server must not go unprotected because a secret
    failed to load. Raises ``ValueError`` (a usage error) saying why a
    token cannot be used, without the token.
    """
    if args.token is not None:
        return check_token(args.token, listening=listening)
    if args.token_file is not None:
        token = read_token_file(args.token_file)
        return check_token(token, listening=listening, source=f"--token-file {args.token_file}")
    variable = (os.environ if environ is None else environ).get(TOKEN_ENV)
    if variable is None:
        return None
    return check_token(variable, listening=listening, source=TOKEN_ENV)


def read_token_list(path: str) -> list[str]:
    """The tokens listed in the file at ``path`` (``serve --token-file``), each checked.

    One token a line; the line break goes (``\\n`` or ``\\r\\n``), lines
    that are empty or only spaces are skipped, and so are lines whose first
    visible character is ``#`` (comments). Any other space is part of its
    line, and :func:`check_token` refuses it. At least one token, at most
    :data:`MAX_TOKEN_FILE_TOKENS`, each line at most
    :data:`MAX_TOKEN_FILE_LINE` bytes; a token listed twice counts once.
    Raises ``ValueError`` saying why the file gives no tokens, naming the
    file and the line, never what it holds.
    """
    source = f"--token-file {path}"
    limit = (MAX_TOKEN_FILE_LINE + 2) * MAX_TOKEN_FILE_TOKENS
    try:
        with open(path, "rb") as file:
            data = file.read(limit + 1)
    except OSError as error:
        raise ValueError(f"cannot read {source}: {error.strerror or error}") from None
    if len(data) > limit:
        raise ValueError(f"{source} is larger than {limit} bytes")
    tokens: list[str] = []
    for number, line in enumerate(data.split(b"\n"), start=1):
        line = line.removesuffix(b"\r")
        if not line.strip() or line.lstrip().startswith(b"#"):
            continue
        if len(line) > MAX_TOKEN_FILE_LINE:
            raise ValueError(
                f"line {number} of {source} is longer than {MAX_TOKEN_FILE_LINE} bytes"
            )
        # Latin-1 maps every byte to a character: check_token then refuses what is not ASCII.
        tokens.append(
            check_token(
                line.decode("latin-1"), listening=False, source=f"line {number} of {source}"
            )
        )
    if not tokens:
        raise ValueError(f"{source} lists no token (only blank lines and # comments)")
    unique = list(dict.fromkeys(tokens))
    if len(unique) > MAX_TOKEN_FILE_TOKENS:
        raise ValueError(f"{source} lists more than {MAX_TOKEN_FILE_TOKENS} tokens")
    return unique


def resolve_serve_tokens(
    args: argparse.Namespace, *, environ: Mapping[str, str] | None = None
) -> list[str] | None:
    """The tokens ``serve`` accepts, checked, or ``None`` when none is given.

    As :func:`resolve_token`, but ``--token-file`` may list several tokens
    (:func:`read_token_list`). Raises ``ValueError`` (a usage error) saying
    why, without any token.
    """
    if args.token_file is not None:
        return read_token_list(args.token_file)
    token = resolve_token(args, listening=False, environ=environ)
    return None if token is None else [token]


def listen_tls_context(url: str, cafile: str | None) -> ssl.SSLContext | None:
    """The ``ssl=`` context ``listen URL`` passes to the listener, from its ``--cafile``.

    ``None`` without ``--cafile``: the listener's own default then applies
    (the system's trust for an ``https://`` URL). With it, the system's
    trust plus the CAs of the file. ``--cafile`` with an ``http://`` URL,
    or a file that cannot be loaded, is a ``ValueError``.
    """
    if cafile is None:
        return None
    from ..adapters.tls import client_context, describe_load_error

    if urlsplit(url).scheme.lower() != "https":
        raise ValueError("--cafile is for https:// URLs: nothing is verified over http://")
    try:
        return client_context(cafile)
    except OSError as error:
        raise ValueError(f"cannot load --cafile {cafile}: {describe_load_error(error)}") from None


def serve_tls_context(certfile: str | None, keyfile: str | None) -> ssl.SSLContext | None:
    """The ``ssl=`` context of ``serve --certfile PEM [--keyfile PEM]``, or ``None`` for plain HTTP.

    ``--keyfile`` without ``--certfile``, or files that cannot be loaded
    (unreadable, not PEM, a key that does not match the certificate), is
    a ``ValueError``; the message names the files, never what they hold.
    """
    if certfile is None:
        if keyfile is not None:
            raise ValueError("--keyfile needs --certfile")
        return None
    from ..adapters.tls import describe_load_error, server_context

    try:
        return server_context(certfile, keyfile)
    except OSError as error:
        files = f"--certfile {certfile}" + (f" --keyfile {keyfile}" if keyfile else "")
        raise ValueError(f"cannot load {files}: {describe_load_error(error)}") from None


def listener_connection(args: argparse.Namespace) -> tuple[str | None, ssl.SSLContext | None]:
    """The token and the ``ssl=`` context of ``listen`` or ``ask``, from their options, checked.

    The URL must be one to ask (:func:`check_listen_url`), the token usable
    (:func:`resolve_token`), ``--cafile`` loadable (:func:`listen_tls_context`)
    and the token not sent in cleartext unless allowed
    (:func:`check_plaintext_token`). Raises ``ValueError`` saying why not.
    """
    check_listen_url(args.url)
    token = resolve_token(args, listening=True)
    tls = listen_tls_context(args.url, args.cafile)
    check_plaintext_token(args.url, token, allowed=args.allow_plaintext_token)
    return token, tls
