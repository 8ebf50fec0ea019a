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

from broker.client.assignors import ASSIGNORS, REBALANCE_PROTOCOLS, Subscription, assignor_names
from broker.client.errors import KafkaError
from broker.client.group_commit import GroupOffsets
from broker.client.group_membership import GroupMembership, GroupSettings, JoinedMember
from broker.client.group_state import Generation, MemberState
from broker.wire.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    encoded_version,
)

__all__ = ["ConsumerGroup", "ConsumerGroupProtocol", "RebalanceListener"]

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
        """Auto-commit (unless lost), then the listener, and only then the assignment shrinks
        (Java ``onJoinPrepare``): ``on_revoke`` may still commit or read positions of ``tps``."""
        tps = sorted(tps)
        if not tps:
            return
        if not lost:
            self._owner._group_commit_owned(tps)
        (self.listener.lost if lost else self.listener.revoked)(tps)
        keep = [tp for tp in self.owned if tp not in set(tps)]
        self.owned = keep
        self._owner._group_assign(keep)

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


class ConsumerGroup:
    """A ``Consumer``'s group parts wired together: membership, this protocol, commits,
    auto-commit and the periodic metadata check. ``consumer.py`` calls only this."""

    def __init__(self, consumer, settings: GroupSettings, strategy, enable_auto_commit: bool,
                 auto_commit_interval_ms: int) -> None:
        if auto_commit_interval_ms <= 0:
            raise ValueError(f"auto.commit.interval.ms must be positive, got {auto_commit_interval_ms}")
        self._consumer = consumer
        self._clock = consumer._clock
        self.protocol = ConsumerGroupProtocol(consumer, consumer._cluster, assignor_names(strategy),
                                              settings.group_instance_id)
        self.membership = GroupMembership(consumer._cluster, self.protocol, settings)
        self.protocol.membership = self.membership
        self.offsets = GroupOffsets(self.membership, subscribed=lambda: consumer._subscribed)
        self.auto_commit = enable_auto_commit
        self._auto_commit_interval_ms = auto_commit_interval_ms
        self._next_auto_commit_ms = self._clock.monotonic_ms() + auto_commit_interval_ms
        self._next_metadata_check_ms = 0.0

    def subscribe(self, topics: list[str], pattern, listener: RebalanceListener) -> None:
        if self.protocol.set_subscription(topics, pattern, listener):
            self.membership.request_rejoin("the subscription changed")
        self._next_metadata_check_ms = self._clock.monotonic_ms() + self._consumer._config.metadata_max_age_ms

    def polled(self) -> None:
        """Once per poll call: poll timer, async commit callbacks, auto-commit, metadata check."""
        self.membership.polled()
        self.offsets.drain(block=False)
        now = self._clock.monotonic_ms()
        if self.auto_commit and now >= self._next_auto_commit_ms:
            self._next_auto_commit_ms = now + self._auto_commit_interval_ms
            if self.membership.state == MemberState.STABLE or not self._consumer._subscribed:
                offsets = self._consumer._commit_offsets(None)
                if offsets:
                    self.offsets.commit_async(offsets, None)
        if self._consumer._subscribed and now >= self._next_metadata_check_ms:
            self._next_metadata_check_ms = now + self._consumer._config.metadata_max_age_ms
            reason = self.protocol.metadata_changed()
            if reason:
                self.membership.request_rejoin(reason)

    def ensure_active(self, deadline_ms: float) -> bool:
        """Rejoin when needed; a STABLE member whose coordinator was lost (the heartbeat thread
        saw NOT_COORDINATOR or its session run out) looks it up again so heartbeats resume."""
        membership = self.membership
        if not membership.rejoin_needed():
            if membership.coordinator_unknown():
                try:
                    membership.coordinator_connection(deadline_ms)
                except KafkaError as exc:
                    if not exc.retriable:
                        raise
            return True
        self.offsets.drain(block=True)  # JoinGroup goes on the connection async commits use
        return membership.ensure_active_group(deadline_ms)

    def commit_quietly(self, offsets: dict) -> None:
        """Auto-commit before a revoke or close: a failure is logged in the stats, not raised
        (Java logs it too); the partitions are being given up either way."""
        if not offsets:
            return
        try:
            self.offsets.commit(offsets, self._consumer._default_api_timeout_ms)
        except KafkaError as exc:
            self.offsets.stats["auto_commit_failures"] = self.offsets.stats.get("auto_commit_failures", 0) + 1
            self.offsets.stats["last_auto_commit_error"] = exc.name

    def leave(self) -> None:
        self.offsets.drain(block=True)
        self.membership.close()
        settings = self.membership.settings
        self.membership = GroupMembership(self._consumer._cluster, self.protocol, settings)
        self.protocol.membership = self.membership
        self.offsets = GroupOffsets(self.membership, subscribed=lambda: self._consumer._subscribed)

    def close(self, subscribed: bool) -> None:
        try:
            self.offsets.drain(block=True)
        except KafkaError:
            pass  # async commit callbacks already saw the error
        if subscribed:
            self.membership.close()  # on_leave_prepare commits (auto-commit) before revoking
        else:
            if self.auto_commit:
                self.commit_quietly(self._consumer._commit_offsets(None))
            self.membership.close()
