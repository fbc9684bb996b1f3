"""A host application for the ASGI tests: Starlette, the hub's application mounted at /diverge.

Run by uvicorn or hypercorn in a subprocess (``tests.asgi_host:app``). Its
own routes: ``GET /`` answers ``host``; ``POST /publish`` publishes each
line of its body into the hub (waiting for room, so that no listener that
reads loses one) and answers how many; ``GET /stats`` answers the
application's ``stats()`` as JSON; ``POST /suspend`` suspends the hub;
``POST /close`` ends every open path (``aclose()``). Exchanges are answered
by an async handler: ``{"tools": [], "asked": "<the exchange>"}``.
``DIVERGE_ASGI_TOKEN`` sets the token,
``DIVERGE_ASGI_STALL`` the stall timeout, ``DIVERGE_ASGI_KEEPALIVE`` the
keep-alive interval.

``python -m tests.asgi_host PORT`` serves it with uvicorn the way
docs/asgi.md recommends: on SIGTERM the paths end (``aclose()``) before
uvicorn's own shutdown, which then waits for the connections to drain.
"""

from __future__ import annotations

import os
import socket
import sys

import attrs
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Mount, Route

from diverge_notifications.adapters.asgi import asgi_app
from diverge_notifications.sansio import Hub
from diverge_notifications.sansio.wire.asks import Ask


async def answer(ask: Ask) -> dict[str, object]:
    return {"tools": [], "asked": ask.exchange.name.lower()}


hub = Hub(queue_size=4096, queue_bytes=2**26)
notifications = asgi_app(
    hub,
    token=os.environ.get("DIVERGE_ASGI_TOKEN"),
    exchange_handler=answer,
    stall_timeout=float(os.environ.get("DIVERGE_ASGI_STALL", "30")),
    keepalive_interval=float(os.environ.get("DIVERGE_ASGI_KEEPALIVE", "120")),
)


async def home(request: Request) -> PlainTextResponse:
    return PlainTextResponse("host")


async def publish(request: Request) -> PlainTextResponse:
    lines = (await request.body()).splitlines()
    for line in lines:
        await notifications.publish(line, wait=True)
    return PlainTextResponse(str(len(lines)))


async def stats(request: Request) -> JSONResponse:
    counts = attrs.asdict(notifications.stats())
    counts["refusals"] = {str(status): n for status, n in counts["refusals"].items()}
    counts["paths_ended"] = dict(counts["paths_ended"])
    return JSONResponse(counts)


async def suspend(request: Request) -> PlainTextResponse:
    return PlainTextResponse(str(hub.suspend("the broker is lost")))


async def close(request: Request) -> PlainTextResponse:
    await notifications.aclose()
    return PlainTextResponse("closed")


app = Starlette(
    routes=[
        Route("/", home),
        Route("/publish", publish, methods=["POST"]),
        Route("/stats", stats),
        Route("/suspend", suspend, methods=["POST"]),
        Route("/close", close, methods=["POST"]),
        Mount("/diverge", app=notifications),
    ],
    lifespan=notifications.lifespan,
)


class AclosingServer(uvicorn.Server):
    """uvicorn, ending the paths before its own shutdown (docs/asgi.md, Shutdown)."""

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await notifications.aclose()
        await super().shutdown(sockets)


if __name__ == "__main__":
    config = uvicorn.Config(
        app, port=int(sys.argv[1]), timeout_graceful_shutdown=10, access_log=False
    )
    AclosingServer(config).run()
