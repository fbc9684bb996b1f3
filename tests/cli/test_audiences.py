"""``serve --token-file`` with several tokens: each listener hears its own token's calls.

The token file lists one token a line (blank lines and ``#`` comments
skipped). Every token is accepted; the progress of a call forwarded under
one token reaches only the listeners of that token, while what the MCP
server says on its own account (the example server's bursts) reaches all.
Real processes: ``serve --mcp-stdio`` relaying the example server, two
``listen`` and one ``ask``. Waits have deadlines that only catch a hang.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, cast

import pytest

from diverge_notifications.cli import EXIT_OK, EXIT_USAGE, main
from diverge_notifications.cli.parser import MAX_TOKEN_FILE_LINE, read_token_list
from diverge_notifications.examples.mcp_server import TICK_METHOD
from diverge_notifications.sansio.wire.http import audience_of
from tests.interop import ROOT, ListenProcess, ServeProcess, cli_command, run_cli
from tests.relay_support import example_command

ALPHA = "alpha-Token.1"
BETA = "beta-Token.2"


def _file(folder: Path, content: bytes) -> str:
    path = folder / "tokens"
    path.write_bytes(content)
    return str(path)


# --- the token file -------------------------------------------------------------------------


def test_a_token_file_lists_tokens_one_a_line(tmp_path: Path) -> None:
    content = (
        b"# the tokens of two teams\n\nalpha-1\n   \n  # an indented comment\r\nbeta-2\r\nalpha-1"
    )
    assert read_token_list(_file(tmp_path, content)) == ["alpha-1", "beta-2"]
    assert read_token_list(_file(tmp_path, b"only\n")) == ["only"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "lists no token"),
        (b"# nothing but a comment\n\n", "lists no token"),
        (b"good\nbad token\n", "line 2 of --token-file"),
        (b"good\n\xc3\xa9\n", "line 2 of --token-file"),
        (b"x" * (MAX_TOKEN_FILE_LINE + 1) + b"\n", "line 1 of --token-file"),
    ],
)
def test_a_token_file_without_usable_tokens_says_which_line(
    tmp_path: Path, content: bytes, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, content)
    with pytest.raises(ValueError, match=message) as raised:
        read_token_list(path)
    assert "bad token" not in str(raised.value)
    assert main(["serve", "--port", "0", "--token-file", path]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert message in err and "bad token" not in err


# --- two tokens, two listeners, one call -------------------------------------------------------


def progress_tokens(lines: list[bytes]) -> list[str]:
    heard = [json.loads(line) for line in lines]
    return [n["params"]["progressToken"] for n in heard if n["method"] == "notifications/progress"]


def bursts(lines: list[bytes]) -> list[int]:
    heard = [json.loads(line) for line in lines]
    return [n["params"]["burst"] for n in heard if n["method"] == TICK_METHOD]


def test_a_calls_progress_reaches_only_the_listeners_of_its_token(tmp_path: Path) -> None:
    tokens = _file(tmp_path, f"# two teams\n{ALPHA}\n\n{BETA}\n".encode())
    server = shlex.join(example_command("--interval", "0.5"))
    with (
        ServeProcess(
            "--token-file", tokens, "--mcp-stdio", server, "--mcp-env", f"PYTHONPATH={ROOT}",
            stdin=False,
        ) as serve,
        ListenProcess(serve.url, "--events", "--token", ALPHA) as first,
        ListenProcess(serve.url, "--events", "--token", BETA) as second,
    ):  # fmt: skip
        first.wait_for_event("StreamOpened")
        second.wait_for_event("StreamOpened")
        params = {"name": "count", "arguments": {"steps": 3}, "_meta": {"progressToken": "a-1"}}
        done = run_cli(
            cli_command("ask", serve.url, "call-tool", json.dumps(params), "--token", ALPHA),
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert first.stdout is not None and second.stdout is not None
        first.stdout.wait(lambda lines: progress_tokens(lines).count("a-1") == 3)
        # The first burst the first listener heard after the call's progress:
        # once the second has heard it too, it has heard everything published
        # before it (one hub, one order), the call's progress included if it
        # were to get it.
        first.stdout.wait(lambda lines: bool(bursts(lines[_last_progress(lines) :])))
        later = bursts(first.notification_lines()[_last_progress(first.notification_lines()) :])
        second.stdout.wait(lambda lines: max(bursts(lines), default=0) >= later[0])
        assert "a-1" not in progress_tokens(second.notification_lines())
        # The server's own bursts reach both (the listeners may have opened
        # their paths after the first bursts: asks wait for the MCP server).
        for listener in (first, second):
            assert f"burst-{later[0]}" in progress_tokens(listener.notification_lines())
            assert later[0] in bursts(listener.notification_lines())
        assert serve.interrupt() == EXIT_OK
        said = serve.stderr.text()
        assert ALPHA not in said and BETA not in said
        # Each path's end names its audience, a digest of its token.
        assert f"(audience {audience_of(ALPHA)})" in said
        assert f"(audience {audience_of(BETA)})" in said


def _last_progress(lines: list[bytes]) -> int:
    """The index just past the call's last progress line."""
    marks = [i for i, line in enumerate(lines) if b'"a-1"' in line]
    return marks[-1] + 1 if marks else len(lines)


# --- serve --redis: the inlet passes audiences on -------------------------------------------


def test_serve_redis_passes_each_notification_on_with_its_audience() -> None:
    from diverge_notifications.cli.cluster import Replica
    from diverge_notifications.cluster.memory import InMemoryBroker, InMemoryBus
    from diverge_notifications.sansio import Hub, Notification

    bus = InMemoryBus()
    served, other = Hub(), Hub()
    replica = Replica(cast(Any, InMemoryBroker(served, bus)))
    InMemoryBroker(other, bus)
    alpha, beta = audience_of(ALPHA), audience_of(BETA)
    paths = {(hub, a): hub.subscribe(audience=a) for hub in (served, other) for a in (alpha, beta)}
    call = Notification("notifications/progress", {"progressToken": "a-1", "progress": 1})
    burst = Notification("notifications/progress", {"progressToken": "burst-1", "progress": 1})
    # What the relay does under serve --redis: publish into the inlet.
    replica.inlet.publish(call, audience=alpha)
    replica.inlet.publish(burst)
    for hub in (served, other):
        assert paths[(hub, alpha)].take() == [call, burst]
        assert paths[(hub, beta)].take() == [burst]
