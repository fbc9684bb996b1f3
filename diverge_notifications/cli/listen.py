"""``listen URL``: ask a server for notifications and print them, asking again as paths end.

Each notification is one compact JSON line on standard output; with
``--events`` every event is also one JSON line on standard error, and
without it one plain line on standard error says why no path could be had
(:func:`trouble_line`, rate-limited). On a terminal, without ``--events``,
the output is the human view instead; with it, the JSON lines written to a
terminal are escaped (:func:`~.output.for_terminal`).

The token comes from ``--token``, ``--token-file`` or ``DIVERGE_TOKEN``
(:func:`~.parser.resolve_token`) and is never printed: what the listener
reports about the URL shows it without credentials.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
from collections.abc import Mapping
from typing import Any, Final

from ..sansio import (
    Event,
    MessageRejected,
    NotificationReceived,
    NotServed,
    StreamBroken,
    StreamEnded,
    StreamErrored,
    StreamOpened,
)
from ..sansio.client.urls import base_url_hint
from ..sansio.events import TERMINAL_EVENTS, AttemptsExhausted
from .output import (
    closed_stdout,
    event_record,
    for_terminal,
    is_a_terminal,
    notification_line,
    say,
    silence_stdout,
    stdout_is_a_terminal,
    write_json_line,
)
from .parser import listener_connection
from .running import (
    EXIT_BROKEN,
    EXIT_ERRORED,
    EXIT_NO_CONNECTION,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    PROG,
    UsageError,
    aclose,
    interrupted,
    is_refusal,
    on_signals,
)
from .terminal import visible

__all__ = ["once_status", "run_listen", "trouble_line"]


def _cancel(task: asyncio.Task[Any]) -> None:
    task.cancel()


_EXIT_BY_TERMINAL: Final[Mapping[type, int]] = {
    StreamEnded: EXIT_OK,
    NotServed: EXIT_OK,
    StreamErrored: EXIT_ERRORED,
    StreamBroken: EXIT_BROKEN,
}


def once_status(event: Event) -> int | None:
    """The exit status of ``listen --once`` after ``event``, if it ends the path; else ``None``.

    A refusal (a ``NotServed`` whose status is not 2xx: 401, 404, 503...)
    is 5, so that a script can tell it from a clean end with nothing
    (``NotServed`` with status 200), which is 0.
    """
    if isinstance(event, NotServed) and is_refusal(event.status):
        return EXIT_REFUSED
    return _EXIT_BY_TERMINAL.get(type(event))


def trouble_line(event: Event) -> str | None:
    """What ``listen`` without ``--events`` says on standard error about ``event``, if anything.

    Something is said when no path could be had or a path ended badly: a
    failed connection, a refusal (a ``NotServed`` whose status is not
    2xx), a server error, an abrupt end. Everything else says nothing.

    The reasons and messages come from the wire (a reason phrase, an error
    message, a certificate's names): they are shown through
    :func:`~.terminal.visible`, so that the line is one line and nothing in
    it can control a terminal.
    """
    from ..sansio.events import ConnectionFailed

    if isinstance(event, ConnectionFailed):
        return f"listen: could not connect: {visible(event.reason)}"
    if isinstance(event, NotServed):
        if not is_refusal(event.status):
            return None
        return f"listen: not served ({event.status}): {visible(event.reason)}"
    if isinstance(event, StreamErrored):
        error = event.error
        message = visible(error.message)
        return f"listen: the server ended the path with error {error.code}: {message}"
    if isinstance(event, StreamBroken):
        return f"listen: the path broke: {visible(event.reason)}"
    if isinstance(event, MessageRejected):
        size = len(event.payload)
        return f"listen: a message was rejected ({size} bytes): {visible(str(event.error))}"
    return None


class _TroubleReporter:
    """Says each :func:`trouble_line` once, until another one or a ``StreamOpened``.

    Of the messages a path rejects, the first is said (which, and why), and
    at the path's end how many were rejected in all, if more: two lines at
    most, however many.
    """

    def __init__(self) -> None:
        self._last: str | None = None
        self._rejected = 0

    def event(self, event: Event) -> None:
        if isinstance(event, StreamOpened):
            self._last = None
            return
        if isinstance(event, MessageRejected):
            self._rejected += 1
            if self._rejected > 1:
                return
        elif type(event) in TERMINAL_EVENTS:
            if self._rejected > 1:
                say(f"listen: {self._rejected} messages rejected on this path in all")
            self._rejected = 0
        line = trouble_line(event)
        if line is not None and line != self._last:
            self._last = line
            say(line)


async def _listen(
    args: argparse.Namespace, *, human: bool, token: str | None, tls: ssl.SSLContext | None
) -> int:
    from ..adapters.asyncio import listen
    from ..sansio import LocalProtocolError, ProxyPolicy
    from ..sansio.events import ConnectionFailed

    view = None
    stdout = None
    if human:
        from .terminal import HumanView

        view = HumanView.for_stream(sys.stdout)
    elif sys.stdout is not None:
        stdout = sys.stdout.buffer
    # With --events on a terminal, the notification lines are escaped too.
    escape = view is None and is_a_terminal(sys.stdout)
    trouble = None if args.events or view is not None else _TroubleReporter()
    once = args.once
    status = EXIT_OK
    task = asyncio.current_task()
    assert task is not None
    stream = listen(
        args.url,
        token=token,
        events=True,
        policy=ProxyPolicy(require_exchange=False),
        keepalive_interval=args.keepalive,
        ssl=tls,
        allow_plaintext_token=args.allow_plaintext_token,
    )
    started = False
    try:
        with on_signals(lambda: _cancel(task)):
            try:
                async for item in stream:
                    started = True
                    if not isinstance(item, Event):  # pragma: no cover - events=True yields events
                        continue
                    if args.events:
                        write_json_line(event_record(item))
                    elif trouble is not None:
                        trouble.event(item)
                    if view is not None:
                        view.event(item)
                    elif isinstance(item, NotificationReceived):
                        if stdout is None:
                            raise closed_stdout()
                        line = notification_line(item.notification)
                        if escape:
                            text = line[:-1].decode("utf-8", "replace")  # the newline stays
                            line = for_terminal(text, sys.stdout).encode("utf-8") + b"\n"
                        stdout.write(line)
                        stdout.flush()
                    if once and (ended := once_status(item)) is not None:
                        status = ended
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
                raise UsageError(str(error)) from None
    except asyncio.CancelledError:
        # Interrupted: a listener stopped on purpose has nothing to report.
        status = EXIT_OK
    finally:
        await aclose(stream)
        if view is not None:
            view.close()
    return status


def run_listen(args: argparse.Namespace) -> int:
    """Run ``listen`` with its parsed arguments; return the exit status."""
    try:
        token, tls = listener_connection(args)
    except ValueError as error:
        say(f"{PROG} listen: error: {error}")
        return EXIT_USAGE
    hint = base_url_hint(args.url)
    if hint is not None:
        say(f"listen: hint: {hint}")
    human = not args.events and stdout_is_a_terminal()
    try:
        return asyncio.run(_listen(args, human=human, token=token, tls=tls))
    except UsageError as error:
        say(f"{PROG} listen: error: {error}")
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader of standard output went away (``listen URL | head``),
        # or there was none (``listen URL >&-``).
        silence_stdout()
        return EXIT_OK
    except KeyboardInterrupt:  # a signal before the handlers were installed
        return interrupted()
