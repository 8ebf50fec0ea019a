"""Idempotent-producer state of one partition: the broker half of KIP-98 deduplication. Pure.

Per producer id the leader remembers its epoch and the metadata of its last
``BATCHES_RETAINED`` (5) appended batches (Kafka ``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``),
which matches the clients' limit of 5 in-flight requests per connection with idempotence: any
retry a conforming client can send is one of those five.

Checks for a client batch whose producer id is >= 0, in this order (Kafka
``UnifiedLog.analyzeAndValidateProducerState``, ``ProducerAppendInfo.checkSequence``;
``shared/reference/kafka-protocol.md`` section 4):

0. A producer id with a negative epoch or base sequence is not a valid idempotent batch:
   INVALID_RECORD (87), as ``LogValidator`` says.
1. Duplicate: same epoch and (first sequence, last sequence) equal to one of the cached batches.
   Nothing is appended; the answer is success with the ORIGINAL offsets. Answering 45 here makes
   librdkafka fail fatally or bump its epoch and write the batch twice (reference pitfall 8.6).
2. Epoch older than the stored one: INVALID_PRODUCER_EPOCH (47).
3. Epoch newer (a KIP-360 bump): the first sequence must be 0, else OUT_OF_ORDER_SEQUENCE (45).
   The new epoch drops the cached batches of the old one.
4. Same epoch: the first sequence must follow the last one (``last + 1``, or 0 after INT32_MAX).
   A batch whose whole range lies at or behind the last sequence was written already but has
   left the 5-batch cache: DUPLICATE_SEQUENCE_NUMBER (46), which both clients count as success
   (no conforming client sends one; Kafka says 45, which would make a stale retry fatal). Only
   a batch ahead of ``last + 1``, a genuine gap, gets OUT_OF_ORDER_SEQUENCE_NUMBER (45).
5. No state for the producer (new, expired, evicted or lost): accept any sequence (modern Kafka;
   the old UNKNOWN_PRODUCER_ID 59 broke idle producers, reference pitfall 8.6).

Sequences are int32 and wrap: a batch's last sequence is ``(base + lastOffsetDelta) mod 2^31``.

The manager only changes through ``record_batch`` (after the log accepted the append, or while
rebuilding from the log on load), so a rejected or failed append never leaves a trace. The
number of producers is bounded by ``entries_max`` (least recently appended evicted first) and
``expiration_ms`` (Kafka ``producer.id.expiration.ms``). Expiry counts from the broker's clock at
the producer's last append (``last_append_ms``), not from the batches' timestamps as Kafka does:
a client writing records with old timestamps (a replay of history) would otherwise lose its
state at the next check and have its retries written twice. Batches replayed from the log on
load count as appended at load time.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Iterable, Iterator, NamedTuple, Sequence

from broker.records import BatchHeader
from broker.wire import ErrorCode

__all__ = [
    "BATCHES_RETAINED",
    "INT32_MAX",
    "BatchMetadata",
    "ProducerEntry",
    "Accepted",
    "Duplicate",
    "Rejected",
    "Verdict",
    "ACCEPTED",
    "ProducerStateManager",
    "in_sequence",
    "CompletedTxn",
]

BATCHES_RETAINED = 5
INT32_MAX = (1 << 31) - 1
_SEQUENCE_SPACE = 1 << 31
_BEHIND_WINDOW = 1 << 30  # circular distance below which a sequence counts as "already written"


class BatchMetadata(NamedTuple):
    """What is kept of one appended batch (Kafka ``BatchMetadata``)."""

    first_seq: int
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerEntry:
    """One producer's state on this partition. ``batches`` is oldest first.

    ``current_txn_first_offset`` is the first offset of the producer's open transaction on this
    partition (-1: none); ``coordinator_epoch`` the epoch of the transaction coordinator that
    wrote its last marker (-1: none yet). Both are snapshotted.
    """

    producer_id: int
    producer_epoch: int
    batches: deque = field(default_factory=lambda: deque(maxlen=BATCHES_RETAINED))
    last_append_ms: int = -1  # broker clock
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker at ``last_offset`` (Kafka ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int


class Accepted(NamedTuple):
    """Append the batches."""


class Duplicate(NamedTuple):
    """Do not append; answer success with the original batch's offsets."""

    batch: BatchMetadata


class Rejected(NamedTuple):
    """Do not append; answer ``error_code`` for the partition. ``batch_index`` is the batch of
    the request's records that failed; ``record_errors`` (record index, message) name single
    records when the refusal is per record (a keyless record in a compacted topic)."""

    error_code: int
    message: str
    batch_index: int = 0
    record_errors: tuple[tuple[int, str], ...] = ()


Verdict = Accepted | Duplicate | Rejected
ACCEPTED = Accepted()


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """``ProducerAppendInfo.inSequence``: next follows last, wrapping INT32_MAX -> 0."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def _is_behind(last_seq: int, batch_last_seq: int) -> bool:
    """True when ``batch_last_seq`` is at or before ``last_seq`` on the int32 circle."""
    return (last_seq - batch_last_seq) % _SEQUENCE_SPACE < _BEHIND_WINDOW


def check_batch(
    entry: ProducerEntry | None, header: BatchHeader, continued: tuple[int, int] | None = None
) -> Verdict:
    """The verdict for one idempotent batch (``header.producer_id >= 0``) against ``entry``.

    ``continued`` is (epoch, last sequence) left by an earlier batch of the same producer in the
    same append; it replaces the stored position, and duplicates are then not looked for.
    """
    epoch, base_seq = header.producer_epoch, header.base_sequence
    if epoch < 0 or base_seq < 0:
        return Rejected(ErrorCode.INVALID_RECORD,
                        f"producer {header.producer_id}: idempotent batch with epoch {epoch} "
                        f"and base sequence {base_seq}")
    if continued is None:
        if entry is None:
            return ACCEPTED  # rule 5
        duplicate = entry.find_duplicate(epoch, base_seq, header.last_sequence)
        if duplicate is not None:
            return Duplicate(duplicate)  # rule 1
        current_epoch, last_seq = entry.producer_epoch, entry.last_seq
    else:
        current_epoch, last_seq = continued
    if epoch < current_epoch:  # rule 2
        return Rejected(ErrorCode.INVALID_PRODUCER_EPOCH,
                        f"producer {header.producer_id}: epoch {epoch} is older than {current_epoch}")
    if epoch > current_epoch:  # rule 3
        if base_seq == 0:
            return ACCEPTED
        return Rejected(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                        f"producer {header.producer_id}: new epoch {epoch} must start at "
                        f"sequence 0, got {base_seq}")
    return _check_same_epoch(header, last_seq)  # rule 4


def _check_same_epoch(header: BatchHeader, last_seq: int) -> Verdict:
    base_seq = header.base_sequence
    if last_seq < 0 or in_sequence(last_seq, base_seq):
        return ACCEPTED
    if _is_behind(last_seq, header.last_sequence):
        return Rejected(ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                        f"producer {header.producer_id}: sequences {base_seq}..{header.last_sequence} "
                        f"were written already (last sequence {last_seq})")
    return Rejected(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {header.producer_id}: expected sequence "
                    f"{0 if last_seq == INT32_MAX else last_seq + 1}, got {base_seq}")


class ProducerStateManager:
    """The producers of one partition; see the module docstring for the rules."""

    def __init__(self, expiration_ms: int, entries_max: int) -> None:
        assert expiration_ms > 0 and entries_max > 0
        self.expiration_ms = expiration_ms
        self.entries_max = entries_max
        self._entries: OrderedDict[int, ProducerEntry] = OrderedDict()  # least recent first
        # producer id -> first offset of its open transaction, kept apart from the entries so an
        # evicted entry never loses an open transaction (the LSO must stay at it)
        self._ongoing: dict[int, int] = {}
        self.changes = 0  # bumped on every change; lets the owner skip unchanged snapshots

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, producer_id: int) -> ProducerEntry | None:
        return self._entries.get(producer_id)

    def entries(self) -> Iterator[ProducerEntry]:
        return iter(self._entries.values())

    def check_append(self, headers: Sequence[BatchHeader]) -> Verdict:
        """The verdict for the batches of one append. Batches without a producer id pass. A
        producer's later batch in the same append continues from its earlier one; the first
        duplicate or rejection decides for the whole append (Kafka does the same)."""
        continued: dict[int, tuple[int, int]] = {}
        for index, header in enumerate(headers):
            producer_id = header.producer_id
            if producer_id < 0 or header.is_control:
                continue
            verdict = check_batch(self._entries.get(producer_id), header, continued.get(producer_id))
            if isinstance(verdict, Rejected):
                return verdict._replace(batch_index=index)
            if isinstance(verdict, Duplicate):
                return verdict
            continued[producer_id] = (header.producer_epoch, header.last_sequence)
        return ACCEPTED

    def record_batch(self, header: BatchHeader, base_offset: int, append_ms: int) -> None:
        """Remember a batch the log now holds at ``base_offset``, appended at broker time
        ``append_ms``: after a leader append, or replayed from the log while loading (then
        without any check: the log is the truth)."""
        producer_id = header.producer_id
        if producer_id < 0:
            return
        if header.is_control:
            self.complete_txn(header, base_offset, -1)
            return
        entry = self._entries.get(producer_id)
        if entry is None or header.producer_epoch != entry.producer_epoch:
            old = entry
            entry = ProducerEntry(producer_id, header.producer_epoch)
            if old is not None:  # an epoch bump keeps the open transaction (ProducerAppendInfo)
                entry.coordinator_epoch = old.coordinator_epoch
                entry.current_txn_first_offset = old.current_txn_first_offset
            self._entries[producer_id] = entry
        if header.is_transactional and entry.current_txn_first_offset < 0:
            # the producer's transaction on this partition begins with its first batch
            entry.current_txn_first_offset = self._ongoing.setdefault(producer_id, base_offset)
        entry.batches.append(BatchMetadata(
            header.base_sequence, header.last_sequence, base_offset + header.last_offset_delta,
            header.last_offset_delta, header.max_timestamp,
        ))
        entry.last_append_ms = max(entry.last_append_ms, append_ms)
        self._entries.move_to_end(producer_id)
        self.changes += 1
        self._evict()

    def complete_txn(self, header: BatchHeader, offset: int, coordinator_epoch: int) -> CompletedTxn | None:
        """A marker (control batch ``header`` at ``offset``) ends ``header.producer_id``'s open
        transaction; returns it, or None when none was open (a marker for a transaction that
        never wrote here, or one repeated by a coordinator retrying). ``coordinator_epoch`` is
        the marker's (-1 when the caller did not read it)."""
        producer_id = header.producer_id
        first = self._ongoing.pop(producer_id, None)
        entry = self._entries.get(producer_id)
        if entry is not None and header.producer_epoch >= entry.producer_epoch:
            if header.producer_epoch > entry.producer_epoch:
                # a marker at a bumped epoch (the coordinator fenced the producer): the old
                # epoch's sequences mean nothing for the new one (Kafka maybeUpdateProducerEpoch)
                entry.batches.clear()
            entry.producer_epoch = header.producer_epoch
            entry.current_txn_first_offset = -1
            if coordinator_epoch >= 0:
                entry.coordinator_epoch = coordinator_epoch
        self.changes += 1
        return None if first is None else CompletedTxn(producer_id, first, offset)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, None when none is open."""
        return min(self._ongoing.values()) if self._ongoing else None

    def ongoing(self) -> dict[int, int]:
        """Open transactions: producer id -> first offset (a copy)."""
        return dict(self._ongoing)

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """The LSO once ``completed`` is done (its marker appended): the first offset of the
        oldest other open transaction, else the offset after the marker (Kafka
        ``ProducerStateManager.lastStableOffset``), as written in the aborted-transaction index."""
        others = [first for pid, first in self._ongoing.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def record_append(self, headers: Iterable[BatchHeader], first_offset: int, append_ms: int) -> None:
        """Record the batches of one leader append whose first batch got ``first_offset``."""
        offset = first_offset
        for header in headers:
            self.record_batch(header, offset, append_ms)
            offset += header.last_offset_delta + 1

    def load(self, entries: Iterable[ProducerEntry]) -> None:
        """Replace the state with ``entries`` (from a snapshot), oldest first."""
        self._entries.clear()
        self._ongoing.clear()
        for entry in sorted(entries, key=lambda e: e.last_append_ms):
            self._entries[entry.producer_id] = entry
            if entry.current_txn_first_offset >= 0:
                self._ongoing[entry.producer_id] = entry.current_txn_first_offset
        self._evict()
        self.changes += 1

    def _evict(self) -> None:
        """Over ``entries_max``: forget the least recently appended producers, except those
        with an open transaction (the snapshot must keep it, or a restart would let the LSO
        pass it); those may exceed the bound until their markers come."""
        excess = len(self._entries) - self.entries_max
        if excess <= 0:
            return
        doomed = []
        for pid, entry in self._entries.items():
            if len(doomed) == excess:
                break
            if entry.current_txn_first_offset < 0:
                doomed.append(pid)
        for pid in doomed:
            del self._entries[pid]

    def expire(self, now_ms: int) -> int:
        """Forget producers that have not appended for ``expiration_ms``, unless a transaction
        of theirs is open. Returns how many were removed."""
        doomed = [
            pid for pid, entry in self._entries.items()
            if now_ms - entry.last_append_ms >= self.expiration_ms
            and entry.current_txn_first_offset < 0
        ]
        for pid in doomed:
            del self._entries[pid]
        if doomed:
            self.changes += 1
        return len(doomed)

    def truncate(self) -> None:
        """Forget everything (a follower truncating its log rebuilds from a snapshot)."""
        if self._entries or self._ongoing:
            self._entries.clear()
            self._ongoing.clear()
            self.changes += 1
