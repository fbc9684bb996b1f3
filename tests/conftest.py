"""What every test gets: an environment without the caller's secrets.

``serve`` and ``listen`` read their token from ``DIVERGE_TOKEN`` when no
option gives one; a token set in the shell that runs the tests would
otherwise change what the command-line tests see. Tests that want the
variable set it themselves (``monkeypatch.setenv``, or ``cli_env``).
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DIVERGE_TOKEN", raising=False)
