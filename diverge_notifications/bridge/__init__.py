"""Relay the caller's MCP servers into a :class:`~diverge_notifications.sansio.Hub`.

:class:`McpRelay` connects to several MCP servers (commands over stdio, or
Streamable HTTP URLs) as an MCP client, with the official MCP Python SDK,
publishes every notification they send into one hub, unchanged, and answers
the exchanges of kinds 0-3 by forwarding them (its
:meth:`~McpRelay.handle_exchange` is a serving adapter's
``exchange_handler``). :func:`server_specs` builds the servers from the
command line's options and :func:`parse_mcp_config` from the ``mcpServers``
JSON MCP clients use; :func:`run_bridge` relays one server by itself. See
``docs/relay.md``.

This module needs the ``mcp`` extra (``pip install
'diverge-notifications[mcp]'``); importing it without raises
:class:`ImportError` saying so. Nothing else in the package imports ``mcp``.
"""

from __future__ import annotations

try:
    import mcp  # noqa: F401
except ImportError as error:
    raise ImportError(
        "diverge_notifications.bridge needs the 'mcp' extra: "
        "pip install 'diverge-notifications[mcp]'",
        name="mcp",
    ) from error

from ..sansio.lines import DEFAULT_MAX_LINE_SIZE
from ._config import (
    MODES,
    ConfigError,
    ServerSpec,
    load_mcp_config,
    parse_env_pair,
    parse_header_line,
    parse_mcp_config,
    server_specs,
)
from ._core import (
    DEFAULT_PING_INTERVAL,
    BridgeExhausted,
    McpConnected,
    McpDisconnected,
    McpSubscribed,
    run_bridge,
)
from ._relay import DEFAULT_EXCHANGE_TIMEOUT, McpRelay, RelayExhausted, ServerStatus

__all__ = [
    "DEFAULT_EXCHANGE_TIMEOUT",
    "DEFAULT_MAX_LINE_SIZE",
    "DEFAULT_PING_INTERVAL",
    "MODES",
    "BridgeExhausted",
    "ConfigError",
    "McpConnected",
    "McpDisconnected",
    "McpRelay",
    "McpSubscribed",
    "RelayExhausted",
    "ServerSpec",
    "ServerStatus",
    "load_mcp_config",
    "parse_env_pair",
    "parse_header_line",
    "parse_mcp_config",
    "run_bridge",
    "server_specs",
]
