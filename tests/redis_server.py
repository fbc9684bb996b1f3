"""A real ``redis-server`` for the cluster tests: started on a free port, stopped by pid.

``RedisServer`` runs one ``redis-server`` process with persistence off
(``--save "" --appendonly no``) on a loopback port, waits until it answers
``PING``, and can be killed (``SIGKILL``, by its pid) and started again on
the same port, or paused (``SIGSTOP``) and resumed. It also listens on a
Unix socket (:attr:`RedisServer.socket_url`). ``redis_server`` is the pytest
fixture over it; tests that use it skip with a clear reason when
``redis-server`` or redis-py is missing.

Import it from test modules as ``from redis_server import ...`` (pytest puts
``tests/`` on ``sys.path``). Every wait has a generous deadline that only
guards against a hang.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.interop import HANG_GUARD, find_binary, free_port

__all__ = ["RedisServer", "redis_server", "wait_for"]


def wait_for(condition: Callable[[], bool], what: str, timeout: float = HANG_GUARD) -> None:
    """Return once ``condition()`` is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class RedisServer:
    """One ``redis-server`` on 127.0.0.1, persistence off."""

    def __init__(self, binary: str, directory: Path) -> None:
        self.binary = binary
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>``."""
        return f"redis://127.0.0.1:{self.port}"

    @property
    def socket_path(self) -> Path:
        """The server's Unix socket."""
        return self.directory / f"redis-{self.port}.sock"

    @property
    def socket_url(self) -> str:
        """``unix://<socket path>``."""
        return f"unix://{self.socket_path}"

    @property
    def pid(self) -> int | None:
        """The running server's pid, or ``None``."""
        return self.process.pid if self.process is not None else None

    def start(self) -> None:
        """Start the server on :attr:`port` and wait until it answers."""
        assert self.process is None, "already running"
        log = self.directory / f"redis-{self.port}.log"
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--unixsocket",
                str(self.socket_path),
                "--unixsocketperm",
                "700",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.directory),
                "--logfile",
                str(log),
                "--daemonize",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(self._answers, f"redis-server on port {self.port} to answer")

    def _answers(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"redis-server exited with status {self.process.returncode}")
        try:
            return bool(self.client().ping())
        except OSError:
            return False
        except Exception as error:  # redis.ConnectionError and friends
            if type(error).__module__.startswith("redis"):
                return False
            raise

    def client(self) -> Any:
        """A fresh redis-py client of this server (for CONFIG SET, PUBLISH, CLIENT LIST)."""
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=HANG_GUARD)

    def kill(self) -> None:
        """``SIGKILL`` the server by its pid and wait for it to be gone."""
        process = self.process
        if process is None:
            return
        self.process = None
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        process.wait(HANG_GUARD)

    def pause(self) -> None:
        """``SIGSTOP`` the server: it hangs, its connections stay open."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        """``SIGCONT`` a paused server."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGCONT)

    def restart(self) -> None:
        """Kill the server (if running) and start it again on the same port."""
        self.kill()
        self.start()


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A running ``redis-server``, killed at the end of the test."""
    pytest.importorskip("redis", reason="redis-py is not installed (the 'redis' extra)")
    binary = find_binary("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    with tempfile.TemporaryDirectory(prefix="diverge-redis-") as directory:
        server = RedisServer(binary, Path(directory))
        server.start()
        try:
            yield server
        finally:
            server.kill()
