"""The ASGI adapter: a hub's server as an ASGI 3 application, :func:`asgi_app`.

The application serves the same protocol as :func:`.asyncio.serve`, inside
the ASGI server and the web application that are already there (uvicorn,
hypercorn, granian; Starlette's ``Mount``, ``FastAPI.mount``). Every
decision is the serving driver's
(:class:`~diverge_notifications.sansio.drivers.serve.ServingConnection`, one
per request, made with the same :class:`ServeSettings`); this module moves
bytes between it and the ASGI messages:

* the request: the ASGI server has parsed it already, so its head is written
  out again as HTTP/1.1 (the method, the path below the mount point, the
  query, the headers but the hop-by-hop ones) and fed to the driver, and
  the body after it, as it arrives (as chunks when the request has no
  ``Content-Length``): the driver judges it as it judges a request read from
  a socket, and answers, refuses or opens the path the same way;
* the answer: what the driver writes is HTTP/1.1 too; its head becomes
  ``http.response.start`` (the status and the headers but ``Connection``
  and ``Transfer-Encoding``, which are the ASGI server's), and its body,
  de-chunked with the proxy side's own reader, ``http.response.body``
  messages: the frames are the bytes the native servers write.

The ASGI server frames the answer itself (its own ``Date``, ``Server``,
chunking, keep-alive and reason phrase): docs/asgi.md lists every
difference. A ``send`` of the answer that does not complete within
``stall_timeout`` is a stalled listener: the path is cut off (its queue
freed, counted, logged) and the application returns without ending the
answer, which the ASGI server closes. On the application's shutdown
(:meth:`AsgiApp.aclose`, the ASGI ``lifespan.shutdown``, the
:meth:`AsgiApp.lifespan` context, or the ASGI server cancelling the request
when its graceful shutdown times out, where the connection outlives the
request, as uvicorn's does) every open path writes its queue and its clean
end. Written means handed to the ASGI server: uvicorn exits right after its
cancellation without writing out what it holds, so the route that is clean
for a listener that is behind is :meth:`AsgiApp.aclose` before the ASGI
server's own shutdown (docs/asgi.md, Shutdown). The application runs on
asyncio.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, MutableMapping
from typing import Any, Final
from urllib.parse import quote

import h11

from ..sansio.client.bodies import END, Bad, BodyReader, body_reader
from ..sansio.client.heads import HeadReader
from ..sansio.drivers import actions
from ..sansio.drivers.actions import ExchangeHandler
from ..sansio.drivers.reports import ServeReport
from ..sansio.drivers.settings import (
    DEFAULT_ASK_TIMEOUT,
    DEFAULT_CLOSE_TIMEOUT,
    DEFAULT_HANDLER_TIMEOUT,
    DEFAULT_KEEPALIVE_INTERVAL,
    DEFAULT_MAX_BATCH,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_DISCARD,
    DEFAULT_SLOW_AFTER,
    DEFAULT_STALL_TIMEOUT,
    DEFAULT_WRITE_BUFFER,
    ServeSettings,
)
from ..sansio.errors import LocalProtocolError
from ..sansio.server.filters import Interest
from ..sansio.server.hub import Hub
from ..sansio.wire.http import ASK_PATH, DEFAULT_MAX_HEAD_SIZE, LAST_CHUNK, chunk
from ..sansio.wire.profiles import Profile
from ._common import AsyncServerBase, peer_name
from .asyncio import answer_within, within

__all__ = ["AsgiApp", "asgi_app"]

#: An ASGI message, as the server gives it and takes it.
Message = MutableMapping[str, Any]
#: The ASGI ``receive`` and ``send`` callables.
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: Request headers that describe the hop, not the request: the ASGI server
#: dealt with them (it read the chunks, it answers ``Expect: 100-continue``).
_HOP_BY_HOP: Final = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"transfer-encoding",
        b"upgrade",
        b"expect",
        b"http2-settings",
    }
)
#: Answer headers the ASGI server writes itself.
_FRAMING: Final = frozenset({b"connection", b"transfer-encoding"})
#: What a path segment may hold unescaped (RFC 3986 pchar, and ``/``).
_PATH_SAFE: Final = "/:@!$&'()*+,;=-._~"


def asgi_app(
    hub: Hub,
    *,
    token: str | None = None,
    tokens: Iterable[str] | None = None,
    exchange_handler: ExchangeHandler | None = None,
    interest: Interest | None = None,
    keepalive_interval: float = DEFAULT_KEEPALIVE_INTERVAL,
    queue_size: int | None = None,
    queue_bytes: int | None = None,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    max_batch: int = DEFAULT_MAX_BATCH,
    write_buffer: int = DEFAULT_WRITE_BUFFER,
    ask_timeout: float = DEFAULT_ASK_TIMEOUT,
    close_timeout: float = DEFAULT_CLOSE_TIMEOUT,
    exchange_timeout: float = DEFAULT_HANDLER_TIMEOUT,
    max_connections: int | None = DEFAULT_MAX_CONNECTIONS,
    max_discard: int = DEFAULT_MAX_DISCARD,
    address_share: float = 1.0,
    slow_after: float = DEFAULT_SLOW_AFTER,
    profile: Profile = Profile.PROVIDER,
    on_report: Callable[[ServeReport], None] | None = None,
) -> AsgiApp:
    """An ASGI 3 application serving ``hub``, as :func:`.asyncio.serve` serves it.

    Asks are posted to ``{root_path}/requests``: mounted at ``/diverge``, the
    listeners' base URL is ``http://host:port/diverge``. The options are
    those of ``serve()`` (``ServeOptions``, docs/adapters.md) and are checked
    by the call: ``tokens`` (several tokens, each path belonging to the one
    it asked with), ``interest`` (what every path subscribes to),
    ``slow_after`` (how long a waiting publisher waits for a path that takes
    nothing). ``address_share`` is 1 here, no share, where ``serve()``'s is
    0.5: an ASGI server is often behind a reverse proxy, whose one address
    every client would share.
    The listening socket's options (``ssl``, ``backlog``, ``send_buffer``,
    ``linger``) are the ASGI server's. See docs/asgi.md.
    """
    options: dict[str, Any] = {
        "token": token,
        "keepalive_interval": keepalive_interval,
        "queue_size": queue_size,
        "queue_bytes": queue_bytes,
        "stall_timeout": stall_timeout,
        "max_batch": max_batch,
        "write_buffer": write_buffer,
        "ask_timeout": ask_timeout,
        "close_timeout": close_timeout,
        "exchange_timeout": exchange_timeout,
        "max_connections": max_connections,
        "max_discard": max_discard,
        "address_share": address_share,
        "slow_after": slow_after,
        "profile": profile,
        "on_report": on_report,
        "tokens": tokens,
        "interest": interest,
    }
    return AsgiApp(hub, exchange_handler, options)


class AsgiApp(AsyncServerBase):
    """The ASGI application of :func:`asgi_app`: call it with ``(scope, receive, send)``.

    Besides the ASGI calling convention it has the running server's
    methods: ``stats()``, ``publish(item)`` (``await
    app.publish(item, wait=True)``), ``connections``; and the shutdown:
    :meth:`aclose`, or :meth:`lifespan` for a host application's lifespan
    (a mounted application gets no lifespan events of its own).
    """

    _settings: ServeSettings[ExchangeHandler]
    _event = asyncio.Event

    def __init__(self, hub: Hub, handler: ExchangeHandler | None, options: Any) -> None:
        super().__init__(hub, handler, options)
        self._closed: asyncio.Future[None] | None = None

    def _clock(self) -> float:
        return asyncio.get_running_loop().time()

    async def _wait_at_most(self, event: Any, seconds: float) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await within(event.wait(), seconds)

    @property
    def url(self) -> str:
        """Not known here: the ASGI server's address and the mount point make the base URL."""
        raise AttributeError(
            "an ASGI application does not know its URL: it is the ASGI server's address "
            "followed by the mount point (root_path)"
        )

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection: an HTTP request, or the lifespan."""
        kind = scope["type"]
        if kind == "http":
            await _Request(self, scope, receive, send).run()
        elif kind == "lifespan":
            await self._lifespan_events(receive, send)
        elif kind == "websocket":
            await send({"type": "websocket.close", "code": 1008})

    async def aclose(self) -> None:
        """End every open path cleanly: its queue, then its end; then return.

        A listener that does not take its end within ``close_timeout``
        seconds is left to the ASGI server. Requests that arrive afterwards
        are closed without an answer (the ASGI server answers for them).
        Every call returns once the closing is done.
        """
        if self._closed is None:
            self._closing = True
            requests = list(self._connections)
            for request in requests:
                request.shutdown()
            self._closed = asyncio.ensure_future(self._finish_closing(requests))
        await asyncio.shield(self._closed)

    async def _finish_closing(self, requests: list[_Request]) -> None:
        if requests:
            waiters = [request.finished for request in requests]
            await asyncio.wait(waiters, timeout=self._settings.close_timeout)

    @contextlib.asynccontextmanager
    async def lifespan(self, host_app: object = None) -> AsyncIterator[None]:
        """A lifespan for the host application: :meth:`aclose` on its way out.

        ``Starlette(..., lifespan=app.lifespan)``, ``FastAPI(lifespan=app.lifespan)``,
        or ``async with app.lifespan():`` inside the host's own lifespan.
        """
        try:
            yield
        finally:
            await self.aclose()

    async def _lifespan_events(self, receive: Receive, send: Send) -> None:
        """The ASGI lifespan of an application served on its own (not mounted)."""
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return


def request_head(scope: Message) -> tuple[bytes, bool]:
    """The HTTP/1.1 head of the request ``scope`` describes, and whether its body goes in chunks.

    The target is the path below ``root_path`` (percent-encoded) and the
    query; the version is the request's (HTTP/2 and 3 are written as 1.1,
    which they carry the same way); the headers are the request's but the
    hop-by-hop ones, and any that could not be one header line. A request
    without ``Content-Length`` gets ``Transfer-Encoding: chunked``: its body
    is fed as it arrives. A request without ``Host`` gets the server's.
    """
    path = str(scope.get("path", "/"))
    root = str(scope.get("root_path", ""))
    if root and path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/"):
        path = path[len(root) :]
    target = quote(path or "/", safe=_PATH_SAFE).encode("ascii")
    query = bytes(scope.get("query_string", b""))
    if query:
        target += b"?" + query
    version = b"1.0" if scope.get("http_version") == "1.0" else b"1.1"
    method = str(scope.get("method", "GET")).encode("ascii", "replace")
    lines = [b"%s %s HTTP/%s" % (method, target, version)]
    has_length = has_host = False
    for name, value in scope.get("headers", ()):
        name = bytes(name).lower()
        value = bytes(value)
        if name in _HOP_BY_HOP or b"\r" in value or b"\n" in value or b"\r" in name:
            continue
        has_length = has_length or name == b"content-length"
        has_host = has_host or name == b"host"
        lines.append(b"%s: %s" % (name, value))
    if not has_host:
        server = scope.get("server")
        host = f"{server[0]}:{server[1]}" if server and server[1] is not None else "localhost"
        lines.append(b"host: " + host.encode("ascii", "replace"))
    if not has_length:
        lines.append(b"transfer-encoding: chunked")
    return b"\r\n".join(lines) + b"\r\n\r\n", not has_length


class _Answer:
    """The driver's HTTP/1.1 answer taken apart into ASGI messages."""

    def __init__(self) -> None:
        self._head = HeadReader(DEFAULT_MAX_HEAD_SIZE)
        # h11 reads an answer only after a request: the one the driver judged
        # is not h11's to write, so it is told of a plain ask.
        self._head.request("asgi", b"", token=None, target=ASK_PATH)
        self._body: BodyReader | None = None
        self.started = False
        self.ended = False

    def messages(self, data: bytes) -> list[Message]:
        """The ASGI messages ``data`` (more of the answer) makes."""
        out: list[Message] = []
        if self._body is None:
            self._head.feed(data)
            while True:
                head = self._head.read()
                if head is None:
                    return out
                if isinstance(head, Bad):
                    raise LocalProtocolError(f"the serving driver wrote {head.reason}")
                if type(head) is h11.Response:
                    break
            headers = [(name, value) for name, value in head.headers if name not in _FRAMING]
            out.append(
                {"type": "http.response.start", "status": head.status_code, "headers": headers}
            )
            self.started = True
            self._body = body_reader(head, DEFAULT_MAX_HEAD_SIZE)
            data = bytes(self._head.rest())
        body = self._body
        body.feed(data)
        pieces: list[bytes] = []
        while not self.ended:
            piece = body.read()
            if piece is None:
                break
            if piece is END:
                self.ended = True
            elif isinstance(piece, Bad):
                raise LocalProtocolError(f"the serving driver wrote {piece.reason}")
            else:
                pieces.append(piece)
        if pieces or self.ended:
            payload = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            out.append({"type": "http.response.body", "body": payload, "more_body": not self.ended})
        return out


class _Request:
    """One ASGI request: a task reading ``receive``, and a loop performing the driver's actions."""

    def __init__(self, app: AsgiApp, scope: Message, receive: Receive, send: Send) -> None:
        self._app = app
        self._loop = loop = asyncio.get_running_loop()
        self._scope = scope
        self._receive = receive
        self._send = send
        self._ready = asyncio.Event()
        client = scope.get("client")
        peer = peer_name(tuple(client)) if client else ""
        self.serving = app._serving(self._ready.set, loop.time(), peer)
        self._answer = _Answer()
        #: The messages of the last ``Write`` not yet sent (a send cancelled midway).
        self._unsent: list[Message] = []
        self._handler: asyncio.Task[None] | None = None
        self.finished: asyncio.Future[None] = loop.create_future()
        app._connections.add(self)
        if app._closing:
            self.shutdown()

    def shutdown(self) -> None:
        """The application is closing: end the path cleanly."""
        self.serving.shutdown()
        self._ready.set()

    async def run(self) -> None:
        reading = self._loop.create_task(self._read())
        try:
            try:
                await self._serve()
            except asyncio.CancelledError:
                # The ASGI server gave up waiting for the answer to end (its
                # graceful shutdown timed out): end the path as a shutdown
                # does, within close_timeout, and let the request go.
                self._uncancel()
                self.shutdown()
                with contextlib.suppress(asyncio.TimeoutError):
                    await within(self._serve(), self._app._settings.close_timeout)
        finally:
            reading.cancel()
            if self._handler is not None:
                self._handler.cancel()
            self.serving.connection_lost()
            self._app._connections.discard(self)
            if not self.finished.done():
                self.finished.set_result(None)

    def _uncancel(self) -> None:
        task = asyncio.current_task()
        uncancel = getattr(task, "uncancel", None)
        if uncancel is not None:  # Python 3.11: the request was honoured, not ignored
            uncancel()

    async def _read(self) -> None:
        serving = self.serving
        loop = self._loop
        head, chunked = request_head(self._scope)
        serving.data_received(loop.time(), head)
        self._ready.set()
        complete = False
        try:
            while True:
                message = await self._receive()
                kind = message.get("type")
                if kind == "http.disconnect":
                    serving.data_received(loop.time(), b"")
                    if serving.done and self._handler is not None:
                        self._handler.cancel()  # nobody is left to answer
                    self._ready.set()
                    return
                if kind != "http.request" or complete:
                    continue
                body = bytes(message.get("body", b""))
                complete = not message.get("more_body", False)
                if chunked:
                    body = (chunk(body) if body else b"") + (LAST_CHUNK if complete else b"")
                if body and serving.wants_read:
                    serving.data_received(loop.time(), body)
                    if serving.done and self._handler is not None:
                        self._handler.cancel()  # nobody is left to answer
                    self._ready.set()
        except OSError:
            serving.connection_lost()
            self._ready.set()

    async def _serve(self) -> None:
        serving = self.serving
        loop = self._loop
        if self._unsent and not await self._write(b""):
            serving.write_stalled(loop.time())
        while True:
            self._ready.clear()
            action = serving.next_action(loop.time())
            if type(action) is actions.Write:
                try:
                    if not await self._write(action.data):
                        serving.write_stalled(loop.time())
                except OSError:
                    serving.connection_lost()
            elif type(action) is actions.WaitUntil:
                at = action.deadline
                timer = None if at is None else loop.call_at(at, self._ready.set)
                await self._ready.wait()
                if timer is not None:
                    timer.cancel()
            elif type(action) is actions.RunHandler:
                answering = answer_within(serving, self._app._settings, action.ask)
                self._handler = loop.create_task(answering)
                await asyncio.wait([self._handler])
            else:
                assert type(action) is actions.Close
                if not action.abort and self._answer.started and not self._answer.ended:
                    await self._write_end()
                return

    async def _write(self, data: bytes) -> bool:
        """Send what ``data`` makes; False if a ``send`` took longer than ``stall_timeout``."""
        stall_timeout = self._app._settings.stall_timeout
        unsent = self._unsent
        if data:
            unsent += self._answer.messages(data)
        while unsent:
            try:
                await within(self._send(unsent[0]), stall_timeout)
            except asyncio.TimeoutError:
                unsent.clear()
                return False
            del unsent[0]
        return True

    async def _write_end(self) -> None:
        """End an answer the driver left open (a path the container profile cannot end)."""
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            end = {"type": "http.response.body", "body": b"", "more_body": False}
            await within(self._send(end), self._app._settings.stall_timeout)
        self._answer.ended = True
