"""The blocking work of a cleaning pass: read segments, build the offset map, write cleaned groups.

This runs on a cleaner thread, never on the broker's event loop, and touches no ``Log`` state: it
reads segment files through file descriptors of its own (``SegmentFile``, opened by path when the
pass starts), so a segment that the log deletes or truncates meanwhile cannot hand it another
file's bytes; the swap (``swap.py``, on the loop) then sees that the log changed and throws the
output away.

Reading: whole batches, up to ``chunk_bytes`` at a time, decoded by the vectorized Arrow codec
with CRC checks (cleaning never copies a corrupt batch into a clean segment: a bad CRC fails the
pass and the log is marked uncleanable). Per record only compiled or numpy code runs (hashing,
the map, the masks); Python works per batch. A batch the pass rewrites is decoded and encoded
again by the reference codec (``encode_retained_batch``), record by record.

Writing: one ``<base>.log.cleaned`` segment per group (with its ``.index.cleaned`` and
``.timeindex.cleaned``), flushed before it is returned. The group's last batch is always
written, empty if the pass drops all its records, so the cleaned segment spans exactly the offsets
of the group it replaces: after a crash in the middle of a swap, recovery knows which old
segments the ``.swap`` replaces (``loader.py``), and the log reads as either the old or the new
segments, never a mixture.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from broker.log.cleaner.key_hash import hash_keys
from broker.log.cleaner.offset_map import OffsetMap, OffsetMapBuilder
from broker.log.cleaner.retention import (
    DROP,
    EMPTY,
    KEEP,
    NO_HORIZON,
    AbortedTracker,
    AbortedTxn,
    BatchDecision,
    BatchFacts,
    ChunkRecords,
    RetentionPass,
)
from broker.log.config import LogConfig
from broker.log.fileio import iter_file_headers, pread_exact
from broker.log.segment import BatchInfo, LogSegment
from broker.records import BatchHeader, BatchLimits, decode_batch, encode_retained_batch, iter_batches
from broker.records.arrow import decode_batches
from broker.records.header import DELETE_HORIZON_MASK
from broker.records.retain import retain_records

__all__ = ["CLEANED_FILE_SUFFIX", "SegmentFile", "Throttler", "build_offset_map", "clean_group", "decode_chunk"]

CLEANED_FILE_SUFFIX = ".cleaned"
_HEADER_WINDOW_BYTES = 64 * 1024


class SegmentFile:
    """A segment's .log file opened for this pass: ``size`` is its size when the pass began."""

    def __init__(self, base_offset: int, path: Path, size: int) -> None:
        self.base_offset = base_offset
        self.path = path
        self.size = size
        self.fd = os.open(path, os.O_RDONLY)

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def chunks(self, chunk_bytes: int) -> Iterator[bytes]:
        """Runs of whole batches of at most ``chunk_bytes`` (one batch may be larger)."""
        start = end = 0
        for position, header in iter_file_headers(self.fd, 0, self.size, _HEADER_WINDOW_BYTES):
            if position + header.size - start > chunk_bytes and end > start:
                yield pread_exact(self.fd, end - start, start)
                start = position
            end = position + header.size
        if end != self.size:
            raise OSError(f"{self.path}: batches end at byte {end} of {self.size}; the segment changed "
                          "or is corrupt")
        if end > start:
            yield pread_exact(self.fd, end - start, start)


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
    data: bytes
    positions: list[int]  # where each batch starts in ``data``
    headers: list[BatchHeader]
    facts: list[BatchFacts]
    records: ChunkRecords
    timestamps_ms: np.ndarray  # int64, per record


def decode_chunk(data: bytes, keys: tuple[int, int, int, int], limits: BatchLimits,
                 batches: bool = True) -> DecodedChunk:
    """Batches and records of a run of whole batches (CRC-checked), keys hashed. ``batches=False``
    leaves the per-batch lists empty (mapping a log without aborted transactions needs only
    the records, and the per-batch Python work is a third of a pass over small batches)."""
    table = decode_batches(data, topic="", partition=0, limits=limits, check_crc=True)
    offsets = table.column("offset").to_numpy()
    key = table.column("key")
    key_offsets = np.frombuffer(key.buffers()[1], dtype=np.int32)[key.offset:key.offset + len(key) + 1]
    key_data = key.buffers()[2]
    hi, lo = hash_keys(key_offsets, np.frombuffer(key_data, np.uint8) if key_data is not None
                       else np.empty(0, np.uint8), keys)
    records = ChunkRecords(
        offsets=offsets, hi=hi, lo=lo,
        has_key=key.is_valid().to_numpy(zero_copy_only=False),
        is_tombstone=table.column("value").is_null().to_numpy(zero_copy_only=False))
    listed = list(iter_batches(data)) if batches else []
    positions = [position for position, _ in listed]
    headers = [header for _, header in listed]
    # Each batch's records are a run of the offset column: two searches for all batches at once.
    firsts = np.searchsorted(offsets, [h.base_offset for h in headers]).tolist()
    ends = np.searchsorted(offsets, [h.last_offset for h in headers], side="right").tolist()
    facts = []
    for header, first, end in zip(headers, firsts, ends):
        horizon = header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else NO_HORIZON
        facts.append(BatchFacts(header.base_offset, header.last_offset, header.producer_id,
                                header.is_transactional, header.is_control, horizon, first,
                                first if header.is_control else end))
    timestamps = table.column("timestamp").cast(pa.int64()).to_numpy() // 1000
    return DecodedChunk(data, positions, headers, facts, records, timestamps)


def build_offset_map(segments: Sequence[SegmentFile], *, first_dirty: int, first_uncleanable: int, capacity: int,
                     keys: tuple[int, int, int, int], aborted: Sequence[AbortedTxn], limits: BatchLimits,
                     chunk_bytes: int, throttler: Throttler | None = None) -> OffsetMap:
    """Map keys of ``[first_dirty, first_uncleanable)`` (committed and plain data only) to their
    newest offset; ``end_offset`` of the result is where the map stopped (it may fill early)."""
    builder = OffsetMapBuilder(capacity, first_dirty)
    tracker = AbortedTracker(aborted)
    for segment in segments:
        for data in segment.chunks(chunk_bytes):
            if throttler is not None:
                throttler.note(len(data))
            chunk = decode_chunk(data, keys, limits, batches=bool(aborted))
            rec = chunk.records
            mapped = rec.has_key & (rec.offsets >= first_dirty) & (rec.offsets < first_uncleanable)
            for fact in chunk.facts:
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
    the group holds no batch. ``retention`` carries the pass's state from group to group."""
    out = LogSegment.create(directory, group[0].base_offset, config, now_ms, file_suffix=CLEANED_FILE_SUFFIX)
    held: tuple[DecodedChunk, int, BatchDecision] | None = None  # the latest batch, not yet written
    try:
        for segment in group:
            for data in segment.chunks(chunk_bytes):
                chunk = decode_chunk(data, keys, limits)
                decisions = retention.decide(chunk.facts, chunk.records)
                buffers, infos = [], []
                for i, decision in enumerate(decisions):
                    if held is not None:
                        _emit(*held, buffers, infos, limits)
                    held = (chunk, i, decision)
                _write(out, buffers, infos, throttler, len(data))
        if held is None:
            out.delete()
            return None
        chunk, i, decision = held
        if decision.action == DROP:  # the group's last batch stays, empty: see the module docstring
            decision = BatchDecision(EMPTY, None, chunk.facts[i].delete_horizon_ms)
        buffers, infos = [], []
        _emit(chunk, i, decision, buffers, infos, limits)
        _write(out, buffers, infos, throttler, 0)
        out.flush()
        return out
    except BaseException:
        out.delete()
        raise


def _emit(chunk: DecodedChunk, i: int, decision: BatchDecision, buffers: list, infos: list[BatchInfo],
          limits: BatchLimits) -> None:
    """Append the bytes ``decision`` makes of batch ``i`` of ``chunk`` (nothing for DROP)."""
    header, position = chunk.headers[i], chunk.positions[i]
    if decision.action == DROP:
        return
    if decision.action == KEEP:
        buf = memoryview(chunk.data)[position:position + header.size]
    elif decision.action == EMPTY:
        buf = encode_retained_batch(header, [], delete_horizon_ms=decision.delete_horizon_ms)
    elif decision.keep is not None and decision.delete_horizon_ms == chunk.facts[i].delete_horizon_ms:
        # The base timestamp stays: the kept records' bytes are copied as they are (retain.py).
        fact = chunk.facts[i]
        kept_ts = chunk.timestamps_ms[fact.first_record:fact.end_record][decision.keep]
        max_timestamp = int(kept_ts.max()) if kept_ts.size else header.max_timestamp
        buf = retain_records(memoryview(chunk.data)[position:position + header.size], header, decision.keep,
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
