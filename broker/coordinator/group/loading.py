"""Turning a ``GroupMetadataValue`` read back from ``__consumer_offsets`` into a live group.

A group with members comes back Stable (its generation, protocol, leader and every member's
assignment as written at the last SyncGroup); one without members comes back Empty. The members'
sessions restart at load time: the new coordinator has never heard from them, and expiring them
on a clock they never saw would expel every member on each coordinator move.
"""

from __future__ import annotations

from broker.coordinator.group.group import ClassicGroup, GroupState, Member

__all__ = ["group_from_record"]


def group_from_record(group_id: str, value, settings, now_ms: int) -> ClassicGroup:
    group = ClassicGroup(group_id, now_ms)
    group.protocol_type = value.protocol_type or None
    group.generation_id = value.generation
    group.protocol_name = value.protocol
    group.leader_id = value.leader
    group.state_timestamp_ms = value.current_state_timestamp if value.current_state_timestamp >= 0 else None
    for m in value.members:
        session_ms = m.session_timeout
        member = Member(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout if m.rebalance_timeout >= 0 else session_ms,
            session_timeout_ms=session_ms, protocol_type=group.protocol_type or "",
            protocols=[(value.protocol or "", bytes(m.subscription))],
            assignment=bytes(m.assignment), heartbeat_deadline_ms=now_ms + session_ms)
        group.members[member.member_id] = member
        group.supported_protocols.update(member.protocol_names())
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id
    if group.members:
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.state = GroupState.STABLE
    else:
        group.state = GroupState.EMPTY
        group.leader_id = None
    group.subscribed_topics = group.compute_subscribed_topics()
    return group
