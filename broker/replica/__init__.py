"""Partition state on a broker: the partitions it holds (``manager``), each one's log, role and
high watermark (``partition``; its leader append path in ``partition_append``),
idempotent-producer state and its snapshots (``producer_state``, ``producer_snapshot``,
``producer_recovery``), leader epochs (``leader_epoch``) and the purgatory where long polls and
acks=all produces wait."""

from broker.replica.leader_epoch import LeaderEpochCache
from broker.replica.manager import ReplicaManager, ReplicaSettings
from broker.replica.partition import AppendResult, Partition, ReadResult
from broker.replica.producer_state import ProducerStateManager
from broker.replica.purgatory import Purgatory

__all__ = ["AppendResult", "LeaderEpochCache", "Partition", "ProducerStateManager", "Purgatory",
           "ReadResult", "ReplicaManager", "ReplicaSettings"]
