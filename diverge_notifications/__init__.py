"""diverge-notifications: the MCP notification channel of the Diverge protocols.

The protocol lives in :mod:`diverge_notifications.sansio`; the drivers for
asyncio, trio and blocking sockets in :mod:`diverge_notifications.adapters`.
This namespace names the few things most programs start from.
"""

from .sansio.client.connection import ProxyConnection
from .sansio.errors import LocalProtocolError
from .sansio.mcp.model import ErrorData, LogLevel, Notification, NotificationKind
from .sansio.server.connection import ServerConnection
from .sansio.server.hub import Hub, Interest
from .sansio.wire.profiles import Profile

__version__ = "0.1.0"

__all__ = [
    "ErrorData",
    "Hub",
    "Interest",
    "LocalProtocolError",
    "LogLevel",
    "Notification",
    "NotificationKind",
    "Profile",
    "ProxyConnection",
    "ServerConnection",
    "__version__",
]
