"""The Redis broker for threads: redis-py's blocking connections, each owned by one thread.

A supervisor thread connects the publishing connection, starts a reader
thread that subscribes, publishes what waits in the outbox until either
connection fails, and makes them again after its own backoff. The reader
publishes into the hub under ``hub_lock`` (the blocking server's ``lock``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from types import TracebackType
from typing import Any

from redis.connection import Connection, ConnectionPool
from redis.retry import Retry

from ._core import logger
from ._redis import FAILURES, RedisBrokerBase, check_subscribed, describe, message_data

__all__ = ["BlockingRedisBroker"]

#: Seconds between the reader's looks at whether its connection should stop.
_POLL = 0.2


class _Attempt:
    """One pair of connections; ``why`` is set once, when either fails."""

    def __init__(self) -> None:
        self.why: str | None = None


class BlockingRedisBroker(RedisBrokerBase):
    """The Redis broker for threads; it starts at once. The options are :class:`RedisBrokerBase`'s.

    ``with BlockingRedisBroker(hub, url, hub_lock=server.lock) as broker:``.
    Pass the blocking server's ``lock`` as ``hub_lock``; :meth:`publish`
    may be called from any thread. A message that has started to arrive
    must arrive whole within ``connect_timeout``.
    """

    _pool_class = ConnectionPool
    _tcp_class = Connection
    _retry_class = Retry
    _subscriber_waits = False  # the reader polls, to notice when to stop

    def _prepare(self) -> None:
        #: Guards the attempts' ends and wakes the sender and ``wait_ready``.
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _begin(self) -> None:
        self._thread.name = f"diverge-redis-broker-{self._core.origin}"
        self._thread.start()

    def _wake_sender(self) -> None:
        self._notify()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until :meth:`publish` would take a notification; False after ``timeout`` s."""
        with self._changed:
            self._changed.wait_for(lambda: self._stop.is_set() or self._core.can_accept(), timeout)
        return self._core.can_accept()

    def close(self, timeout: float = 5.0) -> None:
        """Stop the threads (waiting up to ``timeout`` s); the hub stays suspended."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._notify()
        self._thread.join(timeout)
        self._core.closed()

    def __enter__(self) -> BlockingRedisBroker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the threads -------------------------------------------------------------

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def _end(self, attempt: _Attempt, why: str) -> None:
        with self._changed:
            if attempt.why is None:
                attempt.why = why
            self._changed.notify_all()

    def _over(self, attempt: _Attempt) -> bool:
        return attempt.why is not None or self._stop.is_set()

    def _run(self) -> None:
        reconnects = self._reconnects
        while not self._stop.wait(reconnects.delay()):
            reconnects.started()
            attempt = _Attempt()
            try:
                self._attempt(attempt)
            except Exception as error:
                # Never a dead thread that looks alive: a bug is a lost connection too.
                logger.exception("%s: unexpected failure", self._core.description)
                self._end(attempt, f"connection lost ({describe(error)})")
            if self._stop.is_set():
                return
            assert attempt.why is not None
            self._core.lost(attempt.why)
            logger.info("%s: next attempt in %.2f s", self._core.description, reconnects.ended())

    def _attempt(self, attempt: _Attempt) -> None:
        reader = threading.Thread(
            target=self._read, args=(attempt,), name=f"{self._thread.name}-reader", daemon=True
        )
        publisher = self._publisher()
        try:
            publisher.connect()
        except FAILURES as error:
            self._end(attempt, f"could not connect ({describe(error)})")
            return
        try:
            reader.start()
            self._send(attempt, publisher)
        except Exception as error:
            logger.exception("%s: unexpected failure", self._core.description)
            self._end(attempt, f"connection lost ({describe(error)})")
        finally:
            with contextlib.suppress(Exception):
                publisher.disconnect()
            if reader.is_alive():
                reader.join()

    def _send(self, attempt: _Attempt, publisher: Any) -> None:
        core = self._core
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._over(attempt) or core.pending > 0)
                if self._over(attempt):
                    return
            batch = core.next_batch()
            if batch is None:
                continue
            self._notify()  # the outbox has room again
            payload, count = batch
            try:
                publisher.send_command("PUBLISH", self._channel, payload)
                publisher.read_response()
            except FAILURES as error:
                # Whether Redis got it is unknown: never sent again.
                core.failed(count, describe(error))
                self._end(attempt, f"connection lost ({describe(error)})")
                return
            core.sent(count)

    def _read(self, attempt: _Attempt) -> None:
        subscriber = self._subscriber()
        channel = self._channel
        core = self._core
        try:
            try:
                subscriber.connect()
                subscriber.send_command("SUBSCRIBE", channel)
                check_subscribed(subscriber.read_response(), channel)
            except FAILURES as error:
                self._end(attempt, f"could not subscribe ({describe(error)})")
                return
            self._reconnects.subscribed()
            core.subscribed()
            self._notify()
            interval = self._ping_interval
            heard, pinged = time.monotonic(), False
            while not self._over(attempt):
                # can_read() does not consume: no read is ever cut in the middle.
                if subscriber.can_read(timeout=_POLL):
                    data = message_data(subscriber.read_response(), channel)
                    heard, pinged = time.monotonic(), False
                    if data is not None and core.received(data):
                        self._reconnects.heard()
                elif time.monotonic() - heard >= interval:
                    # A silent subscription: PING it, and give up if that too goes unanswered.
                    if pinged:
                        raise TimeoutError(f"no answer from Redis to a PING within {interval:g} s")
                    subscriber.send_command("PING")
                    heard, pinged = time.monotonic(), True
        except FAILURES as error:
            self._end(attempt, f"connection lost ({describe(error)})")
        except Exception as error:
            logger.exception("%s: unexpected failure", self._core.description)
            self._end(attempt, f"connection lost ({describe(error)})")
        finally:
            with contextlib.suppress(Exception):
                subscriber.disconnect()
