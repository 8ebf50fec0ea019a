"""A broker without ZooKeeper or sockets, for handler and dispatcher tests (no tests here).

``Harness`` wires the real dispatcher, handlers, replica manager and logs (in a temporary
directory) to a hand-made cluster snapshot. ``FakeController`` plays the stand-in controller and
ZooKeeper together: a topic it creates appears in the metadata and on this broker's replicas
at once, as the ZooKeeper watch would deliver it. Requests go in as encoded frames and answers
come back decoded, so every test covers codec, dispatch and handler together.
"""

from __future__ import annotations

import asyncio
from random import Random
from types import MappingProxyType

from broker.cluster.layout import BrokerRegistration, EndPoint, PartitionState
from broker.log import LogManager
from broker.records import BatchLimits, Record, encode_batch
from broker.replica.manager import ReplicaManager, ReplicaSettings
from broker.replica.purgatory import Purgatory
from broker.server.config import BrokerConfig
from broker.server.context import BrokerContext
from broker.server.dispatch import Dispatcher
from broker.server.metadata import ClusterSnapshot, MetadataCache, topic_metadata
from broker.wire import decode_response, encode_request

NOW_MS = 1_700_000_000_000


def registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", f"host{broker_id}", 9090 + broker_id,
                                                   "PLAINTEXT"),), NOW_MS)


class FakeController:
    def __init__(self, harness: "Harness") -> None:
        self._harness = harness
        self.active = True
        self.rng = Random(1)
        self.created: list[str] = []

    async def create_topic(self, name, assignment, config):
        if name in self._harness.snapshot.topics:
            return 36, f"Topic '{name}' already exists."
        self.created.append(name)
        self._harness.add_topic(name, {p: list(r) for p, r in assignment.items()}, dict(config))
        return 0, None

    async def delete_topic(self, name):
        self._harness.remove_topic(name)
        return 0, None

    def reassignments(self):
        """tp -> (target, original) in progress, as the real shell: none here."""
        return {}


class FakeProducerIds:
    def __init__(self) -> None:
        self.next = 0

    async def next_id(self) -> int:
        self.next += 1
        return self.next - 1


class Harness:
    def __init__(self, tmp_path, broker_id: int = 1, brokers=(1,), **props: str) -> None:
        settings = {"broker.id": str(broker_id), "zookeeper.connect": "zk:2181",
                    "log.dirs": str(tmp_path / "logs"), **{k.replace("_", "."): v for k, v in props.items()}}
        self.config = BrokerConfig.from_properties(settings)
        self.now_ms = NOW_MS
        clock = lambda: self.now_ms  # noqa: E731
        limits = BatchLimits(batch_bytes_max=self.config.message_max_bytes)
        self.log_manager = LogManager(self.config.log_dirs, self.config.log, clock, limits)
        self.replicas = ReplicaManager(broker_id, self.log_manager, Purgatory(100), clock,
                                       ReplicaSettings(limits=limits))
        self.metadata = MetadataCache(ClusterSnapshot(
            cluster_id="test-cluster", controller_id=broker_id,
            brokers=MappingProxyType({b: registration(b) for b in brokers}),
        ))
        self.controller = FakeController(self)
        self.context = BrokerContext(self.config, self.metadata, self.replicas, self.controller,
                                     FakeProducerIds(), clock)
        self.dispatcher = Dispatcher(self.context)
        self._correlation = 0

    @property
    def snapshot(self) -> ClusterSnapshot:
        return self.metadata.snapshot

    def add_topic(self, name: str, assignment: dict[int, list[int]], config: dict | None = None,
                  leader_epoch: int = 0, leaders: dict[int, int] | None = None,
                  without_state: tuple[int, ...] = ()) -> None:
        states = {p: (PartitionState((leaders or {}).get(p, r[0]), leader_epoch, tuple(r), 1), 0)
                  for p, r in assignment.items() if p not in without_state}
        topic = topic_metadata(name, assignment, states, config or {})
        self._publish({**self.snapshot.topics, name: topic})

    def remove_topic(self, name: str) -> None:
        self._publish({k: v for k, v in self.snapshot.topics.items() if k != name})

    def _publish(self, topics: dict) -> None:
        snapshot = self.snapshot.with_changes(topics=topics)
        self.metadata.publish(snapshot)
        self.replicas.apply(snapshot.topics)

    async def call(self, api_key: int, version: int, request):
        """Encode, dispatch, decode; None when the broker sends no response."""
        self._correlation += 1
        correlation_id = self._correlation
        frame = encode_request(api_key, version, correlation_id, "test", request)
        chunks = await self.dispatcher.handle(frame)
        if chunks is None:
            return None
        data = b"".join(bytes(c) for c in chunks)
        correlation, response = decode_response(api_key, version, data[4:])
        assert correlation == correlation_id
        return response

    def close(self) -> None:
        self.replicas.close()


def batch(count: int = 3, start_ts: int = NOW_MS, producer_id: int = -1, epoch: int = -1,
          sequence: int = -1, key: bytes = b"k", value_size: int = 10) -> bytes:
    records = [Record(i, start_ts + i, key, bytes(value_size), (("h", b"v"),)) for i in range(count)]
    return encode_batch(records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)


def run(coroutine, timeout_s: float = 10.0):
    return asyncio.run(asyncio.wait_for(coroutine, timeout_s))
