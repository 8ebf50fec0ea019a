"""ListGroups, DescribeGroups and DeleteGroups over one shard's groups.

DeleteGroups refuses a group with members (NON_EMPTY_GROUP) and otherwise appends tombstones for
the group and every offset of it; the group goes away when that append succeeds. DescribeGroups
shows members' metadata and assignment only when the group is Stable (Kafka's summary: during a
rebalance they are in flux).
"""

from __future__ import annotations

from broker.coordinator.group.group import GroupState
from broker.coordinator.group.records import encode_group_metadata_key, encode_offset_commit_key
from broker.coordinator.group.shard import map_append_error
from broker.wire.apis.describe_groups import DescribeGroupsResponse
from broker.wire.apis.list_groups import ListGroupsResponse

__all__ = ["listed_groups", "describe_group", "delete_group", "GROUP_TYPE_CLASSIC"]

S = GroupState
GROUP_ID_NOT_FOUND = 69
NON_EMPTY_GROUP = 68
GROUP_TYPE_CLASSIC = "classic"


def listed_groups(shard, states_filter: list[str], types_filter: list[str]) -> list:
    states = {s.lower() for s in states_filter}
    types = {t.lower() for t in types_filter}
    out = []
    for group in shard.groups.values():
        if group.in_state(S.DEAD):
            continue
        if states and group.state.value.lower() not in states:
            continue
        if types and GROUP_TYPE_CLASSIC not in types:
            continue
        out.append(ListGroupsResponse.ListedGroup(
            group_id=group.group_id, protocol_type=group.protocol_type or "",
            group_state=group.state.value, group_type=GROUP_TYPE_CLASSIC))
    return out


def describe_group(shard, group_id: str, version: int):
    """A group this shard does not have is Dead: without error up to v5, GROUP_ID_NOT_FOUND with
    Kafka's message from v6 (KIP-1043), so an admin client can tell "no such group" apart."""
    described = DescribeGroupsResponse.DescribedGroup
    member_cls = DescribeGroupsResponse.DescribedGroupMember
    group = shard.groups.get(group_id)
    if group is None or group.in_state(S.DEAD):
        if version >= 6:
            return described(error_code=GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found.",
                             group_id=group_id, group_state=S.DEAD.value)
        return described(error_code=0, group_id=group_id, group_state=S.DEAD.value)
    stable = group.in_state(S.STABLE)
    return described(
        error_code=0, group_id=group_id, group_state=group.state.value,
        protocol_type=group.protocol_type or "",
        protocol_data=(group.protocol_name or "") if stable else "",
        members=[member_cls(
            member_id=m.member_id, group_instance_id=m.group_instance_id,
            client_id=m.client_id, client_host=m.client_host,
            member_metadata=m.metadata_for(group.protocol_name) if stable else b"",
            member_assignment=m.assignment if stable else b"",
        ) for m in group.members.values()])


def pending_txn_keys(shard, group_id: str, committed: set) -> list:
    """Keys with only pending transactional offsets (TxnOffsetCommit): a group's deletion writes
    their tombstones too, which drop the pending offsets (Kafka's deleteAllOffsets)."""
    keys: set = set()
    for producer_id in shard.txn_groups.get(group_id, ()):
        keys.update(k for k in shard.txn_offsets.get(producer_id, {}) if k[0] == group_id)
    return sorted(keys - committed)


def delete_group(shard, group_id: str, report) -> list:
    """Delete one group; ``report(error_code) -> effects`` is called exactly once, now or when
    the append completes. Returns the effects (report's, or the Append)."""
    group = shard.groups.get(group_id)
    if group is None or group.in_state(S.DEAD):
        return report(GROUP_ID_NOT_FOUND)
    if not group.in_state(S.EMPTY):
        return report(NON_EMPTY_GROUP)
    offset_keys = [(group_id, topic, partition) for topic, partition in shard.offsets.get(group_id, {})]
    offset_keys += pending_txn_keys(shard, group_id, set(offset_keys))
    records = [(encode_offset_commit_key(*key), None) for key in offset_keys]
    records.append((encode_group_metadata_key(group_id), None))

    def on_done(error_code: int, now_ms: int) -> list:
        if error_code:
            return report(map_append_error(error_code))
        for key in offset_keys:
            shard.put_offset(*key, None)
        current = shard.groups.get(group_id)
        if current is not None and current.in_state(S.EMPTY) and not current.members:
            current.transition_to(S.DEAD, now_ms)
            del shard.groups[group_id]
        return report(0)

    return [shard.append(records, on_done)]
