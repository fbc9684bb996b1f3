"""``serve --redis`` with the ``redis`` extra as installed: redis-py without hiredis.

``pip install 'diverge-notifications[redis]'`` brings redis-py and nothing
else; the ``dev`` extra adds hiredis, whose parser hid a failure of the
plain one (redis-py 8 configured RESP3 maintenance notifications that its
RESP2 parser refuses). Here ``serve --redis`` runs in a subprocess where
``import hiredis`` fails (a ``sitecustomize`` on ``PYTHONPATH`` puts
``None`` in ``sys.modules``, as Python does for a module known to be
missing), and must serve a listener a notification through a real Redis.

This module needs only the ``redis`` extra and pytest: ``.ci/run`` also runs
it in a venv of its own made with exactly ``pip install '.[redis]' pytest``
(``.venv-redis``), where hiredis is really absent.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.interop import HANG_GUARD, ListenProcess, ServeProcess, cli_env
from tests.redis_server import RedisServer, redis_server

__all__ = ["redis_server"]  # the fixture, imported to be found

#: Makes ``import hiredis`` fail in every interpreter started with it on ``PYTHONPATH``.
HIDE_HIREDIS = "import sys\nsys.modules['hiredis'] = None\n"


def without_hiredis(folder: Path) -> dict[str, str]:
    """The command-line environment, with ``hiredis`` unimportable."""
    (folder / "sitecustomize.py").write_text(HIDE_HIREDIS, encoding="utf-8")
    env = cli_env()
    env["PYTHONPATH"] = os.pathsep.join([str(folder), env["PYTHONPATH"]])
    return env


def test_serve_redis_serves_a_listener_without_hiredis(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    env = without_hiredis(tmp_path)
    probe = subprocess.run(
        [sys.executable, "-c", "import redis.utils; print(redis.utils.HIREDIS_AVAILABLE)"],
        env=env,
        capture_output=True,
        timeout=HANG_GUARD,
        check=True,
    )
    assert probe.stdout.strip() == b"False", "hiredis is still importable"
    notification = b'{"method":"notifications/message","params":{"level":"info","data":"hi"}}'
    with ServeProcess("--stdin", "--redis", redis_server.url, env=env) as serve:
        serve.stderr.wait_for_text("': subscribed")
        with ListenProcess(serve.url, "--events", env=env) as listen:
            listen.wait_for_event("StreamOpened")
            serve.send_line(notification)
            assert listen.stdout is not None
            assert listen.stdout.wait_for_count(1) == [notification]
        assert serve.interrupt() == 0
    assert b"Traceback" not in b"".join(serve.stderr.lines)
