"""Leader election: pure functions over one partition's snapshot (Kafka ``Election.scala`` and
``PartitionLeaderElectionAlgorithms``). Each returns the new leader and ISR, or None when no
replica may lead; the caller bumps the leader epoch and writes the state conditionally.

``assignment`` is the replica list in preference order (its head is the preferred leader);
``live`` is the set of brokers registered in ZooKeeper (controlled-shutdown brokers included,
as in Kafka's ``liveOrShuttingDownBrokerIds``). The order of the assignment decides ties, so
the same snapshot always elects the same leader.
"""

from __future__ import annotations

from typing import AbstractSet, NamedTuple, Sequence

__all__ = ["Election", "offline_partition_leader", "preferred_replica_leader",
           "controlled_shutdown_leader"]


class Election(NamedTuple):
    leader: int
    isr: tuple[int, ...]
    unclean: bool = False  # the leader was not in the ISR: committed data may be lost


def offline_partition_leader(assignment: Sequence[int], isr: Sequence[int], live: AbstractSet[int],
                             unclean_enabled: bool) -> Election | None:
    """The leader died or the partition is new-but-offline: the first live ISR member in
    assignment order; its ISR is the live part of the old one. Without one, and only if
    ``unclean.leader.election.enable``, the first live replica, alone in its ISR."""
    for replica in assignment:
        if replica in live and replica in isr:
            return Election(replica, tuple(r for r in isr if r in live))
    if unclean_enabled:
        for replica in assignment:
            if replica in live:
                return Election(replica, (replica,), unclean=True)
    return None


def preferred_replica_leader(assignment: Sequence[int], isr: Sequence[int],
                             live: AbstractSet[int]) -> Election | None:
    """Move leadership to the preferred replica (the assignment's head) if it is live and in
    sync; the ISR is unchanged."""
    if not assignment:
        return None
    preferred = assignment[0]
    if preferred in live and preferred in isr:
        return Election(preferred, tuple(isr))
    return None


def controlled_shutdown_leader(assignment: Sequence[int], isr: Sequence[int], live: AbstractSet[int],
                               shutting_down: AbstractSet[int]) -> Election | None:
    """Move leadership off brokers that are shutting down: the first live ISR member that is
    not shutting down; the shutting-down brokers leave the ISR."""
    for replica in assignment:
        if replica in live and replica in isr and replica not in shutting_down:
            return Election(replica, tuple(r for r in isr if r not in shutting_down))
    return None
