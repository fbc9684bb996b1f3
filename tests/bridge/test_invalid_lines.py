"""An MCP server's lines that are no JSON-RPC message: counted, and logged once a burst, by name.

The server is a real child process (``python -c``) on the stdio transport;
it writes a burst of junk lines, one valid message, then a longer burst,
and a line longer than the limit.
"""

from __future__ import annotations

import logging
import sys
from typing import Final

import anyio
import pytest

pytest.importorskip("mcp")

from diverge_notifications.bridge._link import Link
from diverge_notifications.bridge._stdio import stdio_transport

LOGGER: Final = "diverge_notifications.bridge"
VALID: Final = '{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}'
SCRIPT: Final = (
    "import sys\n"
    "w = sys.stdout.write\n"
    "w('not json\\n')\n"
    f"w({VALID!r} + '\\n')\n"
    "w('{\"broken\": \\n' * 5)\n"
    f"w('x' * 300 + '\\n')\n"
    f"w({VALID!r} + '\\n')\n"
    "sys.stdout.flush()\n"
)


async def run_server() -> tuple[Link, int]:
    link = Link()
    relayed: list[bytes] = []
    async with stdio_transport(
        [sys.executable, "-c", SCRIPT],
        relay=relayed.append,
        link=link,
        max_line_size=200,
        name="junk-writer",
    ) as (read, _write):
        messages = 0
        with anyio.fail_after(30):
            async for item in read:
                if not isinstance(item, Exception):
                    messages += 1
                    if messages == 2:
                        break
    return link, messages


def test_invalid_lines_are_counted_and_logged_once_a_burst_naming_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    link, messages = anyio.run(run_server)
    assert messages == 2
    assert (link.invalid, link.dropped) == (6, 1)
    said = [record.getMessage() for record in caplog.records if record.name == LOGGER]
    first = "MCP server 'junk-writer' wrote a line that is no JSON-RPC message"
    # Each burst's first line, with why; the longer burst's count; the line too long.
    assert [line for line in said if line.startswith(first)] == [
        line for line in said if line.startswith(first + " (8 bytes), dropped: ")
    ] + [line for line in said if line.startswith(first + " (11 bytes), dropped: ")]
    assert len(said) == 4, said
    assert "dropped a message longer than 200 bytes from MCP server 'junk-writer'" in said
    assert (
        "MCP server 'junk-writer' wrote 5 lines in a row that are no JSON-RPC message, dropped"
        in said
    )
