"""What every test gets: an environment without the caller's secrets.

``serve`` and ``listen`` read their token from ``DIVERGE_TOKEN`` when no
option gives one; a token set in the shell that runs the tests would
otherwise change what the command-line tests see. Tests that want the
variable set it themselves (``monkeypatch.setenv``, or ``cli_env``).

The variable is removed once for the session, without ``monkeypatch``: a
function-scoped fixture here would make every test's ``monkeypatch`` come
first and be undone last, after the fixtures of the test modules that
check what it undid.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _no_token_from_the_environment() -> Iterator[None]:
    saved = os.environ.pop("DIVERGE_TOKEN", None)
    yield
    if saved is not None:
        os.environ["DIVERGE_TOKEN"] = saved
