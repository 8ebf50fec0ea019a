"""The connector's only door to the cluster: every ``broker.client`` call and every conversion
between records and Arrow lives here, so the rest of ``spark_log`` is planning and Spark glue.

- ``ClusterView`` (driver): topics and partitions, earliest/latest offsets, offset-for-timestamp.
- ``read_range`` (executor): the records of one ``OffsetRange`` as Arrow batches in the Kafka
  source schema, with the executor-side data-loss check against the log start offset.
- ``write_batches`` (executor): Arrow batches of (topic, key, value, partition, headers) to a
  producer; returns what was written per topic-partition.
- ``open_offset_store``: the group's offset store of ``broker.client.offset_store``
  (``ZkOffsetStore`` or ``KafkaOffsetStore``: the same commit/fetch/close interface).

Arrow all the way: reads use ``Consumer.poll_arrow`` and writes ``Producer.send_arrow``, both
converting with ``broker.records.arrow`` (``decode_batches``/``encode_batches``); no record is a
Python object on the hot path.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from broker.client import AdminClient, ClientConfig, Consumer, KafkaError, PreparedTransaction, Producer
from broker.client.offset_store import ZkOffsetStore
from broker.wire import ErrorCode

from spark_log.offsets import TopicPartition
from spark_log.planner import (
    FAIL_ON_DATA_LOSS_FALSE,
    FAIL_ON_DATA_LOSS_TRUE,
    DataLossError,
    OffsetRange,
)

__all__ = [
    "ARROW_SCHEMA",
    "ARROW_SCHEMA_WITH_HEADERS",
    "ClusterView",
    "ReadSettings",
    "read_range",
    "WriteSettings",
    "write_batches",
    "write_transaction",
    "open_offset_store",
]

log = logging.getLogger(__name__)



def __getattr__(name: str):
    """``ARROW_SCHEMA`` and ``ARROW_SCHEMA_WITH_HEADERS`` (``broker.records.arrow``'s Spark Kafka
    schemas), imported on first use: that module loads the numba kernels (1-2 s), which the
    driver-side Python processes Spark starts per streaming query and per sink commit never need."""
    if name in ("ARROW_SCHEMA", "ARROW_SCHEMA_WITH_HEADERS"):
        from broker.records import arrow

        return arrow.SPARK_KAFKA_SCHEMA if name == "ARROW_SCHEMA" else arrow.SPARK_KAFKA_SCHEMA_WITH_HEADERS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

# Fetch up to this much of a partition per request (kafka.max.partition.fetch.bytes overrides):
# a Spark task reads one partition, so bigger fetches mean fewer round trips and bigger Arrow
# batches for the JVM (reading 5M x 100 B, Parquet time / pylog time in the same run went from
# 0.43 with 4 MiB to 0.51-0.53 with 16 MiB; noisy). Memory: one fetch in flight per task.
PARTITION_FETCH_BYTES = 16 << 20


# ---------------------------------------------------------------------------------- driver side

class ClusterView:
    """Driver-side lookups over one ``AdminClient``. Not picklable; ``close()`` when done."""

    def __init__(self, bootstrap_servers: str, *, isolation_level: str = "read_uncommitted",
                 request_timeout_ms: int | None = None, client_id: str = "pylog-spark-driver",
                 config: ClientConfig | None = None) -> None:
        """``config``: the options' client config (TLS/SASL), None for PLAINTEXT."""
        config = (config or ClientConfig()).with_(client_id=client_id)
        if request_timeout_ms is not None:
            config = config.with_(request_timeout_ms=request_timeout_ms)
        self._admin = AdminClient(bootstrap_servers, config=config)
        self._isolation = isolation_level

    def close(self) -> None:
        self._admin.close()

    def __enter__(self) -> "ClusterView":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def topic_partitions(self) -> dict[str, list[int]]:
        """Every non-internal topic with its partition ids, fresh from the cluster (one Metadata
        request). Topics being created or deleted (an error code) are left out."""
        snapshot = self._admin.cluster.refresh(None)
        return {name: sorted(meta.partitions) for name, meta in snapshot.topics.items()
                if meta.error_code == ErrorCode.NONE and not meta.is_internal and meta.partitions}

    def check_authorized(self, topics: Iterable[str]) -> None:
        """Ask for ``topics`` by name (topics a full listing left out): a topic the principal may
        not describe is hidden from the listing but answered TOPIC_AUTHORIZATION_FAILED when
        named, which fails the query as Kafka's consumer does (TopicAuthorizationException),
        instead of reading it as an empty topic. Topics that do not exist pass."""
        snapshot = self._admin.cluster.refresh(topics)
        denied = sorted(name for name, meta in snapshot.topics.items()
                        if meta.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        if denied:
            raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                             f"Not authorized to access topics: [{', '.join(denied)}]")

    def earliest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list(tps, "earliest")

    def latest(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._list(tps, "latest")

    def offsets_for_times(
        self, queries: Iterable[tuple[TopicPartition, int]]
    ) -> dict[tuple[TopicPartition, int], int]:
        """``{(tp, ts): first offset with a timestamp >= ts, or -1}`` for each ``(tp, ts)``."""
        by_ts: dict[int, list[TopicPartition]] = defaultdict(list)
        for tp, ts in set(queries):
            by_ts[ts].append(tp)
        out = {}
        for ts, tps in by_ts.items():
            for tp, off in self._list(tps, ts).items():
                out[(tp, ts)] = off
        return out

    def _list(self, tps: Iterable[TopicPartition], spec) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in tps:
            by_topic[topic].append(partition)
        out = {}
        for topic, partitions in by_topic.items():
            answer = self._admin.list_offsets(topic, partitions, spec, isolation_level=self._isolation)
            out.update({(topic, p): off for p, off in answer.items()})
        return out


def open_offset_store(store: str, *, bootstrap_servers: str, zookeeper_connect: str | None,
                      zookeeper_session_timeout_ms: int, request_timeout_ms: int | None = None,
                      config: ClientConfig | None = None):
    """The store named by the ``offsets.store`` option, connected; ``close()`` (or ``with``) it.
    ``kafka``: Kafka's ``__consumer_offsets`` through the group coordinator of
    ``bootstrap_servers``; ``zookeeper``: ``/consumers/<group>/offsets`` under ``zookeeper_connect``."""
    if store == "zookeeper":
        assert zookeeper_connect is not None, "the options check that zookeeper.connect is set"
        return ZkOffsetStore(zookeeper_connect, session_timeout_ms=zookeeper_session_timeout_ms)
    assert store == "kafka", f"unknown offsets store {store!r}"
    from broker.client.offset_store import KafkaOffsetStore  # only queries that use it need it

    config = (config or ClientConfig()).with_(client_id="pylog-spark-offsets")
    if request_timeout_ms is not None:
        config = config.with_(request_timeout_ms=request_timeout_ms)
    return KafkaOffsetStore(bootstrap_servers, config=config)


# ---------------------------------------------------------------------------------- read

@dataclass(frozen=True)
class ReadSettings:
    """What an executor needs to read a range; plain data, pickled into each task."""

    bootstrap_servers: str
    consumer: Mapping[str, object]
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int


def _data_loss(settings: ReadSettings, message: str) -> None:
    if settings.fail_on_data_loss:
        raise DataLossError(f"{message}. {FAIL_ON_DATA_LOSS_TRUE}")
    log.warning("%s. %s", message, FAIL_ON_DATA_LOSS_FALSE)


def read_range(settings: ReadSettings, r: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of ``[r.from_offset, r.until_offset)`` as Arrow batches in the Kafka source
    schema (``Consumer.poll_arrow``, decoded column-wise by ``broker.records.arrow``). Offsets
    below the log start offset are data loss (retention or DeleteRecords removed them): fail, or
    skip to the first offset still there (failOnDataLoss false). Gaps inside the range
    (compaction, transaction markers) are normal."""
    tp = r.tp
    kwargs = {"max_partition_fetch_bytes": PARTITION_FETCH_BYTES, **settings.consumer}
    kwargs.setdefault("client_id", "pylog-spark-executor")
    with Consumer(settings.bootstrap_servers, auto_offset_reset="none",
                  include_headers=settings.include_headers, **kwargs) as consumer:
        consumer.assign([tp])
        position = _first_readable(consumer, settings, r, r.from_offset)
        if position is None:
            return
        consumer.seek(tp, position)
        while position < r.until_offset:
            try:
                data = consumer.poll_arrow(timeout_ms=settings.poll_timeout_ms)
            except KafkaError as exc:
                if exc.code != ErrorCode.OFFSET_OUT_OF_RANGE:
                    raise
                position = _first_readable(consumer, settings, r, position)
                if position is None:
                    return
                consumer.seek(tp, position)
                continue
            if data.num_rows == 0 and consumer.position(tp) == position:
                if _stalled(consumer, settings, r, position):
                    return
                continue
            if isinstance(data, pa.Table) and data.num_rows:
                # One Arrow batch per poll (up to PARTITION_FETCH_BYTES, ~150k rows of 100 B)
                # rather than one per record batch (~9k rows of 1 MiB): Spark's JVM pays per
                # batch it takes from a Python worker. Measured with a Python source yielding
                # from memory, 9k-row batches cost 2.53 CPU-s of JVM per 5M rows, 37k-row ones
                # 2.08; the join costs the worker one copy (~0.1 s per 500 MB).
                data = data.combine_chunks()
            for batch in (data.to_batches() if isinstance(data, pa.Table) else [data]):
                batch = _below(batch, r.until_offset)
                if batch.num_rows:
                    yield _null_empty_headers(batch) if settings.include_headers else batch
            position = consumer.position(tp)


def _null_empty_headers(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``headers`` null for a record without headers, not an empty array: Spark's Kafka source
    does so (KafkaRecordToRowConverter), and a job moved between the two must see the same rows
    (``headers IS NULL``, ``size(headers)`` = -1). The lists' entries are not copied."""
    column = batch.schema.get_field_index("headers")
    headers = batch.column(column)
    empty = pc.equal(pc.list_value_length(headers), 0)
    if not pc.any(empty).as_py():
        return batch
    mask = pc.or_(empty, pc.is_null(headers))
    offsets = pa.array(headers.offsets.to_numpy(), pa.int32())  # unsliced, as a mask requires
    nulled = pa.ListArray.from_arrays(offsets, headers.values, type=headers.type, mask=mask)
    return batch.set_column(column, batch.schema.field(column), nulled)


def _below(batch: pa.RecordBatch, until_offset: int) -> pa.RecordBatch:
    """The rows of ``batch`` (one partition, offsets ascending) with offset < ``until_offset``."""
    if batch.num_rows == 0:
        return batch
    offsets = batch.column(4)  # "offset" in the source schema
    if offsets[batch.num_rows - 1].as_py() < until_offset:
        return batch
    keep = int(np.searchsorted(offsets.to_numpy(), until_offset, side="left"))
    return batch.slice(0, keep)


def _first_readable(consumer: Consumer, settings: ReadSettings, r: OffsetRange, wanted: int) -> int | None:
    """``wanted``, or the log start offset if retention moved past it (data loss); None when
    nothing of the range is left."""
    earliest = consumer.beginning_offsets([r.tp])[r.tp]
    if earliest <= wanted:
        return wanted
    lost_until = min(earliest, r.until_offset)
    _data_loss(settings, f"Cannot fetch offsets {wanted} to {lost_until - 1} of {r.topic}-{r.partition}: "
                         f"the log now starts at {earliest}")
    return earliest if earliest < r.until_offset else None


def _stalled(consumer: Consumer, settings: ReadSettings, r: OffsetRange, position: int) -> bool:
    """A poll brought nothing for the whole poll timeout. True (stop) if the partition's end
    moved below the range (records lost); otherwise the broker is too slow: fail."""
    latest = consumer.end_offsets([r.tp])[r.tp]
    if latest < r.until_offset and latest <= position:
        _data_loss(settings, f"Cannot fetch offsets {position} to {r.until_offset - 1} of "
                             f"{r.topic}-{r.partition}: the log now ends at {latest}")
        return True
    raise TimeoutError(f"{r.topic}-{r.partition}: no records at offset {position} within "
                       f"kafkaConsumer.pollTimeoutMs ({settings.poll_timeout_ms} ms); the log ends at {latest}")


# ---------------------------------------------------------------------------------- write

@dataclass(frozen=True)
class WriteSettings:
    bootstrap_servers: str
    producer: Mapping[str, object]
    topic: str | None  # the 'topic' option; wins over the column


# Spark hands the writer Arrow batches of spark.sql.execution.arrow.maxRecordsPerBatch rows
# (10,000 by default: ~1.1 MB of 100-byte values). Each send_arrow call is cut into batches of
# kafka.batch.size and ends in a part-full one, so one call per Spark batch meant a 1 MiB Produce
# request plus a ~0.1 MiB one for every 10,000 rows: twice the requests the bytes need, each with
# its fixed cost in the writer and in the broker. Joining Spark's batches into runs of at least
# this many bytes leaves one part-full batch per run; the join copies the values once, which
# the encoder needs anyway (one contiguous column).
SEND_RUN_BYTES = 8 << 20


def _runs(batches: Iterable[pa.RecordBatch], run_bytes: int) -> Iterator[pa.Table]:
    """``batches`` joined, in order, into tables of at least ``run_bytes`` (the last may be less)."""
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        size += batch.nbytes
        if size >= run_bytes:
            yield pa.Table.from_batches(pending)
            pending, size = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def _by_topic(table: pa.Table, topic_option: str | None) -> Iterator[tuple[str, pa.Table]]:
    """The rows per destination topic: the ``topic`` option, else the ``topic`` column."""
    if topic_option is not None:
        yield topic_option, table
        return
    topics = table.column("topic")
    if topics.null_count:
        raise ValueError("a row has a null 'topic' and no 'topic' option is set")
    names = pc.unique(topics).to_pylist()
    if len(names) == 1:
        yield names[0], table
        return
    for name in names:
        yield name, table.filter(pc.equal(topics, name))


def write_batches(settings: WriteSettings, batches: Iterable[pa.RecordBatch]) -> dict[TopicPartition, int]:
    """Send every row (``Producer.send_arrow``: encoded column-wise by
    ``broker.records.arrow.encode_batches``), flush, and return the records written per
    topic-partition. Raises the first delivery failure, so the Spark task fails and is retried
    (at-least-once)."""
    kwargs = dict(settings.producer)
    kwargs.setdefault("client_id", "pylog-spark-writer")
    with Producer(settings.bootstrap_servers, **kwargs) as producer:
        deliveries = _send_all(producer, settings, batches)
        producer.flush()
    return _written(deliveries)


def write_transaction(settings: WriteSettings, batches: Iterable[pa.RecordBatch], transactional_id: str,
                      transaction_timeout_ms: int, before_prepare=None,
                      ) -> tuple[dict[TopicPartition, int], PreparedTransaction | None, int | None]:
    """Phase one of the exactly-once write (``spark_log.transactions``): every row inside one
    transaction of ``transactional_id``, prepared (flushed, left open) for the driver to
    complete. None when the task had no rows (no transaction opened). A failure aborts the
    transaction before raising, so a failed attempt leaves nothing open behind it when it can.
    Also the node id of the transaction's coordinator (None: unknown), so the driver's EndTxn
    can go straight there."""
    kwargs = dict(settings.producer)
    kwargs.setdefault("client_id", "pylog-spark-writer")
    kwargs.pop("enable_idempotence", None)
    with Producer(settings.bootstrap_servers, transactional_id=transactional_id,
                  transaction_timeout_ms=transaction_timeout_ms, **kwargs) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        try:
            deliveries = _send_all(producer, settings, batches)
            if before_prepare is not None:
                before_prepare(producer)  # the tests' fault hook
            prepared = producer.prepare_transaction()
            coordinator = producer.transaction_coordinator
        except BaseException:
            try:
                producer.abort_transaction()
            except Exception as exc:  # the driver's sweep or the timeout ends it then
                log.warning("aborting %s after a failed write: %s", transactional_id, exc)
            raise
    written = _written(deliveries)
    return written, (prepared if prepared.partitions else None), coordinator


def _send_all(producer: Producer, settings: WriteSettings, batches: Iterable[pa.RecordBatch]) -> list:
    deliveries = []
    for table in _runs(batches, SEND_RUN_BYTES):
        has_headers = "headers" in table.schema.names
        with_partition = "partition" in table.schema.names
        for topic, rows in _by_topic(table, settings.topic):
            # A null partition is the partitioner's choice, resolved inside send_arrow
            # together with the given ones, so rows keep the task's order per partition.
            deliveries.append(producer.send_arrow(
                topic, rows, partition="partition" if with_partition else None,
                headers_column="headers" if has_headers else None))
    return deliveries


def _written(deliveries: list) -> dict[TopicPartition, int]:
    written: dict[TopicPartition, int] = defaultdict(int)
    for group in deliveries:
        for delivery in group.get():
            written[(delivery.topic, delivery.partition)] += delivery.record_count
    return dict(written)
