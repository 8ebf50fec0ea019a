"""Driver-side steps that need the cluster: take a ``LogSnapshot`` for the planner, read and
commit the group's offsets. The decisions stay in ``spark_log.planner``; this module only asks
the questions the planner needs answered (through ``spark_log._io``) and retries them like
Spark's ``KafkaOffsetReaderAdmin.withRetries`` (``fetchOffset.numRetries``,
``fetchOffset.retryIntervalMs``).
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterable, Mapping, TypeVar

from broker.client import KafkaError
from broker.wire import ErrorCode

from spark_log import _io
from spark_log.offsets import TopicPartition
from spark_log.options import OffsetSpec, SourceOptions
from spark_log.planner import (
    BatchPlan,
    LogSnapshot,
    plan_batch,
    report_data_loss,
    resolve_subscription,
    timestamp_queries,
)

__all__ = ["open_view", "with_retries", "take_snapshot", "plan_batch_read", "fetch_group_offsets",
           "commit_group_offsets", "GroupCommitError"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")


def open_view(options: SourceOptions) -> _io.ClusterView:
    return _io.ClusterView(options.bootstrap_servers,
                           isolation_level=str(options.consumer.get("isolation_level", "read_uncommitted")),
                           request_timeout_ms=options.consumer.get("request_timeout_ms"),
                           config=options.consumer.get("config"))


def with_retries(options: SourceOptions, what: str, fn: Callable[[], _T], *,
                 retriable_only: bool = False) -> _T:
    """``fn()``, retried ``fetchOffset.numRetries`` times on cluster errors (with
    ``retriable_only``, not on a Kafka error that says retrying cannot help)."""
    attempt = 0
    while True:
        try:
            return fn()
        except (KafkaError, OSError) as exc:
            attempt += 1
            final = retriable_only and isinstance(exc, KafkaError) and not exc.retriable
            if final or attempt > options.fetch_offset_num_retries:
                raise
            log.warning("%s failed (attempt %d of %d): %s", what, attempt,
                        options.fetch_offset_num_retries + 1, exc)
            time.sleep(options.fetch_offset_retry_interval_ms / 1000)


class GroupCommitError(RuntimeError):
    """The group's offsets could not be committed (after ``fetchOffset.numRetries`` retries)."""


def _open_offset_store(options: SourceOptions):
    assert options.commits_to_store and options.group_id is not None, "no offsets store configured"
    return _io.open_offset_store(options.offsets_store, bootstrap_servers=options.bootstrap_servers,
                                 zookeeper_connect=options.zookeeper_connect,
                                 zookeeper_session_timeout_ms=options.zookeeper_session_timeout_ms,
                                 request_timeout_ms=options.consumer.get("request_timeout_ms"),
                                 config=options.consumer.get("config"))


def fetch_group_offsets(options: SourceOptions, topics: Iterable[str]) -> dict[TopicPartition, int]:
    """The group's committed offsets for ``topics`` from the configured store (``offsets.store``).
    Not retried here: ``take_snapshot`` retries the whole snapshot."""
    with _open_offset_store(options) as store:
        return store.fetch(options.group_id, sorted(set(topics)))


def commit_group_offsets(options: SourceOptions, offsets: Mapping[TopicPartition, int]) -> None:
    """Publish consumed offsets (the next offset to read per partition) to the group's store,
    retried like an offset fetch. A commit that still fails fails the query: the user asked for
    the offsets to be visible, and a lag tool showing a stalled group would be a silent lie."""
    if not offsets:
        return

    def commit() -> None:
        with _open_offset_store(options) as store:
            store.commit(options.group_id, offsets)

    what = f"committing the offsets of group {options.group_id!r} to the {options.offsets_store} offsets store"
    try:
        with_retries(options, what, commit, retriable_only=True)
    except (KafkaError, OSError) as exc:
        raise GroupCommitError(f"{what[0].upper()}{what[1:]} failed: {exc}. {_commit_hint(exc)}"
                               f"The query's checkpoint is not affected; 'offsets.store' = 'none' "
                               f"stops committing") from exc


_MEMBER_ERRORS = (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION, ErrorCode.REBALANCE_IN_PROGRESS)


def _commit_hint(exc: Exception) -> str:
    """Simple commits (no member id) are refused while the group has members: the id belongs to
    a consumer group that uses subscribe()."""
    if isinstance(exc, KafkaError) and exc.code in _MEMBER_ERRORS:
        return ("A Spark query commits as a group of its own, never as a member of a consumer group "
                "that uses subscribe(): give it another 'kafka.group.id'. ")
    return ""


def take_snapshot(
    view: _io.ClusterView, options: SourceOptions, specs: Iterable[OffsetSpec | None]
) -> LogSnapshot:
    """Partitions of the subscription, their earliest and latest offsets, the timestamp lookups
    ``specs`` need, and the group's offsets if a spec is ``group``."""
    def take() -> LogSnapshot:
        topics = view.topic_partitions()
        named = options.subscription.topics or tuple(t for t, _ in options.subscription.assigned)
        if any(t not in topics for t in named):  # not listed: absent, or hidden by the ACLs
            view.check_authorized({t for t in named if t not in topics})
        partitions, missing = resolve_subscription(options.subscription, topics)
        queries = [(tp, ts) for spec in specs for tp, ts in timestamp_queries(spec, partitions).items()]
        committed = {}
        if any(spec is not None and spec.kind == "group" for spec in specs):
            committed = fetch_group_offsets(options, {t for t, _ in partitions})
        return LogSnapshot(
            partitions=tuple(partitions),
            earliest=view.earliest(partitions),
            latest=view.latest(partitions),
            by_timestamp=view.offsets_for_times(queries),
            committed=committed,
            missing=tuple(missing),
        )

    return with_retries(options, "fetching offsets", take)


def plan_batch_read(options: SourceOptions) -> BatchPlan:
    """Plan a batch read; data loss found on the driver fails or is logged per failOnDataLoss."""
    with open_view(options) as view:
        snapshot = take_snapshot(view, options, [options.starting, options.ending])
    plan = plan_batch(options, snapshot)
    report_data_loss(plan.losses, options.fail_on_data_loss, log.warning)
    return plan
