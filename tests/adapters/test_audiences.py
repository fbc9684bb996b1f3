"""``serve(..., tokens=[...])`` on the three adapters: every token served, each path its own.

Each adapter's server accepts every token given; an exchange's handler
learns the audience of the token it was asked with (``ask.audience``), and
what is published to one audience reaches only the listeners of that
token. Real sockets, the adapters' own listeners.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.sansio import Hub, Notification, NotificationReceived, StreamOpened
from diverge_notifications.sansio.events import NotServed, ResultReceived
from diverge_notifications.sansio.wire.asks import Ask, Exchange
from diverge_notifications.sansio.wire.http import audience_of
from tests.adapters.test_adapters import (
    KEEPALIVE,
    Runner,
    notifications_in,
    policy,
    run_exchange,
    runner,
    runners,
    wait_until,
)

__all__ = ["runner", "runners"]  # fixtures, imported to be found

ALPHA = "alpha-Token.1"
BETA = "beta-Token.2"


def progress(token: str) -> Notification:
    return Notification("notifications/progress", {"progressToken": token, "progress": 1})


def answer_with_audience(ask: Ask) -> dict[str, Any]:
    return {"audience": ask.audience}


def test_every_token_is_served_and_each_path_hears_its_own(runner: Runner) -> None:
    hub = Hub()
    options: dict[str, Any] = {"tokens": [ALPHA, BETA], "exchange_handler": answer_with_audience}
    publish: Callable[[Notification, str | None], object]
    if runner.name == "blocking":
        # Published under the server's lock, as from any thread of a blocking program.
        server = blocking_adapter.serve(hub, keepalive_interval=KEEPALIVE, **options)
        url, close = server.url, server.close

        def publish(notification: Notification, audience: str | None) -> object:
            with server.lock:
                return hub.publish(notification, audience=audience)
    else:
        handle = runner.serve(hub, **options)
        url, close = handle.url, handle.close
        call: Callable[..., Any] = runner.call  # type: ignore[attr-defined]

        def publish(notification: Notification, audience: str | None) -> object:
            return call(lambda: hub.publish(notification, audience=audience))

    listeners = {
        token: runner.listen(url, token=token, events=True, policy=policy())
        for token in (ALPHA, BETA)
    }
    try:
        for token in (ALPHA, BETA):
            call_tool = Ask(exchange=Exchange.CALL_TOOL, params={"name": "count"})
            (result, *_) = [
                e
                for e in run_exchange(url, call_tool, token=token)
                if isinstance(e, ResultReceived)
            ]
            assert result.result == {"audience": audience_of(token)}
        refused = run_exchange(url, Ask(exchange=Exchange.LIST_TOOLS), token="gamma")
        assert isinstance(refused[-1], NotServed) and refused[-1].status == 401
        for listener in listeners.values():
            listener.received.until_type(StreamOpened)
        publish(progress("alpha's call"), audience_of(ALPHA))
        publish(progress("everyone's"), None)
        heard = {
            token: notifications_in(
                listener.received.until(
                    lambda item: (
                        isinstance(item, NotificationReceived)
                        and item.notification == progress("everyone's")
                    )
                )
            )
            for token, listener in listeners.items()
        }
        assert heard[ALPHA] == [progress("alpha's call"), progress("everyone's")]
        assert heard[BETA] == [progress("everyone's")]
    finally:
        for listener in listeners.values():
            listener.stop()
        close()
    wait_until(lambda: hub.subscribers == 0, "every path ended")
