"""JoinGroup (Kafka's ``classicGroupJoin`` and the functions under it).

Order of checks, as Kafka's: group id, session timeout bounds, unknown member of a missing group,
group.max.size, then new member (MEMBER_ID_REQUIRED handshake on v4+, static members by
group.instance.id) or existing member (per state). A JoinGroup that has to wait is parked on its
member as a ``Waiter`` and answered by ``rebalance.complete_join``.
"""

from __future__ import annotations

import uuid

from broker.coordinator.group import rebalance as rb
from broker.coordinator.group import responses as rsp
from broker.coordinator.group.effects import Reply
from broker.coordinator.group.group import ClassicGroup, GroupState, Member, Waiter
from broker.coordinator.group.shard import map_append_error

__all__ = ["handle_join"]

S = GroupState
INVALID_GROUP_ID = 24
INVALID_SESSION_TIMEOUT = 26
UNKNOWN_MEMBER_ID = 25
INCONSISTENT_GROUP_PROTOCOL = 23
COORDINATOR_NOT_AVAILABLE = 15
GROUP_MAX_SIZE_REACHED = 81
MEMBER_ID_REQUIRED = 79
FENCED_INSTANCE_ID = 82
REBALANCE_IN_PROGRESS = 27


def _protocols(request) -> list:
    return [(p.name, bytes(p.metadata)) for p in request.protocols]


def handle_join(shard, token, version: int, request, client_id: str, client_host: str,
                now_ms: int) -> list:
    def error(code, member_id=request.member_id):
        return [Reply(token, rsp.join_error(version, code, member_id))]

    settings = shard.settings
    if not request.group_id:
        return error(INVALID_GROUP_ID)
    if not settings.min_session_timeout_ms <= request.session_timeout_ms <= settings.max_session_timeout_ms:
        return error(INVALID_SESSION_TIMEOUT)
    member_id = request.member_id
    is_unknown = member_id == ""
    group = shard.groups.get(request.group_id)
    if group is None:
        if not is_unknown:
            return error(UNKNOWN_MEMBER_ID)
        group = shard.get_or_create_group(request.group_id, now_ms)
    if not _accept_joining_member(group, member_id, settings.max_size):
        # Kafka removes a refused known member without moving the group on: the rebalance in
        # progress completes on its timer without it.
        effects = rb.answer_waiters(group.remove(member_id), GROUP_MAX_SIZE_REACHED)
        return effects + error(GROUP_MAX_SIZE_REACHED, "")
    waiter = Waiter(token, version)
    ctx = _JoinContext(shard, group, waiter, version, request, client_id, client_host, now_ms)
    return ctx.join_new_member() if is_unknown else ctx.join_existing_member()


def _accept_joining_member(group: ClassicGroup, member_id: str, max_size: int) -> bool:
    """Kafka's ``acceptJoiningMember``: while preparing a rebalance count the members that have
    rejoined (so lowering group.max.size kicks out the last rejoiners), otherwise the members."""
    if group.in_state(S.EMPTY, S.DEAD):
        return True
    if group.in_state(S.PREPARING_REBALANCE):
        member = group.members.get(member_id)
        return (member is not None and member.is_awaiting_join) or group.num_awaiting_join() < max_size
    return group.has_member(member_id) or len(group.members) < max_size


class _JoinContext:
    def __init__(self, shard, group, waiter, version, request, client_id, client_host, now_ms):
        self.shard, self.group, self.waiter, self.version = shard, group, waiter, version
        self.request, self.client_id, self.client_host, self.now_ms = request, client_id, client_host, now_ms
        self.session_timeout_ms = request.session_timeout_ms
        # v0 has no rebalance timeout: the session timeout bounds the join phase.
        self.rebalance_timeout_ms = request.rebalance_timeout_ms if version >= 1 else request.session_timeout_ms
        self.protocols = _protocols(request)
        self.instance_id = request.group_instance_id if version >= 5 else None

    def reply(self, response) -> list:
        return [Reply(self.waiter.token, response)]

    def error(self, code: int, member_id: str) -> list:
        return self.reply(rsp.join_error(self.version, code, member_id))

    def join_new_member(self) -> list:
        group = self.group
        if group.in_state(S.DEAD):
            return self.error(COORDINATOR_NOT_AVAILABLE, "")
        if not group.supports_protocols(self.request.protocol_type, [n for n, _ in self.protocols]):
            return self.error(INCONSISTENT_GROUP_PROTOCOL, "")
        prefix = self.instance_id if self.instance_id is not None else self.client_id
        new_member_id = f"{prefix}-{uuid.UUID(int=self.shard.rng.getrandbits(128), version=4)}"
        if self.instance_id is not None:
            existing = group.static_members.get(self.instance_id)
            if existing is not None:
                return self.update_static_member(existing, new_member_id)
            return self.add_member(new_member_id)
        if self.version >= 4:
            # KIP-394: the member must come back with this id, so a client that times out and
            # retries does not leave a stream of defunct members behind.
            group.pending_members[new_member_id] = self.now_ms + self.session_timeout_ms
            self.shard.schedule(group.group_id, group.pending_members[new_member_id])
            return self.error(MEMBER_ID_REQUIRED, new_member_id)
        return self.add_member(new_member_id)

    def join_existing_member(self) -> list:
        group, member_id = self.group, self.request.member_id
        if group.in_state(S.DEAD):
            return self.error(COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports_protocols(self.request.protocol_type, [n for n, _ in self.protocols]):
            return self.error(INCONSISTENT_GROUP_PROTOCOL, member_id)
        if member_id in group.pending_members and self.instance_id is None:
            return self.add_member(member_id)
        code = group.validate_member(member_id, self.instance_id)
        if code:
            return self.error(code, member_id)
        member = group.members[member_id]
        if group.in_state(S.PREPARING_REBALANCE):
            return self.update_member(member)
        if group.in_state(S.COMPLETING_REBALANCE):
            if member.matches(self.protocols):
                # It lost the first answer: give it this generation again.
                members = rsp.join_members(group) if group.is_leader(member_id) else []
                return self.supersede(member) + self.reply(rsp.join_ok(self.version, group, member_id, members))
            return self.update_member(member)
        if group.in_state(S.STABLE):
            if group.is_leader(member_id) or not member.matches(self.protocols):
                # A leader's JoinGroup is how a client asks for a rebalance (e.g. new topics).
                return self.update_member(member)
            return self.supersede(member) + self.reply(rsp.join_ok(self.version, group, member_id, []))
        return self.error(UNKNOWN_MEMBER_ID, member_id)  # Empty: the member must start over

    def supersede(self, member: Member) -> list:
        """A member that sends JoinGroup again while one is parked: Kafka drops the old future
        unanswered; here it is answered REBALANCE_IN_PROGRESS so every request gets its reply."""
        old, member.join_waiter = member.join_waiter, None
        if old is None:
            return []
        return [Reply(old.token, rsp.join_error(old.api_version, REBALANCE_IN_PROGRESS, member.member_id))]

    def update_member(self, member: Member) -> list:
        effects = self.supersede(member)
        self.group.update_protocols(member, self.protocols)
        member.rebalance_timeout_ms = self.rebalance_timeout_ms
        member.session_timeout_ms = self.session_timeout_ms
        member.join_waiter = self.waiter
        return effects + rb.maybe_prepare_rebalance_or_complete_join(self.shard, self.group, self.now_ms)

    def add_member(self, member_id: str) -> list:
        group = self.group
        member = Member(member_id, self.instance_id, self.client_id, self.client_host,
                        self.rebalance_timeout_ms, self.session_timeout_ms,
                        self.request.protocol_type, self.protocols, join_waiter=self.waiter, is_new=True)
        if group.in_state(S.PREPARING_REBALANCE) and group.previous_state is S.EMPTY:
            group.new_member_added = True
        group.add(member)
        rb.reschedule_heartbeat(self.shard, group, member, self.now_ms, rb.NEW_MEMBER_JOIN_TIMEOUT_MS)
        return rb.maybe_prepare_rebalance_or_complete_join(self.shard, group, self.now_ms)

    def update_static_member(self, old_member_id: str, new_member_id: str) -> list:
        """KIP-345: a known group.instance.id with a new member id replaces the old member; the
        old id is fenced. Stable with an unchanged protocol choice: no rebalance, only the group
        record is rewritten and the answer waits for it."""
        group, shard, now_ms = self.group, self.shard, self.now_ms
        current_leader = group.leader_id
        old, new = group.replace_static_member(self.instance_id, old_member_id, new_member_id)
        effects = _fence(old)
        rb.reschedule_heartbeat(shard, group, new, now_ms)
        saved = (list(new.protocols), new.rebalance_timeout_ms, new.session_timeout_ms)
        self.group.update_protocols(new, self.protocols)
        new.rebalance_timeout_ms, new.session_timeout_ms = self.rebalance_timeout_ms, self.session_timeout_ms
        new.join_waiter = self.waiter
        if group.in_state(S.STABLE):
            if group.protocol_name == group.select_protocol():
                record = rb.group_metadata_record(group, group.current_assignment())
                on_done = self._static_write_done(old_member_id, new, saved, current_leader)
                return effects + [shard.append([record], on_done)]
            return effects + rb.maybe_prepare_rebalance_or_complete_join(shard, group, now_ms)
        if group.in_state(S.COMPLETING_REBALANCE):
            # The leader may already be assigning to the old id: hand out a new generation.
            return effects + rb.prepare_rebalance(shard, group, now_ms)
        return effects + rb.maybe_complete_join_phase(shard, group, now_ms)

    def _static_write_done(self, old_member_id, new: Member, saved, current_leader):
        group, shard, waiter, version = self.group, self.shard, self.waiter, self.version

        def on_done(error_code: int, now_ms: int) -> list:
            if new.join_waiter is not waiter:
                return []  # already answered (a rebalance started meanwhile)
            new.join_waiter = None
            if error_code:
                if group.members.get(new.member_id) is new:
                    group.update_protocols(new, saved[0])
                    new.rebalance_timeout_ms, new.session_timeout_ms = saved[1], saved[2]
                    _, back = group.replace_static_member(new.group_instance_id, new.member_id, old_member_id)
                    rb.reschedule_heartbeat(shard, group, back, now_ms)
                response = rsp.join_error(version, map_append_error(error_code), "")
                response.generation_id, response.leader = group.generation_id, current_leader or ""
                return [Reply(waiter.token, response)]
            if version >= 9:
                is_leader = group.is_leader(new.member_id)
                members = rsp.join_members(group) if is_leader else []
                return [Reply(waiter.token, rsp.join_ok(version, group, new.member_id, members, is_leader))]
            response = rsp.join_ok(version, group, new.member_id, [])
            response.leader = current_leader or ""
            return [Reply(waiter.token, response)]
        return on_done


def _fence(old: Member) -> list:
    effects = []
    if old.join_waiter is not None:
        effects.append(Reply(old.join_waiter.token,
                             rsp.join_error(old.join_waiter.api_version, FENCED_INSTANCE_ID, old.member_id)))
        old.join_waiter = None
    if old.sync_waiter is not None:
        effects.append(Reply(old.sync_waiter.token, rsp.sync_response(FENCED_INSTANCE_ID)))
        old.sync_waiter = None
    return effects
