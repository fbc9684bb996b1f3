"""``serve``'s log on standard error: every line timestamped, as text or JSON, -v and -q.

While ``serve`` runs, :func:`serve_log` makes every line it writes on
standard error a log record: the library's loggers (``diverge_notifications.server``:
refusals, stalls, cut-offs, asks that expire, each with the peer's address;
``.cluster``, ``.bridge``), what the command itself says
(:func:`~.output.say`, logger ``diverge_notifications.cli``) and the
warnings of any other library. One handler on the root logger writes them:

* ``text``: ``2026-12-05T00:15:02.123+00:00 INFO server: ask from
  127.0.0.1:50312 refused: 401 (a valid bearer token is required)`` (the
  time in ISO 8601, UTC; the logger without ``diverge_notifications.``,
  none for the command's own lines);
* ``json``: one object a line, ``{"time": ..., "level": ..., "logger": ...,
  "message": ...}`` (and ``exception`` with a traceback).

``-v`` shows the library's debug lines too (a path opened, an exchange
answered), ``-vv`` every library's; ``-q`` shows warnings and errors only,
``-qq`` errors only. ``--log-level`` is not this: it is the level asked of
the relayed MCP servers.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Final

from .running import PROG

__all__ = [
    "COMMAND_LOGGER",
    "LOG_FORMATS",
    "JsonFormatter",
    "TextFormatter",
    "divert",
    "divert_active",
    "serve_log",
    "verbosity_level",
]

#: The logger of what the command itself says.
COMMAND_LOGGER: Final = "diverge_notifications.cli"
#: The values of ``--log-format``.
LOG_FORMATS: Final = ("text", "json")
_PACKAGE: Final = "diverge_notifications"

#: Where :func:`divert` sends a line while a log is set up (``None``: nowhere).
_diverted: Callable[[str], None] | None = None
#: How the command's failure lines begin: its name (``python -m diverge_notifications
#: serve: ...``), or the command when an extra is missing (``serve --redis needs ...``).
_FAILURE_STARTS: Final = (PROG + " ", "serve ")


def divert_active() -> bool:
    """Whether a log is set up (:func:`serve_log`): the library's loggers reach standard error."""
    return _diverted is not None


def divert(text: str) -> bool:
    """Log ``text`` as the command's own line if a log is set up; whether it was.

    A line that says the command failed (it begins with the command's name)
    is an error, every other one information.
    """
    if _diverted is None:
        return False
    _diverted(text)
    return True


def _say(text: str) -> None:
    level = logging.ERROR if text.startswith(_FAILURE_STARTS) else logging.INFO
    logging.getLogger(COMMAND_LOGGER).log(level, "%s", text)


def _time(record: logging.LogRecord) -> str:
    moment = datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds")


def _short_name(name: str) -> str:
    """The logger's name as a text line shows it: without the package, none for the command."""
    if name == COMMAND_LOGGER:
        return ""
    if name.startswith(_PACKAGE + "."):
        return name[len(_PACKAGE) + 1 :]
    return name


class TextFormatter(logging.Formatter):
    """``<time> <LEVEL> <logger>: <message>`` (see the module's documentation)."""

    def format(self, record: logging.LogRecord) -> str:
        name = _short_name(record.name)
        line = f"{_time(record)} {record.levelname} {name + ': ' if name else ''}"
        line += record.getMessage()
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``time``, ``level``, ``logger``, ``message`` (``exception``)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": _time(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


class _StandardError(logging.Handler):
    """Writes each record as one line on standard error, if there is one (``2>&-``)."""

    def emit(self, record: logging.LogRecord) -> None:
        stream = sys.stderr
        if stream is None:
            return
        try:
            stream.write(self.format(record) + "\n")
            stream.flush()
        except (OSError, ValueError):
            pass  # a closed or broken standard error: nowhere left to say it
        except Exception:
            self.handleError(record)


def verbosity_level(verbose: int, quiet: int) -> int:
    """The level of the library's loggers for ``-v`` and ``-q`` counts (``INFO`` for neither)."""
    levels = (logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG)
    return levels[max(0, min(len(levels) - 1, 2 + verbose - quiet))]


@contextlib.contextmanager
def serve_log(log_format: str = "text", verbose: int = 0, quiet: int = 0) -> Iterator[None]:
    """While the block runs, standard error is the log (see the module's documentation)."""
    global _diverted
    handler = _StandardError()
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    package = logging.getLogger(_PACKAGE)
    saved = (root.level, package.level, _diverted)
    root.addHandler(handler)
    # Other libraries say their warnings; -vv lets them say everything.
    root.setLevel(logging.DEBUG if verbose >= 2 else logging.WARNING)
    package.setLevel(verbosity_level(verbose, quiet))
    _diverted = _say
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(saved[0])
        package.setLevel(saved[1])
        _diverted = saved[2]
