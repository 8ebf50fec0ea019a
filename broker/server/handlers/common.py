"""Small helpers the handlers share: finding a partition's local leader, and error codes."""

from __future__ import annotations

from broker.replica.partition import Partition
from broker.server.context import BrokerContext
from broker.wire import ErrorCode

__all__ = ["local_leader", "local_replica"]


def local_replica(ctx: BrokerContext, topic: str, index: int,
                  leader_only: bool = True) -> tuple[Partition | None, int]:
    """The partition if this broker leads it (or, with ``leader_only=False``, holds it); else
    the error for the client: UNKNOWN_TOPIC_OR_PARTITION (3) when the cluster has no such
    partition, NOT_LEADER_OR_FOLLOWER (6) when it lives elsewhere (the client refreshes its
    metadata and goes to the leader)."""
    partition = ctx.replicas.get(topic, index)
    if partition is not None and (partition.is_leader or not leader_only):
        return partition, ErrorCode.NONE
    known = ctx.metadata.snapshot.topics.get(topic)
    if known is None or index not in known.partitions:
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return None, ErrorCode.NOT_LEADER_OR_FOLLOWER


def local_leader(ctx: BrokerContext, topic: str, index: int) -> tuple[Partition | None, int]:
    return local_replica(ctx, topic, index, leader_only=True)
