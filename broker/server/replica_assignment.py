"""Where a new topic's replicas go: Kafka's rack-unaware ``AdminUtils.assignReplicasToBrokers``. Pure.

The first replica of partition p (its preferred leader) goes to broker ``(p + start) mod n``, so
leaders spread round-robin over the live brokers; the other replicas follow at a shift that
grows by one every n partitions, so followers spread too and no two replicas share a broker.
``start`` and the first shift are random (the caller's ``rng``) so that many small topics do not
all lead on the first broker.
"""

from __future__ import annotations

from random import Random
from typing import Sequence

__all__ = ["assign_replicas"]


def assign_replicas(
    broker_ids: Sequence[int], partitions: int, replication_factor: int, rng: Random,
    start_index: int = -1, start_partition: int = 0,
) -> dict[int, list[int]]:
    """partition -> replica list. Needs ``1 <= replication_factor <= len(broker_ids)``.
    ``start_partition`` numbers partitions added to an existing topic (CreatePartitions), as
    Kafka's ``startPartitionId``: the spread continues where the topic's ended."""
    brokers = sorted(broker_ids)
    n = len(brokers)
    assert partitions >= 1 and 1 <= replication_factor <= n, (partitions, replication_factor, n)
    start = start_index if start_index >= 0 else rng.randrange(n)
    shift = start_index if start_index >= 0 else rng.randrange(n)
    assignment: dict[int, list[int]] = {}
    for partition in range(start_partition, start_partition + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[_replica_index(first, shift, j, n)])
        assignment[partition] = replicas
    return assignment


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n
