"""The partition and replica state machines of the ZooKeeper-mode controller, as tables.

Kafka's ``PartitionStateMachine`` and ``ReplicaStateMachine`` keep one state per partition and
per (partition, replica); every change goes through ``check_transition``, which refuses a move
not listed in the table. A refused move is a controller bug, so it raises
``IllegalStateTransition`` (an ``AssertionError``): it must stop the process loudly, never be
answered to a peer.

Partition states: NonExistent -> New (topic created) -> Online (leader elected) <-> Offline
(leader lost) -> NonExistent (topic deleted). Replica states: New -> Online <-> Offline, and
through the deletion states to NonExistent when a topic is deleted.
"""

from __future__ import annotations

from enum import Enum
from types import MappingProxyType

__all__ = ["PartitionStateName", "ReplicaStateName", "PARTITION_TRANSITIONS", "REPLICA_TRANSITIONS",
           "IllegalStateTransition", "check_transition"]


class PartitionStateName(Enum):
    NON_EXISTENT = "NonExistentPartition"
    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"


class ReplicaStateName(Enum):
    NON_EXISTENT = "NonExistentReplica"
    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"


_P = PartitionStateName
_R = ReplicaStateName

# target state -> the states it may be entered from (Kafka's ``validPreviousStates``)
PARTITION_TRANSITIONS = MappingProxyType({
    _P.NEW: frozenset({_P.NON_EXISTENT}),
    _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
    _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
})

REPLICA_TRANSITIONS = MappingProxyType({
    _R.NEW: frozenset({_R.NON_EXISTENT}),
    _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
    _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
    _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
    _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
    _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
})


class IllegalStateTransition(AssertionError):
    """A state change the table does not allow: a bug in the controller."""


def check_transition(current: PartitionStateName | ReplicaStateName,
                     target: PartitionStateName | ReplicaStateName, what: str) -> None:
    table = PARTITION_TRANSITIONS if isinstance(target, PartitionStateName) else REPLICA_TRANSITIONS
    if current not in table[target]:
        raise IllegalStateTransition(f"{what}: illegal transition {current.value} -> {target.value} "
                                     f"(allowed from {sorted(s.value for s in table[target])})")
