"""``python -m diverge_notifications``: see :mod:`diverge_notifications.cli`."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
