"""One cleaning pass over one log, in phases that say which thread runs them.

    cleaning_pass = begin_pass(log, ...)   # the log's thread: plan, open the segment files
    cleaning_pass.build_map()              # a cleaner thread: read the dirty section
    for group in cleaning_pass.groups:
        cleaned = cleaning_pass.clean(group)           # a cleaner thread: write <base>.log.cleaned
        cleaning_pass.swap(group, cleaned)             # the log's thread: swap it in
    cleaning_pass.close()                  # any thread: close the pass's file descriptors

``clean_once`` runs all of it on the calling thread (tools, tests, benchmarks). The broker's shell
(``broker/server/log_cleaner.py``) runs the middle phases in a worker process
(``broker/server/cleaner_worker.py``, doing ``worker_pass.py``: ``request`` is what it sends,
``adopt_map`` takes the worker's answer, and ``swap`` then takes the worker's cleaned groups),
or on a thread with ``asyncio.to_thread``. After the pass ``end_offset`` is the new first dirty
offset for ``cleaner-offset-checkpoint``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from broker.log.cleaner.offset_map import OffsetMap, capacity_for
from broker.log.cleaner.plan import CleanableLog, SegmentSummary, cleanable_section, group_segments
from broker.log.cleaner.retention import AbortedTxn, RetentionPass
from broker.log.cleaner.segment_cleaner import (
    CLEANED_FILE_SUFFIX,
    SegmentFile,
    Throttler,
    build_offset_map,
    clean_group,
)
from broker.log.cleaner.swap import swap_in
from broker.log.segment import LogSegment
from broker.records import DEFAULT_LIMITS, BatchLimits

__all__ = ["CleanerSettings", "CleaningPass", "PassStats", "begin_pass", "clean_once", "group_bases", "plan_groups",
           "summarize"]


class CleanerSettings(NamedTuple):
    """Broker-wide cleaner settings (Kafka's ``log.cleaner.*``) and the pass's hash keys."""

    dedupe_buffer_bytes: int = 128 << 20  # log.cleaner.dedupe.buffer.size
    io_buffer_bytes: int = 4 << 20  # read chunk (Kafka: log.cleaner.io.buffer.size, 512 KiB)
    io_max_bytes_per_second: float = float("inf")  # log.cleaner.io.max.bytes.per.second
    hash_keys: tuple[int, int, int, int] = (0, 0, 0, 0)  # from the broker's rng (key_hash)
    limits: BatchLimits = DEFAULT_LIMITS


class PassStats(NamedTuple):
    bytes_read: int
    bytes_written: int
    segments_before: int
    segments_after: int
    swapped_groups: int
    stale_groups: int  # groups whose output was thrown away: the log changed meanwhile


def summarize(segments: Sequence[LogSegment]) -> list[SegmentSummary]:
    return [SegmentSummary(s.base_offset, s.next_offset, s.size, s.largest_timestamp,
                           s.first_batch_timestamp) for s in segments]


def plan_groups(summaries: Sequence[SegmentSummary], map_end_offset: int, config) -> list[list[SegmentSummary]]:
    """The groups to clean: the non-empty segments below where the offset map ended."""
    cleanable = [s for s in summaries if s.base_offset < map_end_offset and s.size > 0]
    return group_segments(cleanable, segment_bytes=config.segment_bytes, index_bytes=config.segment_index_bytes,
                          index_interval_bytes=config.index_interval_bytes)


def group_bases(groups: Sequence[Sequence[SegmentSummary]]) -> list[list[int]]:
    return [[summary.base_offset for summary in group] for group in groups]


class CleaningPass:
    """See the module docstring; made by ``begin_pass``."""

    def __init__(self, log, section: CleanableLog, segments: list[LogSegment], *, now_ms: int,
                 producer_last_offsets: Mapping[int, int], aborted: Sequence[AbortedTxn],
                 settings: CleanerSettings) -> None:
        self.log = log
        self.section = section
        self.settings = settings
        self._now_ms = now_ms
        self._producer_last_offsets = producer_last_offsets
        self._aborted = aborted
        self._version = log.structure_version
        self._segments = segments
        self._files: dict[int, SegmentFile] = {}
        try:
            for segment in segments:
                self._files[segment.base_offset] = SegmentFile(segment.base_offset, segment.log_path, segment.size)
        except BaseException:
            self.close()
            raise
        self._throttler = Throttler(settings.io_max_bytes_per_second)
        self.offset_map: OffsetMap | None = None
        self._map_end_offset: int | None = None  # set by adopt_map when a worker built the map
        self.groups: list[list[LogSegment]] = []
        self._retention: RetentionPass | None = None
        self._written = self._swapped = self._stale = 0

    @property
    def end_offset(self) -> int:
        """Where the next pass starts mapping (the map's end once built)."""
        if self._map_end_offset is not None:
            return self._map_end_offset
        return self.offset_map.end_offset if self.offset_map is not None else self.section.first_dirty_offset

    @property
    def log_changed(self) -> bool:
        """True when the log was truncated, had segments deleted or replaced by anyone but this
        pass since it began (the log's thread): reads of a segment cut under the pass may then
        fail, which says nothing about the log's health."""
        return self.log.structure_version != self._version

    def build_map(self) -> None:
        """Cleaner thread: map the dirty section, then group the segments below the map's end."""
        first_dirty = self.section.first_dirty_offset
        dirty = [self._files[s.base_offset] for s in self._segments
                 if s.next_offset > first_dirty and s.base_offset < self.section.first_uncleanable_offset]
        self.offset_map = build_offset_map(
            dirty, first_dirty=first_dirty, first_uncleanable=self.section.first_uncleanable_offset,
            capacity=capacity_for(self.settings.dedupe_buffer_bytes), keys=self.settings.hash_keys,
            aborted=self._aborted, limits=self.settings.limits, chunk_bytes=self.settings.io_buffer_bytes,
            throttler=self._throttler)
        config = self.log.config
        self._set_groups(group_bases(plan_groups(summarize(self._segments), self.offset_map.end_offset, config)))
        self._retention = RetentionPass(
            self.offset_map, now_ms=self._now_ms, delete_retention_ms=config.delete_retention_ms,
            producer_last_offsets=self._producer_last_offsets, aborted=self._aborted)

    def _set_groups(self, bases: list[list[int]]) -> None:
        by_base = {s.base_offset: s for s in self._segments}
        self.groups = [[by_base[base] for base in group] for group in bases]

    def request(self):
        """The log's thread: the pass for a worker process (``worker_pass.PassRequest``) and the
        descriptors of its segment files, in the order of ``request.files``."""
        from broker.log.cleaner.worker_pass import PassRequest  # here: worker_pass imports this module

        files = [self._files[s.base_offset] for s in self._segments]
        request = PassRequest(
            self.log.directory, self.log.config, self.settings, self.section.first_dirty_offset,
            self.section.first_uncleanable_offset, summarize(self._segments),
            [(f.base_offset, f.path, f.size) for f in files], self._now_ms, dict(self._producer_last_offsets),
            list(self._aborted))
        return request, [f.fd for f in files]

    def adopt_map(self, end_offset: int, bases: list[list[int]]) -> None:
        """The log's thread: a worker built the map up to ``end_offset`` and grouped the segments."""
        self._map_end_offset = end_offset
        self._set_groups(bases)

    def clean(self, group: list[LogSegment]) -> LogSegment | None:
        """Cleaner thread: the cleaned copy of ``group`` (groups must be cleaned in order)."""
        assert self._retention is not None, "build_map first"
        cleaned = clean_group([self._files[s.base_offset] for s in group], self._retention,
                              directory=self.log.directory, config=self.log.config, now_ms=self.log.now_ms,
                              keys=self.settings.hash_keys, limits=self.settings.limits,
                              chunk_bytes=self.settings.io_buffer_bytes, throttler=self._throttler)
        if cleaned is not None:
            self._written += cleaned.size
        return cleaned

    def swap(self, group: list[LogSegment], cleaned) -> bool:
        """The log's thread: swap ``cleaned`` (a ``LogSegment`` from ``clean``, or a worker's
        ``CleanedFiles``) in for ``group``; False when the log changed."""
        if cleaned is None:
            return False
        if self._map_end_offset is not None:
            self._written += cleaned.size
        if swap_in(self.log, cleaned, group, self._version, CLEANED_FILE_SUFFIX, self.settings.limits):
            self._version = self.log.structure_version
            self._swapped += 1
            return True
        self._stale += 1
        return False

    def stats(self) -> PassStats:
        read = sum(s.size for s in self._segments)
        return PassStats(read, self._written, len(self._segments), len(self.log.segments),
                         self._swapped, self._stale)

    def close(self) -> None:
        for segment_file in self._files.values():
            segment_file.close()


def begin_pass(log, *, checkpoint: int | None, high_watermark: int, last_stable_offset: int, now_ms: int,
               producer_last_offsets: Mapping[int, int] | None = None, aborted: Sequence[AbortedTxn] = (),
               settings: CleanerSettings = CleanerSettings()) -> CleaningPass | None:
    """The log's thread: the pass to run now, or None when nothing is cleanable."""
    config = log.config
    segments = list(log.segments)
    section = cleanable_section(
        summarize(segments), log_start_offset=log.log_start_offset, checkpoint=checkpoint,
        high_watermark=high_watermark, last_stable_offset=last_stable_offset, now_ms=now_ms,
        min_compaction_lag_ms=config.min_compaction_lag_ms, max_compaction_lag_ms=config.max_compaction_lag_ms)
    if section.dirty_bytes == 0:
        return None
    inactive = [s for s in segments[:-1] if s.base_offset < section.first_uncleanable_offset]
    return CleaningPass(log, section, inactive, now_ms=now_ms, producer_last_offsets=producer_last_offsets or {},
                        aborted=aborted, settings=settings)


def clean_once(log, **kwargs) -> tuple[int | None, PassStats | None]:
    """A whole pass on the calling thread; ``(new first dirty offset, stats)``, or
    ``(None, None)`` when nothing was cleanable."""
    cleaning_pass = begin_pass(log, **kwargs)
    if cleaning_pass is None:
        return None, None
    try:
        cleaning_pass.build_map()
        for group in cleaning_pass.groups:
            cleaning_pass.swap(group, cleaning_pass.clean(group))
        return cleaning_pass.end_offset, cleaning_pass.stats()
    finally:
        cleaning_pass.close()
