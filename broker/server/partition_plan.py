"""CreatePartitions' plan: check a topic's new partition count and the replicas asked for the
new partitions, or place them as Kafka does. Pure.

Kafka's rules, in Kafka 4.1's words (its controller's ``createPartitions``): the count must
grow (INVALID_PARTITIONS); given assignments must cover exactly the new partitions, name
registered brokers, no broker twice, and keep the topic's replication factor
(INVALID_REPLICA_ASSIGNMENT). Without assignments the new partitions continue the topic's
round-robin spread: the first replica of partition 0 fixes the start, the partition numbers
continue from the current count (``assign_replicas(start_partition=...)``).

A key's partition is ``murmur2(key) % partitions`` in every Kafka client: more partitions move
most keys to another partition from then on (records already written stay where they are), so
per-key order holds only from the change on.
"""

from __future__ import annotations

from random import Random
from typing import Mapping, Sequence

from broker.server.replica_assignment import assign_replicas
from broker.wire import ErrorCode

__all__ = ["PartitionPlanError", "plan_new_partitions"]


class PartitionPlanError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def plan_new_partitions(topic: str, current: Mapping[int, Sequence[int]], count: int,
                        assignments: Sequence[Sequence[int]] | None, brokers: Sequence[int],
                        rng: Random) -> dict[int, list[int]]:
    """The new partitions' replicas (partition -> brokers), or PartitionPlanError."""
    existing = len(current)
    if count == existing:
        raise PartitionPlanError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {existing} partition(s).")
    if count < existing:
        raise PartitionPlanError(ErrorCode.INVALID_PARTITIONS,
                                 f"The topic {topic} currently has {existing} partition(s); {count} would not be "
                                 f"an increase.")
    first = list(current[min(current)]) if current else []
    replication_factor = len(first)
    added = count - existing
    if assignments is None:
        if replication_factor > len(brokers):
            raise PartitionPlanError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                     f"Replication factor: {replication_factor} larger than available brokers: "
                                     f"{len(brokers)}.")
        ordered = sorted(brokers)
        start = next((i for i, b in enumerate(ordered) if b >= first[0]), 0) if first else 0
        return assign_replicas(ordered, added, replication_factor, rng, start_index=start, start_partition=existing)
    return _check_assignments(assignments, existing, added, replication_factor, brokers)


def _check_assignments(assignments: Sequence[Sequence[int]], existing: int, added: int, replication_factor: int,
                       brokers: Sequence[int]) -> dict[int, list[int]]:
    if len(assignments) != added:
        raise PartitionPlanError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Attempted to add {added} additional partition(s), but only {len(assignments)} "
                                 f"assignment(s) were specified.")
    unknown = sorted({b for replicas in assignments for b in replicas} - set(brokers))
    if unknown:
        raise PartitionPlanError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"The manual partition assignment includes broker {unknown[0]}, but no such "
                                 f"broker is registered.")
    plan = {}
    for offset, replicas in enumerate(assignments):
        partition = existing + offset
        if len(set(replicas)) != len(replicas):
            raise PartitionPlanError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Partition replica lists may not contain duplicate entries: "
                                     f"{next(b for b in replicas if replicas.count(b) > 1)}")
        if len(replicas) != replication_factor:
            raise PartitionPlanError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"The manual partition assignment includes a partition with {len(replicas)} "
                                     f"replica(s), but this is not consistent with previous partitions, which "
                                     f"have {replication_factor} replica(s).")
        plan[partition] = list(replicas)
    return plan
