"""The exactly-once sink's commit log: a compacted topic on the sink's cluster, keyed by
transactional id prefix, whose latest record per prefix is that prefix's last commit intent (or
``done`` record, or a tombstone once a batch job finished). ``spark_log.transactions`` explains
the records and why they live here and not in the checkpoint directory; this module creates the
topic and reads it back (the ``Committer`` appends with the producer it keeps)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from broker.client import AdminClient, Consumer, KafkaError
from broker.wire import ErrorCode

if TYPE_CHECKING:
    from spark_log.transactions import TxnSettings

__all__ = ["DEFAULT_COMMIT_LOG_TOPIC", "ensure_topic", "read_commit_log", "read_commit_log_from"]

DEFAULT_COMMIT_LOG_TOPIC = "pylog-spark-commits"
COMMIT_LOG_MAX_REPLICAS = 3  # RF 3 where the cluster has 3 brokers, min ISR 2: an intent survives a broker


def ensure_topic(settings: TxnSettings) -> None:
    """Create the commit log topic (one partition, compacted) unless it exists; a concurrent
    creator's TOPIC_ALREADY_EXISTS is fine."""
    with AdminClient(settings.bootstrap_servers,
                     config=settings.client_config("pylog-spark-commit-log-admin")) as admin:
        if settings.commit_log_topic in admin.list_topics():
            return
        replicas = min(COMMIT_LOG_MAX_REPLICAS, len(admin.cluster.refresh(None).brokers))
        try:
            admin.create_topics(settings.commit_log_topic, 1, replicas,
                                {"cleanup.policy": "compact", "min.insync.replicas": str(min(2, replicas))})
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise


def read_commit_log(settings: TxnSettings, only_key: str | None = None) -> dict[str, dict | None]:
    """The latest record per key (prefix) of the commit log, read from the start of its one
    partition (compaction keeps it short); a tombstone reads as None. ``only_key``: keep only it."""
    return read_commit_log_from(settings, only_key)[0]


def read_commit_log_from(settings: TxnSettings, only_key: str | None = None,
                         start: int | None = None) -> tuple[dict[str, dict | None], int | None]:
    """``read_commit_log`` from ``start`` (None: the beginning), and the end offset it read up to
    (None: no commit log yet)."""
    tp = (settings.commit_log_topic, 0)
    latest: dict[str, dict | None] = {}
    with Consumer(settings.bootstrap_servers, auto_offset_reset="earliest",
                  config=settings.client_config("pylog-spark-commit-log-reader")) as consumer:
        try:
            end = consumer.end_offsets([tp])[tp]
        except KafkaError as exc:
            if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                return {}, None
            raise
        consumer.assign([tp])
        if start is None:
            consumer.seek_to_beginning([tp])
        else:
            consumer.seek(tp, start)
        wanted = None if only_key is None else only_key.encode()
        while consumer.position(tp) < end:
            for record in consumer.poll(timeout_ms=1000):
                if record.key is None or (wanted is not None and record.key != wanted):
                    continue
                latest[record.key.decode()] = None if record.value is None else json.loads(record.value)
    return latest, end
