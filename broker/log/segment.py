"""One segment of a partition's log: ``<base>.log`` with its ``.index`` and ``.timeindex``.

File names are the segment's base offset (the smallest offset it may hold) zero-padded to 20
digits, as in Kafka: ``00000000000000368769.log``, ``.index``, ``.timeindex``.

``.log`` format: Kafka v2 record batches back to back, byte for byte as on the wire with baseOffset
and partitionLeaderEpoch assigned (see ``broker.records.header`` for the 61-byte batch header).
No file header, no padding, no footer. Invariants:

* offsets strictly increase: each batch's baseOffset >= the previous batch's lastOffset + 1
  (gaps are legal, e.g. after compaction on a leader);
* every offset o satisfies base <= o <= base + 2^31 - 1, so relative offsets fit the int32 index
  fields, and the file is at most 2^31 - 1 bytes, so positions do too;
* each batch carries a CRC-32C over [attributes, end). baseOffset, batchLength,
  partitionLeaderEpoch, magic and the CRC field itself are outside it, so a flipped bit there is
  caught only by the length, magic and offset-order checks.

After a crash the file may have lost its tail (cut inside a batch) or gained garbage (the OS
persisted the new length before the data blocks). ``recover`` validates every batch from position
0 (length bounds, magic, codec, counts, CRC, offset order), truncates at the first invalid byte and
rebuilds both indexes. A clean open only reads the last index entries and walks the batch headers
after the last indexed position (``_load_tail_state``); anything inconsistent marks the segment
``needs_recovery``.

A segment is used by one thread at a time (its ``Log`` serializes calls).
"""

from __future__ import annotations

import errno
import logging
import os
from bisect import bisect_left
from itertools import chain
from pathlib import Path
from typing import Callable, Iterator, NamedTuple, Sequence

from broker.log.config import INT32_MAX, LogConfig
from broker.log.fileio import (
    FileWindow,
    iter_file_headers,
    open_rw,
    pread_exact,
    pwritev_all,
    sync_data,
)
from broker.log.offset_index import OffsetIndex
from broker.log.time_index import NO_TIMESTAMP, TimeIndex
from broker.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    BatchLimits,
    RecordsError,
    batch_size_at,
    decode_batch,
    iter_batches,
    read_header,
    validate_batch,
)

__all__ = [
    "LogSegment",
    "BatchInfo",
    "SegmentSlice",
    "segment_file_name",
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
]

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
_SCAN_WINDOW_BYTES = 8192  # header walks cover about one index interval per read
_RECENT_BATCHES_MAX = 256  # positions of batches appended since the last index entry, kept in memory
_RECOVERY_WINDOW_BYTES = 4 << 20  # recovery reads (and CRCs) the whole file in 4 MiB windows
_LOG_APPEND_TIME = 1


def segment_file_name(base_offset: int) -> str:
    """Kafka's ``LogFileUtils.filenamePrefixFromOffset``: the offset as 20 zero-padded digits."""
    return f"{base_offset:020d}"


class BatchInfo(NamedTuple):
    """What a segment needs to know of one batch it appends (offsets already assigned)."""

    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1


class SegmentSlice(NamedTuple):
    """Whole batches read from one segment. ``batches == 0`` means nothing fitted the bounds."""

    records: bytes
    first_offset: int  # baseOffset of the first batch, -1 if none
    next_offset: int  # lastOffset + 1 of the last batch, -1 if none
    batches: int


_EMPTY_SLICE = SegmentSlice(b"", -1, -1, 0)


class LogSegment:
    """A segment's three files, its in-memory position state and its sparse indexes."""

    def __init__(
        self, directory: Path, base_offset: int, config: LogConfig, now_ms: Callable[[], int],
        file_suffix: str = "",
    ) -> None:
        prefix = directory / segment_file_name(base_offset)
        self.base_offset = base_offset
        self.log_path = prefix.with_name(prefix.name + LOG_SUFFIX + file_suffix)
        self._config = config
        self._now_ms = now_ms
        self._log_fd = -1
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        try:
            self._log_fd = open_rw(self.log_path)
            index_bytes = config.segment_index_bytes
            self._offset_index = OffsetIndex(
                prefix.with_name(prefix.name + INDEX_SUFFIX + file_suffix), base_offset, index_bytes
            )
            self._time_index = TimeIndex(
                prefix.with_name(prefix.name + TIME_INDEX_SUFFIX + file_suffix), base_offset, index_bytes
            )
        except BaseException:
            self.close()
            raise
        self._size = 0
        self._first_append_ms = now_ms()  # reset by the first append into an empty segment
        self._last_modified_ms = self._first_append_ms
        self._dirty = False
        self.needs_recovery = False
        self._reset_state()

    # ----------------------------------------------------------------------------- lifecycle

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, config: LogConfig, now_ms: Callable[[], int],
        file_suffix: str = "",
    ) -> "LogSegment":
        """A new, empty segment. Leftover files of the same name are emptied. ``file_suffix``
        names files the log does not serve yet (the cleaner writes ``<base>.log.cleaned``)."""
        segment = cls(directory, base_offset, config, now_ms, file_suffix)
        try:
            os.ftruncate(segment._log_fd, 0)
            segment._offset_index.reset()
            segment._time_index.reset()
        except BaseException:
            segment.close()
            raise
        segment._dirty = True
        return segment

    @classmethod
    def open(
        cls, directory: Path, base_offset: int, config: LogConfig, now_ms: Callable[[], int]
    ) -> "LogSegment":
        """Open an existing segment with O(1) index checks; ``needs_recovery`` tells the result."""
        prefix = directory / segment_file_name(base_offset)
        indexes_exist = all(
            prefix.with_name(prefix.name + suffix).exists()
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
        )
        segment = cls(directory, base_offset, config, now_ms)
        try:
            stat = os.fstat(segment._log_fd)
            segment._size = stat.st_size
            segment._last_modified_ms = stat.st_mtime_ns // 1_000_000
            segment.needs_recovery = not (
                indexes_exist
                and segment._size <= INT32_MAX
                and segment._offset_index.check_quick(segment._size)
                and segment._time_index.check_quick()
                and segment._load_tail_state()
            )
        except BaseException:
            segment.close()
            raise
        return segment

    @property
    def first_batch_timestamp(self) -> int:
        """The max timestamp of the first batch, -1 when empty (what ``max.compaction.lag.ms``
        measures the age of a segment's oldest dirty data by, as Kafka does)."""
        first = self._first_batch_max_timestamp
        return first if first is not None else -1

    @property
    def file_paths(self) -> tuple[Path, Path, Path]:
        """The .log, .index and .timeindex paths (with this segment's file suffix)."""
        return self.log_path, self._offset_index.path, self._time_index.path

    def close(self) -> None:
        """Close the fds without fsync (index entries held in memory are written first)."""
        try:
            for index in (self._offset_index, self._time_index):
                if index is not None:
                    index.close()
        finally:
            fd, self._log_fd = self._log_fd, -1
            if fd >= 0:
                os.close(fd)

    def delete(self) -> None:
        """Close and remove the files: the .log first, so a crash leaves only orphan indexes."""
        fd, self._log_fd = self._log_fd, -1
        if fd >= 0:
            os.close(fd)
        self.log_path.unlink(missing_ok=True)
        self._offset_index.delete()
        self._time_index.delete()
        if self.log_path.name.endswith(LOG_SUFFIX):  # a served segment (not the cleaner's output):
            # its aborted-transaction index goes with it (broker.log.txn_index)
            self.log_path.with_name(segment_file_name(self.base_offset) + ".txnindex").unlink(missing_ok=True)

    def flush(self) -> None:
        """fsync the log and both indexes if anything changed since the last flush."""
        if not self._dirty:
            return
        sync_data(self._log_fd)
        self._offset_index.flush()
        self._time_index.flush()
        self._dirty = False

    def update_config(self, config: LogConfig) -> None:
        self._config = config
        self._offset_index.set_max_index_bytes(config.segment_index_bytes)
        self._time_index.set_max_index_bytes(config.segment_index_bytes)

    # ---------------------------------------------------------------------------- properties

    @property
    def size(self) -> int:
        """Bytes of batches in the .log file."""
        return self._size

    @property
    def next_offset(self) -> int:
        """lastOffset + 1 of the last batch; the base offset when the segment is empty."""
        return self._next_offset

    @property
    def max_timestamp(self) -> int:
        """The largest batch maxTimestamp in the segment, -1 if none."""
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        """lastOffset of the first batch carrying ``max_timestamp``."""
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What time retention compares: the max timestamp, else the last modification time."""
        return self._max_timestamp if self._max_timestamp >= 0 else self._last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        return self._last_modified_ms

    @property
    def is_dirty(self) -> bool:
        return self._dirty

    @property
    def index_entries(self) -> tuple[int, int]:
        """(offset index entries, time index entries)."""
        return self._offset_index.entries, self._time_index.entries

    # -------------------------------------------------------------------------------- append

    def should_roll(
        self, append_bytes: int, max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool:
        """Whether an append of ``append_bytes`` ending at ``last_offset``, whose largest
        timestamp is ``max_timestamp``, must go to a new segment (Kafka ``shouldRoll``): it would
        pass ``segment.bytes``, an index is full, offsets would overflow the relative int32, or
        the segment is older than ``segment.ms``. Age counts two ways and either suffices:
        record time (KIP-33: the new batch's max timestamp minus the first batch's) and the
        injected clock since the first append (or since the open). Record time alone would roll
        on every batch of a producer whose clock runs years behind, wall time alone would not
        split a replay of old data by its own time."""
        if self._size > self._config.segment_bytes - append_bytes:
            return True
        if last_offset - self.base_offset > INT32_MAX:
            return True
        if self._size == 0:
            return False
        segment_ms = self._config.segment_ms
        if now_ms - self._first_append_ms > segment_ms:
            return True
        first = self._first_batch_max_timestamp
        if first is not None and first >= 0 and max_timestamp - first > segment_ms:
            return True
        return self._offset_index.is_full or self._time_index.is_full

    def append(
        self,
        buffers: Sequence[bytes | bytearray | memoryview],
        batches: Sequence[BatchInfo],
        now_ms: int | None = None,
    ) -> None:
        """Write pre-validated batches (offsets assigned) at the end, then index them.

        ``buffers`` concatenated are exactly the batches, in order: one ``pwritev``. Index
        entries are made after the log bytes are written and wait in memory until a flush, a
        roll or 4 KiB of them (the OS may still persist the files in either order; see
        ``offset_index``). ``now_ms`` saves a clock call when the caller has just read it.
        """
        assert batches and batches[0].base_offset >= self._next_offset, "offsets must increase"
        assert batches[-1].last_offset - self.base_offset <= INT32_MAX, "roll before overflow"
        total = sum(info.size for info in batches)
        assert self._size + total <= INT32_MAX, "segment positions must fit in int32"
        position = self._size
        written = pwritev_all(self._log_fd, buffers, position)
        assert written == total, f"buffers hold {written} bytes, batches say {total}"
        now = self._now_ms() if now_ms is None else now_ms
        if position == 0:
            self._first_append_ms = now
        self._size += total
        self._dirty = True
        self._last_modified_ms = now
        for info in batches:
            self._index_batch(position, info)
            position += info.size

    def _index_batch(self, position: int, info: BatchInfo) -> None:
        """Account one batch at ``position``: max timestamp, sparse index entries, next offset."""
        if info.max_timestamp > self._max_timestamp:
            self._max_timestamp = info.max_timestamp
            self._offset_of_max_timestamp = info.last_offset
        if self._bytes_since_index > self._config.index_interval_bytes:
            self._offset_index.append(info.last_offset, position)
            self._time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
            self._bytes_since_index = 0
            self._forget_recent()
        self._bytes_since_index += info.size
        if len(self._recent_last_offsets) >= _RECENT_BATCHES_MAX:
            self._forget_recent()  # a huge index interval: the index alone answers older reads
        self._recent_last_offsets.append(info.last_offset)
        self._recent_batches.append((position, info))
        self._next_offset = info.last_offset + 1
        if self._first_batch_max_timestamp is None:
            self._first_batch_max_timestamp = info.max_timestamp

    def _forget_recent(self) -> None:
        self._recent_last_offsets: list[int] = []
        self._recent_batches: list[tuple[int, BatchInfo]] = []

    def _recent_batch(self, offset: int) -> tuple[int, BatchInfo] | None:
        """(position, info) of the first batch appended since the last index entry whose last
        offset is >= ``offset``, or None. A consumer at the tail asks for a batch appended
        moments ago: without this every Fetch walked the batch headers since the last index
        entry (index.interval.bytes: ~25 one-record batches) with a ``pread``. The entries are
        what this segment appended (or indexed on recovery), in order, so they need no check
        against the file; the bytes read later are parsed whole before they are returned."""
        offsets = self._recent_last_offsets
        j = bisect_left(offsets, offset)
        if j == 0 or j == len(offsets):
            return None  # entry 0 may not be the first such batch: the ones before are not kept
        return self._recent_batches[j]  # consecutive batches: entry j-1 ends below offset

    def on_become_inactive(self) -> None:
        """When rolled: record the exact largest timestamp in the time index, and write the
        index entries still held in memory (the next flush makes them durable)."""
        self._forget_recent()
        if self._time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp):
            self._dirty = True
        self._offset_index.write_pending()
        self._time_index.write_pending()

    # ---------------------------------------------------------------------------------- read

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader | BatchInfo] | None:
        """Position and header of the first batch whose last offset is >= ``offset`` (its
        ``BatchInfo`` when it is one of the batches appended since the last index entry: it has
        the same ``base_offset``, ``last_offset``, ``next_offset`` and ``size``)."""
        if offset >= self._next_offset:
            return None  # past the last batch: a consumer waiting at the log end
        self._ensure_indexes()  # callers go on to use them (truncate_to, read's bound)
        recent = self._recent_batch(offset)
        if recent is not None:
            return recent
        for position, header in self._batches_from(offset):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(
        self,
        offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> SegmentSlice | None:
        """Whole batches from the one holding ``offset``: at most ``max_bytes`` (but the first
        batch whole when ``min_one_batch``), none whose base offset is >= ``max_offset``.

        None when no batch of this segment reaches ``offset`` (the log moves on to the next
        segment). The range is read with one ``pread``.
        """
        found = self.translate_offset(offset)
        if found is None:
            return None
        start, first = found
        if max_offset is not None and first.base_offset >= max_offset:
            return _EMPTY_SLICE
        if first.size > max_bytes:
            if not min_one_batch:
                return _EMPTY_SLICE
            data = pread_exact(self._log_fd, first.size, start)
            return SegmentSlice(data, first.base_offset, first.next_offset, 1)
        limit = self._size - start
        if max_offset is not None:
            bound = self._offset_index.position_after(max_offset)
            if bound is not None:
                limit = min(limit, bound - start)
        # never below the first batch: a damaged index entry must not cut it
        data = pread_exact(self._log_fd, max(first.size, min(limit, max_bytes)), start)
        end = next_offset = count = 0
        for position, header in iter_batches(data):
            if max_offset is not None and header.base_offset >= max_offset:
                break
            end, next_offset, count = position + header.size, header.next_offset, count + 1
        if not count:  # the file shrank under us: an operating error, not a broken invariant
            raise OSError(errno.EIO, f"{self.log_path}: batch at {start} is no longer whole")
        records = data if end == len(data) else data[:end]
        return SegmentSlice(records, first.base_offset, next_offset, count)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int, limits: BatchLimits
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with offset >= ``starting_offset`` and
        timestamp >= ``timestamp``, or None. Decodes only the batch that holds it."""
        self._ensure_indexes()
        _, indexed_offset = self._time_index.lookup(timestamp)
        for position, header in self._batches_from(max(indexed_offset, starting_offset)):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            data = pread_exact(self._log_fd, header.size, position)
            batch = decode_batch(data, 0, limits)
            for record in batch.records:
                record_ts = (
                    header.max_timestamp
                    if header.timestamp_type == _LOG_APPEND_TIME
                    else record.timestamp
                )
                if record.offset >= starting_offset and record_ts >= timestamp:
                    return record.offset, record_ts
        return None

    def _batches_from(self, offset: int) -> Iterator[tuple[int, BatchHeader]]:
        """Batch headers from the indexed position for ``offset`` to the end of the segment.

        The header found at an index entry's position must carry the entry's offset; if it does
        not, the index is wrong (checked on the way out), so it is rebuilt and looked up again.
        """
        self._ensure_indexes()
        key, start = self._offset_index.lookup(offset)
        scan = iter_file_headers(self._log_fd, start, self._size, _SCAN_WINDOW_BYTES)
        head = next(scan, None)
        if start and (head is None or head[1].last_offset != key):
            logger.warning(
                "%s: index entry (%d, %d) does not match the log; rebuilding the indexes",
                self.log_path, key, start,
            )
            self._rebuild_indexes()
            _, start = self._offset_index.lookup(offset)
            return iter_file_headers(self._log_fd, start, self._size, _SCAN_WINDOW_BYTES)
        return chain((head,), scan) if head is not None else iter(())

    # ----------------------------------------------------------------------------- truncate

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= ``offset``; return the bytes removed.

        A batch holding ``offset`` goes whole (Kafka ``LogSegment.truncateTo``). Index entries go
        first, then the log bytes, so a crash in between leaves a valid (sparser) index.
        """
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, _ = found
        self._forget_recent()
        self._offset_index.truncate_to(offset)
        self._time_index.truncate_to(offset)
        os.ftruncate(self._log_fd, position)
        removed = self._size - position
        self._size = position
        self._dirty = True
        self._last_modified_ms = self._now_ms()
        if not self._load_tail_state():
            self._rebuild_indexes()
        return removed

    # ----------------------------------------------------------------------------- recovery

    def recover(self, limits: BatchLimits, min_offset: int = 0) -> int:
        """Validate every batch from position 0; truncate at the first invalid byte.

        A batch is valid when its length fits the file, it passes ``validate_batch`` with its CRC
        against ``limits``, its base offset is >= ``max(min_offset, base offset)`` and >= the
        previous batch's last offset + 1, and its last offset fits a relative int32. Both indexes
        are rebuilt. Returns the number of bytes truncated (0 when the segment was whole).
        """
        valid_end = self._reindex(limits, min_offset)
        truncated = self._size - valid_end
        if truncated:
            os.ftruncate(self._log_fd, valid_end)
            self._size = valid_end
            self._last_modified_ms = self._now_ms()
        self._dirty = True
        self.needs_recovery = False
        return truncated

    def _rebuild_indexes(self) -> None:
        """Rebuild both indexes from batch headers (no CRC) of a segment already trusted."""
        valid_end = self._reindex(None, self.base_offset)
        self._dirty = True
        if valid_end != self._size:
            logger.error(
                "%s: batch structure breaks at byte %d of %d; indexed the valid prefix only",
                self.log_path, valid_end, self._size,
            )

    def _reindex(self, limits: BatchLimits | None, min_offset: int) -> int:
        """Rebuild indexes and state from position 0; return where the valid batches end."""
        self._offset_index.reset()
        self._time_index.reset()
        self._reset_state()
        expected = max(min_offset, self.base_offset)
        valid_end = 0
        scan = (
            self._scan_validated(limits)
            if limits is not None
            else iter_file_headers(self._log_fd, 0, self._size, _SCAN_WINDOW_BYTES)
        )
        for position, header in scan:
            if header.base_offset < expected or header.last_offset - self.base_offset > INT32_MAX:
                break
            info = BatchInfo(
                header.base_offset, header.last_offset, header.max_timestamp, header.size
            )
            self._index_batch(position, info)
            expected = header.next_offset
            valid_end = position + header.size
        return valid_end

    def _scan_validated(self, limits: BatchLimits) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch passing ``validate_batch`` with CRC; stops at the
        first that does not (cut, garbage, bad CRC, over a limit)."""
        window = FileWindow(self._log_fd, self._size, _RECOVERY_WINDOW_BYTES)
        position = 0
        while position < self._size and position <= INT32_MAX:
            prefix = window.view(position, LOG_OVERHEAD)
            if prefix is None:
                return
            size = batch_size_at(prefix, 0)
            if size < HEADER_SIZE or position + size > self._size:
                return
            view = window.view(position, size)
            if view is None:
                return
            try:
                header = validate_batch(view, 0, limits, check_crc=True)
            except RecordsError as exc:
                logger.warning("%s: invalid batch at byte %d: %s", self.log_path, position, exc)
                return
            yield position, header
            position += size

    # ------------------------------------------------------------------------- state loading

    def _reset_state(self) -> None:
        self._next_offset = self.base_offset
        self._max_timestamp = NO_TIMESTAMP
        self._offset_of_max_timestamp = self.base_offset
        self._bytes_since_index = 0
        self._first_batch_max_timestamp: int | None = None
        self._forget_recent()

    def _load_tail_state(self) -> bool:
        """Derive next offset and max timestamp from the last index entries plus a walk of the
        batch headers after the last indexed position; False if anything disagrees."""
        last = self._offset_index.last_entry
        start = last[1] if last is not None else 0
        max_ts, offset_of_max = self._time_index.last_entry
        next_offset, end = self.base_offset, start
        for position, header in iter_file_headers(self._log_fd, start, self._size):
            if position == start and last is not None and header.last_offset != last[0]:
                return False
            if header.base_offset < next_offset:
                return False
            if header.last_offset - self.base_offset > INT32_MAX:
                return False
            if header.max_timestamp > max_ts:
                max_ts, offset_of_max = header.max_timestamp, header.last_offset
            next_offset, end = header.next_offset, position + header.size
        if end != self._size:
            return False
        if self._time_index.entries and self._time_index.last_entry[1] >= next_offset:
            return False
        self._next_offset = next_offset
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, offset_of_max
        self._bytes_since_index = self._size - start
        self._first_batch_max_timestamp = (
            read_header(pread_exact(self._log_fd, HEADER_SIZE, 0)).max_timestamp
            if self._size
            else None
        )
        return True

    def _ensure_indexes(self) -> None:
        """Load both indexes on first use; a failed full check rebuilds them from the log."""
        if self._offset_index.loaded and self._time_index.loaded:
            return
        if self._offset_index.load() and self._time_index.load():
            return
        logger.warning("%s: index failed its sanity check; rebuilding", self.log_path)
        self._rebuild_indexes()

    def __repr__(self) -> str:
        return (
            f"LogSegment(base_offset={self.base_offset}, size={self._size}, "
            f"next_offset={self._next_offset})"
        )
