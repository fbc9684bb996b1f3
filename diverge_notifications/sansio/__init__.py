"""The sans-IO core: bytes in, events out, bytes to send out.

Nothing here opens sockets, sleeps, reads a clock, spawns threads or draws
random numbers; time and randomness are parameters.

This namespace holds what a program needs to speak the protocol, or to
drive it on an I/O framework of its own:

* the MCP model (:class:`Notification`, :class:`ErrorData`, :class:`LogLevel`,
  :class:`NotificationKind`) and the codecs of messages, frames and asks,
  with the builders of the exchanges of kinds 0-3 (:func:`list_tools_ask`,
  :func:`call_tool_ask`...) and :func:`result_object`, which reads an
  answer;
* the connections of both sides (:class:`ProxyConnection`,
  :class:`ExchangeConnection`, :class:`ServerConnection`), what they rest
  on (:class:`SequenceMachine`, :class:`ContainerWriter`, :class:`Profile`)
  and the client's :class:`ProxyPolicy`;
* the :class:`Hub` and its :class:`Interest`;
* the drivers the adapters run on (:class:`ListenDriver`,
  :class:`ExchangeDriver` and :class:`ProxyDriver` with their
  :class:`ClientSettings`, :class:`ServingConnection` with its
  :class:`ServeSettings`), and :func:`parse_url`, which reads the URLs they
  take into an :class:`Endpoint`;
* every event (all of :mod:`.events`) and every exception (all of
  :mod:`.errors`, and :class:`ExchangeError` and :class:`ExchangeFailed`,
  what a proxy's exchange raises).

Everything else (state enums, transition tables, typed notification views,
the actions the drivers ask for, the reports of a server) is reached
through its module, named after its layer: see ``docs/architecture.md``.
"""

from .client.connection import ExchangeConnection, ProxyConnection
from .client.policy import Backoff, ProxyPolicy
from .client.sequence import SequenceMachine
from .client.urls import Endpoint, parse_url
from .drivers.listen import ListenDriver
from .drivers.proxy import (
    ExchangeDriver,
    ExchangeError,
    ExchangeFailed,
    ProxyDriver,
    call_tool_ask,
    list_resources_ask,
    list_tools_ask,
    read_resource_ask,
    result_object,
)
from .drivers.serve import ServingConnection
from .drivers.settings import ClientSettings, ServeSettings
from .errors import (
    AskError,
    AskErrorReason,
    DecodeError,
    EnvelopeError,
    EnvelopeErrorReason,
    FrameError,
    FrameErrorReason,
    FrameTooLarge,
    HubSuspended,
    JsonError,
    LocalProtocolError,
    NotificationTooLarge,
    PlaintextTokenRefused,
    ProtocolError,
    ProxyClosed,
)
from .events import (
    NEED_DATA,
    TERMINAL_EVENTS,
    AskRefused,
    AttemptsExhausted,
    ConnectionClosed,
    ConnectionFailed,
    Event,
    ExchangeAsked,
    HealthAsked,
    MessageRejected,
    NeedData,
    NotificationReceived,
    NotificationsAsked,
    NotServed,
    ReaskNeeded,
    ResultReceived,
    RetryScheduled,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
    TerminalEvent,
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
    "TERMINAL_EVENTS",
    "Ask",
    "AskError",
    "AskErrorReason",
    "AskRefused",
    "AttemptsExhausted",
    "Backoff",
    "ChannelIds",
    "ClientSettings",
    "ConnectionClosed",
    "ConnectionFailed",
    "ContainerWriter",
    "DecodeError",
    "Endpoint",
    "EnvelopeError",
    "EnvelopeErrorReason",
    "ErrorData",
    "Event",
    "Exchange",
    "ExchangeAsked",
    "ExchangeConnection",
    "ExchangeDriver",
    "ExchangeError",
    "ExchangeFailed",
    "FrameError",
    "FrameErrorReason",
    "FrameTooLarge",
    "HealthAsked",
    "Hub",
    "HubSuspended",
    "Interest",
    "JsonError",
    "ListenDriver",
    "LocalProtocolError",
    "LogLevel",
    "MessageRejected",
    "NeedData",
    "NotServed",
    "Notification",
    "NotificationKind",
    "NotificationReceived",
    "NotificationTooLarge",
    "NotificationsAsked",
    "PlaintextTokenRefused",
    "Profile",
    "ProtocolError",
    "ProxyClosed",
    "ProxyConnection",
    "ProxyDriver",
    "ProxyPolicy",
    "ReaskNeeded",
    "ResultReceived",
    "RetryScheduled",
    "SequenceMachine",
    "ServeSettings",
    "ServerConnection",
    "ServingConnection",
    "StreamBroken",
    "StreamEnded",
    "StreamErrored",
    "StreamOpened",
    "TerminalEvent",
    "call_tool_ask",
    "decode_ask",
    "decode_message",
    "encode_ask",
    "encode_frame",
    "encode_message",
    "list_resources_ask",
    "list_tools_ask",
    "parse_url",
    "read_resource_ask",
    "result_object",
]
