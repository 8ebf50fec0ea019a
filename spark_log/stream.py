"""Structured Streaming source: ``spark.readStream.format("pylog")``.

How PySpark 4.3 drives it (reference T4): one long-lived Python process on the driver holds this
reader for the whole query and calls ``initialOffset`` (first start only), ``getDefaultReadLimit``,
``latestOffset(start, limit)``, ``partitions(start, end)``, ``commit(end)``, ``reportLatestOffset``
and, under ``Trigger.AvailableNow``, ``prepareForTriggerAvailableNow`` first. ``read`` runs in
executor processes on a fresh reader, so it uses nothing but the partition and the options.

Offsets are ``{"topic": {"partition": next_offset}}`` in canonical order: Spark compares them as
JSON text, and the same offsets in another order would start an empty batch every trigger.

Read limits: ``getDefaultReadLimit`` is ``ReadMaxRows(maxOffsetsPerTrigger)`` if set, else
``ReadMinRows(minOffsetsPerTrigger)`` if set, else ``ReadAllAvailable``. Python has no composite
limit and its ``ReadMinRows`` carries no delay, so ``minOffsetsPerTrigger``/``maxTriggerDelay``
are applied here from the options whenever Spark does not pass ``ReadAllAvailable`` (which always
wins, e.g. ``Trigger.Once``). Under ``AvailableNow`` the minimum is not applied: a skipped trigger
would end the run with data left unread.

Committed offsets: with ``kafka.group.id`` and ``offsets.store`` = ``kafka`` or ``zookeeper``,
``commit(end)`` writes ``end`` to ``__consumer_offsets`` (a simple OffsetCommit to the group
coordinator) or to ``/consumers/<group>/offsets/...``, for lag tools and ``startingOffsets=group``.
Spark calls ``commit(end of batch N)`` only when it plans batch N+1, so the published offsets run
one batch behind the query, and the last batch of a run (every AvailableNow run) is not published
by that run. The checkpoint, not the store, is what a restarted query resumes from.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from spark_log import driver
from spark_log.offsets import TopicPartition, from_offset_dict, to_offset_dict
from spark_log.options import SourceOptions
from spark_log.partitions import RangePartition, read_partition, read_settings
from spark_log.planner import (
    check_data_loss,
    delay_batch,
    ranges_between,
    rate_limit,
    report_data_loss,
    resolve_offsets,
    resolve_subscription,
)

__all__ = ["PylogStreamReader"]

log = logging.getLogger(__name__)


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class PylogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, clock_ms: Callable[[], int] = _wall_clock_ms) -> None:
        self._options = options
        self._settings = read_settings(options)
        self._clock_ms = clock_ms
        self._view = None  # opened on first use, on the driver only
        self._available_now: dict[TopicPartition, int] | None = None
        self._latest: dict[TopicPartition, int] | None = None
        self._last_trigger_ms = 0  # Spark starts at 0: the first trigger never waits
        for warning in options.warnings:
            log.warning("%s", warning)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_view"] = None  # connections never travel
        return state

    def _cluster(self):
        if self._view is None:
            self._view = driver.open_view(self._options)
        return self._view

    # ------------------------------------------------------------------ offsets

    def initialOffset(self) -> dict:
        snapshot = driver.take_snapshot(self._cluster(), self._options, [self._options.starting])
        return to_offset_dict(resolve_offsets(self._options.starting, snapshot, starting=True))

    def _fetch_latest(self) -> dict[TopicPartition, int]:
        def fetch():
            view = self._cluster()
            topics = view.topic_partitions()
            partitions, _ = resolve_subscription(self._options.subscription, topics)
            return view.latest(partitions)
        return driver.with_retries(self._options, "fetching latest offsets", fetch)

    def _earliest_of_new(self, new: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Earliest offsets of partitions that still exist (a deleted one is left out)."""
        if not new:
            return {}

        def fetch():
            view = self._cluster()
            topics = view.topic_partitions()
            present = [tp for tp in new if tp[1] in set(topics.get(tp[0], ()))]
            return view.earliest(present)
        return driver.with_retries(self._options, "fetching earliest offsets", fetch)

    def getDefaultReadLimit(self):
        if self._options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self._options.max_offsets_per_trigger)
        if self._options.min_offsets_per_trigger is not None:
            return ReadMinRows(self._options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._fetch_latest()

    def latestOffset(self, start: dict, limit) -> dict:
        begin = from_offset_dict(start)
        latest = dict(self._available_now) if self._available_now is not None else self._fetch_latest()
        self._latest = latest
        if isinstance(limit, ReadAllAvailable):
            return to_offset_dict(latest)
        min_rows = self._options.min_offsets_per_trigger
        if min_rows is not None and self._available_now is None:
            skip, self._last_trigger_ms = delay_batch(min_rows, latest, begin, self._clock_ms(),
                                                      self._last_trigger_ms, self._options.max_trigger_delay_ms)
            if skip:
                return to_offset_dict(begin)
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in latest if tp not in begin]
            return to_offset_dict(rate_limit(limit.max_rows, begin, latest, self._earliest_of_new(new)))
        return to_offset_dict(latest)

    def reportLatestOffset(self):
        return None if self._latest is None else to_offset_dict(self._latest)

    # ------------------------------------------------------------------ batches

    def partitions(self, start: dict, end: dict):
        begin_offsets, end_offsets = from_offset_dict(start), from_offset_dict(end)
        if begin_offsets == end_offsets:
            return []
        new = [tp for tp in end_offsets if tp not in begin_offsets]
        begin, losses = check_data_loss(begin_offsets, end_offsets, self._earliest_of_new(new))
        report_data_loss(losses, self._options.fail_on_data_loss, log.warning)
        readable = {tp: end_offsets[tp] for tp in begin}
        return [RangePartition(r) for r in ranges_between(begin, readable, self._options)]

    def read(self, partition):
        return read_partition(self._settings, partition)

    def commit(self, end: dict) -> None:
        if self._options.commits_to_store:
            driver.commit_group_offsets(self._options, from_offset_dict(end))

    def stop(self) -> None:
        if self._view is not None:
            self._view.close()
            self._view = None
