"""The rebalance machinery shared by JoinGroup, SyncGroup, LeaveGroup and the timers.

Follows Kafka's ``GroupMetadataManager`` (classic part): ``prepare_rebalance`` moves a group to
PreparingRebalance (from Empty with the initial delay, else with the rebalance timeout);
``complete_join`` starts the next generation once every member rejoined or the timeout expired
(dynamic members that did not rejoin are removed); ``propagate_assignment`` answers parked
SyncGroups. Every function returns the effects it produced.
"""

from __future__ import annotations

from broker.coordinator.group import responses as rsp
from broker.coordinator.group.effects import Reply
from broker.coordinator.group.group import ClassicGroup, GroupState, Member
from broker.coordinator.group.records import encode_group_metadata_key, encode_group_metadata_value

__all__ = ["prepare_rebalance", "maybe_prepare_rebalance_or_complete_join", "maybe_complete_join_phase",
           "complete_join", "propagate_assignment", "reset_and_propagate_assignment_with_error",
           "remove_member", "answer_waiters", "reschedule_heartbeat", "group_metadata_record", "on_timers",
           "NEW_MEMBER_JOIN_TIMEOUT_MS"]

S = GroupState
# Kafka's group.classic.new.member.join.timeout: a new member's first JoinGroup is parked, so its
# session cannot be tracked; this bounds how long a vanished new member can hold a rebalance.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
REBALANCE_IN_PROGRESS = 27
UNKNOWN_MEMBER_ID = 25


def group_metadata_record(group: ClassicGroup, assignment: dict[str, bytes]) -> tuple[bytes, bytes]:
    return (encode_group_metadata_key(group.group_id),
            encode_group_metadata_value(group.metadata_value(assignment)))


def reschedule_heartbeat(shard, group: ClassicGroup, member: Member, now_ms: int,
                         timeout_ms: int | None = None) -> None:
    member.heartbeat_deadline_ms = now_ms + (member.session_timeout_ms if timeout_ms is None else timeout_ms)
    shard.schedule(group.group_id, member.heartbeat_deadline_ms)


def maybe_prepare_rebalance_or_complete_join(shard, group: ClassicGroup, now_ms: int) -> list:
    if group.can_rebalance():
        return prepare_rebalance(shard, group, now_ms)
    return maybe_complete_join_phase(shard, group, now_ms)


def prepare_rebalance(shard, group: ClassicGroup, now_ms: int) -> list:
    effects: list = []
    if group.in_state(S.COMPLETING_REBALANCE):
        effects += reset_and_propagate_assignment_with_error(shard, group, REBALANCE_IN_PROGRESS, now_ms)
    group.pending_sync.clear()
    group.sync_deadline_ms = None
    initial = group.in_state(S.EMPTY)
    if initial:
        # A group starting from Empty waits for more members: the delay is extended by each new
        # join, up to the rebalance timeout in total (KIP-134).
        delay_ms = shard.settings.initial_rebalance_delay_ms
        remaining_ms = max(group.rebalance_timeout_ms() - delay_ms, 0)
        group.initial_delay = (delay_ms, remaining_ms)
        group.new_member_added = False
        group.join_deadline_ms = now_ms + delay_ms
        shard.schedule(group.group_id, group.join_deadline_ms)
    group.transition_to(S.PREPARING_REBALANCE, now_ms)
    if initial:
        return effects
    if group.has_all_members_joined():
        return effects + complete_join(shard, group, now_ms)
    group.initial_delay = None
    group.join_deadline_ms = now_ms + max(group.rebalance_timeout_ms(), 1)
    shard.schedule(group.group_id, group.join_deadline_ms)
    return effects


def maybe_complete_join_phase(shard, group: ClassicGroup, now_ms: int) -> list:
    if not group.in_state(S.PREPARING_REBALANCE):
        return []
    if group.previous_state is S.EMPTY:
        return []  # the initial rebalance completes on its delay timer only
    if not group.has_all_members_joined():
        return []
    return complete_join(shard, group, now_ms)


def complete_join(shard, group: ClassicGroup, now_ms: int) -> list:
    group.join_deadline_ms = None
    group.initial_delay = None
    effects: list = []
    for member in [m for m in group.members.values() if not m.is_awaiting_join and not m.is_static]:
        effects += answer_waiters(group.remove(member.member_id), UNKNOWN_MEMBER_ID)
    if group.in_state(S.DEAD):
        return effects
    if not group.maybe_elect_new_joined_leader() and group.members:
        # Nobody rejoined (only static members are left): wait another rebalance timeout, until
        # their sessions expire.
        group.join_deadline_ms = now_ms + max(group.rebalance_timeout_ms(), 1)
        shard.schedule(group.group_id, group.join_deadline_ms)
        return effects
    group.init_next_generation(now_ms)
    if group.in_state(S.EMPTY):
        # Failing to write the empty generation is harmless (no member depends on it): Kafka
        # only logs it.
        effects.append(shard.append([group_metadata_record(group, {})], lambda error, now: []))
        return effects
    for member in group.members.values():
        members = rsp.join_members(group) if group.is_leader(member.member_id) else []
        waiter, member.join_waiter = member.join_waiter, None
        if waiter is not None:
            effects.append(Reply(waiter.token, rsp.join_ok(waiter.api_version, group, member.member_id, members)))
        reschedule_heartbeat(shard, group, member, now_ms)
        member.is_new = False
        group.pending_sync.add(member.member_id)
    group.sync_deadline_ms = now_ms + max(group.rebalance_timeout_ms(), 1)
    shard.schedule(group.group_id, group.sync_deadline_ms)
    return effects


def reset_and_propagate_assignment_with_error(shard, group: ClassicGroup, error_code: int,
                                              now_ms: int) -> list:
    assert group.in_state(S.COMPLETING_REBALANCE)
    for member in group.members.values():
        member.assignment = b""
    return propagate_assignment(shard, group, error_code, now_ms)


def propagate_assignment(shard, group: ClassicGroup, error_code: int, now_ms: int) -> list:
    effects = []
    ok = error_code == 0
    for member in group.members.values():
        waiter, member.sync_waiter = member.sync_waiter, None
        if waiter is not None:
            effects.append(Reply(waiter.token, rsp.sync_response(
                error_code, member.assignment,
                group.protocol_type if ok else None, group.protocol_name if ok else None)))
            # Sessions restart once the member has its answer: expiry was not counted while it
            # waited for the leader or the append.
            reschedule_heartbeat(shard, group, member, now_ms)
    return effects


def answer_waiters(member: Member | None, error_code: int) -> list:
    """Answer a departing member's parked requests (each token gets exactly one reply)."""
    effects = []
    if member is None:
        return effects
    if member.join_waiter is not None:
        effects.append(Reply(member.join_waiter.token, rsp.join_error(member.join_waiter.api_version, error_code)))
        member.join_waiter = None
    if member.sync_waiter is not None:
        effects.append(Reply(member.sync_waiter.token, rsp.sync_response(error_code)))
        member.sync_waiter = None
    return effects


def remove_member(shard, group: ClassicGroup, member_id: str, now_ms: int,
                  error_code: int = UNKNOWN_MEMBER_ID) -> list:
    """Expel a member (session expiry, LeaveGroup) and move the group on."""
    effects = answer_waiters(group.remove(member_id), error_code)
    if group.in_state(S.STABLE, S.COMPLETING_REBALANCE):
        effects += maybe_prepare_rebalance_or_complete_join(shard, group, now_ms)
    elif group.in_state(S.PREPARING_REBALANCE) and group.has_all_members_joined():
        effects += complete_join(shard, group, now_ms)
    return effects


def on_timers(shard, group: ClassicGroup, now_ms: int) -> list:
    """Fire whatever of this group's deadlines have passed: pending members' and members'
    sessions, the join (rebalance timeout or initial delay), the pending-sync expiry."""
    effects: list = []
    for member_id, deadline in list(group.pending_members.items()):
        if deadline <= now_ms:
            group.remove(member_id)
            if group.in_state(S.PREPARING_REBALANCE) and group.has_all_members_joined():
                effects += complete_join(shard, group, now_ms)
    for member in list(group.members.values()):
        deadline = member.heartbeat_deadline_ms
        if deadline is None or deadline > now_ms or member.member_id not in group.members:
            continue
        if member.has_satisfied_heartbeat():
            # Parked in a rebalance: Kafka lets the timer lapse and restarts it when the member
            # is answered; looking again one session later also covers a member whose parked
            # request was answered on a path that does not restart it.
            reschedule_heartbeat(shard, group, member, now_ms)
        else:
            member.heartbeat_deadline_ms = None
            effects += remove_member(shard, group, member.member_id, now_ms)
    if group.join_deadline_ms is not None and group.join_deadline_ms <= now_ms:
        effects += _join_timer(shard, group, now_ms)
    if group.sync_deadline_ms is not None and group.sync_deadline_ms <= now_ms:
        effects += _sync_timer(shard, group, now_ms)
    return effects


def _join_timer(shard, group: ClassicGroup, now_ms: int) -> list:
    group.join_deadline_ms = None
    if group.initial_delay is not None:
        delay_ms, remaining_ms = group.initial_delay
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay_ms = min(shard.settings.initial_rebalance_delay_ms, remaining_ms)
            group.initial_delay = (new_delay_ms, max(remaining_ms - delay_ms, 0))
            group.join_deadline_ms = now_ms + new_delay_ms
            shard.schedule(group.group_id, group.join_deadline_ms)
            return []
    if not group.in_state(S.PREPARING_REBALANCE):
        return []
    return complete_join(shard, group, now_ms)


def _sync_timer(shard, group: ClassicGroup, now_ms: int) -> list:
    """Members that never sent SyncGroup within the rebalance timeout are removed."""
    group.sync_deadline_ms = None
    if not group.in_state(S.COMPLETING_REBALANCE, S.STABLE) or not group.pending_sync:
        return []
    effects: list = []
    for member_id in list(group.pending_sync):
        effects += answer_waiters(group.remove(member_id), UNKNOWN_MEMBER_ID)
    return effects + prepare_rebalance(shard, group, now_ms)
