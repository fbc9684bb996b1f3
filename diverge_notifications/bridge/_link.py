"""What the parts of one connection to an MCP server tell each other."""

from __future__ import annotations

import anyio

__all__ = ["Link", "describe"]


class Link:
    """One connection to the MCP server, from the transport's side.

    The transport marks it lost when the server goes away (the first reason
    wins); the session watching it then ends. ``dropped`` counts the
    messages the transport did not pass on because they were larger than
    its limit; ``invalid`` the lines that were no JSON-RPC message. Create
    it inside the event loop.
    """

    def __init__(self) -> None:
        self.lost = anyio.Event()
        self.reason: str | None = None
        self.dropped = 0
        self.invalid = 0

    def mark_lost(self, reason: str) -> None:
        """The server went away, for ``reason``."""
        if self.reason is None:
            self.reason = reason
        self.lost.set()


def describe(error: BaseException) -> str:
    """One line for what ended a connection, looking inside exception groups."""
    # Duck-typed: Python 3.10 has no built-in BaseExceptionGroup to test against.
    while True:
        inner = getattr(error, "exceptions", None)
        if not isinstance(inner, tuple) or not inner or not isinstance(inner[0], BaseException):
            break
        error = inner[0]
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
