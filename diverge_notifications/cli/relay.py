"""``serve``'s MCP servers: the relay its ``--mcp-*`` options describe, and how it ends.

With ``--mcp-config``, ``--mcp-stdio`` or ``--mcp-url``, ``serve`` runs an
:class:`~diverge_notifications.bridge.McpRelay` into its hub and answers
the exchanges of kinds 0-3 by forwarding them through it. A configuration
or option that cannot be used is a usage error (status 2); a command that
is not found, or, with ``--mcp-max-attempts``, a server given up, ends
``serve`` with status 1. A server that goes away is otherwise retried for
ever and ``serve`` keeps serving; while any server is not connected the
hub is suspended (open paths end with an error naming the server and what
happened, notification asks are answered ``503``). Nothing here imports
``mcp`` until a server is configured.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import TYPE_CHECKING, Any, Final

import attrs

from ..sansio import Event, Hub
from ..sansio.mcp.json import dumps
from .output import event_record, say
from .parser import NO_LOG_LEVEL
from .running import PROG, UsageError

if TYPE_CHECKING:
    from ..bridge import McpRelay

__all__ = ["MCP_MISSING_MESSAGE", "RelayFailed", "make_relay", "relay_stopped", "relay_wanted"]

#: What ``serve`` says when an ``--mcp-*`` option is given and the ``mcp`` package is missing.
MCP_MISSING_MESSAGE: Final = (
    "serve --mcp-config/--mcp-stdio/--mcp-url need the 'mcp' extra: "
    "pip install 'diverge-notifications[mcp]'"
)

#: The options that describe the servers, and those that only qualify them.
_SERVER_OPTIONS: Final = ("mcp_config", "mcp_stdio", "mcp_url")
_QUALIFIERS: Final = ("mcp_env", "mcp_header", "mcp_mode", "mcp_max_attempts")


class RelayFailed(Exception):
    """The relay cannot run (a command is not found) or stopped (every server is gone)."""


def relay_wanted(args: argparse.Namespace) -> bool:
    """Whether any ``--mcp-*`` option was given (then the ``mcp`` extra is needed)."""
    return any(getattr(args, name) for name in _SERVER_OPTIONS) or any(
        getattr(args, name) is not None for name in _QUALIFIERS
    )


def _report(name: str, event: Event) -> None:
    """Say on standard error what one server's bridge did (connected, subscribed, lost...)."""
    say(f"bridge: {dumps({**event_record(event), 'mcp_server': name}).decode('utf-8')}")


def make_relay(args: argparse.Namespace, hub: Hub, served: Hub | None = None) -> McpRelay | None:
    """The relay of ``serve``'s ``--mcp-*`` options into ``hub``; ``None`` without them.

    ``served`` is the hub the server serves (``hub`` itself, unless ``hub``
    is a broker's inlet): it is suspended while a server is not connected.
    ``--resource`` (``--mcp-resource``) names the resources every server is
    subscribed to, those of ``--mcp-config`` included; ``--log-level`` the
    level asked of them (``none``: ``emergency``, the least there is to ask
    for).

    Raises :class:`UsageError` for a configuration or option that cannot be
    used and :class:`RelayFailed` for a command that is not found, before
    anything runs.
    """
    if not relay_wanted(args):
        return None
    from ..bridge import ConfigError, McpRelay, server_specs

    try:
        specs = server_specs(
            config=args.mcp_config,
            stdio=args.mcp_stdio or (),
            urls=args.mcp_url or (),
            env=args.mcp_env or (),
            headers=args.mcp_header or (),
            resources=(args.mcp_resource or ()) if args.mcp_stdio or args.mcp_url else (),
            mode=args.mcp_mode,
        )
    except ConfigError as error:
        raise UsageError(str(error)) from None
    if args.mcp_resource:
        chosen = tuple(args.mcp_resource)
        specs = tuple(
            spec if spec.resources is not None else attrs.evolve(spec, resources=chosen)
            for spec in specs
        )
    options: dict[str, Any] = {
        "on_event": _report,
        "max_attempts": args.mcp_max_attempts,
        "exchange_timeout": args.exchange_timeout,
        "suspends": hub if served is None else served,
        # MCP has no level that asks for nothing: the paths' filter drops the rest.
        "log_level": "emergency" if args.log_level == NO_LOG_LEVEL else args.log_level,
    }
    try:
        return McpRelay(hub, specs, **options)
    except FileNotFoundError as error:
        raise RelayFailed(f"the MCP bridge failed: {error}") from None
    except ValueError as error:  # no server in the configuration, two of one name
        raise UsageError(str(error)) from None


def relay_stopped(task: asyncio.Task[None]) -> str:
    """What ``serve`` says when its relay ended by itself: every server is gone."""
    failure = task.exception()
    # The relay runs until cancelled: ending on its own means nothing more
    # will be relayed (RelayExhausted names each server and its last reason).
    reason = "stopped" if failure is None else f"failed: {failure}"
    return f"{PROG} serve: the MCP bridge {reason}"
