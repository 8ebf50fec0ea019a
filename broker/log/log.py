"""The log of one partition: an ordered list of segments in ``<log.dir>/<topic>-<partition>/``.

Offsets: ``log_start_offset`` is the first offset a reader may ask for (it moves forward by
retention and DeleteRecords), ``log_end_offset`` is the offset the next appended record gets, and
``recovery_point`` is the offset below which everything was fsynced: crash recovery starts at the
segment holding it. Only the last segment (the active one) is appended to; a new one is rolled
when an append would pass ``segment.bytes``, when the first batch is older than ``segment.ms``,
when an index is full, or when offsets would overflow the relative int32 of the indexes.

A ``Log`` is owned by one thread at a time: the caller serializes calls (the replica layer holds
the partition). An ``OSError`` from the files takes the log offline: it closes its files and every
later call raises ``KafkaStorageError`` (56) until the broker reopens it, which runs recovery.
"""

from __future__ import annotations

import bisect
import functools
import logging
import shutil
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Callable, NamedTuple, TypeVar

from broker.log.config import INT32_MAX, LogConfig
from broker.log.errors import KafkaStorageError, OffsetOutOfRangeError
from broker.log.fileio import fsync_dir
from broker.log.loader import load_log
from broker.log.segment import LogSegment
from broker.log.validation import (
    PreparedAppend,
    prepare_follower_append,
    prepare_leader_append,
)
from broker.records import DEFAULT_LIMITS, BatchLimits

__all__ = ["Log", "AppendInfo", "FetchData", "LogStatistics", "EARLIEST_TIMESTAMP",
           "LATEST_TIMESTAMP", "MAX_TIMESTAMP"]

logger = logging.getLogger(__name__)

# ListOffsets special timestamps (Kafka ``ListOffsetsRequest``; -3 is KIP-734, -4 KIP-1005).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4

_T = TypeVar("_T")


class AppendInfo(NamedTuple):
    """The outcome of one append; offsets are -1 when the buffer held no batch.

    A NamedTuple rather than a frozen dataclass: it is built on every produce (~0.3 us vs 1.3 us).
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # the time stamped on a LogAppendTime topic's batches; -1: CreateTime
    valid_bytes: int
    batches: int


class FetchData(NamedTuple):
    """Whole batches returned by ``Log.read``.

    The first batch is the one holding the fetch offset, so it may start below it (consumers skip
    those records, as with Kafka). ``next_offset`` is where the next fetch continues.
    """

    records: bytes
    first_offset_found: int  # base offset of the first batch, -1 when empty
    next_offset: int
    batches: int
    log_start_offset: int
    log_end_offset: int


@dataclass(frozen=True)
class LogStatistics:
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    unflushed_messages: int
    segments: int
    size_in_bytes: int
    active_segment_bytes: int
    last_flush_ms: int
    offline: bool


def _storage_op(method: Callable[..., _T]) -> Callable[..., _T]:
    """Refuse calls on an offline log; turn an ``OSError`` into ``KafkaStorageError`` (56)."""

    @functools.wraps(method)
    def wrapper(self: "Log", *args, **kwargs):
        if self._offline is not None:
            raise KafkaStorageError(f"log {self.directory} is offline: {self._offline}")
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            self._go_offline(f"{method.__name__}: {exc}")
            raise KafkaStorageError(f"I/O error on log {self.directory}: {exc}") from exc

    return wrapper


class Log:
    """One partition's log; make one with ``Log.open``."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        now_ms: Callable[[], int],
        limits: BatchLimits,
        segments: list[LogSegment],
        log_start_offset: int,
        recovery_point: int,
    ) -> None:
        assert segments, "a log always has an active segment"
        self.directory = directory
        self._now_ms = now_ms
        self._limits = limits
        self._config = config
        self._append_limits = limits._replace(batch_bytes_max=config.message_max_bytes)
        self._segments = segments
        self._bases = [segment.base_offset for segment in segments]
        self._log_start_offset = log_start_offset
        self._recovery_point = recovery_point
        self._last_flush_ms = now_ms()
        self._dir_dirty = False
        self._offline: str | None = None
        self._structure_version = 0  # see structure_version
        self._truncated_to: int | None = None  # see take_truncation_offset

    @classmethod
    def open(
        cls,
        directory: Path | str,
        config: LogConfig,
        now_ms: Callable[[], int],
        recovery_point: int = 0,
        limits: BatchLimits = DEFAULT_LIMITS,
        clean_shutdown: bool = False,
        log_start_offset: int = 0,
    ) -> "Log":
        """Load (creating if needed) the log in ``directory``; recover it unless the shutdown was
        clean. ``recovery_point`` and ``log_start_offset`` come from the checkpoint files."""
        directory = Path(directory)
        # Recovery accepts any batch an append could ever have accepted: limits change over time,
        # and the bound that matters on disk is the file (validate_batch checks the length fits).
        recovery_limits = limits._replace(batch_bytes_max=INT32_MAX)
        try:
            loaded = load_log(
                directory, config, now_ms, recovery_limits,
                recovery_point=recovery_point,
                clean_shutdown=clean_shutdown,
                log_start_offset=log_start_offset,
            )
        except OSError as exc:
            raise KafkaStorageError(f"cannot load log {directory}: {exc}") from exc
        return cls(directory, config, now_ms, limits, loaded.segments,
                   loaded.log_start_offset, loaded.recovery_point)

    # ---------------------------------------------------------------------------- properties

    @property
    def structure_version(self) -> int:
        """Moves whenever segments are truncated, deleted or replaced (not on append or roll):
        the cleaner compares it before swapping its output in (``cleaner/swap.py``)."""
        return self._structure_version

    def take_truncation_offset(self) -> int | None:
        """The lowest log end offset a truncation left since the last call, or None; the log
        cleaner's (one caller): records appended after a truncation below its checkpoint were
        never mapped, so it lowers the checkpoint to here (Kafka's
        ``LogCleanerManager.maybeTruncateCheckpoint``)."""
        offset, self._truncated_to = self._truncated_to, None
        return offset

    def _note_truncation(self, offset: int) -> None:
        self._truncated_to = offset if self._truncated_to is None else min(self._truncated_to, offset)

    @property
    def now_ms(self) -> Callable[[], int]:
        return self._now_ms

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    @property
    def is_offline(self) -> bool:
        return self._offline is not None

    def statistics(self) -> LogStatistics:
        return LogStatistics(
            log_start_offset=self._log_start_offset,
            log_end_offset=self.log_end_offset,
            recovery_point=self._recovery_point,
            unflushed_messages=self.log_end_offset - self._recovery_point,
            segments=len(self._segments),
            size_in_bytes=self.size_in_bytes,
            active_segment_bytes=self._segments[-1].size,
            last_flush_ms=self._last_flush_ms,
            offline=self._offline is not None,
        )

    def update_config(self, config: LogConfig) -> None:
        """Apply changed topic settings (they take effect from the next append or roll)."""
        self._config = config
        self._append_limits = self._limits._replace(batch_bytes_max=config.message_max_bytes)
        for segment in self._segments:
            segment.update_config(config)

    # -------------------------------------------------------------------------------- append

    @_storage_op
    def append_as_leader(
        self, records: bytes | bytearray | memoryview, leader_epoch: int
    ) -> AppendInfo:
        """Validate every batch, then give them offsets from the log end offset and this
        leader's epoch, and append. Any invalid batch raises and nothing is written.

        Raises a ``RecordsError`` (CORRUPT_MESSAGE 2, MESSAGE_TOO_LARGE 10, INVALID_RECORD 87,
        UNSUPPORTED_COMPRESSION_TYPE 76) or ``RecordListTooLargeError`` (18). The caller's
        buffer is not modified: the rewritten 16-byte prefixes are written from new bytes.
        """
        if not -1 <= leader_epoch <= INT32_MAX:
            raise ValueError(f"leader epoch {leader_epoch} is not an int32 >= -1")
        log_append_time = self._now_ms() if self._config.log_append_time else -1
        prepared = prepare_leader_append(
            _byte_view(records), self._append_limits, self._config.segment_bytes,
            self.log_end_offset, leader_epoch, log_append_time,
        )
        if prepared is None:
            return _EMPTY_APPEND
        self._append(prepared)
        return _append_info(prepared, log_append_time)

    @_storage_op
    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append a leader's batches with their offsets and epochs as they are.

        The batches are validated like a leader's (CRC included); the first may not start
        below the log end offset and offsets must increase (``InvalidOffsetError``,
        ``NonMonotonicAppendError``). Nothing is written when any check fails.
        """
        prepared = prepare_follower_append(
            _byte_view(records), self._append_limits, self._config.segment_bytes,
            self.log_end_offset,
        )
        if prepared is None:
            return _EMPTY_APPEND
        self._append(prepared)
        return _append_info(prepared)

    def _append(self, prepared: PreparedAppend) -> None:
        batches = prepared.batches
        now = self._now_ms()
        active = self._segments[-1]
        if active.should_roll(prepared.size, prepared.max_timestamp, batches[-1].last_offset, now):
            active = self.roll(batches[0].base_offset)
        active.append(prepared.buffers, batches, now)
        if self._flush_due(now):
            self.flush()

    def _flush_due(self, now: int) -> bool:
        """Kafka's flush policy: ``flush.messages`` unflushed records or ``flush.ms`` elapsed."""
        config = self._config
        return self.log_end_offset - self._recovery_point >= config.flush_messages or (
            config.flush_ms is not None and now - self._last_flush_ms >= config.flush_ms
        )

    @_storage_op
    def roll(self, new_base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(log end offset, ``new_base_offset``).

        An empty active segment at that base is kept as it is; an empty one at a lower base is
        replaced. The new file reaches the disk with the next flush (directory fsync).
        """
        base = max(self.log_end_offset, new_base_offset if new_base_offset is not None else 0)
        active = self._segments[-1]
        if active.size == 0:
            if active.base_offset == base:
                return active
            self._segments.pop()
            self._bases.pop()
            active.delete()
        else:
            active.on_become_inactive()
        segment = LogSegment.create(self.directory, base, self._config, self._now_ms)
        self._segments.append(segment)
        self._bases.append(base)
        self._dir_dirty = True
        return segment

    # ---------------------------------------------------------------------------------- read

    @_storage_op
    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchData:
        """Whole batches from the one holding ``offset``, from one segment.

        At most ``max_bytes``, except that with ``min_one_batch`` the first batch comes whole
        whatever its size (Kafka's ``minOneMessage``). A batch whose base offset is >=
        ``max_offset`` (the high watermark, exclusive) is not returned. ``offset`` outside
        [log start offset, log end offset] raises ``OffsetOutOfRangeError`` (1); the log end
        offset itself gives an empty result.
        """
        if max_bytes < 0:
            raise ValueError(f"max_bytes must be >= 0, got {max_bytes}")
        start, end = self._log_start_offset, self.log_end_offset
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{start}, {end}] of {self.directory.name}"
            )
        index = max(0, bisect.bisect_right(self._bases, offset) - 1)
        for segment in islice(self._segments, index, None):
            found = segment.read(offset, max_bytes, max_offset, min_one_batch)
            if found is not None and found.batches:
                return FetchData(found.records, found.first_offset, found.next_offset,
                                 found.batches, start, end)
            if found is not None:
                break
        return FetchData(b"", -1, offset, 0, start, end)

    @_storage_op
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """ListOffsets: (offset, timestamp) of the first record at or after the log start
        offset whose timestamp is >= ``timestamp``; None if there is none.

        Special values: -1 latest -> (log end offset, -1); -2 earliest and -4 earliest local ->
        (log start offset, -1); -3 max timestamp -> the first record carrying the largest one.
        """
        if timestamp == LATEST_TIMESTAMP:
            return self.log_end_offset, -1
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return self._log_start_offset, -1
        live = [s for s in self._segments if s.next_offset > self._log_start_offset]
        if timestamp == MAX_TIMESTAMP:
            timestamp = max((s.max_timestamp for s in live), default=-1)
            if timestamp < 0:
                return None
        elif timestamp < 0:
            raise ValueError(f"timestamp {timestamp} is neither >= 0 nor a special value")
        for segment in live:
            if segment.max_timestamp >= timestamp:
                found = segment.find_offset_by_timestamp(
                    timestamp, self._log_start_offset, self._limits
                )
                if found is not None:
                    return found
        return None

    # ----------------------------------------------------------------------------- truncate

    @_storage_op
    def truncate_to(self, offset: int) -> bool:
        """Follower truncation: remove every batch holding an offset >= ``offset``.

        A batch that straddles ``offset`` goes whole, so the log end offset may end up below
        ``offset``. Returns False when there was nothing to remove.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            return False
        self._structure_version += 1
        if self._segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset)
            return True
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._bases.pop()
            self._segments.pop().delete()  # newest first
            self._dir_dirty = True
        self._segments[-1].truncate_to(offset)
        end = self.log_end_offset
        self._note_truncation(end)
        self._log_start_offset = min(self._log_start_offset, offset, end)
        self._recovery_point = min(self._recovery_point, end)
        return True

    @_storage_op
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and continue empty at ``offset`` (log start = end = offset)."""
        if offset < 0:
            raise ValueError(f"cannot start a log at negative offset {offset}")
        self._structure_version += 1
        for segment in reversed(self._segments):
            segment.delete()
        self._segments.clear()
        self._bases.clear()
        segment = LogSegment.create(self.directory, offset, self._config, self._now_ms)
        self._segments.append(segment)
        self._bases.append(offset)
        fsync_dir(self.directory)  # the deletions must be durable before the recovery point moves
        self._dir_dirty = False
        self._log_start_offset = offset
        self._recovery_point = offset
        self._note_truncation(offset)

    def increment_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords (or a follower matching its leader): readers start at ``offset`` from
        now on; the segments wholly below it go at the next retention pass. Never moves back,
        never past the log end. True if it moved."""
        offset = min(offset, self.log_end_offset)
        if offset <= self._log_start_offset:
            return False
        self._log_start_offset = offset
        return True

    # ---------------------------------------------------------------------------- retention

    @_storage_op
    def delete_old_segments(self, high_watermark: int | None = None) -> int:
        """Retention: delete whole segments past ``retention.ms`` (largest timestamp vs now) or
        beyond ``retention.bytes`` when ``cleanup.policy`` includes ``delete`` (a ``compact``-only
        log keeps them for the cleaner, as Kafka's ``UnifiedLog.deleteOldSegments`` does), and
        segments wholly below the log start offset whatever the policy. The active segment is
        never deleted; with ``high_watermark``, nor is a segment whose successor starts above it.
        Returns the number of segments deleted."""
        deleted = 0
        if self._config.delete:
            deleted += self._delete_retention_ms_breached(high_watermark)
            deleted += self._delete_retention_size_breached(high_watermark)
        deleted += self._delete_oldest_while(
            lambda _, successor: successor.base_offset <= self._log_start_offset, None
        )
        return deleted

    def _delete_retention_ms_breached(self, high_watermark: int | None) -> int:
        retention_ms = self._config.retention_ms
        if retention_ms < 0:
            return 0
        now = self._now_ms()
        return self._delete_oldest_while(
            lambda segment, _: now - segment.largest_timestamp > retention_ms, high_watermark
        )

    def _delete_retention_size_breached(self, high_watermark: int | None) -> int:
        retention_bytes = self._config.retention_bytes
        excess = self.size_in_bytes - retention_bytes
        if retention_bytes < 0 or excess <= 0:
            return 0

        def over_size(segment: LogSegment, _: LogSegment) -> bool:
            nonlocal excess
            if excess - segment.size < 0:
                return False
            excess -= segment.size
            return True

        return self._delete_oldest_while(over_size, high_watermark)

    def _delete_oldest_while(
        self, deletable: Callable[[LogSegment, LogSegment], bool], high_watermark: int | None
    ) -> int:
        """Delete segments from the oldest while ``deletable(segment, successor)`` holds."""
        deleted = 0
        while len(self._segments) > 1:
            segment, successor = self._segments[0], self._segments[1]
            if high_watermark is not None and successor.base_offset > high_watermark:
                break
            if not deletable(segment, successor):
                break
            self._structure_version += 1
            self._segments.pop(0)
            self._bases.pop(0)
            self._log_start_offset = max(self._log_start_offset, successor.base_offset)
            self._recovery_point = max(self._recovery_point, successor.base_offset)
            segment.delete()
            self._dir_dirty = True
            deleted += 1
        return deleted

    @_storage_op
    def increment_log_start_offset(self, offset: int) -> bool:
        """Move the log start offset forward (DeleteRecords, or a leader's on a follower)."""
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"log start offset {offset} would pass the log end offset {self.log_end_offset}"
            )
        if offset <= self._log_start_offset:
            return False
        self._log_start_offset = offset
        return True

    @_storage_op
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: make ``offset`` the log start offset and delete the segments wholly
        below it; return the new log start offset."""
        self.increment_log_start_offset(offset)
        self._delete_oldest_while(
            lambda _, successor: successor.base_offset <= self._log_start_offset, None
        )
        return self._log_start_offset

    # -------------------------------------------------------------------------------- flush

    @_storage_op
    def flush(self, offset: int | None = None) -> None:
        """fsync every changed segment holding offsets below ``offset`` (default: the log end
        offset) and the directory, then advance the recovery point to ``offset``."""
        target = self.log_end_offset if offset is None else min(offset, self.log_end_offset)
        if target < self._recovery_point:
            return
        for segment in self._segments:
            if segment.base_offset > target:
                break
            segment.flush()
        if self._dir_dirty:
            fsync_dir(self.directory)
            self._dir_dirty = False
        self._recovery_point = target
        self._last_flush_ms = self._now_ms()

    @_storage_op
    def maybe_flush(self) -> bool:
        """For a periodic task: flush per policy, or flush segments rolled since the last
        flush (Kafka flushes a rolled segment right after the roll). True if it flushed."""
        if self._flush_due(self._now_ms()):
            self.flush()
            return True
        active_base = self._segments[-1].base_offset
        if active_base > self._recovery_point:
            self.flush(active_base)
            return True
        return False

    # ---------------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Flush everything (the recovery point becomes the log end offset) and close files."""
        if self._offline is None:
            try:
                self.flush()
            finally:
                self.close_handles()
        else:
            self.close_handles()

    def close_handles(self) -> None:
        """Close the files without flushing; the log is unusable afterwards."""
        for segment in self._segments:
            segment.close()
        if self._offline is None:
            self._offline = "closed"

    def delete(self) -> None:
        """Close and remove the directory with every file in it."""
        self.close_handles()
        shutil.rmtree(self.directory, ignore_errors=True)

    def holds_segments(self, segments: list[LogSegment]) -> bool:
        """``segments`` are consecutive inactive segments of this log (the very objects)."""
        if not segments or segments[0].base_offset not in self._bases:
            return False
        start = self._bases.index(segments[0].base_offset)
        inactive = self._segments[start:len(self._segments) - 1]
        return len(inactive) >= len(segments) and all(a is b for a, b in zip(inactive, segments))

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> None:
        """Put ``new`` where ``old`` were (the files are already swapped: ``cleaner/swap.py``).
        The log start offset and every offset readers may ask for stay as they were."""
        assert self.holds_segments(old) and new.base_offset == old[0].base_offset
        start = self._bases.index(old[0].base_offset)
        self._segments[start:start + len(old)] = [new]
        self._bases[start:start + len(old)] = [new.base_offset]
        self._structure_version += 1

    def _go_offline(self, reason: str) -> None:
        logger.error("log %s goes offline: %s", self.directory, reason)
        self._offline = reason
        self._structure_version += 1
        for segment in self._segments:
            try:
                segment.close()
            except OSError as exc:  # already failing; the first reason is the one reported
                logger.debug("closing %s after failure: %s", segment.log_path, exc)

    def __repr__(self) -> str:
        return (
            f"Log({self.directory.name}, start={self._log_start_offset}, "
            f"end={self.log_end_offset}, segments={len(self._segments)})"
        )


_EMPTY_APPEND = AppendInfo(-1, -1, -1, -1, -1, 0, 0)


def _byte_view(records: bytes | bytearray | memoryview) -> memoryview:
    view = memoryview(records)
    return view if view.format == "B" and view.ndim == 1 else view.cast("B")


def _append_info(prepared: PreparedAppend, log_append_time: int = -1) -> AppendInfo:
    batches = prepared.batches
    return AppendInfo(batches[0].base_offset, batches[-1].last_offset, prepared.max_timestamp,
                      prepared.offset_of_max_timestamp, log_append_time, prepared.size, len(batches))
