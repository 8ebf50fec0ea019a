"""Partition reassignment (KIP-455) on the controller: Kafka's ``onPartitionReassignment``.

A reassignment of partition p from ORS (its replicas) to TRS runs in two phases:

1. the replica set becomes RS = TRS + ORS (order kept, no repeats), written to
   ``/brokers/topics/<t>`` with ``adding_replicas`` (TRS - ORS) and ``removing_replicas``
   (ORS - TRS); the leader epoch goes up and every replica in RS gets LeaderAndIsr, so the adding
   replicas start fetching and the leader can take them into the ISR once they caught up;
2. when every replica of TRS is in the ISR (checked at each ISR change), a leader from TRS is
   elected if the current one is not in TRS, the ISR keeps only TRS, the assignment becomes TRS,
   and the removed replicas get StopReplica with delete.

Cancelling reassigns back to ORS (its replicas are in the ISR already, so it completes at once).
The adding/removing lists in ZooKeeper let a new controller resume (``resume_from_zk``). Pure:
it works on the core's context and its ZooKeeper protocol, like the rest of the controller.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

from broker.cluster.layout import PartitionState
from broker.controller.states import ReplicaStateName as _R

if TYPE_CHECKING:
    from broker.controller.core import ControllerCore
    from broker.controller.requests import RequestBatch

__all__ = ["start_reassignment", "try_complete", "in_progress", "full_replica_set"]

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS = 0, 3, 39, 85


def full_replica_set(target: Sequence[int], original: Sequence[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys([*target, *original]))


def in_progress(core: "ControllerCore") -> dict[TopicPartition, tuple[tuple[int, ...], tuple[int, ...]]]:
    """tp -> (target, original) of every reassignment in progress."""
    return core.reassignments


def check_target(core: "ControllerCore", tp: TopicPartition, target: Sequence[int] | None) -> tuple[int, str | None]:
    ctx = core._require()
    if tp not in ctx.leaderships:
        return UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {tp[0]}-{tp[1]}"
    if target is None:
        if tp not in core.reassignments:
            return NO_REASSIGNMENT_IN_PROGRESS, f"Unable to cancel reassignment of {tp[0]}-{tp[1]}: no reassignment in progress"
        return NONE, None
    if not target:
        return INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."
    if len(set(target)) != len(target):
        return INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes duplicate replicas: {list(target)}"
    dead = sorted(set(target) - ctx.live_ids())
    if dead:
        return INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes broker {dead[0]}, but no such broker is registered."
    return NONE, None


def start_reassignment(core: "ControllerCore", tp: TopicPartition, target: Sequence[int] | None,
                       batch: "RequestBatch") -> None:
    """Phase 1 (or a cancel: back to the original replicas), then completion if already possible."""
    ctx = core._require()
    current = ctx.replicas(tp)
    if target is None:  # cancel: back to the original replicas
        target = original = core.reassignments[tp][1]
    else:
        original = core.reassignments[tp][1] if tp in core.reassignments else current
    target = tuple(target)
    core.reassignments[tp] = (target, tuple(original))
    replica_set = full_replica_set(target, original)
    _write_assignment(core, tp, replica_set, target, original)
    for replica in replica_set:
        if replica not in current:
            if ctx.replica_state(tp, replica) == _R.NON_EXISTENT:
                ctx.move_replica(tp, replica, _R.NEW)
            ctx.move_replica(tp, replica, _R.ONLINE if replica in ctx.live_brokers else _R.OFFLINE)
    core._reread(tp)
    leadership = ctx.leaderships[tp]
    state = leadership.state
    core._write_state(tp, leadership, PartitionState(state.leader, state.leader_epoch + 1, state.isr, ctx.epoch))
    batch.add_leader_and_isr([r for r in replica_set if r in ctx.live_brokers], tp)
    try_complete(core, tp, batch)


def try_complete(core: "ControllerCore", tp: TopicPartition, batch: "RequestBatch") -> bool:
    """Phase 2 once every target replica is in the ISR; True when the reassignment finished."""
    ctx = core._require()
    if tp not in core.reassignments:
        return False
    target, original = core.reassignments[tp]
    core._reread(tp)
    leadership = ctx.leaderships.get(tp)
    if leadership is None or not set(target) <= set(leadership.state.isr):
        return False
    state = leadership.state
    leader = state.leader
    if leader not in target or leader not in ctx.live_brokers:
        leader = next((r for r in target if r in ctx.live_brokers and r in state.isr), -1)
        if leader < 0:
            return False
    isr = tuple(r for r in state.isr if r in target)
    if core._write_state(tp, leadership, PartitionState(leader, state.leader_epoch + 1, isr, ctx.epoch)) is None:
        return False
    removed = [r for r in full_replica_set(target, original) if r not in target]
    _write_assignment(core, tp, target, target, target)
    core._reread(tp)
    for replica in removed:
        batch.add_stop_replica(replica, tp, delete=True)
        for state_name in (_R.OFFLINE, _R.DELETION_STARTED, _R.DELETION_SUCCESSFUL, _R.NON_EXISTENT):
            if state_name != _R.OFFLINE or ctx.replica_state(tp, replica) != _R.OFFLINE:
                ctx.move_replica(tp, replica, state_name)
    batch.add_leader_and_isr([r for r in target if r in ctx.live_brokers], tp)
    batch.add_update_metadata(ctx.live_ids(), [tp])
    del core.reassignments[tp]
    logger.info("%s-%d: reassigned to %s (removed %s)", tp[0], tp[1], list(target), removed)
    return True


def _write_assignment(core: "ControllerCore", tp: TopicPartition, replicas: Sequence[int],
                      target: Sequence[int], original: Sequence[int]) -> None:
    ctx = core._require()
    adding = [r for r in target if r not in original]
    removing = [r for r in original if r not in target]
    core._zk.set_partition_reassignment(tp[0], tp[1], list(replicas), adding, removing)
    ctx.assignments[tp[0]][tp[1]] = tuple(replicas)
