"""How much publishing into a hub costs.

Three measurements, each against a comparison run in the same process:

1. Fan-out cost per subscriber, for 1, 100 and 10,000 subscribers that take
   everything (target: at most 1 µs per subscriber reached). The comparison
   is the bare floor: appending the same object to as many deques.
2. Publishing a ``resources/updated`` that reaches 1 subscriber while 0,
   1,000 and 100,000 other subscribers watch other URIs. The hub's index
   keeps this flat; the comparison is the naive fan-out that asks every
   subscriber's :meth:`Interest.wants`.

3. The server's CPU per delivery when 200 paths hear the same
   notifications: publishing, then each path's writer taking its frames and
   writing them as one HTTP chunk (:meth:`ServerConnection.send_frames`),
   for batches of 1, 16 and 256 notifications between two turns of the
   writers (target: approaching 0.5 µs per delivery). The comparison is
   what each path did before the hub built frames: encoding its own
   notifications (:meth:`ServerConnection.send_notifications`).

4. Progress published to one audience (the paths of one token) of 1
   subscriber while 0, 1,000 and 100,000 subscribers belong to other
   audiences: the hub's per-audience index keeps this flat. The comparison
   is the naive fan-out that asks every subscriber's audience.

Run: ``python bench/bench_hub.py`` (well under 60 s).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from diverge_notifications.sansio import Notification, ProxyConnection, ServerConnection
from diverge_notifications.sansio.server.hub import Hub, Interest, Subscriber


def best_of(repeats: int, run: Callable[[], float]) -> float:
    """The smallest of ``repeats`` timings: the least disturbed run."""
    return min(run() for _ in range(repeats))


def fan_out(subscribers: int, publishes: int) -> tuple[float, float]:
    """Seconds per delivery through the hub, and for the bare deque floor."""
    notification = Notification("notifications/progress", {"progressToken": 1, "progress": 5})
    hub = Hub(queue_size=publishes, queue_bytes=2**30)  # nothing dropped: the cost of queuing
    subs = [hub.subscribe() for _ in range(subscribers)]

    def run_hub() -> float:
        start = time.perf_counter()
        for _ in range(publishes):
            hub.publish(notification)
        elapsed = time.perf_counter() - start
        for subscriber in subs:
            subscriber.take()
        return elapsed

    queues: list[deque[Notification]] = [deque() for _ in range(subscribers)]

    def run_floor() -> float:
        start = time.perf_counter()
        for _ in range(publishes):
            for queue in queues:
                queue.append(notification)
        elapsed = time.perf_counter() - start
        for queue in queues:
            queue.clear()
        return elapsed

    deliveries = subscribers * publishes
    return best_of(5, run_hub) / deliveries, best_of(5, run_floor) / deliveries


def one_match_among(others: int, publishes: int) -> tuple[float, float]:
    """Seconds per publish reaching one subscriber among ``others``: hub, naive."""
    hub = Hub()
    target: Subscriber = hub.subscribe(Interest(resource_subscriptions={"file:///target"}))
    interests = [Interest(resource_subscriptions={f"file:///other/{n}"}) for n in range(others)]
    for interest in interests:
        hub.subscribe(interest)
    notification = Notification("notifications/resources/updated", {"uri": "file:///target"})

    def run_hub() -> float:
        start = time.perf_counter()
        for _ in range(publishes):
            hub.publish(notification)
        elapsed = time.perf_counter() - start
        target.take()
        return elapsed

    everyone = [(Interest(resource_subscriptions={"file:///target"}), deque[Notification]())]
    everyone += [(interest, deque[Notification]()) for interest in interests]
    naive_publishes = max(1, publishes // max(1, others // 100))

    def run_naive() -> float:
        start = time.perf_counter()
        for _ in range(naive_publishes):
            for interest, queue in everyone:
                if interest.wants(notification):
                    queue.append(notification)
        elapsed = time.perf_counter() - start
        everyone[0][1].clear()
        return elapsed * publishes / naive_publishes

    return best_of(5, run_hub) / publishes, best_of(3, run_naive) / publishes


def _open_paths(count: int) -> list[ServerConnection]:
    ask = ProxyConnection("bench").data_to_send()
    connections = []
    for _ in range(count):
        connection = ServerConnection()
        connection.receive_data(ask)
        connection.next_event()
        connection.start_path()
        connections.append(connection)
    return connections


def paths_cost(paths: int, batch: int, publishes: int) -> tuple[float, float]:
    """Seconds per delivery to ``paths`` paths: shared frames, and each path encoding its own."""
    notification = Notification(
        "notifications/progress", {"progressToken": "job", "progress": 5, "message": "m" * 100}
    )
    hub = Hub(queue_size=batch, queue_bytes=2**30)
    subs = [hub.subscribe() for _ in range(paths)]
    connections = _open_paths(paths)
    pairs = list(zip(subs, connections, strict=True))
    rounds = publishes // batch

    def run_frames() -> float:
        start = time.perf_counter()
        for _ in range(rounds):
            for _ in range(batch):
                hub.publish(notification)
            for subscriber, connection in pairs:
                connection.send_frames(subscriber.take_frames())
        return time.perf_counter() - start

    def run_encoding() -> float:
        start = time.perf_counter()
        for _ in range(rounds):
            for _ in range(batch):
                hub.publish(notification)
            for subscriber, connection in pairs:
                connection.send_notifications(subscriber.take())
        return time.perf_counter() - start

    deliveries = paths * rounds * batch
    return best_of(3, run_frames) / deliveries, best_of(3, run_encoding) / deliveries


def one_audience_among(others: int, publishes: int) -> tuple[float, float]:
    """Seconds per publish to an audience of 1 subscriber among ``others``: hub, naive."""
    hub = Hub()
    target = hub.subscribe(audience="target")
    for n in range(others):
        hub.subscribe(audience=f"other-{n}")
    audiences = ["target", *(f"other-{n}" for n in range(others))]
    notification = Notification("notifications/progress", {"progressToken": 1, "progress": 5})

    def run_hub() -> float:
        start = time.perf_counter()
        for _ in range(publishes):
            hub.publish(notification, audience="target")
        elapsed = time.perf_counter() - start
        target.take()
        return elapsed

    queue: deque[Notification] = deque()

    def run_naive() -> float:
        start = time.perf_counter()
        for _ in range(publishes // max(1, others // 100) or 1):
            for audience in audiences:
                if audience == "target":
                    queue.append(notification)
        elapsed = time.perf_counter() - start
        queue.clear()
        return elapsed * max(1, others // 100)

    return best_of(3, run_hub) / publishes, best_of(3, run_naive) / publishes


def main() -> None:
    print("fan-out: publish cost per subscriber reached (no filter)")
    print(f"{'subscribers':>12} {'hub ns':>10} {'floor ns':>10} {'hub/floor':>10}")
    for subscribers, publishes in ((1, 200_000), (100, 5_000), (10_000, 50)):
        hub_cost, floor_cost = fan_out(subscribers, publishes)
        ratio = hub_cost / floor_cost
        print(f"{subscribers:>12} {hub_cost * 1e9:>10.0f} {floor_cost * 1e9:>10.0f} {ratio:>10.1f}")
    print()
    print("resources/updated reaching 1 subscriber among N watching other URIs")
    print(f"{'N':>12} {'hub µs':>10} {'naive µs':>10} {'naive/hub':>10}")
    for others in (0, 1_000, 100_000):
        hub_cost, naive_cost = one_match_among(others, 20_000)
        ratio = naive_cost / hub_cost
        print(f"{others:>12} {hub_cost * 1e6:>10.2f} {naive_cost * 1e6:>10.2f} {ratio:>10.1f}")
    print()
    print("200 paths hearing the same notifications: publish + every writer's chunk, per delivery")
    print(f"{'batch':>12} {'frames µs':>10} {'encode µs':>10} {'enc/frames':>10}")
    for batch in (1, 16, 256):
        frames_cost, encode_cost = paths_cost(200, batch, 2048)
        ratio = encode_cost / frames_cost
        print(f"{batch:>12} {frames_cost * 1e6:>10.2f} {encode_cost * 1e6:>10.2f} {ratio:>10.2f}")
    print()
    print("progress to one audience of 1 subscriber among N of other audiences")
    print(f"{'N':>12} {'hub µs':>10} {'naive µs':>10} {'naive/hub':>10}")
    for others in (0, 1_000, 100_000):
        hub_cost, naive_cost = one_audience_among(others, 20_000)
        ratio = naive_cost / hub_cost
        print(f"{others:>12} {hub_cost * 1e6:>10.2f} {naive_cost * 1e6:>10.2f} {ratio:>10.1f}")


if __name__ == "__main__":
    main()
