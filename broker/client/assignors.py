"""Partition assignors of the classic consumer protocol: pure functions from the group's
subscriptions and the partition counts to each member's partitions.

Only the group leader runs one (Java ``ConsumerCoordinator.onLeaderElected``); the coordinator
never looks inside. The names are the protocol names every Kafka client puts in JoinGroup, so a
pylog member can share a group with Java, librdkafka or kafka-python members:

- ``range`` (Java ``RangeAssignor``): per topic, the members subscribed to it in member order
  get contiguous ranges; the first ``partitions % members`` get one extra.
- ``roundrobin`` (Java ``RoundRobinAssignor``): every subscribed partition, topics by name, dealt
  out in turn to the members, skipping members not subscribed to that topic.
- ``cooperative-sticky`` (Java ``CooperativeStickyAssignor``, KIP-429): members keep what they
  own while that stays balanced (counts within 1 when subscriptions allow), only the surplus
  moves, and a partition that moves is *withheld* from its new owner in this generation: its
  current owner sees it revoked, gives it up and rejoins, and the follow-up rebalance hands it
  out (so no partition is ever consumed by two members at once).

Member order (Java ``MemberInfo.compareTo``): static members (``group.instance.id``) first, by
instance id, then dynamic members by member id, so a static member keeps its place across
restarts. Every result maps each member to a sorted list, empty lists included.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Mapping

__all__ = [
    "Subscription",
    "ASSIGNORS",
    "REBALANCE_PROTOCOLS",
    "assignor_names",
    "range_assign",
    "roundrobin_assign",
    "cooperative_sticky_assign",
]

TopicPartition = tuple[str, int]
Assignment = dict[str, list[TopicPartition]]


@dataclass(frozen=True)
class Subscription:
    """What one member told the group in JoinGroup (``ConsumerProtocolSubscription``)."""

    topics: tuple[str, ...]
    owned_partitions: tuple[TopicPartition, ...] = ()
    generation_id: int = -1  # the generation its owned partitions are from (v2+), -1 unknown
    group_instance_id: str | None = None


def _member_order(subscriptions: Mapping[str, Subscription]) -> list[str]:
    def key(member_id: str):
        instance = subscriptions[member_id].group_instance_id
        return (0, instance, member_id) if instance is not None else (1, member_id, member_id)

    return sorted(subscriptions, key=key)


def _empty(subscriptions: Mapping[str, Subscription]) -> Assignment:
    return {member_id: [] for member_id in subscriptions}


def _sorted(assignment: Assignment) -> Assignment:
    return {member_id: sorted(tps) for member_id, tps in assignment.items()}


def range_assign(partitions_per_topic: Mapping[str, int],
                 subscriptions: Mapping[str, Subscription]) -> Assignment:
    """Java ``RangeAssignor`` (without rack awareness)."""
    out = _empty(subscriptions)
    order = _member_order(subscriptions)
    for topic in sorted(partitions_per_topic):
        members = [m for m in order if topic in subscriptions[m].topics]
        count = partitions_per_topic[topic]
        if not members or count <= 0:
            continue
        per_member, extra = divmod(count, len(members))
        start = 0
        for index, member_id in enumerate(members):
            length = per_member + (1 if index < extra else 0)
            out[member_id].extend((topic, p) for p in range(start, start + length))
            start += length
    return _sorted(out)


def roundrobin_assign(partitions_per_topic: Mapping[str, int],
                      subscriptions: Mapping[str, Subscription]) -> Assignment:
    """Java ``RoundRobinAssignor``: one circular pass over the members in member order."""
    out = _empty(subscriptions)
    order = _member_order(subscriptions)
    if not order:
        return out
    subscribed = {t for s in subscriptions.values() for t in s.topics}
    cursor = 0
    for topic in sorted(t for t in partitions_per_topic if t in subscribed):
        for partition in range(partitions_per_topic[topic]):
            for step in range(len(order)):  # at least one member is subscribed to ``topic``
                member_id = order[(cursor + step) % len(order)]
                if topic in subscriptions[member_id].topics:
                    out[member_id].append((topic, partition))
                    cursor = (cursor + step + 1) % len(order)
                    break
    return _sorted(out)


def cooperative_sticky_assign(partitions_per_topic: Mapping[str, int],
                              subscriptions: Mapping[str, Subscription]) -> Assignment:
    """Sticky and balanced, with moving partitions withheld (KIP-429; see the module doc)."""
    order = _member_order(subscriptions)
    rank = {member_id: i for i, member_id in enumerate(order)}
    eligible = _eligible_members(partitions_per_topic, subscriptions, order)
    owners = _valid_owners(subscriptions, eligible)
    target = _sticky_balanced(eligible, owners, order, rank)
    out = _empty(subscriptions)
    for tp, member_id in target.items():
        owner = owners.get(tp)
        if owner is None or owner == member_id:
            out[member_id].append(tp)
        # else: withheld; the owner sees it revoked and rejoins, the next generation hands it out
    return _sorted(out)


def _eligible_members(partitions_per_topic, subscriptions, order) -> dict[TopicPartition, list[str]]:
    """Every partition of a subscribed topic -> the members subscribed to it, in member order."""
    by_topic: dict[str, list[str]] = defaultdict(list)
    for member_id in order:
        for topic in subscriptions[member_id].topics:
            if topic in partitions_per_topic:
                by_topic[topic].append(member_id)
    return {(topic, p): members for topic, members in sorted(by_topic.items())
            for p in range(partitions_per_topic[topic])}


def _valid_owners(subscriptions, eligible) -> dict[TopicPartition, str]:
    """Owned partitions a member may keep: the partition still exists, the member is still
    subscribed to its topic, and no member with a newer generation claims it (Java
    ``AbstractStickyAssignor``: of two claims the higher generation wins; equal generations
    claiming the same partition mean neither claim can be trusted)."""
    claims: dict[TopicPartition, list[tuple[int, str]]] = defaultdict(list)
    for member_id, subscription in subscriptions.items():
        for tp in dict.fromkeys(subscription.owned_partitions):
            if member_id in eligible.get(tuple(tp), ()):
                claims[tuple(tp)].append((subscription.generation_id, member_id))
    owners = {}
    for tp, tp_claims in claims.items():
        tp_claims.sort(reverse=True)
        if len(tp_claims) == 1 or tp_claims[0][0] > tp_claims[1][0]:
            owners[tp] = tp_claims[0][1]
    return owners


def _sticky_balanced(eligible, owners, order, rank) -> dict[TopicPartition, str]:
    """Keep valid ownership, give free partitions to the least loaded eligible member, then move
    partitions from the most loaded to members at least 2 below them until no such move exists.
    With identical subscriptions this ends with counts within 1, moving only the surplus."""
    target = dict(owners)
    load = {member_id: 0 for member_id in order}
    for member_id in owners.values():
        load[member_id] += 1
    # partitions with fewer candidates first (Java sorts the same way), then by name
    for tp in sorted((tp for tp in eligible if tp not in target), key=lambda tp: (len(eligible[tp]), tp)):
        member_id = min(eligible[tp], key=lambda m: (load[m], rank[m]))
        target[tp] = member_id
        load[member_id] += 1
    held: dict[str, list[TopicPartition]] = defaultdict(list)
    for tp, member_id in sorted(target.items()):
        held[member_id].append(tp)
    moves_max = len(target) * max(len(order), 1)  # each move lowers the sum of squares: bounded
    for _ in range(moves_max):
        if not _move_one(eligible, owners, target, held, load, order, rank):
            break
    return target


def _move_one(eligible, owners, target, held, load, order, rank) -> bool:
    for giver in sorted(order, key=lambda m: (-load[m], rank[m])):
        # partitions the giver did not own before move first: that undoes a greedy placement
        # instead of taking away something owned (a move that costs a revocation)
        # (and the highest partitions first, as Java's constrained assignment keeps the lowest)
        for tp in sorted(sorted(held[giver], reverse=True), key=lambda tp: owners.get(tp) == giver):
            candidates = [m for m in eligible[tp] if load[m] < load[giver] - 1]
            if not candidates:
                continue
            taker = min(candidates, key=lambda m: (load[m], rank[m]))
            held[giver].remove(tp)
            held[taker].append(tp)
            target[tp] = taker
            load[giver] -= 1
            load[taker] += 1
            return True
    return False


AssignorFn = Callable[[Mapping[str, int], Mapping[str, Subscription]], Assignment]

ASSIGNORS: dict[str, AssignorFn] = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "cooperative-sticky": cooperative_sticky_assign,
}

# KIP-429: a group rebalances cooperatively only if every assignor a member offers supports it.
REBALANCE_PROTOCOLS = {"range": "eager", "roundrobin": "eager", "cooperative-sticky": "cooperative"}

_JAVA_CLASS_NAMES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def assignor_names(strategy: str | list[str] | tuple[str, ...]) -> list[str]:
    """``partition.assignment.strategy`` (comma-separated text or a list; protocol names or
    Java class names) -> protocol names in preference order. Unknown names raise."""
    items = strategy.split(",") if isinstance(strategy, str) else list(strategy)
    names = []
    for item in (i.strip() for i in items):
        if not item:
            continue
        name = _JAVA_CLASS_NAMES.get(item, item)
        if name not in ASSIGNORS:
            raise ValueError(f"unknown partition.assignment.strategy {item!r} "
                             f"(known: {', '.join(ASSIGNORS)})")
        if name not in names:
            names.append(name)
    if not names:
        raise ValueError("partition.assignment.strategy is empty")
    return names
