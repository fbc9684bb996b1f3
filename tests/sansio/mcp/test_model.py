"""The MCP model: classification, typed views, hard failures, ErrorData, LogLevel.

The vectors follow the wire mapping (docs/protocol.md) and the provider
notifications page (rmcp's ``ServerNotification``: a
known method with params that do not fit is a custom notification, never a
failure).
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings

from diverge_notifications.sansio import (
    ErrorData,
    FrameError,
    FrameErrorReason,
    LogLevel,
    Notification,
    NotificationKind,
    decode_message,
    encode_message,
)
from diverge_notifications.sansio.mcp.json import dumps
from diverge_notifications.sansio.mcp.model import (
    METHODS,
    Cancelled,
    ElicitationComplete,
    ErrorCode,
    ListChanged,
    LogMessage,
    NotificationView,
    Progress,
    ResourceUpdated,
    SubscriptionsAcknowledged,
    TaskStatus,
)
from tests.strategies import error_datas, notifications

K = NotificationKind


def note(method: str, params: Any = "absent", **extra: Any) -> Notification:
    members: dict[str, Any] = {"method": method}
    if params != "absent":
        members["params"] = params
    members.update(extra)
    return Notification.from_bytes(dumps(members))


# --- classification, case by case ------------------------------------------------

LIST_CHANGED_METHODS = [
    ("notifications/resources/list_changed", K.RESOURCE_LIST_CHANGED),
    ("notifications/tools/list_changed", K.TOOL_LIST_CHANGED),
    ("notifications/prompts/list_changed", K.PROMPT_LIST_CHANGED),
]

# (method, params or "absent", kind, view) for notifications whose params fit.
FITTING: list[tuple[str, Any, NotificationKind, NotificationView]] = [
    (
        "notifications/cancelled",
        {"requestId": 7, "reason": "user"},
        K.CANCELLED,
        Cancelled(request_id=7, reason="user"),
    ),
    (
        "notifications/cancelled",
        {"requestId": "r-1"},
        K.CANCELLED,
        Cancelled(request_id="r-1", reason=None),
    ),
    ("notifications/cancelled", {}, K.CANCELLED, Cancelled(request_id=None, reason=None)),
    (
        "notifications/progress",
        {"progressToken": "t", "progress": 0.5},
        K.PROGRESS,
        Progress(token="t", progress=0.5, total=None, message=None),
    ),
    (
        "notifications/progress",
        {"progressToken": 3, "progress": 1, "total": 4, "message": "one of four"},
        K.PROGRESS,
        Progress(token=3, progress=1, total=4, message="one of four"),
    ),
    (
        "notifications/progress",
        {"progressToken": -(2**63), "progress": 2**70, "total": 1e300},
        K.PROGRESS,
        Progress(token=-(2**63), progress=2**70, total=1e300, message=None),
    ),
    (
        "notifications/progress",
        {"progressToken": 2**63 - 1, "progress": 0, "total": None, "message": None},
        K.PROGRESS,
        Progress(token=2**63 - 1, progress=0, total=None, message=None),
    ),
    (
        "notifications/message",
        {"level": "warning", "logger": "db", "data": {"rows": 3}},
        K.LOGGING_MESSAGE,
        LogMessage(level=LogLevel.WARNING, logger="db", data={"rows": 3}),
    ),
    (
        "notifications/message",
        {"level": "emergency", "data": None},
        K.LOGGING_MESSAGE,
        LogMessage(level=LogLevel.EMERGENCY, logger=None, data=None),
    ),
    (
        "notifications/resources/updated",
        {"uri": "config://app"},
        K.RESOURCE_UPDATED,
        ResourceUpdated(uri="config://app"),
    ),
    (
        "notifications/elicitation/complete",
        {"elicitationId": "e1"},
        K.ELICITATION_COMPLETE,
        ElicitationComplete(elicitation_id="e1"),
    ),
    (
        "notifications/tasks/status",
        {"taskId": "t1", "status": "working", "createdAt": "2025-11-25T00:00:00Z", "ttl": None},
        K.TASK_STATUS,
        TaskStatus(task_id="t1", status="working", status_message=None),
    ),
    (
        # rmcp 3.x spells the task notification without "/status".
        "notifications/tasks",
        {"taskId": "t2", "status": "failed", "statusMessage": "boom"},
        K.TASK_STATUS,
        TaskStatus(task_id="t2", status="failed", status_message="boom"),
    ),
    (
        "notifications/subscriptions/acknowledged",
        {"notifications": {"toolsListChanged": True, "resourceSubscriptions": ["a://b"]}},
        K.SUBSCRIPTIONS_ACKNOWLEDGED,
        SubscriptionsAcknowledged(
            notifications={"toolsListChanged": True, "resourceSubscriptions": ["a://b"]}
        ),
    ),
]
for _method, _kind in LIST_CHANGED_METHODS:
    for _params in ("absent", None, {}, {"_meta": {"k": 1}}, {"extra": [1]}):
        FITTING.append((_method, _params, _kind, ListChanged(kind=_kind)))


@pytest.mark.parametrize(("method", "params", "kind", "view"), FITTING)
def test_known_method_with_fitting_params(
    method: str, params: Any, kind: NotificationKind, view: NotificationView
) -> None:
    notification = note(method, params)
    assert notification.kind is kind
    assert notification.view == view
    assert notification.method == method


def test_every_known_method_is_covered_by_a_vector() -> None:
    assert {method for method, *_ in FITTING} == set(METHODS)
    assert {kind for _, _, kind, _ in FITTING} == set(NotificationKind) - {K.CUSTOM}


def test_known_params_with_meta_and_unknown_members_still_fit() -> None:
    notification = note(
        "notifications/progress",
        {"_meta": {"trace": "x"}, "progressToken": 1, "progress": 2, "x-new": {"a": []}},
        jsonrpc="2.0",
        extension=True,
    )
    assert notification.kind is K.PROGRESS
    assert notification.meta == {"trace": "x"}


# (method, params or "absent") for notifications that are CUSTOM.
CUSTOM: list[tuple[str, Any]] = [
    ("notifications/whatever", {"a": 1}),
    ("notifications/whatever", "absent"),
    ("", None),
    ("Notifications/progress", {"progressToken": 1, "progress": 1}),  # case-sensitive
    ("notifications/progress/", {"progressToken": 1, "progress": 1}),
    ("notifications/progress", {"progressToken": 1, "progress": "abc"}),
    ("notifications/progress", {"progressToken": 1.5, "progress": 1}),
    ("notifications/progress", {"progressToken": 1.0, "progress": 1}),
    ("notifications/progress", {"progressToken": None, "progress": 1}),
    ("notifications/progress", {"progressToken": True, "progress": 1}),
    ("notifications/progress", {"progressToken": 2**63, "progress": 1}),  # beyond i64
    ("notifications/progress", {"progressToken": [1], "progress": 1}),
    ("notifications/progress", {"progress": 1}),
    ("notifications/progress", {"progressToken": 1}),
    ("notifications/progress", {"progressToken": 1, "progress": True}),
    ("notifications/progress", {"progressToken": 1, "progress": None}),
    ("notifications/progress", {"progressToken": 1, "progress": 1, "total": "2"}),
    ("notifications/progress", {"progressToken": 1, "progress": 1, "message": 3}),
    ("notifications/progress", None),
    ("notifications/progress", "absent"),
    ("notifications/message", {"level": "INFO", "data": "x"}),
    ("notifications/message", {"level": "Info", "data": "x"}),
    ("notifications/message", {"level": "fatal", "data": "x"}),
    ("notifications/message", {"level": 1, "data": "x"}),
    ("notifications/message", {"level": "info"}),  # data is required, even as null
    ("notifications/message", {"data": "x"}),
    ("notifications/message", {"level": "info", "data": "x", "logger": 5}),
    ("notifications/resources/updated", {}),
    ("notifications/resources/updated", {"uri": 5}),
    ("notifications/resources/updated", {"uri": None}),
    ("notifications/resources/updated", "absent"),
    ("notifications/cancelled", {"requestId": 1.5}),
    ("notifications/cancelled", {"requestId": True}),
    ("notifications/cancelled", {"requestId": "r", "reason": 5}),
    ("notifications/cancelled", "absent"),
    ("notifications/elicitation/complete", {}),
    ("notifications/elicitation/complete", {"elicitationId": 5}),
    ("notifications/tasks/status", {"taskId": "t", "status": "bogus"}),
    ("notifications/tasks/status", {"status": "working"}),
    ("notifications/tasks", {"taskId": "t", "status": "working", "statusMessage": 1}),
    ("notifications/subscriptions/acknowledged", {"notifications": [1]}),
    ("notifications/subscriptions/acknowledged", {}),
]


@pytest.mark.parametrize(("method", "params"), CUSTOM)
def test_unknown_or_unfitting_is_custom_not_a_failure(method: str, params: Any) -> None:
    notification = note(method, params)
    assert notification.kind is K.CUSTOM
    assert notification.view is None
    assert notification.method == method


# --- hard failures ------------------------------------------------------------------

HARD_FAILURES: list[tuple[bytes, str]] = [
    (b"[]", "must be a JSON object, not an array"),
    (b'"notifications/progress"', "must be a JSON object, not a string"),
    (b"1", "must be a JSON object, not a number"),
    (b"null", "must be a JSON object, not null"),
    (b"true", "must be a JSON object, not a boolean"),
    (b"{}", 'no "method" member'),
    (b'{"params":{}}', 'no "method" member'),
    (b'{"method":1}', '"method" must be a string, not a number'),
    (b'{"method":null}', '"method" must be a string, not null'),
    (b'{"method":["a"]}', '"method" must be a string, not an array'),
    (b'{"method":{}}', '"method" must be a string, not an object'),
    (b'{"method":"x","params":[]}', '"params" must be an object or null, not an array'),
    (b'{"method":"x","params":"p"}', '"params" must be an object or null, not a string'),
    (b'{"method":"x","params":0}', '"params" must be an object or null, not a number'),
    (b'{"method":"x","params":false}', '"params" must be an object or null, not a boolean'),
    (b'{"method":"x\xff"}', "invalid UTF-8"),
    (b'{"method":"x","a":NaN}', "NaN"),
    (b'{"method":"x","a":Infinity}', "Infinity"),
    (b'{"method":"x","a":-Infinity}', "-Infinity"),
    (b'{"method":"x","a":1e400}', "number out of range"),
    (b'{"method":"x","a":' + b"9" * 400 + b"}", "number out of range"),
    (b"[" * 10**5, "nested 128 deep"),
    (b'{"method":"x","a":' + b"[" * 127 + b"]" * 127 + b"}", "nested 128 deep"),
    (b'{"method":"x","a":"\\ud800"}', "lone surrogate"),
    (b'{"method":"\\udc00"}', "lone surrogate"),
    (b"", "Expecting value"),
    (b'{"method":"x"', "Expecting ',' delimiter"),
    (b'{"method":"x"}{}', "Extra data"),
]


@pytest.mark.parametrize(("data", "detail"), HARD_FAILURES)
def test_hard_failures(data: bytes, detail: str) -> None:
    with pytest.raises(FrameError) as caught:
        Notification.from_bytes(data)
    error = caught.value
    assert error.reason is FrameErrorReason.BODY
    assert error.tag == 0
    assert detail in error.detail
    assert error.detail.startswith("notification ")


def test_depth_just_inside_the_limit_decodes() -> None:
    data = b'{"method":"x","a":' + b"[" * 126 + b"]" * 126 + b"}"
    assert Notification.from_bytes(data).kind is K.CUSTOM


def test_duplicate_members_the_bytes_are_kept_and_the_view_keeps_the_last() -> None:
    data = b'{"method":"notifications/message","method":"notifications/tools/list_changed"}'
    notification = Notification.from_bytes(data)
    assert notification.method == "notifications/tools/list_changed"
    assert notification.kind is K.TOOL_LIST_CHANGED
    assert notification.to_bytes() == data


# --- from_json ------------------------------------------------------------------------


def test_from_json_text_and_mapping() -> None:
    text = '{"method":"notifications/resources/updated","params":{"uri":"é"}}'
    from_text = Notification.from_json(text)
    assert from_text.to_json() == text
    params = {"uri": "é"}
    source = {"method": "notifications/resources/updated", "params": params}
    from_mapping = Notification.from_json(source)
    params["uri"] = "changed"  # a copy was taken
    assert from_mapping == from_text
    assert from_mapping.view == ResourceUpdated(uri="é")


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ({"method": "x", "a": math.nan}, "not JSON-encodable"),
        ({"method": "x", "a": {1, 2}}, "not JSON-encodable"),
        ({"method": "x", "a": "\ud800"}, "not JSON-encodable"),
        ({"method": "x", "a": 10**400}, "number out of range"),
        ({"params": {}}, 'no "method" member'),
        ({"method": 3}, '"method" must be a string'),
        (["method"], "must be a JSON object, not list"),
        ('{"method":"\ud800"}', "invalid UTF-8"),
        ("[]", "must be a JSON object, not an array"),
    ],
)
def test_from_json_failures_are_frame_errors(value: Any, detail: str) -> None:
    with pytest.raises(FrameError) as caught:
        Notification.from_json(value)
    assert caught.value.reason is FrameErrorReason.BODY
    assert detail in caught.value.detail


def test_from_json_refuses_a_mapping_nested_past_the_limit() -> None:
    deep: dict[str, Any] = {"method": "x"}
    inner = deep
    for _ in range(200):
        inner["a"] = {}
        inner = inner["a"]
    with pytest.raises(FrameError, match="nested 128 deep"):
        Notification.from_json(deep)


# --- building from Python values ----------------------------------------------------------


def test_built_notification_is_what_an_mcp_peer_expects() -> None:
    notification = Notification(
        "notifications/progress",
        {"progressToken": "upload-1", "progress": 3, "total": 10, "message": "café"},
        meta={"trace": "abc"},
    )
    assert notification.to_bytes() == (
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":'
        b'{"progressToken":"upload-1","progress":3,"total":10,"message":"caf\xc3\xa9",'
        b'"_meta":{"trace":"abc"}}}'
    )
    assert notification.kind is K.PROGRESS
    assert notification.meta == {"trace": "abc"}


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        (
            ("notifications/tools/list_changed",),
            {},
            b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}',
        ),
        (("m",), {"jsonrpc": None}, b'{"method":"m"}'),
        (("m", {}), {}, b'{"jsonrpc":"2.0","method":"m","params":{}}'),
        (("m",), {"meta": {}}, b'{"jsonrpc":"2.0","method":"m","params":{"_meta":{}}}'),
        (
            ("m", {"_meta": {"old": 1}, "a": 1}),
            {"meta": {"new": 2}},
            b'{"jsonrpc":"2.0","method":"m","params":{"_meta":{"new":2},"a":1}}',
        ),
    ],
)
def test_built_notification_bytes(
    args: tuple[Any, ...], kwargs: dict[str, Any], expected: bytes
) -> None:
    assert Notification(*args, **kwargs).to_bytes() == expected


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((1,), TypeError),
        (("m", [1]), TypeError),
        (("m", {"a": math.nan}), ValueError),
        (("m", {"a": math.inf}), ValueError),
        (("m", {"a": "\udfff"}), ValueError),
        (("m", {"a": object()}), TypeError),
        (("m", {"a": 10**400}), ValueError),
    ],
)
def test_building_refuses_values_json_cannot_carry(args: tuple[Any, ...], error: type) -> None:
    with pytest.raises(error):
        Notification(*args)


BUILT_FOR_PEERS = [
    Notification("notifications/cancelled", {"requestId": 4, "reason": "timeout"}),
    Notification("notifications/progress", {"progressToken": 1, "progress": 0.25, "total": 1}),
    Notification("notifications/message", {"level": "error", "logger": "db", "data": ["x"]}),
    Notification("notifications/resources/updated", {"uri": "file:///a.txt"}),
    Notification("notifications/resources/list_changed"),
    Notification("notifications/tools/list_changed", meta={"k": "v"}),
    Notification("notifications/prompts/list_changed", {}),
    Notification("notifications/elicitation/complete", {"elicitationId": "e"}),
    Notification(
        "notifications/tasks/status",
        {
            "taskId": "t",
            "status": "completed",
            "createdAt": "2025-11-25T10:00:00Z",
            "lastUpdatedAt": "2025-11-25T10:00:05Z",
            "ttl": None,
        },
    ),
    Notification(
        "notifications/subscriptions/acknowledged", {"notifications": {"toolsListChanged": True}}
    ),
]


# The class the MCP Python types give each method.
PEER_TYPES = {
    "notifications/cancelled": "CancelledNotification",
    "notifications/progress": "ProgressNotification",
    "notifications/message": "LoggingMessageNotification",
    "notifications/resources/updated": "ResourceUpdatedNotification",
    "notifications/resources/list_changed": "ResourceListChangedNotification",
    "notifications/tools/list_changed": "ToolListChangedNotification",
    "notifications/prompts/list_changed": "PromptListChangedNotification",
    "notifications/elicitation/complete": "ElicitCompleteNotification",
    "notifications/tasks/status": "TaskStatusNotification",
    "notifications/subscriptions/acknowledged": "SubscriptionsAcknowledgedNotification",
}


@pytest.mark.parametrize("notification", BUILT_FOR_PEERS, ids=lambda n: n.method)
def test_mcp_python_types_accept_built_notifications(notification: Notification) -> None:
    mcp_types = pytest.importorskip("mcp_types")
    envelope = mcp_types.JSONRPCNotification.model_validate_json(notification.to_bytes())
    assert envelope.jsonrpc == "2.0"
    assert envelope.method == notification.method
    peer_type = getattr(mcp_types, PEER_TYPES[notification.method])
    parsed = peer_type.model_validate_json(notification.to_bytes())
    assert parsed.method == notification.method


def test_mcp_python_types_need_the_jsonrpc_member() -> None:
    # Why Notification(...) writes "jsonrpc": a JSON-RPC peer refuses a message without it.
    mcp_types = pytest.importorskip("mcp_types")
    with pytest.raises(ValueError):
        mcp_types.JSONRPCNotification.model_validate_json(
            Notification("m", jsonrpc=None).to_bytes()
        )


def test_every_kind_is_represented_for_peers() -> None:
    assert {n.kind for n in BUILT_FOR_PEERS} == set(NotificationKind) - {K.CUSTOM}


# --- fidelity and equality --------------------------------------------------------------

FIDELITY_BYTES = (
    b'\r\n {  "params" :{"_meta":{"progressToken":"\\u00e9t","z":[1,2.50,-0,1E2]} ,'
    b'"progress":3,\t"progressToken":"tok\xf0\x9f\x98\x80","x-unknown":{"deep":[null,true]}},'
    b'\t"zeta":"\\u2603\\/", "jsonrpc":"2.0" ,\n"method":"notifications/progress" }  '
)


def test_fidelity_every_byte_comes_back() -> None:
    notification = Notification.from_bytes(FIDELITY_BYTES)
    assert notification.to_bytes() == FIDELITY_BYTES
    assert notification.to_json() == FIDELITY_BYTES.decode("utf-8")
    assert list(notification.members) == ["params", "zeta", "jsonrpc", "method"]
    assert notification.members["zeta"] == "☃/"
    assert notification.meta == {"progressToken": "ét", "z": [1, 2.5, 0, 100.0]}
    assert notification.kind is K.PROGRESS
    assert notification.view == Progress(token="tok😀", progress=3, total=None, message=None)
    again = Notification.from_bytes(notification.to_bytes())
    assert again.to_bytes() == FIDELITY_BYTES
    assert again == notification
    message = decode_message(b"\x00" + FIDELITY_BYTES)
    assert encode_message(message) == b"\x00" + FIDELITY_BYTES
    assert message == notification


def test_equality_is_by_json_value() -> None:
    a = Notification.from_bytes(b'{"method":"m","params":{"a":1,"b":[true,null]}}')
    b = Notification.from_bytes(
        b' { "params" : { "b" : [ true , null ] , "a" : 1 } , "method":"m"}'
    )
    assert a == b
    assert hash(a) == hash(b)
    assert a.to_bytes() != b.to_bytes()  # equal values, different bytes kept


@pytest.mark.parametrize(
    "other",
    [
        b'{"method":"m","params":{"a":1.0}}',
        b'{"method":"m","params":{"a":true}}',
        b'{"method":"m","params":{"a":"1"}}',
        b'{"method":"m","params":{"a":1},"jsonrpc":"2.0"}',
        b'{"method":"m","params":{"a":1,"_meta":{}}}',
        b'{"method":"n","params":{"a":1}}',
    ],
)
def test_equality_distinguishes_json_types_and_members(other: bytes) -> None:
    assert Notification.from_bytes(b'{"method":"m","params":{"a":1}}') != Notification.from_bytes(
        other
    )


def test_equality_with_other_types() -> None:
    notification = Notification("m")
    assert notification != {"jsonrpc": "2.0", "method": "m"}
    assert notification != notification.to_bytes()
    assert notification == Notification.from_bytes(b'{"jsonrpc":"2.0","method":"m"}')
    assert notification != Notification("m", jsonrpc=None)


def test_repr_names_the_kind_and_is_bounded() -> None:
    assert repr(Notification("notifications/tools/list_changed")).startswith(
        "Notification(TOOL_LIST_CHANGED, {"
    )
    long = Notification("m", {"text": "x" * 1000})
    assert len(repr(long)) < 250


@settings(max_examples=150)
@given(notifications())
def test_generated_notifications_survive_bytes(notification: Notification) -> None:
    again = Notification.from_bytes(notification.to_bytes())
    assert again == notification
    assert hash(again) == hash(notification)
    assert again.kind is notification.kind
    assert again.view == notification.view
    assert again.to_bytes() == notification.to_bytes()
    assert Notification.from_json(notification.members) == notification


@pytest.mark.parametrize("kind", list(NotificationKind), ids=lambda kind: kind.name)
def test_generated_notifications_have_the_asked_kind(kind: NotificationKind) -> None:
    @settings(max_examples=15)
    @given(notifications(kinds=[kind]))
    def check(notification: Notification) -> None:
        assert notification.kind is kind

    check()


# --- LogLevel ----------------------------------------------------------------------------


def test_log_levels_are_ordered_by_severity() -> None:
    order = [
        LogLevel.DEBUG,
        LogLevel.INFO,
        LogLevel.NOTICE,
        LogLevel.WARNING,
        LogLevel.ERROR,
        LogLevel.CRITICAL,
        LogLevel.ALERT,
        LogLevel.EMERGENCY,
    ]
    assert sorted(LogLevel) == order
    assert list(LogLevel) == order
    assert LogLevel.WARNING >= LogLevel.WARNING > LogLevel.NOTICE
    assert max(LogLevel) is LogLevel.EMERGENCY


def test_log_level_wire_names() -> None:
    names = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
    assert [level.wire for level in LogLevel] == names
    for level in LogLevel:
        assert LogLevel.from_wire(level.wire) is level


@pytest.mark.parametrize("value", ["INFO", "Info", " info", "warn", "", 1, None, ["info"]])
def test_log_level_from_wire_is_exact(value: object) -> None:
    assert LogLevel.from_wire(value) is None


# --- ErrorData ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b'{"code":-32603,"message":"boom"}', ErrorData(code=-32603, message="boom")),
        (
            b'{"code":1,"message":"","data":{"why":[1]}}',
            ErrorData(code=1, message="", data={"why": [1]}),
        ),
        (b'{"code":-2147483648,"message":"m"}', ErrorData(code=-(2**31), message="m")),
        (b'{"code":2147483647,"message":"m"}', ErrorData(code=2**31 - 1, message="m")),
        (b'{"message":"m","code":0,"data":null}', ErrorData(code=0, message="m")),
        (b'{"code":5,"message":"m","extra":true}', ErrorData(code=5, message="m")),
    ],
)
def test_error_data_decodes(data: bytes, expected: ErrorData) -> None:
    error = ErrorData.from_bytes(data)
    assert error == expected
    assert error.to_bytes() == data


@pytest.mark.parametrize(
    ("data", "detail"),
    [
        (b'{"code":2147483648,"message":"m"}', '"code" must be an int32, not an integer outside'),
        (b'{"code":-2147483649,"message":"m"}', '"code" must be an int32, not an integer outside'),
        (b'{"code":1.0,"message":"m"}', '"code" must be an int32, not a number'),
        (b'{"code":1.5,"message":"m"}', '"code" must be an int32, not a number'),
        (b'{"code":true,"message":"m"}', '"code" must be an int32, not a boolean'),
        (b'{"code":"1","message":"m"}', '"code" must be an int32, not a string'),
        (b'{"code":null,"message":"m"}', '"code" must be an int32, not missing or null'),
        (b'{"message":"m"}', '"code" must be an int32, not missing or null'),
        (b'{"code":1}', '"message" must be a string, not missing or null'),
        (b'{"code":1,"message":null}', '"message" must be a string, not missing or null'),
        (b'{"code":1,"message":7}', '"message" must be a string, not a number'),
        (b'{"code":1,"message":["m"]}', '"message" must be a string, not an array'),
        (b"[]", "error must be a JSON object, not an array"),
        (b'"boom"', "error must be a JSON object, not a string"),
        (b'{"code":1,"message":"m","data":NaN}', "error is not valid JSON"),
        (b"", "error is not valid JSON"),
        (b'{"code":1,"message":"\xc0"}', "invalid UTF-8"),
    ],
)
def test_error_data_failures(data: bytes, detail: str) -> None:
    with pytest.raises(FrameError) as caught:
        ErrorData.from_bytes(data)
    assert caught.value.reason is FrameErrorReason.BODY
    assert caught.value.tag == 1
    assert detail in caught.value.detail


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"code": 2**31, "message": "m"}, ValueError),
        ({"code": -(2**31) - 1, "message": "m"}, ValueError),
        ({"code": 1.0, "message": "m"}, ValueError),
        ({"code": True, "message": "m"}, ValueError),
        ({"code": "1", "message": "m"}, ValueError),
        ({"code": 1, "message": None}, TypeError),
        ({"code": 1, "message": b"m"}, TypeError),
    ],
)
def test_error_data_constructor_validates(kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        ErrorData(**kwargs)


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    "data",
    [10**400, {1, 2}, float("nan"), float("inf"), "\ud800", _nested(200)],
    ids=["huge int", "set", "nan", "inf", "lone surrogate", "too deep"],
)
def test_error_data_refuses_data_json_cannot_carry(data: Any) -> None:
    # Refused when built, as a notification's values are, not when sent.
    with pytest.raises(ValueError, match=r"^error data is not"):
        ErrorData(code=1, message="m", data=data)


def test_error_data_data_is_written_as_it_was_when_built() -> None:
    data: dict[str, Any] = {"a": [1]}
    error = ErrorData(code=1, message="m", data=data)
    data["a"].append(2)
    assert error.to_bytes() == b'{"code":1,"message":"m","data":{"a":[1]}}'
    assert ErrorData.from_bytes(error.to_bytes()) == ErrorData(code=1, message="m", data={"a": [1]})


def test_error_data_built_bytes() -> None:
    assert ErrorData(code=-32601, message="no such method").to_bytes() == (
        b'{"code":-32601,"message":"no such method"}'
    )
    assert ErrorData(code=7, message="m", data={"a": [1]}).to_bytes() == (
        b'{"code":7,"message":"m","data":{"a":[1]}}'
    )


def test_error_data_null_and_absent_data_are_the_same() -> None:
    assert ErrorData.from_bytes(b'{"code":1,"message":"m","data":null}') == ErrorData.from_bytes(
        b'{"code":1,"message":"m"}'
    )


@pytest.mark.parametrize(
    ("code", "known"),
    [
        (-32700, ErrorCode.PARSE_ERROR),
        (-32600, ErrorCode.INVALID_REQUEST),
        (-32601, ErrorCode.METHOD_NOT_FOUND),
        (-32602, ErrorCode.INVALID_PARAMS),
        (-32603, ErrorCode.INTERNAL_ERROR),
        (-32002, ErrorCode.RESOURCE_NOT_FOUND),
        (-32000, None),
        (0, None),
    ],
)
def test_well_known_codes(code: int, known: ErrorCode | None) -> None:
    assert ErrorData(code=code, message="m").well_known is known


def test_error_data_takes_an_error_code() -> None:
    error = ErrorData(code=ErrorCode.INTERNAL_ERROR, message="m")
    assert type(error.code) is int
    assert error == ErrorData(code=-32603, message="m")
    assert error.to_bytes() == b'{"code":-32603,"message":"m"}'
    assert error.well_known is ErrorCode.INTERNAL_ERROR


@settings(max_examples=150)
@given(error_datas())
def test_generated_errors_survive_bytes(error: ErrorData) -> None:
    again = ErrorData.from_bytes(error.to_bytes())
    assert again == error
    assert again.to_bytes() == error.to_bytes()
