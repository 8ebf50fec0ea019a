"""What one cleaning pass keeps: the pure core of the log cleaner (no files, no clock, no threads).

A pass walks the cleanable part of a log, from the log start offset, in offset order, one chunk of
batches at a time. For each batch it decides one of:

- ``KEEP``: copy the batch byte for byte;
- ``REWRITE``: write a new batch with the records of ``keep`` (a mask), stamping
  ``delete_horizon_ms`` when it is not -1;
- ``EMPTY``: write the batch's header with no records (the last batch of a producer, kept so
  the producer's sequence and epoch survive: idempotent dedup keeps working after cleaning);
- ``DROP``: write nothing.

A rewritten or empty batch keeps its base offset, last offset, producer id, epoch, base sequence,
partition leader epoch and timestamps; survivors keep their offsets, so readers see gaps.

The rules (Kafka's ``LogCleaner``; ``../shared/reference/coordinators.md`` section 1):

1. A keyed record survives unless the offset map holds a newer offset for its key. A record with
   a null key in a compacted log is dropped (Kafka counts it invalid and drops it).
2. A tombstone (null value) survives its first cleaning, which stamps the batch with a delete
   horizon of now + ``delete.retention.ms`` (KIP-534); a later pass at or past the horizon drops it.
3. Records of an aborted transaction are dropped. A transaction is aborted for a producer from the
   first offset the aborted-transaction index gives until that producer's next control batch.
4. A control batch (commit or abort marker) stays while any record of its transaction survives,
   or an EMPTY batch of it (rule 5: replaying that batch on recovery opens the transaction, which
   only the marker closes); once none does, it is treated like a tombstone: stamped, then dropped
   past its horizon.
5. The last batch of each producer (``producer_last_offsets``) is never dropped: if all its
   records go, it becomes ``EMPTY``.

Per record only numpy runs (the map lookup and the masks). ``decide`` loops over batches in
Python; ``decide_plain`` decides a chunk holding no transactional or control batch (rules 1, 2
and 5 only) with array operations for all its batches at once, which is most chunks of most logs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from broker.log.cleaner.offset_map import OffsetMap

__all__ = ["KEEP", "REWRITE", "EMPTY", "DROP", "NO_HORIZON", "ACT_KEEP", "ACT_REWRITE", "ACT_DROP", "ACT_EMPTY",
           "AbortedTracker", "AbortedTxn", "BatchFacts", "BatchDecision", "ChunkRecords", "PlainBatches",
           "PlainDecisions", "RetentionPass"]

KEEP, REWRITE, EMPTY, DROP = "keep", "rewrite", "empty", "drop"
NO_HORIZON = -1
NO_PRODUCER = -1


class BatchFacts(NamedTuple):
    """What the core needs of one batch; its records are ``[first_record, end_record)`` of the
    chunk's record arrays (an empty range for a control batch: markers are decided per batch)."""

    base_offset: int
    last_offset: int
    producer_id: int
    is_transactional: bool
    is_control: bool
    delete_horizon_ms: int  # NO_HORIZON unless the batch was stamped by an earlier cleaning
    first_record: int
    end_record: int


class ChunkRecords(NamedTuple):
    """The records of a chunk of batches, as parallel arrays in offset order."""

    offsets: np.ndarray  # int64
    hi: np.ndarray  # uint64: key hash (key_hash.hash_keys)
    lo: np.ndarray  # uint64
    has_key: np.ndarray  # bool
    is_tombstone: np.ndarray  # bool: null value


class AbortedTxn(NamedTuple):
    """An entry of the aborted-transaction index: ``producer_id``'s data from ``first_offset``
    on, up to its abort marker at ``last_offset``, is aborted."""

    producer_id: int
    first_offset: int
    last_offset: int


class BatchDecision(NamedTuple):
    action: str
    keep: np.ndarray | None  # for REWRITE: mask over the batch's records
    delete_horizon_ms: int  # the horizon to stamp (REWRITE/EMPTY/KEEP of a stamped batch), or NO_HORIZON


class PlainBatches(NamedTuple):
    """The batches of a chunk without transactional or control batches, as parallel arrays
    (int64); batch i's records are ``[first_records[i], end_records[i])`` of the chunk's."""

    base_offsets: np.ndarray
    last_offsets: np.ndarray
    producer_ids: np.ndarray
    delete_horizons: np.ndarray
    first_records: np.ndarray
    end_records: np.ndarray


# ``decide_plain``'s actions: KEEP, REWRITE and DROP are the kernels' (chunk_kernels.ACT_*)
ACT_KEEP, ACT_REWRITE, ACT_DROP, ACT_EMPTY = 0, 1, 2, 3


class PlainDecisions(NamedTuple):
    actions: np.ndarray  # int8, ACT_* per batch
    keep: np.ndarray  # bool per record of the chunk: kept by a REWRITE (meaningless elsewhere)
    delete_horizons: np.ndarray  # int64 per batch: the horizon a REWRITE or EMPTY stamps (or keeps)


def _per_batch_sums(mask: np.ndarray, batches: PlainBatches) -> np.ndarray:
    totals = np.zeros(mask.shape[0] + 1, np.int64)
    np.cumsum(mask, out=totals[1:])
    return totals[batches.end_records] - totals[batches.first_records]


_KEEP = BatchDecision(KEEP, None, NO_HORIZON)
_DROP = BatchDecision(DROP, None, NO_HORIZON)


class AbortedTracker:
    """Which producers are inside an aborted transaction, walking batches in offset order: from
    an entry's first offset until the producer's next control batch (rule 3)."""

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._aborted = sorted(aborted, key=lambda a: a.first_offset)
        self._next = 0
        self._aborting: set[int] = set()

    def advance_to(self, base_offset: int) -> None:
        """Take in the entries starting at or before ``base_offset`` (what ``is_aborted`` does
        first), for a run of batches none of which can be aborted or end a transaction."""
        while self._next < len(self._aborted) and self._aborted[self._next].first_offset <= base_offset:
            self._aborting.add(self._aborted[self._next].producer_id)
            self._next += 1

    def is_aborted(self, batch: BatchFacts) -> bool:
        """Advance to ``batch`` (call for every batch, in order); True for aborted data."""
        self.advance_to(batch.base_offset)
        if batch.is_control:
            self._aborting.discard(batch.producer_id)
            return False
        return batch.is_transactional and batch.producer_id in self._aborting


class RetentionPass:
    """One cleaning pass. Feed every chunk of the pass, in offset order, to ``decide``."""

    def __init__(self, offset_map: OffsetMap, *, now_ms: int, delete_retention_ms: int,
                 producer_last_offsets: Mapping[int, int], aborted: Sequence[AbortedTxn]) -> None:
        self.offset_map = offset_map
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.producer_last_offsets = producer_last_offsets
        self._aborted = AbortedTracker(aborted)
        self._txn_retained: dict[int, bool] = {}  # producer -> any record of its open txn kept

    def decide(self, batches: Sequence[BatchFacts], records: ChunkRecords) -> list[BatchDecision]:
        """A decision per batch of the chunk (see the module docstring)."""
        survives = self._record_survivors(records)
        decisions = []
        for batch in batches:
            aborted = self._aborted.is_aborted(batch)
            if batch.is_control:
                decisions.append(self._decide_marker(batch))
            else:
                decisions.append(self._decide_data(batch, records, survives, aborted))
        return decisions

    def decide_plain(self, batches: PlainBatches, records: ChunkRecords) -> PlainDecisions:
        """``decide`` for a chunk without transactional or control batches, as arrays: the same
        decisions (a test compares the two), with no Python per batch but for the few batches
        that lose all their records and have a producer id (rule 5 is a dict lookup)."""
        if batches.base_offsets.size:
            self._aborted.advance_to(int(batches.base_offsets[-1]))
        survives = self._record_survivors(records)
        stamped = batches.delete_horizons != NO_HORIZON
        passed = stamped & (self.now_ms >= batches.delete_horizons)
        counts = batches.end_records - batches.first_records
        keep = survives & ~(records.is_tombstone & np.repeat(passed, counts))
        kept = _per_batch_sums(keep, batches)
        kept_tombstones = _per_batch_sums(keep & records.is_tombstone, batches)
        horizons = np.where(stamped | (kept_tombstones == 0), batches.delete_horizons,
                            self.now_ms + self.delete_retention_ms)
        actions = np.where(kept == 0, ACT_DROP, ACT_REWRITE).astype(np.int8)
        actions[(kept == counts) & (horizons == batches.delete_horizons)] = ACT_KEEP
        for i in np.flatnonzero((actions == ACT_DROP) & (batches.producer_ids != NO_PRODUCER)).tolist():
            if self.producer_last_offsets.get(int(batches.producer_ids[i])) == int(batches.last_offsets[i]):
                actions[i] = ACT_EMPTY
        return PlainDecisions(actions, keep, horizons)

    def _record_survivors(self, records: ChunkRecords) -> np.ndarray:
        """Rule 1 for every record of the chunk at once: keyed and not superseded."""
        latest = self.offset_map.latest_offsets(records.hi, records.lo)
        return records.has_key & (latest <= records.offsets)

    def _decide_data(self, batch: BatchFacts, records: ChunkRecords, survives: np.ndarray,
                     aborted: bool) -> BatchDecision:
        span = slice(batch.first_record, batch.end_record)
        if aborted:
            keep = np.zeros(batch.end_record - batch.first_record, dtype=bool)
        else:
            keep = survives[span].copy()
            tombstones = records.is_tombstone[span]
            if self._horizon_passed(batch):
                keep &= ~tombstones
        if batch.is_transactional:
            retained = self._txn_retained.get(batch.producer_id, False)
            self._txn_retained[batch.producer_id] = retained or bool(keep.any())
        horizon = batch.delete_horizon_ms
        if horizon == NO_HORIZON and bool((keep & records.is_tombstone[span]).any()):
            horizon = self.now_ms + self.delete_retention_ms
        if keep.all():
            if horizon == batch.delete_horizon_ms:
                return _KEEP
            return BatchDecision(REWRITE, keep, horizon)
        if keep.any():
            return BatchDecision(REWRITE, keep, horizon)
        if self._is_producer_last(batch):
            if batch.is_transactional:  # the empty batch still opens a transaction on replay:
                self._txn_retained[batch.producer_id] = True  # its marker must stay (rule 4)
            return BatchDecision(EMPTY, None, batch.delete_horizon_ms)
        return _DROP

    def _decide_marker(self, batch: BatchFacts) -> BatchDecision:
        data_retained = self._txn_retained.pop(batch.producer_id, False)
        if data_retained or self._is_producer_last(batch):
            return _KEEP
        if self._horizon_passed(batch):
            return _DROP
        if batch.delete_horizon_ms != NO_HORIZON:
            return _KEEP
        return BatchDecision(REWRITE, None, self.now_ms + self.delete_retention_ms)

    def _horizon_passed(self, batch: BatchFacts) -> bool:
        return batch.delete_horizon_ms != NO_HORIZON and self.now_ms >= batch.delete_horizon_ms

    def _is_producer_last(self, batch: BatchFacts) -> bool:
        return batch.producer_id != NO_PRODUCER and self.producer_last_offsets.get(batch.producer_id) == batch.last_offset
