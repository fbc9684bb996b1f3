"""diverge-notifications: the MCP notification channel of the Diverge protocols.

The protocol lives in :mod:`diverge_notifications.sansio`; the drivers for
asyncio, trio and blocking sockets (``listen``, ``serve``, ``Proxy``) in
:mod:`diverge_notifications.adapters`. Importing this package imports
nothing more: each name below is imported from :mod:`.sansio` when it is
first used, so that the command line starts quickly and Ctrl-C while it
starts is as quiet as later (``python -m diverge_notifications`` imports
this package before its own guard can run).

This namespace names what an application works with, whichever adapter it
runs on:

* the MCP model it publishes and receives: :class:`Notification`,
  :class:`ErrorData`, :class:`LogLevel`, :class:`NotificationKind`;
* what a server is made of: the :class:`Hub` it publishes into, the
  :class:`Interest` of a listener and the :class:`Profile` it serves;
* how a listener asks again: :class:`ProxyPolicy` and its :class:`Backoff`;
* the events a listener or a proxy yields (with ``events=True``), from
  :class:`StreamOpened` to :class:`AttemptsExhausted`, and their base
  :class:`Event`;
* the exceptions an application catches: :class:`ExchangeError` and
  :class:`ExchangeFailed` (a proxy's exchange), :class:`NotificationTooLarge`
  (a publication), :class:`PlaintextTokenRefused` (a token bound for the
  network in cleartext), :class:`DecodeError` (bytes that do not decode),
  and their bases :class:`LocalProtocolError` and :class:`ProtocolError`;
* the two connections, for a program that moves the bytes itself:
  :class:`ProxyConnection` and :class:`ServerConnection`.

The rest (codecs, drivers, the events a server sees, every exception) is in
:mod:`diverge_notifications.sansio`; each adapter's ``Server``, ``Listener``
and the blocking proxy's ``ProxyClosed`` are in its module.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .sansio import (
        AttemptsExhausted,
        Backoff,
        ConnectionFailed,
        DecodeError,
        ErrorData,
        Event,
        ExchangeError,
        ExchangeFailed,
        Hub,
        Interest,
        LocalProtocolError,
        LogLevel,
        MessageRejected,
        Notification,
        NotificationKind,
        NotificationReceived,
        NotificationTooLarge,
        NotServed,
        PlaintextTokenRefused,
        Profile,
        ProtocolError,
        ProxyConnection,
        ProxyPolicy,
        ReaskNeeded,
        ResultReceived,
        RetryScheduled,
        ServerConnection,
        StreamBroken,
        StreamEnded,
        StreamErrored,
        StreamOpened,
    )

__version__ = "0.1.0"

__all__ = [
    "AttemptsExhausted",
    "Backoff",
    "ConnectionFailed",
    "DecodeError",
    "ErrorData",
    "Event",
    "ExchangeError",
    "ExchangeFailed",
    "Hub",
    "Interest",
    "LocalProtocolError",
    "LogLevel",
    "MessageRejected",
    "NotServed",
    "Notification",
    "NotificationKind",
    "NotificationReceived",
    "NotificationTooLarge",
    "PlaintextTokenRefused",
    "Profile",
    "ProtocolError",
    "ProxyConnection",
    "ProxyPolicy",
    "ReaskNeeded",
    "ResultReceived",
    "RetryScheduled",
    "ServerConnection",
    "StreamBroken",
    "StreamEnded",
    "StreamErrored",
    "StreamOpened",
    "__version__",
]


def __getattr__(name: str) -> Any:
    """A name of :data:`__all__`, imported from :mod:`.sansio` on first use (PEP 562)."""
    if name in __all__:
        from . import sansio

        value = getattr(sansio, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
