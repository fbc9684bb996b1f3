"""The public namespaces offer what they promise.

``diverge_notifications.sansio`` offers every event and every exception of
the core, the drivers and the ask builders; each adapter module offers
``listen``, ``serve`` and ``Proxy`` with the proxy's errors; the top-level
package names a subset of ``sansio``, the very same objects.
"""

from __future__ import annotations

import importlib
import inspect
from types import ModuleType

import pytest

import diverge_notifications
from diverge_notifications import sansio
from diverge_notifications.sansio import errors, events

ADAPTERS = ("asyncio", "trio", "blocking")


def _classes_defined_in(module: ModuleType) -> dict[str, type]:
    return {
        name: value
        for name, value in vars(module).items()
        if inspect.isclass(value) and value.__module__ == module.__name__
    }


def _offers(namespace: ModuleType, name: str, value: object) -> bool:
    return name in namespace.__all__ and getattr(namespace, name, None) is value


def test_every_event_class_is_offered_by_sansio() -> None:
    classes = _classes_defined_in(events)
    assert {"Event", "RetryScheduled", "AttemptsExhausted", "ConnectionFailed"} <= set(classes)
    missing = sorted(name for name, value in classes.items() if not _offers(sansio, name, value))
    assert not missing


def test_every_exception_of_the_core_is_offered_by_sansio() -> None:
    classes = _classes_defined_in(errors)
    exceptions = {name for name, value in classes.items() if issubclass(value, BaseException)}
    assert {"ProtocolError", "LocalProtocolError", "FrameError", "AskError"} <= exceptions
    missing = sorted(name for name, value in classes.items() if not _offers(sansio, name, value))
    assert not missing


@pytest.mark.parametrize(
    "name",
    [
        "ExchangeError",
        "ExchangeFailed",
        "list_tools_ask",
        "list_resources_ask",
        "call_tool_ask",
        "read_resource_ask",
        "result_object",
        "parse_url",
        "Endpoint",
        "ListenDriver",
        "ExchangeDriver",
        "ProxyDriver",
        "ServingConnection",
        "ServeSettings",
        "Interest",
        "Profile",
        "ContainerWriter",
        "SequenceMachine",
    ],
)
def test_sansio_offers_the_drivers_and_their_helpers(name: str) -> None:
    assert name in sansio.__all__
    assert getattr(sansio, name).__name__ == name


@pytest.mark.parametrize("namespace", [sansio, diverge_notifications])
def test_every_name_in_all_is_there(namespace: ModuleType) -> None:
    assert len(set(namespace.__all__)) == len(namespace.__all__)
    missing = [name for name in namespace.__all__ if not hasattr(namespace, name)]
    assert not missing


def test_the_top_level_names_are_those_of_sansio() -> None:
    names = set(diverge_notifications.__all__) - {"__version__"}
    assert {"Notification", "Hub", "ProxyPolicy", "ExchangeError", "ConnectionFailed"} <= names
    differ = sorted(
        name for name in names if not _offers(sansio, name, getattr(diverge_notifications, name))
    )
    assert not differ


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_each_adapter_offers_listen_serve_and_proxy(adapter: str) -> None:
    if adapter == "trio":
        pytest.importorskip("trio")
    module = importlib.import_module(f"diverge_notifications.adapters.{adapter}")
    for name in ("listen", "serve", "Proxy", "Server"):
        assert name in module.__all__
        assert callable(getattr(module, name))
    for name in ("ExchangeError", "ExchangeFailed"):
        assert _offers(module, name, getattr(sansio, name))


def test_the_asgi_adapter_offers_its_application() -> None:
    from diverge_notifications.adapters import asgi

    assert asgi.__all__ == ["AsgiApp", "asgi_app"]
    assert isinstance(asgi.asgi_app(sansio.Hub()), asgi.AsgiApp)


def test_the_blocking_proxy_says_when_it_is_closed() -> None:
    from diverge_notifications.adapters import blocking

    assert "ProxyClosed" in blocking.__all__
    assert issubclass(blocking.ProxyClosed, Exception)
