"""The command line: ``python -m diverge_notifications {demo,serve,listen,ask}``.

``listen URL`` prints each notification as one compact JSON line on standard
output: the bytes the server sent with the whitespace between JSON tokens
removed; with ``--events`` it also prints every event as one JSON line on
standard error, and without it one plain line on standard error says why no
path could be had (rate-limited). ``serve`` serves a hub until
interrupted and can publish JSON lines read from standard input or relay
MCP servers, forwarding the exchanges of kinds 0-3 to them (the ``mcp``
extra). ``ask`` makes one of those exchanges and prints its result.
``demo`` runs ``serve`` and ``listen`` in one process on a scripted MCP
server's notifications. See ``docs/cli.md``.

Exit statuses of ``listen --once``: 0 after ``StreamEnded`` or ``NotServed``,
3 after ``StreamErrored``, 4 after ``StreamBroken``, 1 when no connection
could be made; 2 for a usage error, for every command. Every command
interrupted by Ctrl-C exits quietly with 0 (:data:`EXIT_INTERRUPTED`).

One module per concern: :mod:`.parser` (the arguments), :mod:`.output`
(event records, notification lines, the standard streams), :mod:`.running`
(exit statuses, signals), one module per command (:mod:`.listen`,
:mod:`.serve` with :mod:`.relay` and :mod:`.cluster` (``serve --redis``),
:mod:`.ask`, :mod:`.demo`) and :mod:`.terminal` (the human view).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence

from .ask import run_ask
from .demo import run_demo_command
from .listen import run_listen, trouble_line
from .output import compact_json, event_record, notification_line
from .parser import build_parser, check_listen_url, check_token
from .running import (
    EXIT_BROKEN,
    EXIT_ERRORED,
    EXIT_INTERRUPTED,
    EXIT_NO_CONNECTION,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    interrupted,
)
from .serve import MCP_MISSING_MESSAGE, run_serve

__all__ = [
    "EXIT_BROKEN",
    "EXIT_ERRORED",
    "EXIT_INTERRUPTED",
    "EXIT_NO_CONNECTION",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_USAGE",
    "MCP_MISSING_MESSAGE",
    "build_parser",
    "check_listen_url",
    "check_token",
    "compact_json",
    "event_record",
    "main",
    "notification_line",
    "trouble_line",
]

#: The function that runs each command with its parsed arguments.
_RUNNERS: Mapping[str, Callable[[argparse.Namespace], int]] = {
    "demo": run_demo_command,
    "serve": run_serve,
    "listen": run_listen,
    "ask": run_ask,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    Ctrl-C (SIGINT) at any moment ends any command quietly with
    :data:`EXIT_INTERRUPTED`: while it parses, imports what it needs (the
    ``mcp`` extra takes a noticeable part of a second) or runs.
    """
    try:
        args = build_parser().parse_args(argv)
        return _RUNNERS[args.command](args)
    except KeyboardInterrupt:
        return interrupted()
