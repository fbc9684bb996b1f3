"""Listen to one notification path by hand, over a plain blocking socket.

Usage: python docs/examples/proxy_by_hand.py HOST PORT [TOKEN]

The ProxyConnection makes every protocol decision; this loop only moves
bytes between it and the socket, and prints what happens. It asks once and
stops when the path is over (at ReaskNeeded): a real listener would then
wait as its ProxyPolicy says and ask again on a new connection.
"""

from __future__ import annotations

import socket
import sys

from diverge_notifications.sansio import (
    NEED_DATA,
    NotificationReceived,
    NotServed,
    ProxyConnection,
    ReaskNeeded,
    StreamBroken,
    StreamErrored,
    StreamOpened,
)

#: A path silent for this long (3 x the server's 15 s keep-alive) is dead.
IDLE_TIMEOUT = 45.0


def listen_once(host: str, port: int, token: str | None = None) -> None:
    connection = ProxyConnection(f"{host}:{port}", token=token)
    with socket.create_connection((host, port), timeout=IDLE_TIMEOUT) as sock:
        sock.sendall(connection.data_to_send())
        while True:
            event = connection.next_event()
            if event is NEED_DATA:
                try:
                    data = sock.recv(64 * 1024)
                except TimeoutError:
                    # Silence is not an end of file: the path broke.
                    connection.connection_lost("idle timeout: no data for 45 s")
                    continue
                connection.receive_data(data)  # b"" is the end of file
                continue
            if isinstance(event, StreamOpened):
                print(f"open on channel {event.channel}")
            elif isinstance(event, NotificationReceived):
                print(f"{event.kind.value}: {event.notification.to_json()}")
            elif isinstance(event, StreamErrored):
                print(f"error {event.error.code}: {event.error.message}")
            elif isinstance(event, NotServed):
                print(f"not served ({event.status}): {event.reason}")
            elif isinstance(event, StreamBroken):
                print(f"broken: {event.reason}")
            elif isinstance(event, ReaskNeeded):
                print("the path is over: ask again later")
                return
            else:
                print(type(event).__name__)  # StreamEnded, MessageRejected


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[2] if __doc__ else "usage: HOST PORT [TOKEN]")
    listen_once(sys.argv[1], int(sys.argv[2]), sys.argv[3] if len(sys.argv) == 4 else None)
