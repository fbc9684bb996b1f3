"""The sans-IO core: bytes in, events out, bytes to send out.

Nothing here opens sockets, sleeps, reads a clock, spawns threads or draws
random numbers; time and randomness are parameters.

This namespace holds what an application needs to speak the protocol: the
MCP model, the codecs, the connections of both sides, the hub, the events.
Everything else (state enums, transition tables, typed notification views,
the drivers the adapters run on) is reached through its module, named after
its layer: see ``docs/architecture.md``.
"""

from .client.connection import ExchangeConnection, ProxyConnection
from .client.policy import Backoff, ProxyPolicy
from .client.sequence import SequenceMachine
from .errors import AskError, FrameError, FrameErrorReason, LocalProtocolError, ProtocolError
from .events import (
    NEED_DATA,
    AskRefused,
    ConnectionClosed,
    Event,
    ExchangeAsked,
    MessageRejected,
    NotificationReceived,
    NotificationsAsked,
    NotServed,
    ReaskNeeded,
    ResultReceived,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
)
from .mcp.model import ErrorData, LogLevel, Notification, NotificationKind
from .server.connection import ServerConnection
from .server.hub import Hub, Interest
from .server.writer import ContainerWriter
from .wire.asks import Ask, Exchange, decode_ask, encode_ask
from .wire.framing import encode_frame
from .wire.http import ChannelIds
from .wire.messages import decode_message, encode_message
from .wire.profiles import Profile

__all__ = [
    "NEED_DATA",
    "Ask",
    "AskError",
    "AskRefused",
    "Backoff",
    "ChannelIds",
    "ConnectionClosed",
    "ContainerWriter",
    "ErrorData",
    "Event",
    "Exchange",
    "ExchangeAsked",
    "ExchangeConnection",
    "FrameError",
    "FrameErrorReason",
    "Hub",
    "Interest",
    "LocalProtocolError",
    "LogLevel",
    "MessageRejected",
    "NotServed",
    "Notification",
    "NotificationKind",
    "NotificationReceived",
    "NotificationsAsked",
    "Profile",
    "ProtocolError",
    "ProxyConnection",
    "ProxyPolicy",
    "ReaskNeeded",
    "ResultReceived",
    "SequenceMachine",
    "ServerConnection",
    "StreamBroken",
    "StreamEnded",
    "StreamErrored",
    "StreamOpened",
    "decode_ask",
    "decode_message",
    "encode_ask",
    "encode_frame",
    "encode_message",
]
