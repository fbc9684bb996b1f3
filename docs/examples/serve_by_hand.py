"""Serving a hub by hand, over plain blocking sockets.

The sans-IO objects do every protocol decision; this file only moves bytes
between a socket and a :class:`ServerConnection`, and between a hub
subscription and the path. One thread serves one connection; a lock
serialises every call into the hub (the hub does not lock by itself).

Run it: ``python docs/examples/serve_by_hand.py``. It starts a server on a
free port, connects a proxy (also by hand, with :class:`ProxyConnection`),
publishes a few notifications once the path is open, ends the path cleanly
and prints what the proxy saw.
"""

from __future__ import annotations

import socket
import threading
import time

from diverge_notifications.sansio import (
    NEED_DATA,
    AskRefused,
    ChannelIds,
    ConnectionClosed,
    ExchangeAsked,
    Hub,
    Notification,
    NotificationsAsked,
    ProxyConnection,
    ReaskNeeded,
    ServerConnection,
    StreamOpened,
)


def serve_connection(
    sock: socket.socket,
    hub: Hub,
    *,
    hub_lock: threading.Lock,
    channel_ids: ChannelIds,
    stop: threading.Event,
    keepalive_interval: float = 15.0,
    token: str | None = None,
) -> None:
    """Answer the one ask on ``sock``; for a notifications ask, relay the hub until ``stop``."""
    conn = ServerConnection(token=token, channel_ids=channel_ids)
    with sock:
        # 1. Read the ask. Whatever the library queued on its own (a refusal,
        #    "100 Continue") goes out after every step.
        while True:
            event = conn.next_event()
            sock.sendall(conn.data_to_send())
            if event is NEED_DATA:
                conn.receive_data(sock.recv(65536))  # b"" at end of file
            elif isinstance(event, NotificationsAsked):
                break
            elif isinstance(event, ExchangeAsked):
                sock.sendall(conn.decline())  # no MCP server here to answer it
                return
            elif isinstance(event, (AskRefused, ConnectionClosed)):
                return

        # 2. Subscribe before the head goes out, so nothing published after
        #    the proxy sees StreamOpened can be missed.
        ready = threading.Event()
        with hub_lock:
            subscriber = hub.subscribe(on_ready=ready.set)
        try:
            sock.sendall(conn.start_path())
            last_output = time.monotonic()
            while not stop.is_set():
                ready.wait(timeout=0.1)
                ready.clear()
                with hub_lock:
                    batch = subscriber.take()
                if batch:
                    sock.sendall(conn.send_notifications(batch))  # one HTTP chunk
                    last_output = time.monotonic()
                elif time.monotonic() - last_output >= keepalive_interval:
                    sock.sendall(conn.send_keepalive())
                    last_output = time.monotonic()
            # 3. End cleanly, after what is still queued.
            with hub_lock:
                batch = subscriber.take()
            sock.sendall(conn.send_notifications(batch) + conn.end_path())
        except OSError:
            pass  # the proxy went away; a write failing is how a blocking server learns it
        finally:
            with hub_lock:
                subscriber.close()


def main() -> None:
    hub = Hub()
    hub_lock = threading.Lock()
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept_one() -> None:
        sock, _ = listener.accept()
        serve_connection(sock, hub, hub_lock=hub_lock, channel_ids=ChannelIds(), stop=stop)

    server_thread = threading.Thread(target=accept_one)
    server_thread.start()

    def publish() -> None:
        for n in range(3):
            progress = {"progressToken": "job-1", "progress": n + 1, "total": 3}
            with hub_lock:
                hub.publish(Notification("notifications/progress", progress))
        with hub_lock:
            hub.publish(b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}')
            hub.publish("this is not a notification, so the hub ignores it")
        stop.set()  # then the server ends the path cleanly

    proxy = ProxyConnection(f"127.0.0.1:{port}")
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(proxy.data_to_send())
        while True:
            event = proxy.next_event()
            if event is NEED_DATA:
                proxy.receive_data(sock.recv(65536))
                continue
            print(event)
            if isinstance(event, StreamOpened):
                threading.Thread(target=publish).start()
            if isinstance(event, ReaskNeeded):
                break
    server_thread.join()
    listener.close()


if __name__ == "__main__":
    main()
