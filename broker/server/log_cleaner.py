"""The broker's log cleaner: picks compacted logs and runs cleaning passes on cleaner threads.

The pass itself lives in ``broker.log.cleaner`` (``cleaning_pass``: plan and swap on the event
loop; the reading and writing, ``worker_pass``, in a worker process that ``cleaner_worker.py``
runs, one per cleaner thread, so the pass never holds the broker's GIL; or, with
``worker_process=False``, on a thread through ``asyncio.to_thread``). This shell decides what to
clean and keeps the bookkeeping, like Kafka's ``LogCleanerManager``:

- Candidates are the partitions of this broker whose ``cleanup.policy`` includes ``compact``,
  leaders and followers alike (each replica cleans its own copy). Among them ``choose_log``
  takes the dirtiest log at or above its ``min.cleanable.dirty.ratio``, or one past
  ``max.compaction.lag.ms``. ``log.cleaner.threads`` workers clean different logs at once; when no
  log is cleanable a worker sleeps ``log.cleaner.backoff.ms``.
- A pass cleans up to the partition's high watermark and last stable offset, keeps the last
  batch of every producer the partition's producer state knows, and ends by writing the new
  first dirty offset to ``cleaner-offset-checkpoint`` in the log's directory (Kafka's format).
- Every pass moves the first dirty offset on: a log whose dirty range is empty (the checkpoint at
  its first uncleanable offset, even inside a segment: ``plan.cleanable_section``) is not a
  candidate until that range grows, rather than copied again every ``log.cleaner.backoff.ms``.
- A log whose pass raises (a CRC error in a segment, a full disk while writing ``.cleaned``
  files: the old segments stay untouched) is marked uncleanable and skipped from then on; the
  error is logged, the broker and the other logs go on. ``statistics()`` reports them, and so
  does ``uncleanable-partitions`` in the log's directory (``broker.log.cleaner.status``), for
  ``pylog topics describe``; the file is removed when the service first uses a directory, since
  a restart retries every log as Kafka's does.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker.log.checkpoint import read_checkpoint, write_checkpoint
from broker.log.cleaner.cleaning_pass import CleanerSettings, begin_pass, summarize
from broker.log.cleaner.key_hash import new_hash_keys
from broker.log.cleaner.plan import choose_log, cleanable_section
from broker.log.cleaner.retention import AbortedTxn
from broker.log.cleaner.status import CLEANER_CHECKPOINT, clear_uncleanable, write_uncleanable
from broker.log.errors import CheckpointError
from broker.server.cleaner_worker import CleanerWorker

__all__ = ["CLEANER_CHECKPOINT", "CleanerStatistics", "LogCleanerService"]

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass
class CleanerStatistics:
    passes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    stale_groups: int = 0
    aborted_passes: int = 0  # passes dropped because the log was truncated or replaced under them
    uncleanable: dict[TopicPartition, str] = field(default_factory=dict)
    dirty_ratio: dict[TopicPartition, float] = field(default_factory=dict)


class LogCleanerService:
    """Run with ``await service.run()`` inside the broker's task group."""

    def __init__(self, replicas, settings: CleanerSettings, *, threads: int, backoff_ms: int,
                 now_ms: Callable[[], int], rng: random.Random,
                 sleep: Callable[[float], object] = asyncio.sleep, worker_process: bool = True) -> None:
        assert threads >= 1 and backoff_ms >= 1
        self._replicas = replicas
        self._settings = settings._replace(hash_keys=new_hash_keys(rng))
        self._threads = threads
        self._backoff_s = backoff_ms / 1000
        self._now_ms = now_ms
        self._sleep = sleep
        self._in_progress: set[TopicPartition] = set()
        self._checkpoints: dict[Path, dict[TopicPartition, int]] = {}
        self._worker_process = worker_process
        self._idle_workers: list[CleanerWorker] = []  # worker processes not running a pass now
        self.stats = CleanerStatistics()

    async def run(self) -> None:
        try:
            async with asyncio.TaskGroup() as group:
                for n in range(self._threads):
                    group.create_task(self._worker(), name=f"log-cleaner-{n}")
        finally:
            self.close()

    def close(self) -> None:
        """Stop the idle worker processes (a busy one stops when its pass is cancelled)."""
        workers, self._idle_workers = self._idle_workers, []
        for worker in workers:
            worker.close()

    async def _worker(self) -> None:
        while True:
            partition = self._next_partition()
            if partition is None:
                await self._sleep(self._backoff_s)
                continue
            tp = (partition.topic, partition.partition)
            self._in_progress.add(tp)
            try:
                await self.clean(partition)
            finally:
                self._in_progress.discard(tp)
            await asyncio.sleep(0)  # let the loop serve requests between passes

    def _next_partition(self):
        candidates, by_tp = [], {}
        for partition in self._replicas.partitions():
            log = partition.log
            tp = (partition.topic, partition.partition)
            if ("compact" not in log.config.cleanup_policy or tp in self._in_progress
                    or tp in self.stats.uncleanable or log.is_offline):
                continue
            section = cleanable_section(
                summarize(log.segments), log_start_offset=log.log_start_offset, checkpoint=self._checkpoint(tp, log),
                high_watermark=partition.high_watermark, last_stable_offset=partition.last_stable_offset,
                now_ms=self._now_ms(), min_compaction_lag_ms=log.config.min_compaction_lag_ms,
                max_compaction_lag_ms=log.config.max_compaction_lag_ms)
            self.stats.dirty_ratio[tp] = section.dirty_ratio
            candidates.append((tp, section, log.config.min_cleanable_dirty_ratio))
            by_tp[tp] = partition
        chosen = choose_log(candidates)
        return by_tp.get(chosen)

    async def clean(self, partition) -> int | None:
        """One pass over ``partition``'s log; the new first dirty offset, or None (nothing to do,
        or the log became uncleanable)."""
        log, tp = partition.log, (partition.topic, partition.partition)
        try:
            cleaning = begin_pass(
                log, checkpoint=self._checkpoint(tp, log), high_watermark=partition.high_watermark,
                last_stable_offset=partition.last_stable_offset, now_ms=self._now_ms(),
                producer_last_offsets={e.producer_id: e.last_offset for e in partition.producer_state.entries()},
                aborted=_aborted_transactions(partition), settings=self._settings)
        except OSError as exc:
            return self._mark_uncleanable(tp, exc)
        if cleaning is None:
            return None
        try:
            await self._run_pass(cleaning)
            stats = cleaning.stats()
            self.stats.passes += 1
            self.stats.bytes_read += stats.bytes_read
            self.stats.bytes_written += stats.bytes_written
            self.stats.stale_groups += stats.stale_groups
            if stats.stale_groups:  # the log changed under the pass: its dirty part stays dirty
                logger.info("cleaning %s-%d: the log changed during the pass, %d groups not swapped", *tp,
                            stats.stale_groups)
                return None
            self._write_checkpoint(tp, cleaning.end_offset)
            logger.info("cleaned %s-%d: %d -> %d bytes, first dirty offset now %d", *tp, stats.bytes_read,
                        stats.bytes_written, cleaning.end_offset)
            return cleaning.end_offset
        except Exception as exc:  # any failure of one log's pass: that log stops being cleaned ...
            if cleaning.log_changed:  # ... unless the log was cut under the pass (a follower's
                # truncation): the pass is dropped, the next one plans afresh (Kafka aborts it)
                logger.info("cleaning %s-%d: dropped, the log changed during the pass (%s)", *tp, exc)
                self.stats.aborted_passes += 1
                return None
            return self._mark_uncleanable(tp, exc)
        finally:
            cleaning.close()

    async def _run_pass(self, cleaning) -> None:
        if not self._worker_process:
            await asyncio.to_thread(cleaning.build_map)
            for group in cleaning.groups:
                cleaned = await asyncio.to_thread(cleaning.clean, group)
                cleaning.swap(group, cleaned)
            return
        worker = self._idle_workers.pop() if self._idle_workers else CleanerWorker()
        try:
            await worker.run_pass(cleaning)
        finally:
            self._idle_workers.append(worker)  # closed after a failure: it starts afresh

    def _mark_uncleanable(self, tp: TopicPartition, exc: BaseException) -> None:
        logger.error("log %s-%d is uncleanable from now on: %s", *tp, exc, exc_info=exc)
        self.stats.uncleanable[tp] = f"{type(exc).__name__}: {exc}"
        log_dir = self._log_dir(tp)
        if log_dir is not None:
            self._checkpoints_of(log_dir)  # the directory's stale file is gone before the first write
            in_dir = {p: error for p, error in self.stats.uncleanable.items() if self._log_dir(p) == log_dir}
            try:
                write_uncleanable(log_dir, in_dir)
            except OSError as write_error:  # e.g. the full disk that made the log uncleanable
                logger.warning("could not write %s's uncleanable-partitions: %s", log_dir, write_error)
        return None

    def _log_dir(self, tp: TopicPartition) -> Path | None:
        return self._replicas.log_manager.log_dir_of(*tp)

    def _checkpoints_of(self, log_dir: Path) -> dict[TopicPartition, int]:
        if log_dir not in self._checkpoints:
            try:
                clear_uncleanable(log_dir)  # left by an earlier run of the broker
            except OSError as exc:
                logger.warning("could not remove %s's uncleanable-partitions: %s", log_dir, exc)
            try:
                self._checkpoints[log_dir] = read_checkpoint(log_dir / CLEANER_CHECKPOINT)
            except CheckpointError as exc:  # as Kafka: a bad file means every log is dirty again
                logger.warning("ignoring %s: %s", log_dir / CLEANER_CHECKPOINT, exc)
                self._checkpoints[log_dir] = {}
        return self._checkpoints[log_dir]

    def _checkpoint(self, tp: TopicPartition, log) -> int | None:
        """The first dirty offset ``cleaner-offset-checkpoint`` holds for ``tp``, lowered (and
        written) to where a truncation since the last look left the log: what was appended
        after it was never mapped (Kafka ``LogManager.truncateTo`` -> ``maybeTruncateCheckpoint``)."""
        log_dir = self._log_dir(tp)
        if log_dir is None:
            return None
        checkpoint = self._checkpoints_of(log_dir).get(tp)
        truncated_to = log.take_truncation_offset()
        if checkpoint is not None and truncated_to is not None and truncated_to < checkpoint:
            logger.info("%s-%d was truncated to %d: first dirty offset %d -> %d", *tp, truncated_to,
                        checkpoint, truncated_to)
            self._write_checkpoint(tp, truncated_to)
            checkpoint = truncated_to
        return checkpoint

    def _write_checkpoint(self, tp: TopicPartition, offset: int) -> None:
        log_dir = self._log_dir(tp)
        if log_dir is None:
            return
        entries = self._checkpoints_of(log_dir)
        entries[tp] = offset
        live = {p for p in entries if self._replicas.get(*p) is not None}
        write_checkpoint(log_dir / CLEANER_CHECKPOINT, {p: o for p, o in entries.items() if p in live})

    def statistics(self) -> CleanerStatistics:
        return self.stats


def _aborted_transactions(partition) -> list[AbortedTxn]:
    """The aborted transactions of the partition's ``.txnindex``: the pass drops their records
    (retention rule 3; transactions, issue 15)."""
    index = getattr(partition, "txn_index", None)
    if index is None or not len(index):
        return []
    return [AbortedTxn(e.producer_id, e.first_offset, e.last_offset) for e in index.entries()]
