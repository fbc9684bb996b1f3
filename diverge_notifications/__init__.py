"""diverge-notifications: the MCP notification channel of the Diverge protocols.

The protocol lives in :mod:`diverge_notifications.sansio`; the drivers for
asyncio, trio and blocking sockets in :mod:`diverge_notifications.adapters`.
"""

from .sansio import *  # noqa: F403
from .sansio import __all__ as _sansio_all

__version__ = "0.1.0"
__all__ = [*_sansio_all, "__version__"]
