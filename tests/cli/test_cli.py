"""The command line: ``serve`` and ``listen`` end to end, their output and exit statuses.

The end-to-end tests run ``python -m diverge_notifications`` as subprocesses
on free loopback ports. Exit statuses 3 and 4 come from a raw-socket server
that writes a scripted answer. The human view on a terminal is tested in
``tests/cli/test_terminal.py``.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import re
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import diverge_notifications.adapters.asyncio as asyncio_adapter
from diverge_notifications.cli import (
    EXIT_BROKEN,
    EXIT_ERRORED,
    EXIT_NO_CONNECTION,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    MCP_MISSING_MESSAGE,
    event_record,
    main,
    notification_line,
)
from diverge_notifications.sansio import (
    ErrorData,
    FrameError,
    FrameErrorReason,
    MessageRejected,
    Notification,
    NotificationReceived,
    NotServed,
    ReaskNeeded,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
    encode_frame,
    encode_message,
)
from diverge_notifications.sansio.events import AttemptsExhausted, ConnectionFailed, RetryScheduled
from diverge_notifications.sansio.lines import LineSplitter
from tests.interop import (
    HANG_GUARD,
    LAST_CHUNK,
    PATH_HEAD,
    LineReader,
    ListenProcess,
    ScriptedServer,
    ServeProcess,
    chunk,
    cli_command,
    cli_env,
    free_port,
    kill_if_running,
    run_cli,
    run_without_mcp,
)

PUBLISHED = [
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1,"total":2}}',
    b'{"method":"notifications/message","params":{"data":"caf\xc3\xa9","level":"warning"},"extra":[1,2.5,null]}',
    b'{"params":{"_meta":{"k":"v"}},"method":"notifications/acme/custom","jsonrpc":"2.0"}',
    b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}',
]
KINDS = ["progress", "logging_message", "custom", "tool_list_changed"]


def _frame(message: Notification | ErrorData) -> bytes:
    return encode_frame(encode_message(message))


def _listen_to_script(answer: bytes) -> tuple[int, list[dict[str, Any]], list[bytes], bytes]:
    """Run ``listen --once --events`` against a server that writes ``answer``.

    Returns the exit status, the event records, the standard-output lines
    and the ask the server received.
    """
    server = ScriptedServer(answer)
    with server, ListenProcess(server.url, "--once", "--events") as listen:
        status = listen.wait()
        return status, listen.events(), listen.notification_lines(), server.requests[0]


# --- serve --stdin and listen, end to end -------------------------------------------


def test_serve_stdin_publishes_to_listen_once() -> None:
    serve = ServeProcess("--stdin", "--keepalive", "0.2")
    with serve, ListenProcess(serve.url, "--once", "--events") as listen:
        listen.wait_for_event("StreamOpened")
        for line in PUBLISHED:
            serve.send_line(line)
        assert listen.stdout is not None
        listen.stdout.wait_for_count(len(PUBLISHED))
        # SIGINT: serve ends the open path cleanly, so listen sees StreamEnded.
        assert serve.interrupt() == EXIT_OK
        assert listen.wait() == EXIT_OK
        assert listen.notification_lines() == PUBLISHED  # the bytes, unchanged, in order
        events = listen.events()
    names = [record["event"] for record in events]
    assert names == ["StreamOpened", *["NotificationReceived"] * len(KINDS), "StreamEnded"]
    assert isinstance(events[0]["channel"], str) and events[0]["channel"]
    assert set(events[0]) == {"event", "channel"}
    assert [record["kind"] for record in events[1:-1]] == KINDS
    assert all(set(record) == {"event", "kind"} for record in events[1:-1])
    assert events[-1] == {"event": "StreamEnded"}


def test_bad_stdin_lines_are_reported_and_skipped() -> None:
    good = b'{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"x:/a"}}'
    lines = [
        b"not json at all",
        b"[1, 2, 3]",
        b'{"no": "method"}',
        b'{"method": 5}',
        b"",
        b'{"method": "m", "params": 7}',
        b"\xff\xfe",
        good,
    ]
    serve = ServeProcess("--stdin")
    with serve, ListenProcess(serve.url, "--once", "--events") as listen:
        listen.wait_for_event("StreamOpened")
        for line in lines:
            serve.send_line(line)
        assert listen.stdout is not None
        listen.stdout.wait_for_count(1)
        serve.stderr.wait_for_text("line 7:")
        # End of standard input does not stop the server: a new path still opens.
        serve.close_stdin()
        with ListenProcess(serve.url, "--once", "--events") as second:
            second.wait_for_event("StreamOpened")
            assert serve.interrupt() == EXIT_OK
            assert second.wait() == EXIT_OK
        assert listen.wait() == EXIT_OK
        assert listen.notification_lines() == [good]
    reports = [line for line in serve.stderr.messages if line.startswith(b"line ")]
    assert [line.split(b":", 1)[0] for line in reports] == [
        b"line 1",
        b"line 2",
        b"line 3",
        b"line 4",
        b"line 6",
        b"line 7",
    ]
    assert b"method" in reports[2]
    assert all(line.endswith(b"skipped") for line in reports)


def _sized_notification(size: int) -> bytes:
    head, tail = b'{"method":"x/big","params":{"pad":"', b'"}}'
    return head + b"a" * (size - len(head) - len(tail)) + tail


def test_serve_stdin_keeps_a_line_whose_frame_fits_the_frame_limit() -> None:
    # 16 MiB - 1 bytes and the tag byte make a frame of the limit; one byte more does not fit.
    longest = _sized_notification(16 * 1024 * 1024 - 1)
    serve = ServeProcess("--stdin")
    with serve, ListenProcess(serve.url, "--once", "--events") as listen:
        listen.wait_for_event("StreamOpened")
        serve.send_line(_sized_notification(16 * 1024 * 1024))
        serve.send_line(longest)
        assert listen.stdout is not None
        listen.stdout.wait_for_count(1)
        assert serve.interrupt() == EXIT_OK
        assert listen.wait() == EXIT_OK
        assert listen.notification_lines() == [longest]
    reports = [line for line in serve.stderr.messages if line.startswith(b"line ")]
    assert reports == [b"line 1: longer than 16777215 bytes, skipped"]


def test_listen_with_token_and_refusal() -> None:
    with ServeProcess("--token", "s3cret", stdin=False) as serve:
        with (
            ListenProcess(serve.url, "--once", "--events") as refused,
            ListenProcess(serve.url + "/requests", "--once", "--token", "s3cret") as misplaced,
        ):
            assert refused.wait() == EXIT_REFUSED == 5  # refused (401): a script can tell
            events = refused.events()
            # The ask's own address for the base URL: 404, and a hint on standard error.
            assert misplaced.wait() == EXIT_REFUSED
            said = misplaced.stderr.text()
        assert [record["event"] for record in events] == ["NotServed"]
        assert events[0]["status"] == 401
        assert isinstance(events[0]["reason"], str)
        assert "listen: hint: the URL ends in /requests: give the server's base URL" in said
        assert repr(serve.url) in said and "listen: not served (404)" in said
        with ListenProcess(serve.url, "--once", "--events", "--token", "s3cret") as accepted:
            accepted.wait_for_event("StreamOpened")
            assert serve.interrupt(signal.SIGTERM) == EXIT_OK
            assert accepted.wait() == EXIT_OK
            # A clean end before any message: the ask was not served after all.
            assert accepted.events()[-1]["event"] == "NotServed"
            assert accepted.events()[-1]["status"] == 200


def test_listen_without_once_runs_until_interrupted() -> None:
    with ServeProcess("--stdin") as serve:
        with ListenProcess(serve.url, "--events") as listen:
            listen.wait_for_event("StreamOpened")
            serve.send_line(PUBLISHED[0])
            serve.send_line(b'{ "method" : "x/y" , "params" : { "s" : "a b" } }')
            assert listen.stdout is not None
            listen.stdout.wait_for_count(2)
            assert listen.interrupt() == EXIT_OK
            compact = b'{"method":"x/y","params":{"s":"a b"}}'
            assert listen.notification_lines() == [PUBLISHED[0], compact]
        assert serve.interrupt() == EXIT_OK


# --- exit statuses from scripted answers ----------------------------------------------


def test_exit_3_after_stream_errored() -> None:
    error = ErrorData(code=-32603, message="the MCP server is gone", data={"retry": False})
    answer = PATH_HEAD + chunk(_frame(error)) + LAST_CHUNK
    status, events, lines, ask = _listen_to_script(answer)
    assert status == EXIT_ERRORED
    assert ask.startswith(b"POST /requests HTTP/1.1\r\n")
    assert ask.endswith(b"\r\n\r\n\x04")
    assert events == [
        {"event": "StreamOpened", "channel": "c1"},
        {
            "event": "StreamErrored",
            "error": {"code": -32603, "message": error.message, "data": {"retry": False}},
        },
    ]
    assert lines == []


def test_exit_4_after_stream_broken() -> None:
    notification = Notification("notifications/message", {"level": "info", "data": "hi"})
    # A notification, then half a frame, then the connection ends: abrupt.
    answer = PATH_HEAD + chunk(_frame(notification)) + chunk(b"\x00\x00\x01\x00{")
    status, events, lines, _ = _listen_to_script(answer)
    assert status == EXIT_BROKEN
    assert [record["event"] for record in events] == [
        "StreamOpened",
        "NotificationReceived",
        "StreamBroken",
    ]
    assert isinstance(events[-1]["reason"], str) and events[-1]["reason"]
    assert lines == [notification.to_bytes()]


def test_message_rejected_is_reported_and_the_path_goes_on() -> None:
    notification = Notification("notifications/prompts/list_changed")
    answer = (
        PATH_HEAD
        + chunk(encode_frame(b"\x07{}") + _frame(notification))
        + chunk(encode_frame(b"\x00[1]"))
        + LAST_CHUNK
    )
    status, events, lines, _ = _listen_to_script(answer)
    assert status == EXIT_OK
    assert [record["event"] for record in events] == [
        "StreamOpened",
        "MessageRejected",
        "NotificationReceived",
        "MessageRejected",
        "StreamEnded",
    ]
    assert "tag 7" in events[1]["reason"]
    assert set(events[3]) == {"event", "reason"}
    assert lines == [notification.to_bytes()]


def test_not_served_on_a_clean_end_with_nothing() -> None:
    answer = PATH_HEAD + LAST_CHUNK
    status, events, lines, _ = _listen_to_script(answer)
    assert status == EXIT_OK
    assert lines == []
    assert [record["event"] for record in events] == ["StreamOpened", "NotServed"]
    assert events[-1]["status"] == 200


def test_exit_1_when_no_connection_can_be_made() -> None:
    port = free_port()  # nobody listens there
    with ListenProcess(f"http://127.0.0.1:{port}", "--once", "--events") as listen:
        assert listen.wait() == EXIT_NO_CONNECTION
        events = listen.events()
    assert [record["event"] for record in events] == ["ConnectionFailed"]
    assert isinstance(events[0]["reason"], str) and events[0]["reason"]


def test_serve_exits_1_when_the_port_is_taken() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = run_cli(cli_command("serve", "--port", str(port)))
    assert result.returncode == EXIT_NO_CONNECTION
    assert b"cannot listen" in result.stderr


# --- usage errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "not a url",
        "ftp://127.0.0.1:8080",
        "http://",
        "http://127.0.0.1:99999",
        "http://h/?q=1",
        "http://h\u00e9.example:1",
    ],
)
def test_malformed_url_exits_2(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["listen", url, "--once"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "malformed URL" in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["frobnicate"],
        ["listen"],
        ["listen", "http://127.0.0.1:1", "--bogus"],
        ["serve", "--port", "http"],
        ["serve", "--port", "70000"],
        ["serve", "--keepalive", "0"],
        ["serve", "--keepalive", "nan"],
        ["listen", "http://127.0.0.1:1", "--keepalive", "0"],
        ["listen", "http://127.0.0.1:1", "--keepalive", "-1"],
        ["serve", "--log-level", "INFO"],
        # Several servers, of both kinds, are one relay now: these are the parser's refusals.
        ["serve", "--mcp-max-attempts", "0"],
        ["serve", "--mcp-max-attempts", "many"],
        ["ask"],
        ["ask", "http://127.0.0.1:1"],
        ["ask", "http://127.0.0.1:1", "call-tools"],
        ["ask", "http://127.0.0.1:1", "list-tools", "{}", "extra"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == EXIT_USAGE
    assert "usage:" in capsys.readouterr().err


def test_malformed_url_exits_2_as_a_process() -> None:
    result = run_cli(cli_command("listen", "127.0.0.1:8080"))
    assert result.returncode == EXIT_USAGE
    assert b"malformed URL" in result.stderr


@pytest.mark.parametrize(
    "option",
    [
        ["--mcp-stdio", "python -m some_server"],
        ["--mcp-url", "http://127.0.0.1:1/mcp"],
        ["--mcp-config", "mcp.json"],
    ],
)
def test_mcp_options_without_mcp_exit_2(option: list[str]) -> None:
    result = run_without_mcp(["serve", "--port", "0", "--stdin", *option])
    assert result.returncode == EXIT_USAGE
    assert result.stderr.decode().strip() == MCP_MISSING_MESSAGE


def _mcp_installed() -> bool:
    try:
        import mcp  # noqa: F401
    except ImportError:
        return False
    return True


needs_mcp = pytest.mark.skipif(not _mcp_installed(), reason="the 'mcp' extra is not installed")


@needs_mcp
def test_serve_relays_an_mcp_server_over_stdio() -> None:
    example = f"{sys.executable} -m diverge_notifications.examples.mcp_server --interval 0.2"
    serve = ServeProcess("--mcp-stdio", example, "--log-level", "warning", stdin=False)
    # Until the server is connected and subscribed, asks are answered 503.
    subscribed = serve.stderr.wait_for_text('"event":"McpSubscribed"')
    assert b'"log_level":"warning"' in subscribed
    with serve, ListenProcess(serve.url, "--once", "--events") as listen:
        assert listen.stdout is not None
        listen.stdout.wait(lambda lines: any(b"/example/tick" in line for line in lines))
        assert serve.interrupt() == EXIT_OK
        assert listen.wait() == EXIT_OK
        received = [json.loads(line) for line in listen.notification_lines()]
    levels = {n["params"]["level"] for n in received if n["method"] == "notifications/message"}
    assert levels <= {"warning", "error", "critical", "alert", "emergency"}


@needs_mcp
def test_serve_exits_1_when_the_mcp_bridge_fails() -> None:
    result = run_cli(
        cli_command("serve", "--port", "0", "--mcp-stdio", "no-such-mcp-server-command --x")
    )
    assert result.returncode == EXIT_NO_CONNECTION
    assert b"the MCP bridge failed" in result.stderr
    assert b"no-such-mcp-server-command" in result.stderr


def test_core_commands_import_neither_mcp_nor_trio() -> None:
    probe = (
        "import sys\n"
        "import diverge_notifications.cli, diverge_notifications.cli.demo\n"
        "import diverge_notifications.cli.terminal, diverge_notifications.adapters.asyncio\n"
        "print(sorted(m for m in ('mcp', 'trio') if m in sys.modules))\n"
    )
    result = run_cli([sys.executable, "-c", probe], check=True)
    assert result.stdout.strip() == b"[]"


# --- output records and line handling, in process ---------------------------------------------


def test_event_records() -> None:
    progress = Notification("notifications/progress", {"progressToken": 1, "progress": 0.5})
    frame_error = FrameError(FrameErrorReason.UNKNOWN_TAG, "unknown message tag 9", tag=9)
    cases = [
        (StreamOpened(channel="c7"), {"event": "StreamOpened", "channel": "c7"}),
        (
            NotificationReceived(notification=progress),
            {"event": "NotificationReceived", "kind": "progress"},
        ),
        (
            NotServed(status=404, reason="not found"),
            {"event": "NotServed", "status": 404, "reason": "not found"},
        ),
        (
            StreamErrored(error=ErrorData(code=-32002, message="gone")),
            {"event": "StreamErrored", "error": {"code": -32002, "message": "gone"}},
        ),
        (StreamBroken(reason="reset"), {"event": "StreamBroken", "reason": "reset"}),
        (StreamEnded(), {"event": "StreamEnded"}),
        (ReaskNeeded(), {"event": "ReaskNeeded"}),
        (
            RetryScheduled(delay=0.25, attempt=2),
            {"event": "RetryScheduled", "delay": 0.25, "attempt": 2},
        ),
        (AttemptsExhausted(attempts=5), {"event": "AttemptsExhausted", "attempts": 5}),
        (ConnectionFailed(reason="refused"), {"event": "ConnectionFailed", "reason": "refused"}),
        (
            MessageRejected(error=frame_error, payload=b"\x09{}"),
            {"event": "MessageRejected", "reason": "unknown message tag 9"},
        ),
    ]
    for event, expected in cases:
        record = event_record(event)
        assert record == expected
        assert json.loads(json.dumps(record)) == expected


def test_notification_line_is_compact_and_one_line() -> None:
    spaced = b'{ "method" : "x" }'
    assert notification_line(Notification.from_bytes(spaced)) == b'{"method":"x"}\n'
    raw = b'{"method" : "x/y",  "params":{"b":1,"a":"\xe2\x82\xac"}}'
    line = notification_line(Notification.from_bytes(raw))
    assert line == b'{"method":"x/y","params":{"b":1,"a":"\xe2\x82\xac"}}\n'
    spread = b'{\n  "method": "x/y",\r\n  "params": {"z": 1, "a": 2}\n}'
    line = notification_line(Notification.from_bytes(spread))
    assert line == b'{"method":"x/y","params":{"z":1,"a":2}}\n'


def test_notification_line_keeps_strings_numbers_and_escapes() -> None:
    raw = (
        b'{ "method" : "notifications/a b" ,\n\t"params" : {\r\n'
        b'  "say" : "he said \\"hi there\\" ",\n'
        b'  "path" : "C:\\\\ dir\\\\" ,\n'
        b'  "quote" : "\\"" , "empty" : "" , "  key  " : " \\u00e9 \\n \\/ ",\n'
        b'  "numbers" : [ 1 , 2.50 , -0.0E+01 , 1e5 , true , false , null ] ,\n'
        b'  "nested" : { "a" : [ { "b" : { } } , [ ] ] , "z" : "\xe2\x82\xac \\\\" }\n'
        b"} }"
    )
    expected = (
        b'{"method":"notifications/a b","params":{'
        b'"say":"he said \\"hi there\\" ",'
        b'"path":"C:\\\\ dir\\\\",'
        b'"quote":"\\"","empty":"","  key  ":" \\u00e9 \\n \\/ ",'
        b'"numbers":[1,2.50,-0.0E+01,1e5,true,false,null],'
        b'"nested":{"a":[{"b":{}},[]],"z":"\xe2\x82\xac \\\\"}'
        b"}}"
    )
    line = notification_line(Notification.from_bytes(raw))
    assert line == expected + b"\n"
    assert json.loads(line) == json.loads(raw)
    # Already compact: the very bytes.
    for compact in [*PUBLISHED, expected]:
        assert notification_line(Notification.from_bytes(compact)) == compact + b"\n"


_JSON_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
_JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _JSON_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_JSON_TEXT, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(
    value=_JSON_VALUES,
    indent=st.sampled_from([None, 0, 1, 4, "\t"]),
    separators=st.sampled_from([(",", ":"), (", ", ": "), (" ,\n ", " :\r\n\t")]),
    ascii_only=st.booleans(),
)
def test_notification_line_equals_a_compact_encoding(
    value: Any, indent: int | str | None, separators: tuple[str, str], ascii_only: bool
) -> None:
    members = {"method": "x/y", "params": {"v": value}}
    sent = json.dumps(members, indent=indent, separators=separators, ensure_ascii=ascii_only)
    compact = json.dumps(members, separators=(",", ":"), ensure_ascii=ascii_only)
    line = notification_line(Notification.from_bytes(sent.encode("utf-8")))
    assert line == compact.encode("utf-8") + b"\n"


def _split_all(chunks: list[bytes], max_line: int = 64) -> list[tuple[int, bytes | None]]:
    splitter = LineSplitter(max_line)
    lines: list[tuple[int, bytes | None]] = []
    for piece in chunks:
        lines += splitter.feed(piece)
    return lines + splitter.close()


STDIN_SAMPLE = b'{"method":"a"}\n\nnot json\r\n' + b"x" * 200 + b"\nlast\n" + b"y" * 100 + b"\ntail"
STDIN_LINES: list[tuple[int, bytes | None]] = [
    (1, b'{"method":"a"}'),
    (2, b""),
    (3, b"not json\r"),
    (4, None),
    (5, b"last"),
    (6, None),
    (7, b"tail"),
]


def test_line_splitter_whole_and_byte_at_a_time() -> None:
    assert _split_all([STDIN_SAMPLE]) == STDIN_LINES
    assert _split_all([bytes([byte]) for byte in STDIN_SAMPLE]) == STDIN_LINES


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STDIN_SAMPLE)), max_size=12))
def test_line_splitter_random_splits(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(STDIN_SAMPLE)]
    chunks = [STDIN_SAMPLE[start:end] for start, end in itertools.pairwise(bounds)]
    assert _split_all(chunks) == STDIN_LINES


# --- tokens ------------------------------------------------------------------------------

#: Tokens that cannot go into an Authorization field, or that no server accepts.
UNUSABLE_TOKENS = ["", "a b", "s\u00e9cret", "a\r\nX: 1"]


@pytest.mark.parametrize("token", UNUSABLE_TOKENS)
def test_listen_with_an_unusable_token_exits_2(
    token: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["listen", url, "--once", "--token", token]) == EXIT_USAGE
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "listen: error: unusable token: " in captured.err
    assert "cret" not in captured.err  # the token is not repeated


@pytest.mark.parametrize("token", UNUSABLE_TOKENS)
def test_serve_with_an_unusable_token_exits_2_before_serving(token: str) -> None:
    result = run_cli(cli_command("serve", "--port", "0", "--token", token))
    assert result.returncode == EXIT_USAGE
    err = result.stderr.decode("utf-8")
    assert err.count("\n") == 1
    assert "serve: error: unusable token: " in err
    assert "serving on" not in err


def test_a_value_error_of_listen_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def refusing(url: str, **options: Any) -> AsyncIterator[Any]:
        raise ValueError("this token cannot be sent")
        yield  # pragma: no cover - an async generator

    monkeypatch.setattr(asyncio_adapter, "listen", refusing)
    assert main(["listen", "http://127.0.0.1:1", "--token", "fine"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == "python -m diverge_notifications listen: error: this token cannot be sent\n"


def test_a_value_error_of_serve_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def refusing(*args: Any, **options: Any) -> Any:
        raise ValueError("this token cannot be checked")

    monkeypatch.setattr(asyncio_adapter, "serve", refusing)
    assert main(["serve", "--port", "0", "--token", "fine"]) == EXIT_USAGE
    err = capsys.readouterr().err
    # Found once serve runs: a line of its log, an error.
    assert re.fullmatch(
        r"\S+ ERROR python -m diverge_notifications serve: error: this token cannot be checked\n",
        err,
    )


# --- listen --keepalive ------------------------------------------------------------------


def _fake_listen(
    monkeypatch: pytest.MonkeyPatch, script: list[Any], seen: dict[str, Any] | None = None
) -> None:
    """Make ``listen`` yield ``script`` (then stop), noting its options in ``seen``."""

    async def scripted(url: str, **options: Any) -> AsyncIterator[Any]:
        if seen is not None:
            seen.update(options, url=url)
        for item in script:
            yield item

    monkeypatch.setattr(asyncio_adapter, "listen", scripted)


@pytest.mark.parametrize(("argv", "interval"), [([], 15.0), (["--keepalive", "60"], 60.0)])
def test_listen_keepalive_is_given_to_the_listener(
    argv: list[str], interval: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    _fake_listen(monkeypatch, [], seen)
    assert main(["listen", "http://127.0.0.1:1", *argv]) == EXIT_OK
    assert seen["keepalive_interval"] == interval


def test_listen_keepalive_sets_the_idle_timeout() -> None:
    # The server is silent for 60 s; a listener told 0.1 s gives up after 3 x 0.1 s.
    with ServeProcess("--keepalive", "60", stdin=False) as serve:
        with ListenProcess(serve.url, "--once", "--events", "--keepalive", "0.1") as listen:
            assert listen.wait() == EXIT_BROKEN
            events = listen.events()
        assert [record["event"] for record in events] == ["StreamOpened", "StreamBroken"]
        assert events[-1]["reason"] == "idle timeout: no data for 0.3 s"
        assert serve.interrupt() == EXIT_OK


# --- listen without --events: one line on standard error per trouble -----------------------


def test_listen_says_once_why_it_gets_no_path(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = ConnectionFailed(reason="ECONNREFUSED")
    unauthorized = NotServed(status=401, reason="a valid bearer token is required")
    retry = RetryScheduled(delay=0.5, attempt=1)
    script = [
        refused,
        ReaskNeeded(),
        retry,
        refused,
        retry,
        refused,
        ConnectionFailed(reason="timed out"),
        refused,
        unauthorized,
        retry,
        unauthorized,
        NotServed(status=404, reason="no such path"),
        StreamOpened(channel="c1"),
        StreamEnded(),
        StreamOpened(channel="c2"),
        NotServed(status=200, reason="a clean end with nothing"),
        NotServed(status=None, reason="nothing at payload level"),
        StreamOpened(channel="c3"),
        StreamBroken(reason="reset by peer"),
        StreamOpened(channel="c4"),
        StreamBroken(reason="reset by peer"),
        StreamOpened(channel="c5"),
        StreamErrored(error=ErrorData(code=-32603, message="gone")),
        StreamErrored(error=ErrorData(code=-32603, message="gone")),
        refused,
    ]
    _fake_listen(monkeypatch, script)
    assert main(["listen", "http://127.0.0.1:1"]) == EXIT_OK
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "listen: could not connect: ECONNREFUSED",
        "listen: could not connect: timed out",
        "listen: could not connect: ECONNREFUSED",
        "listen: not served (401): a valid bearer token is required",
        "listen: not served (404): no such path",
        "listen: the path broke: reset by peer",
        "listen: the path broke: reset by peer",
        "listen: the server ended the path with error -32603: gone",
        "listen: could not connect: ECONNREFUSED",
    ]


def test_listen_with_events_prints_only_the_events(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    script = [ConnectionFailed(reason="ECONNREFUSED"), NotServed(status=401, reason="no")]
    _fake_listen(monkeypatch, script)
    assert main(["listen", "http://127.0.0.1:1", "--events"]) == EXIT_OK
    lines = capsys.readouterr().err.splitlines()
    assert [json.loads(line) for line in lines] == [event_record(event) for event in script]


class _Terminal(io.StringIO):
    encoding = "utf-8"

    def isatty(self) -> bool:
        return True


def test_listen_on_a_terminal_shows_its_troubles_in_the_view(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    monkeypatch.setenv("NO_COLOR", "1")
    script = [
        ConnectionFailed(reason="ECONNREFUSED"),
        NotServed(status=401, reason="a valid bearer token is required"),
        StreamOpened(channel="c1"),
        StreamBroken(reason="reset by peer"),
        StreamOpened(channel="c2"),
        StreamErrored(error=ErrorData(code=-32603, message="gone")),
    ]
    _fake_listen(monkeypatch, script)
    assert main(["listen", "http://127.0.0.1:1"]) == EXIT_OK
    assert capsys.readouterr().err == ""
    shown = terminal.getvalue()
    assert "could not connect: ECONNREFUSED" in shown
    assert "not served (401): a valid bearer token is required" in shown
    assert "the path broke: reset by peer" in shown
    assert "server error -32603: gone" in shown


def test_listen_says_it_is_refused_end_to_end() -> None:
    with ServeProcess("--token", "s3cret", stdin=False) as serve:
        with ListenProcess(serve.url) as listen:
            line = listen.stderr.wait_for_text("not served (401)")
            assert listen.interrupt() == EXIT_OK
            assert listen.notification_lines() == []
        assert not line.startswith(b"{")
        assert serve.interrupt() == EXIT_OK


# --- standard output closed ------------------------------------------------------------------


def _closing_stdout(*args: str) -> list[str]:
    """The command line running ``python -m diverge_notifications ARGS`` with fd 1 closed."""
    return ["/bin/sh", "-c", f"exec {shlex.join(cli_command(*args))} >&-"]


@contextlib.contextmanager
def _without_stdout(*args: str) -> Iterator[tuple[subprocess.Popen[bytes], LineReader]]:
    """``python -m diverge_notifications ARGS`` running with fd 1 closed, and its stderr reader.

    The process is killed on the way out if still running.
    """
    process = subprocess.Popen(
        _closing_stdout(*args),
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    try:
        assert process.stderr is not None
        yield process, LineReader(process.stderr, "stderr")
    finally:
        kill_if_running(process)


def test_listen_without_stdout_does_not_crash(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdout", None)
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["listen", url, "--once"]) == EXIT_NO_CONNECTION
    assert capsys.readouterr().err.startswith("listen: could not connect: ")


def test_listen_without_stdout_exits_0_at_the_first_notification() -> None:
    with ServeProcess("--stdin") as serve:
        with _without_stdout("listen", serve.url, "--events") as (listen, stderr):
            stderr.wait_for_text('"event":"StreamOpened"')
            serve.send_line(PUBLISHED[0])
            assert listen.wait(HANG_GUARD) == EXIT_OK
            stderr.join()
        assert [json.loads(line)["event"] for line in stderr.lines] == [
            "StreamOpened",
            "NotificationReceived",
        ]
        assert serve.interrupt() == EXIT_OK


def test_serve_without_stdout_serves() -> None:
    with _without_stdout("serve", "--port", "0") as (serve, stderr):
        url = stderr.wait_for_text("serving on ").decode().split("serving on ", 1)[1]
        with ListenProcess(url, "--once", "--events") as listen:
            listen.wait_for_event("StreamOpened")
            serve.send_signal(signal.SIGINT)
            assert serve.wait(HANG_GUARD) == EXIT_OK
            assert listen.wait() == EXIT_OK
        stderr.join()
        # The path's end and the server's counts, as serve reports them.
        serving, ended, *rest = stderr.messages
        assert serving == f"serving on {url}".encode()
        assert re.fullmatch(
            rb"server: path c1 ended \(clean\): 0 sent, 0 dropped \(peer 127\.0\.0\.1:\d+\)", ended
        )
        assert rest == [
            b"served 1 asks (1 paths, 0 exchanges): 0 sent, 0 dropped, "
            b"0 paths cut off as stalled, refusals: none, 0 handler failures, "
            b"0 exchanges abandoned by their caller, 0 connections closed at the ask deadline, "
            b"0 refused for their address's share",
        ]
