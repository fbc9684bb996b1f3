"""The sans-IO core: bytes in, events out, bytes to send out.

Nothing here opens sockets, sleeps, reads a clock, spawns threads or draws
random numbers; time and randomness are parameters.
"""

from ._errors import (
    AskError,
    AskErrorReason,
    FrameError,
    FrameErrorReason,
    LocalProtocolError,
    ProtocolError,
)
from .asks import (
    Ask,
    ChannelRequest,
    ChannelRequestTag,
    Exchange,
    decode_ask,
    decode_channel_request,
    encode_ask,
    encode_channel_request,
)
from .events import (
    NEED_DATA,
    Event,
    MessageRejected,
    NotificationReceived,
    NotServed,
    ReaskNeeded,
    ResultReceived,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
)
from .framing import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, encode_frame
from .hub import Hub, Interest, Subscriber
from .mcp import (
    Cancelled,
    ElicitationComplete,
    ErrorCode,
    ErrorData,
    ListChanged,
    LogLevel,
    LogMessage,
    Notification,
    NotificationKind,
    Progress,
    ResourceUpdated,
    SubscriptionsAcknowledged,
    TaskStatus,
)
from .messages import decode_message, encode_message
from .policy import AttemptsExhausted, Backoff, ProxyPolicy, RetryScheduled
from .proxy import ExchangeConnection, ProxyConnection
from .sequence import PathState, Profile, SequenceMachine
from .server import ContainerWriter, ServerConnection

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "NEED_DATA",
    "Ask",
    "AskError",
    "AskErrorReason",
    "AttemptsExhausted",
    "Backoff",
    "Cancelled",
    "ChannelRequest",
    "ChannelRequestTag",
    "ContainerWriter",
    "ElicitationComplete",
    "ErrorCode",
    "ErrorData",
    "Event",
    "Exchange",
    "ExchangeConnection",
    "FrameDecoder",
    "FrameError",
    "FrameErrorReason",
    "Hub",
    "Interest",
    "ListChanged",
    "LocalProtocolError",
    "LogLevel",
    "LogMessage",
    "MessageRejected",
    "NotServed",
    "Notification",
    "NotificationKind",
    "NotificationReceived",
    "PathState",
    "Profile",
    "Progress",
    "ProtocolError",
    "ProxyConnection",
    "ProxyPolicy",
    "ReaskNeeded",
    "ResourceUpdated",
    "ResultReceived",
    "RetryScheduled",
    "SequenceMachine",
    "ServerConnection",
    "StreamBroken",
    "StreamEnded",
    "StreamErrored",
    "StreamOpened",
    "Subscriber",
    "SubscriptionsAcknowledged",
    "TaskStatus",
    "decode_ask",
    "decode_channel_request",
    "decode_message",
    "encode_ask",
    "encode_channel_request",
    "encode_frame",
    "encode_message",
]
