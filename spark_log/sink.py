"""Batch and streaming sink: ``df.write.format("pylog")`` and ``df.writeStream.format("pylog")``.

Columns (Spark's Kafka sink): ``value`` (required), ``key``, ``topic`` (unless the ``topic``
option is set; the option wins), ``partition`` (null or absent: the producer's partitioner),
``headers``; string or binary. Producer settings come from ``kafka.*`` options.

Guarantee: at-least-once, like Spark's Kafka sink. Each task sends its rows and flushes before it
returns, so rows are visible before the driver's commit; a retried task or batch writes its rows
again. The shape is the one a transactional sink needs: ``write`` returns a ``WrittenRecords``
message and the driver's ``commit(messages[, batchId])`` is the step that will publish staged
writes once the broker has transactions (DESIGN "Spark write and exactly-once").
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from spark_log._io import WriteSettings, write_batches
from spark_log.offsets import TopicPartition, format_partitions
from spark_log.options import SinkOptions

__all__ = ["WrittenRecords", "PylogWriter", "PylogStreamWriter"]

log = logging.getLogger(__name__)


@dataclass
class WrittenRecords(WriterCommitMessage):
    """One task's result: records written per topic-partition, and which task attempt wrote them
    (the identity a transactional commit will need)."""

    records: dict[TopicPartition, int] = field(default_factory=dict)
    partition_id: int = -1
    attempt: int = -1
    batch_id: int | None = None

    @property
    def total(self) -> int:
        return sum(self.records.values())


def _task_identity() -> tuple[int, int, int | None]:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return -1, -1, None
    batch = context.getLocalProperty("streaming.sql.batchId")
    return context.partitionId(), context.attemptNumber(), None if batch is None else int(batch)


# Set in the environment of Spark's Python workers (e.g. by the driver before the session starts)
# to write one cProfile file per task into this directory. py-spy cannot attach to the workers
# on every machine, and the per-process CPU split alone does not say which code to fix.
PROFILE_DIR_ENV = "PYLOG_WRITE_PROFILE_DIR"


def _write(settings: WriteSettings, iterator) -> WrittenRecords:
    partition_id, attempt, batch_id = _task_identity()
    profile_dir = os.environ.get(PROFILE_DIR_ENV)
    if profile_dir:
        written = _profiled(profile_dir, partition_id, lambda: write_batches(settings, iterator))
    else:
        written = write_batches(settings, iterator)
    return WrittenRecords(written, partition_id, attempt, batch_id)


def _profiled(profile_dir: str, partition_id: int, fn):
    import cProfile

    # Thread CPU time, not wall time: on a shared machine a wall-clock profile mostly measures
    # waiting (for the JVM's next Arrow batch, for a core). The producer's I/O thread is not
    # in this profile; the task thread sends most requests itself (Sender.help).
    profiler = cProfile.Profile(time.thread_time)
    try:
        return profiler.runcall(fn)
    finally:
        profiler.dump_stats(os.path.join(profile_dir, f"write-{os.getpid()}-{partition_id}-{time.time_ns()}.prof"))


def _summary(messages) -> str:
    done = [m for m in messages if isinstance(m, WrittenRecords)]
    records: dict[TopicPartition, int] = {}
    for m in done:
        for tp, n in m.records.items():
            records[tp] = records.get(tp, 0) + n
    return f"{sum(records.values())} records to {format_partitions(records) or 'no partitions'} " \
           f"from {len(done)} of {len(messages)} tasks"


def write_settings(options: SinkOptions) -> WriteSettings:
    return WriteSettings(options.bootstrap_servers, dict(options.producer), options.topic)


class PylogWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self._settings = write_settings(options)

    def write(self, iterator) -> WrittenRecords:
        return _write(self._settings, iterator)

    def commit(self, messages) -> None:
        log.info("pylog batch write committed: %s", _summary(messages))

    def abort(self, messages) -> None:
        # At-least-once: what the finished tasks sent stays in the log.
        log.warning("pylog batch write aborted; records already sent stay written: %s", _summary(messages))


class PylogStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self._settings = write_settings(options)

    def write(self, iterator) -> WrittenRecords:
        return _write(self._settings, iterator)

    def commit(self, messages, batchId: int) -> None:
        log.info("pylog stream batch %d committed: %s", batchId, _summary(messages))

    def abort(self, messages, batchId: int) -> None:
        log.warning("pylog stream batch %d aborted; records already sent stay written: %s",
                    batchId, _summary(messages))
