"""The broker's view of the cluster: one immutable snapshot, replaced whole on every change.

Handlers read ``MetadataCache.snapshot`` synchronously, so one request sees one consistent view
(Kafka's ``MetadataCache`` swaps an immutable ``MetadataSnapshot`` the same way). The snapshot is
built from ZooKeeper by ``zk_sync.MetadataSync``; tests build it directly. Waiting for the view to
reach some condition (CreateTopics answering once the partitions exist) is ``wait_for``.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import uuid
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Callable, Mapping

from broker.cluster.layout import BrokerRegistration, EndPoint, PartitionState
from broker.replica.manager import PartitionView

__all__ = ["TopicMetadata", "ClusterSnapshot", "MetadataCache", "parse_topic_id", "ZERO_TOPIC_ID",
           "PartitionView", "merge_topic", "merge_partition_states"]

logger = logging.getLogger(__name__)

ZERO_TOPIC_ID = uuid.UUID(int=0)


def parse_topic_id(text: str | None) -> uuid.UUID:
    """Kafka 2.8 stores ``topic_id`` as ``Uuid.toString``: 22 chars of URL-safe base64."""
    if not text:
        return ZERO_TOPIC_ID
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        return uuid.UUID(bytes=raw) if len(raw) == 16 else ZERO_TOPIC_ID
    except (ValueError, TypeError):
        logger.warning("ignoring malformed topic id %r", text)
        return ZERO_TOPIC_ID


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    partitions: Mapping[int, PartitionView]
    config: Mapping[str, str] = field(default_factory=dict)
    topic_id: uuid.UUID = ZERO_TOPIC_ID

    @property
    def complete(self) -> bool:
        """Every partition has its state znode (the controller finished creating the topic)."""
        return all(view.state is not None for view in self.partitions.values())


@dataclass(frozen=True)
class ClusterSnapshot:
    cluster_id: str | None = None
    controller_id: int = -1
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=dict)
    topics: Mapping[str, TopicMetadata] = field(default_factory=dict)
    version: int = 0

    def endpoint(self, broker_id: int, listener_name: str) -> EndPoint | None:
        registration = self.brokers.get(broker_id)
        if registration is None:
            return None
        return next((e for e in registration.endpoints if e.listener_name == listener_name), None)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        if topic_id == ZERO_TOPIC_ID:
            return None
        return next((t for t in self.topics.values() if t.topic_id == topic_id), None)

    def with_changes(self, **changes) -> "ClusterSnapshot":
        for name in ("brokers", "topics"):
            if name in changes:
                changes[name] = MappingProxyType(dict(changes[name]))
        return replace(self, version=self.version + 1, **changes)


def topic_metadata(name: str, replicas: Mapping[int, tuple[int, ...]],
                   states: Mapping[int, tuple[PartitionState, int] | None],
                   config: Mapping[str, str], topic_id: uuid.UUID = ZERO_TOPIC_ID) -> TopicMetadata:
    partitions = {}
    for index, replica_list in sorted(replicas.items()):
        found = states.get(index)
        state, version = found if found is not None else (None, -1)
        partitions[index] = PartitionView(tuple(replica_list), state, version)
    return TopicMetadata(name, MappingProxyType(partitions), MappingProxyType(dict(config)), topic_id)


def _newer(candidate: PartitionView, current: PartitionView) -> bool:
    if candidate.state is None:
        return False
    if current.state is None:
        return True
    return (candidate.state.leader_epoch, candidate.zk_version) > (current.state.leader_epoch,
                                                                   current.zk_version)


def merge_topic(old: TopicMetadata | None, new: TopicMetadata) -> TopicMetadata:
    """``new`` (read from ZooKeeper), keeping any partition state of ``old`` that is newer (an
    UpdateMetadata from the controller that arrived while the read was in flight). States are
    ordered by (leader epoch, znode version), as partitions order them."""
    if old is None or old.topic_id != new.topic_id:
        return new
    partitions = dict(new.partitions)
    for index, view in new.partitions.items():
        kept = old.partitions.get(index)
        if kept is not None and kept.replicas == view.replicas and _newer(kept, view):
            partitions[index] = kept
    if partitions == dict(new.partitions):
        return new
    return replace(new, partitions=MappingProxyType(partitions))


def merge_partition_states(snapshot: ClusterSnapshot, controller_id: int,
                           states: Mapping[tuple[str, int], PartitionView]) -> tuple[ClusterSnapshot, set[str]]:
    """Apply an UpdateMetadata: each partition state that is newer than the cached one, and the
    controller id. Returns the new snapshot and the topics it does not know yet (the caller
    reads them from ZooKeeper)."""
    topics = dict(snapshot.topics)
    unknown: set[str] = set()
    changed = controller_id != snapshot.controller_id
    for (name, index), view in states.items():
        topic = topics.get(name)
        if topic is None or index not in topic.partitions:
            unknown.add(name)
            continue
        current = topic.partitions[index]
        if not _newer(view, current):
            continue
        partitions = dict(topic.partitions)
        partitions[index] = PartitionView(current.replicas if not view.replicas else view.replicas,
                                          view.state, view.zk_version)
        topics[name] = replace(topic, partitions=MappingProxyType(partitions))
        changed = True
    if not changed:
        return snapshot, unknown
    return snapshot.with_changes(topics=topics, controller_id=controller_id), unknown


class MetadataCache:
    """Holds the current snapshot; ``publish`` replaces it and wakes ``wait_for`` callers."""

    def __init__(self, snapshot: ClusterSnapshot | None = None) -> None:
        self._snapshot = snapshot or ClusterSnapshot()
        self._changed = asyncio.Event()

    @property
    def snapshot(self) -> ClusterSnapshot:
        return self._snapshot

    def publish(self, snapshot: ClusterSnapshot) -> None:
        self._snapshot = snapshot
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_for(self, predicate: Callable[[ClusterSnapshot], bool], timeout_s: float) -> bool:
        """True once ``predicate(snapshot)`` holds, False if ``timeout_s`` passes first."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout_s)
        while not predicate(self._snapshot):
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            changed = self._changed
            try:
                async with asyncio.timeout(remaining):
                    await changed.wait()
            except TimeoutError:
                return predicate(self._snapshot)
        return True
