"""Admission: each address within its share of max_connections, the rest for the others."""

from __future__ import annotations

from diverge_notifications.sansio.server.admission import Admission, Verdict, address_of


def test_one_address_holds_its_share_and_the_others_the_rest() -> None:
    admission = Admission(4, 0.5)
    assert [admission.admit("10.0.0.1") for _ in range(3)] == [
        Verdict.ADMITTED,
        Verdict.ADMITTED,
        Verdict.CROWDED,
    ]
    assert [admission.admit("10.0.0.2") for _ in range(2)] == [Verdict.ADMITTED] * 2
    assert admission.admit("10.0.0.3") is Verdict.BUSY
    admission.release("10.0.0.1")
    assert admission.held_by("10.0.0.1") == 1 and admission.connections == 3
    assert admission.admit("10.0.0.3") is Verdict.ADMITTED


def test_a_share_is_at_least_one_connection_and_no_limit_is_no_share() -> None:
    assert Admission(1, 0.1).per_address == 1
    unlimited = Admission(None, 0.5)
    assert all(unlimited.admit("a") is Verdict.ADMITTED for _ in range(1000))


def test_the_address_of_a_peer_as_the_adapters_name_it() -> None:
    assert address_of("127.0.0.2:5000") == "127.0.0.2"
    assert address_of("[::1]:5000") == "::1"
    assert address_of("") == ""
