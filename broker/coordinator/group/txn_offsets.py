"""TxnOffsetCommit (key 28) and the pending transactional offsets it leaves (KIP-98, KIP-447).

A transactional producer commits a group's offsets inside its transaction. The records are
appended as one transactional batch (the producer's id and epoch, Kafka's coordinator does the
same) and, once written, stay *pending* per producer id: OffsetFetch does not see them (with
``require_stable`` it answers UNSTABLE_OFFSET_COMMIT for those partitions) until the
transaction's marker reaches ``__consumer_offsets``. COMMIT materializes them, ABORT drops them
(Kafka's ``OffsetMetadataManager.replayEndTransactionMarker``).

Which offset wins when plain and transactional commits mix: Kafka keeps the commit whose record
is later in the log (it compares record offsets). Here every write applied to the shard, at load
or live, takes a sequence number in log order (appends complete in log order): a plain commit of
a key makes the earlier pending entries of that key stale (they are not materialized by their
COMMIT), a materialized entry makes the earlier pending entries of other producers stale, and a
tombstone (OffsetDelete, retention) removes the pending entries of its key, as Kafka's replay.

The same code replays a partition at load: a transactional record becomes pending, a marker
found later in the log resolves it, and a transaction still open at the end of the log stays
pending (its marker comes later, live).
"""

from __future__ import annotations

from broker.coordinator.group.effects import Reply
from broker.coordinator.group.group import GroupState
from broker.coordinator.group.records import encode_offset_commit_key
from broker.coordinator.group.shard import OffsetAndMetadata, map_append_error
from broker.wire.apis.txn_offset_commit import TxnOffsetCommitResponse

__all__ = ["handle_txn_commit", "error_response", "add_pending", "end_transaction",
           "has_pending", "on_plain_offset"]

S = GroupState
INVALID_GROUP_ID = 24
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
COORDINATOR_NOT_AVAILABLE = 15
OFFSET_METADATA_TOO_LARGE = 12


class Pending:
    """One pending transactional offset: its log-order sequence, its value, and whether a later
    commit of the same key has made it stale (its COMMIT then leaves the later one)."""

    __slots__ = ("seq", "value", "stale")

    def __init__(self, seq: int, value: OffsetAndMetadata) -> None:
        self.seq = seq
        self.value = value
        self.stale = False


def error_response(version: int, request, code: int):
    return _response(request, None, code)


def _response(request, codes: dict | None, error_code: int = 0):
    topic_cls = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
    part_cls = TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition
    return TxnOffsetCommitResponse(topics=[
        topic_cls(name=t.name, partitions=[
            part_cls(partition_index=p.partition_index,
                     error_code=error_code if codes is None else codes[(t.name, p.partition_index)])
            for p in t.partitions])
        for t in request.topics])


def _validate(shard, version: int, request, now_ms: int) -> int:
    """Kafka's validateTransactionalOffsetCommit + ClassicGroup.validateOffsetCommit with
    isTransactional: v0-2 carry no member (generation -1, member ""), which a transactional
    commit accepts whatever the group's state; v3+ (KIP-447) fence a zombie of an old
    generation or an unknown/fenced member. No REBALANCE_IN_PROGRESS for transactional commits."""
    generation = request.generation_id if version >= 3 else -1
    member_id = request.member_id if version >= 3 else ""
    instance_id = request.group_instance_id if version >= 3 else None
    group = shard.groups.get(request.group_id)
    if group is None:
        if generation < 0:
            shard.get_or_create_group(request.group_id, now_ms)  # a "simple" group
            return 0
        return ILLEGAL_GENERATION
    if group.in_state(S.DEAD):
        return COORDINATOR_NOT_AVAILABLE
    if generation < 0 and group.in_state(S.EMPTY):
        return 0
    if generation >= 0 or member_id or instance_id is not None:
        code = group.validate_member(member_id, instance_id)
        if code:
            return code
        if generation != group.generation_id:
            return ILLEGAL_GENERATION
    return 0


def handle_txn_commit(shard, token, version: int, request, now_ms: int) -> list:
    """Validate, then append the offsets as one transactional batch; once written they are
    pending for the request's producer id (``add_pending``) and the answer goes out."""
    from broker.coordinator.group.offsets import _encode_value
    code = _validate(shard, version, request, now_ms)
    if code:
        return [Reply(token, _response(request, None, code))]
    codes: dict = {}
    records: list = []
    values: list = []
    for topic in request.topics:
        for p in topic.partitions:
            metadata = p.committed_metadata
            if metadata is not None and len(metadata) > shard.settings.offset_metadata_max_bytes:
                codes[(topic.name, p.partition_index)] = OFFSET_METADATA_TOO_LARGE
                continue
            codes[(topic.name, p.partition_index)] = 0
            value = OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch if version >= 2 else -1,
                                      metadata or "", now_ms, None)
            key = (request.group_id, topic.name, p.partition_index)
            values.append((key, value))
            records.append((encode_offset_commit_key(*key), _encode_value(value)))
    if not records:
        return [Reply(token, _response(request, codes))]
    producer_id, producer_epoch = request.producer_id, request.producer_epoch
    for key, _ in values:
        shard.pending_commit_keys[key] += 1  # retention keeps them while the append is in flight

    def on_done(error_code: int, done_ms: int) -> list:
        for key, value in values:
            shard.pending_commit_keys[key] -= 1
            if not shard.pending_commit_keys[key]:
                del shard.pending_commit_keys[key]
            if not error_code:
                add_pending(shard, producer_id, key, value)
        if error_code:
            return [Reply(token, _response(request, None, map_append_error(error_code)))]
        return [Reply(token, _response(request, codes))]

    return [shard.append(records, on_done, producer_id, producer_epoch)]


def add_pending(shard, producer_id: int, key: tuple, value: OffsetAndMetadata) -> None:
    """A transactional offset record written (or replayed at load): pending for its producer."""
    shard.txn_seq += 1
    shard.txn_offsets.setdefault(producer_id, {})[key] = Pending(shard.txn_seq, value)
    shard.txn_groups.setdefault(key[0], set()).add(producer_id)
    if key[0] not in shard.groups:
        shard.get_or_create_group(key[0], value.commit_timestamp_ms)


def on_plain_offset(shard, group_id: str, topic: str, partition: int, tombstone: bool) -> None:
    """A non-transactional offset record of a group with open transactions: earlier pending
    entries of the key go stale (a tombstone removes them, as Kafka's replay)."""
    shard.txn_seq += 1
    key = (group_id, topic, partition)
    for producer_id in shard.txn_groups.get(group_id, ()):
        pending = shard.txn_offsets.get(producer_id, {})
        if key in pending:
            if tombstone:
                del pending[key]
            else:
                pending[key].stale = True


def end_transaction(shard, producer_id: int, committed: bool) -> None:
    """The producer's marker is in the partition: COMMIT materializes its pending offsets that
    no later commit superseded, ABORT drops them. No pending offsets: nothing to do."""
    pending = shard.txn_offsets.pop(producer_id, None)
    if pending is None:
        return
    for group_id in {key[0] for key in pending}:
        producers = shard.txn_groups.get(group_id)
        if producers is not None:
            producers.discard(producer_id)
            if not producers:
                del shard.txn_groups[group_id]
    if not committed:
        return
    for key, entry in pending.items():
        if entry.stale:
            continue
        for other in shard.txn_groups.get(key[0], ()):
            later = shard.txn_offsets[other].get(key)
            if later is not None and later.seq < entry.seq:
                later.stale = True  # written before this one: its COMMIT must not win
        shard.store_offset(*key, entry.value)


def has_pending(shard, group_id: str, topic: str, partition: int) -> bool:
    """Kafka's hasPendingTransactionalOffsets: an open transaction holds an offset of it."""
    for producer_id in shard.txn_groups.get(group_id, ()):
        if (group_id, topic, partition) in shard.txn_offsets.get(producer_id, {}):
            return True
    return False
