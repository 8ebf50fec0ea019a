"""OffsetCommit, OffsetFetch, OffsetDelete and offsets retention (Kafka's ``OffsetMetadataManager``).

A commit's records are appended as one batch; the cache takes them only when the append
succeeded (``Shard.put_offset`` in the completion), and the answer goes out then. A failed append
answers every partition with the mapped error (``shard.map_append_error``).

Retention (KIP-211): offsets of an Empty group expire ``offsets_retention_ms`` after the group
became Empty (or after the commit when that time is unknown); offsets of a group that never had
a protocol (simple commits) expire from their commit time; in a Stable consumer group, offsets of
topics no member subscribes to expire from their commit time. An explicit expire timestamp (v1
commit record) wins. Expiry writes tombstones; an Empty group left with no offsets gets a group
tombstone and disappears.
"""

from __future__ import annotations

from broker.coordinator.group.effects import Reply
from broker.coordinator.group.group import GroupState
from broker.coordinator.group.rebalance import reschedule_heartbeat
from broker.coordinator.group.records import (
    OffsetCommitValue, encode_group_metadata_key, encode_offset_commit_key, encode_offset_commit_value,
    encode_offset_commit_value_v3,
)
from broker.coordinator.group.shard import OffsetAndMetadata, map_append_error
from broker.wire.apis.offset_commit import OffsetCommitResponse
from broker.wire.apis.offset_delete import OffsetDeleteResponse

__all__ = ["handle_commit", "fetch_group_offsets", "handle_offset_delete", "expire_offsets"]

S = GroupState
INVALID_GROUP_ID = 24
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
COORDINATOR_NOT_AVAILABLE = 15
OFFSET_METADATA_TOO_LARGE = 12
GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68
GROUP_SUBSCRIBED_TO_TOPIC = 86
OFFSET_COMMIT_VALUE_V1 = 1  # the only value version with an expire timestamp


def _commit_response(request, codes: dict | None, error_code: int = 0):
    """Every requested partition, with ``codes[(topic, partition)]`` or ``error_code``."""
    topic_cls = OffsetCommitResponse.OffsetCommitResponseTopic
    part_cls = OffsetCommitResponse.OffsetCommitResponsePartition
    return OffsetCommitResponse(topics=[
        topic_cls(name=t.name, partitions=[
            part_cls(partition_index=p.partition_index,
                     error_code=error_code if codes is None else codes[(t.name, p.partition_index)])
            for p in t.partitions])
        for t in request.topics])


def _validate_commit(shard, version: int, request, now_ms: int) -> int:
    """Kafka's validateOffsetCommit (OffsetMetadataManager + ClassicGroup)."""
    generation = request.generation_id_or_member_epoch if version >= 1 else -1
    member_id = request.member_id if version >= 1 else ""
    instance_id = request.group_instance_id if version >= 7 else None
    group = shard.groups.get(request.group_id)
    if group is None:
        if generation < 0:
            shard.get_or_create_group(request.group_id, now_ms)  # a "simple" group
            return 0
        return GROUP_ID_NOT_FOUND if version >= 9 else ILLEGAL_GENERATION
    if group.in_state(S.DEAD):
        return COORDINATOR_NOT_AVAILABLE
    if generation < 0 and group.in_state(S.EMPTY):
        return 0  # admin tools, assign() users: allowed while the group has no members
    if generation >= 0 or member_id or instance_id is not None:
        code = group.validate_member(member_id, instance_id)
        if code:
            return code
        if generation != group.generation_id:
            return ILLEGAL_GENERATION
    elif not group.in_state(S.EMPTY):
        return UNKNOWN_MEMBER_ID  # a simple commit against a group with members
    if group.in_state(S.COMPLETING_REBALANCE):
        return REBALANCE_IN_PROGRESS
    return 0


def handle_commit(shard, token, version: int, request, now_ms: int) -> list:
    if not request.group_id:
        return [Reply(token, _commit_response(request, None, INVALID_GROUP_ID))]
    code = _validate_commit(shard, version, request, now_ms)
    if code:
        return [Reply(token, _commit_response(request, None, code))]
    group = shard.groups[request.group_id]
    member = group.members.get(request.member_id) if version >= 1 else None
    if member is not None and group.in_state(S.STABLE, S.PREPARING_REBALANCE):
        reschedule_heartbeat(shard, group, member, now_ms)  # a commit keeps the session alive
    retention = request.retention_time_ms if 2 <= version <= 4 else -1
    expire_ms = now_ms + retention if retention != -1 else None
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
            # v1 may carry the commit time (Kafka's OffsetAndMetadata.fromRequest); -1: now
            commit_ms = p.commit_timestamp if version == 1 and p.commit_timestamp != -1 else now_ms
            value = OffsetAndMetadata(p.committed_offset, p.committed_leader_epoch if version >= 6 else -1,
                                      metadata or "", commit_ms, expire_ms)
            key = (request.group_id, topic.name, p.partition_index)
            values.append((key, value))
            records.append((encode_offset_commit_key(*key), _encode_value(value)))
    if not records:
        return [Reply(token, _commit_response(request, codes))]
    for key, _ in values:
        shard.pending_commit_keys[key] += 1

    def on_done(error_code: int, done_ms: int) -> list:
        for key, value in values:
            shard.pending_commit_keys[key] -= 1
            if not shard.pending_commit_keys[key]:
                del shard.pending_commit_keys[key]
            if not error_code:
                shard.put_offset(*key, value)
        if error_code:
            return [Reply(token, _commit_response(request, None, map_append_error(error_code)))]
        return [Reply(token, _commit_response(request, codes))]

    return [shard.append(records, on_done)]


def _encode_value(value: OffsetAndMetadata) -> bytes:
    if value.expire_timestamp_ms is None:
        return encode_offset_commit_value_v3(value.offset, value.leader_epoch, value.metadata,
                                             value.commit_timestamp_ms)
    record = OffsetCommitValue(offset=value.offset, leader_epoch=value.leader_epoch,
                               metadata=value.metadata, commit_timestamp=value.commit_timestamp_ms,
                               expire_timestamp=value.expire_timestamp_ms if value.expire_timestamp_ms is not None else -1)
    return encode_offset_commit_value(record, OFFSET_COMMIT_VALUE_V1)


def fetch_group_offsets(shard, group_id: str, topics) -> list:
    """[(topic, [(partition, offset, leader epoch, metadata)])] for ``topics`` ([(name,
    [partitions])]), or every committed offset of the group when ``topics`` is None. Unknown
    groups and partitions without a commit answer -1 (Kafka: no error)."""
    group = shard.groups.get(group_id)
    offsets = {} if group is None or group.in_state(S.DEAD) else shard.offsets.get(group_id, {})
    if topics is None:
        by_topic: dict[str, list] = {}
        for (topic, partition), o in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append((partition, o.offset, o.leader_epoch, o.metadata))
        return list(by_topic.items())
    out = []
    for name, partitions in topics:
        rows = []
        for partition in partitions:
            o = offsets.get((name, partition))
            rows.append((partition, -1, -1, "") if o is None else
                        (partition, o.offset, o.leader_epoch, o.metadata))
        out.append((name, rows))
    return out


def handle_offset_delete(shard, token, version: int, request, now_ms: int) -> list:
    def top(code):
        return [Reply(token, OffsetDeleteResponse(error_code=code))]

    if not request.group_id:
        return top(INVALID_GROUP_ID)
    group = shard.groups.get(request.group_id)
    if group is None or group.in_state(S.DEAD):
        return top(GROUP_ID_NOT_FOUND)
    if group.members and group.protocol_type != "consumer":
        return top(NON_EMPTY_GROUP)
    topic_cls = OffsetDeleteResponse.OffsetDeleteResponseTopic
    part_cls = OffsetDeleteResponse.OffsetDeleteResponsePartition
    topics, records, keys = [], [], []
    offsets = shard.offsets.get(request.group_id, {})
    for t in request.topics:
        subscribed = group.is_subscribed_to_topic(t.name)
        parts = []
        for p in t.partitions:
            parts.append(part_cls(partition_index=p.partition_index,
                                  error_code=GROUP_SUBSCRIBED_TO_TOPIC if subscribed else 0))
            if not subscribed and ((t.name, p.partition_index) in offsets or (
                    request.group_id in shard.txn_groups and _has_txn_pending(
                        shard, (request.group_id, t.name, p.partition_index)))):  # Kafka's deleteOffsets
                keys.append((request.group_id, t.name, p.partition_index))
                records.append((encode_offset_commit_key(*keys[-1]), None))
        topics.append(topic_cls(name=t.name, partitions=parts))
    response = OffsetDeleteResponse(error_code=0, topics=topics)
    if not records:
        return [Reply(token, response)]

    def on_done(error_code: int, done_ms: int) -> list:
        if error_code:
            return top(map_append_error(error_code))
        for key in keys:
            shard.put_offset(*key, None)
        return [Reply(token, response)]

    return [shard.append(records, on_done)]


def expire_offsets(shard, now_ms: int) -> list:
    """The periodic cleanup: one append of every expired offset's tombstone, plus a group
    tombstone for each Empty group left without offsets; applied when the append succeeds."""
    retention_ms = shard.settings.offsets_retention_ms
    records, offset_keys, dead_groups = [], [], []
    for group_id, group in list(shard.groups.items()):
        base = _expiration_base(group)
        offsets = shard.offsets.get(group_id, {})
        all_expired = True
        for (topic, partition), o in offsets.items():
            key = (group_id, topic, partition)
            expired = (base is not None and not group.is_subscribed_to_topic(topic)
                       and key not in shard.pending_commit_keys and _is_expired(o, base, now_ms, retention_ms)
                       and not (group_id in shard.txn_groups and _has_txn_pending(shard, key)))
            if expired:
                offset_keys.append(key)
                records.append((encode_offset_commit_key(*key), None))
            else:
                all_expired = False
        if all_expired and _is_deletable(shard, group):
            dead_groups.append(group_id)
            records.append((encode_group_metadata_key(group_id), None))
    if not records:
        return []

    def on_done(error_code: int, done_ms: int) -> list:
        if error_code:
            return []  # the next check tries again
        for key in offset_keys:
            shard.put_offset(*key, None)
        for group_id in dead_groups:
            group = shard.groups.get(group_id)
            if group is not None and _is_deletable(shard, group) and not shard.has_offsets(group_id):
                group.transition_to(S.DEAD, done_ms)
                del shard.groups[group_id]
        return []

    return [shard.append(records, on_done)]


def _is_deletable(shard, group) -> bool:
    return (group.in_state(S.EMPTY) and not group.members and not group.pending_members
            and group.group_id not in shard.txn_groups
            and not any(k[0] == group.group_id for k in shard.pending_commit_keys))


def _has_txn_pending(shard, key) -> bool:
    """Kafka's retention keeps an offset with pending transactional offsets (txn_offsets)."""
    from broker.coordinator.group.txn_offsets import has_pending
    return has_pending(shard, *key)


def _expiration_base(group):
    """A function offset -> the time retention counts from, or None: nothing expires."""
    if group.protocol_type is None:
        return lambda o: o.commit_timestamp_ms
    if group.in_state(S.EMPTY):
        since = group.state_timestamp_ms
        return lambda o: since if since is not None else o.commit_timestamp_ms
    if group.protocol_type == "consumer" and group.subscribed_topics is not None and group.in_state(S.STABLE):
        return lambda o: o.commit_timestamp_ms
    return None


def _is_expired(o: OffsetAndMetadata, base, now_ms: int, retention_ms: int) -> bool:
    if o.expire_timestamp_ms is not None:
        return now_ms >= o.expire_timestamp_ms
    return now_ms - base(o) >= retention_ms
