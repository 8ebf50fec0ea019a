"""Operations on a real 3-broker cluster (issue 18).

Dynamic configs: IncrementalAlterConfigs and
AlterConfigs from confluent-kafka's admin client change topics, one broker and the cluster
default while an acks=all producer writes; the changes apply without a restart (a record over
the new max.message.bytes is refused, a smaller segment.bytes rolls segments), DescribeConfigs shows their sources and
synonyms, ZooKeeper holds them as Kafka does, and bad input gets Kafka's errors with nothing
changed. Nothing acknowledged is lost or duplicated.

CreatePartitions: ``pylog topics alter --partitions`` under the same load; the producer and a
consumer group (librdkafka) pick the new partitions up; too few partitions, or replicas on a
broker that does not exist, get Kafka's errors with nothing changed.

One cluster for the module.
"""

from __future__ import annotations

import argparse
import io
import json
import signal
import threading
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)
from kazoo.client import KazooClient

from broker.client import AdminClient as PylogAdmin
from broker.cluster.zk import KafkaZkClient
from broker.client.config_admin import OP_SET, RESOURCE_BROKER, describe_configs, incremental_alter_configs
from broker.client.partition_admin import alter_partition_reassignments, list_partition_reassignments
from broker.tools.delete_records import run_delete_records
from broker.tools.leader_election import add_leader_election_parser, run_leader_election
from broker.tools.log_dirs import run_log_dirs
from broker.tools.reassign import CANNOT_EXECUTE_BECAUSE_OF_EXISTING, add_reassign_parser, assignment_json, run_reassign
from broker.tools.topics import add_topics_parser, run_topics
from integration_support import ClusterFactory

pytestmark = [pytest.mark.integration]

DEADLINE_S = 30.0
TOPIC = "dyn"
SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    factory = ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("dynamic-configs"))
    try:
        yield factory.make(3, overrides={"controlled.shutdown.enable": "false",
                                         "offsets.topic.replication.factor": "1",
                                         "offsets.topic.num.partitions": "1"})
    finally:
        factory.close()


@pytest.fixture(scope="module")
def admin(cluster):
    client = AdminClient({"bootstrap.servers": cluster.bootstrap})
    _wait(lambda: len(client.list_topics(timeout=5).brokers) == 3, "all 3 brokers registered")
    futures = client.create_topics([NewTopic(TOPIC, 3, 3, config={"min.insync.replicas": "2"})])
    futures[TOPIC].result(DEADLINE_S)
    _wait(lambda: all(p.leader >= 0 for p in client.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions.values()),
          "leaders for the topic")
    return client


def _wait(condition, what: str, deadline_s: float = DEADLINE_S):
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            value = condition()
        except KafkaException as exc:  # a metadata call timing out under load: ask again
            if time.monotonic() > deadline:
                raise
            value, _ = None, exc
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _alter(admin, kind, name: str, *entries: tuple[str, str | None, AlterConfigOpType]):
    resource = ConfigResource(kind, name, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op) for key, value, op in entries])
    return admin.incremental_alter_configs([resource])[resource].result(DEADLINE_S)


def _describe(admin, kind, name: str) -> dict:
    resource = ConfigResource(kind, name)
    return admin.describe_configs([resource])[resource].result(DEADLINE_S)


def _produce_one(bootstrap: str, value: bytes) -> KafkaError | None:
    """One acks=all record to partition 0, the error it got (None: acknowledged)."""
    outcome = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 5000,
                         "retries": 0})
    producer.produce(TOPIC, value, partition=0, on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(DEADLINE_S)
    return outcome[0]


class _Load:
    """An acks=all idempotent producer writing numbered records until stopped."""

    def __init__(self, bootstrap: str, topic: str = TOPIC, first: int = 0) -> None:
        self.topic = topic
        self.first = first  # the first record's number (a second load on one topic starts higher)
        self.partitions: set[int] = set()
        self.offsets: dict[int, int] = {}  # record number -> offset
        self.acked: list[int] = []
        self.failed = 0
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                                   "linger.ms": 5, "topic.metadata.refresh.interval.ms": 500})
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.append(int(msg.value()))
            self.offsets[int(msg.value())] = msg.offset()
            self.partitions.add(msg.partition())
        else:
            self.failed += 1

    def _run(self) -> None:
        n = self.first
        while not self._stop.is_set():
            self._producer.produce(self.topic, str(n).encode(), key=str(n % 7).encode(), on_delivery=self._delivered)
            self._producer.poll(0.002)
            n += 1
        self._producer.flush(DEADLINE_S)

    def stop(self) -> list[int]:
        self._stop.set()
        self._thread.join(DEADLINE_S * 2)
        return self.acked


def _consume_all(bootstrap: str, expected: int, topic: str = TOPIC, first: int = 0) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-check", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: list[int] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None and msg.value().isdigit() and int(msg.value()) >= first:
                seen.append(int(msg.value()))
    finally:
        consumer.close()
    return seen


def test_topic_and_broker_configs_change_under_load_without_restart(cluster, admin):
    load = _Load(cluster.bootstrap)
    _wait(lambda: len(load.acked) > 200, "the load to get going")
    starts = [b.starts for b in cluster.brokers]

    # max.message.bytes: a record over the new limit is refused, then accepted once deleted
    _alter(admin, ConfigResource.Type.TOPIC, TOPIC, ("max.message.bytes", "2000", SET))
    _wait(lambda: (_produce_one(cluster.bootstrap, b"x" * 5000) or KafkaError(0)).code()
          == KafkaError.MSG_SIZE_TOO_LARGE, "max.message.bytes to apply")
    _alter(admin, ConfigResource.Type.TOPIC, TOPIC, ("max.message.bytes", None, DELETE),
           ("min.insync.replicas", "2", SET))
    assert _wait(lambda: _produce_one(cluster.bootstrap, b"z" * 5000) is None, "the topic to accept again") is True

    # the cluster default and one broker's own level, with their sources
    with PylogAdmin(cluster.bootstrap) as pylog_admin:  # confluent-kafka cannot name the default ("")
        incremental_alter_configs(pylog_admin, RESOURCE_BROKER, "", [("log.retention.ms", OP_SET, "86400000")])
        default = _wait(lambda: describe_configs(pylog_admin, RESOURCE_BROKER, ""), "the default to apply")
    assert [(c.name, c.value, c.source) for c in default] == [
        ("log.retention.ms", "86400000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)]
    _alter(admin, ConfigResource.Type.BROKER, "2", ("log.segment.bytes", "1048576", SET))
    topic = _wait(lambda: (lambda c: c if c["retention.ms"].value == "86400000" else None)(
        _describe(admin, ConfigResource.Type.TOPIC, TOPIC)), "the topic to inherit the default")
    assert topic["retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    assert topic["min.insync.replicas"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    broker2 = _wait(lambda: (lambda c: c if c["log.segment.bytes"].value == "1048576" else None)(
        _describe(admin, ConfigResource.Type.BROKER, "2")), "broker 2's own level")
    assert broker2["log.segment.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert broker2["log.retention.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value

    # broker 2 rolls its replicas' segments at 1 MiB: more than one segment once 3 MiB arrive
    big = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20})
    for _ in range(3 * 1024):
        big.produce(TOPIC, b"b" * 1000, partition=1)
    big.flush(DEADLINE_S)
    segments = cluster.broker(2).data_dir / f"{TOPIC}-1"
    _wait(lambda: len(list(segments.glob("*.log"))) >= 3, "broker 2 to roll 1 MiB segments")

    acked = load.stop()
    assert [b.starts for b in cluster.brokers] == starts, "a broker restarted"
    assert load.failed == 0
    seen = _consume_all(cluster.bootstrap, len(acked))
    assert len(seen) == len(set(seen)), "a record was duplicated"
    assert sorted(seen) == sorted(acked), "an acknowledged record was lost"


def test_zookeeper_holds_configs_as_kafka_does(cluster, admin):
    _alter(admin, ConfigResource.Type.TOPIC, TOPIC, ("retention.bytes", "123456789", SET))
    _wait(lambda: _describe(admin, ConfigResource.Type.TOPIC, TOPIC)["retention.bytes"].value == "123456789",
          "the change to reach the brokers")  # the next test compares descriptions
    zk = KazooClient(hosts=cluster.zk_connect)
    zk.start()
    try:
        data, _ = zk.get(f"/config/topics/{TOPIC}")
        assert json.loads(data) == {"version": 1, "config": {"min.insync.replicas": "2",
                                                               "retention.bytes": "123456789"}}
        changes = [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in sorted(zk.get_children("/config/changes"))]
        assert {"version": 2, "entity_path": f"topics/{TOPIC}"} in changes
        assert {"version": 2, "entity_path": "brokers/<default>"} in changes
        assert json.loads(zk.get("/config/brokers/2")[0])["config"] == {"log.segment.bytes": "1048576"}
    finally:
        zk.stop()
        zk.close()
    client = KafkaZkClient(cluster.zk_connect, 10_000, 10_000)
    client.start()
    try:  # Kafka's purge: the notifications older than the limit go, the newest stays readable
        assert client.purge_config_changes(60_000, int(time.time() * 1000)) == 0  # all younger than 1 min
        newest = client.last_config_change()
        assert client.purge_config_changes(-1, int(time.time() * 1000)) >= 3
        assert client.last_config_change() == -1 and client.get_config_changes(newest - 1) == []
    finally:
        client.close()


@pytest.mark.parametrize("kind, name, entry, code", [
    (ConfigResource.Type.TOPIC, TOPIC, ("no.such.config", "1"), KafkaError.INVALID_CONFIG),
    (ConfigResource.Type.TOPIC, TOPIC, ("retention.ms", "abc"), KafkaError.INVALID_CONFIG),
    (ConfigResource.Type.TOPIC, "no-such-topic", ("retention.ms", "1"), KafkaError.UNKNOWN_TOPIC_OR_PART),
    (ConfigResource.Type.BROKER, "1", ("num.partitions", "3"), KafkaError.INVALID_REQUEST),
    (ConfigResource.Type.BROKER, "1", ("leader.replication.throttled.rate", "-5"), KafkaError.INVALID_REQUEST),
])
def test_bad_input_gets_kafkas_error_and_changes_nothing(cluster, admin, kind, name, entry, code):
    before = _describe(admin, kind, name) if name != "no-such-topic" else {}
    with pytest.raises(KafkaException) as err:
        _alter(admin, kind, name, (*entry, SET))
    assert err.value.args[0].code() == code
    if before:
        after = _describe(admin, kind, name)
        assert {k: v.value for k, v in after.items()} == {k: v.value for k, v in before.items()}


# --------------------------------------------------------------------------- CreatePartitions

GROWN = "grown"


def _partition_count(admin, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=5).topics[topic].partitions)


def _pylog_topics(cluster, *args: str) -> str:
    out = io.StringIO()
    parser = argparse.ArgumentParser()
    add_topics_parser(parser.add_subparsers(dest="command"))
    assert run_topics(parser.parse_args(["topics", *args, "--bootstrap-server", cluster.bootstrap]), out) == 0
    return out.getvalue()


def test_create_partitions_under_load_groups_and_producers_follow(cluster, admin):
    admin.create_topics([NewTopic(GROWN, 2, 3, config={"min.insync.replicas": "2"})])[GROWN].result(DEADLINE_S)
    _wait(lambda: _partition_count(admin, GROWN) == 2, "the topic")
    member = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "grown-group",
                       "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 500})
    member.subscribe([GROWN])
    load = _Load(cluster.bootstrap, GROWN)
    try:
        _wait(lambda: member.poll(0.2) is not None and len(member.assignment()) == 2, "the member's 2 partitions")
        _pylog_topics(cluster, "alter", "--topic", GROWN, "--partitions", "4")
        _wait(lambda: _partition_count(admin, GROWN) == 4, "every broker to know 4 partitions")
        _wait(lambda: {2, 3} <= load.partitions, "the producer to write to the new partitions")
        _wait(lambda: (member.poll(0.2), len(member.assignment()) == 4)[1], "the group to take the new partitions")
    finally:
        acked = load.stop()
        member.close()
    seen = _consume_all(cluster.bootstrap, len(acked), GROWN)
    assert load.failed == 0
    assert len(seen) == len(set(seen)), "a record was duplicated"
    assert sorted(seen) == sorted(acked), "an acknowledged record was lost"


@pytest.mark.parametrize("count, assignment, code", [
    (3, None, KafkaError.INVALID_PARTITIONS),
    (4, None, KafkaError.INVALID_PARTITIONS),
    (5, [[1, 2, 9]], KafkaError.INVALID_REPLICA_ASSIGNMENT),
    (5, [[1, 2]], KafkaError.INVALID_REPLICA_ASSIGNMENT),
])
def test_create_partitions_bad_input_changes_nothing(cluster, admin, count, assignment, code):
    before = _partition_count(admin, GROWN)
    assert before == 4  # after the test above
    new = NewPartitions(GROWN, count) if assignment is None else NewPartitions(GROWN, count, assignment)
    with pytest.raises(KafkaException) as err:
        admin.create_partitions([new])[GROWN].result(DEADLINE_S)
    assert err.value.args[0].code() == code
    assert _partition_count(admin, GROWN) == before


# ------------------------------------------------------------------------------ DeleteRecords

TRIMMED = "trimmed"


def _delete_records(cluster, tmp_path, entries: list[dict]) -> tuple[int, str]:
    path = tmp_path / "offsets.json"
    path.write_text(json.dumps({"partitions": entries, "version": 1}))
    out = io.StringIO()
    code = run_delete_records(argparse.Namespace(bootstrap_server=cluster.bootstrap, offset_json_file=path),
                              out, io.StringIO())
    return code, out.getvalue()


def test_delete_records_under_load_moves_the_log_start(cluster, admin, tmp_path):
    admin.create_topics([NewTopic(TRIMMED, 1, 3, config={"min.insync.replicas": "2"})])[TRIMMED].result(DEADLINE_S)
    _wait(lambda: _partition_count(admin, TRIMMED) == 1, "the topic")
    load = _Load(cluster.bootstrap, TRIMMED)
    _wait(lambda: len(load.acked) > 300, "records to delete")
    code, out = _delete_records(cluster, tmp_path, [{"topic": TRIMMED, "partition": 0, "offset": 200}])
    assert code == 0 and out.endswith(f"partition: {TRIMMED}-0\tlow_watermark: 200\n"), out
    # bad input: above the high watermark: refused, nothing moves
    code, out = _delete_records(cluster, tmp_path, [{"topic": TRIMMED, "partition": 0, "offset": 10**12}])
    assert code == 1 and "OFFSET_OUT_OF_RANGE" in out, out
    acked = load.stop()
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "trimmed-check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(TRIMMED, 0), timeout=DEADLINE_S)
    finally:
        consumer.close()
    assert low == 200 and high >= len(acked)
    kept = sorted(v for v in acked if load.offsets[v] >= 200)
    seen = _consume_all(cluster.bootstrap, len(kept), TRIMMED)
    assert len(seen) == len(set(seen)), "a record was duplicated"
    assert sorted(seen) == kept, "an acknowledged record above the new log start was lost"


def test_delete_records_refused_on_a_compacted_topic(cluster, admin, tmp_path):
    admin.create_topics([NewTopic("compacted-only", 1, 3, config={"cleanup.policy": "compact"})])[
        "compacted-only"].result(DEADLINE_S)
    _wait(lambda: _partition_count(admin, "compacted-only") == 1, "the topic")
    # (a new topic's leader may open its log before its broker has read the topic's config: wait)
    _wait(lambda: "POLICY_VIOLATION" in _delete_records(
        cluster, tmp_path, [{"topic": "compacted-only", "partition": 0, "offset": -1}])[1], "POLICY_VIOLATION")


# ------------------------------------------------------------------------------ ElectLeaders

LED = "led"


def _leaders(admin, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    meta = admin.list_topics(topic, timeout=10).topics[topic].partitions
    return {p: (m.leader, list(m.replicas), list(m.isrs)) for p, m in meta.items()}


def _leader_election(cluster, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    parser = argparse.ArgumentParser()
    add_leader_election_parser(parser.add_subparsers(dest="command"))
    code = run_leader_election(parser.parse_args(["leader-election", "--bootstrap-server", cluster.bootstrap,
                                                  *args]), out, io.StringIO())
    return code, out.getvalue()


def test_preferred_leader_election_after_a_broker_comes_back_under_load(cluster, admin):
    admin.create_topics([NewTopic(LED, 3, 3, config={"min.insync.replicas": "2"})])[LED].result(DEADLINE_S)
    _wait(lambda: all(leader >= 0 for leader, _, _ in _leaders(admin, LED).values()), "leaders")
    load = _Load(cluster.bootstrap, LED)
    try:
        _wait(lambda: len(load.acked) > 100, "the load to get going")
        victim = next(replicas[0] for leader, replicas, _ in _leaders(admin, LED).values())
        cluster.broker(victim).kill()
        _wait(lambda: all(leader not in (victim, -1) for leader, _, _ in _leaders(admin, LED).values()),
              "leadership to leave the killed broker")
        cluster.broker(victim).start()
        _wait(lambda: all(len(isr) == 3 for _, _, isr in _leaders(admin, LED).values()), "the ISR to fill again")
        moved = sorted(p for p, (leader, replicas, _) in _leaders(admin, LED).items() if leader != replicas[0])
        assert moved, "no partition lost its preferred leader"
        code, out = _leader_election(cluster, "--election-type", "PREFERRED", "--topic", LED,
                                     "--partition", str(moved[0]))
        assert (code, out) == (0, f"Successfully completed leader election (PREFERRED) for partitions {LED}-{moved[0]}\n")
        code, out = _leader_election(cluster, "--election-type", "PREFERRED", "--all-topic-partitions")
        assert code == 0, out
        _wait(lambda: all(leader == replicas[0] for leader, replicas, _ in _leaders(admin, LED).values()),
              "every partition led by its preferred replica")
        code, out = _leader_election(cluster, "--election-type", "UNCLEAN", "--topic", LED, "--partition", "0")
        assert (code, out) == (0, f"Valid replica already elected for partitions {LED}-0\n")
        code, out = _leader_election(cluster, "--election-type", "PREFERRED", "--topic", LED, "--partition", "9")
        assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in out, out
    finally:
        acked = load.stop()
        for broker in cluster.brokers:  # a failure between kill and start must not leave it down
            if not broker.is_running():
                broker.start()
    seen = _consume_all(cluster.bootstrap, len(acked), LED)
    assert len(seen) == len(set(seen)), "a record was duplicated"
    assert sorted(seen) == sorted(acked), "an acknowledged record was lost"


# --------------------------------------------------------------------------- DescribeLogDirs

def test_log_dirs_show_each_replica_with_its_size(cluster, admin):
    out = io.StringIO()
    assert run_log_dirs(argparse.Namespace(bootstrap_server=cluster.bootstrap, describe=True,
                                           topic_list=f"{LED},{TRIMMED}", broker_list=""), out, io.StringIO()) == 0
    first, second, document = out.getvalue().splitlines()
    assert (first, second) == ("Querying brokers for log directories information",
                               "Received log directory information from brokers 1,2,3")
    brokers = json.loads(document)["brokers"]
    for broker in brokers:
        (log_dir,) = broker["logDirs"]
        assert log_dir["error"] is None and log_dir["logDir"] == str(cluster.broker(broker["broker"]).data_dir)
        sizes = {p["partition"]: p["size"] for p in log_dir["partitions"]}
        assert set(sizes) == {f"{LED}-0", f"{LED}-1", f"{LED}-2", f"{TRIMMED}-0"}  # RF 3 on 3 brokers
        data = cluster.broker(broker["broker"]).data_dir
        on_disk = {name: sum(f.stat().st_size for f in (data / name).glob("*.log")) for name in sizes}
        assert sizes == on_disk and sum(sizes.values()) > 0


# ----------------------------------------------------------------------- partition reassignment

MOVED = "moved"


def test_reassignment_moves_a_partition_under_load(cluster, admin):
    admin.create_topics([NewTopic(MOVED, 1, replica_assignment=[[1, 2]],
                                  config={"min.insync.replicas": "2"})])[
        MOVED].result(DEADLINE_S)
    _wait(lambda: _leaders(admin, MOVED)[0][0] >= 0, "a leader")
    load = _Load(cluster.bootstrap, MOVED)
    try:
        _wait(lambda: len(load.acked) > 300, "records to move")
        with PylogAdmin(cluster.bootstrap) as pylog_admin:
            # bad input first: nothing changes
            bad = alter_partition_reassignments(pylog_admin, {(MOVED, 0): [2, 9], (MOVED, 5): [1, 2]})
            assert bad[(MOVED, 0)][0] == KafkaError.INVALID_REPLICA_ASSIGNMENT
            assert bad[(MOVED, 5)][0] == KafkaError.UNKNOWN_TOPIC_OR_PART
            assert alter_partition_reassignments(pylog_admin, {(MOVED, 0): None})[(MOVED, 0)][0] == 85
            assert list_partition_reassignments(pylog_admin) == {}
            assert alter_partition_reassignments(pylog_admin, {(MOVED, 0): [2, 3]}) == {(MOVED, 0): (0, None)}
            _wait(lambda: list_partition_reassignments(pylog_admin) == {}, "the reassignment to complete")
        _wait(lambda: (lambda leader, replicas, isr: sorted(replicas) == [2, 3] and sorted(isr) == [2, 3]
                       and leader in (2, 3))(*_leaders(admin, MOVED)[0]), "replicas 2,3 in the ISR")
        _wait(lambda: not (cluster.broker(1).data_dir / f"{MOVED}-0").exists(), "broker 1 to delete its copy")
    finally:
        acked = load.stop()
    assert load.failed == 0
    seen = _consume_all(cluster.bootstrap, len(acked), MOVED)
    assert len(seen) == len(set(seen)), "a record was duplicated"
    assert sorted(seen) == sorted(acked), "an acknowledged record was lost"


def _reassign(cluster, *args: str) -> tuple[int, str]:
    """``pylog reassign ARGS``: (exit code, stdout)."""
    out = io.StringIO()
    parser = argparse.ArgumentParser()
    add_reassign_parser(parser.add_subparsers(dest="command"))
    code = run_reassign(parser.parse_args(["reassign", "--bootstrap-server", cluster.bootstrap, *args]),
                        out, io.StringIO())
    return code, out.getvalue()


def test_a_reassignment_to_a_broker_that_dies_can_be_cancelled(cluster, admin, tmp_path):
    """The adding replica's broker (not the controller) stops (SIGSTOP) right after the
    reassignment starts: it never joins the ISR, the reassignment stays in progress, a cancel puts
    the original replicas back; the broker, resumed, drops its copy. Under acks=all load, nothing
    acknowledged is lost. While it is in progress, ``pylog reassign --execute`` without
    ``--additional`` is refused with kafka-reassign-partitions' message."""
    load = _Load(cluster.bootstrap, MOVED, first=10**6)
    controller = admin.list_topics(timeout=5).controller_id
    victim_id = next(b for b in (1, 2, 3) if b != controller and b not in _leaders(admin, MOVED)[0][1])if any(
        b != controller and b not in _leaders(admin, MOVED)[0][1] for b in (1, 2, 3)) else None
    victim = cluster.broker(victim_id) if victim_id is not None else None
    try:
        _wait(lambda: len(load.acked) > 100, "the load to get going")
        with PylogAdmin(cluster.bootstrap) as pylog_admin:
            if victim is None:  # the only broker outside the replicas is the controller: move away first
                victim_id = next(b for b in _leaders(admin, MOVED)[0][1] if b != controller)
                victim = cluster.broker(victim_id)
                others = sorted({1, 2, 3} - {victim_id})
                assert alter_partition_reassignments(pylog_admin, {(MOVED, 0): others})[(MOVED, 0)][0] == 0
                _wait(lambda: list_partition_reassignments(pylog_admin) == {}, "the first move")
                _wait(lambda: victim_id not in _leaders(admin, MOVED)[0][1], "the first move in metadata")
            original = _leaders(admin, MOVED)[0][1]
            target = [original[0], victim_id]
            assert list_partition_reassignments(pylog_admin) == {}  # connected to the controller before
            victim.kill(signal.SIGSTOP)  # (a bootstrap to the stopped broker would hang past its session)
            assert alter_partition_reassignments(pylog_admin, {(MOVED, 0): target}) == {(MOVED, 0): (0, None)}
            ongoing = list_partition_reassignments(pylog_admin)
            expected = list(dict.fromkeys([*target, *original]))
            assert ongoing == {(MOVED, 0): (expected, [victim_id], [r for r in original if r not in target])}, ongoing
            # kafka-reassign-partitions refuses a new --execute while one is in progress (no --additional)
            (tmp_path / "again.json").write_text(assignment_json({(MOVED, 0): original}))
            assert _reassign(cluster, "--execute", "--reassignment-json-file", str(tmp_path / "again.json")) == (
                1, CANNOT_EXECUTE_BECAUSE_OF_EXISTING + "\n")
            assert list_partition_reassignments(pylog_admin) == ongoing
            _wait(lambda: len(admin.list_topics(timeout=5).brokers) == 2, "the stopped broker's session to end")
            assert list_partition_reassignments(pylog_admin) == ongoing  # it cannot complete
            assert alter_partition_reassignments(pylog_admin, {(MOVED, 0): None}) == {(MOVED, 0): (0, None)}
            _wait(lambda: list_partition_reassignments(pylog_admin) == {}, "the cancel to complete")
        _wait(lambda: sorted(_leaders(admin, MOVED)[0][1]) == sorted(original), "the original replicas back")
    finally:
        if victim is not None:
            victim.kill(signal.SIGCONT)
        acked = load.stop()
    _wait(lambda: len(admin.list_topics(timeout=5).brokers) == 3, "the resumed broker back")
    _wait(lambda: not (victim.data_dir / f"{MOVED}-0").exists(), "the resumed broker to drop its copy")
    seen = _consume_all(cluster.bootstrap, len(acked), MOVED, first=10**6)
    assert len(seen) == len(set(seen)), "a record was duplicated"
    assert sorted(seen) == sorted(acked), "an acknowledged record was lost"


def test_pylog_reassign_generate_execute_verify(cluster, admin, tmp_path):
    """kafka-reassign-partitions' three steps with its JSON: a proposal over brokers 1,3, the
    move, and --verify until it says completed."""
    def reassign(*args: str) -> tuple[int, str]:
        return _reassign(cluster, *args)

    _wait(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "all 3 brokers registered")
    (tmp_path / "topics.json").write_text(json.dumps({"topics": [{"topic": MOVED}], "version": 1}))
    code, out = reassign("--generate", "--topics-to-move-json-file", str(tmp_path / "topics.json"),
                         "--broker-list", "1,3")
    assert code == 0 and out.startswith("Current partition replica assignment\n"), out
    proposed = json.loads(out.split("Proposed partition reassignment configuration\n")[1])
    assert [sorted(p["replicas"]) for p in proposed["partitions"]] == [[1, 3]]
    (tmp_path / "plan.json").write_text(json.dumps(proposed))
    code, out = reassign("--execute", "--reassignment-json-file", str(tmp_path / "plan.json"))
    assert code == 0 and out.endswith(f"Successfully started partition reassignments for {MOVED}-0\n"), out
    _wait(lambda: reassign("--verify", "--reassignment-json-file", str(tmp_path / "plan.json")) == (
        0, f"Status of partition reassignment:\nReassignment of partition {MOVED}-0 is completed.\n"
           f"Clearing broker-level throttles on brokers 1,2,3\nClearing topic-level throttles on topic {MOVED}\n"),
        "--verify to say completed")


RESUMED = "resumed"
BULK_BYTES = 16 << 20  # enough that the new replica's copy takes longer than killing the controller


def _dir_bytes(path) -> int:
    return sum(f.stat().st_size for f in path.glob("*.log")) if path.exists() else 0


def test_controller_killed_mid_reassignment_the_next_one_finishes_it(cluster, admin):
    """SIGKILL the controller right after it started moving a partition (16 MiB, the new replica
    still copying; the move still in progress in ZooKeeper, KIP-455's ``adding_replicas`` in
    ``/brokers/topics/<t>``): the next controller resumes it (``ControllerCore`` on election); the
    new replica joins the ISR, becomes the only replica and the leader. Under acks=all load,
    nothing acknowledged is lost or duplicated."""
    _wait(lambda: len(admin.list_topics(timeout=10).brokers) == 3, "all 3 brokers registered")
    controller = admin.list_topics(timeout=5).controller_id
    source, target = [b for b in (1, 2, 3) if b != controller]
    admin.create_topics([NewTopic(RESUMED, 1, replica_assignment=[[source]])])[RESUMED].result(DEADLINE_S)
    _wait(lambda: _leaders(admin, RESUMED)[0][0] == source, "a leader")
    bulk = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 20})
    for _ in range(BULK_BYTES // (100 << 10)):
        bulk.produce(RESUMED, b"x" * (100 << 10), partition=0)
        bulk.poll(0)
    assert bulk.flush(DEADLINE_S) == 0
    load = _Load(cluster.bootstrap, RESUMED)
    killed = cluster.broker(controller)
    try:
        _wait(lambda: len(load.acked) > 100, "the load to get going")
        with PylogAdmin(cluster.broker(source).bootstrap) as pylog_admin:
            assert alter_partition_reassignments(pylog_admin, {(RESUMED, 0): [target]}) == {(RESUMED, 0): (0, None)}
        killed.kill(signal.SIGKILL)
        copied, whole = (_dir_bytes(cluster.broker(b).data_dir / f"{RESUMED}-0") for b in (target, source))
        zk = KafkaZkClient(cluster.zk_connect, 10_000, 10_000)
        zk.start()
        try:  # the killed controller did not finish it: the next one must
            assert dict(zk.get_topic_assignment(RESUMED).adding_replicas) == {0: (target,)}, (copied, whole)
        finally:
            zk.close()
        _wait(lambda: admin.list_topics(timeout=5).controller_id in (source, target), "a new controller")
        _wait(lambda: _leaders(admin, RESUMED)[0] == (target, [target], [target]),
              "the new controller to finish the move", deadline_s=2 * DEADLINE_S)
        with PylogAdmin(cluster.broker(target).bootstrap) as pylog_admin:
            assert list_partition_reassignments(pylog_admin) == {}
        _wait(lambda: not (cluster.broker(source).data_dir / f"{RESUMED}-0").exists(), "the old replica deleted")
    finally:
        if not killed.is_running():
            killed.start()
        acked = load.stop()
    assert load.failed == 0
    seen = _consume_all(cluster.bootstrap, len(acked), RESUMED)
    assert len(seen) == len(set(seen)), "a record was duplicated"
    assert sorted(seen) == sorted(acked), "an acknowledged record was lost"
