"""The stdio transport of the bridge: the MCP server as a child process.

The SDK's own ``stdio_client`` parses each line of the server's output into a
pydantic model before anyone else sees it, and a model is not what the
server sent (members can be dropped, reordered or re-spelled, and a
notification the schema does not know never reaches the session at all).
This transport reads the server's standard output itself, hands every raw
line to the relay first, and only then parses it for the SDK's session,
exactly as ``stdio_client`` does.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from ..sansio.lines import DEFAULT_MAX_LINE_SIZE, PlainLineSplitter
from ._link import Link

__all__ = ["describe_exit", "stdio_transport"]

logger = logging.getLogger("diverge_notifications.bridge")

#: Seconds the server gets to exit on its own after its input is closed.
_EXIT_GRACE = 2.0
#: Seconds between SIGTERM to the server's process group and SIGKILL.
_KILL_GRACE = 2.0
_POLL = 0.01
#: Seconds a server whose output ended is given to exit, so that its status can be told.
_STATUS_WAIT = 2.0
#: Lines of the server's output that were not JSON-RPC kept to tell how it failed, and
#: characters of each.
_STRAY_LINES = 3
_STRAY_CHARS = 160


def _dropped(name: str, max_size: int) -> None:
    logger.warning("dropped a message longer than %d bytes from MCP server %r", max_size, name)


class _InvalidLines:
    """Counts the lines of a server that are no JSON-RPC message, and logs them once a burst.

    The first invalid line of a burst is logged with why; the burst ends at
    the next valid line (or the end of the output), and then how many were
    invalid in all is logged, if more than one: a server that writes junk
    without end costs two log lines per burst, not one per line.
    """

    def __init__(self, name: str, link: Link) -> None:
        self._name = name
        self._link = link
        self._burst = 0

    def invalid(self, line: bytes, error: Exception) -> None:
        self._link.invalid += 1
        self._burst += 1
        if self._burst == 1:
            why = str(error).splitlines()[0] if str(error) else type(error).__name__
            logger.warning(
                "MCP server %r wrote a line that is no JSON-RPC message (%d bytes), dropped: %s",
                self._name,
                len(line),
                why,
            )

    def valid(self) -> None:
        if self._burst > 1:
            logger.warning(
                "MCP server %r wrote %d lines in a row that are no JSON-RPC message, dropped",
                self._name,
                self._burst,
            )
        self._burst = 0


def _stray(line: bytes) -> str:
    """A line the server wrote that was not JSON-RPC, short enough to quote in a reason."""
    text = line.decode("utf-8", "replace")
    if len(text) > _STRAY_CHARS:
        text = text[:_STRAY_CHARS] + "..."
    return repr(text)


def describe_exit(returncode: int | None, stray: Sequence[bytes] = ()) -> str:
    """How a server whose output ended failed: its status or signal, and its stray output.

    ``returncode`` is the process's (negative: the signal that killed it;
    ``None``: it has not exited); ``stray`` the first lines it wrote on its
    standard output that were not JSON-RPC.
    """
    if returncode is None:
        said = "the MCP server closed its output"
    elif returncode < 0:
        try:
            name = f" ({signal.Signals(-returncode).name})"
        except ValueError:
            name = ""
        said = f"the MCP server was killed by signal {-returncode}{name}"
    else:
        said = f"the MCP server exited with status {returncode}"
    if stray:
        lines = " | ".join(_stray(line) for line in stray)
        said += f"; its first lines on standard output that were not JSON-RPC: {lines}"
    return said


def _parse(line: bytes) -> SessionMessage | Exception:
    """What the SDK's ``stdio_client`` makes of a line: a message, or the error as a value."""
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as error:
        return error
    return SessionMessage(message)


@asynccontextmanager
async def stdio_transport(
    argv: Sequence[str],
    *,
    relay: Callable[[bytes], None],
    link: Link,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    max_line_size: int = DEFAULT_MAX_LINE_SIZE,
    name: str = "",
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
    ]
]:
    """Start ``argv`` and speak MCP on its standard input and output.

    ``relay`` gets each line the server writes, as bytes, before the SDK
    parses it. ``link`` is marked lost when the server's output ends (with
    how it exited, or the signal that killed it, and the first lines it
    wrote that were not JSON-RPC: :func:`describe_exit`) or its input
    breaks. The environment is the SDK's safe default plus ``env``;
    the server's standard error goes where this process's goes. On exit
    the server's input is closed, it gets a moment to exit, then its process
    group is terminated. Lines that are no JSON-RPC message are counted in
    ``link.invalid`` and logged once a burst, naming the server (``name``).
    """
    environment = get_default_environment() | dict(env or {})
    process = await anyio.open_process(
        list(argv),
        env=environment,
        cwd=cwd,
        stderr=None,
        start_new_session=sys.platform != "win32",
    )
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    # Set once this side ends the connection, so that its own closing is not
    # taken for the server going away.
    stopping = False
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)

    # The first lines of output that were not JSON-RPC: what a failing server said.
    stray: list[bytes] = []

    async def read_stdout() -> None:
        assert process.stdout is not None
        lines = PlainLineSplitter(max_line_size, on_drop=lambda: _dropped(name, max_line_size))
        invalid = _InvalidLines(name, link)
        try:
            async with read_send:
                async for chunk in process.stdout:
                    completed = lines.feed(chunk)
                    link.dropped = lines.dropped
                    for line in completed:
                        if line.endswith(b"\r"):
                            line = line[:-1]
                        if not line.strip():
                            continue
                        relay(line)
                        parsed = _parse(line)
                        if isinstance(parsed, Exception):
                            invalid.invalid(line, parsed)
                            if len(stray) < _STRAY_LINES:
                                stray.append(line)
                        else:
                            invalid.valid()
                        await read_send.send(parsed)
                # Told before the session hears of the end, so that the reason is this one.
                if not stopping:
                    await _exited(process, _STATUS_WAIT)
                    if not stopping:
                        link.mark_lost(describe_exit(process.returncode, stray))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            invalid.valid()  # the end of the output ends a burst
            if not stopping:
                link.mark_lost(describe_exit(process.returncode, stray))

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_receive:
                async for session_message in write_receive:
                    text = session_message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    await process.stdin.send(text.encode("utf-8") + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            if not stopping:
                link.mark_lost("the MCP server stopped reading its input")
            read_send.close()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_stdout)
        tasks.start_soon(write_stdin)
        try:
            yield read_receive, write_send
        finally:
            stopping = True
            # Bounded and shielded: a cancelled bridge must not leave the
            # server running, nor hang on one that will not die.
            with anyio.CancelScope(shield=True):
                await _stop(process, read_receive, write_send)
            tasks.cancel_scope.cancel()


async def _stop(
    process: anyio.abc.Process,
    read_receive: MemoryObjectReceiveStream[SessionMessage | Exception],
    write_send: MemoryObjectSendStream[SessionMessage],
) -> None:
    read_receive.close()
    write_send.close()
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    if not await _exited(process, _EXIT_GRACE):
        await _terminate(process)
        await _exited(process, _KILL_GRACE)
    with (
        anyio.move_on_after(_KILL_GRACE),
        suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError),
    ):
        await process.aclose()


async def _exited(process: anyio.abc.Process, timeout: float) -> bool:
    # Polling, not process.wait(): that also waits for the pipes to close,
    # which a grandchild holding them open would delay for ever.
    with anyio.move_on_after(timeout):
        while process.returncode is None:
            await anyio.sleep(_POLL)
    return process.returncode is not None


async def _terminate(process: anyio.abc.Process) -> None:
    if sys.platform == "win32":  # pragma: no cover - POSIX CI
        with suppress(OSError):
            process.kill()
        return
    from mcp.os.posix.utilities import terminate_posix_process_tree

    await terminate_posix_process_tree(process, _KILL_GRACE)
