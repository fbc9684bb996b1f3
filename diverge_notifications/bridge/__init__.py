"""Relay a real MCP server's notifications into a :class:`~diverge_notifications.sansio.Hub`.

:func:`run_bridge` connects to an MCP server (a command over stdio, or a
Streamable HTTP URL) as an MCP client, with the official MCP Python SDK, and
publishes every notification the server sends into the hub, unchanged. See
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

from ._core import BridgeExhausted, McpConnected, McpDisconnected, McpSubscribed, run_bridge

__all__ = ["BridgeExhausted", "McpConnected", "McpDisconnected", "McpSubscribed", "run_bridge"]
