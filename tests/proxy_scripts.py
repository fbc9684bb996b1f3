"""Scripted server answers, as bytes, and the events the proxy side makes of them.

Import from test modules as ``from proxy_scripts import SCRIPTS, run_proxy``
(pytest puts ``tests/`` on ``sys.path``). Everything here is plain data and
small functions; nothing does I/O.

* :data:`SCRIPTS` maps a name to a :class:`Script`: a whole answer exactly as
  a server (or something pretending to be one) writes it on the connection,
  whether the connection then ends (``eof``), the profile in force, and the
  events a :class:`ProxyConnection` must produce from it, in order, however
  the bytes are split. Use them to check a real server against the proxy
  (write the same path with ``ServerConnection`` and compare the events), to
  feed a fake server in adapter tests, or as fuzzing seeds.
* Builders for answers: :func:`path_head`, :func:`refusal`, :func:`chunk`,
  :data:`LAST_CHUNK`, :func:`frame`, :func:`notification_frame`,
  :func:`error_frame`, :func:`chunked`.
* :func:`ask_request` gives the exact request bytes of an ask .
* Drivers: :func:`run_proxy` / :func:`run_exchange` feed pieces and collect
  every event; :func:`split_at`, :func:`bytewise` and :func:`whole` cut an
  answer into pieces.

The names are stable; options are keyword-only and may grow.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from diverge_notifications.sansio import (
    NEED_DATA,
    Ask,
    ErrorData,
    Event,
    ExchangeConnection,
    FrameError,
    FrameErrorReason,
    MessageRejected,
    Notification,
    NotificationReceived,
    NotServed,
    Profile,
    ProxyConnection,
    ReaskNeeded,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
    encode_message,
)
from diverge_notifications.sansio.mcp.model import ErrorCode
from diverge_notifications.sansio.wire.framing import KEEPALIVE_FRAME, encode_frame
from diverge_notifications.sansio.wire.http import MESSAGES_CONTENT_TYPE

__all__ = [
    "AUTHORITY",
    "CHANNEL",
    "LAST_CHUNK",
    "NOTIFICATIONS",
    "SCRIPTS",
    "Script",
    "ask_request",
    "bytewise",
    "chunk",
    "chunked",
    "error_frame",
    "frame",
    "notification_frame",
    "path_head",
    "refusal",
    "run_exchange",
    "run_proxy",
    "split_at",
    "whole",
]

#: The authority the scripts' connections are made with.
AUTHORITY = "127.0.0.1:8080"
#: The channel the scripted server mints.
CHANNEL = "c1"

#: The terminating chunk of a chunked body (no trailers).
LAST_CHUNK = b"0\r\n\r\n"


# --- builders ------------------------------------------------------------------


def path_head(
    *,
    status: int = 200,
    reason: str = "OK",
    content_type: str | None = MESSAGES_CONTENT_TYPE,
    location: str | None = f"/mcp/notifications/{CHANNEL}",
    body: str | int = "chunked",
    extra: Iterable[tuple[str, str]] = (),
) -> bytes:
    """The head of an answer, as the wire mapping (docs/protocol.md) writes it by default.

    ``body`` is ``"chunked"`` (``Transfer-Encoding: chunked``), ``"close"``
    (close-delimited: no length at all) or an ``int`` (``Content-Length``).
    ``None`` leaves a header out.
    """
    lines = [f"HTTP/1.1 {status} {reason}"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    if location is not None:
        lines.append(f"Content-Location: {location}")
    lines.append("Cache-Control: no-store")
    if body == "chunked":
        lines.append("Transfer-Encoding: chunked")
    elif isinstance(body, int):
        lines.append(f"Content-Length: {body}")
    elif body != "close":
        raise ValueError(f"body must be 'chunked', 'close' or a length, not {body!r}")
    lines.extend(f"{name}: {value}" for name, value in extra)
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def refusal(status: int, reason: str, body: bytes = b"") -> bytes:
    """A whole non-2xx answer with a ``Content-Length`` body."""
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body


def chunk(data: bytes) -> bytes:
    """One HTTP chunk carrying ``data`` (which must not be empty)."""
    if not data:
        raise ValueError("an empty chunk is the last chunk: use LAST_CHUNK")
    return b"%x\r\n%s\r\n" % (len(data), data)


def chunked(*pieces: bytes, end: bool = True) -> bytes:
    """A chunked body: one chunk per piece, then :data:`LAST_CHUNK` when ``end``."""
    return b"".join(chunk(piece) for piece in pieces) + (LAST_CHUNK if end else b"")


def frame(payload: bytes) -> bytes:
    """One frame: 4-byte big-endian length, then ``payload`` (``b""`` is a keep-alive)."""
    return encode_frame(payload)


def notification_frame(notification: Notification) -> bytes:
    """The frame of a notification message (tag 0)."""
    return frame(encode_message(notification))


def error_frame(error: ErrorData) -> bytes:
    """The frame of an error message (tag 1)."""
    return frame(encode_message(error))


def ask_request(
    body: bytes = b"\x04", *, authority: str = AUTHORITY, token: str | None = None
) -> bytes:
    """The exact request bytes of an ask ; the default body is kind 4."""
    head = (
        "POST /requests HTTP/1.1\r\n"
        f"Host: {authority}\r\n"
        "Content-Type: application/vnd.diverge.ask\r\n"
        f"Content-Length: {len(body)}\r\n"
    )
    if token is not None:
        head += f"Authorization: Bearer {token}\r\n"
    return (head + "\r\n").encode("ascii") + body


# --- splitting and driving ------------------------------------------------------


def whole(data: bytes) -> list[bytes]:
    """``data`` in one piece."""
    return [data]


def bytewise(data: bytes) -> list[bytes]:
    """``data`` one byte at a time."""
    return [data[index : index + 1] for index in range(len(data))]


def split_at(data: bytes, offsets: Iterable[int]) -> list[bytes]:
    """``data`` cut at the given offsets (any order, duplicates and out-of-range ignored)."""
    cuts = sorted({offset for offset in offsets if 0 < offset < len(data)})
    bounds = [0, *cuts, len(data)]
    return [data[start:end] for start, end in itertools.pairwise(bounds)]


def _drain(connection: ProxyConnection | ExchangeConnection, events: list[Event]) -> None:
    while True:
        event = connection.next_event()
        if event is NEED_DATA:
            return
        assert isinstance(event, Event)
        events.append(event)


def _drive(
    connection: ProxyConnection | ExchangeConnection, pieces: Sequence[bytes], eof: bool
) -> list[Event]:
    connection.data_to_send()
    events: list[Event] = []
    for piece in pieces:
        connection.receive_data(piece)
        _drain(connection, events)
    if eof:
        connection.receive_data(b"")
        _drain(connection, events)
    return events


def run_proxy(pieces: Sequence[bytes], *, eof: bool = True, **options: Any) -> list[Event]:
    """Every event a fresh :class:`ProxyConnection` produces from ``pieces``.

    Events are taken after each piece; ``eof`` then reports the end of
    file. ``options`` go to the constructor (``profile=``, ``token=``...).
    """
    return _drive(ProxyConnection(AUTHORITY, **options), pieces, eof)


def run_exchange(
    ask: Ask, pieces: Sequence[bytes], *, eof: bool = True, **options: Any
) -> list[Event]:
    """Every event a fresh :class:`ExchangeConnection` for ``ask`` produces from ``pieces``."""
    return _drive(ExchangeConnection(AUTHORITY, ask, **options), pieces, eof)


# --- the scripts ------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Script:
    """One scripted answer and the events it must give, however it is split."""

    #: What the script is about, for people.
    description: str
    #: The whole answer, as written on the connection.
    answer: bytes
    #: The events, in order (``ReaskNeeded`` included).
    events: tuple[Event, ...]
    #: Whether the connection ends (end of file) after the answer.
    eof: bool = True
    #: The profile the proxy follows.
    profile: Profile = Profile.PROVIDER

    def run(self, pieces: Sequence[bytes] | None = None, **options: Any) -> list[Event]:
        """The events a :class:`ProxyConnection` produces from this answer, cut into ``pieces``."""
        return run_proxy(
            whole(self.answer) if pieces is None else pieces,
            eof=self.eof,
            profile=self.profile,
            **options,
        )


#: Notifications the scripts carry: a progress, a log message, a custom one
#: with ``_meta`` and an unknown member, and a list change.
NOTIFICATIONS: tuple[Notification, ...] = (
    Notification(
        "notifications/progress",
        {"progressToken": "build-7", "progress": 3, "total": 10, "message": "compiling"},
    ),
    Notification("notifications/message", {"level": "warning", "logger": "db", "data": [1, 2]}),
    Notification.from_bytes(
        b'{"jsonrpc":"2.0","method":"acme/ping","params":{"_meta":{"k":"v"},"n":1},"x":true}'
    ),
    Notification("notifications/tools/list_changed"),
)
_N1, _N2, _N3, _N4 = NOTIFICATIONS
_ERROR = ErrorData(code=ErrorCode.INTERNAL_ERROR, message="the MCP server went away")
_OPENED = StreamOpened(channel=CHANNEL)
_REASK = ReaskNeeded()
_RECEIVED = tuple(NotificationReceived(notification=n) for n in NOTIFICATIONS)
_NOT_SERVED_200 = NotServed(status=200, reason="the path ended with no message")
_UNDECODABLE = b"\x00{not json"


def _broken(reason: str) -> StreamBroken:
    return StreamBroken(reason=reason)


def _scripts() -> dict[str, Script]:
    nf = notification_frame
    head = path_head()
    packed = nf(_N1) + nf(_N2)
    split_frame = nf(_N3)
    scripts = {
        "notifications_then_end": Script(
            description="three notifications, one chunk each, then the clean end",
            answer=head + chunked(nf(_N1), nf(_N2), nf(_N3)),
            events=(_OPENED, *_RECEIVED[:3], StreamEnded(), _REASK),
        ),
        "frames_across_chunks": Script(
            description="two frames packed in one chunk, a third split over three chunks",
            answer=head
            + chunked(packed + split_frame[:2], split_frame[2:9], split_frame[9:] + nf(_N4)),
            events=(_OPENED, *_RECEIVED, StreamEnded(), _REASK),
        ),
        "nothing_then_end": Script(
            description="the path opens and ends cleanly with no message: not served",
            answer=head + LAST_CHUNK,
            events=(_OPENED, _NOT_SERVED_200, _REASK),
        ),
        "keepalives_only": Script(
            description="keep-alives, which are not messages, then the clean end: not served",
            answer=head + chunked(KEEPALIVE_FRAME, KEEPALIVE_FRAME * 2),
            events=(_OPENED, _NOT_SERVED_200, _REASK),
        ),
        "keepalives_between": Script(
            description="keep-alives before, between and after notifications",
            answer=head + chunked(KEEPALIVE_FRAME, nf(_N1) + KEEPALIVE_FRAME, nf(_N2)),
            events=(_OPENED, *_RECEIVED[:2], StreamEnded(), _REASK),
        ),
        "error_first": Script(
            description="an error as the only message",
            answer=head + chunked(error_frame(_ERROR)),
            events=(_OPENED, StreamErrored(error=_ERROR), _REASK),
        ),
        "error_after_notifications": Script(
            description="two notifications, an error, then a notification that is discarded",
            answer=head + chunked(nf(_N1), nf(_N2) + error_frame(_ERROR), nf(_N3)),
            events=(_OPENED, *_RECEIVED[:2], StreamErrored(error=_ERROR), _REASK),
        ),
        "undecodable_message": Script(
            description="a message that does not decode is rejected and the path goes on",
            answer=head + chunked(frame(_UNDECODABLE), frame(b"\x07{}"), nf(_N1)),
            events=(
                _OPENED,
                MessageRejected(
                    error=FrameError(
                        FrameErrorReason.BODY,
                        "notification is not valid JSON: Expecting property name enclosed "
                        "in double quotes at offset 1",
                        tag=0,
                    ),
                    payload=_UNDECODABLE,
                ),
                MessageRejected(
                    error=FrameError(
                        FrameErrorReason.UNKNOWN_TAG,
                        "unknown message tag 7 (0 is a notification, 1 an error)",
                        tag=7,
                    ),
                    payload=b"\x07{}",
                ),
                _RECEIVED[0],
                StreamEnded(),
                _REASK,
            ),
        ),
        "refused_with_body": Script(
            description="a 401 with a body for people: not served, with status and reason",
            answer=refusal(401, "Unauthorized", b"missing or wrong bearer token\n"),
            events=(
                NotServed(status=401, reason="401 Unauthorized: missing or wrong bearer token"),
                _REASK,
            ),
        ),
        "refused_long_body": Script(
            description="a 503 whose body is long: only its start is kept",
            answer=refusal(503, "Service Unavailable", b"x" * 150 + b" y" * 500),
            events=(
                NotServed(
                    status=503,
                    reason="503 Service Unavailable: " + "x" * 150 + " y" * 25 + "…",
                ),
                _REASK,
            ),
        ),
        "refused_no_phrase_chunked": Script(
            description="a 404 with no reason phrase and a chunked HTML body",
            answer=b"HTTP/1.1 404 \r\nContent-Type: text/html\r\nTransfer-Encoding: chunked"
            b"\r\n\r\n" + chunked(b"<h1>Not\r\n", b"Found</h1>"),
            events=(NotServed(status=404, reason="404 Not Found: <h1>Not Found</h1>"), _REASK),
        ),
        "redirect": Script(
            description="a redirect names where it points",
            answer=b"HTTP/1.1 308 Permanent Redirect\r\nLocation: http://elsewhere/requests\r\n"
            b"Content-Length: 0\r\n\r\n",
            events=(
                NotServed(
                    status=308,
                    reason="308 Permanent Redirect (Location: http://elsewhere/requests)",
                ),
                _REASK,
            ),
        ),
        "informational_first": Script(
            description="1xx heads before the answer are skipped",
            answer=b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n"
            + head
            + chunked(nf(_N1)),
            events=(_OPENED, _RECEIVED[0], StreamEnded(), _REASK),
        ),
        "wrong_content_type": Script(
            description="a 200 that is not a path (an HTML page)",
            answer=path_head(content_type="text/html; charset=utf-8", body=5) + b"hello",
            events=(
                _broken(
                    "the answer has status 200 and Content-Type 'text/html; charset=utf-8', "
                    "not application/vnd.diverge.messages: is this the Diverge server's address?"
                ),
                _REASK,
            ),
        ),
        "no_content_type": Script(
            description="a 204 with no content type",
            answer=b"HTTP/1.1 204 No Content\r\n\r\n",
            events=(
                _broken(
                    "the answer has status 204 but no Content-Type; a path is "
                    "application/vnd.diverge.messages"
                ),
                _REASK,
            ),
        ),
        "no_content_location": Script(
            description="a path head without Content-Location has no channel",
            answer=path_head(location=None) + LAST_CHUNK,
            events=(
                _broken("the answer has no Content-Location, so the path has no channel"),
                _REASK,
            ),
        ),
        "bad_content_location": Script(
            description="a Content-Location whose last segment is not a channel id",
            answer=path_head(location="/mcp/notifications/") + LAST_CHUNK,
            events=(
                _broken(
                    "the answer's Content-Location '/mcp/notifications/' does not end in a "
                    "channel id (1-64 of A-Z a-z 0-9 - _)"
                ),
                _REASK,
            ),
        ),
        "content_encoded": Script(
            description="a gzip-encoded body, which the ask did not allow",
            answer=path_head(extra=[("Content-Encoding", "gzip")]) + LAST_CHUNK,
            events=(
                _broken("the answer's body is content-encoded (gzip), which the ask did not allow"),
                _REASK,
            ),
        ),
        "malformed_head": Script(
            description="a header line without a colon",
            answer=b"HTTP/1.1 200 OK\r\nContent-Type application/vnd.diverge.messages\r\n\r\n",
            events=(
                _broken(
                    "the answer's head is not valid HTTP/1.1: illegal header line: "
                    "bytearray(b'Content-Type application/vnd.diverge.messages')"
                ),
                _REASK,
            ),
        ),
        "not_http": Script(
            description="something that is not an HTTP server answers",
            answer=b"SSH-2.0-OpenSSH_9.6\r\n",
            events=(
                _broken(
                    "the answer does not start with an HTTP/1.x status line: "
                    "is this the Diverge server's address?"
                ),
                _REASK,
            ),
        ),
        "head_too_large": Script(
            description="a head over max_head_size (64 KiB by default)",
            answer=path_head(extra=[("X-Padding", "p" * 70_000)]) + LAST_CHUNK,
            events=(
                _broken("the answer's head is larger than max_head_size (65536 bytes)"),
                _REASK,
            ),
        ),
        "closed_before_answer": Script(
            description="the connection ends before any answer",
            answer=b"",
            events=(_broken("the connection closed before any answer arrived"), _REASK),
        ),
        "closed_in_head": Script(
            description="the connection ends in the middle of the head",
            answer=head[:40],
            events=(_broken("the connection closed in the middle of the answer's head"), _REASK),
        ),
        "oversized_frame": Script(
            description="a frame claiming more than max_frame_size: ends the path unbuffered",
            answer=head + chunk(nf(_N1) + (16 * 1024 * 1024 + 1).to_bytes(4, "big") + b"xx"),
            events=(
                _OPENED,
                _RECEIVED[0],
                _broken("a frame of 16777217 bytes is larger than max_frame_size (16777216 bytes)"),
                _REASK,
            ),
        ),
        "truncated_length_prefix": Script(
            description="the body ends cleanly two bytes into a length prefix",
            answer=head + chunked(nf(_N1) + b"\x00\x00"),
            events=(
                _OPENED,
                _RECEIVED[0],
                _broken("the answer's body ended inside a frame's length prefix (2 of 4 bytes)"),
                _REASK,
            ),
        ),
        "truncated_message": Script(
            description="the body ends cleanly in the middle of a message",
            answer=head + chunked(nf(_N1) + nf(_N2)[:20]),
            events=(
                _OPENED,
                _RECEIVED[0],
                _broken(f"the answer's body ended inside a frame (20 of {len(nf(_N2))} bytes)"),
                _REASK,
            ),
        ),
        "truncated_chunk": Script(
            description="the connection ends in the middle of a chunk",
            answer=head + chunk(nf(_N1)) + b"%x\r\n" % len(nf(_N2)) + nf(_N2)[:10],
            events=(
                _OPENED,
                _RECEIVED[0],
                _broken(
                    "the connection closed before the answer's body ended, inside a frame "
                    f"(10 of {len(nf(_N2))} bytes)"
                ),
                _REASK,
            ),
        ),
        "closed_between_frames": Script(
            description="the connection ends between frames, before the last chunk",
            answer=head + chunk(nf(_N1)),
            events=(
                _OPENED,
                _RECEIVED[0],
                _broken("the connection closed before the answer's body ended"),
                _REASK,
            ),
        ),
        "broken_chunk_size": Script(
            description="a chunk-size line that is not hexadecimal",
            answer=head + chunk(nf(_N1)) + b"zz\r\nnope\r\n",
            events=(
                _OPENED,
                _RECEIVED[0],
                _broken(
                    "the answer's chunked encoding is broken: a chunk-size line is not valid: b'zz'"
                ),
                _REASK,
            ),
        ),
        "broken_chunk_footer": Script(
            description="a chunk not followed by CRLF",
            answer=head + b"%x\r\n%sXY" % (len(nf(_N1)), nf(_N1)) + LAST_CHUNK,
            events=(
                _OPENED,
                _RECEIVED[0],
                _broken("the answer's chunked encoding is broken: a chunk is not followed by CRLF"),
                _REASK,
            ),
        ),
        "chunk_size_line_too_long": Script(
            description="a chunk-size line over max_head_size (chunk extensions run wild)",
            answer=head + chunk(nf(_N1)) + b"5;" + b"e" * 70_000 + b"\r\nhello\r\n" + LAST_CHUNK,
            events=(
                _OPENED,
                _RECEIVED[0],
                _broken("the answer's chunk-size line is larger than max_head_size (65536 bytes)"),
                _REASK,
            ),
        ),
        "trailers_too_long": Script(
            description="a trailer section over max_head_size",
            answer=head + chunk(nf(_N1)) + b"0\r\n" + b"X-T: 1234567\r\n" * 5000 + b"\r\n",
            events=(
                _OPENED,
                _RECEIVED[0],
                _broken("the answer's trailer section is larger than max_head_size (65536 bytes)"),
                _REASK,
            ),
        ),
        "bad_trailer": Script(
            description="a trailer line that is not a field",
            answer=head + chunk(nf(_N1)) + b"0\r\nnot a field\r\n\r\n",
            events=(
                _OPENED,
                _RECEIVED[0],
                _broken(
                    "the answer's chunked encoding is broken: a trailer line is not a field: "
                    "b'not a field'"
                ),
                _REASK,
            ),
        ),
        "chunk_extensions": Script(
            description="chunk extensions and spaces before them are ignored",
            answer=head
            + b"%x ; name=value;x\r\n%s\r\n" % (len(nf(_N1)), nf(_N1))
            + b"0;last\r\n\r\n",
            events=(_OPENED, _RECEIVED[0], StreamEnded(), _REASK),
        ),
        "trailing_garbage": Script(
            description="bytes after the clean end are discarded",
            answer=head + chunked(nf(_N1)) + b"garbage" + nf(_N2),
            events=(_OPENED, _RECEIVED[0], StreamEnded(), _REASK),
        ),
        "trailers": Script(
            description="a chunked body with a trailer section",
            answer=head + chunk(nf(_N1)) + b"0\r\nX-Checksum: 1\r\n\r\n",
            events=(_OPENED, _RECEIVED[0], StreamEnded(), _REASK),
        ),
        "content_length_body": Script(
            description="a Content-Length body; bytes after it are discarded",
            answer=path_head(body=len(nf(_N1) + nf(_N2))) + nf(_N1) + nf(_N2) + b"extra",
            events=(_OPENED, *_RECEIVED[:2], StreamEnded(), _REASK),
        ),
        "content_length_cut": Script(
            description="a Content-Length body cut short by the connection ending",
            answer=path_head(body=1000) + nf(_N1) + nf(_N2)[:5],
            events=(
                _OPENED,
                _RECEIVED[0],
                _broken(
                    "the connection closed before the answer's body ended, inside a "
                    f"frame (5 of {len(nf(_N2))} bytes)"
                ),
                _REASK,
            ),
        ),
        "close_delimited_body": Script(
            description="a body that ends when the connection does, on a frame boundary",
            answer=path_head(body="close") + nf(_N1) + KEEPALIVE_FRAME + nf(_N2),
            events=(_OPENED, *_RECEIVED[:2], StreamEnded(), _REASK),
        ),
        "close_delimited_mid_frame": Script(
            description="a close-delimited body that ends inside a frame",
            answer=path_head(body="close") + nf(_N1) + nf(_N2)[:-1],
            events=(
                _OPENED,
                _RECEIVED[0],
                _broken(
                    "the answer's body ended inside a frame "
                    f"({len(nf(_N2)) - 1} of {len(nf(_N2))} bytes)"
                ),
                _REASK,
            ),
        ),
        "open_path": Script(
            description="a path that stays open: no terminal event yet",
            answer=head + chunk(nf(_N1)) + chunk(KEEPALIVE_FRAME + nf(_N2)[:7]),
            eof=False,
            events=(_OPENED, _RECEIVED[0]),
        ),
        # --- the container profile (the container proxy's Response and Request pages) ---
        "container_notifications_open": Script(
            description="container profile happy path: notifications, no finish",
            answer=head + chunk(nf(_N1)) + chunk(nf(_N2)),
            eof=False,
            profile=Profile.CONTAINER,
            events=(_OPENED, *_RECEIVED[:2]),
        ),
        "container_error_first": Script(
            description="container profile happy path: one error, then the finish",
            answer=head + chunked(error_frame(_ERROR)),
            profile=Profile.CONTAINER,
            events=(_OPENED, StreamErrored(error=_ERROR), _REASK),
        ),
        "container_nothing_then_finish": Script(
            description="container profile: a finish with nothing before it is not served",
            answer=head + LAST_CHUNK,
            profile=Profile.CONTAINER,
            events=(_OPENED, _NOT_SERVED_200, _REASK),
        ),
        "container_error_after_notification": Script(
            description="container profile violation: an error after a notification",
            answer=head + chunked(nf(_N1), error_frame(_ERROR)),
            profile=Profile.CONTAINER,
            events=(
                _OPENED,
                _RECEIVED[0],
                _broken("an error after a notification violates the container profile"),
                _REASK,
            ),
        ),
        "container_finish_after_notifications": Script(
            description="container profile violation: a finish after notifications",
            answer=head + chunked(nf(_N1), nf(_N2)),
            profile=Profile.CONTAINER,
            events=(
                _OPENED,
                *_RECEIVED[:2],
                _broken("a finish after notifications violates the container profile"),
                _REASK,
            ),
        ),
    }
    return scripts


#: Every scripted answer, by name.
SCRIPTS: Mapping[str, Script] = _scripts()
