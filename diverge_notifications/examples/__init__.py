"""Runnable examples.

:mod:`diverge_notifications.examples.mcp_server` is a small MCP server, built
with the official MCP Python SDK (the ``mcp`` extra), that keeps sending
notifications: something real for ``serve --mcp-stdio`` to relay. Importing
this package imports nothing from ``mcp``.
"""
