"""What the commands share while they run: exit statuses, late usage errors, signals.

Exit statuses of ``listen --once``: 0 after ``StreamEnded`` or a clean
``NotServed`` (status 200), 5 after a refusal (a ``NotServed`` whose status
is not 2xx), 3 after ``StreamErrored``, 4 after ``StreamBroken``, 1 when no
connection could be made; 2 for a usage error, for every command; 0 for every command
interrupted by Ctrl-C (:data:`EXIT_INTERRUPTED`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Final

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
#: The ask was refused: an answer whose status is not 2xx (401, 404, 503...).
EXIT_REFUSED: Final = 5
#: Any command interrupted (Ctrl-C, SIGINT), at any moment, start-up included: a stop
#: asked for, not a failure, as ``serve`` and ``listen`` end on SIGINT and SIGTERM.
EXIT_INTERRUPTED: Final = EXIT_OK


def is_refusal(status: int | None) -> bool:
    """Whether a ``NotServed`` of ``status`` is a refusal (exit status 5): known, and not 2xx."""
    return status is not None and not 200 <= status < 300


#: The console script ``pip`` installs (``[project.scripts]``), and how it names itself.
SCRIPT: Final = "diverge-notifications"
#: How ``python -m diverge_notifications`` names itself.
MODULE_PROG: Final = "python -m diverge_notifications"


def prog_name(argv0: str) -> str:
    """The name the command line started as ``argv0`` gives itself: a script or ``python -m``.

    The console script runs with its own path as ``sys.argv[0]``
    (``.../bin/diverge-notifications``, ``diverge-notifications.exe``);
    ``python -m`` with the path of ``__main__.py``, and a program that calls
    :func:`~diverge_notifications.cli.main` itself with its own name.
    """
    stem = argv0.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".exe")
    return SCRIPT if stem == SCRIPT else MODULE_PROG


#: How the command line names itself in usage and error messages: as it was started.
PROG: Final = prog_name(sys.argv[0] if sys.argv else "")


class UsageError(Exception):
    """A value of the command line turned out unusable once the command started."""


def mcp_available() -> bool:
    """Whether the ``mcp`` extra is installed; a Ctrl-C meanwhile waits for the import to end.

    The import takes a noticeable part of a second, and a
    ``KeyboardInterrupt`` raised in the middle of it breaks the Rust core of
    pydantic, which then panics with errors of its own instead of stopping
    quietly (see :func:`interrupts_held`).
    """
    with interrupts_held():
        try:
            import mcp  # noqa: F401
        except ImportError:
            return False
    return True


@contextlib.contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold a Ctrl-C back while the block runs, and raise its ``KeyboardInterrupt`` after it.

    Only in the main thread and over Python's own handler (before an event
    loop has one of its own); elsewhere the block runs as it is.
    """
    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    held: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if held:
        raise KeyboardInterrupt


def interrupted() -> int:
    """:data:`EXIT_INTERRUPTED`, for a command stopping on Ctrl-C; from now on nothing more is said.

    The ``KeyboardInterrupt`` of a Ctrl-C can land anywhere, in the middle
    of making an event loop among others: what it cut short would complain
    when it is collected at exit ("Exception ignored in ...", a coroutine
    never awaited). The process is stopping because it was asked to, so
    those complaints, noise that says nothing to whoever pressed Ctrl-C,
    are silenced.
    """
    sys.unraisablehook = _say_nothing
    warnings.simplefilter("ignore")
    return EXIT_INTERRUPTED


def _say_nothing(unraisable: Any) -> None:
    """An unraisable exception after Ctrl-C: left unsaid (see :func:`interrupted`)."""


@contextlib.contextmanager
def on_signals(callback: Callable[[], None]) -> Iterator[None]:
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


async def aclose(stream: AsyncIterator[Any]) -> None:
    """Close an async generator (``listen``), whatever state it is in."""
    close = getattr(stream, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()
