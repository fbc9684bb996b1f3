"""diverge-notifications: the MCP notification channel of the Diverge protocols.

The protocol lives in :mod:`diverge_notifications.sansio`; the drivers for
asyncio, trio and blocking sockets in :mod:`diverge_notifications.adapters`.
This namespace names the few things most programs start from.
"""

from .sansio._errors import LocalProtocolError
from .sansio.hub import Hub, Interest
from .sansio.mcp import ErrorData, LogLevel, Notification, NotificationKind
from .sansio.proxy import ProxyConnection
from .sansio.sequence import Profile
from .sansio.server import ServerConnection

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
