"""Batch and streaming sink: ``df.write.format("pylog")`` and ``df.writeStream.format("pylog")``.

Columns (Spark's Kafka sink): ``value`` (required), ``key``, ``topic`` (unless the ``topic``
option is set; the option wins), ``partition`` (null or absent: the producer's partitioner),
``headers``; string or binary. Producer settings come from ``kafka.*`` options.

Guarantee (``deliveryGuarantee``): ``at-least-once`` (the default), like Spark's Kafka sink: each
task sends its rows and flushes before it returns, so rows are visible before the driver's
commit; a retried task or batch writes its rows again. ``exactly-once``: each task writes inside a
Kafka transaction that it prepares and returns in its ``WrittenRecords`` message; the driver's
``commit`` records the intent and completes them (``spark_log.transactions``), ``abort`` aborts
them, and a stream's writer first recovers what a dead driver left (roll forward or abort).
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass, field

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from spark_log._io import WriteSettings, write_batches, write_transaction
from spark_log.offsets import TopicPartition, format_partitions
from spark_log.options import OptionError, SinkOptions
from spark_log.recover import recover_batch_jobs
from spark_log.transactions import (
    TEST_TASK_FAULT_ENV,
    Committer,
    TxnSettings,
    batch_prefix,
    test_task_fault,
    transactional_id,
)

__all__ = ["WrittenRecords", "PylogWriter", "PylogStreamWriter", "read_query_id"]

log = logging.getLogger(__name__)


@dataclass
class WrittenRecords(WriterCommitMessage):
    """One task's result: records written per topic-partition, and which task attempt wrote them
    (the identity a transactional commit will need)."""

    records: dict[TopicPartition, int] = field(default_factory=dict)
    partition_id: int = -1
    attempt: int = -1
    batch_id: int | None = None
    prepared: object = None  # broker.client.PreparedTransaction of an exactly-once task, if any rows
    coordinator: int | None = None  # its transaction coordinator's node id: the driver skips FindCoordinator

    @property
    def total(self) -> int:
        return sum(self.records.values())


def _task_identity() -> tuple[int, int, int | None, int]:
    """(partition id, attempt number, micro-batch id or None, task attempt id: unique in the app)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return -1, -1, None, -1
    batch = context.getLocalProperty("streaming.sql.batchId")
    return (context.partitionId(), context.attemptNumber(), None if batch is None else int(batch),
            context.taskAttemptId())


# Set in the environment of Spark's Python workers (e.g. by the driver before the session starts)
# to write one cProfile file per task into this directory. py-spy cannot attach to the workers
# on every machine, and the per-process CPU split alone does not say which code to fix.
PROFILE_DIR_ENV = "PYLOG_WRITE_PROFILE_DIR"
# Set in the driver's environment (before the session starts) to append "<batch> <ms>" per
# exactly-once stream commit to this file: the driver's commit time, for bench/spark_exactly_once.py.
COMMIT_TIMES_ENV = "PYLOG_SPARK_COMMIT_TIMES"


def _write(settings: WriteSettings, iterator, txn: TxnSettings | None = None) -> WrittenRecords:
    partition_id, attempt, batch_id, task_attempt_id = _task_identity()
    if txn is not None:
        tid = transactional_id(txn.prefix, batch_id or 0, partition_id, attempt, task_attempt_id)
        hook = (lambda producer: test_task_fault(batch_id or 0, partition_id, producer)) \
            if os.environ.get(TEST_TASK_FAULT_ENV) else None
        write = lambda: write_transaction(settings, iterator, tid, txn.transaction_timeout_ms, hook)  # noqa: E731
    else:
        write = lambda: (write_batches(settings, iterator), None, None)  # noqa: E731
    profile_dir = os.environ.get(PROFILE_DIR_ENV)
    written, prepared, coordinator = _profiled(profile_dir, partition_id, write) if profile_dir else write()
    return WrittenRecords(written, partition_id, attempt, batch_id, prepared, coordinator)


def read_query_id(checkpoint_location: str | None) -> str | None:
    """The query id Spark keeps in ``<checkpointLocation>/metadata`` (``{"id": "<uuid>"}``, written
    when a query first starts from an empty checkpoint, kept across restarts, new after the
    checkpoint is deleted). Read only for a local path (no scheme, or ``file:``): HDFS/S3 would need
    their clients here. None when it can't be read."""
    if not checkpoint_location:
        return None
    from urllib.parse import urlparse

    parsed = urlparse(checkpoint_location)
    if parsed.scheme == "file":
        path = parsed.path
    elif parsed.scheme:
        return None  # s3a://, hdfs://, ...: not a local path
    else:
        path = checkpoint_location
    try:
        with open(os.path.join(path, "metadata")) as f:
            first = f.readline()
        query_id = json.loads(first).get("id")
    except (OSError, ValueError, AttributeError):
        return None
    return query_id if isinstance(query_id, str) and query_id else None


def _txn_settings(options: SinkOptions, prefix: str | None, query_id: str | None = None) -> TxnSettings | None:
    if not options.exactly_once:
        return None
    timeout = options.producer.get("request_timeout_ms")
    config = options.producer.get("config")  # the tasks' kafka.security/sasl/ssl options
    return TxnSettings(prefix, options.transaction_timeout_ms, options.commit_log_topic,
                       options.bootstrap_servers, int(timeout) if timeout else 30_000,
                       getattr(config, "security", None), query_id, options.checkpoint_location)


def _prepared(messages) -> list:
    return [m.prepared for m in messages if isinstance(m, WrittenRecords) and m.prepared is not None]


def _coordinators(messages) -> dict[str, int]:
    """Transactional id -> the coordinator node its task found (``Committer.commit``'s hint)."""
    return {m.prepared.transactional_id: m.coordinator for m in messages
            if isinstance(m, WrittenRecords) and m.prepared is not None and m.coordinator is not None}


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
    """``df.write``. Exactly-once: all or nothing, every task's transaction committed by the
    driver's ``commit`` or none. A batch job is not restarted: a fresh prefix per job, and its
    commit intent is rolled forward by the next exactly-once batch job's writer (built on the
    driver before any task runs) or by ``python -m spark_log.recover`` (``spark_log.recover``)."""

    def __init__(self, options: SinkOptions) -> None:
        self._settings = write_settings(options)
        self._txn = _txn_settings(options, options.transactional_id_prefix or batch_prefix())
        if self._txn is not None:
            recover_batch_jobs(self._txn)

    def write(self, iterator) -> WrittenRecords:
        return _write(self._settings, iterator, self._txn)

    def commit(self, messages) -> None:
        if self._txn is not None:
            committer = Committer(self._txn)
            committer.commit(_prepared(messages), 0, batch_job=True,  # sweeps failed / losing attempts
                             coordinators=_coordinators(messages))
        log.info("pylog batch write committed: %s", _summary(messages))

    def abort(self, messages) -> None:
        if self._txn is not None:
            Committer(self._txn).abort(_prepared(messages), _coordinators(messages))
            log.warning("pylog batch write aborted; its transactions aborted: %s", _summary(messages))
            return
        # At-least-once: what the finished tasks sent stays in the log.
        log.warning("pylog batch write aborted; records already sent stay written: %s", _summary(messages))


class PylogStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream``. Spark asks for a new writer (on the driver) for every micro-batch,
    before its tasks run: the exactly-once writer recovers there (``Committer.recover``)."""

    def __init__(self, options: SinkOptions) -> None:
        self._settings = write_settings(options)
        self._txn = None
        if options.exactly_once:
            if options.transactional_id_prefix is None:
                raise OptionError("deliveryGuarantee 'exactly-once' needs a stable transactional id prefix: "
                                  "set the 'checkpointLocation' option on writeStream (the prefix is derived "
                                  "from it) or 'transactionalIdPrefix'")
            # Built on the driver, where a local checkpoint's metadata file is: the query id
            # tells a new query reusing the checkpoint path from a restart of the old one.
            self._txn = _txn_settings(options, options.transactional_id_prefix,
                                      read_query_id(options.checkpoint_location))
            Committer(self._txn).recover()

    def write(self, iterator) -> WrittenRecords:
        return _write(self._settings, iterator, self._txn)

    def commit(self, messages, batchId: int) -> None:
        if self._txn is not None:
            started = time.perf_counter()
            committer = Committer(self._txn)
            committer.commit(_prepared(messages), batchId,  # sweeps failed / losing attempts too
                             coordinators=_coordinators(messages))
            elapsed_ms = (time.perf_counter() - started) * 1000
            log.info("pylog stream batch %d committed in %.1f ms: %s", batchId, elapsed_ms, _summary(messages))
            times = os.environ.get(COMMIT_TIMES_ENV)
            if times:
                with open(times, "a") as out:
                    phases = " ".join(f"{k}={v:.1f}" for k, v in committer.phases.items())
                    out.write(f"{batchId} {elapsed_ms:.3f} pid={os.getpid()} {phases}\n")
            return
        log.info("pylog stream batch %d committed: %s", batchId, _summary(messages))

    def abort(self, messages, batchId: int) -> None:
        if self._txn is not None:
            Committer(self._txn).abort(_prepared(messages), _coordinators(messages))
            log.warning("pylog stream batch %d aborted; its transactions aborted: %s", batchId, _summary(messages))
            return
        log.warning("pylog stream batch %d aborted; records already sent stay written: %s",
                    batchId, _summary(messages))
