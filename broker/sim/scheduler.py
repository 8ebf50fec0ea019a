"""One event scheduler on a virtual clock: the simulator's only notion of time.

Events are (time, sequence, callback); equal times run in scheduling order, so a run is a pure
function of its seed. Nothing here sleeps: ``run_until`` jumps the clock from event to event.
"""

from __future__ import annotations

import heapq
from typing import Callable

__all__ = ["Scheduler", "Timer"]


class Timer:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Scheduler:
    def __init__(self, start_ms: int = 0) -> None:
        self.now_ms = start_ms
        self._queue: list[tuple[int, int, Timer, Callable, tuple]] = []
        self._sequence = 0
        self.events_run = 0

    def at(self, time_ms: int, callback: Callable, *args) -> Timer:
        assert time_ms >= self.now_ms, (time_ms, self.now_ms)
        timer = Timer()
        self._sequence += 1
        heapq.heappush(self._queue, (time_ms, self._sequence, timer, callback, args))
        return timer

    def after(self, delay_ms: int, callback: Callable, *args) -> Timer:
        return self.at(self.now_ms + max(0, int(delay_ms)), callback, *args)

    def step(self) -> bool:
        """Run the next event; False when there is none."""
        while self._queue:
            time_ms, _, timer, callback, args = heapq.heappop(self._queue)
            if timer.cancelled:
                continue
            self.now_ms = time_ms
            self.events_run += 1
            callback(*args)
            return True
        return False

    def next_time(self) -> int | None:
        while self._queue and self._queue[0][2].cancelled:
            heapq.heappop(self._queue)
        return self._queue[0][0] if self._queue else None

    def run_until(self, time_ms: int, after_each: Callable[[], None] | None = None) -> None:
        while True:
            upcoming = self.next_time()
            if upcoming is None or upcoming > time_ms:
                break
            self.step()
            if after_each is not None:
                after_each()
        self.now_ms = max(self.now_ms, time_ms)
