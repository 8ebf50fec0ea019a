"""Periodic jobs on an injected clock: run when due, sleep exactly until the next one."""

from __future__ import annotations

import asyncio

from broker.server.scheduler import Scheduler


def test_jobs_run_on_the_injected_clock_and_sleep_until_due():
    now = [0]
    sleeps: list[float] = []
    runs: list[tuple[str, int]] = []

    async def fake_sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += int(seconds * 1000)
        if now[0] >= 1_000:
            raise asyncio.CancelledError
        await asyncio.sleep(0)

    scheduler = Scheduler(lambda: now[0], fake_sleep)
    scheduler.every("fast", 300, lambda: runs.append(("fast", now[0])))
    scheduler.every("slow", 500, lambda: runs.append(("slow", now[0])))

    async def main():
        try:
            await scheduler.run()
        except asyncio.CancelledError:
            pass

    asyncio.run(main())
    assert runs == [("fast", 300), ("slow", 500), ("fast", 600), ("fast", 900)]
    assert sleeps == [0.3, 0.2, 0.1, 0.3, 0.1]
    assert scheduler.runs("fast") == 3
