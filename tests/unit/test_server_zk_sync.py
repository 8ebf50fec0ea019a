"""Metadata sync and the stand-in controller against an in-memory ZooKeeper stand-in."""

from __future__ import annotations

import asyncio
from random import Random

from test_server_harness import registration

from broker.cluster.errors import PartitionStateExistsError, TopicExistsError, UnknownTopicOrPartitionError
from broker.cluster.layout import PartitionState, TopicAssignment
from broker.server.controller import StandInController
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


def setup(zk: MemoryZk, broker_id: int = 1):
    cache = MetadataCache(ClusterSnapshot(cluster_id="c"))
    seen: list[ClusterSnapshot] = []
    holder = {}

    async def on_change(snapshot):
        seen.append(snapshot)
        await holder["controller"].on_metadata(snapshot)

    sync = MetadataSync(zk, cache, on_change)
    holder["controller"] = StandInController(zk, broker_id, lambda: 0, Random(0), sync.request_refresh)
    return sync, holder["controller"], cache, seen


def test_initial_load_elects_and_creates_missing_partition_states():
    zk = MemoryZk()
    zk.topics["made-by-kafka-tools"] = {0: (2, 1), 1: (3, 2)}  # broker 3 is not live

    async def scenario():
        sync, controller, cache, _ = setup(zk)
        await sync.initial_load()
        for _ in range(3):  # the controller's writes ask for re-reads
            await sync.refresh()
        return controller, cache.snapshot

    controller, snapshot = asyncio.run(scenario())
    assert controller.active and controller.epoch == 1 and snapshot.controller_id == 1
    assert zk.states[("made-by-kafka-tools", 0)] == PartitionState(2, 0, (2, 1), 1)
    assert zk.states[("made-by-kafka-tools", 1)] == PartitionState(2, 0, (2,), 1)  # live replicas only
    topic = snapshot.topics["made-by-kafka-tools"]
    assert topic.complete and topic.partitions[1].state.leader == 2


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
        await controller.delete_topic("gone")
        await sync.refresh()
        return cache.snapshot

    snapshot = asyncio.run(scenario())
    assert "gone" not in snapshot.topics and zk.marked == set()


def test_controller_creates_topic_with_states_and_refuses_duplicates():
    zk = MemoryZk()

    async def scenario():
        sync, controller, cache, _ = setup(zk)
        await sync.initial_load()
        first = await controller.create_topic("t", {0: [2, 1], 1: [1, 2]}, {"retention.ms": "5"})
        again = await controller.create_topic("t", {0: [1]}, {})
        await sync.refresh()
        return first, again, cache.snapshot

    first, again, snapshot = asyncio.run(scenario())
    assert first == (0, None) and again[0] == 36
    assert zk.states[("t", 1)] == PartitionState(1, 0, (1, 2), 1)
    assert snapshot.topics["t"].config == {"retention.ms": "5"} and snapshot.topics["t"].complete


def test_a_second_broker_does_not_become_controller():
    zk = MemoryZk()
    zk.controller = 1

    async def scenario():
        sync, controller, cache, _ = setup(zk, broker_id=2)
        await sync.initial_load()
        error = await controller.create_topic("auto", {0: [2]}, {})  # as Metadata auto-creation does
        return controller.active, error

    active, error = asyncio.run(scenario())
    assert not active and error == (0, None)
    assert "auto" in zk.topics and ("auto", 0) not in zk.states  # the real controller writes it
