"""``python -m diverge_notifications`` and the ``diverge-notifications`` script.

Both run :func:`main`, which imports the command line
(:mod:`diverge_notifications.cli`) inside the same guard as it runs it, so
that Ctrl-C while it is still being imported (a noticeable part of a
second) ends it as quietly, and with the same status, as Ctrl-C later on:
:data:`~diverge_notifications.cli.EXIT_INTERRUPTED`, 0.
"""

from __future__ import annotations


def main() -> int:
    """Run the command line on ``sys.argv[1:]``; return the exit status."""
    try:
        from .cli import main as run_command_line
    except KeyboardInterrupt:
        return 0  # EXIT_INTERRUPTED, which cannot be imported with the rest interrupted
    return run_command_line()


if __name__ == "__main__":
    raise SystemExit(main())
