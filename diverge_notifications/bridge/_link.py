"""What the parts of one connection to an MCP server tell each other."""

from __future__ import annotations

import anyio

__all__ = ["Link"]


class Link:
    """One connection to the MCP server, from the transport's side.

    The transport marks it lost when the server goes away (the first reason
    wins); the session watching it then ends. Create it inside the event
    loop.
    """

    def __init__(self) -> None:
        self.lost = anyio.Event()
        self.reason: str | None = None
        #: Whether a GET stream (handshake-era Streamable HTTP) was ever opened.
        self.get_stream_opened = False
        #: Set when the SDK gave up the GET stream of a handshake-era
        #: Streamable HTTP session, or could not open one.
        self.get_stream_ended = anyio.Event()

    def mark_lost(self, reason: str) -> None:
        """The server went away, for ``reason``."""
        if self.reason is None:
            self.reason = reason
        self.lost.set()
