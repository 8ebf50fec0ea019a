"""The purgatory: woken by a change on a watched key, times out, bounded, cleans up, never polls."""

from __future__ import annotations

import asyncio

import pytest

from broker.replica.purgatory import Purgatory

KEY, OTHER = ("t", 0), ("t", 1)


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 5))


def test_notify_wakes_a_waiter_on_that_key_only():
    async def scenario():
        purgatory = Purgatory(10)
        on_key, on_other = purgatory.watch([KEY]), purgatory.watch([OTHER])
        tasks = [asyncio.create_task(w.wait(2.0)) for w in (on_key, on_other)]
        await asyncio.sleep(0.01)
        assert purgatory.notify(KEY) == 1
        woken = await tasks[0]
        await asyncio.sleep(0.05)
        still_waiting = not tasks[1].done()
        tasks[1].cancel()
        return woken, still_waiting

    assert run(scenario()) == (True, True)


def test_a_change_before_the_wait_is_not_lost():
    async def scenario():
        purgatory = Purgatory(10)
        waiter = purgatory.watch([KEY])
        purgatory.notify(KEY)  # lands between the caller's check and its await
        return await waiter.wait(0.5)

    assert run(scenario()) is True


def test_timeout_without_a_change():
    async def scenario():
        purgatory = Purgatory(10)
        loop = asyncio.get_running_loop()
        started = loop.time()
        with purgatory.watch([KEY]) as waiter:
            woken = await waiter.wait(0.2)
        return woken, loop.time() - started, purgatory.waiting

    woken, elapsed, waiting = run(scenario())
    assert woken is False and 0.19 <= elapsed < 1.0 and waiting == 0


def test_waiting_does_not_spin():
    """While nothing changes, a waiter costs no loop iterations: count the loop's callbacks."""
    async def scenario():
        purgatory = Purgatory(10)
        loop = asyncio.get_running_loop()
        ticks = 0

        def tick():
            nonlocal ticks
            ticks += 1

        original = loop.call_soon
        loop.call_soon = lambda cb, *a, **k: (tick(), original(cb, *a, **k))[1]
        try:
            with purgatory.watch([KEY]) as waiter:
                await waiter.wait(0.3)
        finally:
            loop.call_soon = original
        return ticks

    assert run(scenario()) < 10


def test_bounded_and_closed():
    async def scenario():
        purgatory = Purgatory(waiters_max=2)
        first, second = purgatory.watch([KEY]), purgatory.watch([KEY, OTHER])
        refused = purgatory.watch([KEY])
        task = asyncio.create_task(first.wait(5.0))
        await asyncio.sleep(0.01)
        purgatory.close()
        woken = await task
        first.close(), second.close()
        return refused, woken, purgatory.watch([KEY]), purgatory.statistics()

    refused, woken, after_close, stats = run(scenario())
    assert refused is None and woken is True and after_close is None
    assert stats.refused == 2 and stats.waiting == 0 and stats.waiting_peak == 2


def test_cancelled_waiter_is_unregistered():
    async def scenario():
        purgatory = Purgatory(10)

        async def wait_forever():
            with purgatory.watch([KEY, OTHER]) as waiter:
                await waiter.wait(60)

        task = asyncio.create_task(wait_forever())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return purgatory.waiting, purgatory.notify(KEY)

    assert run(scenario()) == (0, 0)


def test_wake_ups_while_waiting_coalesce_into_one():
    """Several changes before the waiter resumes are one wake-up (as with an Event): the next
    wait sleeps until a later change or its timeout."""
    async def scenario():
        purgatory = Purgatory(10)
        with purgatory.watch([KEY]) as waiter:
            task = asyncio.create_task(waiter.wait(5.0))
            await asyncio.sleep(0.01)
            purgatory.notify(KEY)
            purgatory.notify(KEY)
            first = await task
            second = await waiter.wait(0.05)
        return first, second

    assert run(scenario()) == (True, False)
