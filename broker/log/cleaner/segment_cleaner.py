"""The blocking work of a cleaning pass: read segments, build the offset map, write cleaned groups.

This runs in the cleaner's worker process (``worker_pass.py``) or on a cleaner thread, never on the
broker's event loop, and touches no ``Log`` state: it reads segment files through file
descriptors of its own (``SegmentFile``, opened by path when the pass starts, and handed to the
worker), so a segment that the log deletes or truncates meanwhile cannot hand it another file's
bytes; the swap (``swap.py``, on the loop) then sees that the log changed and throws the output
away.

Reading: whole batches, up to ``chunk_bytes`` at a time, with CRC checks (cleaning never copies a
corrupt batch into a clean segment: a bad CRC fails the pass and the log is marked uncleanable).
A chunk costs a few compiled calls (``chunk_kernels``: its headers, its records with the keys
hashed, its rewrite) and array operations; Python works per chunk, and per batch only for a CRC,
a ``BatchInfo``, and the batches that are not plain (transactional, control, compressed, EMPTY, a
new delete horizon), which go one by one: a batch whose delete horizon changes is decoded and
encoded again by the reference codec (``encode_retained_batch``), record by record.

Writing: one ``<base>.log.cleaned`` segment per group (with its ``.index.cleaned`` and
``.timeindex.cleaned``), flushed before it is returned. The group's last batch is always
written, empty if the pass drops all its records, so the cleaned segment spans exactly the offsets
of the group it replaces: after a crash in the middle of a swap, recovery knows which old
segments the ``.swap`` replaces (``loader.py``), and the log reads as either the old or the new
segments, never a mixture.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import crc32c
import numpy as np

from broker.log.cleaner.chunk_kernels import (
    H_ATTRIBUTES,
    H_BASE_OFFSET,
    H_BASE_TS,
    H_COUNT,
    H_CRC,
    H_END_RECORD,
    H_FIRST_RECORD,
    H_LAST_DELTA,
    H_POS,
    H_PRODUCER_ID,
    H_SIZE,
    HEADER_COLUMNS,
    STATE_SIZE,
    rewrite_batches,
    scan_records,
    walk_headers,
)
from broker.log.cleaner.offset_map import OffsetMap, OffsetMapBuilder
from broker.log.cleaner.retention import (
    ACT_DROP,
    ACT_EMPTY,
    ACT_KEEP,
    ACT_REWRITE,
    DROP,
    EMPTY,
    KEEP,
    NO_HORIZON,
    REWRITE,
    AbortedTracker,
    AbortedTxn,
    BatchDecision,
    BatchFacts,
    ChunkRecords,
    PlainBatches,
    PlainDecisions,
    RetentionPass,
)
from broker.log.config import LogConfig
from broker.log.fileio import pread_exact
from broker.log.segment import BatchInfo, LogSegment
from broker.records import BatchHeader, BatchLimits, decode_batch, encode_retained_batch, iter_batches
from broker.records._arrow_kernels import ERR_HEADER_COUNT, S_DETAIL, S_ERROR
from broker.records.arrow import _DECODE_ERRORS
from broker.records.compression import decompress
from broker.records.errors import CorruptRecordError, InvalidRecordError
from broker.records.header import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    TRANSACTIONAL_MASK,
    batch_size_at,
    read_header,
    validate_batch,
)
from broker.records.retain import retain_records

__all__ = ["CLEANED_FILE_SUFFIX", "SegmentFile", "Throttler", "build_offset_map", "clean_group", "decode_chunk"]

CLEANED_FILE_SUFFIX = ".cleaned"
_CRC = struct.Struct(">I")


class SegmentFile:
    """A segment's .log file opened for this pass: ``size`` is its size when the pass began."""

    def __init__(self, base_offset: int, path: Path, size: int) -> None:
        self.base_offset = base_offset
        self.path = path
        self.size = size
        self.fd = os.open(path, os.O_RDONLY)

    @classmethod
    def from_fd(cls, base_offset: int, path: Path, size: int, fd: int) -> "SegmentFile":
        """The file open at ``fd`` (a worker process's copy of the broker's; closed by the caller)."""
        segment_file = cls.__new__(cls)
        segment_file.base_offset, segment_file.path, segment_file.size, segment_file.fd = base_offset, path, size, fd
        return segment_file

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def chunks(self, chunk_bytes: int) -> Iterator[tuple[memoryview, np.ndarray]]:
        """Runs of whole batches of at most ``chunk_bytes`` (one batch may be larger), each with
        its header table (``chunk_kernels.walk_headers``; positions from the run's start). Each
        byte is read once, but the cut batch at a run's end, read again as the next run's first."""
        start = 0
        table = np.empty((chunk_bytes // HEADER_SIZE + 1, HEADER_COLUMNS), np.int64)
        while start < self.size:
            data = pread_exact(self.fd, min(chunk_bytes, self.size - start), start)
            buf = np.frombuffer(data, np.uint8)
            rows, end = walk_headers(buf, 0, len(data), table)
            if rows == 0 and len(data) >= LOG_OVERHEAD:  # one batch larger than a chunk
                size = batch_size_at(data, 0)
                if chunk_bytes < size <= self.size - start:
                    data = pread_exact(self.fd, size, start)
                    buf = np.frombuffer(data, np.uint8)
                    rows, end = walk_headers(buf, 0, len(data), table)
            if rows == 0:
                raise OSError(f"{self.path}: batches end at byte {start} of {self.size}; the segment "
                              "changed or is corrupt")
            yield memoryview(data)[:end], table[:rows].copy()
            start += end


class Throttler:
    """``log.cleaner.io.max.bytes.per.second``: ``note(n)`` sleeps as long as it takes to keep
    the bytes read and written under the rate (the clock and the sleep are injected)."""

    def __init__(self, bytes_per_second: float, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate = bytes_per_second
        self._clock, self._sleep = clock, sleep
        self._start = clock()
        self._bytes = 0

    def note(self, nbytes: int) -> None:
        if self.rate == float("inf") or self.rate <= 0:
            return
        self._bytes += nbytes
        ahead = self._bytes / self.rate - (self._clock() - self._start)
        if ahead > 0:
            self._sleep(ahead)


class DecodedChunk(NamedTuple):
    data: memoryview
    table: np.ndarray  # int64 [batches, HEADER_COLUMNS] (chunk_kernels), record ranges filled in
    records: ChunkRecords
    timestamps_ms: np.ndarray  # int64, per record
    starts: np.ndarray  # int64 per record: its bytes (length prefix included) in ``data``,
    ends: np.ndarray  # or in its batch's decompressed records for a compressed batch
    compressed: bool  # any batch of the chunk is

    @property
    def plain(self) -> bool:
        """No transactional or control batch: ``RetentionPass.decide_plain`` applies."""
        return not np.any(self.table[:, H_ATTRIBUTES] & (TRANSACTIONAL_MASK | CONTROL_MASK))

    def plain_batches(self) -> PlainBatches:
        t = self.table
        stamped = (t[:, H_ATTRIBUTES] & DELETE_HORIZON_MASK) != 0
        return PlainBatches(t[:, H_BASE_OFFSET], t[:, H_BASE_OFFSET] + t[:, H_LAST_DELTA], t[:, H_PRODUCER_ID],
                            np.where(stamped, t[:, H_BASE_TS], NO_HORIZON), t[:, H_FIRST_RECORD], t[:, H_END_RECORD])

    def facts(self) -> list[BatchFacts]:
        out = []
        for row in self.table.tolist():
            attributes = row[H_ATTRIBUTES]
            control = bool(attributes & CONTROL_MASK)
            horizon = row[H_BASE_TS] if attributes & DELETE_HORIZON_MASK else NO_HORIZON
            out.append(BatchFacts(row[H_BASE_OFFSET], row[H_BASE_OFFSET] + row[H_LAST_DELTA], row[H_PRODUCER_ID],
                                  bool(attributes & TRANSACTIONAL_MASK), control, horizon, row[H_FIRST_RECORD],
                                  row[H_END_RECORD]))
        return out

    def header(self, i: int) -> BatchHeader:
        return read_header(self.data, int(self.table[i, H_POS]))


def _check_headers(data: memoryview, table: np.ndarray, limits: BatchLimits) -> None:
    """What ``validate_batch`` checks beyond ``walk_headers``' structure, CRC included; the
    first batch that fails is handed to ``validate_batch`` for its typed error."""
    sizes, counts, codecs = table[:, H_SIZE], table[:, H_COUNT], table[:, H_ATTRIBUTES] & COMPRESSION_MASK
    bad = ((sizes > limits.batch_bytes_max) | (counts < 0) | (table[:, H_LAST_DELTA] < counts - 1)
           | (counts > limits.records_per_batch_max) | ((codecs == 0) & (counts * 7 > sizes - HEADER_SIZE)))
    positions = table[:, H_POS].tolist()
    for i in np.flatnonzero(bad | (codecs != 0)).tolist():
        validate_batch(data, positions[i], limits, True)  # raises for a bad one; compressed: checked whole
    for i in np.flatnonzero(bad).tolist():
        raise CorruptRecordError(f"batch at base offset {int(table[i, H_BASE_OFFSET])} is malformed")
    for position, size, crc, plain in zip(positions, sizes.tolist(), table[:, H_CRC].tolist(), (codecs == 0).tolist()):
        if plain and crc32c.crc32c(data[position + ATTRIBUTES_OFFSET:position + size]) != crc:
            validate_batch(data, position, limits, True)  # raises the CRC error


def decode_chunk(data: memoryview, table: np.ndarray, keys: tuple[int, int, int, int],
                 limits: BatchLimits) -> DecodedChunk:
    """The records of a run of whole batches (CRC-checked), keys hashed where they lie
    (``chunk_kernels.scan_records``); ``table`` is the run's, from ``SegmentFile.chunks``."""
    _check_headers(data, table, limits)
    buf = np.frombuffer(data, np.uint8)
    control = (table[:, H_ATTRIBUTES] & CONTROL_MASK) != 0
    rows = int(table[~control, H_COUNT].sum())
    offsets, timestamps, starts, ends = (np.empty(rows, np.int64) for _ in range(4))
    hi, lo = np.empty(rows, np.uint64), np.empty(rows, np.uint64)
    has_key, tombstone = np.empty(rows, np.bool_), np.empty(rows, np.bool_)
    state = np.zeros(STATE_SIZE, np.int64)
    k0, k1, k2, k3 = (np.uint64(k) for k in keys)
    compressed = np.flatnonzero(((table[:, H_ATTRIBUTES] & COMPRESSION_MASK) != 0) & ~control).tolist()
    row = batch = 0
    for stop in compressed + [table.shape[0]]:
        outputs = (offsets, timestamps, hi, lo, has_key, tombstone, starts, ends, state)
        row = scan_records(buf, table, batch, stop, 0, -1, row, limits.headers_per_record_max,
                           k0, k1, k2, k3, *outputs)
        if state[S_ERROR] or stop == table.shape[0]:
            break
        position, size = int(table[stop, H_POS]), int(table[stop, H_SIZE])
        records = decompress(int(table[stop, H_ATTRIBUTES]) & COMPRESSION_MASK,
                             data[position + HEADER_SIZE:position + size], limits.decompressed_bytes_max)
        row = scan_records(np.frombuffer(records, np.uint8), table, stop, stop + 1, 0, len(records), row,
                           limits.headers_per_record_max, k0, k1, k2, k3, *outputs)
        if state[S_ERROR]:
            break
        batch = stop + 1
    if state[S_ERROR]:
        _raise_scan_error(state, table, limits)
    records = ChunkRecords(offsets=offsets, hi=hi, lo=lo, has_key=has_key, is_tombstone=tombstone)
    return DecodedChunk(data, table, records, timestamps, starts, ends, bool(compressed))


def _raise_scan_error(state: np.ndarray, table: np.ndarray, limits: BatchLimits) -> None:
    code, batch, pos, detail = (int(v) for v in state[:S_DETAIL + 1])
    where = f"in the batch at base offset {int(table[batch, H_BASE_OFFSET])}, byte {pos}"
    if code == ERR_HEADER_COUNT:
        raise InvalidRecordError(f"record has {detail} headers, limit {limits.headers_per_record_max} ({where})")
    raise CorruptRecordError(f"{_DECODE_ERRORS[code].format(detail=detail)} ({where})")


def build_offset_map(segments: Sequence[SegmentFile], *, first_dirty: int, first_uncleanable: int, capacity: int,
                     keys: tuple[int, int, int, int], aborted: Sequence[AbortedTxn], limits: BatchLimits,
                     chunk_bytes: int, throttler: Throttler | None = None) -> OffsetMap:
    """Map keys of ``[first_dirty, first_uncleanable)`` (committed and plain data only) to their
    newest offset; ``end_offset`` of the result is where the map stopped (it may fill early)."""
    builder = OffsetMapBuilder(capacity, first_dirty)
    tracker = AbortedTracker(aborted)
    for segment in segments:
        for data, table in segment.chunks(chunk_bytes):
            if throttler is not None:
                throttler.note(len(data))
            chunk = decode_chunk(data, table, keys, limits)
            rec = chunk.records
            mapped = rec.has_key & (rec.offsets >= first_dirty) & (rec.offsets < first_uncleanable)
            if aborted:
                for fact in chunk.facts():
                    if tracker.is_aborted(fact):
                        mapped[fact.first_record:fact.end_record] = False
            consumed = builder.add(rec.offsets, rec.hi, rec.lo, mapped)
            if consumed < rec.offsets.shape[0]:
                return builder.build(int(rec.offsets[consumed]))
    return builder.build(first_uncleanable)


def clean_group(group: Sequence[SegmentFile], retention: RetentionPass, *, directory: Path, config: LogConfig,
                now_ms: Callable[[], int], keys: tuple[int, int, int, int], limits: BatchLimits,
                chunk_bytes: int, throttler: Throttler | None = None) -> LogSegment | None:
    """Write the cleaned copy of ``group`` as ``<base>.log.cleaned`` (flushed, open); None when
    the group holds no batch. ``retention`` carries the pass's state from group to group.

    A chunk's batches are decided at once (``decide_plain``) when none is transactional or a
    control batch, else one by one (``decide``); all but its last are written then, the last is
    held until the next chunk or the group's end (see the module docstring)."""
    out = LogSegment.create(directory, group[0].base_offset, config, now_ms, file_suffix=CLEANED_FILE_SUFFIX)
    held: tuple[DecodedChunk, int, BatchDecision] | None = None  # the latest batch, not yet written
    try:
        for segment in group:
            for data, table in segment.chunks(chunk_bytes):
                chunk = decode_chunk(data, table, keys, limits)
                buffers: list = []
                infos: list[BatchInfo] = []
                if held is not None:
                    _emit(*held, buffers, infos, limits)
                last = table.shape[0] - 1
                if chunk.plain:
                    plain = retention.decide_plain(chunk.plain_batches(), chunk.records)
                    _emit_plain(chunk, plain, last, buffers, infos, limits)
                    held = (chunk, last, _plain_decision(chunk, plain, last))
                else:
                    decisions = retention.decide(chunk.facts(), chunk.records)
                    for i in range(last):
                        _emit(chunk, i, decisions[i], buffers, infos, limits)
                    held = (chunk, last, decisions[last])
                _write(out, buffers, infos, throttler, len(data))
        if held is None:
            out.delete()
            return None
        chunk, i, decision = held
        if decision.action == DROP:  # the group's last batch stays, empty: see the module docstring
            decision = BatchDecision(EMPTY, None, _horizon_of(chunk, i))
        buffers, infos = [], []
        _emit(chunk, i, decision, buffers, infos, limits)
        _write(out, buffers, infos, throttler, 0)
        out.flush()
        return out
    except BaseException:
        out.delete()
        raise


def _horizon_of(chunk: DecodedChunk, i: int) -> int:
    return int(chunk.table[i, H_BASE_TS]) if chunk.table[i, H_ATTRIBUTES] & DELETE_HORIZON_MASK else NO_HORIZON


def _plain_decision(chunk: DecodedChunk, plain: PlainDecisions, i: int) -> BatchDecision:
    action = int(plain.actions[i])
    if action == ACT_KEEP:
        return BatchDecision(KEEP, None, NO_HORIZON)
    if action == ACT_DROP:
        return BatchDecision(DROP, None, NO_HORIZON)
    if action == ACT_EMPTY:
        return BatchDecision(EMPTY, None, int(plain.delete_horizons[i]))
    first, end = int(chunk.table[i, H_FIRST_RECORD]), int(chunk.table[i, H_END_RECORD])
    return BatchDecision(REWRITE, plain.keep[first:end].copy(), int(plain.delete_horizons[i]))


def _emit_plain(chunk: DecodedChunk, plain: PlainDecisions, end_batch: int, buffers: list,
                infos: list[BatchInfo], limits: BatchLimits) -> None:
    """Append the bytes of batches [0, end_batch) of a plain chunk: runs of KEEP, DROP and
    REWRITE with its base timestamp and no compression in one ``rewrite_batches`` call each; the
    others (EMPTY, a new delete horizon, a compressed batch) one by one through ``_emit``."""
    table, actions = chunk.table, plain.actions
    horizons = chunk.plain_batches().delete_horizons
    compressed = (table[:, H_ATTRIBUTES] & COMPRESSION_MASK) != 0
    slow = (actions == ACT_EMPTY) | ((actions == ACT_REWRITE) & (compressed | (plain.delete_horizons != horizons)))
    slow_batches = np.flatnonzero(slow[:end_batch]).tolist()
    out = np.empty(len(chunk.data), np.uint8)
    out_view = memoryview(out)
    out_size = np.zeros(table.shape[0], np.int64)
    out_max_ts = np.zeros(table.shape[0], np.int64)
    buf = np.frombuffer(chunk.data, np.uint8)
    position = run = 0
    for stop in slow_batches + [end_batch]:
        if stop > run:
            end = rewrite_batches(buf, table, run, stop, actions, plain.keep, chunk.starts, chunk.ends,
                                  chunk.timestamps_ms, out, position, out_size, out_max_ts)
            _finish_run(table, actions, run, stop, out_view, position, out_size, out_max_ts, infos)
            if end > position:
                buffers.append(out_view[position:end])
            position = end
        if stop < end_batch:
            _emit(chunk, stop, _plain_decision(chunk, plain, stop), buffers, infos, limits)
        run = stop + 1


def _finish_run(table: np.ndarray, actions: np.ndarray, first: int, end: int, out: memoryview, position: int,
                out_size: np.ndarray, out_max_ts: np.ndarray, infos: list[BatchInfo]) -> None:
    """CRCs of the run's rewritten batches, and a ``BatchInfo`` per batch written."""
    rows = table[first:end]
    for base, delta, action, size, max_ts in zip(rows[:, H_BASE_OFFSET].tolist(), rows[:, H_LAST_DELTA].tolist(),
                                                 actions[first:end].tolist(), out_size[first:end].tolist(),
                                                 out_max_ts[first:end].tolist()):
        if size == 0:
            continue
        if action == ACT_REWRITE:
            _CRC.pack_into(out, position + CRC_OFFSET, crc32c.crc32c(out[position + ATTRIBUTES_OFFSET:position + size]))
        infos.append(BatchInfo(base, base + delta, max_ts, size))
        position += size


def _emit(chunk: DecodedChunk, i: int, decision: BatchDecision, buffers: list, infos: list[BatchInfo],
          limits: BatchLimits) -> None:
    """Append the bytes ``decision`` makes of batch ``i`` of ``chunk`` (nothing for DROP)."""
    if decision.action == DROP:
        return
    header, position = chunk.header(i), int(chunk.table[i, H_POS])
    if decision.action == KEEP:
        buf = chunk.data[position:position + header.size]
    elif decision.action == EMPTY:
        buf = encode_retained_batch(header, [], delete_horizon_ms=decision.delete_horizon_ms)
    elif decision.keep is not None and decision.delete_horizon_ms == _horizon_of(chunk, i):
        # The base timestamp stays: the kept records' bytes are copied as they are (retain.py).
        first, end = int(chunk.table[i, H_FIRST_RECORD]), int(chunk.table[i, H_END_RECORD])
        kept_ts = chunk.timestamps_ms[first:end][decision.keep]
        max_timestamp = int(kept_ts.max()) if kept_ts.size else header.max_timestamp
        buf = retain_records(chunk.data[position:position + header.size], header, decision.keep,
                             max_timestamp, limits)
    else:  # a new delete horizon becomes the base timestamp: every record is encoded again
        records = decode_batch(chunk.data, position, limits).records
        if decision.keep is not None:
            records = [r for r, keep in zip(records, decision.keep) if keep]
        buf = encode_retained_batch(header, records, delete_horizon_ms=decision.delete_horizon_ms)
    max_timestamp = header.max_timestamp if decision.action == KEEP else _max_timestamp(buf)
    buffers.append(buf)
    infos.append(BatchInfo(header.base_offset, header.last_offset, max_timestamp, len(buf)))


def _max_timestamp(buf: bytes) -> int:
    return next(iter_batches(buf))[1].max_timestamp


def _write(out: LogSegment, buffers: list, infos: list[BatchInfo], throttler: Throttler | None,
           read_bytes: int) -> None:
    if buffers:
        out.append(buffers, infos)
    if throttler is not None:
        throttler.note(read_bytes + sum(info.size for info in infos))
