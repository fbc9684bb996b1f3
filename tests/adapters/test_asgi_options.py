"""``asgi_app``'s ``tokens`` and ``interest``, called in process as an ASGI server calls it.

The scope and the body of each request are those of a real ask
(:class:`ProxyConnection`'s bytes, taken apart); what the application sends
back is read as the ASGI messages it is. The servers themselves (uvicorn,
hypercorn) are in ``test_asgi.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

from diverge_notifications.adapters.asgi import AsgiApp, asgi_app
from diverge_notifications.sansio import Hub, Interest, Notification, ProxyConnection
from diverge_notifications.sansio.wire.http import audience_of

ALPHA = "alpha-token"
BETA = "beta-token"
#: Bound on every wait: only a hang reaches it.
HANG_GUARD = 10.0


def _scope_and_body(token: str) -> tuple[dict[str, Any], bytes]:
    """The ASGI scope and body of the notifications ask a proxy with ``token`` sends."""
    head, _, body = (
        ProxyConnection("127.0.0.1:80", token=token).data_to_send().partition(b"\r\n\r\n")
    )
    request_line, *fields = head.split(b"\r\n")
    method, target, _ = request_line.split(b" ")
    headers = [tuple(field.split(b": ", 1)) for field in fields]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method.decode(),
        "scheme": "http",
        "path": target.decode(),
        "raw_path": target,
        "root_path": "",
        "query_string": b"",
        "headers": [(name.lower(), value) for name, value in headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }
    return scope, body


class Request:
    """One request to the application, run as a task; what it sent, as it sends it."""

    def __init__(self, app: AsgiApp, token: str) -> None:
        scope, body = _scope_and_body(token)
        self.sent: list[MutableMapping[str, Any]] = []
        self._changed = asyncio.Event()
        self._body = body
        self._task = asyncio.create_task(app(scope, self._receive, self._send))

    async def _receive(self) -> dict[str, Any]:
        body, self._body = self._body, b""
        if body:
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays connected
        raise AssertionError("unreachable")

    async def _send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(message)
        self._changed.set()

    async def until(self, done: Any) -> None:
        async def wait() -> None:
            while not done(self):
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(wait(), HANG_GUARD)

    @property
    def status(self) -> int | None:
        starts = [m for m in self.sent if m["type"] == "http.response.start"]
        return starts[0]["status"] if starts else None

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent if m["type"] == "http.response.body")

    async def finished(self) -> None:
        await asyncio.wait_for(self._task, HANG_GUARD)


def _has(text: bytes) -> Any:
    return lambda request: text in request.body


def test_asgi_app_accepts_every_token_and_scopes_an_audience() -> None:
    async def main() -> None:
        hub = Hub()
        app = asgi_app(hub, tokens=[ALPHA, BETA])
        alpha, beta, other = Request(app, ALPHA), Request(app, BETA), Request(app, "gamma")
        await other.until(lambda r: r.status is not None)
        assert other.status == 401
        for request in (alpha, beta):
            await request.until(lambda r: r.status is not None)
            assert request.status == 200
        assert hub.audiences() == {audience_of(ALPHA): 1, audience_of(BETA): 1}
        hub.publish(
            Notification("notifications/progress", {"progressToken": "a"}),
            audience=audience_of(ALPHA),
        )
        hub.publish(Notification("vendor/everyone", {}))
        await alpha.until(_has(b"vendor/everyone"))
        await beta.until(_has(b"vendor/everyone"))
        assert b'"progressToken":"a"' in alpha.body
        assert b'"progressToken":"a"' not in beta.body
        await app.aclose()
        for request in (alpha, beta, other):
            await request.finished()

    asyncio.run(main())


def test_asgi_app_subscribes_every_path_with_its_interest() -> None:
    async def main() -> None:
        hub = Hub()
        app = asgi_app(hub, token=ALPHA, interest=Interest(log_level="warning"))
        path = Request(app, ALPHA)
        await path.until(lambda r: r.status == 200)
        for level in ("info", "error"):
            hub.publish(Notification("notifications/message", {"level": level, "data": level}))
        hub.publish(Notification("notifications/progress", {"progressToken": "p"}))
        await path.until(_has(b'"progressToken":"p"'))
        assert b'"data":"error"' in path.body
        assert b'"data":"info"' not in path.body
        await app.aclose()
        await path.finished()

    asyncio.run(main())
