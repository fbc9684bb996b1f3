"""``next_events()`` gives what ``next_event()`` gives until ``NEED_DATA``, in one call.

Every scripted answer, whole, byte at a time and at random splits: the
events taken with ``next_events()`` after each piece are the script's, and
a following ``next_event()`` has nothing more.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from proxy_scripts import AUTHORITY, SCRIPTS, Script, bytewise, split_at, whole

from diverge_notifications.sansio import NEED_DATA, Event, ProxyConnection


def run_in_batches(script: Script, pieces: Sequence[bytes]) -> list[Event]:
    connection = ProxyConnection(AUTHORITY, profile=script.profile)
    connection.data_to_send()
    events: list[Event] = []
    for piece in pieces:
        connection.receive_data(piece)
        events += connection.next_events()
        assert connection.next_event() is NEED_DATA
    if script.eof:
        connection.receive_data(b"")
        events += connection.next_events()
    assert connection.next_events() == []
    assert connection.next_event() is NEED_DATA
    return events


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_next_events_gives_the_script(name: str) -> None:
    script = SCRIPTS[name]
    rnd = random.Random(name)
    inner = range(1, max(1, len(script.answer)))
    offsets = sorted(rnd.sample(inner, min(5, len(inner))))
    for pieces in (whole(script.answer), bytewise(script.answer), split_at(script.answer, offsets)):
        assert run_in_batches(script, pieces) == list(script.events)
