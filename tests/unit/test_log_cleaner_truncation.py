"""A log truncated below its cleaner checkpoint (a follower cutting a diverged tail, or cutting
to its high watermark when the leader cannot say where the logs diverge; a log replaced from an
offset) and filled again: the records appended since sit below the old checkpoint, yet nothing
has ever mapped them. Kafka lowers the checkpoint to the truncation offset
(``LogCleanerManager.maybeTruncateCheckpoint`` from ``LogManager.truncateTo``); without that, once
the log grows past the old checkpoint again, the refilled part counts as clean and keeps
duplicates of keys that are not written again (on that replica only: the replicas diverge)."""

from __future__ import annotations

import asyncio

import pytest

from broker.log.checkpoint import read_checkpoint
from broker.server.log_cleaner import CLEANER_CHECKPOINT
from test_log_cleaner import Clock, read_all, write
from test_log_cleaner_service import COMPACT, StubReplicas, make_log, service


def run_pass(cleaner):
    partition = cleaner._next_partition()
    return None if partition is None else asyncio.run(cleaner.clean(partition))


def one_per_key(records) -> bool:
    keys = [key for _, key, _ in records]
    return len(keys) == len(set(keys))


def refill(log, below_old_checkpoint: int, after: int) -> list:
    """Append: first ``below_old_checkpoint`` writes over five keys never written again (they
    land below the old checkpoint), then ``after`` writes over other keys; roll."""
    writes = [(b"a-%d" % (i % 5), b"a%d" % i) for i in range(below_old_checkpoint)]
    writes += [(b"b-%d" % (i % 5), b"b%d" % i) for i in range(after)]
    write(log, writes)
    log.roll()
    return writes


def expected(kept, start: int, writes) -> list:
    last = {key: (offset, key, value) for offset, key, value in kept}
    for offset, (key, value) in enumerate(writes, start):
        last[key] = (offset, key, value)
    return sorted(last.values())


def test_a_truncation_below_the_checkpoint_makes_the_refilled_records_dirty(tmp_path):
    clock = Clock()
    table, _ = make_log(tmp_path, "table", COMPACT, clock, 7)
    cleaner = service(StubReplicas(tmp_path, [table]))
    assert run_pass(cleaner) == 300
    log = table.log
    log.truncate_to(150)
    end = log.log_end_offset
    kept = read_all(log)
    writes = refill(log, 300 - end, 60)
    assert run_pass(cleaner) == log.log_end_offset
    assert read_all(log) == expected(kept, end, writes) and one_per_key(read_all(log))
    assert read_checkpoint(tmp_path / CLEANER_CHECKPOINT) == {("table", 0): log.log_end_offset}


def test_a_log_replaced_from_an_offset_is_dirty_from_there(tmp_path):
    clock = Clock()
    table, _ = make_log(tmp_path, "table", COMPACT, clock, 8)
    cleaner = service(StubReplicas(tmp_path, [table]))
    assert run_pass(cleaner) == 300
    log = table.log
    log.truncate_fully_and_start_at(100)  # a follower behind the leader's log start
    writes = refill(log, 200, 60)
    assert run_pass(cleaner) == log.log_end_offset
    assert read_all(log) == expected([], 100, writes)


@pytest.mark.parametrize("cut", ["inside-the-pass", "active-segment"])
def test_a_pass_under_a_truncation_is_dropped_and_moves_no_checkpoint(tmp_path, cut):
    """A truncation during a pass: cutting the pass's own segments makes its reads fail
    ("batches end at byte ..."), cutting only the active segment makes its output stale (the
    swap sees the log changed). Either way the pass is dropped, the log is not uncleanable,
    and its dirty section stays dirty: nothing of it was cleaned."""
    clock = Clock()
    table, _ = make_log(tmp_path, "table", COMPACT, clock, 9)
    log = table.log
    write(log, [(b"tail", b"x")])  # one batch in the active segment
    cleaner = service(StubReplicas(tmp_path, [table]))
    partition = cleaner._next_partition()

    async def pass_with_truncation():
        task = asyncio.create_task(cleaner.clean(partition))
        await asyncio.sleep(0)  # the pass has planned and is mapping on a thread
        log.truncate_to(100 if cut == "inside-the-pass" else log.log_end_offset - 1)
        return await task

    assert asyncio.run(pass_with_truncation()) is None
    assert cleaner.stats.uncleanable == {} and cleaner.stats.stale_groups + cleaner.stats.aborted_passes > 0
    assert not (tmp_path / CLEANER_CHECKPOINT).exists()  # nothing was cleaned: nothing is clean
    end = log.log_end_offset
    kept = read_all(log)
    writes = refill(log, max(0, 300 - end), 60)
    assert run_pass(cleaner) == log.log_end_offset
    assert read_all(log) == expected(kept, end, writes)
