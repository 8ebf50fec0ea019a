"""Swap a cleaned segment into its log, crash-safe (Kafka ``LocalLog.replaceSegments``).

Runs on the thread that owns the log (the broker's event loop), after ``clean_group`` wrote
``<base>.log.cleaned`` (+ ``.index.cleaned``, ``.timeindex.cleaned``) on a cleaner thread.

First it checks that the log still holds the segments that were cleaned, unchanged: the log's
``structure_version`` moves whenever segments are truncated, deleted or replaced, so a
truncation, retention or another swap during the pass makes the output stale, and it is deleted.

Then, in order (``swap_steps``; each step's file operations are made durable with a directory
fsync before the next step starts):

1. the cleaned indexes are renamed ``*.cleaned`` -> ``*.swap``;
2. the cleaned log is renamed ``<base>.log.cleaned`` -> ``<base>.log.swap``: from here the swap is
   decided, and recovery completes it;
3. every old segment's files get the suffix ``.deleted``;
4. the ``.swap`` files take their final names, the log last;
5. the ``.deleted`` files are removed.

What the loader (``loader.py``) does after a crash between any two steps: before step 2, the
``.cleaned`` and index ``.swap`` files are removed and the old segments stay; from step 2 on,
the ``.swap`` log replaces every segment whose base offset lies in its offset range (the cleaned
segment spans exactly its group's offsets: ``segment_cleaner``), its indexes are rebuilt, and
``.deleted`` files are removed. Either way the log reads as the old segments or the cleaned one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

from broker.log.fileio import fsync_dir
from broker.log.loader import DELETED_SUFFIX, SWAP_SUFFIX
from broker.log.segment import LogSegment
from broker.records import BatchLimits

__all__ = ["swap_steps", "swap_in"]

Step = tuple[str, Callable[[], None]]


def _strip(path: Path, suffix: str) -> Path:
    assert path.name.endswith(suffix), f"{path} does not end with {suffix}"
    return path.with_name(path.name[: -len(suffix)])


def swap_steps(directory: Path, cleaned_paths: tuple[Path, Path, Path], cleaned_suffix: str,
               old_paths: Sequence[tuple[Path, Path, Path]]) -> list[Step]:
    """The file operations of a swap, as named steps (see the module docstring)."""
    log_path, index_path, time_index_path = cleaned_paths
    final = [_strip(p, cleaned_suffix) for p in cleaned_paths]
    swapped = [p.with_name(p.name + SWAP_SUFFIX) for p in final]

    def durable(action: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            action()
            fsync_dir(directory)
        return run

    def cleaned_indexes_to_swap() -> None:
        os.rename(index_path, swapped[1])
        os.rename(time_index_path, swapped[2])

    def old_segments_to_deleted() -> None:
        for paths in old_paths:
            for path in paths:
                if path.exists():
                    os.rename(path, path.with_name(path.name + DELETED_SUFFIX))

    def swap_to_final() -> None:
        os.rename(swapped[1], final[1])
        os.rename(swapped[2], final[2])
        os.rename(swapped[0], final[0])

    def remove_deleted() -> None:
        for paths in old_paths:
            for path in paths:
                path.with_name(path.name + DELETED_SUFFIX).unlink(missing_ok=True)

    return [
        ("cleaned indexes to .swap", durable(cleaned_indexes_to_swap)),
        ("cleaned log to .swap", durable(lambda: os.rename(log_path, swapped[0]))),
        ("old segments to .deleted", durable(old_segments_to_deleted)),
        (".swap to final names", durable(swap_to_final)),
        ("remove .deleted", remove_deleted),
    ]


def swap_in(log, cleaned: LogSegment, old: Sequence[LogSegment], structure_version: int,
            cleaned_suffix: str, limits: BatchLimits) -> bool:
    """Replace ``old`` (consecutive segments of ``log``) by ``cleaned``; False, and the cleaned
    files deleted, when the log changed since ``structure_version`` was read."""
    if log.structure_version != structure_version or not log.holds_segments(old):
        cleaned.delete()
        return False
    cleaned.flush()
    cleaned_paths = cleaned.file_paths
    cleaned.close()
    for _, step in swap_steps(log.directory, cleaned_paths, cleaned_suffix, [s.file_paths for s in old]):
        step()
    segment = LogSegment.open(log.directory, cleaned.base_offset, log.config, log.now_ms)
    if segment.needs_recovery:
        segment.recover(limits)
    log.replace_segments(old, segment)
    for stale in old:
        stale.close()
    return True
