"""A broker that did not shut down cleanly takes itself out of every ISR before it registers.

Why: a broker killed mid-write (or by a power loss) may come back with less than it had; what
it lost may have been committed, acknowledged to producers and read by consumers. ZooKeeper-mode
Kafka relies on the controller removing a dead broker from ISRs, but the controller may not see
the death: the broker can be the controller itself, or the controller can fail over while the
broker restarts, and then the new controller finds the broker registered, in the ISR, even the
leader, and lets it lead again at its old leader epoch (KIP-966's motivation; KRaft records
broker epochs in the ISR for this, KIP-903). The truncated broker would then be the reference
its followers truncate to.

So before registering (while no controller can hand it anything), a broker whose last shutdown
was unclean rewrites the state of each partition it is in sync for, conditionally on the version
it read (``fenced_state``, pure):

- as a follower: it leaves the ISR (the leader keeps its epoch; its next ISR write finds the
  newer version, re-reads and carries on);
- as the leader: it leaves the ISR and the leadership (leader -1, leader epoch + 1), so that the
  controller elects another ISR member at a new epoch; the old epoch is never led again;
- as the last ISR member: it stays. Taking it out would leave the partition without any
  replica that may be elected; this is the one case where committed data can still be lost
  (Kafka's "last replica standing", KIP-966).

Then it posts one ``/isr_change_notification`` so the controller re-reads those states (and
elects leaders for partitions left without one). Once caught up, the broker rejoins the ISR the
normal way (the leader adds it).
"""

from __future__ import annotations

import logging
from typing import Protocol, Sequence

from broker.cluster.errors import BadVersionError, UnknownTopicOrPartitionError
from broker.cluster.layout import PartitionState, TopicAssignment

__all__ = ["fenced_state", "fence_after_unclean_shutdown", "FENCE_ATTEMPTS_MAX"]

logger = logging.getLogger(__name__)

FENCE_ATTEMPTS_MAX = 5  # conditional-write retries per partition when another writer races us


class FencingZk(Protocol):
    def get_topics(self) -> list[str]: ...
    def get_topic_assignment(self, name: str) -> TopicAssignment: ...
    def get_partition_state(self, topic: str, partition: int) -> tuple[PartitionState, int]: ...
    def set_partition_state(self, topic: str, partition: int, state: PartitionState,
                            expected_version: int) -> int: ...
    def propagate_isr_changes(self, partitions: Sequence[tuple[str, int]]) -> None: ...


def fenced_state(state: PartitionState, broker_id: int) -> PartitionState | None:
    """The state without ``broker_id`` in sync, or None when nothing must change."""
    if broker_id not in state.isr or len(state.isr) == 1:
        return None
    isr = tuple(r for r in state.isr if r != broker_id)
    if state.leader == broker_id:
        return PartitionState(-1, state.leader_epoch + 1, isr, state.controller_epoch)
    return PartitionState(state.leader, state.leader_epoch, isr, state.controller_epoch)


def fence_after_unclean_shutdown(zk: FencingZk, broker_id: int) -> list[tuple[str, int]]:
    """Apply ``fenced_state`` to every partition this broker is a replica of; returns the
    partitions changed. Blocking (ZooKeeper I/O); errors other than races propagate."""
    changed = []
    for topic in sorted(zk.get_topics()):
        try:
            assignment = zk.get_topic_assignment(topic)
        except UnknownTopicOrPartitionError:
            continue
        for partition, replicas in sorted(assignment.partitions.items()):
            if broker_id in replicas and _fence_one(zk, broker_id, topic, partition):
                changed.append((topic, partition))
    if changed:
        zk.propagate_isr_changes(changed)
        logger.warning("broker %d restarted after an unclean shutdown: out of the ISR of %d partitions "
                       "until it catches up", broker_id, len(changed))
    return changed


def _fence_one(zk: FencingZk, broker_id: int, topic: str, partition: int) -> bool:
    for _ in range(FENCE_ATTEMPTS_MAX):
        try:
            state, version = zk.get_partition_state(topic, partition)
        except UnknownTopicOrPartitionError:
            return False
        fenced = fenced_state(state, broker_id)
        if fenced is None:
            return False
        try:
            zk.set_partition_state(topic, partition, fenced, version)
            return True
        except BadVersionError:
            continue
    logger.warning("%s-%d: could not leave the ISR after %d attempts", topic, partition, FENCE_ATTEMPTS_MAX)
    return False
