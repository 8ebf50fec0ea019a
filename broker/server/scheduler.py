"""Periodic broker jobs (retention, flush, checkpoints, producer expiry) on an injected clock.

One task runs every job whose time has come, then sleeps exactly until the next one is due: no
polling tick. Time comes from ``now_ms`` and waiting from ``sleep`` (both injected), so a test
drives the schedule with a fake clock. A job that raises is a bug: the exception ends the task
(and with it the broker's task group), loudly.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Awaitable, Callable

__all__ = ["Scheduler"]

logger = logging.getLogger(__name__)


@dataclass
class _Job:
    name: str
    interval_ms: int
    run: Callable[[], object]
    next_due_ms: int = 0
    runs: int = 0


class Scheduler:
    def __init__(self, now_ms: Callable[[], int],
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._now_ms = now_ms
        self._sleep = sleep
        self._jobs: list[_Job] = []

    def every(self, name: str, interval_ms: int, job: Callable[[], object]) -> None:
        """Run ``job`` every ``interval_ms``, the first time one interval after ``run`` starts."""
        assert interval_ms > 0, (name, interval_ms)
        self._jobs.append(_Job(name, interval_ms, job))

    def runs(self, name: str) -> int:
        return next(job.runs for job in self._jobs if job.name == name)

    async def run(self) -> None:
        start = self._now_ms()
        for job in self._jobs:
            job.next_due_ms = start + job.interval_ms
        while self._jobs:
            now = self._now_ms()
            for job in self._jobs:
                if job.next_due_ms <= now:
                    result = job.run()
                    job.runs += 1
                    job.next_due_ms = now + job.interval_ms
                    logger.debug("job %s ran: %s", job.name, result)
            next_due = min(job.next_due_ms for job in self._jobs)
            await self._sleep(max(0, next_due - self._now_ms()) / 1000)
        await asyncio.Event().wait()  # nothing scheduled: wait to be cancelled
