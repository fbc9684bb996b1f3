"""The Streamable HTTP transport of the bridge.

The SDK's transport parses the data of each server-sent event into a
pydantic model before anyone else sees it. This subclass hands the event's
data, the JSON text the server wrote, to the relay first and then lets the
SDK go on as usual. It hooks the SDK at ``_handle_sse_event``, the one
method every SSE stream (the GET stream, each POST's response stream, and
their resumptions) goes through; the SDK has no public hook there, so this
module follows ``mcp`` 2.3's internals and is the place to adapt if they
change.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping

import anyio
import httpx2
from httpx2 import ServerSentEvent
from mcp.client.streamable_http import (
    DEFAULT_MAX_SSE_EVENT_SIZE,
    StreamableHTTPTransport,
    StreamWriter,
)
from mcp.shared._context_streams import (
    ContextReceiveStream,
    ContextSendStream,
    create_context_streams,
)
from mcp.shared.message import SessionMessage
from mcp_types import RequestId

from ._link import Link

__all__ = ["RelayingTransport", "http_transport"]

logger = logging.getLogger("diverge_notifications.bridge")

#: Seconds to connect, write and wait for a pool slot (the SDK's default).
_HTTP_TIMEOUT = 30.0
#: Seconds an SSE stream may stay silent before the read fails (the SDK's default).
_SSE_READ_TIMEOUT = 300.0
#: Seconds the goodbye (the DELETE ending the session) may take.
_GOODBYE_TIMEOUT = 5.0


class RelayingTransport(StreamableHTTPTransport):
    """The SDK's Streamable HTTP client transport, relaying each message's raw JSON."""

    def __init__(
        self,
        url: str,
        *,
        relay: Callable[[bytes], None],
        link: Link,
        max_sse_event_size: int | None = DEFAULT_MAX_SSE_EVENT_SIZE,
    ) -> None:
        super().__init__(url, max_sse_event_size=max_sse_event_size)
        self._relay = relay
        self._link = link

    async def _handle_sse_event(
        self,
        sse: ServerSentEvent,
        read_stream_writer: StreamWriter,
        original_request_id: RequestId | None = None,
        resumption_callback: Callable[[str], Awaitable[None]] | None = None,
    ) -> bool:
        if sse.event == "message" and sse.data:
            self._relay(sse.data.encode("utf-8", "surrogatepass"))
        return await super()._handle_sse_event(
            sse, read_stream_writer, original_request_id, resumption_callback
        )

    async def handle_get_stream(
        self, client: httpx2.AsyncClient, read_stream_writer: StreamWriter
    ) -> None:
        # Without a session id (a stateless server) the SDK opens no GET
        # stream at all, and there is nothing to end.
        stateful = self.session_id is not None
        try:
            await super().handle_get_stream(client, read_stream_writer)
        finally:
            # The SDK retries a broken GET stream a couple of times and then
            # gives up without a word; the session decides what that means.
            if stateful:
                self._link.get_stream_ended.set()


@contextlib.asynccontextmanager
async def http_transport(
    url: str,
    *,
    relay: Callable[[bytes], None],
    link: Link,
    headers: Mapping[str, str] | None = None,
) -> AsyncIterator[
    tuple[ContextReceiveStream[SessionMessage | Exception], ContextSendStream[SessionMessage]]
]:
    """Speak MCP Streamable HTTP with ``url``, relaying each raw message.

    The same wiring as the SDK's ``streamable_http_client``, with
    :class:`RelayingTransport` in it. On exit the session is ended with a
    ``DELETE`` when the server gave one.
    """
    transport = RelayingTransport(url, relay=relay, link=link)
    timeout = httpx2.Timeout(_HTTP_TIMEOUT, read=_SSE_READ_TIMEOUT)

    async def note_response(response: httpx2.Response) -> None:
        if response.request.method == "GET" and response.is_success:
            link.get_stream_opened = True

    async with httpx2.AsyncClient(
        timeout=timeout, headers=dict(headers or {}), event_hooks={"response": [note_response]}
    ) as client:
        read_stream_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
        write_stream, write_stream_reader = create_context_streams[SessionMessage](0)
        async with (
            read_stream_writer,
            read_stream,
            write_stream,
            write_stream_reader,
            anyio.create_task_group() as tasks,
        ):

            def start_get_stream() -> None:
                tasks.start_soon(transport.handle_get_stream, client, read_stream_writer)

            tasks.start_soon(
                transport.post_writer,
                client,
                write_stream_reader,
                read_stream_writer,
                write_stream,
                start_get_stream,
                tasks,
            )
            try:
                yield read_stream, write_stream
            finally:
                if transport.session_id:
                    with anyio.move_on_after(_GOODBYE_TIMEOUT, shield=True):
                        await transport.terminate_session(client)
                tasks.cancel_scope.cancel()
