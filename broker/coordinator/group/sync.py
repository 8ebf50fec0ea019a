"""SyncGroup, Heartbeat and LeaveGroup (Kafka's ``classicGroupSync``, ``classicGroupHeartbeat``,
``classicGroupLeave``).

SyncGroup from the leader writes the group metadata record (members + the new assignment) and
every parked SyncGroup of the generation is answered only after that append succeeded; if it
fails, every member is told the mapped error and the group rebalances.
"""

from __future__ import annotations

from broker.coordinator.group import rebalance as rb
from broker.coordinator.group import responses as rsp
from broker.coordinator.group.effects import Reply
from broker.coordinator.group.group import GroupState, Waiter
from broker.coordinator.group.shard import map_append_error

__all__ = ["handle_sync", "handle_heartbeat", "handle_leave"]

S = GroupState
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
COORDINATOR_NOT_AVAILABLE = 15
REBALANCE_IN_PROGRESS = 27


def _instance_id(request, version: int, since: int = 3):
    return request.group_instance_id if version >= since else None


def handle_sync(shard, token, version: int, request, now_ms: int) -> list:
    def error(code):
        return [Reply(token, rsp.sync_response(code))]

    if not request.group_id:
        return error(INVALID_GROUP_ID)
    group = shard.groups.get(request.group_id)
    if group is None:
        return error(UNKNOWN_MEMBER_ID)
    if group.in_state(S.DEAD):
        return error(COORDINATOR_NOT_AVAILABLE)
    member_id = request.member_id
    code = group.validate_member(member_id, _instance_id(request, version))
    if code:
        return error(code)
    if request.generation_id != group.generation_id:
        return error(ILLEGAL_GENERATION)
    if version >= 5 and (_inconsistent(request.protocol_type, group.protocol_type)
                         or _inconsistent(request.protocol_name, group.protocol_name)):
        return error(INCONSISTENT_GROUP_PROTOCOL)
    if group.in_state(S.PREPARING_REBALANCE):
        return error(REBALANCE_IN_PROGRESS)
    member = group.members[member_id]
    if group.in_state(S.STABLE):
        _remove_pending_sync(group, member_id)
        return [Reply(token, rsp.sync_response(0, member.assignment, group.protocol_type, group.protocol_name))]
    # CompletingRebalance: park until the leader's assignment is written.
    effects = []
    if member.sync_waiter is not None:  # a repeated SyncGroup supersedes the parked one
        effects.append(Reply(member.sync_waiter.token, rsp.sync_response(REBALANCE_IN_PROGRESS)))
    member.sync_waiter = Waiter(token, version)
    _remove_pending_sync(group, member_id)
    if not group.is_leader(member_id):
        return effects
    assignment = {a.member_id: bytes(a.assignment) for a in request.assignments}
    assignment = {mid: assignment.get(mid, b"") for mid in group.members}
    generation = request.generation_id

    def on_done(error_code: int, done_ms: int) -> list:
        # Another member may have joined meanwhile: act only on the same generation.
        if not group.in_state(S.COMPLETING_REBALANCE) or group.generation_id != generation:
            return []
        if error_code:
            out = rb.reset_and_propagate_assignment_with_error(
                shard, group, map_append_error(error_code), done_ms)
            return out + rb.maybe_prepare_rebalance_or_complete_join(shard, group, done_ms)
        for mid, m in group.members.items():
            m.assignment = assignment.get(mid, b"")
        out = rb.propagate_assignment(shard, group, 0, done_ms)
        group.transition_to(S.STABLE, done_ms)
        return out

    return effects + [shard.append([rb.group_metadata_record(group, assignment)], on_done)]


def _inconsistent(requested, actual) -> bool:
    return requested is not None and requested != actual


def _remove_pending_sync(group, member_id: str) -> None:
    group.pending_sync.discard(member_id)
    if not group.pending_sync:
        group.sync_deadline_ms = None


def handle_heartbeat(shard, token, version: int, request, now_ms: int) -> list:
    def reply(code):
        return [Reply(token, rsp.heartbeat_response(code))]

    if not request.group_id:
        return reply(INVALID_GROUP_ID)
    group = shard.groups.get(request.group_id)
    if group is None:
        return reply(UNKNOWN_MEMBER_ID)
    if group.in_state(S.DEAD):
        return reply(COORDINATOR_NOT_AVAILABLE)
    code = group.validate_member(request.member_id, _instance_id(request, version))
    if code:
        return reply(code)
    if request.generation_id != group.generation_id:
        return reply(ILLEGAL_GENERATION)
    if group.in_state(S.EMPTY):
        return reply(UNKNOWN_MEMBER_ID)
    rb.reschedule_heartbeat(shard, group, group.members[request.member_id], now_ms)
    if group.in_state(S.PREPARING_REBALANCE):
        return reply(REBALANCE_IN_PROGRESS)
    return reply(0)  # CompletingRebalance heartbeats are normal: the member has its generation


def handle_leave(shard, token, version: int, request, now_ms: int) -> list:
    def top_error(code):
        return [Reply(token, rsp.leave_response(version, code, []))]

    if not request.group_id:
        return top_error(INVALID_GROUP_ID)
    group = shard.groups.get(request.group_id)
    if group is None:
        return top_error(UNKNOWN_MEMBER_ID)
    if group.in_state(S.DEAD):
        return top_error(COORDINATOR_NOT_AVAILABLE)
    if version >= 3:
        identities = [(m.member_id, m.group_instance_id) for m in request.members]
    else:
        identities = [(request.member_id, None)]
    effects: list = []
    results = []
    for member_id, instance_id in identities:
        code = 0
        if member_id == "":
            # An admin removes a static member by its instance id alone.
            current = group.static_members.get(instance_id) if instance_id is not None else None
            if current is None:
                code = UNKNOWN_MEMBER_ID
            else:
                effects += _remove_quietly(group, current)
        elif member_id in group.pending_members:
            group.pending_members.pop(member_id)
        else:
            code = group.validate_member(member_id, instance_id)
            if not code:
                effects += _remove_quietly(group, member_id)
        results.append((member_id, instance_id, code))
    if any(code == 0 for _, _, code in results):
        if group.in_state(S.STABLE, S.COMPLETING_REBALANCE):
            effects += rb.maybe_prepare_rebalance_or_complete_join(shard, group, now_ms)
        elif group.in_state(S.PREPARING_REBALANCE):
            effects += rb.maybe_complete_join_phase(shard, group, now_ms)
    return effects + [Reply(token, rsp.leave_response(version, 0, results))]


def _remove_quietly(group, member_id: str) -> list:
    """Remove without moving the group on (the caller does that once for the whole batch)."""
    member = group.remove(member_id)
    return rb.answer_waiters(member, UNKNOWN_MEMBER_ID)
