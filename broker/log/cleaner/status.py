"""The cleaner's view of a log directory, read-only: what ``pylog topics describe`` shows.

Kafka exposes a log's dirty ratio and the uncleanable logs only as metrics of the running
broker (``max-dirty-percent``, ``uncleanable-partitions-count``), never in a protocol answer.
pylog's tool computes the ratio itself from the files, with the cleaner's own planner
(``plan.cleanable_section``) over the same inputs the broker uses:

- the segments: ``<20-digit base>.log`` files, their sizes, and their batch headers (last offset,
  timestamps; no record is decoded and nothing is written or locked);
- ``cleaner-offset-checkpoint`` (first dirty offset), ``log-start-offset-checkpoint``, and
  ``replication-offset-checkpoint`` for the high watermark (the broker writes it every
  ``replica.high.watermark.checkpoint.interval.ms``, so it may lag a little: the active
  segment bounds the dirty section anyway). The last stable offset is taken to be the high
  watermark: pylog has no transactions yet.

So the figure is exact for the files as they are, whether the broker runs or not, and may be a
pass behind while the broker's cleaner is swapping segments.

``uncleanable-partitions`` (pylog's, beside the checkpoints) names the logs the running broker's
cleaner gave up on, one per line after Kafka's checkpoint header::

    0                                  version
    1                                  entries
    orders 3 CorruptRecordError: ...   topic, partition, the error (one line)

The broker removes it when it first uses the directory (as in Kafka, a restart retries every
log) and rewrites it, atomically, when it marks a log uncleanable.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from broker.log.checkpoint import LOG_START_OFFSET_CHECKPOINT, read_checkpoint
from broker.log.cleaner.plan import CleanableLog, SegmentSummary, cleanable_section
from broker.log.errors import CheckpointError
from broker.log.fileio import iter_file_headers, replace_file_durably

__all__ = ["CLEANER_CHECKPOINT", "UNCLEANABLE_FILE", "segment_summaries", "dirty_section",
           "read_uncleanable", "write_uncleanable", "clear_uncleanable"]

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
UNCLEANABLE_FILE = "uncleanable-partitions"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"  # broker.replica.manager's file
_SEGMENT = re.compile(r"(\d{20})\.log")
TopicPartition = tuple[str, int]


def segment_summaries(partition_dir: Path) -> list[SegmentSummary]:
    """Summaries of the segments in ``partition_dir``, oldest first, from their batch headers.

    A segment holding no batch counts its file's mtime as its largest timestamp, as the log does.
    Raises FileNotFoundError when a segment disappears while it is read (a swap)."""
    summaries = []
    for name in sorted(os.listdir(partition_dir)):
        match = _SEGMENT.fullmatch(name)
        if match is None:
            continue
        base = int(match.group(1))
        fd = os.open(partition_dir / name, os.O_RDONLY)
        try:
            stat = os.fstat(fd)
            next_offset, largest, first_batch = base, -1, None
            for _, header in iter_file_headers(fd, 0, stat.st_size, window_bytes=1 << 20):
                next_offset = header.last_offset + 1
                largest = max(largest, header.max_timestamp)
                first_batch = header.max_timestamp if first_batch is None else first_batch
        finally:
            os.close(fd)
        largest = largest if largest >= 0 else stat.st_mtime_ns // 1_000_000
        summaries.append(SegmentSummary(base, next_offset, stat.st_size, largest,
                                        -1 if first_batch is None else first_batch))
    return summaries


def _checkpoint(log_dir: Path, name: str) -> dict[TopicPartition, int]:
    try:
        return read_checkpoint(log_dir / name)
    except (FileNotFoundError, CheckpointError):
        return {}


def dirty_section(log_dir: Path, topic: str, partition: int, *, now_ms: int, min_compaction_lag_ms: int,
                  max_compaction_lag_ms: int) -> CleanableLog | None:
    """The cleaner's sections of ``<log_dir>/<topic>-<partition>``; None when it is not there
    (or vanished while read)."""
    tp = (topic, partition)
    try:
        segments = segment_summaries(log_dir / f"{topic}-{partition}")
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not segments:
        return None
    log_end = segments[-1].next_offset
    log_start = max(segments[0].base_offset, _checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT).get(tp, 0))
    high_watermark = min(log_end, _checkpoint(log_dir, REPLICATION_CHECKPOINT).get(tp, log_end))
    return cleanable_section(
        segments, log_start_offset=log_start, checkpoint=_checkpoint(log_dir, CLEANER_CHECKPOINT).get(tp),
        high_watermark=high_watermark, last_stable_offset=high_watermark, now_ms=now_ms,
        min_compaction_lag_ms=min_compaction_lag_ms, max_compaction_lag_ms=max_compaction_lag_ms)


def read_uncleanable(log_dir: Path) -> dict[TopicPartition, str]:
    """``{(topic, partition): error}`` from ``uncleanable-partitions``; empty when absent or
    malformed (the file is advice for tools, never input to the broker)."""
    try:
        lines = (log_dir / UNCLEANABLE_FILE).read_text(encoding="utf-8").splitlines()
    except (FileNotFoundError, UnicodeDecodeError):
        return {}
    if len(lines) < 2 or lines[0] != "0" or not lines[1].isdigit() or int(lines[1]) != len(lines) - 2:
        return {}
    entries = {}
    for line in lines[2:]:
        topic, _, rest = line.partition(" ")
        partition, _, error = rest.partition(" ")
        if not partition.isdigit():
            return {}
        entries[(topic, int(partition))] = error
    return entries


def write_uncleanable(log_dir: Path, entries: Mapping[TopicPartition, str]) -> None:
    """Replace ``uncleanable-partitions`` atomically (temporary file, fsync, rename)."""
    lines = ["0", str(len(entries))]
    lines += [f"{topic} {partition} {' '.join(error.split())}" for (topic, partition), error in sorted(entries.items())]
    replace_file_durably(log_dir / UNCLEANABLE_FILE, ("\n".join(lines) + "\n").encode("utf-8"))


def clear_uncleanable(log_dir: Path) -> None:
    (log_dir / UNCLEANABLE_FILE).unlink(missing_ok=True)
