"""``ask URL KIND [PARAMS_JSON]`` as a process, against real servers: its output and exit statuses.

The servers are the blocking adapter's ``serve`` with an exchange handler
written here (with and without a token), ``serve --stdin`` (which declines
exchanges), nothing at all, and a raw-socket server whose answer breaks
off. None of this needs the ``mcp`` extra, and ``ask`` does not import it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.sansio import Ask, ErrorData, Exchange, Hub, encode_frame
from tests.interop import (
    PATH_HEAD,
    ScriptedServer,
    ServeProcess,
    chunk,
    cli_command,
    cli_env,
    free_port,
    run_cli,
    run_without_mcp,
)

TOKEN = "s3cret"
#: The result the handler answers a call with, spaced as a server might write it.
RESULT = b'{ "content": [ {"type": "text", "text": "a  b"} ], "n": 2.50 }'
ERROR = ErrorData(code=-32602, message="unknown tool: 'nope'", data={"tool": "nope"})


class Handler:
    def __init__(self) -> None:
        self.asks: list[Ask] = []

    def __call__(self, ask: Ask) -> Any:
        self.asks.append(ask)
        params = ask.params or {}
        if ask.exchange is Exchange.CALL_TOOL and params.get("name") == "nope":
            return ERROR
        if ask.exchange is Exchange.CALL_TOOL:
            return RESULT
        return {"tools": [], "params": params}


@pytest.fixture
def served() -> Iterator[tuple[str, Handler]]:
    handler = Handler()
    with blocking_adapter.serve(Hub(), exchange_handler=handler, token=TOKEN) as server:
        yield server.url, handler


def ask(*args: str) -> tuple[int, bytes, bytes]:
    result = run_cli(cli_command("ask", *args))
    return result.returncode, result.stdout, result.stderr


def test_a_result_is_one_compact_json_line_as_the_server_wrote_it(
    served: tuple[str, Handler],
) -> None:
    url, handler = served
    params = '{"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": 7}}'
    status, out, err = ask(url, "call-tool", params, "--token", TOKEN)
    assert (status, err) == (0, b"")
    assert out == b'{"content":[{"type":"text","text":"a  b"}],"n":2.50}\n'
    (sent,) = handler.asks
    assert sent.exchange is Exchange.CALL_TOOL
    assert sent.params == {
        "name": "echo",
        "arguments": {"text": "hi"},
        "_meta": {"progressToken": 7},
    }
    assert sent.raw_params == params.encode()  # sent as typed


@pytest.mark.parametrize(
    ("kind", "exchange"),
    [
        ("list-tools", Exchange.LIST_TOOLS),
        ("list-resources", Exchange.LIST_RESOURCES),
        ("read-resource", Exchange.READ_RESOURCE),
    ],
)
def test_each_kind_is_its_exchange(served: tuple[str, Handler], kind: str, exchange: Any) -> None:
    url, handler = served
    status, out, _ = ask(url, kind, "--token", TOKEN)
    assert status == 0
    assert json.loads(out) == {"tools": [], "params": {}}
    assert [sent.exchange for sent in handler.asks] == [exchange]
    assert handler.asks[0].params is None  # no PARAMS_JSON: no params


def test_an_error_answer_is_its_error_data_on_standard_error_and_status_3(
    served: tuple[str, Handler],
) -> None:
    url, _ = served
    status, out, err = ask(url, "call-tool", '{"name": "nope"}', "--token", TOKEN)
    assert (status, out) == (3, b"")
    assert err == ERROR.to_bytes() + b"\n"
    assert json.loads(err) == {
        "code": -32602,
        "message": "unknown tool: 'nope'",
        "data": {"tool": "nope"},
    }


def test_a_refusal_is_status_5_and_a_declined_exchange_status_1(
    served: tuple[str, Handler],
) -> None:
    url, handler = served
    status, out, err = ask(url, "list-tools")  # no token
    assert (status, out) == (5, b"")
    assert err.startswith(b"ask: not served (401): ")
    status, out, err = ask(url + "/requests", "list-tools", "--token", TOKEN)
    assert (status, out) == (5, b"")
    assert err.startswith(b"ask: hint: the URL ends in /requests: give the server's base URL")
    assert b"ask: not served (404): " in err
    assert handler.asks == []
    with ServeProcess("--stdin") as serve:  # a server with no MCP server behind it declines
        status, out, err = ask(serve.url, "list-tools")
    assert (status, out) == (1, b"")
    assert err.startswith(b"ask: not served (200): ")


def test_no_connection_is_status_1() -> None:
    status, out, err = ask(f"http://127.0.0.1:{free_port()}", "list-tools")
    assert (status, out) == (1, b"")
    assert err.startswith(b"ask: could not connect: ")


def test_an_answer_that_breaks_off_is_status_4() -> None:
    head = PATH_HEAD.replace(b"/mcp/notifications/c1", b"/mcp/tools/call/c1")
    result = encode_frame(b'\x00{"content": []}')  # tag 0: a result
    broken = head + chunk(result[:8])  # then the connection closes
    with ScriptedServer(broken) as server:
        status, out, err = ask(server.url, "call-tool", '{"name": "x"}')
    assert (status, out) == (4, b"")
    assert err.startswith(b"ask: the answer broke off: ")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["127.0.0.1:8080", "list-tools"], b"malformed URL"),
        (["http://127.0.0.1:1", "call-tool", "{name: 1}"], b"PARAMS_JSON: mcp request params"),
        (["http://127.0.0.1:1", "call-tool", "[1, 2]"], b"expected a JSON object or null"),
        (["http://127.0.0.1:1", "list-tools", "--token", "two words"], b"unusable token"),
    ],
)
def test_usage_errors_exit_2(args: list[str], message: bytes) -> None:
    status, out, err = ask(*args)
    assert (status, out) == (2, b"")
    assert message in err


def test_ask_needs_no_mcp(served: tuple[str, Handler]) -> None:
    url, _ = served
    result = run_without_mcp(["ask", url, "list-tools", "null", "--token", TOKEN])
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"tools": [], "params": {}}


def test_the_token_comes_from_a_token_file_or_the_environment(
    served: tuple[str, Handler], tmp_path: Path
) -> None:
    url, _ = served
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    status, out, _ = ask(url, "list-tools", "--token-file", str(token_file))
    assert status == 0 and b'"tools"' in out
    environment = {**cli_env(), "DIVERGE_TOKEN": TOKEN}
    result = subprocess.run(
        cli_command("ask", url, "list-tools"),
        capture_output=True,
        env=environment,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0 and b'"tools"' in result.stdout


def test_a_token_is_not_sent_in_cleartext_to_a_host_that_is_not_loopback() -> None:
    status, out, err = ask("http://example.invalid:8080", "list-tools", "--token", TOKEN)
    assert (status, out) == (2, b"")
    assert b"--allow-plaintext-token" in err and TOKEN.encode() not in err
