"""``Shard``: the groups and committed offsets of one ``__consumer_offsets`` partition.

A shard exists while this broker leads the partition (Kafka's ``GroupCoordinatorShard``). It
owns three things besides the groups:

* **Pending writes** — ``write_id -> on_done(error_code, now_ms) -> effects``. The offsets cache
  and group deletions change only in ``on_done`` with error 0, and write completions arrive in
  append order, so the cache is always the replay of the successfully written records, in log
  order. Dropping the shard (unload) drops the pending writes: their completions are ignored.
* **Timers** — a heap of ``(deadline_ms, seq, group_id)``; entries go stale when a deadline
  moves, and ``tick`` simply re-examines the group (a stale entry costs one look, never a wrong
  action, because the group's own deadline fields are the truth).
* **Pending commit keys** — offsets with an append in flight, which retention must not expire.
* **Pending transactional offsets** — ``txn_offsets`` (producer id -> key -> ``Pending``) and
  ``txn_groups`` (group -> producer ids with pending offsets), see ``txn_offsets``.
"""

from __future__ import annotations

import heapq
from collections import Counter
from typing import Callable, NamedTuple

from broker.coordinator.group import bulk_load
from broker.coordinator.group.effects import Append
from broker.coordinator.group.group import ClassicGroup
from broker.coordinator.group.records import (
    GroupMetadataKey, OffsetCommitKey, RecordFormatError, decode_group_metadata_value, decode_key,
    decode_offset_commit_fast, decode_offset_commit_value,
)

__all__ = ["Shard", "OffsetAndMetadata", "TxnRecord", "TxnMarker", "map_append_error"]


class TxnRecord(NamedTuple):
    """A record of a transactional batch, loaded as ``(None, TxnRecord)`` (see ``load``)."""

    producer_id: int
    key: bytes
    value: bytes | None


class TxnMarker(NamedTuple):
    """A COMMIT/ABORT control record, loaded as ``(None, TxnMarker)`` (see ``load``)."""

    producer_id: int
    committed: bool


class OffsetAndMetadata(NamedTuple):
    """One committed offset (a tuple: a million of them are built at load time)."""

    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None


# Kafka's appendGroupMetadataErrorToResponseError / CoordinatorOperationExceptionHelper: what a
# client is told when the coordinator's own append fails.
_APPEND_ERRORS = {
    3: 15,    # UNKNOWN_TOPIC_OR_PARTITION -> COORDINATOR_NOT_AVAILABLE
    19: 15,   # NOT_ENOUGH_REPLICAS -> COORDINATOR_NOT_AVAILABLE
    20: 15,   # NOT_ENOUGH_REPLICAS_AFTER_APPEND -> COORDINATOR_NOT_AVAILABLE (Kafka 2.x's mapping)
    7: 15,    # REQUEST_TIMED_OUT -> COORDINATOR_NOT_AVAILABLE
    6: 16,    # NOT_LEADER_OR_FOLLOWER -> NOT_COORDINATOR
    56: 16,   # KAFKA_STORAGE_ERROR -> NOT_COORDINATOR
    10: -1,   # MESSAGE_TOO_LARGE -> UNKNOWN_SERVER_ERROR
    18: -1,   # RECORD_LIST_TOO_LARGE -> UNKNOWN_SERVER_ERROR
    4: -1,    # INVALID_FETCH_SIZE -> UNKNOWN_SERVER_ERROR
    13: 14,   # NETWORK_EXCEPTION -> COORDINATOR_LOAD_IN_PROGRESS
}


def map_append_error(error_code: int) -> int:
    return _APPEND_ERRORS.get(error_code, error_code)


class Shard:
    def __init__(self, partition: int, settings, rng, new_write_id: Callable[[], int],
                 now_ms: int, on_timer: Callable[[int], None] | None = None) -> None:
        self.partition = partition
        self._on_timer = on_timer  # told of every deadline pushed (the core's added_deadline)
        self.settings = settings
        self.rng = rng
        self._new_write_id = new_write_id
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
        self.writes: dict[int, Callable[[int, int], list]] = {}
        self.pending_commit_keys: Counter = Counter()  # (group, topic, partition) -> appends
        self.txn_offsets: dict[int, dict] = {}  # producer id -> {(group, topic, partition): Pending}
        self.txn_groups: dict[str, set[int]] = {}  # group -> producer ids with pending offsets
        self.txn_seq = 0  # log order of the writes that matter to pending offsets (txn_offsets)
        self._timers: list = []
        self._next_timer: dict[str, int] = {}  # group id -> its earliest entry in _timers
        self._timer_seq = 0
        self.skipped_records = 0  # records of the partition that did not decode (see load)
        self.next_retention_ms = now_ms + settings.offsets_retention_check_interval_ms

    # -- writes -------------------------------------------------------------------------------
    def append(self, records: list, on_done: Callable[[int, int], list], producer_id: int = -1,
               producer_epoch: int = -1):
        """An ``Append``; with a producer id, a transactional batch of that producer (TxnOffsetCommit)."""
        write_id = self._new_write_id()
        self.writes[write_id] = on_done
        if producer_id >= 0:
            return Append(write_id, self.partition, records, producer_id, producer_epoch, True)
        return Append(write_id, self.partition, records)

    def write_done(self, write_id: int, error_code: int, now_ms: int) -> list:
        on_done = self.writes.pop(write_id, None)
        return [] if on_done is None else on_done(error_code, now_ms)

    # -- timers -------------------------------------------------------------------------------
    def schedule(self, group_id: str, deadline_ms: int | None) -> None:
        """Make sure the group is looked at by ``deadline_ms``. At most one entry per group is
        the group's earliest: a later deadline is not pushed (every heartbeat and commit moves a
        session deadline; a heap entry each would grow by the commit rate), because when the
        earliest fires, ``tick`` pushes the group's next deadline (``group_deadline``)."""
        if deadline_ms is None:
            return
        current = self._next_timer.get(group_id)
        if current is not None and current <= deadline_ms:
            return
        self._next_timer[group_id] = deadline_ms
        self._timer_seq += 1
        heapq.heappush(self._timers, (deadline_ms, self._timer_seq, group_id))
        if self._on_timer is not None:
            self._on_timer(deadline_ms)

    def pop_due(self, now_ms: int) -> list[str]:
        due: list[str] = []
        while self._timers and self._timers[0][0] <= now_ms:
            deadline_ms, _, group_id = heapq.heappop(self._timers)
            if self._next_timer.get(group_id) == deadline_ms:
                del self._next_timer[group_id]
            if group_id not in due:
                due.append(group_id)
        return due

    @staticmethod
    def group_deadline(group) -> int | None:
        """The earliest of a group's deadlines (sessions, pending members, join, sync)."""
        deadlines = [m.heartbeat_deadline_ms for m in group.members.values() if m.heartbeat_deadline_ms is not None]
        deadlines += group.pending_members.values()
        deadlines += [d for d in (group.join_deadline_ms, group.sync_deadline_ms) if d is not None]
        return min(deadlines, default=None)

    def next_deadline(self) -> int:
        timers = self._timers[0][0] if self._timers else self.next_retention_ms
        return min(timers, self.next_retention_ms)

    # -- offsets cache ------------------------------------------------------------------------
    def put_offset(self, group_id: str, topic: str, partition: int,
                   value: OffsetAndMetadata | None) -> None:
        """Replay one non-transactional offset record (None: tombstone)."""
        if self.txn_groups and group_id in self.txn_groups:
            from broker.coordinator.group import txn_offsets
            txn_offsets.on_plain_offset(self, group_id, topic, partition, value is None)
        self.store_offset(group_id, topic, partition, value)

    def store_offset(self, group_id: str, topic: str, partition: int,
                     value: OffsetAndMetadata | None) -> None:
        """Set or delete one cached offset (``put_offset`` without the pending-offsets rules)."""
        offsets = self.offsets.get(group_id)
        if value is None:
            if offsets is not None:
                offsets.pop((topic, partition), None)
                if not offsets:
                    del self.offsets[group_id]
            return
        if offsets is None:
            offsets = self.offsets[group_id] = {}
        offsets[(topic, partition)] = value

    def has_offsets(self, group_id: str) -> bool:
        return bool(self.offsets.get(group_id))

    def get_or_create_group(self, group_id: str, now_ms: int) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, now_ms)
        return group

    # -- loading ------------------------------------------------------------------------------
    def load(self, records, now_ms: int) -> None:
        """Replay the partition: the last record per key wins, a tombstone deletes. Then every
        group record becomes a group (Stable with its members, or Empty) whose members' sessions
        start now; offsets of a group without a record make a simple (Empty) group. ``records``:
        (key, value) pairs, or ``bulk_load.ScannedRecords`` (a large partition's columns). A pair
        ``(None, TxnRecord)`` is a record of a transactional batch, ``(None, TxnMarker)`` a
        transaction marker; a transaction open at the end stays pending (``txn_offsets``)."""
        from broker.coordinator.group import loading
        group_values: dict[str, object] = {}

        def replay_one(key_bytes, value_bytes) -> None:
            self._replay_record(key_bytes, value_bytes, group_values)

        if isinstance(records, bulk_load.ScannedRecords):
            if bulk_load.replay(records, self.offsets, OffsetAndMetadata, replay_one):
                records = ()
            else:  # names or metadata that are not UTF-8: the checked path says which
                records = records.pairs(range(len(records)))
        for key_bytes, value_bytes in records:
            if key_bytes is None:  # a transactional record or a marker (TxnRecord, TxnMarker)
                self._replay_txn_item(value_bytes)
            else:
                replay_one(key_bytes, value_bytes)
        for group_id, value in group_values.items():
            if value is not None:
                group = loading.group_from_record(group_id, value, self.settings, now_ms)
                self.groups[group_id] = group
                for member in group.members.values():
                    self.schedule(group_id, member.heartbeat_deadline_ms)
        for group_id in self.offsets:
            self.get_or_create_group(group_id, now_ms)
        for group_id in self.txn_groups:
            self.get_or_create_group(group_id, now_ms)

    def _replay_txn_item(self, item) -> None:
        """A transactional offset record (pending for its producer) or a marker (ends the
        producer's pending offsets), in log order (see ``txn_offsets``)."""
        from broker.coordinator.group import txn_offsets
        if isinstance(item, TxnMarker):
            txn_offsets.end_transaction(self, item.producer_id, item.committed)
            return
        try:
            key = decode_key(item.key)
            if not isinstance(key, OffsetCommitKey):
                return  # only offsets are written transactionally
            if item.value is None:
                self.put_offset(key.group, key.topic, key.partition, None)
            else:
                value = _offset_from_value(decode_offset_commit_value(item.value))
                txn_offsets.add_pending(self, item.producer_id, (key.group, key.topic, key.partition), value)
        except RecordFormatError:
            self.skipped_records += 1

    def _replay_record(self, key_bytes, value_bytes, group_values: dict) -> None:
        """One record of the partition, in log order."""
        fast = decode_offset_commit_fast(key_bytes, value_bytes)
        if fast is not None:
            group_id, topic, partition, offset, epoch, metadata, commit_ts, expire = fast
            self.put_offset(group_id, topic, partition, None if offset is None else OffsetAndMetadata(
                offset, epoch, metadata, commit_ts, expire if expire >= 0 else None))
            return
        try:
            key = decode_key(key_bytes)
            if isinstance(key, OffsetCommitKey):
                value = None if value_bytes is None else decode_offset_commit_value(value_bytes)
                self.put_offset(key.group, key.topic, key.partition,
                                None if value is None else _offset_from_value(value))
            elif isinstance(key, GroupMetadataKey):
                group_values[key.group] = (
                    None if value_bytes is None else decode_group_metadata_value(value_bytes))
        except RecordFormatError:
            # Kafka's loader fails the whole load on a bad record; one bad record must not
            # keep every group of the partition unavailable, so it is skipped and counted.
            self.skipped_records += 1


def _offset_from_value(value) -> OffsetAndMetadata:
    return OffsetAndMetadata(
        offset=value.offset, leader_epoch=value.leader_epoch, metadata=value.metadata,
        commit_timestamp_ms=value.commit_timestamp,
        expire_timestamp_ms=value.expire_timestamp if value.expire_timestamp >= 0 else None)
