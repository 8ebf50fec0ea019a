"""``ControllerContext``: what the active controller knows, rebuilt from ZooKeeper at election.

It mirrors ZooKeeper and changes only after a ZooKeeper write succeeded or a read returned
(Kafka's ``ControllerContext``): a controller that crashes mid-event loses nothing a successor
cannot read back. Sets of topic-partitions are always iterated sorted, so the same events give
the same writes and requests in every process (``broker.sim`` replays seeds across runs with
different string hash seeds).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.cluster.layout import BrokerRegistration
from broker.controller.requests import PartitionLeadership, TopicPartition
from broker.controller.states import (
    PartitionStateName,
    ReplicaStateName,
    check_transition,
)

__all__ = ["ControllerContext"]


@dataclass
class ControllerContext:
    epoch: int
    epoch_zk_version: int
    live_brokers: dict[int, tuple[BrokerRegistration, int]] = field(default_factory=dict)  # id -> (reg, epoch)
    shutting_down: set[int] = field(default_factory=set)
    assignments: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    leaderships: dict[TopicPartition, PartitionLeadership] = field(default_factory=dict)
    partition_states: dict[TopicPartition, PartitionStateName] = field(default_factory=dict)
    replica_states: dict[tuple[TopicPartition, int], ReplicaStateName] = field(default_factory=dict)

    # ------------------------------------------------------------------------------ queries

    def live_ids(self) -> set[int]:
        return set(self.live_brokers)

    def all_partitions(self) -> list[TopicPartition]:
        return sorted((topic, p) for topic, parts in self.assignments.items() for p in parts)

    def replicas(self, tp: TopicPartition) -> tuple[int, ...]:
        return self.assignments.get(tp[0], {}).get(tp[1], ())

    def partitions_on(self, broker: int) -> list[TopicPartition]:
        return [tp for tp in self.all_partitions() if broker in self.replicas(tp)]

    def partitions_led_by(self, broker: int) -> list[TopicPartition]:
        return [tp for tp, leadership in sorted(self.leaderships.items())
                if leadership.state.leader == broker]

    def partition_state(self, tp: TopicPartition) -> PartitionStateName:
        return self.partition_states.get(tp, PartitionStateName.NON_EXISTENT)

    def replica_state(self, tp: TopicPartition, broker: int) -> ReplicaStateName:
        return self.replica_states.get((tp, broker), ReplicaStateName.NON_EXISTENT)

    def unclean_election_enabled(self, topic: str, default: bool) -> bool:
        raw = self.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        return default if raw is None else raw.strip().lower() == "true"

    # ---------------------------------------------------------------------------- changes

    def move_partition(self, tp: TopicPartition, target: PartitionStateName) -> None:
        check_transition(self.partition_state(tp), target, f"partition {tp[0]}-{tp[1]}")
        if target == PartitionStateName.NON_EXISTENT:
            self.partition_states.pop(tp, None)
        else:
            self.partition_states[tp] = target

    def move_replica(self, tp: TopicPartition, broker: int, target: ReplicaStateName) -> None:
        check_transition(self.replica_state(tp, broker), target, f"replica {broker} of {tp[0]}-{tp[1]}")
        if target == ReplicaStateName.NON_EXISTENT:
            self.replica_states.pop((tp, broker), None)
        else:
            self.replica_states[(tp, broker)] = target

    def remove_topic(self, topic: str) -> list[TopicPartition]:
        """Forget a topic; returns its partitions."""
        parts = sorted((topic, p) for p in self.assignments.pop(topic, {}))
        self.topic_configs.pop(topic, None)
        for tp in parts:
            self.leaderships.pop(tp, None)
            self.partition_states.pop(tp, None)
        for key in [key for key in self.replica_states if key[0][0] == topic]:
            del self.replica_states[key]
        return parts
