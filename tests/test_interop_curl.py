"""``serve`` answers an independent HTTP/1.1 client: curl.

curl sends the ask (``POST /requests`` with the one-byte body ``\\x04``) and
writes the raw response body to a file; the body must be exactly the frames
of the notifications published on ``serve``'s standard input, ended cleanly
when ``serve`` shuts down. curl also sees the head and the refusals.
Skipped when curl is not installed (Debian package ``curl``).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from diverge_notifications.sansio import Notification, encode_frame, encode_message
from tests.interop import HANG_GUARD, ServeProcess, find_binary, kill_if_running

CURL = find_binary("curl")
pytestmark = pytest.mark.skipif(CURL is None, reason="curl is not installed (apt-get install curl)")

ASK_CONTENT_TYPE = "Content-Type: application/vnd.diverge.ask"

PUBLISHED = [
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1}}',
    b'{"method":"notifications/message","params":{"level":"error","data":{"n":[1,2]}},"x":true}',
    b'{"jsonrpc":"2.0","method":"vendor/custom","params":{"_meta":{"trace":"abc"},"body":"'
    + b"z" * 5000
    + b'"}}',
]


def _curl(*args: str) -> list[str]:
    assert CURL is not None
    return [CURL, "-sS", "--no-buffer", *args]


def _ask_file(tmp_path: Path) -> Path:
    ask = tmp_path / "ask"
    ask.write_bytes(b"\x04")
    return ask


def _wait_for_file_text(path: Path, text: bytes, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while not (path.exists() and text in path.read_bytes()):
        assert process.poll() is None, "curl exited before the path opened"
        assert time.monotonic() < deadline, f"{path.name} never held {text!r}"
        time.sleep(0.02)


@contextlib.contextmanager
def _curl_ask(
    serve: ServeProcess, tmp_path: Path, *extra: str
) -> Iterator[tuple[subprocess.Popen[bytes], Path, Path]]:
    """Run curl asking ``serve`` for a stream: the head goes to one file, the body to another.

    Yields once the head has arrived; curl is killed on the way out if still running.
    """
    ask = _ask_file(tmp_path)
    head = tmp_path / "head"
    body = tmp_path / "body"
    curl = subprocess.Popen(
        _curl(
            *extra,
            "-D",
            str(head),
            "-X",
            "POST",
            "-H",
            ASK_CONTENT_TYPE,
            "--data-binary",
            f"@{ask}",
            "-o",
            str(body),
            f"{serve.url}/requests",
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_for_file_text(head, b"\r\n\r\n", curl)
        yield curl, head, body
    finally:
        kill_if_running(curl)


def _stop(serve: ServeProcess, curl: subprocess.Popen[bytes]) -> bytes:
    """Shut ``serve`` down cleanly and return what curl wrote to its standard error."""
    assert serve.interrupt() == 0
    _, curl_err = curl.communicate(timeout=HANG_GUARD)
    return curl_err


def test_curl_receives_exactly_the_frames(tmp_path: Path) -> None:
    # A long keep-alive interval, so that the body holds only the messages.
    with (
        ServeProcess("--stdin", "--keepalive", "120") as serve,
        _curl_ask(serve, tmp_path) as (curl, head, body),
    ):
        for line in PUBLISHED:
            serve.send_line(line)
        expected = b"".join(
            encode_frame(encode_message(Notification.from_bytes(line))) for line in PUBLISHED
        )
        _wait_for_file_text(body, expected[-16:], curl)
        curl_err = _stop(serve, curl)
    assert curl.returncode == 0, curl_err  # the chunked body ended properly
    assert body.read_bytes() == expected
    assert expected.startswith(b"\x00\x00\x00" + bytes([len(PUBLISHED[0]) + 1]) + b"\x00{")
    assert head.read_bytes().startswith(b"HTTP/1.1 200 OK\r\n")


def test_curl_sees_the_head(tmp_path: Path) -> None:
    # curl holds back -i output until body bytes arrive; -D tells when the head came.
    with (
        ServeProcess("--stdin", "--keepalive", "120") as serve,
        _curl_ask(serve, tmp_path, "-i") as (curl, _, out),
    ):
        serve.send_line(PUBLISHED[1])
        _wait_for_file_text(out, PUBLISHED[1][-8:], curl)
        curl_err = _stop(serve, curl)
    assert curl.returncode == 0, curl_err
    head, _, rest = out.read_bytes().partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    assert lines[0] == "HTTP/1.1 200 OK"
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.lower()] = value.strip()
    assert fields["content-type"] == "application/vnd.diverge.messages"
    assert fields["content-location"].startswith("/mcp/notifications/")
    channel = fields["content-location"].rsplit("/", 1)[1]
    assert 1 <= len(channel) <= 64
    assert fields["cache-control"] == "no-store"
    assert fields["transfer-encoding"] == "chunked"
    assert fields["connection"] == "close"
    assert rest == encode_frame(b"\x00" + PUBLISHED[1])


@pytest.mark.parametrize(
    ("args", "path", "status"),
    [
        (["-X", "GET"], "/requests", 405),
        (["-X", "POST", "-H", ASK_CONTENT_TYPE, "--data-binary", "@ASK"], "/elsewhere", 404),
        (["-X", "POST", "-H", ASK_CONTENT_TYPE, "--data-binary", "@ASK"], "/requests", 401),
        (
            [
                "-X",
                "POST",
                "-H",
                ASK_CONTENT_TYPE,
                "-H",
                "Authorization: Bearer wrong",
                "--data-binary",
                "@ASK",
            ],
            "/requests",
            401,
        ),
    ],
)
def test_curl_sees_refusals(tmp_path: Path, args: list[str], path: str, status: int) -> None:
    ask = _ask_file(tmp_path)
    args = [f"@{ask}" if arg == "@ASK" else arg for arg in args]
    with ServeProcess("--token", "right", stdin=False) as serve:
        result = subprocess.run(
            _curl("-o", "/dev/null", "-w", "%{http_code}", *args, f"{serve.url}{path}"),
            capture_output=True,
            timeout=HANG_GUARD,
            check=False,
        )
        assert serve.interrupt() == 0
    assert result.returncode == 0, result.stderr
    assert result.stdout == str(status).encode()
