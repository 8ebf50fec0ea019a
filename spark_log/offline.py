"""Incremental offline loads (Hadoop style, like Camus/Gobblin): each run reads what a consumer
group has not loaded yet, writes it somewhere, then commits the group's offsets.

    load = offline.plan_load(options)        # start: the group's offsets (else earliest); end: latest now
    df = offline.read(spark, load)           # a batch read of exactly [start, end)
    df.write.mode("append").parquet(path)
    offline.commit(load)                     # the group's committed offsets = end

``options`` are the source options of the load (``kafka.bootstrap.servers``, a subscription,
``kafka.group.id``, ``offsets.store`` = ``kafka`` or ``zookeeper`` with ``zookeeper.connect``;
``startingOffsets`` is set to ``group`` and ``endingOffsets`` defaults to ``latest``). Fixing the end before reading
makes the read repeatable: a run that fails before ``commit`` is simply run again. A run that
fails *after* writing but *before* committing loads its rows again next time (at-least-once), the
classic offline-load trade-off; idempotent outputs (overwrite a partition per run id) avoid it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from spark_log import driver
from spark_log.offsets import TopicPartition, dumps_offsets
from spark_log.options import BATCH, OptionError, SourceOptions, parse_source_options
from spark_log.planner import resolve_offsets

__all__ = ["OfflineLoad", "plan_load", "read", "commit"]


@dataclass(frozen=True)
class OfflineLoad:
    options: SourceOptions
    start: Mapping[TopicPartition, int]
    end: Mapping[TopicPartition, int]
    read_options: Mapping[str, str] = field(default_factory=dict)

    @property
    def records(self) -> int:
        """Offsets in the load (an upper bound on records: compaction and markers leave gaps)."""
        return sum(max(self.end[tp] - self.start.get(tp, self.end[tp]), 0) for tp in self.end)

    def per_partition(self) -> dict[TopicPartition, tuple[int, int]]:
        return {tp: (self.start[tp], self.end[tp]) for tp in sorted(self.end)}


def plan_load(options: Mapping[str, str]) -> OfflineLoad:
    """Fix the offsets of the next load: from the group's committed offsets to the latest."""
    given = {str(k).lower(): str(v) for k, v in options.items()}
    if "startingoffsets" in given and given["startingoffsets"].strip().lower() != "group":
        raise OptionError("An offline load starts from the group's committed offsets; leave "
                          "'startingOffsets' out (it is set to 'group')")
    source = parse_source_options({**given, "startingoffsets": "group"}, BATCH)
    if not source.commits_to_store:
        raise OptionError("An offline load needs 'kafka.group.id' and 'offsets.store' = 'kafka' (or "
                          "'zookeeper' with 'zookeeper.connect') to keep its place between runs")
    with driver.open_view(source) as view:
        snapshot = driver.take_snapshot(view, source, [source.starting, source.ending])
    start = resolve_offsets(source.starting, snapshot, starting=True)
    end = resolve_offsets(source.ending, snapshot, starting=False)
    read_options = {k: v for k, v in given.items() if k not in ("startingoffsets", "endingoffsets")}
    if start:
        read_options.update(startingoffsets=dumps_offsets(start), endingoffsets=dumps_offsets(end))
    return OfflineLoad(source, start, end, read_options)


def read(spark, load: OfflineLoad):
    """The load's records as a DataFrame (the pylog source schema)."""
    if not load.start:
        from spark_log.schema import source_schema

        return spark.createDataFrame([], source_schema(load.options.include_headers))
    return spark.read.format("pylog").options(**load.read_options).load()


def commit(load: OfflineLoad) -> None:
    """Record the load as done: the group's offsets become the load's end offsets."""
    if load.end:
        driver.commit_group_offsets(load.options, load.end)
