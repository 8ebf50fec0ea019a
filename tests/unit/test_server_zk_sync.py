"""Metadata sync against an in-memory ZooKeeper stand-in. (The controller, which used to be a
stand-in tested here too, has its own tests: test_controller_*.py.)"""

from __future__ import annotations

import asyncio

from test_server_harness import registration

from broker.cluster.errors import PartitionStateExistsError, TopicExistsError, UnknownTopicOrPartitionError
from broker.cluster.layout import PartitionState, TopicAssignment
from broker.server.metadata import ClusterSnapshot, MetadataCache
from broker.server.zk_sync import MetadataSync


class MemoryZk:
    """The KafkaZkClient methods the sync and the controller use, over dicts."""

    def __init__(self) -> None:
        self.brokers = {1: registration(1), 2: registration(2)}
        self.controller = -1
        self.epoch = 0
        self.topics: dict[str, dict[int, tuple[int, ...]]] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.marked: set[str] = set()
        self.watchers = []

    def get_brokers(self):
        return dict(self.brokers)

    def get_controller_id(self):
        return self.controller

    def get_topics(self):
        return sorted(self.topics)

    def get_topic_assignment(self, name):
        if name not in self.topics:
            raise UnknownTopicOrPartitionError(name)
        return TopicAssignment(self.topics[name])

    def get_topic_config(self, name):
        return dict(self.configs.get(name, {}))

    def get_partition_state(self, name, index):
        if (name, index) not in self.states:
            raise UnknownTopicOrPartitionError(f"{name}-{index}")
        return self.states[(name, index)], 0

    def register_controller_and_increment_epoch(self, broker_id, timestamp_ms):
        if self.controller != -1:
            return None
        self.controller, self.epoch = broker_id, self.epoch + 1
        return self.epoch

    def create_topic(self, name, assignment, config):
        if name in self.topics:
            raise TopicExistsError(name)
        self.topics[name] = {p: tuple(r) for p, r in assignment.items()}
        self.configs[name] = dict(config)

    def create_partition_states(self, topic, states):
        if any((topic, p) in self.states for p in states):
            raise PartitionStateExistsError(topic)
        self.states.update({(topic, p): s for p, s in states.items()})

    def mark_topic_for_deletion(self, name):
        self.marked.add(name)

    def get_topics_marked_for_deletion(self):
        return sorted(self.marked)

    def delete_topic_znodes(self, name):
        self.topics.pop(name, None)
        self.states = {k: v for k, v in self.states.items() if k[0] != name}
        self.marked.discard(name)


class PassiveController:
    """Never controller: the sync's own behaviour is under test."""

    active = False

    async def on_metadata(self, snapshot) -> None:
        pass


def setup(zk: MemoryZk, broker_id: int = 1):
    cache = MetadataCache(ClusterSnapshot(cluster_id="c"))
    seen: list[ClusterSnapshot] = []
    controller = PassiveController()

    async def on_change(snapshot):
        seen.append(snapshot)
        await controller.on_metadata(snapshot)

    sync = MetadataSync(zk, cache, on_change)
    return sync, controller, cache, seen


def test_initial_load_reads_brokers_controller_topics_and_states():
    zk = MemoryZk()
    zk.controller = 2
    zk.topics["t"] = {0: (2, 1), 1: (1, 2)}
    zk.states[("t", 0)] = PartitionState(2, 3, (2, 1), 1)

    async def scenario():
        sync, _, cache, _ = setup(zk)
        await sync.initial_load()
        return cache.snapshot

    snapshot = asyncio.run(scenario())
    assert snapshot.controller_id == 2 and sorted(snapshot.brokers) == [1, 2]
    topic = snapshot.topics["t"]
    assert topic.partitions[0].state == PartitionState(2, 3, (2, 1), 1)
    assert topic.partitions[1].state is None and not topic.complete


def test_a_read_never_moves_a_newer_pushed_state_back():
    """UpdateMetadata may land while a ZooKeeper read is in flight: the newer state stays."""
    zk = MemoryZk()
    zk.topics["t"] = {0: (1, 2)}
    zk.states[("t", 0)] = PartitionState(1, 0, (1, 2), 1)

    async def scenario():
        from broker.server.metadata import PartitionView, merge_partition_states
        sync, _, cache, _ = setup(zk)
        await sync.initial_load()
        pushed = PartitionView((1, 2), PartitionState(2, 4, (2,), 1), 3)
        snapshot, unknown = merge_partition_states(cache.snapshot, 1, {("t", 0): pushed})
        cache.publish(snapshot)
        sync.request_refresh(topics={"t"})  # ZooKeeper still says epoch 0 in this fake
        await sync.refresh()
        return cache.snapshot, unknown

    snapshot, unknown = asyncio.run(scenario())
    assert unknown == set() and snapshot.controller_id == 1
    assert snapshot.topics["t"].partitions[0].state == PartitionState(2, 4, (2,), 1)


def test_a_partition_without_state_is_read_again_after_a_backoff():
    zk = MemoryZk()
    zk.controller = 2  # another broker controls: nobody here writes the state

    async def scenario():
        sync, controller, cache, seen = setup(zk)
        await sync.initial_load()
        runner = asyncio.create_task(sync.run())
        zk.topics["late"] = {0: (1,)}
        sync._topics_changed(["late"])  # the watch fires
        await asyncio.sleep(0.02)
        incomplete = not cache.snapshot.topics["late"].complete
        zk.states[("late", 0)] = PartitionState(1, 0, (1,), 1)  # the controller writes it
        await asyncio.sleep(0.3)
        runner.cancel()
        return incomplete, cache.snapshot.topics["late"].complete, controller.active

    incomplete, complete, active = asyncio.run(scenario())
    assert incomplete and complete and not active


def test_deleted_topics_leave_the_snapshot():
    zk = MemoryZk()
    zk.topics["gone"] = {0: (1,)}
    zk.states[("gone", 0)] = PartitionState(1, 0, (1,), 1)

    async def scenario():
        sync, controller, cache, _ = setup(zk)
        await sync.initial_load()
        assert "gone" in cache.snapshot.topics
        zk.delete_topic_znodes("gone")
        sync._topics_changed(zk.get_topics())  # the watch fires
        await sync.refresh()
        return cache.snapshot

    snapshot = asyncio.run(scenario())
    assert "gone" not in snapshot.topics and zk.marked == set()
