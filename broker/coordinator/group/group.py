"""One classic group's state: members, generation, protocol, leader, and the legal transitions.

This module holds data and the pure rules over it (Kafka's ``ClassicGroup`` and
``ClassicGroupMember``); what to *answer* lives in ``membership`` and ``offsets``. Timers are
plain deadlines in milliseconds (``Member.heartbeat_deadline_ms``, ``ClassicGroup.join_deadline_ms``,
``ClassicGroup.sync_deadline_ms``); the shard's tick looks at them.

Parked requests are ``Waiter(token, api_version)``: a JoinGroup or SyncGroup that the coordinator
answers later. Every waiter is answered exactly once: the code that clears a waiter is the code
that emits its reply.
"""

from __future__ import annotations

import enum
import struct
from collections import Counter
from dataclasses import dataclass, field

from broker.coordinator.group.records import GroupMetadataValue, MemberMetadata

__all__ = ["GroupState", "Waiter", "Member", "ClassicGroup", "CONSUMER_PROTOCOL_TYPE",
           "decode_subscription_topics"]

CONSUMER_PROTOCOL_TYPE = "consumer"


class GroupState(enum.Enum):
    """The states as Kafka spells them in DescribeGroups/ListGroups."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


S = GroupState
# target state -> the states it may be entered from (Kafka's ClassicGroupState).
VALID_PREVIOUS_STATES = {
    S.EMPTY: frozenset({S.PREPARING_REBALANCE}),
    S.PREPARING_REBALANCE: frozenset({S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}),
    S.COMPLETING_REBALANCE: frozenset({S.PREPARING_REBALANCE}),
    S.STABLE: frozenset({S.COMPLETING_REBALANCE}),
    S.DEAD: frozenset({S.STABLE, S.PREPARING_REBALANCE, S.COMPLETING_REBALANCE, S.EMPTY, S.DEAD}),
}


@dataclass
class Waiter:
    token: object
    api_version: int


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list  # [(name, metadata bytes)] in the member's preference order
    assignment: bytes = b""
    join_waiter: Waiter | None = None
    sync_waiter: Waiter | None = None
    is_new: bool = False
    heartbeat_deadline_ms: int | None = None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_waiter is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_waiter is not None

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol_name: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol_name:
                return bytes(metadata)
        return b""

    def matches(self, protocols: list) -> bool:
        """Same protocols with the same metadata, in the same order (Kafka's ``matches``)."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]

    def vote(self, candidates: set[str]) -> str:
        for name in self.protocol_names():
            if name in candidates:
                return name
        raise AssertionError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def has_satisfied_heartbeat(self) -> bool:
        """A parked member's session is not counted, except a new member's (Kafka's rule: new
        members can time out while their first JoinGroup is parked)."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = S.EMPTY
        self.previous_state: GroupState | None = None
        self.state_timestamp_ms: int | None = now_ms
        self.generation_id = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}       # insertion order: Kafka's LinkedHashMap
        self.static_members: dict[str, str] = {}   # group instance id -> member id
        self.pending_members: dict[str, int] = {}  # member id -> deadline ms (MEMBER_ID_REQUIRED)
        self.pending_sync: set[str] = set()
        self.supported_protocols: Counter = Counter()
        self.subscribed_topics: frozenset[str] | None = None  # None: unknown
        # Timers. join: rebalance timeout or initial delay; sync: pending-sync expiry.
        self.join_deadline_ms: int | None = None
        self.initial_delay: tuple[int, int] | None = None  # (delay_ms, remaining_ms) when initial
        self.new_member_added = False
        self.sync_deadline_ms: int | None = None

    # -- state --------------------------------------------------------------------------------
    def in_state(self, *states: GroupState) -> bool:
        return self.state in states

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        assert self.state in VALID_PREVIOUS_STATES[target], (
            f"group {self.group_id}: illegal transition {self.state.value} -> {target.value}")
        self.previous_state = self.state
        self.state = target
        self.state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[S.PREPARING_REBALANCE]

    # -- members ------------------------------------------------------------------------------
    def add(self, member: Member) -> None:
        if member.group_instance_id is not None:
            assert member.group_instance_id not in self.static_members
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        assert self.protocol_type == member.protocol_type
        assert self.supports_protocols(member.protocol_type, member.protocol_names())
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self.supported_protocols.update(member.protocol_names())
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self.supported_protocols.subtract(member.protocol_names())
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_members.pop(member_id, None)
        self.pending_sync.discard(member_id)
        return member

    def update_protocols(self, member: Member, protocols: list) -> None:
        self.supported_protocols.subtract(member.protocol_names())
        member.protocols = list(protocols)
        self.supported_protocols.update(member.protocol_names())

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> tuple[Member, Member]:
        """(old, new): the new member takes the old one's place, assignment and leadership. The
        caller fences the old member's parked requests."""
        old = self.members.pop(old_id)
        new = Member(new_id, instance_id, old.client_id, old.client_host, old.rebalance_timeout_ms,
                     old.session_timeout_ms, old.protocol_type, list(old.protocols), old.assignment)
        self.members[new_id] = new
        if self.leader_id == old_id:
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        self.pending_sync.discard(old_id)
        return old, new

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        return self.num_awaiting_join() == len(self.members) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def validate_member(self, member_id: str, instance_id: str | None) -> int:
        """0, or FENCED_INSTANCE_ID (82) / UNKNOWN_MEMBER_ID (25) (Kafka's ``validateMember``)."""
        if instance_id is not None:
            existing = self.static_members.get(instance_id)
            if existing is None:
                return 25
            if existing != member_id:
                return 82
        return 0 if member_id in self.members else 25

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # -- protocols ----------------------------------------------------------------------------
    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if self.state is S.EMPTY:
            return bool(protocol_type) and bool(names)
        return self.protocol_type == protocol_type and any(
            self.supported_protocols[name] == len(self.members) for name in names)

    def select_protocol(self) -> str:
        """Each member votes for its first protocol that every member supports; most votes wins
        (ties: the candidate voted for first, a deterministic stand-in for Kafka's HashMap order)."""
        assert self.members, "cannot select a protocol for an empty group"
        candidates = {n for n, c in self.supported_protocols.items() if c == len(self.members)}
        votes = Counter(member.vote(candidates) for member in self.members.values())
        return max(votes, key=lambda name: votes[name])

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(S.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(S.EMPTY, now_ms)
        self.pending_sync.clear()

    def compute_subscribed_topics(self) -> frozenset[str] | None:
        """The consumer members' topics, or None when unknown (not the consumer protocol, no
        protocol chosen, or metadata that does not parse) — Kafka's ``computeSubscribedTopics``."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return frozenset()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            decoded = decode_subscription_topics(member.metadata_for(self.protocol_name))
            if decoded is None:
                return None
            topics.update(decoded)
        return frozenset(topics)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        if self.subscribed_topics is None:
            return self.protocol_type == CONSUMER_PROTOCOL_TYPE
        return topic in self.subscribed_topics

    # -- the group metadata record ------------------------------------------------------------
    def metadata_value(self, assignment: dict[str, bytes]) -> GroupMetadataValue:
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp_ms if self.state_timestamp_ms is not None else -1,
            members=[MemberMetadata(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms, session_timeout=m.session_timeout_ms,
                subscription=m.metadata_for(self.protocol_name),
                assignment=assignment.get(m.member_id, b""),
            ) for m in self.members.values()],
        )

    def current_assignment(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}


_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def decode_subscription_topics(data: bytes) -> list[str] | None:
    """The topics of a ``ConsumerProtocolSubscription`` (int16 version, then int16-length
    strings in an int32-count array; every version starts the same way), or None when the bytes
    do not parse. Bounded: every length is checked against the bytes left."""
    view = memoryview(data)
    try:
        pos = 2
        (count,) = _INT32.unpack_from(view, pos)
        pos += 4
        if count < 0 or count > len(view):
            return None
        topics = []
        for _ in range(count):
            (length,) = _INT16.unpack_from(view, pos)
            pos += 2
            if length < 0 or pos + length > len(view):
                return None
            topics.append(bytes(view[pos:pos + length]).decode("utf-8"))
            pos += length
        return topics
    except (struct.error, UnicodeDecodeError):
        return None
