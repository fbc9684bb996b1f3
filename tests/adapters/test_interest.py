"""``serve(..., interest=Interest(...))`` narrows what every path carries, on all three adapters.

A listener of the same adapter gets exactly what the interest wants of a
mixed stream: the log messages at and above its level, the list changes
it names, the updates of its resources, and every progress, cancellation
and custom notification. Waits have generous deadlines; nothing asserts
how long anything took.
"""

from __future__ import annotations

from typing import Any, Final

import pytest

from diverge_notifications.sansio import Hub, Interest, Notification, StreamOpened
from tests.adapters.test_adapters import Runner, notifications_in, policy, runners

__all__ = ["runners"]  # the fixture, imported to be found


def notification(method: str, **params: Any) -> Notification:
    return Notification(method, params or None)


MIXED: Final = [
    *(
        notification("notifications/message", level=level, data=level)
        for level in ("debug", "info", "warning", "error")
    ),
    notification("notifications/progress", progressToken="t", progress=1),
    notification("notifications/cancelled", requestId=3),
    notification("notifications/tools/list_changed"),
    notification("notifications/prompts/list_changed"),
    notification("notifications/resources/list_changed"),
    notification("notifications/resources/updated", uri="demo://a"),
    notification("notifications/resources/updated", uri="demo://b"),
    notification("notifications/diverge/custom", n=1),
]
LAST: Final = notification("notifications/diverge/last")
INTEREST: Final = Interest(
    log_level="warning", tools_list_changed=True, resource_subscriptions={"demo://a"}
)


@pytest.mark.parametrize("name", ["asyncio", "trio", "blocking"])
def test_serve_with_an_interest_narrows_every_path(name: str, runners: dict[str, Runner]) -> None:
    runner = runners[name]
    served = runner.serve(Hub(), interest=INTEREST)
    listener = runner.listen(served.url, events=True, policy=policy())
    try:
        listener.received.until_type(StreamOpened)
        served.publish_many([*MIXED, LAST])
        got = notifications_in(
            listener.received.until(lambda item: getattr(item, "notification", None) == LAST)
        )
    finally:
        listener.stop()
        served.close()
    assert got == [n for n in MIXED if INTEREST.wants(n)] + [LAST]
    assert [n.method for n in got] == [
        "notifications/message",
        "notifications/message",
        "notifications/progress",
        "notifications/cancelled",
        "notifications/tools/list_changed",
        "notifications/resources/updated",
        "notifications/diverge/custom",
        "notifications/diverge/last",
    ]


def test_serve_refuses_an_interest_that_is_not_one(runners: dict[str, Runner]) -> None:
    with pytest.raises(TypeError):
        runners["blocking"].serve(Hub(), interest={"log_level": "warning"})
