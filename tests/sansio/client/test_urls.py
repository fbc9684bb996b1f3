"""Base URLs without I/O: the scheme and its port, credentials kept out of messages, loopback.

Also the listener driver's two uses of them: the refusal of a bearer token
in cleartext to a host that is not loopback, and the hint that a plain
``http://`` connection ending before any answer may have reached a TLS
server.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from diverge_notifications.sansio import StreamBroken, errors
from diverge_notifications.sansio.client.policy import ProxyPolicy
from diverge_notifications.sansio.client.urls import (
    PlaintextTokenRefused,
    check_token_transport,
    format_url,
    is_loopback,
    parse_url,
    shown_url,
)
from diverge_notifications.sansio.drivers.actions import Connect, Deliver, Send
from diverge_notifications.sansio.drivers.listen import TLS_HINT, ListenDriver
from diverge_notifications.sansio.drivers.settings import ClientSettings


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:s3cret@example.org/x?key=k#f", "https://***@example.org/x?***"),
        ("http://s3cret@h:1", "http://***@h:1"),
        ("http://a@b@h:1/p", "http://***@h:1/p"),
        ("http://h:1/p?token=s3cret", "http://h:1/p?***"),
        ("http://h:1/p#s3cret", "http://h:1/p#***"),
        ("http://h:1/p/a@b", "http://h:1/p/a@b"),  # an @ in the path is no credential
        ("s3cret@h:1", "***@h:1"),  # no scheme: still masked
        ("http://[::1]:8080/base", "http://[::1]:8080/base"),
        ("", ""),
    ],
)
def test_shown_url_masks_credentials(url: str, shown: str) -> None:
    assert shown_url(url) == shown


@given(st.text().filter(lambda text: not set(text) & set("?#")), st.text(), st.text())
def test_shown_url_masks_userinfo_and_query_whatever_they_hold(
    path: str, secret: str, query: str
) -> None:
    userinfo = secret.replace("/", "").replace("?", "").replace("#", "")
    assert shown_url(f"https://{userinfo}@h/{path}") == f"https://***@h/{path}"
    assert shown_url(f"http://h/{path}?{query}") == f"http://h/{path}?***"
    assert shown_url(f"http://h/{path}#{query}") == f"http://h/{path}#***"


@pytest.mark.parametrize(
    "url",
    [
        "https://user:s3cret@h:1",
        "http://s3cret@h",
        "https://h/x?token=s3cret",
        "https://h/x#s3cret",
        "ftp://u:s3cret@h",
        "http://u:s3cret@[::1",
        "http://u:s3cret@h:port",
    ],
)
def test_parse_url_refusals_show_no_credentials(url: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_url(url)
    assert "s3cret" not in str(raised.value)


def test_the_scheme_decides_the_default_port_and_format_url_writes_it() -> None:
    assert (parse_url("http://h").port, parse_url("https://h").port) == (80, 443)
    assert parse_url("https://h:8443/base").target == "/base/requests"
    assert format_url("127.0.0.1", 8443, tls=True) == "https://127.0.0.1:8443"
    assert format_url("::1", 80) == "http://[::1]:80"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("LOCALHOST.", True),
        ("fe80::1%lo", False),
        ("10.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("example.test", False),
        ("localhost.example.test", False),
        ("127.0.0.1.example.test", False),
        ("", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_check_token_transport() -> None:
    plain = parse_url("http://example.test")
    with pytest.raises(PlaintextTokenRefused) as raised:
        check_token_transport(plain, "s3cret")
    assert "s3cret" not in str(raised.value)
    assert "allow_plaintext_token=True" in str(raised.value)
    assert isinstance(raised.value, ValueError)
    assert PlaintextTokenRefused is errors.PlaintextTokenRefused
    check_token_transport(plain, "s3cret", allow_plaintext_token=True)
    check_token_transport(plain, None)
    check_token_transport(parse_url("https://example.test"), "s3cret")
    check_token_transport(parse_url("http://127.0.0.1:8080"), "s3cret")


def test_the_listen_driver_refuses_a_cleartext_token_when_made() -> None:
    with pytest.raises(PlaintextTokenRefused):
        ListenDriver("http://example.test", ClientSettings(token="s3cret"))
    driver = ListenDriver("https://example.test", ClientSettings(token="s3cret"))
    assert driver.endpoint.tls and driver.endpoint.port == 443


# --- the TLS hint -----------------------------------------------------------------------


def _opened(url: str) -> ListenDriver:
    """A driver whose ask is sent and whose path is being read."""
    driver = ListenDriver(
        url, ClientSettings(events=True), policy=ProxyPolicy(require_exchange=False)
    )
    assert isinstance(driver.next_action(0.0), Connect)
    driver.connected(0.0)
    assert isinstance(driver.next_action(0.0), Send)
    return driver


def _broken(driver: ListenDriver) -> str:
    action = driver.next_action(1.0)
    while not isinstance(action, Deliver):
        action = driver.next_action(1.0)
    (broken,) = [item for item in action.items if isinstance(item, StreamBroken)]
    return broken.reason


def test_a_plain_connection_ending_before_any_answer_gets_the_hint() -> None:
    eof = _opened("http://127.0.0.1:9")
    eof.data_received(1.0, b"")
    assert _broken(eof) == f"the connection closed before any answer arrived{TLS_HINT}"
    reset = _opened("http://127.0.0.1:9")
    reset.connection_lost(1.0, "ECONNRESET: Connection reset by peer")
    assert _broken(reset) == (
        f"the connection was lost: ECONNRESET: Connection reset by peer{TLS_HINT}"
    )


def test_no_hint_over_tls_after_an_answer_began_or_after_a_silence() -> None:
    secure = _opened("https://127.0.0.1:9")
    secure.data_received(1.0, b"")
    assert _broken(secure) == "the connection closed before any answer arrived"
    answered = _opened("http://127.0.0.1:9")
    answered.data_received(1.0, b"HTTP/1.1 200 OK\r\n")
    answered.data_received(1.0, b"")
    assert not _broken(answered).endswith(TLS_HINT)
    silent = _opened("http://127.0.0.1:9")
    silent.timed_out(1.0)
    assert _broken(silent) == "idle timeout: no data for 45 s"
