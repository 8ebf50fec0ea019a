"""The purgatory: requests that wait for a partition to change (Kafka ``DelayedOperationPurgatory``).

A long-poll Fetch that found fewer than ``min_bytes`` waits here until the high watermark of one
of its partitions moves (or its ``max_wait_ms`` passes); an acks=all Produce will wait here until
the high watermark passes its batch once followers exist. The waiting side re-checks its own
condition after every wake-up, so the purgatory only has to say "something changed on a key you
watch"; it never polls (a waiter sleeps on one future, resolved by a wake-up or by one
``call_later`` timer: ``asyncio.Event`` + ``asyncio.timeout`` cost several times that per long
poll, and a consumer at linger.ms=0 long-polls once per few records).

Keys are ``(topic, partition)``. ``notify(key)`` wakes every waiter on that key (Kafka's
``checkAndComplete``); ``close()`` wakes everyone and refuses new waiters, so a broker that is
stopping answers its long polls at once. The number of waiters is bounded by
``waiters_max`` (``purgatory.waiters.max``): when full, ``watch`` returns None and the caller
answers with what it has instead of waiting, which is always a correct Kafka answer.

Event-loop confined: call everything from the loop's thread. Registration is synchronous, so a
caller that checks its condition and then registers (no ``await`` between) cannot miss a wake-up.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Hashable, Iterable

__all__ = ["Purgatory", "Waiter", "PurgatoryStatistics"]


@dataclass
class PurgatoryStatistics:
    waiting: int = 0
    waiting_peak: int = 0
    refused: int = 0
    wakeups: int = 0


class Waiter:
    """One waiting request, registered under one or more keys until ``close()``."""

    __slots__ = ("_purgatory", "_keys", "_woken", "_future", "_closed")

    def __init__(self, purgatory: "Purgatory", keys: tuple) -> None:
        self._purgatory = purgatory
        self._keys = keys
        self._woken = False  # a wake-up that came while nobody was waiting
        self._future: asyncio.Future | None = None  # set while a ``wait`` sleeps
        self._closed = False

    async def wait(self, timeout_s: float) -> bool:
        """Sleep until a watched key changes or ``timeout_s`` passes; True if woken. The wake-up
        is consumed, so the next ``wait`` sleeps until the next change."""
        if self._woken:
            self._woken = False
            return True
        if timeout_s <= 0:
            return False
        loop = asyncio.get_running_loop()
        future = self._future = loop.create_future()
        timer = loop.call_later(timeout_s, _expire, future)
        try:
            return await future
        finally:
            timer.cancel()
            self._future = None

    def wake(self) -> None:
        future = self._future
        if future is None:
            self._woken = True
        elif not future.done():
            future.set_result(True)
        elif not future.result():
            self._woken = True  # timed out a moment ago: this change is for the next ``wait``
        # else: woken already and not yet resumed; wake-ups coalesce, as an Event's do

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._purgatory._remove(self)

    def __enter__(self) -> "Waiter":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _expire(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(False)


class Purgatory:
    def __init__(self, waiters_max: int) -> None:
        assert waiters_max >= 0
        self.waiters_max = waiters_max
        self._by_key: dict[Hashable, set[Waiter]] = {}
        self._count = 0
        self._closed = False
        self.stats = PurgatoryStatistics()

    @property
    def waiting(self) -> int:
        return self._count

    def watch(self, keys: Iterable[Hashable]) -> Waiter | None:
        """Register a waiter on ``keys``; None when closed or full (then do not wait)."""
        if self._closed or self._count >= self.waiters_max:
            self.stats.refused += 1
            return None
        waiter = Waiter(self, tuple(set(keys)))
        for key in waiter._keys:
            self._by_key.setdefault(key, set()).add(waiter)
        self._count += 1
        self.stats.waiting = self._count
        self.stats.waiting_peak = max(self.stats.waiting_peak, self._count)
        return waiter

    def notify(self, key: Hashable) -> int:
        """Wake every waiter watching ``key``; returns how many."""
        waiters = self._by_key.get(key)
        if not waiters:
            return 0
        for waiter in waiters:
            waiter.wake()
        self.stats.wakeups += len(waiters)
        return len(waiters)

    def close(self) -> None:
        """Wake everyone and accept no new waiters (broker shutdown)."""
        self._closed = True
        for waiters in list(self._by_key.values()):
            for waiter in waiters:
                waiter.wake()

    def _remove(self, waiter: Waiter) -> None:
        for key in waiter._keys:
            waiters = self._by_key.get(key)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._by_key[key]
        self._count -= 1
        self.stats.waiting = self._count
        assert self._count >= 0

    def statistics(self) -> PurgatoryStatistics:
        return PurgatoryStatistics(**vars(self.stats))
