"""What a consumer brings to a classic group (Java ``ConsumerCoordinator``'s protocol side): its
subscription in JoinGroup, the leader's assignment with an assignor (``assignors``), and what
each rebalance does to the partitions it owns, with the application's listener.

Eager vs cooperative (KIP-429). The rebalance protocol is cooperative only when every assignor
in ``partition.assignment.strategy`` supports it (``cooperative-sticky`` alone); otherwise eager.

- Eager: before every (re)join the member commits (auto-commit) and revokes *everything*
  (``on_revoke``), joins owning nothing, and after SyncGroup ``on_assign`` gets the whole new set.
- Cooperative: the member keeps consuming what it owns through the rebalance and sends its owned
  partitions in the subscription; after SyncGroup it revokes only what it lost
  (commit, ``on_revoke``), gets ``on_assign`` with only what is new, and when it revoked anything
  it rejoins at once, so the partitions withheld by the leader are handed out.

A generation that ended under the member (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, a poll timeout)
means its partitions may already be someone else's: they are *lost* (``on_lost``; without one,
``on_revoke``) and nothing is committed for them.

Subscriptions are topic names or a regular expression (Java ``subscribe(Pattern)``) matched
against the cluster's topics on every metadata refresh; the set changing (or, for the leader, a
subscribed topic's partition count) starts a rebalance. Internal topics never match a pattern.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable

from broker.client.assignors import ASSIGNORS, REBALANCE_PROTOCOLS, Subscription
from broker.client.errors import KafkaError
from broker.client.group_membership import JoinedMember
from broker.client.group_state import Generation
from broker.wire.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    encoded_version,
)

__all__ = ["ConsumerGroupProtocol", "RebalanceListener"]

TopicPartition = tuple[str, int]
Listener = Callable[[list[TopicPartition]], None]
_SUBSCRIPTION_VERSION = 3


class RebalanceListener:
    """The application's callbacks (Java ``ConsumerRebalanceListener``), each given a sorted
    list of partitions. They run on the thread that called ``poll`` (or ``close``)."""

    def __init__(self, on_assign: Listener | None = None, on_revoke: Listener | None = None,
                 on_lost: Listener | None = None) -> None:
        self.on_assign, self.on_revoke, self.on_lost = on_assign, on_revoke, on_lost

    def assigned(self, tps: list[TopicPartition]) -> None:
        if self.on_assign is not None:
            self.on_assign(tps)

    def revoked(self, tps: list[TopicPartition]) -> None:
        if self.on_revoke is not None and tps:
            self.on_revoke(tps)

    def lost(self, tps: list[TopicPartition]) -> None:
        if not tps:
            return
        (self.on_lost or self.on_revoke or (lambda _: None))(tps)


class ConsumerGroupProtocol:
    """``group_membership.GroupProtocol`` for a consumer. ``owner`` is the ``Consumer``: it
    applies assignments (``_group_assign``) and commits before revoking (``_group_commit_owned``)."""

    protocol_type = CONSUMER_PROTOCOL_TYPE

    def __init__(self, owner, cluster, assignor_names: list[str], group_instance_id: str | None) -> None:
        self._owner = owner
        self._cluster = cluster
        self._assignors = assignor_names
        self.cooperative = all(REBALANCE_PROTOCOLS[n] == "cooperative" for n in assignor_names)
        self._group_instance_id = group_instance_id
        self.listener = RebalanceListener()
        self.topics: list[str] = []  # what we subscribe to now (pattern: the matching topics)
        self.pattern: re.Pattern | None = None
        self.owned: list[TopicPartition] = []
        self._owned_generation = -1
        self._leader_snapshot: dict[str, int] | None = None  # partition counts we assigned from
        self.membership = None  # set by the Consumer once the GroupMembership exists

    # ------------------------------------------------------------------ subscription

    def set_subscription(self, topics: Iterable[str], pattern: re.Pattern | None,
                         listener: RebalanceListener) -> bool:
        """Returns True when the topic set changed (a rebalance is due)."""
        self.pattern, self.listener = pattern, listener
        return self._set_topics(self.match_pattern() if pattern is not None else topics)

    def _set_topics(self, topics: Iterable[str]) -> bool:
        new = sorted(set(topics))
        changed = new != self.topics
        self.topics = new
        return changed

    def match_pattern(self) -> list[str]:
        snapshot = self._cluster.refresh()
        return [name for name, topic in snapshot.topics.items()
                if not getattr(topic, "is_internal", False) and self.pattern.fullmatch(name)]

    def metadata_changed(self) -> str | None:
        """Called every metadata.max.age.ms from poll: a reason to rebalance, or None."""
        if self.pattern is not None and self._set_topics(self.match_pattern()):
            return "the subscription pattern matches a different set of topics"
        if self._leader_snapshot is not None and self._partition_counts(self._leader_snapshot) != self._leader_snapshot:
            return "the partition count of a subscribed topic changed"
        return None

    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        self._cluster.refresh(list(topics))
        counts = {}
        for topic in topics:
            try:
                counts[topic] = len(self._cluster.partitions_for(topic))
            except KafkaError:  # a topic that does not exist (yet) has no partitions to assign
                continue
        return counts

    # ------------------------------------------------------------------ GroupProtocol

    def metadata(self) -> list[tuple[str, bytes]]:
        owned = self.owned if self.cooperative else []
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(owned):
            by_topic.setdefault(topic, []).append(partition)
        data = encode_subscription({
            "topics": list(self.topics), "user_data": None,
            "owned_partitions": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            "generation_id": self._owned_generation, "rack_id": None,
        }, _SUBSCRIPTION_VERSION)
        return [(name, data) for name in self._assignors]

    def on_join_prepare(self, generation: Generation) -> None:
        if generation.generation_id < 0:
            self._drop(self.owned, lost=True)
        elif not self.cooperative:
            self._drop(self.owned, lost=False)
        else:
            self._drop([tp for tp in self.owned if tp[0] not in self.topics], lost=False)

    def _drop(self, tps: list[TopicPartition], lost: bool) -> None:
        tps = sorted(tps)
        if not tps:
            return
        if not lost:
            self._owner._group_commit_owned(tps)
        keep = [tp for tp in self.owned if tp not in set(tps)]
        self.owned = keep
        self._owner._group_assign(keep)
        (self.listener.lost if lost else self.listener.revoked)(tps)

    def perform_assignment(self, protocol_name: str, members: list[JoinedMember]) -> dict[str, bytes]:
        assign = ASSIGNORS[protocol_name]
        subscriptions, versions = {}, []
        for member in members:
            decoded = decode_subscription(member.metadata)
            versions.append(encoded_version(member.metadata))
            owned = tuple((tp.topic, p) for tp in (decoded.owned_partitions or ()) for p in tp.partitions)
            subscriptions[member.member_id] = Subscription(tuple(decoded.topics), owned, decoded.generation_id,
                                                           member.group_instance_id)
        all_topics = sorted({t for s in subscriptions.values() for t in s.topics})
        counts = self._partition_counts(all_topics)
        self._leader_snapshot = counts
        result = assign(counts, subscriptions)
        version = min([3, *versions])
        out = {}
        for member_id, tps in result.items():
            by_topic: dict[str, list[int]] = {}
            for topic, partition in tps:
                by_topic.setdefault(topic, []).append(partition)
            out[member_id] = encode_assignment({"assigned_partitions": [
                {"topic": t, "partitions": ps} for t, ps in by_topic.items()], "user_data": None},
                max(version, 0))
        return out

    def on_join_complete(self, generation: Generation, assignment: bytes) -> None:
        decoded = decode_assignment(assignment) if assignment else None
        assigned = sorted({(tp.topic, p) for tp in (decoded.assigned_partitions if decoded else ()) for p in tp.partitions})
        owned = set(self.owned)
        revoked = sorted(owned - set(assigned))
        added = [tp for tp in assigned if tp not in owned]
        if revoked:  # cooperative only: an eager member owns nothing here
            self._drop(revoked, lost=False)
            self.membership.request_rejoin("partitions were revoked: rejoin so they move (KIP-429)")
        self.owned = assigned
        self._owned_generation = generation.generation_id
        self._owner._group_assign(assigned)
        self.listener.assigned(added)

    def on_leave_prepare(self, generation: Generation) -> None:
        self._drop(self.owned, lost=generation.generation_id < 0)
        self._owned_generation = -1
