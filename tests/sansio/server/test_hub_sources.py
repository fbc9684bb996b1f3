"""What the hub takes from its sources: requests are not notifications; two sources suspend it.

A message with an ``"id"`` is a JSON-RPC request (or response) and is
ignored and counted, in every form ``publish`` accepts. A hub suspended by
two holders (a broker and a relay) serves again only once both resumed it.
An interest in every resource gets every ``resources/updated``, and the
hub's routing agrees with :meth:`Interest.wants`.
"""

from __future__ import annotations

import json

import pytest

from diverge_notifications.sansio import Hub, HubSuspended, Interest, Notification
from diverge_notifications.sansio.server.hub import as_notification, is_request

REQUEST = {"jsonrpc": "2.0", "id": 7, "method": "ping"}


@pytest.mark.parametrize(
    "item",
    [
        REQUEST,
        json.dumps(REQUEST),
        json.dumps(REQUEST).encode(),
        Notification.from_json(REQUEST),
        {"jsonrpc": "2.0", "id": None, "method": "notifications/progress"},
    ],
)
def test_a_request_is_ignored_and_counted(item: object) -> None:
    hub = Hub()
    subscriber = hub.subscribe()
    assert as_notification(item) is None
    assert hub.room_for(item)
    assert hub.publish(item) == 0
    assert subscriber.take() == []
    counts = hub.counts()
    assert (counts.ignored, counts.published) == (1, 0)


def test_is_request_looks_for_an_id() -> None:
    assert is_request(Notification.from_json(REQUEST))
    assert not is_request(Notification("notifications/progress", {"progress": 1}))


def test_two_holders_both_resume_before_the_hub_serves() -> None:
    hub = Hub()
    hub.suspend("broker lost")
    hub.suspend("MCP server 'a' is not connected", holder="relay")
    assert hub.suspended == "MCP server 'a' is not connected"
    hub.resume(holder="relay")
    assert hub.suspended == "broker lost"
    with pytest.raises(HubSuspended, match="broker lost"):
        hub.subscribe()
    hub.suspend("MCP server 'a' is not connected", holder="relay")
    hub.resume()
    assert hub.suspended == "MCP server 'a' is not connected"
    hub.resume(holder="relay")
    assert hub.suspended is None
    hub.subscribe()


def test_an_interest_in_every_resource_gets_every_update() -> None:
    hub = Hub()
    every = Interest(all_resources=True, log_level="error")
    one = Interest(resource_subscriptions={"demo://a"})
    subscribers = [hub.subscribe(every), hub.subscribe(one), hub.subscribe()]
    published = [
        Notification("notifications/resources/updated", {"uri": uri})
        for uri in ("demo://a", "demo://b", "demo://c")
    ] + [Notification("notifications/message", {"level": "info", "data": "x"})]
    for notification in published:
        hub.publish(notification)
    interests = [every, one, None]
    for subscriber, interest in zip(subscribers, interests, strict=True):
        wanted = [n for n in published if interest is None or interest.wants(n)]
        assert subscriber.take() == wanted
    subscribers[0].close()
    hub.publish(published[1])
    assert subscribers[1].take() == [] and subscribers[2].take() == [published[1]]
