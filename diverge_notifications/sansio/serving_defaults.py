"""The serving side's defaults: the limits a server starts with, and the check of a positive value.

Read by the serving driver (:mod:`.serving`), the server's settings
(:mod:`.serve_settings`), the listener and exchange drivers, the adapters
and the command line, each from here; ``docs/adapters.md`` lists every
option with its default.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "DEFAULT_ASK_TIMEOUT",
    "DEFAULT_BACKLOG",
    "DEFAULT_CLOSE_TIMEOUT",
    "DEFAULT_EXCHANGE_TIMEOUT",
    "DEFAULT_KEEPALIVE_INTERVAL",
    "DEFAULT_LINGER",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_DISCARD",
    "DEFAULT_STALL_TIMEOUT",
    "DEFAULT_WRITE_BUFFER",
    "check_positive",
]

#: Seconds without output after which a server writes a keep-alive frame.
DEFAULT_KEEPALIVE_INTERVAL: Final = 15.0
#: Notifications a server writes per HTTP chunk at most.
DEFAULT_MAX_BATCH: Final = 1024
#: Seconds a closing server waits for its listeners to take the end of their paths.
DEFAULT_CLOSE_TIMEOUT: Final = 5.0
#: Seconds a server gives a new connection to complete its ask before closing it.
DEFAULT_ASK_TIMEOUT: Final = 10.0
#: Seconds a path's peer may take no byte while output waits before it is cut off.
DEFAULT_STALL_TIMEOUT: Final = 30.0
#: Bytes one ``Write`` of a path carries at most (one larger frame goes alone).
DEFAULT_WRITE_BUFFER: Final = 256 * 1024
#: Connections served at once; beyond, a new one is answered 503 with ``Retry-After``.
DEFAULT_MAX_CONNECTIONS: Final = 1024
#: Connections the listening socket holds before they are accepted.
DEFAULT_BACKLOG: Final = 128
#: Seconds an exchange handler may run before it is cancelled and answered an internal error.
DEFAULT_EXCHANGE_TIMEOUT: Final = 30.0
#: Seconds a refused connection is read (and what comes discarded) after its answer.
DEFAULT_LINGER: Final = 2.0
#: Bytes read (and discarded) after the ask; past that the server stops reading.
DEFAULT_MAX_DISCARD: Final = 64 * 1024


def check_positive(name: str, value: float) -> None:
    """Raise :class:`ValueError` unless ``value`` is a positive number (NaN is not)."""
    if not value > 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
