"""Turn a partition directory into an ordered list of open, consistent segments.

What ``load_log`` does, in order (Kafka ``LogLoader``):

1. Leftover temporary files. ``*.deleted`` (a segment being deleted) and ``*.cleaned``
   (unfinished compaction output) are removed. A ``<base>.log.swap`` is compaction or split
   output that was complete but not yet swapped in: unless a ``.cleaned`` file at or below its
   base shows the operation was still writing (then it is removed too), the swap is finished: the
   segments it replaces (base offsets in [swap base, swap next offset)) are removed and the
   ``.swap`` renamed to ``.log``; its indexes are rebuilt. Index ``.swap`` files are removed.
2. ``.index``/``.timeindex`` files without a ``.log`` are removed. Other files (checkpoints,
   producer snapshots) are left alone.
3. Every segment opens with O(1) index checks. Without a clean shutdown, every segment from the
   one holding the recovery point onward is recovered (CRC of every batch, offsets monotonic
   across segments); at the first one that had to be truncated, all later segments are deleted,
   because nothing after a torn write can be trusted. Any other segment whose indexes are missing
   or fail their checks is recovered too (only that segment).
4. The log start offset is max(checkpointed value, first segment's base offset). If the log ends
   below it, every segment is deleted. An empty directory gets one empty segment at the log start
   offset.

The recovery point becomes the log end offset after a clean shutdown with nothing to repair, else
min(recovery point, log end offset): it only moves forward when data is flushed.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Callable, NamedTuple

from broker.log.config import LogConfig
from broker.log.fileio import fsync_dir, iter_file_headers
from broker.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    segment_file_name,
)
from broker.records import BatchLimits

__all__ = ["LoadedLog", "load_log", "DELETED_SUFFIX", "CLEANED_SUFFIX", "SWAP_SUFFIX"]

logger = logging.getLogger(__name__)

DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)


class LoadedLog(NamedTuple):
    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int


def load_log(
    directory: Path,
    config: LogConfig,
    now_ms: Callable[[], int],
    limits: BatchLimits,
    *,
    recovery_point: int,
    clean_shutdown: bool,
    log_start_offset: int,
) -> LoadedLog:
    """Open (and if needed recover) the segments of ``directory``; see the module docstring."""
    directory.mkdir(parents=True, exist_ok=True)
    changed = _remove_temp_files(directory)
    segments = _open_segments(directory, config, now_ms)
    try:
        segments, repaired = _recover(segments, limits, recovery_point, clean_shutdown)
        segments, log_start_offset = _apply_log_start(
            directory, segments, log_start_offset, config, now_ms
        )
    except BaseException:
        for segment in segments:
            segment.close()
        raise
    if changed or repaired:
        fsync_dir(directory)
    log_end_offset = segments[-1].next_offset
    if clean_shutdown and not repaired:
        recovery_point = log_end_offset
    else:
        recovery_point = min(recovery_point, log_end_offset)
    return LoadedLog(segments, log_start_offset, recovery_point)


def _base_of(name: str) -> int | None:
    """The base offset of a segment file name (20 digits, then a dot), else None."""
    stem = name.split(".", 1)[0]
    return int(stem) if len(stem) == 20 and stem.isdigit() and "." in name else None


def _remove_temp_files(directory: Path) -> bool:
    """Step 1 of the module docstring; True if any file was removed or renamed."""
    names = os.listdir(directory)
    cleaned = [_base_of(n) for n in names if n.endswith(CLEANED_SUFFIX)]
    min_cleaned = min((b for b in cleaned if b is not None), default=None)
    changed = False
    log_swaps: list[int] = []
    for name in names:
        base = _base_of(name)
        remove = name.endswith(DELETED_SUFFIX) or name.endswith(CLEANED_SUFFIX)
        if name.endswith(SWAP_SUFFIX) and base is not None:
            unfinished = min_cleaned is not None and base >= min_cleaned
            if name.endswith(LOG_SUFFIX + SWAP_SUFFIX) and not unfinished:
                log_swaps.append(base)
            else:
                remove = True
        if remove:
            logger.info("%s: removing leftover %s", directory, name)
            (directory / name).unlink(missing_ok=True)
            changed = True
    for base in sorted(log_swaps):
        _complete_swap(directory, base)
        changed = True
    return changed


def _complete_swap(directory: Path, base: int) -> None:
    """Replace the segments a finished ``<base>.log.swap`` covers, then rename it into place."""
    prefix = segment_file_name(base)
    swap_path = directory / (prefix + LOG_SUFFIX + SWAP_SUFFIX)
    fd = os.open(swap_path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        next_offset = base
        for _, header in iter_file_headers(fd, 0, os.fstat(fd).st_size, 1 << 20):
            next_offset = header.next_offset
    finally:
        os.close(fd)
    for name in os.listdir(directory):
        replaced = _base_of(name)
        if replaced is None or not base <= replaced < max(next_offset, base + 1):
            continue
        if any(name == segment_file_name(replaced) + s for s in _SEGMENT_SUFFIXES):
            (directory / name).unlink(missing_ok=True)
    logger.info("%s: completing swap of %s (offsets %d..%d)", directory, swap_path.name, base,
                next_offset - 1)
    os.replace(swap_path, directory / (prefix + LOG_SUFFIX))


def _open_segments(
    directory: Path, config: LogConfig, now_ms: Callable[[], int]
) -> list[LogSegment]:
    """Step 2 and the first half of step 3: remove orphan indexes, open every segment."""
    logs: set[int] = set()
    indexes: list[tuple[int, str]] = []
    for name in os.listdir(directory):
        base = _base_of(name)
        if base is None or name != segment_file_name(base) + name[20:]:
            continue
        suffix = name[20:]
        if suffix == LOG_SUFFIX:
            logs.add(base)
        elif suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            indexes.append((base, name))
    for base, name in indexes:
        if base not in logs:
            logger.info("%s: removing orphan index %s", directory, name)
            (directory / name).unlink(missing_ok=True)
    segments: list[LogSegment] = []
    try:
        for base in sorted(logs):
            segments.append(LogSegment.open(directory, base, config, now_ms))
    except BaseException:
        for segment in segments:
            segment.close()
        raise
    return segments


def _first_unflushed(segments: list[LogSegment], recovery_point: int) -> int:
    """Index of the segment holding the recovery point (the first one recovery must check)."""
    index = 0
    for i, segment in enumerate(segments):
        if segment.base_offset <= recovery_point:
            index = i
    return index


def _recover(
    segments: list[LogSegment], limits: BatchLimits, recovery_point: int, clean_shutdown: bool
) -> tuple[list[LogSegment], bool]:
    """Second half of step 3. Returns the surviving segments and whether any was recovered."""
    first_unflushed = (
        len(segments) if clean_shutdown else _first_unflushed(segments, recovery_point)
    )
    kept: list[LogSegment] = []
    repaired = False
    previous_next = 0
    for i, segment in enumerate(segments):
        unflushed = i >= first_unflushed
        overlaps = segment.base_offset < previous_next
        truncated = 0
        if unflushed or segment.needs_recovery or overlaps:
            repaired = True
            truncated = segment.recover(limits, previous_next)
            if truncated:
                logger.warning(
                    "%s: truncated %d invalid bytes; the segment now ends at offset %d",
                    segment.log_path, truncated, segment.next_offset,
                )
        if overlaps and segment.size == 0:
            segment.delete()  # emptied, and its base lies inside its predecessor: holds nothing
        else:
            kept.append(segment)
            previous_next = max(previous_next, segment.next_offset)
        if truncated and unflushed:
            _delete_all(segments[i + 1 :])  # nothing after a torn write can be trusted
            break
    return kept, repaired


def _apply_log_start(
    directory: Path,
    segments: list[LogSegment],
    log_start_offset: int,
    config: LogConfig,
    now_ms: Callable[[], int],
) -> tuple[list[LogSegment], int]:
    """Step 4 of the module docstring."""
    if segments:
        log_start_offset = max(log_start_offset, segments[0].base_offset)
        if segments[-1].next_offset < log_start_offset:
            logger.warning(
                "%s: log end offset %d is below the log start offset %d; deleting all segments",
                directory, segments[-1].next_offset, log_start_offset,
            )
            _delete_all(segments)
            segments = []
    if not segments:
        segments = [LogSegment.create(directory, log_start_offset, config, now_ms)]
        fsync_dir(directory)
    return segments, log_start_offset


def _delete_all(segments: list[LogSegment]) -> None:
    for segment in reversed(segments):  # newest first: a crash leaves a contiguous prefix
        segment.delete()
