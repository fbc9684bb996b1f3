"""Fair admission: who of the connections a server accepts is served, and who is refused.

A server serves at most ``max_connections`` connections at once; past that
a new one is answered ``503`` with ``Retry-After``. Without more, a flood of
connections from one address (each sending its ask a byte a second, coming
straight back when it is closed at its ask deadline) would hold every slot
and keep every other address out. So each address may hold at most its
*share* of ``max_connections`` (``address_share``, a fraction, at least one
connection): a new connection from an address that holds its share is
refused with ``503`` too, as *crowded*, and the refusal names the address.
Whatever one address does, ``max_connections × (1 - address_share)`` slots
stay for the others.

:class:`Admission` holds how many connections each address has now; the
serving driver asks it when a connection is accepted and tells it when the
connection ends. It decides and counts; it does no I/O.
"""

from __future__ import annotations

import enum
import math

__all__ = ["Admission", "Verdict", "address_of"]


class Verdict(enum.Enum):
    """What :meth:`Admission.admit` decided for a new connection."""

    #: Served: it holds a slot until :meth:`Admission.release`.
    ADMITTED = "admitted"
    #: ``max_connections`` are served already.
    BUSY = "busy"
    #: Its address holds its share of ``max_connections`` already.
    CROWDED = "crowded"


def address_of(peer: str) -> str:
    """The address of ``peer`` as the adapters name it (``host:port``, ``[v6]:port``)."""
    host, colon, port = peer.rpartition(":")
    if not colon or not port.isdigit():
        return peer
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


class Admission:
    """The connections served now, in all and by address, and the rule that admits a new one.

    ``max_connections`` (``None``: no limit, and no share either) and
    ``address_share`` (a fraction in ``(0, 1]``) are the server's options.
    Not thread-safe by itself: the blocking adapter calls it under its lock.
    """

    __slots__ = ("_by_address", "_per_address", "connections", "max_connections")

    def __init__(self, max_connections: int | None, address_share: float) -> None:
        #: The limit of connections served at once (``None``: none).
        self.max_connections = max_connections
        self._per_address = (
            None if max_connections is None else max(1, math.floor(max_connections * address_share))
        )
        #: Connections served now.
        self.connections = 0
        self._by_address: dict[str, int] = {}

    @property
    def per_address(self) -> int | None:
        """How many connections one address may hold at once (``None``: no limit)."""
        return self._per_address

    def held_by(self, address: str) -> int:
        """How many connections ``address`` holds now."""
        return self._by_address.get(address, 0)

    def admit(self, address: str) -> Verdict:
        """Decide for a new connection from ``address``; an admitted one is counted at once."""
        limit = self.max_connections
        if limit is not None:
            held = self._by_address.get(address, 0)
            if self._per_address is not None and held >= self._per_address:
                return Verdict.CROWDED
            if self.connections >= limit:
                return Verdict.BUSY
        self.connections += 1
        self._by_address[address] = self._by_address.get(address, 0) + 1
        return Verdict.ADMITTED

    def release(self, address: str) -> None:
        """An admitted connection from ``address`` ended: its slot is free."""
        self.connections -= 1
        held = self._by_address.get(address, 0) - 1
        if held > 0:
            self._by_address[address] = held
        else:
            self._by_address.pop(address, None)
