"""TLS in the three adapters, end to end over loopback, with certificates made by trustme.

Every adapter's server (``serve(..., ssl=context)``) is listened to by every
adapter's listener (``listen("https://...", ssl=context)``); then each
listener meets what goes wrong (a CA it does not trust, a self-signed or
expired certificate, a name the certificate is not for, a server that does
not speak TLS) and each server meets clients that do not speak TLS or say
nothing. Every failure ends promptly with its one-line reason. The servers
of asyncio and trio run on an event loop thread of their own (:func:`served`),
the listeners in the test's thread (:func:`collect`).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import trio

from diverge_notifications.adapters import asyncio as asyncio_adapter
from diverge_notifications.adapters import blocking as blocking_adapter
from diverge_notifications.adapters import trio as trio_adapter
from diverge_notifications.sansio import (
    Event,
    Hub,
    Notification,
    NotificationReceived,
    ProxyConnection,
    StreamBroken,
    StreamEnded,
    StreamOpened,
)
from diverge_notifications.sansio.client.policy import Backoff, ProxyPolicy
from diverge_notifications.sansio.drivers.listen import TLS_HINT
from diverge_notifications.sansio.drivers.reports import (
    PathEnd,
    PathEndedReport,
    RefusalReport,
    ServeReport,
)
from diverge_notifications.sansio.events import ConnectionFailed, RetryScheduled
from tests.interop import HANG_GUARD
from tests.tls import TlsFiles, requires_trustme, tls_files, untrusted_ca

pytestmark = requires_trustme

ADAPTERS: Final = ("asyncio", "trio", "blocking")
Item = Notification | Event


def _policy() -> ProxyPolicy:
    return ProxyPolicy(require_exchange=False, backoff=Backoff(base=0.02, cap=0.1))


def _note(index: int) -> Notification:
    return Notification("notifications/progress", {"progressToken": "tls", "progress": index})


# --- a server of any adapter, on a thread of its own ------------------------------------


@contextlib.contextmanager
def served(adapter: str, **options: Any) -> Iterator[tuple[str, Callable[[Notification], object]]]:
    """Serve a hub with ``adapter``; yield its URL and a ``publish`` safe from any thread.

    asyncio and trio run on a thread of their own, publishing what is put
    in a queue from their loop.
    """
    hub = Hub()
    if adapter == "blocking":
        with blocking_adapter.serve(hub, **options) as server:
            yield server.url, server.publish
        return
    started: queue.Queue[str | BaseException] = queue.Queue()
    pending: queue.SimpleQueue[Notification] = queue.SimpleQueue()
    stop = threading.Event()

    def publish_pending() -> None:
        while not pending.empty():
            hub.publish(pending.get())

    async def main_asyncio() -> None:
        async with asyncio_adapter.serve(hub, **options) as server:
            started.put(server.url)
            while not stop.is_set():
                publish_pending()
                await asyncio.sleep(0.005)

    async def main_trio() -> None:
        async with trio_adapter.serve(hub, **options) as server:
            started.put(server.url)
            while not stop.is_set():
                publish_pending()
                await trio.sleep(0.005)

    def run() -> None:
        try:
            if adapter == "asyncio":
                asyncio.run(main_asyncio())
            else:
                trio.run(main_trio)
        except BaseException as error:
            started.put(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        url = started.get(timeout=HANG_GUARD)
        if isinstance(url, BaseException):
            raise url
        yield url, pending.put
    finally:
        stop.set()
        thread.join(HANG_GUARD)


# --- a listener of any adapter, in this thread ---------------------------------------------


def collect(
    adapter: str,
    url: str,
    until: Callable[[list[Item]], bool],
    on_item: Callable[[Item], None] = lambda item: None,
    **options: Any,
) -> list[Item]:
    """Every event ``adapter``'s listener delivers, until ``until(items)`` holds."""
    options.setdefault("policy", _policy())
    items: list[Item] = []

    def take(item: Item) -> bool:
        items.append(item)
        on_item(item)
        return until(items)

    deadline = f"the listener did not get there within {HANG_GUARD} s: {items!r}"
    if adapter == "asyncio":

        async def consume() -> None:
            async with contextlib.aclosing(
                asyncio_adapter.listen(url, events=True, **options)
            ) as stream:
                async for item in stream:
                    if take(item):
                        return

        async def main_asyncio() -> None:
            await asyncio.wait_for(consume(), HANG_GUARD)

        try:
            asyncio.run(main_asyncio())
        except asyncio.TimeoutError:
            raise AssertionError(deadline) from None
    elif adapter == "trio":

        async def main_trio() -> None:
            with trio.fail_after(HANG_GUARD):
                async with contextlib.aclosing(
                    trio_adapter.listen(url, events=True, **options)
                ) as stream:
                    async for item in stream:
                        if take(item):
                            return

        try:
            trio.run(main_trio)
        except trio.TooSlowError:
            raise AssertionError(deadline) from None
    else:
        with blocking_adapter.listen(url, events=True, **options) as stream:
            timer = threading.Timer(HANG_GUARD, stream.close)
            timer.start()
            try:
                for item in stream:
                    if take(item):
                        break
                else:
                    raise AssertionError(deadline)
            finally:
                timer.cancel()
    return items


def _first(items: list[Item], kind: type[Event]) -> Any:
    return next(item for item in items if isinstance(item, kind))


# --- every listener with every server -------------------------------------------------------


@pytest.mark.parametrize("listener", ADAPTERS)
@pytest.mark.parametrize("server", ADAPTERS)
def test_notifications_over_tls(server: str, listener: str, tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    notes = [_note(index) for index in range(5)]
    with served(server, ssl=files.server_context()) as (url, publish):
        assert url.startswith("https://127.0.0.1:")

        def publish_when_open(item: Item) -> None:
            if isinstance(item, StreamOpened):
                for note in notes:
                    publish(note)

        items = collect(
            listener,
            url,
            lambda items: sum(isinstance(item, NotificationReceived) for item in items) == 5,
            on_item=publish_when_open,
            ssl=files.client_context(),
        )
    received = [item.notification for item in items if isinstance(item, NotificationReceived)]
    assert received == notes


@pytest.mark.parametrize("listener", ADAPTERS)
def test_the_path_ends_cleanly_over_tls(listener: str, tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    hub = Hub()
    with blocking_adapter.serve(hub, ssl=files.server_context()) as server:
        closer = threading.Thread(target=server.close)

        def close_when_open(item: Item) -> None:
            if isinstance(item, StreamOpened):
                server.publish(_note(1))
                closer.start()  # the server ends the path: the end must come through TLS

        items = collect(
            listener,
            server.url,
            lambda items: isinstance(items[-1], (StreamEnded, StreamBroken)),
            on_item=close_when_open,
            ssl=files.client_context(),
        )
        closer.join(HANG_GUARD)
    assert [type(item) for item in items] == [StreamOpened, NotificationReceived, StreamEnded]


@pytest.mark.parametrize("server", ADAPTERS)
def test_the_server_agrees_on_http_1_1(server: str, tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    client = files.client_context()
    client.set_alpn_protocols(["h2", "http/1.1"])
    with served(server, ssl=files.server_context()) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        with (
            socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD) as raw,
            client.wrap_socket(raw, server_hostname="127.0.0.1") as secured,
        ):
            assert secured.selected_alpn_protocol() == "http/1.1"


# --- what a listener says when TLS fails ---------------------------------------------------

#: Each case: how the server's certificate is made, the URL's host, and the reason.
CERTIFICATE_CASES: Final[dict[str, tuple[dict[str, Any], str, str]]] = {
    "untrusted CA": (
        {"trusted": False},
        "127.0.0.1",
        "certificate verify failed: unable to get local issuer certificate",
    ),
    "expired": (
        {"expired": True},
        "127.0.0.1",
        "certificate verify failed: certificate has expired",
    ),
    "wrong hostname": (
        {"names": ["127.0.0.1"]},
        "localhost",
        "certificate verify failed: Hostname mismatch, certificate is not valid for 'localhost'",
    ),
}


def _failures(items: list[Item]) -> list[str]:
    return [item.reason for item in items if isinstance(item, ConnectionFailed)]


@pytest.mark.parametrize("case", CERTIFICATE_CASES)
@pytest.mark.parametrize("listener", ADAPTERS)
def test_a_certificate_that_does_not_verify(listener: str, case: str, tmp_path: Path) -> None:
    made, host, reason = CERTIFICATE_CASES[case]
    files = tls_files(tmp_path, **made)
    with blocking_adapter.serve(Hub(), ssl=files.server_context()) as server:
        url = f"https://{host}:{server.port}"
        items = collect(
            listener, url, lambda items: len(_failures(items)) == 2, ssl=files.client_context()
        )
    # Retried like any connection failure, with the same reason each time.
    assert _failures(items) == [reason, reason]
    assert [type(item) for item in items] == [ConnectionFailed, RetryScheduled, ConnectionFailed]


@pytest.mark.parametrize("listener", ADAPTERS)
def test_a_self_signed_certificate_and_the_default_trust(listener: str, tmp_path: Path) -> None:
    other = untrusted_ca()  # its own certificate is signed by itself
    cert, key = tmp_path / "self.pem", tmp_path / "self.key"
    other.cert_pem.write_to_path(str(cert))
    other.private_key_pem.write_to_path(str(key))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(cert), str(key))
    with blocking_adapter.serve(Hub(), ssl=context) as server:
        items = collect(listener, server.url, lambda items: len(_failures(items)) == 1)
    # Without ssl=, an https:// URL is checked against the system's trust.
    assert _failures(items) == ["certificate verify failed: self-signed certificate"]


def test_tls_failures_are_retried_with_the_backoff_of_any_failure(tmp_path: Path) -> None:
    files = tls_files(tmp_path, trusted=False)

    def delays(url: str, **options: Any) -> list[float]:
        items = collect(
            "blocking",
            url,
            lambda items: len(_failures(items)) == 4,
            random=lambda: 0.5,
            **options,
        )
        return [item.delay for item in items if isinstance(item, RetryScheduled)]

    with blocking_adapter.serve(Hub(), ssl=files.server_context()) as server:
        over_tls = delays(server.url, ssl=files.client_context())
    with socket.create_server(("127.0.0.1", 0)) as probe:
        refused = f"http://127.0.0.1:{probe.getsockname()[1]}"
    assert over_tls == delays(refused)
    assert over_tls == sorted(over_tls) and over_tls[0] < over_tls[-1]  # it backs off


@pytest.mark.parametrize("listener", ADAPTERS)
def test_tls_to_a_server_that_does_not_speak_it(listener: str) -> None:
    with blocking_adapter.serve(Hub()) as server:
        url = server.url.replace("http://", "https://")
        items = collect(listener, url, lambda items: len(_failures(items)) == 1)
    assert _failures(items) == ["TLS handshake failed: the peer does not speak TLS (wrong version)"]


@pytest.mark.parametrize("listener", ADAPTERS)
@pytest.mark.parametrize("server", ADAPTERS)
def test_plain_http_to_a_tls_server(server: str, listener: str, tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    with served(server, ssl=files.server_context()) as (url, _):
        plain = url.replace("https://", "http://")
        items = collect(listener, plain, lambda items: isinstance(items[-1], StreamBroken))
    broken = _first(items, StreamBroken)
    assert broken.reason.endswith(TLS_HINT), broken.reason
    assert "\n" not in broken.reason


@pytest.mark.parametrize("listener", ADAPTERS)
def test_a_handshake_that_never_comes_times_out(listener: str) -> None:
    # A server that accepts and says nothing: the handshake waits for its answer.
    with socket.create_server(("127.0.0.1", 0)) as silent:
        url = f"https://127.0.0.1:{silent.getsockname()[1]}"
        items = collect(
            listener, url, lambda items: len(_failures(items)) == 1, connect_timeout=0.2
        )
    assert _failures(items) == ["timed out"]


# --- what a server does with clients that do not speak TLS ---------------------------------


def _closed_by_the_server(port: int, send: bytes) -> bool:
    """Connect, send ``send``, and wait for the server to close (or reset) the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD) as sock:
        sock.sendall(send)
        try:
            while sock.recv(65536):
                pass
        except ConnectionResetError:
            pass
        except TimeoutError:
            return False
    return True


@pytest.mark.parametrize("server", ADAPTERS)
def test_a_tls_server_closes_a_plain_request_and_a_silent_client(
    server: str, tmp_path: Path
) -> None:
    files = tls_files(tmp_path)
    with served(server, ssl=files.server_context(), ask_timeout=0.3) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        assert _closed_by_the_server(port, b"POST /requests HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _closed_by_the_server(port, b"")  # the handshake deadline
        assert _closed_by_the_server(port, b"\x16\x03\x01")  # half a record, then nothing
        # Still serving after all that.
        items = collect(
            "blocking",
            url,
            lambda items: isinstance(items[-1], StreamOpened),
            ssl=files.client_context(),
        )
    assert isinstance(items[-1], StreamOpened)


def _half_an_ask(port: int, context: ssl.SSLContext) -> bool:
    """Make the TLS handshake, send half the record of an ask, and wait to be closed."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with socket.create_connection(("127.0.0.1", port), timeout=HANG_GUARD) as sock:
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                sock.sendall(outgoing.read())
                incoming.write(sock.recv(65536))
        sock.sendall(outgoing.read())
        tls.write(b"POST /requests HTTP/1.1\r\nHost: x\r\n")
        record = outgoing.read()
        sock.sendall(record[: len(record) // 2])  # the rest never comes
        try:
            while data := sock.recv(65536):
                incoming.write(data)
                with contextlib.suppress(ssl.SSLWantReadError):
                    if tls.read() == b"":
                        break  # the server's TLS close (close_notify)
        except (ConnectionResetError, ssl.SSLZeroReturnError):
            pass  # closed, or a TLS close (close_notify): the server ended the connection
        except TimeoutError:
            return False
    return True


@pytest.mark.parametrize("server", ADAPTERS)
def test_half_a_record_after_the_handshake_holds_nothing_up(server: str, tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    with served(server, ssl=files.server_context(), ask_timeout=0.3) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        assert _half_an_ask(port, files.client_context())  # closed at the ask's deadline


# --- what is checked when listen() is called ---------------------------------------------


def _listen(adapter: str, url: str, **options: Any) -> None:
    """Call ``adapter``'s ``listen`` (the checks run in the call) and close what it made."""
    if adapter == "blocking":
        blocking_adapter.listen(url, **options).close()
        return
    module: Any = asyncio_adapter if adapter == "asyncio" else trio_adapter
    module.listen(url, **options).aclose().close()  # never started: nothing to clean up


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_token_over_plain_http_to_another_host_is_refused(adapter: str) -> None:
    for url in ("http://example.test", "http://10.1.2.3:8080", "http://[2001:db8::1]"):
        with pytest.raises(ValueError, match="refusing to send the bearer token in cleartext"):
            _listen(adapter, url, token="s3cret")
    # Allowed: said so, over TLS, to loopback, or without a token. (No connection is made.)
    _listen(adapter, "http://example.test", token="s3cret", allow_plaintext_token=True)
    _listen(adapter, "https://example.test", token="s3cret")
    for loopback in ("http://127.0.0.1:1", "http://localhost:1", "http://[::1]:1"):
        _listen(adapter, loopback, token="s3cret")
    _listen(adapter, "http://example.test")


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_ssl_is_for_https_and_an_ssl_context(adapter: str, tmp_path: Path) -> None:
    files: TlsFiles = tls_files(tmp_path)
    with pytest.raises(ValueError, match="ssl= is for https:// URLs"):
        _listen(adapter, "http://127.0.0.1:1", ssl=files.client_context())
    with pytest.raises(TypeError, match=r"ssl must be an ssl\.SSLContext"):
        _listen(adapter, "https://127.0.0.1:1", ssl=True)


def test_serve_takes_only_an_ssl_context() -> None:
    with pytest.raises(TypeError, match=r"ssl must be an ssl\.SSLContext"):
        blocking_adapter.serve(Hub(), ssl="cert.pem")  # type: ignore[arg-type]


def test_a_url_with_credentials_is_refused_without_showing_them() -> None:
    for url in ("https://user:s3cret@h:1", "http://s3cret@h", "https://h/x?token=s3cret"):
        with pytest.raises(ValueError) as raised:
            _listen("blocking", url)
        assert "s3cret" not in str(raised.value)
        assert "***" in str(raised.value)


# --- serving under pressure, inside TLS ---------------------------------------------------


def _ask_over_tls(port: int, context: ssl.SSLContext, *, receive_buffer: int = 0) -> ssl.SSLSocket:
    """A TLS connection to the server at ``port`` that has sent its ask."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if receive_buffer:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    raw.settimeout(HANG_GUARD)
    raw.connect(("127.0.0.1", port))
    secured = context.wrap_socket(raw, server_hostname="127.0.0.1")
    secured.sendall(ProxyConnection(f"127.0.0.1:{port}").data_to_send())
    return secured


def _read_head(sock: ssl.SSLSocket) -> bytes:
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        assert chunk, f"closed before the end of the head: {head!r}"
        head += chunk
    return head


def _read_to_the_end(sock: ssl.SSLSocket) -> bytes:
    """Everything the server says until it closes (its TLS close, or a TCP end)."""
    data = b""
    with contextlib.suppress(ssl.SSLZeroReturnError, ssl.SSLEOFError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


@pytest.mark.parametrize("server", ADAPTERS)
def test_beyond_max_connections_the_503_comes_inside_tls(server: str, tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    reports: list[ServeReport] = []
    options = {"max_connections": 1, "linger": 0.3, "on_report": reports.append}
    with served(server, ssl=files.server_context(), **options) as (url, _):
        port = int(url.rsplit(":", 1)[1])
        with _ask_over_tls(port, files.client_context()) as served_path:
            assert _read_head(served_path).startswith(b"HTTP/1.1 200 ")
            with _ask_over_tls(port, files.client_context()) as extra:
                extra.sendall(b"x" * 100_000)  # read and thrown away while the server lingers
                answer = _read_to_the_end(extra)
    assert answer.startswith(b"HTTP/1.1 503 ")
    assert b"\r\nRetry-After: 1\r\n" in answer
    refusals = [report for report in reports if isinstance(report, RefusalReport)]
    assert [refusal.status for refusal in refusals] == [503]


@pytest.mark.parametrize("server", ADAPTERS)
def test_a_stalled_listener_inside_tls_is_cut_off(server: str, tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    stalled = threading.Event()

    def on_report(report: ServeReport) -> None:
        if isinstance(report, PathEndedReport) and report.how is PathEnd.STALLED:
            stalled.set()

    options = {"stall_timeout": 0.5, "send_buffer": 4096, "on_report": on_report}
    large = Notification("notifications/message", {"level": "info", "data": "x" * 60_000})
    with served(server, ssl=files.server_context(), **options) as (url, publish):
        port = int(url.rsplit(":", 1)[1])
        with _ask_over_tls(port, files.client_context(), receive_buffer=4096) as sock:
            assert _read_head(sock).startswith(b"HTTP/1.1 200 ")
            published = 0
            # It reads nothing more: what is published fills the buffers, then waits.
            while not stalled.wait(0.01):
                assert published < 20_000, "never cut off"
                publish(large)
                published += 1
    assert stalled.is_set()
