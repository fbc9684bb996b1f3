"""``python -m diverge_notifications demo`` runs by itself, exits 0 and shows every part.

Piped, the demo prints JSON lines: the script's steps and every event the
listener saw. Under a pseudo-terminal it prints the human view.
"""

from __future__ import annotations

import os
import pty
import subprocess
from typing import Any

from interop import HANG_GUARD, cli_command, cli_env, json_lines

from diverge_notifications.demo import scripted_notifications

# The demo stops itself after DEMO_TIMEOUT; this only guards against a hang.
DEMO_GUARD = 3 * HANG_GUARD


def _run_piped() -> list[dict[str, Any]]:
    result = subprocess.run(
        cli_command("demo"),
        capture_output=True,
        env=cli_env(),
        timeout=DEMO_GUARD,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr.decode()
    return json_lines(result.stdout.splitlines())


def test_demo_piped_shows_every_part() -> None:
    records = _run_piped()
    listener = [record for record in records if record.get("side") == "listener"]
    steps = [record["step"] for record in records if record.get("side") == "server"]
    assert steps == ["serving", "publish", "cut", "lost", "reask", "shutdown", "done"]

    events = [record["event"] for record in listener]
    kinds = [record["kind"] for record in listener if record["event"] == "NotificationReceived"]
    assert "progress" in kinds
    assert {"tool_list_changed", "resource_list_changed", "prompt_list_changed"} <= set(kinds)
    assert "resource_updated" in kinds and "custom" in kinds
    levels = {
        record["notification"]["params"]["level"]
        for record in listener
        if record.get("kind") == "logging_message"
    }
    assert {"debug", "info", "notice", "warning", "error"} <= levels

    # The cut: the first path breaks; the re-ask: a second path opens and carries more.
    first_broken = events.index("StreamBroken")
    assert events.count("StreamOpened") == 2
    second_open = len(events) - 1 - events[::-1].index("StreamOpened")
    assert first_broken < events.index("RetryScheduled") < second_open
    after = [
        record for record in listener[second_open:] if record["event"] == "NotificationReceived"
    ]
    script = scripted_notifications()
    assert [record["notification"] for record in after] == [n.members for n in script["second"]]
    assert events[-1] == "StreamEnded"

    # Nothing published while the path was down arrives later.
    lost = [record for record in records if record.get("step") == "lost"]
    assert lost[0]["paths"] == 0
    received = [record["notification"] for record in listener if "notification" in record]
    assert all(n.members not in received for n in script["lost"])
    assert len(received) == len(script["first"]) + len(script["second"])


def test_demo_on_a_terminal_shows_the_human_view() -> None:
    master, slave = pty.openpty()
    try:
        process = subprocess.Popen(
            cli_command("demo"),
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=cli_env(TERM="xterm-256color"),
        )
    finally:
        os.close(slave)
    output = bytearray()
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the demo closed the terminal
                break
            if not data:
                break
            output += data
        assert process.wait(DEMO_GUARD) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)
    text = output.decode("utf-8")
    assert "100% 5/5" in text and "█" in text
    assert "\x1b[33mwarning" in text and "\x1b[31merror" in text
    assert "tools list changed" in text
    assert "the path broke" in text
    assert "asking again in" in text
    assert text.count("listening on channel") == 2
    assert "the path ended cleanly" in text
