"""``pylog reassign --throttle``: kafka-reassign-partitions' replication throttles (KIP-73).

``--execute --throttle RATE`` (bytes/s), before starting the reassignments, sets per topic
``leader.replication.throttled.replicas`` to every *source* replica of the moving partitions
(``partition:broker``: the replicas they have now, or the original ones of a reassignment
already in progress) and ``follower.replication.throttled.replicas`` to every *destination*
that is not a source; then on every broker involved (sources and destinations)
``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate`` = RATE, and
prints ``The inter-broker throttle limit was set to RATE B/s`` after Kafka's warning to run
``--verify``. ``--verify``, once nothing it asks about is in progress, deletes both rates on every
broker of the cluster and of the JSON, and both replica lists on the JSON's topics (Kafka clears
them all: it cannot know which brokers earlier reassignments involved). The brokers enforce
them (``broker.server.replication_quota``).

The move-map arithmetic is pure (``move_map``, ``leader_throttles``, ``follower_throttles``);
the rest talks to the cluster through IncrementalAlterConfigs.
"""

from __future__ import annotations

from typing import Mapping, Sequence, TextIO

from broker.client import AdminClient
from broker.client.config_admin import OP_DELETE, OP_SET, RESOURCE_BROKER, RESOURCE_TOPIC, incremental_alter_configs

__all__ = ["VERIFY_WARNING", "move_map", "leader_throttles", "follower_throttles", "set_throttles",
           "clear_throttles"]

TopicPartition = tuple[str, int]
Moves = dict[str, dict[int, tuple[frozenset[int], frozenset[int]]]]  # topic -> partition -> (sources, dests)

# Kafka 4.1's ReassignPartitionsCommand, word for word.
VERIFY_WARNING = ("Warning: You must run --verify periodically, until the reassignment completes, "
                  "to ensure the throttle is removed.")
BROKER_THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
TOPIC_THROTTLES = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")


def move_map(ongoing: Mapping[TopicPartition, tuple[Sequence[int], Sequence[int], Sequence[int]]],
             proposed: Mapping[TopicPartition, Sequence[int]],
             current: Mapping[TopicPartition, Sequence[int]]) -> Moves:
    """Kafka's ``calculateProposedMoveMap``: the reassignments in progress (sources: their
    replicas without the ones being added), then each proposed one (sources: those of a move in
    progress, else its replicas now; destinations: the proposed replicas that are not sources)."""
    moves: Moves = {}
    for (topic, partition), (replicas, adding, _removing) in ongoing.items():
        sources = frozenset(replicas) - frozenset(adding)
        moves.setdefault(topic, {})[partition] = (sources, frozenset(adding))
    for (topic, partition), replicas in proposed.items():
        by_partition = moves.setdefault(topic, {})
        if partition in by_partition:
            sources = by_partition[partition][0]
        elif (topic, partition) in current:
            sources = frozenset(current[(topic, partition)])
        else:
            raise ValueError(f"Trying to reassign a topic partition {topic}-{partition} with 0 replicas")
        by_partition[partition] = (sources, frozenset(replicas) - sources)
    return moves


def _entries(by_partition, pick) -> str:
    return ",".join(sorted({f"{p}:{b}" for p, move in by_partition.items() for b in pick(move)}))


def leader_throttles(moves: Moves) -> dict[str, str]:
    return {topic: _entries(parts, lambda move: move[0]) for topic, parts in moves.items()}


def follower_throttles(moves: Moves) -> dict[str, str]:
    return {topic: _entries(parts, lambda move: move[1] - move[0]) for topic, parts in moves.items()}


def set_throttles(admin: AdminClient, moves: Moves, rate_bytes_per_s: int, out: TextIO) -> None:
    leaders, followers = leader_throttles(moves), follower_throttles(moves)
    for topic in sorted(moves):
        incremental_alter_configs(admin, RESOURCE_TOPIC, topic, [
            (TOPIC_THROTTLES[0], OP_SET, leaders[topic]), (TOPIC_THROTTLES[1], OP_SET, followers[topic])])
    brokers = sorted({b for parts in moves.values() for sources, dests in parts.values() for b in sources | dests})
    for broker in brokers:
        incremental_alter_configs(admin, RESOURCE_BROKER, str(broker),
                                  [(key, OP_SET, str(rate_bytes_per_s)) for key in BROKER_THROTTLES])
    print(f"The inter-broker throttle limit was set to {rate_bytes_per_s} B/s", file=out)


def clear_throttles(admin: AdminClient, wanted: Mapping[TopicPartition, Sequence[int]], out: TextIO) -> None:
    """Kafka's ``clearAllThrottles``: every broker of the cluster and of the JSON, the JSON's topics."""
    admin.cluster.refresh_brokers()
    brokers = sorted(set(admin.cluster.brokers) | {b for replicas in wanted.values() for b in replicas})
    print(f"Clearing broker-level throttles on broker{'' if len(brokers) == 1 else 's'} "
          f"{','.join(map(str, brokers))}", file=out)
    for broker in brokers:
        incremental_alter_configs(admin, RESOURCE_BROKER, str(broker), [(k, OP_DELETE, None) for k in BROKER_THROTTLES])
    topics = sorted({t for t, _ in wanted})
    print(f"Clearing topic-level throttles on topic{'' if len(topics) == 1 else 's'} {','.join(topics)}", file=out)
    for topic in topics:
        incremental_alter_configs(admin, RESOURCE_TOPIC, topic, [(k, OP_DELETE, None) for k in TOPIC_THROTTLES])
