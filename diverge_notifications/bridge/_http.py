"""The Streamable HTTP transport of the bridge, over httpx2.

The SDK's own client transport parses every message into a pydantic model
before anyone else sees it, and offers no public place to look at the JSON
the server wrote. So the bridge speaks Streamable HTTP itself: it POSTs each
message the SDK's session writes, reads each answer (a JSON body, or a
server-sent event stream, decoded by httpx2's ``EventSource``), hands the
JSON text of every message to the relay first, and only then parses it for
the session. The session sees it through the SDK's public transport
interface (:class:`mcp.client.Transport`): a pair of streams of
:class:`~mcp.shared.message.SessionMessage`.

What it does, as the Streamable HTTP transport of both MCP revisions
specifies, and as far as a relay needs:

* every POST carries ``Accept: application/json, text/event-stream``, the
  session id the server gave in answer to ``initialize``, the protocol
  version header of the negotiated revision, and the headers the session
  asks for on each message (``Mcp-Method``, ``Mcp-Name``, ...);
* each request's POST runs on its own; an answer that is not a 2xx is the
  JSON-RPC error in its body when there is one, ``METHOD_NOT_FOUND`` for a
  404 before a session exists, and the session's end for a 404 after
  (the server no longer knows the session: it restarted);
* after ``notifications/initialized`` (the handshake revisions) it opens
  the GET stream for what the server sends on its own; that stream ending,
  once it was open, is the server going away;
* on MCP 2026-07-28 a request is cancelled by closing its POST, not by a
  ``notifications/cancelled`` message;
* on the way out, a session the server gave an id is ended with ``DELETE``
  (unless the server went away: then there is nothing to end, and a server
  that stopped answering would only hold the goodbye up).

It does not resume a broken event stream with ``Last-Event-ID``: the
request it answered fails, and the bridge's session decides what that
means (a broken ``subscriptions/listen`` stream is a reconnection). No
redirect is followed. Messages larger than ``max_message_size`` are not
read (counted in the link's ``dropped``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Final

import anyio
import anyio.abc
import httpx2
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.message import ClientMessageMetadata, SessionMessage
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ._link import Link, describe

__all__ = ["http_transport"]

logger = logging.getLogger("diverge_notifications.bridge")

#: Seconds to connect, to write a request and to wait for a pooled connection.
_HTTP_TIMEOUT: Final = 30.0
#: Seconds the goodbye (the DELETE ending the session) may take.
_GOODBYE_TIMEOUT: Final = 5.0
_SESSION_ID: Final = "mcp-session-id"
_JSON: Final = "application/json"
_EVENT_STREAM: Final = "text/event-stream"


class _TooLarge(Exception):
    """A message longer than the transport's limit."""


def _content_type(response: httpx2.Response) -> str:
    return response.headers.get("content-type", "").partition(";")[0].strip().lower()


class _HttpConnection:
    """One Streamable HTTP connection: the POSTs, the GET stream, the session id."""

    def __init__(
        self,
        url: str,
        client: httpx2.AsyncClient,
        *,
        relay: Callable[[bytes], None],
        link: Link,
        to_session: MemoryObjectSendStream[SessionMessage | Exception],
        tasks: anyio.abc.TaskGroup,
        max_message_size: int,
    ) -> None:
        self._url = url
        self._client = client
        self._relay = relay
        self._link = link
        self._to_session = to_session
        self._tasks = tasks
        self._max_size = max_message_size
        self.session_id: str | None = None
        self._protocol_version: str | None = None
        #: The POST of each request in flight, to close on a 2026-07-28 cancel.
        self._in_flight: dict[types.RequestId, anyio.CancelScope] = {}

    # -- out ------------------------------------------------------------------

    def _headers(self, metadata: ClientMessageMetadata | None) -> dict[str, str]:
        headers = {"accept": f"{_JSON}, {_EVENT_STREAM}", "content-type": _JSON}
        if self.session_id is not None:
            headers[_SESSION_ID] = self.session_id
        if self._protocol_version is not None:
            headers[MCP_PROTOCOL_VERSION_HEADER] = self._protocol_version
        if metadata is not None and metadata.headers:
            headers.update(metadata.headers)
        return headers

    @property
    def _modern(self) -> bool:
        return self._protocol_version in MODERN_PROTOCOL_VERSIONS

    async def write(self, receive: MemoryObjectReceiveStream[SessionMessage]) -> None:
        """Send what the session writes, in its order; each request's answer is read apart."""
        async with receive:
            async for session_message in receive:
                message = session_message.message
                metadata = session_message.metadata
                meta = metadata if isinstance(metadata, ClientMessageMetadata) else None
                if isinstance(message, types.JSONRPCRequest) and message.method == "initialize":
                    # The handshake negotiates the version: no earlier guess goes with it.
                    self._protocol_version = None
                elif meta is not None and meta.headers:
                    stamped = meta.headers.get(MCP_PROTOCOL_VERSION_HEADER)
                    if stamped is not None:
                        self._protocol_version = stamped
                if self._cancelled_by_closing(message):
                    continue
                headers = self._headers(meta)
                body = message.model_dump_json(by_alias=True, exclude_unset=True).encode()
                if isinstance(message, types.JSONRPCRequest):
                    scope = anyio.CancelScope()
                    previous = self._in_flight.get(message.id)
                    if previous is not None:
                        previous.cancel()  # an id used again: the old answer is nobody's now
                    self._in_flight[message.id] = scope
                    self._tasks.start_soon(self._request, message, body, headers, scope)
                else:
                    await self._post_one_way(body, headers)
                    if (
                        isinstance(message, types.JSONRPCNotification)
                        and message.method == "notifications/initialized"
                    ):
                        self._tasks.start_soon(self._get_stream)

    def _cancelled_by_closing(self, message: types.JSONRPCMessage) -> bool:
        """On 2026-07-28, a cancel closes the request's POST and is not sent; True then."""
        if not (
            isinstance(message, types.JSONRPCNotification)
            and message.method == "notifications/cancelled"
            and self._modern
        ):
            return False
        params = message.params or {}
        request_id = params.get("requestId")
        if isinstance(request_id, str | int):
            scope = self._in_flight.get(request_id)
            if scope is not None:
                scope.cancel()
        return True

    async def _post_one_way(self, body: bytes, headers: Mapping[str, str]) -> None:
        """A notification or a response: the server answers 202, and any body goes unread."""
        try:
            async with self._client.stream(
                "POST", self._url, content=body, headers=headers
            ) as response:
                status = response.status_code
        except (httpx2.HTTPError, httpx2.StreamError) as error:
            self._link.mark_lost(f"the MCP server could not be reached: {describe(error)}")
            return
        if status == 404 and self.session_id is not None:
            self._link.mark_lost("the MCP server no longer knows the session (HTTP 404)")
        elif not 200 <= status < 300:
            logger.warning("the MCP server answered a message with HTTP %d", status)

    async def _request(
        self,
        message: types.JSONRPCRequest,
        body: bytes,
        headers: Mapping[str, str],
        scope: anyio.CancelScope,
    ) -> None:
        answered = False
        try:
            with scope:
                try:
                    async with self._client.stream(
                        "POST", self._url, content=body, headers=headers
                    ) as response:
                        answered = True
                        await self._answer(message, response)
                except (httpx2.HTTPError, httpx2.StreamError) as error:
                    if not answered and isinstance(error, httpx2.TransportError):
                        # No answer at all: the server is not there.
                        self._link.mark_lost(
                            f"the MCP server could not be reached: {describe(error)}"
                        )
                    await self._fail(message.id, types.CONNECTION_CLOSED, describe(error))
        finally:
            if self._in_flight.get(message.id) is scope:
                del self._in_flight[message.id]

    async def _answer(self, message: types.JSONRPCRequest, response: httpx2.Response) -> None:
        status = response.status_code
        kind = _content_type(response)
        if message.method == "initialize" and response.is_success:
            self.session_id = response.headers.get(_SESSION_ID) or None
        if status == 202:
            await self._fail(message.id, types.INVALID_REQUEST, "HTTP 202 for a request")
        elif 300 <= status < 400:
            location = response.headers.get("location", "?")
            await self._fail(
                message.id, types.INVALID_REQUEST, f"redirect to {location} not followed"
            )
        elif status >= 400:
            await self._refused(message, response, kind)
        elif kind == _JSON:
            try:
                raw = await self._read_body(response)
            except _TooLarge:
                await self._fail(message.id, types.INTERNAL_ERROR, "the answer is too large")
                return
            if await self._deliver(raw) is None:
                await self._fail(
                    message.id, types.PARSE_ERROR, "the answer is not a JSON-RPC message"
                )
        elif kind == _EVENT_STREAM:
            if not await self._events(response, answer_to=message.id):
                await self._fail(
                    message.id,
                    types.CONNECTION_CLOSED,
                    "the MCP server ended the response stream without answering",
                )
        else:
            await self._fail(message.id, types.INVALID_REQUEST, f"unexpected content type {kind!r}")

    async def _refused(
        self, message: types.JSONRPCRequest, response: httpx2.Response, kind: str
    ) -> None:
        """A request answered with a status of 400 or more."""
        status = response.status_code
        if kind == _JSON:
            with contextlib.suppress(_TooLarge):
                raw = await self._read_body(response)
                self._relay(raw)
                try:
                    parsed = types.jsonrpc_message_adapter.validate_json(raw, by_name=False)
                except ValueError:
                    parsed = None
                if isinstance(parsed, types.JSONRPCError):
                    # The server may not have known the id (null): it is this request's.
                    reply = types.JSONRPCError(jsonrpc="2.0", id=message.id, error=parsed.error)
                    await self._send(SessionMessage(reply))
                    return
        if status == 404 and self.session_id is None:
            # Before any session, a 404 is how a server says it has no such method.
            await self._fail(message.id, types.METHOD_NOT_FOUND, "Not Found (HTTP 404)")
        elif status == 404:
            self._link.mark_lost("the MCP server no longer knows the session (HTTP 404)")
            await self._fail(message.id, types.INVALID_REQUEST, "session terminated (HTTP 404)")
        else:
            await self._fail(message.id, types.INTERNAL_ERROR, f"HTTP {status}")

    async def _read_body(self, response: httpx2.Response) -> bytes:
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > self._max_size:
                self._link.dropped += 1
                logger.warning(
                    "dropped a message longer than %d bytes from the MCP server", self._max_size
                )
                raise _TooLarge
        return bytes(body)

    async def _events(
        self, response: httpx2.Response, *, answer_to: types.RequestId | None = None
    ) -> bool:
        """Relay and deliver each event; whether the answer to ``answer_to`` came."""
        source = httpx2.EventSource(response, max_event_size=self._max_size)
        try:
            async for event in source:
                if event.event != "message" or not event.data:
                    continue  # a priming event, or one this transport has no use for
                # httpx2 decodes the stream as UTF-8: encoding it again gives the
                # server's bytes (the data lines joined by LF, as SSE defines).
                message = await self._deliver(event.data.encode("utf-8"))
                if (
                    answer_to is not None
                    and isinstance(message, types.JSONRPCResponse | types.JSONRPCError)
                    and str(message.id) == str(answer_to)
                ):
                    return True
        except httpx2.SSEError as error:
            if "exceeded" in str(error):
                self._link.dropped += 1
            logger.warning("an event stream of the MCP server failed: %s", error)
        return False

    async def _deliver(self, raw: bytes) -> types.JSONRPCMessage | None:
        """Relay ``raw``, then hand it to the session parsed; the message, if it parsed."""
        self._relay(raw)
        try:
            message = types.jsonrpc_message_adapter.validate_json(raw, by_name=False)
        except ValueError as error:
            await self._send(error)  # as the SDK's transports do: the session logs it
            return None
        await self._send(SessionMessage(message))
        return message

    async def _send(self, item: SessionMessage | Exception) -> None:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._to_session.send(item)

    async def _fail(self, request_id: types.RequestId, code: int, message: str) -> None:
        """Answer ``request_id`` for the server, which will not."""
        error = types.JSONRPCError(
            jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
        )
        await self._send(SessionMessage(error))

    async def _get_stream(self) -> None:
        """The handshake revisions' GET stream; its end, once open, is the server's."""
        headers = self._headers(None)
        headers["accept"] = _EVENT_STREAM
        del headers["content-type"]
        try:
            async with self._client.stream("GET", self._url, headers=headers) as response:
                if not response.is_success or _content_type(response) != _EVENT_STREAM:
                    logger.info(
                        "the MCP server keeps no GET stream (HTTP %d)", response.status_code
                    )
                    return
                await self._events(response)
            reason = "the MCP server ended its GET stream"
        except (httpx2.HTTPError, httpx2.StreamError) as error:
            reason = f"the MCP server's GET stream broke: {describe(error)}"
        self._link.mark_lost(reason)

    async def goodbye(self) -> None:
        """End the session the server gave an id, if any (bounded, best effort)."""
        if self.session_id is None:
            return
        headers = self._headers(None)
        del headers["content-type"]
        with anyio.move_on_after(_GOODBYE_TIMEOUT, shield=True):
            try:
                await self._client.delete(self._url, headers=headers)
            except httpx2.HTTPError as error:
                logger.debug("ending the MCP session failed: %s", describe(error))


@contextlib.asynccontextmanager
async def http_transport(
    url: str,
    *,
    relay: Callable[[bytes], None],
    link: Link,
    headers: Mapping[str, str] | None = None,
    max_message_size: int,
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """Speak MCP Streamable HTTP with ``url``, relaying each message's JSON text.

    ``relay`` gets the bytes of every message the server sends, before the
    session sees it; ``link`` is marked lost when the server goes away.
    ``headers`` go with every request. Yields the session's streams, as a
    :class:`mcp.client.Transport` does.
    """
    timeout = httpx2.Timeout(_HTTP_TIMEOUT, read=None)
    to_session, from_transport = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_transport, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    async with (
        httpx2.AsyncClient(timeout=timeout, headers=dict(headers or {})) as client,
        to_session,
        anyio.create_task_group() as tasks,
    ):
        connection = _HttpConnection(
            url,
            client,
            relay=relay,
            link=link,
            to_session=to_session,
            tasks=tasks,
            max_message_size=max_message_size,
        )
        tasks.start_soon(connection.write, from_session)
        try:
            yield from_transport, to_transport
        finally:
            from_transport.close()
            to_transport.close()
            # A server that went away (or stopped answering) has no session to end.
            if not link.lost.is_set():
                await connection.goodbye()
            tasks.cancel_scope.cancel()
