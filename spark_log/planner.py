"""Offset planning: options plus what the log looks like, in; offset ranges, out. Pure.

Everything the cluster knows reaches this module as data (``LogSnapshot``: the partitions, their
earliest and latest offsets, the answers to timestamp lookups, the group's committed offsets), so
every rule is tested without a broker or Spark. The I/O around it lives in ``spark_log._io``.

The rules are Spark's Kafka connector's (reference sections 1-4):

- ``resolve_offsets``: a ``KafkaOffsetRangeLimit`` to concrete offsets, with the
  "specific offsets must name every assigned partition" check and the timestamp no-match strategy.
- ``split_ranges``: ``KafkaOffsetRangeCalculator`` (``minPartitions``, ``maxRecordsPerPartition``).
- ``rate_limit``: ``maxOffsetsPerTrigger`` split across partitions in proportion to their backlog.
- ``delay_batch``: ``minOffsetsPerTrigger`` with ``maxTriggerDelay``.
- ``check_data_loss``: the four driver-side checks of ``getOffsetRangesFromResolvedOffsets``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

from spark_log.offsets import EARLIEST, LATEST, TopicPartition, format_partitions, sorted_partitions
from spark_log.options import OffsetSpec, OptionError, SourceOptions, Subscription

__all__ = [
    "OffsetRange",
    "LogSnapshot",
    "DataLoss",
    "DataLossError",
    "BatchPlan",
    "resolve_subscription",
    "timestamp_queries",
    "resolve_offsets",
    "split_ranges",
    "rate_limit",
    "delay_batch",
    "check_data_loss",
    "ranges_between",
    "plan_batch",
    "report_data_loss",
]

_INT64_MAX = 2**63 - 1

FAIL_ON_DATA_LOSS_TRUE = (
    "Some data may have been lost because they are not available any more; either the data was "
    "aged out by retention or the topic may have been deleted before all the data in the topic "
    "was processed. If you don't want your query to fail on such cases, set the source option "
    "'failOnDataLoss' to 'false'."
)
FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because they are not available any more; either the data was "
    "aged out by retention or the topic may have been deleted before all the data in the topic "
    "was processed. If you want your query to fail on such cases, set the source option "
    "'failOnDataLoss' to 'true'."
)


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Records ``[from_offset, until_offset)`` of one topic-partition: one Spark task."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    @property
    def size(self) -> int:
        """Offsets, not records: compaction and transaction markers make it an overestimate."""
        return self.until_offset - self.from_offset


@dataclass(frozen=True)
class LogSnapshot:
    """What the cluster said, at one moment, about the partitions a query reads."""

    partitions: tuple[TopicPartition, ...]
    earliest: Mapping[TopicPartition, int] = field(default_factory=dict)
    latest: Mapping[TopicPartition, int] = field(default_factory=dict)
    # (tp, timestamp ms) -> first offset with a timestamp >= it, or -1 when there is none
    by_timestamp: Mapping[tuple[TopicPartition, int], int] = field(default_factory=dict)
    committed: Mapping[TopicPartition, int] = field(default_factory=dict)
    missing: tuple[TopicPartition, ...] = ()  # assigned, but the cluster does not have them


@dataclass(frozen=True)
class DataLoss:
    """One of the data-loss cases; ``message`` says which partitions and offsets."""

    kind: str  # "new_partition_gone" | "new_partition_not_from_zero" | "partition_gone" | "offset_went_back" | "retention"
    message: str
    partitions: tuple[TopicPartition, ...] = ()


class DataLossError(RuntimeError):
    """Raised for data loss when ``failOnDataLoss`` is true (Spark: IllegalStateException)."""


@dataclass(frozen=True)
class BatchPlan:
    start: Mapping[TopicPartition, int]
    end: Mapping[TopicPartition, int]
    ranges: tuple[OffsetRange, ...]
    losses: tuple[DataLoss, ...] = ()


# ---------------------------------------------------------------------------------- subscription

def resolve_subscription(
    subscription: Subscription, topics: Mapping[str, Sequence[int]]
) -> tuple[list[TopicPartition], list[TopicPartition]]:
    """``(partitions to read, assigned partitions the cluster does not have)``. ``topics`` is the
    cluster's topic -> partition ids (internal topics already left out by the caller for
    patterns). A pattern must match the whole name (Java ``Pattern.matches``)."""
    if subscription.kind == "assign":
        present = [tp for tp in subscription.assigned if tp[1] in set(topics.get(tp[0], ()))]
        missing = [tp for tp in subscription.assigned if tp not in set(present)]
        return sorted_partitions(present), sorted_partitions(missing)
    if subscription.kind == "subscribe":
        names = [t for t in subscription.topics if t in topics]
    else:
        pattern = re.compile(subscription.pattern or "")
        names = [t for t in topics if pattern.fullmatch(t)]
    return sorted_partitions((t, p) for t in names for p in topics[t]), []


# ---------------------------------------------------------------------------------- offsets

def timestamp_queries(spec: OffsetSpec | None, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
    """The offset-for-timestamp lookups ``spec`` needs: ``{tp: timestamp}``."""
    if spec is None:
        return {}
    if spec.kind == "global_timestamp":
        return {tp: spec.timestamp for tp in partitions}
    if spec.kind == "by_timestamp":
        wanted = set(partitions)
        return {tp: ts for tp, ts in spec.timestamps.items() if tp in wanted}
    return {}


def _require_all_partitions(spec: OffsetSpec, given: Iterable[TopicPartition], partitions: list[TopicPartition]) -> None:
    given, have = set(given), set(partitions)
    if given != have:
        extra, absent = given - have, have - given
        detail = []
        if absent:
            detail.append(f"missing {format_partitions(absent)}")
        if extra:
            detail.append(f"not assigned or not existing: {format_partitions(extra)}")
        raise OptionError(
            f"Option '{spec.option}' must give every assigned topic-partition "
            f"({format_partitions(have) or 'none'}); {'; '.join(detail)}. "
            f"Use -2 for earliest and -1 for latest if you don't care.")


def resolve_offsets(
    spec: OffsetSpec, snapshot: LogSnapshot, *, starting: bool
) -> dict[TopicPartition, int]:
    """Concrete offsets for every partition of ``snapshot`` (Spark ``fetchPartitionOffsets`` and
    ``readTimestampOffsets``). A timestamp with no matching offset ends at latest; for a start it
    fails (strategy ``error``) or starts at latest (strategy ``latest``)."""
    partitions = list(snapshot.partitions)
    if spec.kind == "earliest":
        return {tp: snapshot.earliest[tp] for tp in partitions}
    if spec.kind == "latest":
        return {tp: snapshot.latest[tp] for tp in partitions}
    if spec.kind == "group":
        return {tp: snapshot.committed.get(tp, snapshot.earliest[tp]) for tp in partitions}
    if spec.kind == "specific":
        _require_all_partitions(spec, spec.offsets, partitions)
        sentinel = {EARLIEST: snapshot.earliest, LATEST: snapshot.latest}
        return {tp: sentinel[off][tp] if off in sentinel else off for tp, off in spec.offsets.items()}
    if spec.kind == "by_timestamp":
        _require_all_partitions(spec, spec.timestamps, partitions)
    stamps = timestamp_queries(spec, partitions)
    out = {}
    for tp in partitions:
        found = snapshot.by_timestamp[(tp, stamps[tp])]
        if found >= 0:
            out[tp] = found
        elif starting and spec.strategy == "error":
            raise OptionError(
                f"Option '{spec.option}': no offset of {tp[0]}-{tp[1]} has a timestamp at or after "
                f"{stamps[tp]}. Set 'startingOffsetsByTimestampStrategy' to 'latest' to start such "
                f"partitions at their latest offset instead")
        else:
            out[tp] = snapshot.latest[tp]
    return out


# ---------------------------------------------------------------------------------- splitting

def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """Near-equal pieces by integer division; the last piece takes the remainder."""
    out, remaining, start = [], r.size, r.from_offset
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.until_offset)
        out.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return out


def _part_count(size: int, total: int, parts: int) -> int:
    # Scala math.round on a double: half rounds up (floor(x + 0.5)), unlike Python's round().
    return max(int(math.floor(size / total * parts + 0.5)), 1)


def split_ranges(
    ranges: Sequence[OffsetRange], min_partitions: int | None = None, max_records: int | None = None
) -> list[OffsetRange]:
    """Spark's ``KafkaOffsetRangeCalculator.getRanges``. Empty and negative ranges are dropped.

    ``max_records``: every range is cut into ceil(size / max_records) near-equal pieces.
    ``min_partitions`` greater than the number of ranges (after that cut): each range's share is
    round(size / total * m); ranges whose share is 1 stay whole, the others are re-apportioned
    over m minus the whole ones. The count is only approximately m (rounding). As in Spark, a
    topic-partition with any whole piece keeps all its pieces whole."""
    out = [r for r in ranges if r.size > 0]
    if max_records is not None:
        out = [piece for r in out for piece in _divide(r, -(-r.size // max_records)) if piece.size > 0]
    if min_partitions is None or len(out) >= min_partitions:
        return out
    total = sum(r.size for r in out)
    whole = [r for r in out if _part_count(r.size, total, min_partitions) == 1]
    whole_tps = {r.tp for r in whole}
    split_total = total - sum(r.size for r in whole)
    split_parts = max(min_partitions - len(whole), 1)
    result = []
    for r in out:
        parts = 1 if r.tp in whole_tps else _part_count(r.size, split_total, split_parts)
        result.extend(piece for piece in _divide(r, parts) if piece.size > 0)
    return result


# ---------------------------------------------------------------------------------- read limits

def rate_limit(
    limit: int,
    start: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """``maxOffsetsPerTrigger`` (Spark ``KafkaMicroBatchStream.rateLimit``): each partition with a
    backlog gets limit * (its backlog / total backlog) offsets, a share below 1 rounded up (small
    partitions are never starved) and one of 1 or more rounded down, never past latest. New
    partitions start at their earliest offset. Partitions without a backlog get ``latest``."""
    sizes = {}
    for tp, end in latest.items():
        begin = start.get(tp, earliest_of_new.get(tp))
        if begin is not None and end - begin > 0:
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        if tp not in sizes:
            out[tp] = end
            continue
        begin = start.get(tp, earliest_of_new.get(tp))
        prorate = limit * (sizes[tp] / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        off = _INT64_MAX if share > _INT64_MAX - begin else begin + share  # SPARK-26718
        out[tp] = min(end, off)
    return out


def delay_batch(
    min_rows: int,
    latest: Mapping[TopicPartition, int],
    start: Mapping[TopicPartition, int],
    now_ms: int,
    last_trigger_ms: int,
    max_trigger_delay_ms: int,
) -> tuple[bool, int]:
    """``minOffsetsPerTrigger`` (Spark ``delayBatch``): ``(skip this trigger?, new last trigger
    time)``. A trigger fires when ``maxTriggerDelay`` has passed since the last one, or when at
    least ``min_rows`` new offsets are available (new partitions count from offset 0)."""
    if now_ms - last_trigger_ms >= max_trigger_delay_ms:
        return False, now_ms
    new_records = sum(end - start.get(tp, 0) for tp, end in latest.items())
    if new_records < min_rows:
        return True, last_trigger_ms
    return False, now_ms


# ---------------------------------------------------------------------------------- data loss

def check_data_loss(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    earliest_of_new: Mapping[TopicPartition, int],
) -> tuple[dict[TopicPartition, int], list[DataLoss]]:
    """The driver-side checks of a micro-batch from ``start`` to ``end`` (Spark
    ``getOffsetRangesFromResolvedOffsets``). ``earliest_of_new`` holds the earliest offsets the
    cluster gave for partitions in ``end`` but not in ``start``; a new partition missing from it
    was deleted meanwhile. Returns the start offset of every partition that can be read (new ones
    included) and the losses found:

    (a) a new partition whose earliest offset could not be fetched (deleted meanwhile);
    (b) a new partition that does not start at offset 0;
    (c) a partition of ``start`` missing from ``end`` (topic or partition deleted);
    (d) ``end`` < ``start`` (offsets went back: the topic was re-created, or a replica truncated).
    """
    losses: list[DataLoss] = []
    new = [tp for tp in end if tp not in start]
    gone_new = [tp for tp in new if tp not in earliest_of_new]
    if gone_new:
        losses.append(DataLoss("new_partition_gone", f"Cannot find earliest offsets of "
                               f"{format_partitions(gone_new)}. Some data may have been missed",
                               tuple(sorted_partitions(gone_new))))
    for tp in sorted_partitions(tp for tp in new if tp in earliest_of_new and earliest_of_new[tp] != 0):
        losses.append(DataLoss("new_partition_not_from_zero", f"Added partition {tp[0]}-{tp[1]} starts "
                               f"from {earliest_of_new[tp]} instead of 0. Some data may have been missed",
                               (tp,)))
    gone = [tp for tp in start if tp not in end]
    if gone:
        losses.append(DataLoss("partition_gone", f"{format_partitions(gone)} are gone. Some data may "
                               f"have been missed", tuple(sorted_partitions(gone))))
    begin = {tp: start[tp] if tp in start else earliest_of_new[tp]
             for tp in end if tp in start or tp in earliest_of_new}
    for tp in sorted_partitions(begin):
        if end[tp] < begin[tp]:
            losses.append(DataLoss("offset_went_back", f"Partition {tp[0]}-{tp[1]}'s offset was changed "
                                   f"from {begin[tp]} to {end[tp]}, some data may have been missed", (tp,)))
    return begin, losses


def report_data_loss(losses: Iterable[DataLoss], fail_on_data_loss: bool, warn) -> None:
    """Raise ``DataLossError`` for the first loss (failOnDataLoss true) or ``warn`` each one."""
    for loss in losses:
        if fail_on_data_loss:
            raise DataLossError(f"{loss.message}. {FAIL_ON_DATA_LOSS_TRUE}")
        warn(f"{loss.message}. {FAIL_ON_DATA_LOSS_FALSE}")


def ranges_between(
    begin: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int], options: SourceOptions
) -> list[OffsetRange]:
    """Tasks for ``[begin, end)`` per partition, split by minPartitions/maxRecordsPerPartition."""
    ranges = [OffsetRange(t, p, begin[(t, p)], end[(t, p)]) for t, p in sorted_partitions(begin)]
    return split_ranges(ranges, options.min_partitions, options.max_records_per_partition)


# ---------------------------------------------------------------------------------- batch

def plan_batch(options: SourceOptions, snapshot: LogSnapshot) -> BatchPlan:
    """A batch read: resolve both ends, check them, split. Assigned partitions the cluster does
    not have count as gone (check (c)); an end before its start as check (d)."""
    assert options.ending is not None, "plan_batch needs batch options"
    start = resolve_offsets(options.starting, snapshot, starting=True)
    end = resolve_offsets(options.ending, snapshot, starting=False)
    losses = []
    if snapshot.missing:
        losses.append(DataLoss("partition_gone", f"{format_partitions(snapshot.missing)} do not exist. "
                               f"Some data may have been missed", tuple(snapshot.missing)))
    _, more = check_data_loss(start, end, {})
    losses += more
    return BatchPlan(start, end, tuple(ranges_between(start, end, options)), tuple(losses))
