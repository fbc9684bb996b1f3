"""A cancellation is never lost: asyncio's waits with a deadline, and the listener's connect.

Before Python 3.12, ``asyncio.wait_for`` drops a cancellation that arrives
as the awaited operation finishes (CPython gh-86296): a listener stopped
while a connection was being refused went on asking. The adapters put every
deadline through :func:`within` instead; these tests arrange that exact
moment, one loop iteration at a time, so they fail on the old behaviour.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import pytest

from diverge_notifications.adapters import asyncio as asyncio_adapter
from diverge_notifications.adapters.asyncio import _within_by_wait, within
from diverge_notifications.sansio.client.policy import Backoff, ProxyPolicy

Within = Callable[[Awaitable[Any], float], Awaitable[Any]]

#: Both ways :func:`within` works: ``asyncio.timeout()``, and Python 3.10's.
WITHINS: Final = pytest.mark.parametrize(
    "within_", [within, _within_by_wait], ids=["within", "within_by_wait"]
)
PACKAGE: Final = Path(__file__).resolve().parents[2] / "diverge_notifications"


async def cancelled_as_it_finishes(
    within_: Within, finish: Callable[[asyncio.Future[Any]], None]
) -> asyncio.Task[Any]:
    """A task awaiting ``within_(future, 10)``, cancelled in the iteration ``future`` finishes.

    The task suppresses what the future raises, as the adapters do with a
    refused connection; only the cancellation may end it.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    async def waiting() -> str:
        with contextlib.suppress(OSError):
            await within_(future, 10.0)
        await asyncio.sleep(0)
        return "went on"

    task = asyncio.ensure_future(waiting())
    await asyncio.sleep(0)  # the task now waits on the future

    def finish_and_cancel() -> None:
        finish(future)
        task.cancel()

    loop.call_soon(finish_and_cancel)
    with pytest.raises(asyncio.CancelledError):
        await task
    return task


async def work_noting_its_stop(seen: list[str]) -> None:
    """Ten seconds of work, which notes in ``seen`` that it was stopped."""
    try:
        await asyncio.sleep(10)
    finally:
        seen.append("work stopped")


@WITHINS
@pytest.mark.parametrize(
    "finish",
    [
        lambda future: future.set_exception(ConnectionRefusedError(111, "refused")),
        lambda future: future.set_result("connected"),
    ],
    ids=["failing", "succeeding"],
)
def test_a_cancellation_arriving_as_the_awaited_finishes_is_kept(
    within_: Within, finish: Callable[[asyncio.Future[Any]], None]
) -> None:
    async def main() -> bool:
        task = await cancelled_as_it_finishes(within_, finish)
        return task.cancelled()

    assert asyncio.run(main())


@WITHINS
def test_a_cancellation_while_waiting_stops_the_awaited_work_first(within_: Within) -> None:
    async def main() -> list[str]:
        seen: list[str] = []

        async def waiting() -> None:
            try:
                await within_(work_noting_its_stop(seen), 10.0)
            finally:
                seen.append("within returned")

        task = asyncio.ensure_future(waiting())
        await asyncio.sleep(0)
        await asyncio.sleep(0)  # the work has started (in a task of its own on 3.10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return seen

    assert asyncio.run(main()) == ["work stopped", "within returned"]


@WITHINS
def test_past_the_deadline_the_work_is_stopped_and_timeout_raised(within_: Within) -> None:
    async def main() -> list[str]:
        seen: list[str] = []
        with pytest.raises(asyncio.TimeoutError):
            await within_(work_noting_its_stop(seen), 0.01)
        seen.append("timed out")
        return seen

    assert asyncio.run(main()) == ["work stopped", "timed out"]


@WITHINS
def test_in_time_the_result_or_the_error_comes_back(within_: Within) -> None:
    async def answer() -> str:
        await asyncio.sleep(0)
        return "answer"

    async def refuse() -> None:
        await asyncio.sleep(0)
        raise ConnectionRefusedError(111, "refused")

    async def main() -> str:
        with pytest.raises(ConnectionRefusedError):
            await within_(refuse(), 10.0)
        return str(await within_(answer(), 10.0))

    assert asyncio.run(main()) == "answer"


def test_a_listener_cancelled_as_its_connection_is_refused_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The race that lost a stop: the refusal and the cancellation in one iteration."""
    connects: list[str] = []

    def refused_and_cancelled(
        _loop: object, _factory: object, host: str, port: int, **_: Any
    ) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        listener = asyncio.current_task()
        assert listener is not None
        connects.append(f"{host}:{port}")
        opening: asyncio.Future[Any] = loop.create_future()

        def refuse_and_cancel() -> None:
            opening.set_exception(ConnectionRefusedError(111, "Connection refused"))
            listener.cancel()

        loop.call_soon(refuse_and_cancel)
        return opening

    monkeypatch.setattr(asyncio.BaseEventLoop, "create_connection", refused_and_cancelled)
    # Were the cancellation lost, the listener would ask again, five times.
    retrying = ProxyPolicy(
        require_exchange=False, backoff=Backoff(base=0.001, cap=0.001), max_attempts=5
    )

    async def main() -> bool:
        async def consume() -> None:
            async for _ in asyncio_adapter.listen(
                "http://127.0.0.1:9", policy=retrying, events=True
            ):
                pass

        task = asyncio.ensure_future(consume())
        with pytest.raises(asyncio.CancelledError):
            await task
        return task.cancelled()

    assert asyncio.run(main())
    assert connects == ["127.0.0.1:9"]


def test_no_module_of_the_package_uses_asyncio_wait_for() -> None:
    """``within`` is the one wait with a deadline; ``wait_for`` would lose a stop again."""
    users = []
    for module in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            attribute = (
                isinstance(node, ast.Attribute)
                and node.attr == "wait_for"
                and isinstance(node.value, ast.Name)
                and node.value.id == "asyncio"
            )
            imported = (
                isinstance(node, ast.ImportFrom)
                and node.module == "asyncio"
                and any(alias.name == "wait_for" for alias in node.names)
            )
            if attribute or imported:
                users.append(f"{module.relative_to(PACKAGE)}:{getattr(node, 'lineno', '?')}")
    assert users == []
