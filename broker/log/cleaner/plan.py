"""Which log to clean, which part of it, and in which groups of segments: pure functions over
summaries of segments (no files, no clock: ``now_ms`` is an argument).

Sections of a log (Kafka ``LogCleanerManager``; ``../shared/reference/coordinators.md`` 1):

    [log start, first dirty)             clean: compacted by an earlier pass
    [first dirty, first uncleanable)     dirty: what this pass maps
    [first uncleanable, log end)         not cleaned yet

``first dirty`` is the offset in ``cleaner-offset-checkpoint``, clamped into the log (a checkpoint
below the log start, or past the end after a truncation, is reset to the log start). ``first
uncleanable`` is the smallest of: the active segment's base offset (the active segment is never
cleaned), the high watermark (data a new leader could truncate is not worth cleaning), the last
stable offset (never clean past an open transaction), and the base of the first dirty segment
holding a record younger than ``min.compaction.lag.ms``. Bounds are rounded down to a segment
base: a pass cleans whole segments.

A log is chosen when its dirty ratio, dirty bytes / (clean + dirty bytes), reaches
``min.cleanable.dirty.ratio``, or when its first dirty segment began more than
``max.compaction.lag.ms`` ago (KIP-354); among those, the one with the highest ratio.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Hashable, Iterable, Sequence
from typing import NamedTuple

__all__ = ["SegmentSummary", "CleanableLog", "cleanable_section", "choose_log", "group_segments",
           "INT32_MAX"]

INT32_MAX = (1 << 31) - 1
_INDEX_ENTRY_BYTES = 12  # the larger of an offset-index (8) and a time-index (12) entry


class SegmentSummary(NamedTuple):
    base_offset: int
    next_offset: int  # last offset + 1 (the base when empty)
    size: int  # bytes of the .log file
    largest_timestamp: int  # max record timestamp, or the file's mtime when it has none
    first_batch_timestamp: int  # max timestamp of its first batch, -1 when empty


class CleanableLog(NamedTuple):
    log_start_offset: int
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    dirty_bytes: int
    max_lag_exceeded: bool

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


def cleanable_section(segments: Sequence[SegmentSummary], *, log_start_offset: int, checkpoint: int | None,
                      high_watermark: int, last_stable_offset: int, now_ms: int,
                      min_compaction_lag_ms: int, max_compaction_lag_ms: int) -> CleanableLog:
    """The sections of one log; ``segments`` are all of its segments, the active one last."""
    assert segments, "a log has at least its active segment"
    log_end = segments[-1].next_offset
    first_dirty = checkpoint if checkpoint is not None and log_start_offset <= checkpoint <= log_end else log_start_offset
    bases = [s.base_offset for s in segments]
    # Whole segments only: the segment holding the limit is not cleaned.
    uncleanable = _base_holding(bases, min(segments[-1].base_offset, high_watermark, last_stable_offset))
    if min_compaction_lag_ms > 0:
        young = (s.base_offset for s in segments
                 if s.next_offset > first_dirty and s.largest_timestamp > now_ms - min_compaction_lag_ms)
        uncleanable = min(uncleanable, next(young, uncleanable))
    uncleanable = max(uncleanable, first_dirty)
    live = [s for s in segments if s.next_offset > log_start_offset or s.base_offset >= log_start_offset]
    clean = sum(s.size for s in live if s.next_offset <= first_dirty)
    # An empty range maps nothing, even when first dirty lies inside a segment (Kafka's
    # logSegments(from, to) is empty for from == to): no pass that would only copy the log again.
    dirty_segments = [s for s in live if s.next_offset > first_dirty and s.base_offset < uncleanable
                      and first_dirty < uncleanable]
    dirty = sum(s.size for s in dirty_segments)
    oldest = dirty_segments[0].first_batch_timestamp if dirty_segments else -1
    max_lag = oldest >= 0 and now_ms - oldest > max_compaction_lag_ms
    return CleanableLog(log_start_offset, first_dirty, uncleanable, clean, dirty, max_lag)


def _base_holding(bases: list[int], offset: int) -> int:
    return bases[max(0, bisect_right(bases, offset) - 1)]


def choose_log(candidates: Iterable[tuple[Hashable, CleanableLog, float]]) -> Hashable | None:
    """The key of the log to clean next among ``(key, section, min cleanable ratio)``, or None."""
    best, best_ratio = None, -1.0
    for key, section, min_ratio in candidates:
        if section.dirty_bytes == 0:
            continue
        ratio = section.dirty_ratio
        if (ratio >= min_ratio or section.max_lag_exceeded) and ratio > best_ratio:
            best, best_ratio = key, ratio
    return best


def group_segments(segments: Sequence[SegmentSummary], *, segment_bytes: int, index_bytes: int,
                   index_interval_bytes: int) -> list[list[SegmentSummary]]:
    """Split consecutive segments into groups that each fit one segment once cleaned: at most
    ``segment_bytes`` (a group of one may be larger: it only shrinks), index entries within
    ``index_bytes`` (at most one entry per ``index_interval_bytes`` of log), and offsets within
    int32 of the group's base offset (the indexes store relative offsets)."""
    groups: list[list[SegmentSummary]] = []
    interval = max(1, index_interval_bytes)
    for segment in segments:
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group) + segment.size
            entries = size // interval + len(group) + 1
            if (size <= segment_bytes and entries * _INDEX_ENTRY_BYTES <= index_bytes
                    and segment.next_offset - 1 - group[0].base_offset <= INT32_MAX):
                group.append(segment)
                continue
        groups.append([segment])
    return groups
