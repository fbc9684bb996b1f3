"""What the command-line and interoperability tests share.

They start ``python -m diverge_notifications serve`` and ``listen`` as
subprocesses on free loopback ports, read their output line by line on
threads (so a test can wait for a line without blocking forever), find
external binaries such as ``curl`` and ``nginx``, and run a raw-socket
server that answers one ask with scripted bytes.

Every wait has a generous deadline that only guards against a hang; no
test asserts how long anything took.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
#: Deadline of every wait: long enough for a slow CI machine, short enough to fail a hang.
HANG_GUARD: Final = 20.0

#: The head of a served notification path, as the server writes it.
PATH_HEAD: Final = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: application/vnd.diverge.messages\r\n"
    b"Content-Location: /mcp/notifications/c1\r\n"
    b"Cache-Control: no-store\r\n"
    b"Transfer-Encoding: chunked\r\n"
    b"Connection: close\r\n"
    b"\r\n"
)
#: The last chunk of a chunked body: the clean end of a path.
LAST_CHUNK: Final = b"0\r\n\r\n"


def chunk(data: bytes) -> bytes:
    """``data`` as one HTTP/1.1 chunk."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def cli_command(*args: str) -> list[str]:
    """The command line running ``python -m diverge_notifications ARGS`` in this interpreter."""
    return [sys.executable, "-m", "diverge_notifications", *args]


def cli_env(**overrides: str | None) -> dict[str, str]:
    """The environment for a command-line subprocess; ``None`` removes a variable.

    ``NO_COLOR`` and ``DIVERGE_TOKEN`` of the caller's environment are left
    out: a test that wants them sets them.
    """
    env = dict(os.environ)
    env.pop("NO_COLOR", None)
    env.pop("DIVERGE_TOKEN", None)
    env["PYTHONIOENCODING"] = "utf-8"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def run_cli(
    command: Sequence[str], *, timeout: float = HANG_GUARD, check: bool = False
) -> subprocess.CompletedProcess[bytes]:
    """Run ``command`` to its end in the command-line environment, without standard input."""
    return subprocess.run(
        list(command),
        capture_output=True,
        env=cli_env(),
        timeout=timeout,
        check=check,
        stdin=subprocess.DEVNULL,
    )


def run_without_mcp(argv: Sequence[str]) -> subprocess.CompletedProcess[bytes]:
    """``main(argv)`` of the command line, in an interpreter where ``mcp`` cannot be imported."""
    hide_mcp = (
        "import sys; sys.modules['mcp'] = None\n"
        "from diverge_notifications.cli import main\n"
        f"raise SystemExit(main({list(argv)!r}))\n"
    )
    return run_cli([sys.executable, "-c", hide_mcp])


def kill_if_running(process: subprocess.Popen[bytes]) -> None:
    """Kill ``process`` and reap it, unless it has already exited."""
    if process.poll() is None:
        process.kill()
        process.wait()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def find_binary(name: str) -> str | None:
    """The path of an executable, also looking in the ``sbin`` folders (nginx lives there)."""
    found = shutil.which(name)
    if found is not None:
        return found
    for folder in ("/usr/sbin", "/usr/local/sbin", "/sbin"):
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def wait_for_port(host: str, port: int, timeout: float = HANG_GUARD) -> None:
    """Wait until something accepts TCP connections on ``host``:``port``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError(f"nothing listens on {host}:{port}") from None
            time.sleep(0.02)


#: The prefix of a text line of ``serve``'s log: the time (ISO 8601, with its
#: offset) and the level.
LOG_PREFIX = re.compile(rb"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}(?:Z|[+-]\d\d:\d\d) [A-Z]+ ")


#: ``serve``'s line for a path's end (:func:`log_message` of it): channel, how, sent, dropped.
PATH_END_LINE: Final = re.compile(
    rb"^server: path (\S+) ended \(([a-z ]+)\): (\d+) sent, (\d+) dropped \(peer \S+\)$"
)


def python_blocks(markdown: str) -> list[str]:
    """The ```python blocks of a Markdown document, in order."""
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.MULTILINE | re.DOTALL)


def run_python_block(code: str) -> subprocess.CompletedProcess[str]:
    """Run a documentation example in a fresh interpreter, from the checkout's root."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Wait until ``condition()`` holds; :data:`HANG_GUARD` bounds it, catching hangs only."""
    deadline = time.monotonic() + HANG_GUARD
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def log_message(line: bytes) -> bytes:
    """A line of ``serve``'s text log without its time and level (other lines unchanged)."""
    return LOG_PREFIX.sub(b"", line, count=1)


class LineReader:
    """Reads a binary pipe line by line on a thread; lines keep no newline."""

    def __init__(self, pipe: IO[bytes], name: str = "pipe") -> None:
        self._pipe = pipe
        self._lines: list[bytes] = []
        self._closed = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"read-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for line in iter(self._pipe.readline, b""):
                with self._changed:
                    self._lines.append(line.rstrip(b"\r\n"))
                    self._changed.notify_all()
        except (OSError, ValueError):
            pass
        finally:
            with self._changed:
                self._closed = True
                self._changed.notify_all()

    @property
    def lines(self) -> list[bytes]:
        """Every line read so far."""
        with self._changed:
            return list(self._lines)

    @property
    def messages(self) -> list[bytes]:
        """Every line read so far without its log prefix (``serve``'s time and level)."""
        return [log_message(line) for line in self.lines]

    def text(self) -> str:
        """Every line read so far, as text, for failure messages."""
        return "\n".join(line.decode("utf-8", "replace") for line in self.lines)

    def wait(self, predicate: Callable[[list[bytes]], bool], timeout: float = HANG_GUARD) -> None:
        """Wait until ``predicate(lines)`` holds; fail the test after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self._lines):
                left = deadline - time.monotonic()
                if left <= 0 or (self._closed and not predicate(self._lines)):
                    seen = "\n".join(line.decode("utf-8", "replace") for line in self._lines)
                    state = "closed" if self._closed else "still open"
                    raise AssertionError(f"the awaited output did not come ({state}):\n{seen}")
                self._changed.wait(min(left, 0.5) if not self._closed else 0.05)

    def wait_for_text(self, text: str, timeout: float = HANG_GUARD) -> bytes:
        """Wait for a line containing ``text``; return it."""
        needle = text.encode("utf-8")
        self.wait(lambda lines: any(needle in line for line in lines), timeout)
        return next(line for line in self.lines if needle in line)

    def wait_for_count(self, count: int, timeout: float = HANG_GUARD) -> list[bytes]:
        """Wait until at least ``count`` lines were read; return them."""
        self.wait(lambda lines: len(lines) >= count, timeout)
        return self.lines

    def join(self, timeout: float = HANG_GUARD) -> None:
        """Wait until the pipe is at its end."""
        self._thread.join(timeout)


def json_lines(lines: Sequence[bytes]) -> list[dict[str, Any]]:
    """Parse each line as one JSON object (the test fails on any other line)."""
    records = []
    for line in lines:
        record = json.loads(line)
        assert isinstance(record, dict), line
        records.append(record)
    return records


class CliProcess:
    """A running ``python -m diverge_notifications`` subprocess with its output read on threads."""

    def __init__(
        self,
        *args: str,
        stdin: bool = False,
        env: dict[str, str] | None = None,
        stdout: int | None = subprocess.PIPE,
    ) -> None:
        self.args = args
        self.proc = subprocess.Popen(
            cli_command(*args),
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env=cli_env() if env is None else env,
            cwd=ROOT,
        )
        assert self.proc.stderr is not None
        self.stderr = LineReader(self.proc.stderr, "stderr")
        self.stdout = LineReader(self.proc.stdout, "stdout") if self.proc.stdout else None

    def send_line(self, line: bytes | str) -> None:
        """Write one line to the process's standard input."""
        data = line.encode("utf-8") if isinstance(line, str) else line
        assert self.proc.stdin is not None
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        """End the process's standard input."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    def wait(self, timeout: float = HANG_GUARD) -> int:
        """Wait for the exit status; the pipes are read to their end."""
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"{' '.join(self.args)} did not exit; stderr:\n{self.stderr.text()}"
            ) from None
        self.stderr.join()
        if self.stdout is not None:
            self.stdout.join()
        return status

    def interrupt(self, signum: int = signal.SIGINT, timeout: float = HANG_GUARD) -> int:
        """Send ``signum`` and wait for the exit status."""
        self.proc.send_signal(signum)
        return self.wait(timeout)

    def events(self) -> list[dict[str, Any]]:
        """The standard-error lines that are JSON event records (``listen --events``)."""
        return [
            record
            for record in json_lines([line for line in self.stderr.lines if line.startswith(b"{")])
            if "event" in record
        ]

    def wait_for_event(self, name: str, timeout: float = HANG_GUARD) -> dict[str, Any]:
        """Wait for the event record named ``name`` on standard error; return it."""
        self.stderr.wait_for_text(f'"event":"{name}"', timeout)
        return next(record for record in self.events() if record["event"] == name)

    def __enter__(self) -> CliProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        kill_if_running(self.proc)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


class ServeProcess(CliProcess):
    """``serve --port 0 ARGS`` started and ready: :attr:`url` and :attr:`port` are known."""

    def __init__(self, *args: str, stdin: bool = True, env: dict[str, str] | None = None) -> None:
        super().__init__("serve", "--port", "0", *args, stdin=stdin, env=env)
        line = self.stderr.wait_for_text("serving on ")
        # Its log line may be text or a JSON object (--log-format json).
        found = re.search(r"serving on (https?://[^\s\"]+)", line.decode("utf-8"))
        assert found is not None, line
        self.url = found[1]
        self.port = int(self.url.rsplit(":", 1)[1])

    def __enter__(self) -> ServeProcess:
        return self


class ListenProcess(CliProcess):
    """``listen URL ARGS`` (add ``--events`` to wait on its events)."""

    def __init__(self, url: str, *args: str, env: dict[str, str] | None = None) -> None:
        super().__init__("listen", url, *args, env=env)

    def __enter__(self) -> ListenProcess:
        return self

    def notification_lines(self) -> list[bytes]:
        """What was printed on standard output: one notification per line."""
        assert self.stdout is not None
        return self.stdout.lines


class ScriptedServer:
    """A raw-socket server answering each connection with scripted bytes, then closing.

    ``answer`` is written as soon as the ask's head and body are read; the
    requests received are kept in :attr:`requests` (head and body, raw).
    """

    def __init__(self, answer: bytes, *, connections: int = 1) -> None:
        self._answer = answer
        self._connections = connections
        self.requests: list[bytes] = []
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(4)
        self._socket.settimeout(HANG_GUARD)
        self.port: int = self._socket.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._run, name="scripted-server", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for _ in range(self._connections):
                connection, _address = self._socket.accept()
                with connection:
                    connection.settimeout(HANG_GUARD)
                    self.requests.append(self._read_request(connection))
                    connection.sendall(self._answer)
                    connection.shutdown(socket.SHUT_WR)
                    # Let the client read everything before the socket goes away.
                    while connection.recv(65536):
                        pass
        except OSError:
            pass

    @staticmethod
    def _read_request(connection: socket.socket) -> bytes:
        data = b""
        while b"\r\n\r\n" not in data:
            received = connection.recv(65536)
            if not received:
                return data
            data += received
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            received = connection.recv(65536)
            if not received:
                break
            body += received
        return head + b"\r\n\r\n" + body

    def close(self) -> None:
        """Stop accepting."""
        self._socket.close()
        self._thread.join(HANG_GUARD)

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


#: nginx's configuration around the ``server`` blocks of a test: one worker, in the foreground,
#: every file in the test's folder.
NGINX_CONFIG: Final = """\
{user}worker_processes 1;
error_log {root}/error.log info;
pid {root}/nginx.pid;
events {{
    worker_connections 64;
}}
http {{
    access_log off;
    client_body_temp_path {root}/client_body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
{servers}
}}
"""

#: A ``location`` that passes paths through as they come: no buffering, chunked, HTTP/1.1.
NGINX_STREAMING: Final = """\
            proxy_buffering off;
            proxy_http_version 1.1;
            chunked_transfer_encoding on;
            proxy_read_timeout 60s;"""


@contextlib.contextmanager
def running_nginx(folder: Path, servers: str, port: int) -> Iterator[None]:
    """Run nginx with ``servers`` (its ``server`` blocks) until the block ends.

    The configuration is written into ``folder`` and nginx runs in the
    foreground from there (``-p DIR -c nginx.conf -g 'daemon off;'``); the
    block starts once something accepts connections on ``port``. nginx is
    stopped gracefully (SIGQUIT) on the way out. The caller skips when
    :func:`find_binary` finds no nginx.
    """
    nginx = find_binary("nginx")
    assert nginx is not None, "skip the test when nginx is not installed"
    # As root, nginx's workers would switch to "nobody"; keep them root so
    # they can use the temporary folder.
    user = "user root;\n" if os.geteuid() == 0 else ""
    config = folder / "nginx.conf"
    config.write_text(
        NGINX_CONFIG.format(user=user, root=folder, servers=servers), encoding="utf-8"
    )
    process = subprocess.Popen(
        [nginx, "-p", str(folder), "-c", str(config), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        try:
            wait_for_port("127.0.0.1", port)
        except AssertionError:
            process.kill()
            _, err = process.communicate(timeout=HANG_GUARD)
            log = folder / "error.log"
            detail = log.read_text("utf-8", "replace") if log.exists() else ""
            raise AssertionError(f"nginx did not start: {err.decode()}\n{detail}") from None
        yield
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGQUIT)  # graceful stop
            try:
                process.wait(HANG_GUARD)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        assert process.stderr is not None
        process.stderr.close()


def listen_through(url: str, serve: ServeProcess, published: Sequence[bytes], *args: str) -> None:
    """``listen URL --once --events ARGS`` gets what ``serve`` publishes intact, then the clean end.

    ``serve`` (started with ``--stdin``) publishes each line once the path
    is open, then is interrupted, which ends the path cleanly: the listener
    must print every notification, in order and byte for byte, and the
    events of one whole path.
    """
    with ListenProcess(url, "--once", "--events", *args) as listen:
        listen.wait_for_event("StreamOpened")
        for line in published:
            serve.send_line(line)
        assert listen.stdout is not None
        listen.stdout.wait_for_count(len(published))
        assert serve.interrupt() == 0
        assert listen.wait() == 0, listen.stderr.text()  # the clean end came through
        received = listen.notification_lines()
        names = [record["event"] for record in listen.events()]
    assert len(received) == len(published)
    for index, (got, sent) in enumerate(zip(received, published, strict=True)):
        assert got == sent, f"notification {index} changed on the way"
    assert names == ["StreamOpened", *["NotificationReceived"] * len(published), "StreamEnded"]
