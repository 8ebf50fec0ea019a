"""``KafkaZkClient`` against a real ZooKeeper: what it writes (byte for byte where Kafka's format
is fixed), and how it behaves under races between sessions."""

from __future__ import annotations

import json
import queue
import random
import threading
import time

import pytest

from broker.cluster import paths
from broker.cluster.errors import (
    BadVersionError,
    BrokerIdAlreadyRegisteredError,
    ControllerMovedError,
    InvalidPartitionsError,
    InvalidTopicError,
    MalformedZnodeError,
    PartitionStateExistsError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
    ZooKeeperUnavailableError,
)
from broker.cluster.layout import BrokerRegistration, EndPoint, PartitionState, TopicAssignment
from broker.cluster.zk import KafkaZkClient
from broker.tools.zookeeper import find_free_port

pytestmark = pytest.mark.integration

WAIT_S = 5.0  # upper bound for a watch to fire or a session close to show


def registration(broker_id: int, port: int = 9092) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", "127.0.0.1", port, "PLAINTEXT"),), 1_700_000_000_000)


def raw(client: KafkaZkClient, path: str) -> bytes:
    data, _ = client._zk.get(path)
    return data


def wait_until(predicate, timeout_s: float = WAIT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


# -- session and start-up ------------------------------------------------------------------------

def test_persistent_paths_are_created_inside_the_chroot(zk_client, zk_root, zk_chroot):
    for path in paths.PERSISTENT_PATHS:
        assert zk_root.exists(zk_chroot + path) is not None, path
        assert zk_root.exists(path) is None, f"{path} written outside the chroot"
    zk_client.ensure_persistent_paths()  # idempotent


def test_cluster_id_is_chosen_once(zk_client_factory):
    first, second = zk_client_factory(), zk_client_factory()
    cluster_id = first.get_or_create_cluster_id(random.Random(1))
    assert second.get_or_create_cluster_id(random.Random(2)) == cluster_id
    assert json.loads(raw(first, "/cluster/id")) == {"version": "1", "id": cluster_id}


def test_unreachable_zookeeper_fails_within_the_connection_timeout():
    client = KafkaZkClient(f"127.0.0.1:{find_free_port()}", session_timeout_ms=6000, connection_timeout_ms=500)
    started = time.monotonic()
    with pytest.raises(ZooKeeperUnavailableError, match="within 500 ms"):
        client.start()
    assert time.monotonic() - started < 3.0
    client.close()  # idempotent after the failed start


# -- brokers -------------------------------------------------------------------------------------

def test_broker_registration_is_ephemeral_and_its_epoch_is_the_czxid(zk_client_factory):
    broker, observer = zk_client_factory(), zk_client_factory()
    epoch = broker.register_broker(registration(1))
    _, stat = observer._zk.get("/brokers/ids/1")
    assert epoch == stat.czxid
    assert stat.ephemeralOwner == broker.session_id
    assert observer.get_broker_ids() == [1]
    assert observer.get_brokers() == {1: registration(1)}
    assert observer.get_brokers_and_epochs()[1][1] == epoch
    assert raw(observer, "/brokers/ids/1") == registration(1).to_json()
    broker.close()
    assert wait_until(lambda: observer.get_broker_ids() == [])


def test_registering_twice_in_one_session_returns_the_same_epoch(zk_client):
    """The connection-loss retry case: our own node is our earlier success (CheckedEphemeral)."""
    first = zk_client.register_broker(registration(7))
    assert zk_client.register_broker(registration(7), wait_ms=0) == first


def test_a_live_broker_id_cannot_be_taken(zk_client_factory):
    holder, intruder = zk_client_factory(), zk_client_factory()
    holder.register_broker(registration(5))
    started = time.monotonic()
    with pytest.raises(BrokerIdAlreadyRegisteredError, match="broker id 5 is already registered"):
        intruder.register_broker(registration(5, port=9093), wait_ms=400)
    assert time.monotonic() - started >= 0.4
    assert intruder.get_brokers()[5] == registration(5)  # the holder's registration is untouched


def test_registration_waits_for_the_previous_session_to_go(zk_client_factory):
    previous, restarted = zk_client_factory(), zk_client_factory()
    old_epoch = previous.register_broker(registration(6))
    threading.Timer(0.5, previous.close).start()
    started = time.monotonic()
    new_epoch = restarted.register_broker(registration(6, port=9999), wait_ms=WAIT_S * 1000)
    assert 0.3 < time.monotonic() - started < WAIT_S
    assert new_epoch > old_epoch
    assert restarted.get_brokers()[6].endpoints[0].port == 9999


def test_watch_broker_ids(zk_client_factory):
    watcher, broker = zk_client_factory(), zk_client_factory()
    seen: queue.Queue[list[int]] = queue.Queue()
    watcher.watch_broker_ids(seen.put)
    assert seen.get(timeout=WAIT_S) == []
    broker.register_broker(registration(3))
    assert seen.get(timeout=WAIT_S) == [3]
    broker.close()
    assert seen.get(timeout=WAIT_S) == []


# -- topics --------------------------------------------------------------------------------------

def test_create_topic_writes_kafkas_json(zk_client):
    zk_client.create_topic("orders", {0: [1, 2], 1: [2, 1]}, {"retention.ms": "1000"})
    assert raw(zk_client, "/brokers/topics/orders") == (
        b'{"version":2,"partitions":{"0":[1,2],"1":[2,1]},"adding_replicas":{},"removing_replicas":{}}'
    )
    assert raw(zk_client, "/config/topics/orders") == b'{"version":1,"config":{"retention.ms":"1000"}}'
    assert zk_client.get_topics() == ["orders"]
    assert zk_client.get_topic_assignment("orders") == TopicAssignment({0: (1, 2), 1: (2, 1)})
    assert zk_client.get_topic_config("orders") == {"retention.ms": "1000"}


def test_topic_written_by_kafka_reads_back(zk_client):
    """A tree written by Kafka 2.3 (version 1, hash-ordered keys) reads as the same topic."""
    zk_client._zk.create("/brokers/topics/legacy", b'{"version":1,"partitions":{"1":[0],"0":[1]}}')
    assert dict(zk_client.get_topic_assignment("legacy").partitions) == {0: (1,), 1: (0,)}
    assert zk_client.get_topic_config("legacy") == {}  # no config znode: no overrides


def test_conflicting_create_fails_and_keeps_the_first(zk_client):
    zk_client.create_topic("t", {0: [1]}, {"cleanup.policy": "compact"})
    with pytest.raises(TopicExistsError, match="'t' already exists") as info:
        zk_client.create_topic("t", {0: [2], 1: [2]}, {"cleanup.policy": "delete"})
    assert info.value.kafka_error_code == 36
    assert zk_client.get_topic_config("t") == {"cleanup.policy": "compact"}
    assert dict(zk_client.get_topic_assignment("t").partitions) == {0: (1,)}


def test_racing_creates_leave_exactly_one_consistent_topic(zk_client, zk_client_factory):
    """Config and assignment are one multi: the config that survives is the winner's."""
    racers = [zk_client_factory() for _ in range(6)]
    barrier = threading.Barrier(len(racers))
    outcomes: dict[int, str] = {}

    def create(index: int) -> None:
        barrier.wait()
        try:
            racers[index].create_topic("raced", {0: [index]}, {"owner": str(index)})
            outcomes[index] = "created"
        except TopicExistsError:
            outcomes[index] = "exists"

    threads = [threading.Thread(target=create, args=(i,)) for i in range(len(racers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    winners = [i for i, outcome in outcomes.items() if outcome == "created"]
    assert len(outcomes) == len(racers) and len(winners) == 1
    winner = winners[0]
    assert zk_client.get_topic_config("raced") == {"owner": str(winner)}
    assert dict(zk_client.get_topic_assignment("raced").partitions) == {0: (winner,)}


def test_a_leftover_config_is_replaced(zk_client):
    """Kafka 2.x could crash between writing the config and the assignment."""
    zk_client._zk.create("/config/topics/half", b'{"version":1,"config":{"stale":"yes"}}')
    zk_client.create_topic("half", {0: [1]}, {"fresh": "yes"})
    assert zk_client.get_topic_config("half") == {"fresh": "yes"}


def test_colliding_name_is_refused(zk_client):
    zk_client.create_topic("metrics.cpu", {0: [1]}, {})
    with pytest.raises(InvalidTopicError, match="collides with existing topics: metrics.cpu") as info:
        zk_client.create_topic("metrics_cpu", {0: [1]}, {})
    assert info.value.kafka_error_code == 17


@pytest.mark.parametrize(
    "name, assignment, config, error",
    [
        ("bad/name", {0: [1]}, {}, InvalidTopicError),
        ("ok", {}, {}, InvalidPartitionsError),
        ("ok", {0: [1]}, {"retention.ms": 1000}, ValueError),
    ],
)
def test_invalid_create_writes_nothing(zk_client, zk_root, zk_chroot, name, assignment, config, error):
    with pytest.raises(error):
        zk_client.create_topic(name, assignment, config)
    assert zk_client.get_topics() == []
    assert zk_root.get_children(zk_chroot + "/config/topics") == []


def test_change_topic_config_notifies_brokers(zk_client):
    zk_client.create_topic("conf", {0: [1]}, {})
    zk_client.change_topic_config("conf", {"retention.ms": "5"})
    assert zk_client.get_topic_config("conf") == {"retention.ms": "5"}
    (change,) = zk_client._zk.get_children("/config/changes")
    assert change.startswith("config_change_") and len(change) == len("config_change_") + 10
    assert raw(zk_client, f"/config/changes/{change}") == b'{"version":2,"entity_path":"topics/conf"}'
    with pytest.raises(UnknownTopicOrPartitionError):
        zk_client.change_topic_config("absent", {})


def test_watch_topics(zk_client_factory):
    watcher, admin = zk_client_factory(), zk_client_factory()
    seen: queue.Queue[list[str]] = queue.Queue()
    watcher.watch_topics(seen.put)
    assert seen.get(timeout=WAIT_S) == []
    admin.create_topic("b", {0: [1]}, {})
    assert seen.get(timeout=WAIT_S) == ["b"]
    admin.create_topic("a", {0: [1]}, {})
    assert seen.get(timeout=WAIT_S) == ["a", "b"]


# -- partition state -----------------------------------------------------------------------------

def test_partition_state_updates_are_conditional(zk_client_factory):
    controller, leader = zk_client_factory(), zk_client_factory()
    controller.create_topic("p", {0: [1, 2], 1: [2, 1]}, {})
    initial = {0: PartitionState(1, 0, (1, 2), 1), 1: PartitionState(2, 0, (2, 1), 1)}
    assert controller.create_partition_states("p", initial) == {0: 0, 1: 0}
    assert raw(controller, "/brokers/topics/p/partitions/0/state") == (
        b'{"version":1,"leader":1,"leader_epoch":0,"isr":[1,2],"controller_epoch":1}'
    )
    state, version = leader.get_partition_state("p", 0)
    assert (state, version) == (initial[0], 0)

    shrunk = PartitionState(1, 0, (1,), 1)  # the leader shrinks the ISR
    assert leader.set_partition_state("p", 0, shrunk, expected_version=version) == 1
    moved = PartitionState(2, 1, (1, 2), 1)  # the controller acts on what it read before
    with pytest.raises(BadVersionError, match="expected version 0"):
        controller.set_partition_state("p", 0, moved, expected_version=version)
    assert controller.get_partition_state("p", 0) == (shrunk, 1)


def test_partition_states_are_created_once(zk_client, zk_root, zk_chroot):
    zk_client.create_topic("once", {0: [1], 1: [1]}, {})
    zk_client.create_partition_states("once", {0: PartitionState(1, 0, (1,), 1)})
    with pytest.raises(PartitionStateExistsError, match="once-0"):
        zk_client.create_partition_states("once", {1: PartitionState(1, 0, (1,), 1), 0: PartitionState(1, 0, (1,), 1)})
    # all or nothing: partition 1's state was not created by the failed call
    with pytest.raises(UnknownTopicOrPartitionError):
        zk_client.get_partition_state("once", 1)
    with pytest.raises(UnknownTopicOrPartitionError):
        zk_client.create_partition_states("never-created", {0: PartitionState(1, 0, (1,), 1)})
    assert zk_root.exists(zk_chroot + "/brokers/topics/never-created") is None


def test_malformed_state_names_the_znode(zk_client):
    zk_client.create_topic("broken", {0: [1]}, {})
    zk_client._zk.create("/brokers/topics/broken/partitions/0/state", b'{"version":1}', makepath=True)
    with pytest.raises(MalformedZnodeError, match="/brokers/topics/broken/partitions/0/state: .*'leader'"):
        zk_client.get_partition_state("broken", 0)


# -- topic deletion ------------------------------------------------------------------------------

def test_delete_topic(zk_client, zk_root, zk_chroot):
    zk_client.create_topic("doomed", {0: [1]}, {"retention.ms": "1"})
    zk_client.create_topic("kept", {0: [1]}, {})
    zk_client.create_partition_states("doomed", {0: PartitionState(1, 0, (1,), 1)})
    assert zk_client.mark_topic_for_deletion("doomed") is True
    assert zk_client.mark_topic_for_deletion("doomed") is False
    assert zk_client.get_topics_marked_for_deletion() == ["doomed"]
    assert raw(zk_client, "/admin/delete_topics/doomed") == b""

    zk_client.delete_topic_znodes("doomed")
    assert zk_client.get_topics() == ["kept"]
    for path in ("/brokers/topics/doomed", "/config/topics/doomed", "/admin/delete_topics/doomed"):
        assert zk_root.exists(zk_chroot + path) is None, path
    assert zk_client.get_topics_marked_for_deletion() == []
    zk_client.delete_topic_znodes("doomed")  # idempotent: a restarted controller may repeat it
    with pytest.raises(UnknownTopicOrPartitionError):
        zk_client.mark_topic_for_deletion("doomed")


# -- producer ids --------------------------------------------------------------------------------

def test_producer_id_blocks_from_concurrent_clients_never_overlap(zk_client_factory):
    clients = [zk_client_factory(), zk_client_factory()]
    per_thread, threads_per_client = 12, 2
    blocks = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(clients) * threads_per_client)

    def allocate(client: KafkaZkClient, broker_id: int) -> None:
        barrier.wait()
        for _ in range(per_thread):
            block = client.allocate_producer_id_block(broker_id)
            with lock:
                blocks.append(block)

    threads = [
        threading.Thread(target=allocate, args=(client, broker_id))
        for broker_id, client in enumerate(clients)
        for _ in range(threads_per_client)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S * 4)
    total = len(clients) * threads_per_client * per_thread
    assert len(blocks) == total
    ordered = sorted(blocks, key=lambda b: b.block_start)
    assert ordered[0].block_start == 0  # the first block of a fresh cluster
    for before, after in zip(ordered, ordered[1:]):
        assert after.block_start == before.block_end + 1  # no overlap, no gap
    assert all(b.size == 1000 for b in blocks)
    assert {b.broker_id for b in blocks} == {0, 1}
    last = ordered[-1]
    assert json.loads(raw(clients[0], "/latest_producer_id_block")) == {
        "version": 1, "broker": last.broker_id, "block_start": str(last.block_start), "block_end": str(last.block_end),
    }


# -- controller ----------------------------------------------------------------------------------

def race(clients, action):
    """Run ``action(client, index)`` in one thread per client, released together."""
    barrier = threading.Barrier(len(clients))
    results: dict[int, object] = {}

    def run(index: int) -> None:
        barrier.wait()
        results[index] = action(clients[index], index)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(clients))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    return results


def test_controller_election_and_failover(zk_client_factory):
    clients = [zk_client_factory() for _ in range(2)]
    assert clients[0].get_controller_id() == -1
    won = race(clients, lambda client, i: client.try_become_controller(i + 1, 1_700_000_000_000 + i))
    winners = [i for i, result in won.items() if result]
    assert len(won) == 2 and len(winners) == 1
    winner, loser = winners[0], 1 - winners[0]
    assert clients[loser].get_controller_id() == winner + 1
    assert json.loads(raw(clients[loser], "/controller")) == {
        "version": 1, "brokerid": winner + 1, "timestamp": str(1_700_000_000_000 + winner),
    }
    assert clients[winner].increment_controller_epoch() == 1
    assert raw(clients[loser], "/controller_epoch") == b"1"
    assert clients[winner].try_become_controller(winner + 1, 0) is True  # already ours

    assert clients[loser].try_become_controller(loser + 1, 0) is False
    clients[winner].close()
    assert wait_until(lambda: clients[loser].get_controller_id() == -1)
    assert clients[loser].try_become_controller(loser + 1, 0) is True
    assert clients[loser].increment_controller_epoch() == 2
    assert clients[loser].get_controller_epoch() == (2, 2)


def test_stale_epoch_increment_means_the_controller_moved(zk_client_factory, monkeypatch):
    stale, current = zk_client_factory(), zk_client_factory()
    assert current.increment_controller_epoch() == 1
    read_before = stale.get_controller_epoch()  # (1, version 1)
    assert current.increment_controller_epoch() == 2  # another controller bumps meanwhile
    monkeypatch.setattr(stale, "_controller_epoch_or_initial", lambda: read_before)
    with pytest.raises(ControllerMovedError) as info:
        stale.increment_controller_epoch()
    assert info.value.kafka_error_code == 41
    assert current.get_controller_epoch()[0] == 2


def test_atomic_controller_registration(zk_client_factory):
    clients = [zk_client_factory() for _ in range(3)]
    epochs = race(clients, lambda client, i: client.register_controller_and_increment_epoch(i, 0))
    winners = [i for i, epoch in epochs.items() if epoch is not None]
    assert len(epochs) == 3 and len(winners) == 1 and epochs[winners[0]] == 1
    assert clients[0].get_controller_epoch()[0] == 1  # the losers did not bump it
    clients[winners[0]].close()
    survivor = next(c for i, c in enumerate(clients) if i != winners[0])
    assert wait_until(lambda: survivor.get_controller_id() == -1)
    assert survivor.register_controller_and_increment_epoch(9, 0) == 2
    assert survivor.get_controller_id() == 9


# -- old ZooKeeper consumer offsets --------------------------------------------------------------

def test_consumer_offsets_round_trip(zk_client):
    zk_client.commit_consumer_offset("g", "t", 0, 5)
    zk_client.commit_consumer_offset("g", "t", 1, 7)
    zk_client.commit_consumer_offset("g", "u", 0, 0)
    zk_client.commit_consumer_offset("g", "t", 0, 9)  # overwrite
    zk_client.commit_consumer_offset("other", "t", 0, 1)
    assert zk_client.get_consumer_offsets("g") == {("t", 0): 9, ("t", 1): 7, ("u", 0): 0}
    assert raw(zk_client, "/consumers/g/offsets/t/0") == b"9"
    assert zk_client.get_consumer_offsets("never") == {}


def test_malformed_consumer_offset_names_the_znode(zk_client):
    zk_client._zk.create("/consumers/g/offsets/t/0", b"12abc", makepath=True)
    with pytest.raises(MalformedZnodeError, match="/consumers/g/offsets/t/0"):
        zk_client.get_consumer_offsets("g")
