"""ExchangeConnection: one-shot exchanges (kinds 0-3) on the same HTTP and framing layers."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diverge_notifications.sansio import (
    NEED_DATA,
    Ask,
    ErrorData,
    Event,
    Exchange,
    ExchangeConnection,
    LocalProtocolError,
    NotServed,
    ResultReceived,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
    encode_ask,
)
from diverge_notifications.sansio.client.answer import (
    ANSWER_TRANSITIONS,
    AnswerInput,
    AnswerOutcome,
    AnswerState,
)
from diverge_notifications.sansio.client.connection import ProxyState
from diverge_notifications.sansio.wire.framing import KEEPALIVE_FRAME
from tests.proxy_scripts import (
    AUTHORITY,
    LAST_CHUNK,
    NOTIFICATIONS,
    ask_request,
    bytewise,
    chunk,
    chunked,
    error_frame,
    frame,
    notification_frame,
    path_head,
    refusal,
    run_exchange,
    split_at,
    whole,
)

CALL = Ask(exchange=Exchange.CALL_TOOL, params={"name": "build", "arguments": {"target": "all"}})
RESULT = {"content": [{"type": "text", "text": "done"}], "isError": False}
RESULT_BYTES = b'{"content":[{"type":"text","text":"done"}],"isError":false}'
ERROR = ErrorData(code=-32601, message="no such tool")
HEAD = path_head(location="/mcp/call_tool/c7")
OPENED = StreamOpened(channel="c7")


def result_frame(body: bytes = RESULT_BYTES) -> bytes:
    return frame(b"\x00" + body)


# (answer, events) pairs; each must give its events however it is split.
EXCHANGE_SCRIPTS: dict[str, tuple[bytes, list[Event]]] = {
    "result": (
        HEAD + chunked(result_frame()),
        [OPENED, ResultReceived(result=RESULT, raw=RESULT_BYTES), StreamEnded()],
    ),
    "keepalives_then_result": (
        HEAD + chunked(KEEPALIVE_FRAME, KEEPALIVE_FRAME + result_frame()[:3], result_frame()[3:]),
        [OPENED, ResultReceived(result=RESULT, raw=RESULT_BYTES), StreamEnded()],
    ),
    "result_content_length": (
        path_head(location="/mcp/call_tool/c7", body=len(result_frame())) + result_frame(),
        [OPENED, ResultReceived(result=RESULT, raw=RESULT_BYTES), StreamEnded()],
    ),
    "error": (
        HEAD + chunked(error_frame(ERROR)) + b"ignored",
        [OPENED, StreamErrored(error=ERROR)],
    ),
    "declined": (
        HEAD + LAST_CHUNK,
        [OPENED, NotServed(status=200, reason="the exchange ended with no answer")],
    ),
    "refused": (
        refusal(404, "Not Found", b"no route"),
        [NotServed(status=404, reason="404 Not Found: no route")],
    ),
    "two_results": (
        HEAD + chunked(result_frame(), result_frame()),
        [
            OPENED,
            ResultReceived(result=RESULT, raw=RESULT_BYTES),
            StreamBroken(reason="the exchange was answered with more than one message"),
        ],
    ),
    "error_after_result": (
        HEAD + chunked(result_frame() + error_frame(ERROR)),
        [
            OPENED,
            ResultReceived(result=RESULT, raw=RESULT_BYTES),
            StreamBroken(reason="the exchange was answered with more than one message"),
        ],
    ),
    "result_not_an_object": (
        HEAD + chunked(result_frame(b"[1,2]")),
        [
            OPENED,
            StreamBroken(
                reason="the exchange's answer did not decode: the result is not a JSON object"
            ),
        ],
    ),
    "result_not_json": (
        HEAD + chunked(result_frame(b'{"a":NaN}')),
        [
            OPENED,
            StreamBroken(
                reason="the exchange's answer did not decode: the result is not valid JSON: "
                "non-standard JSON constant NaN"
            ),
        ],
    ),
    "bad_error": (
        HEAD + chunked(frame(b'\x01{"code":1.5,"message":"x"}')),
        [
            OPENED,
            StreamBroken(
                reason="the exchange's answer did not decode: "
                'error "code" must be an int32, not a number'
            ),
        ],
    ),
    "unknown_tag": (
        HEAD + chunked(frame(b"\x05{}")),
        [
            OPENED,
            StreamBroken(
                reason="the exchange's answer did not decode: "
                "unknown message tag 5 (0 is a result, 1 an error)"
            ),
        ],
    ),
    "result_then_cut": (
        HEAD + chunk(result_frame()),
        [
            OPENED,
            ResultReceived(result=RESULT, raw=RESULT_BYTES),
            StreamBroken(reason="the connection closed before the answer's body ended"),
        ],
    ),
    "cut_inside_result": (
        HEAD + chunk(result_frame()[:10]),
        [
            OPENED,
            StreamBroken(
                reason="the connection closed before the answer's body ended, inside a frame "
                f"(10 of {len(result_frame())} bytes)"
            ),
        ],
    ),
    "not_a_path": (
        path_head(content_type="application/json", body=2) + b"{}",
        [
            StreamBroken(
                reason="the answer has status 200 and Content-Type 'application/json', not "
                "application/vnd.diverge.messages: is this the Diverge server's address?"
            )
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(EXCHANGE_SCRIPTS))
@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_exchange_scripts_whole_bytewise_and_split(name: str, data: st.DataObject) -> None:
    answer, expected = EXCHANGE_SCRIPTS[name]
    assert run_exchange(CALL, whole(answer)) == expected
    assert run_exchange(CALL, bytewise(answer)) == expected
    cuts = data.draw(st.lists(st.integers(min_value=1, max_value=len(answer)), max_size=10))
    assert run_exchange(CALL, split_at(answer, cuts)) == expected


@pytest.mark.parametrize("exchange", [e for e in Exchange if e is not Exchange.NOTIFICATIONS])
def test_the_ask_carries_its_kind_and_params(exchange: Exchange) -> None:
    ask = Ask(exchange=exchange, params={"cursor": "abc"})
    connection = ExchangeConnection(AUTHORITY, ask, token="tk")
    body = bytes([exchange]) + b'{"cursor":"abc"}'
    assert connection.data_to_send() == ask_request(body, token="tk")
    assert encode_ask(ask) == body
    assert connection.data_to_send() == b""
    assert connection.ask is ask


def test_params_bytes_are_relayed_unchanged() -> None:
    raw = b'{ "uri" : "file:///a" }'
    ask = Ask(exchange=Exchange.READ_RESOURCE, params={"uri": "file:///a"}, raw_params=raw)
    assert ExchangeConnection(AUTHORITY, ask).data_to_send().endswith(b"\r\n\r\n\x03" + raw)


def test_the_notifications_ask_is_not_an_exchange() -> None:
    with pytest.raises(LocalProtocolError):
        ExchangeConnection(AUTHORITY, Ask(exchange=Exchange.NOTIFICATIONS))
    with pytest.raises(TypeError):
        ExchangeConnection(AUTHORITY, "list tools")  # type: ignore[arg-type]


def test_no_reask_and_need_data_forever_after_the_end() -> None:
    connection = ExchangeConnection(AUTHORITY, CALL)
    connection.data_to_send()
    connection.receive_data(HEAD + chunked(result_frame()) + b"more")
    events = []
    while (event := connection.next_event()) is not NEED_DATA:
        events.append(event)
    assert events == EXCHANGE_SCRIPTS["result"][1]
    assert connection.state is ProxyState.DONE
    assert connection.answer_state is AnswerState.DONE
    assert connection.channel == "c7" and connection.status == 200
    connection.receive_data(b"")
    assert connection.next_event() is NEED_DATA
    with pytest.raises(LocalProtocolError):
        connection.receive_data(b"late")


def test_a_notification_shaped_result_is_just_a_result() -> None:
    # Tag 0 on an exchange is the result object, whatever its members.
    body = notification_frame(NOTIFICATIONS[0])
    events = run_exchange(CALL, whole(HEAD + chunked(body)))
    assert isinstance(events[1], ResultReceived)
    assert events[1].result["method"] == "notifications/progress"


@pytest.mark.parametrize("key", list(ANSWER_TRANSITIONS), ids=lambda k: f"{k[0].name}-{k[1].name}")
def test_every_answer_transition(key: tuple[AnswerState, AnswerInput]) -> None:
    state, what = key
    next_state, outcome = ANSWER_TRANSITIONS[key]
    prefix = HEAD + (chunk(result_frame()) if state is AnswerState.ANSWERED else b"")
    body: dict[AnswerInput, Any] = {
        AnswerInput.RESULT: chunk(result_frame()),
        AnswerInput.ERROR: chunk(error_frame(ERROR)),
        AnswerInput.UNDECODABLE: chunk(frame(b"\x09")),
        AnswerInput.FINISH: LAST_CHUNK,
        AnswerInput.LOST: b"",
    }
    connection = ExchangeConnection(AUTHORITY, CALL)
    connection.data_to_send()
    connection.receive_data(prefix + body[what])
    if what is AnswerInput.LOST:
        connection.receive_data(b"")
    events = []
    while (event := connection.next_event()) is not NEED_DATA:
        events.append(event)
    assert connection.answer_state is next_state
    expected_type = {
        AnswerOutcome.RESULT: ResultReceived,
        AnswerOutcome.ERRORED: StreamErrored,
        AnswerOutcome.NOT_SERVED: NotServed,
        AnswerOutcome.ENDED: StreamEnded,
        AnswerOutcome.VIOLATION: StreamBroken,
        AnswerOutcome.BROKEN: StreamBroken,
    }[outcome]
    assert type(events[-1]) is expected_type


def test_the_answer_table_covers_every_live_state_and_input() -> None:
    live = [AnswerState.AWAITING, AnswerState.ANSWERED]
    assert set(ANSWER_TRANSITIONS) == {(s, i) for s in live for i in AnswerInput}
