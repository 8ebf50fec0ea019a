"""A cleaning pass over segment files the caller already holds open: the file-level work of the
cleaner's worker process, apart from the process.

Why apart. The broker runs a pass's reading and writing in a worker process at nice 19
(``broker/server/cleaner_worker.py`` starts it, passes it the plan and the segments' file
descriptors over a Unix socket and relays the answers). What the worker *does* with them is
compaction, which belongs here with the rest of it; processes, sockets and descriptor passing
belong to the server side (``docs/architecture.md``: ``broker/log`` knows files and record
batches). So this module takes a ``PassRequest`` and descriptors and returns results; it never
sends, receives or waits.

    work = map_pass(request, fds)     # the offset map: work.end_offset, work.group_bases
    for bases in work.group_bases:    # in order, each only once the previous one is swapped in
        cleaned = work.clean(bases)   # <base>.log.cleaned (+ indexes) written, flushed, closed

``PassRequest`` (the plan, made by ``CleaningPass.request``) and ``CleanedFiles`` (a group's
answer, taken by ``CleaningPass.swap``) cross the process boundary pickled, so they are named by
this module: both ends must import it under this name.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from broker.log.cleaner.cleaning_pass import group_bases, plan_groups
from broker.log.cleaner.offset_map import capacity_for
from broker.log.cleaner.retention import RetentionPass
from broker.log.cleaner.segment_cleaner import (
    CLEANED_FILE_SUFFIX,
    SegmentFile,
    Throttler,
    build_offset_map,
    clean_group,
)
from broker.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, segment_file_name

__all__ = ["CleanedFiles", "MappedPass", "PassRequest", "discard_cleaned", "map_pass"]


class PassRequest(NamedTuple):
    """What the worker needs of a pass (picklable); ``segments`` are the pass's segments in
    order, ``files`` their (base offset, path, size) in the same order as the descriptors sent."""

    directory: Path
    config: object  # LogConfig
    settings: object  # CleanerSettings
    first_dirty_offset: int
    first_uncleanable_offset: int
    summaries: list  # plan.SegmentSummary of the pass's segments
    files: list[tuple[int, Path, int]]
    now_ms: int
    producer_last_offsets: Mapping[int, int]
    aborted: Sequence


class CleanedFiles(NamedTuple):
    """A cleaned segment the worker wrote (flushed, closed), as ``swap_in`` handles it."""

    base_offset: int
    file_paths: tuple[Path, Path, Path]
    size: int

    def flush(self) -> None:
        """The worker flushed it before saying it was done."""

    def close(self) -> None:
        """Nothing is open in this process."""

    def delete(self) -> None:
        for path in self.file_paths:
            path.unlink(missing_ok=True)


class MappedPass:
    """A pass whose offset map is built (``map_pass``); ``clean`` writes its groups in order.
    Reads the segment files through the descriptors it was given; the caller closes them."""

    def __init__(self, request: PassRequest, files: dict[int, SegmentFile], throttler: Throttler) -> None:
        self._request = request
        self._files = files
        self._throttler = throttler
        settings, config = request.settings, request.config
        first_dirty, first_uncleanable = request.first_dirty_offset, request.first_uncleanable_offset
        dirty = [files[s.base_offset] for s in request.summaries
                 if s.next_offset > first_dirty and s.base_offset < first_uncleanable]
        offset_map = build_offset_map(
            dirty, first_dirty=first_dirty, first_uncleanable=first_uncleanable,
            capacity=capacity_for(settings.dedupe_buffer_bytes), keys=settings.hash_keys, aborted=request.aborted,
            limits=settings.limits, chunk_bytes=settings.io_buffer_bytes, throttler=throttler)
        self.end_offset: int = offset_map.end_offset
        self.group_bases: list[list[int]] = group_bases(plan_groups(request.summaries, offset_map.end_offset, config))
        self._offset_map = offset_map
        self._retention: RetentionPass | None = None  # made by the first clean, after the map's answer went

    def clean(self, bases: list[int]) -> CleanedFiles | None:
        """Write the cleaned copy of the group of segments based at ``bases`` (one of
        ``group_bases``, in order): flushed and closed; None when nothing was written."""
        request, settings = self._request, self._request.settings
        if self._retention is None:
            self._retention = RetentionPass(
                self._offset_map, now_ms=request.now_ms, delete_retention_ms=request.config.delete_retention_ms,
                producer_last_offsets=request.producer_last_offsets, aborted=request.aborted)
        cleaned = clean_group([self._files[base] for base in bases], self._retention, directory=request.directory,
                              config=request.config, now_ms=lambda: request.now_ms, keys=settings.hash_keys,
                              limits=settings.limits, chunk_bytes=settings.io_buffer_bytes, throttler=self._throttler)
        if cleaned is None:
            return None
        result = CleanedFiles(cleaned.base_offset, cleaned.file_paths, cleaned.size)
        cleaned.close()
        return result


def map_pass(request: PassRequest, fds: Sequence[int]) -> MappedPass:
    """Build ``request``'s offset map from the segment files open at ``fds`` (in the order of
    ``request.files``) and group its segments below the map's end."""
    files = {base: SegmentFile.from_fd(base, path, size, fd) for (base, path, size), fd in zip(request.files, fds)}
    return MappedPass(request, files, Throttler(request.settings.io_max_bytes_per_second))


def discard_cleaned(directory: Path, base_offset: int) -> None:
    """Remove what a worker stopped mid-group left of ``<base_offset>.*.cleaned`` in ``directory``."""
    for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):  # the log first, as LogSegment.delete
        (directory / (segment_file_name(base_offset) + suffix + CLEANED_FILE_SUFFIX)).unlink(missing_ok=True)
