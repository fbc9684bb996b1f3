"""The command line: ``python -m diverge_notifications {demo,serve,listen}``.

``listen URL`` prints each notification as one compact JSON line on standard
output: the bytes the server sent with the whitespace between JSON tokens
removed; with ``--events`` it also prints every event as one JSON line on
standard error, and without it one plain line on standard error says why no
path could be had (rate-limited). ``serve`` serves a hub until
interrupted and can publish JSON lines read from standard input or relay an
MCP server (the ``mcp`` extra). ``demo`` runs both in one process on a
scripted MCP server's notifications. See ``docs/cli.md``.

Exit statuses of ``listen --once``: 0 after ``StreamEnded`` or ``NotServed``,
3 after ``StreamErrored``, 4 after ``StreamBroken``, 1 when no connection
could be made; 2 for a usage error, for every command.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import enum
import errno
import os
import re
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Final

import attrs

from .sansio import (
    AttemptsExhausted,
    ErrorData,
    Event,
    FrameError,
    Hub,
    LogLevel,
    MessageRejected,
    Notification,
    NotificationReceived,
    NotServed,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
)
from .sansio._json import dumps

__all__ = [
    "EXIT_BROKEN",
    "EXIT_ERRORED",
    "EXIT_NO_CONNECTION",
    "EXIT_OK",
    "EXIT_USAGE",
    "MCP_MISSING_MESSAGE",
    "LineSplitter",
    "build_parser",
    "check_listen_url",
    "check_token",
    "compact_json",
    "event_record",
    "main",
    "notification_line",
    "trouble_line",
]

#: ``listen --once`` ended with ``StreamEnded`` or ``NotServed``; ``serve`` shut down cleanly.
EXIT_OK: Final = 0
#: No connection could be made (or the listener gave up), or ``serve`` could not run.
EXIT_NO_CONNECTION: Final = 1
#: A usage error: bad option, malformed URL, missing optional dependency.
EXIT_USAGE: Final = 2
#: ``listen --once`` ended with ``StreamErrored``.
EXIT_ERRORED: Final = 3
#: ``listen --once`` ended with ``StreamBroken``.
EXIT_BROKEN: Final = 4

#: What ``serve --mcp-stdio/--mcp-url`` says when the ``mcp`` package is missing.
MCP_MISSING_MESSAGE: Final = (
    "serve --mcp-stdio/--mcp-url need the 'mcp' extra: pip install 'diverge-notifications[mcp]'"
)

#: The longest standard-input line ``serve --stdin`` accepts: the default frame limit.
MAX_STDIN_LINE: Final = 16 * 1024 * 1024

_PROG: Final = "python -m diverge_notifications"


# --- output records ----------------------------------------------------------


def _error_record(error: ErrorData) -> dict[str, Any]:
    record: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.data is not None:
        record["data"] = error.data
    return record


def _plain(value: Any) -> Any:
    """``value`` as something JSON can carry, for events this module does not know."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, ErrorData):
        return _error_record(value)
    if isinstance(value, Notification):
        return value.members
    if isinstance(value, FrameError):
        return value.detail
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, frozenset, set)):
        return [_plain(item) for item in value]
    return str(value)


def event_record(event: Event) -> dict[str, Any]:
    """The JSON object ``listen --events`` prints for ``event``.

    ``"event"`` is the class name, then the event's fields by name, with
    these shapes: ``NotificationReceived`` shows ``"kind"`` (the kind's
    member name in lower case); ``StreamErrored`` shows ``"error"`` as
    ``{"code", "message", "data"?}``; ``MessageRejected`` shows
    ``"reason"`` (the decoding error's detail). Any other event shows its
    fields as JSON values.
    """
    record: dict[str, Any] = {"event": type(event).__name__}
    if isinstance(event, NotificationReceived):
        record["kind"] = event.notification.kind.value
    elif isinstance(event, StreamErrored):
        record["error"] = _error_record(event.error)
    elif isinstance(event, MessageRejected):
        record["reason"] = event.error.detail
    elif attrs.has(type(event)):
        for field in attrs.fields(type(event)):
            record[field.alias or field.name] = _plain(getattr(event, field.name))
    return record


#: A JSON string (kept as it is), or a run of JSON whitespace (dropped).
_STRING_OR_SPACE: Final = re.compile(rb'("[^"\\]*(?:\\.[^"\\]*)*")|[ \t\r\n]+', re.DOTALL)
_SPACE: Final = re.compile(rb"[ \t\r\n]")


def _keep_string(match: re.Match[bytes]) -> bytes:
    return match[1] or b""


def compact_json(raw: bytes) -> bytes:
    """``raw``, one JSON text, with the insignificant whitespace removed.

    Only the whitespace between tokens goes: strings, numbers, member
    order and escapes stay byte for byte as they were. Bytes without
    whitespace outside their strings come back unchanged.
    """
    if _SPACE.search(raw) is None:
        return raw
    return _STRING_OR_SPACE.sub(_keep_string, raw)


def notification_line(notification: Notification) -> bytes:
    """One line of ``listen``'s standard output: the notification, then a newline.

    The bytes the server sent, compacted by :func:`compact_json`: every
    member in the order received, each string and number as it was sent.
    """
    return compact_json(notification.to_bytes()) + b"\n"


def _say(text: str) -> None:
    """Print one line on standard error, if there is one (``2>&-`` closes it)."""
    stream = sys.stderr
    if stream is not None:
        stream.write(text + "\n")
        stream.flush()


def _write_json_line(record: Mapping[str, Any]) -> None:
    _say(dumps(record).decode("utf-8"))


# --- arguments ---------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """An argument parser whose usage errors name the command and exit 2."""

    def error(self, message: str) -> Any:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def _keepalive_option(parser: argparse.ArgumentParser, text: str) -> None:
    from .adapters._common import DEFAULT_KEEPALIVE_INTERVAL

    parser.add_argument(
        "--keepalive",
        type=_positive_seconds,
        default=DEFAULT_KEEPALIVE_INTERVAL,
        metavar="SECONDS",
        help=text,
    )


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535: {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``python -m diverge_notifications``."""
    parser = _Parser(
        prog=_PROG,
        description="Serve, listen to and demonstrate Diverge MCP notification paths.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    demo = commands.add_parser(
        "demo",
        help="serve and listen in one process on a scripted MCP server's notifications",
        description=(
            "Serve and listen in one process on a scripted MCP server's notifications: "
            "progress, log messages, list changes, a resource update, a custom notification, "
            "an abrupt cut of the path and the re-ask. Finishes by itself."
        ),
    )
    demo.add_argument(
        "--mcp",
        action="store_true",
        help=(
            "take the notifications from the bundled example MCP server, started over "
            "stdio and relayed by the bridge, instead of the scripted one (the 'mcp' extra)"
        ),
    )

    serve = commands.add_parser(
        "serve",
        help="serve a hub of notifications until interrupted",
        description=(
            "Serve notification paths on POST /requests until interrupted (SIGINT or "
            "SIGTERM ends every open path cleanly and exits 0). The listening URL is "
            "printed on standard error: 'serving on http://HOST:PORT'."
        ),
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8080, help="port (8080; 0 picks a free one)")
    serve.add_argument("--token", help="bearer token every ask must carry")
    serve.add_argument(
        "--stdin",
        action="store_true",
        help="publish each JSON notification line read from standard input",
    )
    _keepalive_option(serve, "write a keep-alive frame after this much silence (15)")
    relay = serve.add_mutually_exclusive_group()
    relay.add_argument(
        "--mcp-stdio",
        metavar="CMD",
        help="relay the notifications of the MCP server started by this command line",
    )
    relay.add_argument(
        "--mcp-url",
        metavar="URL",
        help="relay the notifications of the MCP server at this Streamable HTTP URL",
    )
    serve.add_argument(
        "--log-level",
        choices=[level.wire for level in LogLevel],
        metavar="LEVEL",
        help="log level to ask the relayed MCP server for (debug ... emergency; default debug)",
    )

    listen = commands.add_parser(
        "listen",
        help="ask a server for notifications and print them",
        description=(
            "Ask the server at URL (its base, e.g. http://127.0.0.1:8080) for notifications "
            "and print each as one JSON line on standard output; ask again whenever a path "
            "ends, until interrupted."
        ),
    )
    listen.add_argument("url", metavar="URL", help="the server's base URL, http://HOST:PORT[/BASE]")
    listen.add_argument("--token", help="bearer token to send with each ask")
    listen.add_argument(
        "--events",
        action="store_true",
        help="print every event as one JSON line on standard error",
    )
    listen.add_argument(
        "--once",
        action="store_true",
        help="stop after the first path ends; the exit status says how it ended",
    )
    _keepalive_option(
        listen,
        "the server's keep-alive interval, as given to its --keepalive (15); "
        "three of them without data count as a broken path",
    )
    return parser


def check_listen_url(url: str) -> str:
    """Check a server base URL for ``listen``: return it, or raise ``ValueError`` saying why.

    The URL must parse, and an ask must be buildable with its host and path
    (no characters that cannot go into an HTTP request).
    """
    from .adapters._common import parse_url
    from .sansio import LocalProtocolError, ProxyConnection

    try:
        endpoint = parse_url(url)
        ProxyConnection(endpoint.authority, target=endpoint.target).data_to_send()
    except (LocalProtocolError, ValueError) as error:
        raise ValueError(f"malformed URL: {error}") from None
    return url


def check_token(token: str, *, listening: bool) -> str:
    """Check a ``--token``: return it, or raise ``ValueError`` saying why it cannot be used.

    The rule is the library's own: a server refuses to be made with a token
    that is not one or more visible ASCII characters, and a listener's ask
    must be buildable with it in an ``Authorization`` field (``listening``).
    """
    from .sansio import LocalProtocolError, ProxyConnection, ServerConnection

    try:
        ServerConnection(token=token)
        if listening:
            ProxyConnection("h:1", token=token).data_to_send()
    except (LocalProtocolError, ValueError) as error:
        # The token itself is not repeated: it may be a secret, slightly mangled.
        raise ValueError(f"unusable token: {error}") from None
    return token


# --- signals -----------------------------------------------------------------


@contextlib.contextmanager
def _on_signals(callback: Callable[[], None]) -> Iterator[None]:
    """Call ``callback`` on SIGINT and SIGTERM while the block runs."""
    loop = asyncio.get_running_loop()
    installed: list[signal.Signals] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, callback)
        except (NotImplementedError, RuntimeError, ValueError):  # pragma: no cover - not Unix
            continue
        installed.append(signum)
    try:
        yield
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


# --- listen ------------------------------------------------------------------


def _cancel(task: asyncio.Task[Any]) -> None:
    task.cancel()


async def _aclose(stream: AsyncIterator[Any]) -> None:
    """Close an async generator (``listen``), whatever state it is in."""
    aclose = getattr(stream, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()


_EXIT_BY_TERMINAL: Final[Mapping[type, int]] = {
    StreamEnded: EXIT_OK,
    NotServed: EXIT_OK,
    StreamErrored: EXIT_ERRORED,
    StreamBroken: EXIT_BROKEN,
}


def trouble_line(event: Event) -> str | None:
    """What ``listen`` without ``--events`` says on standard error about ``event``, if anything.

    Something is said when no path could be had or a path ended badly: a
    failed connection, a refusal (a ``NotServed`` whose status is not
    2xx), a server error, an abrupt end. Everything else says nothing.
    """
    from .sansio.events import ConnectionFailed

    if isinstance(event, ConnectionFailed):
        return f"listen: could not connect: {event.reason}"
    if isinstance(event, NotServed):
        if event.status is None or 200 <= event.status < 300:
            return None
        return f"listen: not served ({event.status}): {event.reason}"
    if isinstance(event, StreamErrored):
        error = event.error
        return f"listen: the server ended the path with error {error.code}: {error.message}"
    if isinstance(event, StreamBroken):
        return f"listen: the path broke: {event.reason}"
    return None


class _TroubleReporter:
    """Says each :func:`trouble_line` once, until another one or a ``StreamOpened``."""

    def __init__(self) -> None:
        self._last: str | None = None

    def event(self, event: Event) -> None:
        if isinstance(event, StreamOpened):
            self._last = None
            return
        line = trouble_line(event)
        if line is not None and line != self._last:
            self._last = line
            _say(line)


class _UsageError(Exception):
    """A value of the command line turned out unusable once the command started."""


def _closed_stdout() -> BrokenPipeError:
    return BrokenPipeError(errno.EPIPE, "standard output is closed")


async def _listen(args: argparse.Namespace, *, human: bool) -> int:
    from .adapters.asyncio import listen
    from .sansio import LocalProtocolError, ProxyPolicy
    from .sansio.events import ConnectionFailed

    view = None
    stdout = None
    if human:
        from ._terminal import HumanView

        view = HumanView.for_stream(sys.stdout)
    elif sys.stdout is not None:
        stdout = sys.stdout.buffer
    trouble = None if args.events or view is not None else _TroubleReporter()
    once = args.once
    status = EXIT_OK
    task = asyncio.current_task()
    assert task is not None
    stream = listen(
        args.url,
        token=args.token,
        events=True,
        policy=ProxyPolicy(require_exchange=False),
        keepalive_interval=args.keepalive,
    )
    started = False
    try:
        with _on_signals(lambda: _cancel(task)):
            try:
                async for item in stream:
                    started = True
                    if not isinstance(item, Event):  # pragma: no cover - events=True yields events
                        continue
                    if args.events:
                        _write_json_line(event_record(item))
                    elif trouble is not None:
                        trouble.event(item)
                    if view is not None:
                        view.event(item)
                    elif isinstance(item, NotificationReceived):
                        if stdout is None:
                            raise _closed_stdout()
                        stdout.write(notification_line(item.notification))
                        stdout.flush()
                    if once and type(item) in _EXIT_BY_TERMINAL:
                        status = _EXIT_BY_TERMINAL[type(item)]
                        break
                    if (once and isinstance(item, ConnectionFailed)) or isinstance(
                        item, AttemptsExhausted
                    ):
                        status = EXIT_NO_CONNECTION
                        break
            except (LocalProtocolError, ValueError) as error:
                if started:
                    raise
                # The listener refused an argument up front (such as the token).
                raise _UsageError(str(error)) from None
    except asyncio.CancelledError:
        # Interrupted: a listener stopped on purpose has nothing to report.
        status = EXIT_OK
    finally:
        await _aclose(stream)
        if view is not None:
            view.close()
    return status


def _silence_stdout() -> None:
    """Point standard output at the null device: its reader went away, nothing more goes out."""
    stdout = sys.stdout
    if stdout is None:
        return
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stdout.fileno())
        os.close(devnull)


def _stdout_is_a_terminal() -> bool:
    stdout = sys.stdout
    if stdout is None:
        return False
    try:
        return stdout.isatty()
    except (OSError, ValueError):
        return False


def _run_listen(args: argparse.Namespace) -> int:
    try:
        check_listen_url(args.url)
        if args.token is not None:
            check_token(args.token, listening=True)
    except ValueError as error:
        _say(f"{_PROG} listen: error: {error}")
        return EXIT_USAGE
    human = not args.events and _stdout_is_a_terminal()
    try:
        return asyncio.run(_listen(args, human=human))
    except _UsageError as error:
        _say(f"{_PROG} listen: error: {error}")
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader of standard output went away (``listen URL | head``),
        # or there was none (``listen URL >&-``).
        _silence_stdout()
        return EXIT_OK
    except KeyboardInterrupt:  # pragma: no cover - a signal before the handlers were installed
        return EXIT_OK


# --- serve -------------------------------------------------------------------


class LineSplitter:
    """Splits a byte stream into numbered lines, each at most ``max_line`` bytes.

    A longer line is not kept: it is reported once, as ``(number, None)``,
    and its bytes are dropped up to the next newline, so memory stays bounded
    whatever arrives. Scanning resumes where it stopped, so feeding one byte
    at a time stays linear.
    """

    def __init__(self, max_line: int = MAX_STDIN_LINE) -> None:
        self._max_line = max_line
        self._buffer = bytearray()
        self._scanned = 0
        self._number = 0
        self._skipping = False

    def feed(self, data: bytes) -> list[tuple[int, bytes | None]]:
        """The lines ``data`` completes: ``(number, line)``, ``line`` without its newline."""
        lines: list[tuple[int, bytes | None]] = []
        self._buffer += data
        start = 0
        while True:
            end = self._buffer.find(b"\n", max(start, self._scanned))
            if end < 0:
                break
            self._number += 1
            if self._skipping:
                self._skipping = False  # reported when it outgrew the limit
            elif end - start > self._max_line:
                lines.append((self._number, None))
            else:
                lines.append((self._number, bytes(self._buffer[start:end])))
            start = end + 1
            self._scanned = start
        del self._buffer[:start]
        self._scanned = len(self._buffer)
        if len(self._buffer) > self._max_line:
            if not self._skipping:
                self._skipping = True
                lines.append((self._number + 1, None))
            self._buffer.clear()
            self._scanned = 0
        return lines

    def close(self) -> list[tuple[int, bytes | None]]:
        """At end of input: the last line, if it had no newline."""
        if self._skipping or not self._buffer:
            return []
        self._number += 1
        line = bytes(self._buffer)
        self._buffer.clear()
        self._scanned = 0
        return [(self._number, line)]


def _publish_line(hub: Hub, number: int, line: bytes | None) -> None:
    """Publish one standard-input line, or report on standard error why it was skipped."""
    if line is None:
        _say(f"line {number}: longer than {MAX_STDIN_LINE} bytes, skipped")
        return
    text = line.strip()
    if not text:
        return  # blank lines separate nothing and say nothing
    try:
        notification = Notification.from_bytes(text)
    except FrameError as error:
        _say(f"line {number}: {error.detail}, skipped")
        return
    hub.publish(notification)


class _ByteBudget:
    """Bounds the bytes handed from the reading thread to the event loop but not yet published.

    The reader waits while ``limit`` bytes are in flight (one line is always
    let through, however long), so a fast producer on standard input cannot
    pile up work on the loop.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._used = 0
        self._changed = threading.Condition()

    def acquire(self, size: int) -> None:
        with self._changed:
            while self._used and self._used + size > self._limit:
                self._changed.wait()
            self._used += size

    def release(self, size: int) -> None:
        with self._changed:
            self._used -= size
            self._changed.notify_all()


#: Bytes of standard input read ahead of publication at most (beyond one line).
_STDIN_READ_AHEAD: Final = 4 * 1024 * 1024


def _read_stdin(
    loop: asyncio.AbstractEventLoop, deliver: Callable[[int, bytes | None], None]
) -> None:
    """Read standard input on a thread and hand each line to ``deliver`` on ``loop``.

    The raw descriptor 0 is read, not ``sys.stdin``: a daemon thread blocked
    inside the buffered reader can abort interpreter shutdown. A read error
    counts as the end of input.
    """
    splitter = LineSplitter()
    budget = _ByteBudget(_STDIN_READ_AHEAD)

    def publish(number: int, line: bytes | None, size: int) -> None:
        try:
            deliver(number, line)
        finally:
            budget.release(size)

    while True:
        try:
            data = os.read(0, 65536)
        except InterruptedError:  # pragma: no cover - retried by Python itself
            continue
        except OSError:
            data = b""
        lines = splitter.feed(data) if data else splitter.close()
        for number, line in lines:
            size = len(line) if line is not None else 0
            budget.acquire(size)
            try:
                loop.call_soon_threadsafe(publish, number, line, size)
            except RuntimeError:  # the loop is closed: serve is shutting down
                return
        if not data:
            return


def _report_bridge_event(event: Event) -> None:
    """Say on standard error what the MCP bridge did (connected, subscribed, lost...)."""
    _say(f"bridge: {dumps(event_record(event)).decode('utf-8')}")


def _mcp_available() -> bool:
    try:
        import mcp  # noqa: F401
    except ImportError:
        return False
    return True


async def _serve(args: argparse.Namespace) -> int:
    from .adapters.asyncio import serve

    hub = Hub()
    try:
        server = await serve(
            hub, args.host, args.port, token=args.token, keepalive_interval=args.keepalive
        )
    except OSError as error:
        _say(f"{_PROG} serve: cannot listen on {args.host}:{args.port}: {error}")
        return EXIT_NO_CONNECTION
    except ValueError as error:
        # The server refused an argument up front (such as the token).
        raise _UsageError(str(error)) from None
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    status = EXIT_OK
    bridge: asyncio.Task[None] | None = None
    try:
        _say(f"serving on {server.url}")
        if args.stdin:
            threading.Thread(
                target=_read_stdin,
                args=(loop, lambda number, line: _publish_line(hub, number, line)),
                name="serve-stdin",
                daemon=True,
            ).start()
        if args.mcp_stdio is not None or args.mcp_url is not None:
            from .bridge import run_bridge

            options: dict[str, Any] = {}
            if args.log_level is not None:
                options["log_level"] = args.log_level
            bridge = asyncio.create_task(
                run_bridge(
                    hub,
                    stdio_command=args.mcp_stdio,
                    url=args.mcp_url,
                    on_event=_report_bridge_event,
                    **options,
                )
            )
            bridge.add_done_callback(lambda _task: stop.set())
        with _on_signals(stop.set):
            await stop.wait()
        if bridge is not None and bridge.done() and not bridge.cancelled():
            failure = bridge.exception()
            # The bridge runs until cancelled: ending on its own means the MCP
            # server is gone and nothing more will be relayed.
            reason = "stopped" if failure is None else f"failed: {failure!r}"
            _say(f"{_PROG} serve: the MCP bridge {reason}")
            status = EXIT_NO_CONNECTION
    finally:
        if bridge is not None and not bridge.done():
            bridge.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await bridge
        await server.close()
    return status


def _run_serve(args: argparse.Namespace) -> int:
    if (args.mcp_stdio is not None or args.mcp_url is not None) and not _mcp_available():
        _say(MCP_MISSING_MESSAGE)
        return EXIT_USAGE
    if args.token is not None:
        try:
            check_token(args.token, listening=False)
        except ValueError as error:
            _say(f"{_PROG} serve: error: {error}")
            return EXIT_USAGE
    try:
        return asyncio.run(_serve(args))
    except _UsageError as error:
        _say(f"{_PROG} serve: error: {error}")
        return EXIT_USAGE
    except KeyboardInterrupt:  # pragma: no cover - a signal before the handlers were installed
        return EXIT_OK


# --- demo --------------------------------------------------------------------


def _run_demo(args: argparse.Namespace) -> int:
    from .demo import MCP_MISSING_MESSAGE as DEMO_MCP_MISSING_MESSAGE
    from .demo import run_demo

    if args.mcp and not _mcp_available():
        _say(DEMO_MCP_MISSING_MESSAGE)
        return EXIT_USAGE
    if sys.stdout is None:
        # Nothing to show the demo on (``demo >&-``): as if the reader went away at once.
        return EXIT_OK
    return run_demo(human=_stdout_is_a_terminal(), mcp=args.mcp)


# --- entry point -------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    args = build_parser().parse_args(argv)
    runners: Mapping[str, Callable[[argparse.Namespace], int]] = {
        "demo": _run_demo,
        "serve": _run_serve,
        "listen": _run_listen,
    }
    return runners[args.command](args)
