"""The proxy driver without I/O: exchanges against a real sans-IO server, the notification lock.

Each exchange's bytes go to a real :class:`ServerConnection` and its answer
comes back to the :class:`ExchangeDriver` whole, a byte at a time and at
random splits; the :class:`ProxyDriver`'s policy is watched as exchanges
end and readers come and go. Time is a number passed in.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diverge_notifications.sansio import (
    NEED_DATA,
    Ask,
    ErrorData,
    Exchange,
    ExchangeAsked,
    LocalProtocolError,
    NotServed,
    ResultReceived,
    ServerConnection,
    StreamBroken,
)
from diverge_notifications.sansio.client.policy import PolicyState, ProxyPolicy
from diverge_notifications.sansio.client.urls import parse_url
from diverge_notifications.sansio.drivers.actions import Connect, Disconnect, Receive, Send, Stop
from diverge_notifications.sansio.drivers.listen import ListenState
from diverge_notifications.sansio.drivers.proxy import (
    ABANDONED,
    STOPPED_READING,
    BufferOverflow,
    ExchangeDriver,
    ExchangeDriverState,
    ExchangeError,
    ExchangeFailed,
    ProxyDriver,
    call_tool_ask,
    list_resources_ask,
    list_tools_ask,
    read_resource_ask,
    result_object,
)
from diverge_notifications.sansio.drivers.settings import (
    DEFAULT_NOTIFICATION_BUFFER,
    ClientSettings,
)
from diverge_notifications.sansio.errors import ProxyClosed
from diverge_notifications.sansio.events import ConnectionFailed, StreamOpened

URL = "http://127.0.0.1:9/base"
TOKEN = "s3cret"
RESULT = b'{"content": [{"type": "text", "text": "done"}], "isError": false}'


def sent_ask(driver: ExchangeDriver) -> bytes:
    """Connect the driver and take the bytes of its ask."""
    assert driver.next_action(0.0) == Connect(host="127.0.0.1", port=9, timeout=10.0)
    driver.connected(0.0)
    send = driver.next_action(0.0)
    assert isinstance(send, Send)
    assert driver.next_action(0.0) == Receive(timeout=driver.settings.exchange_timeout)
    return send.data


def served(request: bytes, answer: Any) -> tuple[Ask, bytes]:
    """What a real server reads from ``request`` and the bytes of its ``answer``."""
    server = ServerConnection(
        target="/base/requests", token=TOKEN if b"Bearer" in request else None
    )
    server.receive_data(request)
    asked = server.next_event()
    assert isinstance(asked, ExchangeAsked), asked
    if answer is None:
        data = server.decline()
    elif isinstance(answer, ErrorData):
        data = server.answer_error(answer)
    else:
        data = server.answer(answer)
    return asked.ask, data


def finish(driver: ExchangeDriver, pieces: list[bytes]) -> list[object]:
    """Feed the answer in ``pieces``, then the end of file; the actions until Stop."""
    for piece in pieces:
        if driver.state is ExchangeDriverState.DONE:
            break
        driver.data_received(1.0, piece)
    if driver.state is not ExchangeDriverState.DONE:
        driver.data_received(1.0, b"")
    actions: list[object] = []
    while not isinstance(action := driver.next_action(2.0), Stop):
        actions.append(action)
    return actions


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    pieces, start = [], 0
    for point in points:
        pieces.append(data[start:point])
        start = point
    pieces.append(data[start:])
    return [piece for piece in pieces if piece]


# --- the params of the four exchanges --------------------------------------------------------


def test_the_asks_carry_the_params_mcp_spells() -> None:
    assert list_tools_ask() == Ask(exchange=Exchange.LIST_TOOLS)
    assert list_resources_ask("page-2") == Ask(
        exchange=Exchange.LIST_RESOURCES, params={"cursor": "page-2"}
    )
    assert call_tool_ask("count", {"steps": 3}, progress_token=7).params == {
        "name": "count",
        "arguments": {"steps": 3},
        "_meta": {"progressToken": 7},
    }
    assert call_tool_ask("ping").params == {"name": "ping"}
    assert read_resource_ask("demo://clock") == Ask(
        exchange=Exchange.READ_RESOURCE, params={"uri": "demo://clock"}
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: call_tool_ask(1),  # type: ignore[arg-type]
        lambda: call_tool_ask("t", ["x"]),  # type: ignore[arg-type]
        lambda: call_tool_ask("t", progress_token=True),
        lambda: call_tool_ask("t", progress_token=1.5),  # type: ignore[arg-type]
        lambda: read_resource_ask(b"demo://x"),  # type: ignore[arg-type]
        lambda: list_tools_ask(3),  # type: ignore[arg-type]
    ],
)
def test_asks_refuse_what_mcp_cannot_carry(make: Any) -> None:
    with pytest.raises(TypeError):
        make()


# --- one exchange ----------------------------------------------------------------------------


def exchange_of(ask: Ask) -> ExchangeDriver:
    return ExchangeDriver(parse_url(URL), ask)


def test_a_result_comes_back_with_its_bytes_and_the_connection_closes() -> None:
    driver = exchange_of(call_tool_ask("count", {"steps": 3}, progress_token="p"))
    ask, answer = served(sent_ask(driver), RESULT)
    assert ask.params == {
        "name": "count",
        "arguments": {"steps": 3},
        "_meta": {"progressToken": "p"},
    }
    assert finish(driver, [answer]) == [Disconnect()]
    result = driver.answer()
    assert result.raw == RESULT
    assert result_object(result) == {
        "content": [{"type": "text", "text": "done"}],
        "isError": False,
    }
    assert driver.answered
    assert driver.next_action(3.0) == Stop()  # and so on, for ever


@given(st.lists(st.integers(min_value=0), max_size=12))
def test_an_answer_split_anywhere_is_the_same_answer(cuts: list[int]) -> None:
    driver = exchange_of(list_tools_ask())
    _, answer = served(sent_ask(driver), {"tools": [{"name": "echo"}]})
    finish(driver, split(answer, cuts))
    assert driver.answer().result == {"tools": [{"name": "echo"}]}


def test_an_answer_a_byte_at_a_time() -> None:
    driver = exchange_of(read_resource_ask("demo://clock"))
    _, answer = served(sent_ask(driver), {"contents": []})
    finish(driver, [answer[index : index + 1] for index in range(len(answer))])
    assert driver.answer().result == {"contents": []}


def test_an_error_answer_is_the_servers_error_data_unchanged() -> None:
    error = ErrorData(code=-32602, message="tool 'echo' is listed twice", data={"servers": ["a"]})
    driver = exchange_of(call_tool_ask("echo"))
    _, answer = served(sent_ask(driver), error)
    finish(driver, [answer])
    assert driver.answered  # an error answers the exchange too
    with pytest.raises(ExchangeError) as raised:
        driver.answer()
    assert raised.value.error == error
    assert raised.value.error.to_bytes() == error.to_bytes()
    assert str(raised.value) == "error -32602: tool 'echo' is listed twice"


def test_a_declined_exchange_is_not_served() -> None:
    driver = exchange_of(list_tools_ask())
    _, answer = served(sent_ask(driver), None)
    finish(driver, [answer])
    assert not driver.answered
    with pytest.raises(ExchangeFailed) as raised:
        driver.answer()
    assert isinstance(raised.value.event, NotServed)
    assert raised.value.reason.startswith("not served (200): ")


def test_no_connection_is_a_failure_saying_why() -> None:
    driver = exchange_of(list_tools_ask())
    driver.next_action(0.0)
    driver.connect_failed(0.0, "ECONNREFUSED: Connection refused")
    assert driver.next_action(0.0) == Stop()
    with pytest.raises(ExchangeFailed) as raised:
        driver.answer()
    assert raised.value.event == ConnectionFailed(reason="ECONNREFUSED: Connection refused")
    assert raised.value.reason == "could not connect: ECONNREFUSED: Connection refused"


@pytest.mark.parametrize("how", ["timed out", "lost", "cut short"])
def test_an_answer_that_does_not_come_whole_broke_off(how: str) -> None:
    driver = ExchangeDriver(parse_url(URL), list_tools_ask(), ClientSettings(exchange_timeout=2.5))
    _, answer = served(sent_ask(driver), {"tools": []})
    if how == "timed out":
        driver.timed_out(5.0)
        reason = "no answer within 2.5 s"
    elif how == "lost":
        driver.data_received(1.0, answer[:10])
        driver.connection_lost(2.0, "ECONNRESET: Connection reset by peer")
        reason = "the connection was lost: ECONNRESET: Connection reset by peer"
    else:
        driver.data_received(1.0, answer[: answer.index(b'{"tools"') + 3])  # inside the result
        driver.data_received(1.0, b"")
        reason = "inside a frame"
    assert driver.next_action(6.0) == Disconnect()
    assert driver.next_action(6.0) == Stop()
    with pytest.raises(ExchangeFailed) as raised:
        driver.answer()
    assert isinstance(raised.value.event, StreamBroken)
    assert reason in raised.value.event.reason


def test_a_result_then_an_abrupt_end_is_still_the_result() -> None:
    driver = exchange_of(list_tools_ask())
    _, answer = served(sent_ask(driver), {"tools": []})
    chunk_end = answer.rindex(b"0\r\n\r\n")  # the result's chunk, not the last chunk
    driver.data_received(1.0, answer[:chunk_end])
    driver.connection_lost(1.0, "ECONNRESET")
    finish(driver, [])
    assert driver.answer().result == {"tools": []}


@pytest.mark.parametrize("steps", [0, 1, 3])
def test_an_abandoned_exchange_fails_in_every_state(steps: int) -> None:
    driver = exchange_of(list_tools_ask())
    if steps >= 1:
        driver.next_action(0.0)  # connecting
    if steps >= 3:
        sent_ask(ExchangeDriver(parse_url(URL), list_tools_ask()))
        driver.connected(0.0)
        driver.next_action(0.0)
    driver.abandon(1.0)
    with pytest.raises(ExchangeFailed) as raised:
        driver.answer()
    assert ABANDONED in raised.value.reason
    driver.abandon(2.0)  # over: nothing changes
    assert driver.state is ExchangeDriverState.DONE


def test_the_outcome_is_not_there_before_the_end_and_reports_out_of_turn_are_refused() -> None:
    driver = exchange_of(list_tools_ask())
    with pytest.raises(LocalProtocolError):
        driver.answer()
    with pytest.raises(LocalProtocolError):
        driver.data_received(0.0, b"HTTP/1.1")
    with pytest.raises(LocalProtocolError):
        driver.connected(0.0)
    driver.next_action(0.0)
    with pytest.raises(LocalProtocolError):
        driver.next_action(0.0)  # the connection's outcome comes first


def test_what_cannot_be_asked_is_refused_at_once() -> None:
    with pytest.raises(ValueError):
        ClientSettings(token="two words\n")
    with pytest.raises(ValueError):
        ClientSettings(exchange_timeout=0)
    with pytest.raises(ValueError, match="the proxy cannot ask"):
        ExchangeDriver(parse_url("http://ex\u00e4mple.test"), list_tools_ask())


def test_the_ask_goes_to_the_base_path_with_the_token() -> None:
    driver = ExchangeDriver(parse_url(URL), list_tools_ask(), ClientSettings(token=TOKEN))
    request = sent_ask(driver)
    assert request.startswith(b"POST /base/requests HTTP/1.1\r\n")
    assert b"Authorization: Bearer s3cret\r\n" in request
    _, answer = served(request, {"tools": []})  # the server takes the token
    finish(driver, [answer])
    assert driver.answer().result == {"tools": []}


# --- the proxy: the lock, one reader --------------------------------------------------------


def answered(proxy: ProxyDriver, answer: Any) -> bool:
    """Run one exchange of ``proxy`` against a real server answering ``answer``."""
    driver = proxy.exchange(list_tools_ask())
    _, data = served(sent_ask(driver), answer)
    finish(driver, [data])
    return proxy.exchange_ended(driver, 1.0)


def state_of(proxy: ProxyDriver) -> PolicyState:
    return proxy.policy.state


def test_the_notification_ask_waits_for_the_first_answered_exchange() -> None:
    proxy = ProxyDriver(URL)
    assert state_of(proxy) is PolicyState.LOCKED and not proxy.may_listen
    with pytest.raises(LocalProtocolError, match="after its first exchange"):
        proxy.open_notifications()
    # Neither a declined exchange nor one with no connection completes one.
    assert not answered(proxy, None)
    failed = proxy.exchange(list_tools_ask())
    failed.next_action(0.0)
    failed.connect_failed(0.0, "refused")
    assert not proxy.exchange_ended(failed, 1.0)
    # An error answer does, as a result would.
    assert answered(proxy, ErrorData(code=-32601, message="no tools here"))
    assert state_of(proxy) is PolicyState.IDLE
    listener = proxy.open_notifications()
    assert listener.policy is proxy.policy
    assert listener.next_action(2.0) == Connect(host="127.0.0.1", port=9, timeout=10.0)
    # Later exchanges change nothing the policy decides.
    assert answered(proxy, {"tools": []})
    assert state_of(proxy) is PolicyState.ASKING


def test_one_reader_at_a_time_and_a_reader_that_stops_ends_its_ask() -> None:
    proxy = ProxyDriver(URL, ClientSettings(events=True))
    answered(proxy, {"tools": []})
    first = proxy.open_notifications()
    with pytest.raises(LocalProtocolError, match="one ask open"):
        proxy.open_notifications()
    first.next_action(2.0)
    first.connected(2.0)
    assert isinstance(first.next_action(2.0), Send)
    proxy.close_notifications(3.0)
    assert first.state is ListenState.IDLE
    assert proxy.policy.failures == 1  # an ask that opened no path: unhealthy
    assert proxy.listener is None
    second = proxy.open_notifications()
    assert second is not first
    ask_at = proxy.policy.ask_at()
    assert ask_at is not None and ask_at > 3.0  # after the backoff
    assert second.next_action(3.0).__class__.__name__ == "Sleep"
    # Connecting when the reader stops: the attempt failed, as the policy sees it.
    assert isinstance(second.next_action(ask_at), Connect)
    proxy.close_notifications(ask_at)
    assert second.state is ListenState.IDLE and proxy.policy.failures == 2
    proxy.close_notifications(ask_at)  # nobody reads: nothing to do


def test_a_path_that_opened_then_stopped_by_its_reader() -> None:
    proxy = ProxyDriver(URL, ClientSettings(events=True))
    answered(proxy, {"tools": []})
    listener = proxy.open_notifications()
    listener.next_action(0.0)
    listener.connected(0.0)
    request = listener.next_action(0.0)
    assert isinstance(request, Send)
    server = ServerConnection(target="/base/requests")
    server.receive_data(request.data)
    assert server.next_event() is not NEED_DATA
    listener.data_received(0.5, server.start_path())
    opened = listener.next_action(0.5)
    assert [type(item) for item in getattr(opened, "items", ())] == [StreamOpened]
    proxy.close_notifications(20.0)
    assert proxy.policy.failures == 0  # open for longer than healthy_after: a healthy end
    assert STOPPED_READING == "the proxy stopped reading its notifications"


def test_a_policy_that_needs_no_exchange_lets_the_ask_go_at_once() -> None:
    proxy = ProxyDriver(URL, policy=ProxyPolicy(require_exchange=False))
    assert proxy.may_listen
    assert isinstance(proxy.open_notifications().next_action(0.0), Connect)


def test_the_options_are_checked_once_and_go_whole_to_each_driver() -> None:
    proxy = ProxyDriver(
        URL, ClientSettings(exchange_timeout=5.0), policy=ProxyPolicy(require_exchange=False)
    )
    assert proxy.settings.exchange_timeout == 5.0
    assert proxy.exchange(list_tools_ask()).settings is proxy.settings
    listener = proxy.open_notifications()
    assert listener.settings is proxy.settings and listener.endpoint is proxy.endpoint


@pytest.mark.parametrize(
    "options",
    [
        {"token": "bad token\n"},
        {"token": "s3cret", "allow_plaintext_token": False, "url": "http://example.test"},
        {"profile": "no such profile"},
        {"keepalive_interval": 0},
        {"connect_timeout": -1},
        {"exchange_timeout": 0},
        {"max_frame_size": 0},
    ],
)
def test_the_options_are_checked_when_the_proxy_is_made(options: dict[str, Any]) -> None:
    options = dict(options)
    url = options.pop("url", URL)
    with pytest.raises(ValueError):
        ProxyDriver(url, ClientSettings(**options))


def test_a_url_that_is_not_a_base_url_is_refused() -> None:
    with pytest.raises(ValueError):
        ProxyDriver("ftp://127.0.0.1:9")
    with pytest.raises(TypeError):
        ProxyDriver(URL, policy="often")  # type: ignore[arg-type]


def test_a_result_received_is_an_object() -> None:
    assert result_object(ResultReceived(result={"a": 1}, raw=b'{"a":1}')) == {"a": 1}


# --- the proxy: the background ask, the buffer, the close ------------------------------------


def test_the_background_ask_starts_once_when_unlocked_and_never_once_closed() -> None:
    proxy = ProxyDriver(URL)
    assert proxy.start_listening() is None  # locked: no exchange answered
    answered(proxy, {"tools": []})
    listener = proxy.start_listening()
    assert listener is not None and proxy.listener is listener
    assert proxy.start_listening() is None  # one ask, for the proxy's life
    assert not proxy.over
    proxy.close_notifications(1.0)  # its run ended (the adapter stopped it)
    assert proxy.start_listening() is None and not proxy.over  # nor closed, nor given up
    proxy.close()
    assert proxy.over and proxy.closed
    with pytest.raises(ProxyClosed):
        proxy.exchange(list_tools_ask())
    closed_early = ProxyDriver(URL, policy=ProxyPolicy(require_exchange=False))
    closed_early.close()
    assert closed_early.start_listening() is None and closed_early.over


def test_the_buffer_keeps_the_first_to_arrive_and_counts_and_reports_the_rest() -> None:
    assert ClientSettings().notification_buffer == DEFAULT_NOTIFICATION_BUFFER == 1024
    proxy = ProxyDriver(URL, ClientSettings(notification_buffer=3))
    items = [progress_item(index) for index in range(5)]
    assert proxy.keep(items[:2]) is None
    # The first drop since the buffer was last empty is reported, once.
    assert proxy.keep(items[2:4]) == BufferOverflow(capacity=3, dropped=1)
    assert proxy.keep(items[4:]) is None
    assert proxy.dropped == 2 and proxy.buffered == 3
    assert proxy.take() == items[0]
    assert proxy.keep(items[:2]) is None  # room for one: the same overflow goes on
    assert proxy.dropped == 3
    taken = [proxy.take() for _ in range(4)]
    assert taken == [items[1], items[2], items[0], None]  # in the order they came
    # Emptied: the next overflow is reported again.
    assert proxy.keep(items) == BufferOverflow(capacity=3, dropped=5)
    proxy.close()  # lets the buffer go
    assert proxy.buffered == 0 and proxy.take() is None


def test_one_reader_of_the_buffer_at_a_time() -> None:
    proxy = ProxyDriver(URL)
    proxy.open_reader()
    with pytest.raises(LocalProtocolError, match="one reader at a time"):
        proxy.open_reader()
    proxy.close_reader()
    proxy.open_reader()


def test_the_buffer_size_is_checked() -> None:
    with pytest.raises(ValueError):
        ClientSettings(notification_buffer=0)
    with pytest.raises(TypeError):
        ClientSettings(notification_buffer=2.5)  # type: ignore[arg-type]


def progress_item(index: int) -> Any:
    from diverge_notifications.sansio import Notification

    return Notification("notifications/progress", {"progressToken": "t", "progress": index})
