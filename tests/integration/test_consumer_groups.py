"""Consumer groups against real ZooKeeper and pylog broker processes, driven by confluent-kafka
(librdkafka) and kafka-python: ``subscribe`` with a ``group.id`` reads every record (before the
group coordinator it read none, silently); commits survive a restart of the consumer and of the
coordinator's broker; members split the partitions, rebalance when one leaves, and a stopped
member is expelled after its session timeout; bad input gets Kafka's error and the group goes on.

Brokers run with ``group.initial.rebalance.delay.ms=0`` (a group forms as soon as its members
joined) and ``group.min.session.timeout.ms=1000`` so that expiry tests wait seconds, not the
default 6. Every wait is a condition with a deadline.

The single-broker tests share one broker for the module (``shared_broker``: each has its own
topic and group, and none stops the broker); the two tests that kill a coordinator's broker
start their own three.
"""

from __future__ import annotations

import importlib.util
import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.wire import ApiKey, ErrorCode, FindCoordinatorRequest
from integration_support import ClusterFactory

_RAW_SOCKET = Path(__file__).resolve().parent / "raw_socket.py"
if "pylog_raw_socket" in sys.modules:
    raw_socket = sys.modules["pylog_raw_socket"]
else:
    _spec = importlib.util.spec_from_file_location("pylog_raw_socket", _RAW_SOCKET)
    raw_socket = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = raw_socket
    _spec.loader.exec_module(raw_socket)

GROUP_SETTINGS = {"group_initial_rebalance_delay_ms": "0", "group_min_session_timeout_ms": "1000"}
RECORDS = 1_000
WAIT_S = 60.0


# ------------------------------------------------------------------------------------ helpers


def one_broker(broker_cluster):
    return broker_cluster(1, offsets_topic_replication_factor="1", offsets_topic_num_partitions="10",
                          **GROUP_SETTINGS)


@pytest.fixture(scope="module")
def shared_broker(zookeeper, tmp_path_factory):
    """``one_broker``'s broker, one for the module's single-broker tests."""
    factory = ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("groups-one"))
    try:
        yield one_broker(factory.make)
    finally:
        factory.close()


def wait_for_controller(admin: AdminClient, deadline: float) -> None:
    """Until Metadata names a controller. A broker answers ApiVersions (the fixture's readiness)
    before it has learned the controller, and its Metadata says controller -1 meanwhile (Kafka's
    ZooKeeper-mode brokers do the same). librdkafka's admin then waits for the controller and
    only looks again when its metadata changes, so a CreateTopics sent in that window hung its
    whole timeout, the topic never created (1 run in 8 at load 10: the broker's log shows it
    became the controller 40 ms after serving, then nothing until the test stopped it 30 s later).
    ``list_topics`` refreshes the handle's metadata, so the CreateTopics after it finds the controller."""
    while admin.list_topics(timeout=10).controller_id < 0:
        assert time.monotonic() < deadline, "no controller in the metadata"
        time.sleep(0.1)


def create_topic(bootstrap: str, name: str, partitions: int, replication: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + WAIT_S
    wait_for_controller(admin, deadline)
    while True:  # a broker that just started may not be in the controller's view yet
        try:
            admin.create_topics([NewTopic(name, partitions, replication)])[name].result(30)
            break
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.INVALID_REPLICATION_FACTOR or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    while True:  # every partition has a leader that takes writes
        topic = admin.list_topics(name, timeout=10).topics[name]
        if topic.error is None and len(topic.partitions) == partitions and all(
                p.leader >= 0 and p.error is None for p in topic.partitions.values()):
            return
        assert time.monotonic() < deadline, f"{name} has no leaders"
        time.sleep(0.1)


def produce(bootstrap: str, topic: str, start: int, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    failures = []
    for i in range(start, start + count):
        producer.produce(topic, value=b"v%d" % i, key=b"%d" % i, partition=i % partitions,
                         on_delivery=lambda err, msg: err and failures.append(err))
    assert producer.flush(30) == 0 and failures == []


def rdkafka_consumer(bootstrap: str, group: str, **extra) -> Consumer:
    settings = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                **extra}
    return Consumer(settings)


def read_values(consumer: Consumer, expected: int, timeout_s: float = WAIT_S) -> list[bytes]:
    """Poll until ``expected`` records came (or the deadline); the values in arrival order."""
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < expected and time.monotonic() < deadline:
        for message in consumer.consume(500, 0.2):
            assert message.error() is None, message.error()
            values.append(message.value())
    return values


def coordinator_of(port: int, group: str) -> tuple[int, int]:
    """(node id, error code) of FindCoordinator v4 for ``group``."""
    with raw_socket.Raw(port, client_id="groups-test") as raw:
        response = raw.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
            key_type=0, coordinator_keys=[group]))
    (answer,) = response.coordinators
    return answer.node_id, answer.error_code


def wait_for_coordinator(port: int, group: str) -> int:
    deadline = time.monotonic() + WAIT_S
    while True:
        node, error = coordinator_of(port, group)
        if error == ErrorCode.NONE:
            return node
        assert time.monotonic() < deadline, f"no coordinator for {group}: error {error}"
        time.sleep(0.2)


def assigned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


def poll_until(consumers: list[Consumer], condition, timeout_s: float = WAIT_S, what: str = "") -> float:
    """Poll every consumer (which drives their rebalances) until ``condition()``; seconds taken."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout_s, f"not reached in {timeout_s} s: {what}"
        for consumer in consumers:
            message = consumer.poll(0.05)
            assert message is None or message.error() is None or \
                message.error().code() == KafkaError._PARTITION_EOF, message.error()
    return time.monotonic() - started


# ---------------------------------------------------------------------- one broker: the basics


def test_subscribe_reads_every_record_then_resumes_after_its_commit(shared_broker):
    """The issue's motivating bug: a subscribed librdkafka consumer read 0 of 1,000 records.
    Then: commit, close, and a new consumer of the same group reads exactly what came after."""
    cluster = shared_broker
    create_topic(cluster.bootstrap, "orders", 3)
    produce(cluster.bootstrap, "orders", 0, RECORDS, 3)

    consumer = rdkafka_consumer(cluster.bootstrap, "readers")
    started = time.monotonic()
    consumer.subscribe(["orders"])
    poll_until([consumer], lambda: assigned(consumer) == {0, 1, 2}, what="assignment")
    formed_s = time.monotonic() - started
    values = read_values(consumer, RECORDS)
    assert sorted(values) == sorted(b"v%d" % i for i in range(RECORDS))
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition("orders", p) for p in range(3)], timeout=10)
    assert sorted((tp.partition, tp.offset) for tp in committed) == [(0, 334), (1, 333), (2, 333)]
    consumer.close()
    print(f"\na fresh group of one formed in {formed_s * 1000:.0f} ms (group.initial.rebalance.delay.ms=0)")

    produce(cluster.bootstrap, "orders", RECORDS, 300, 3)
    again = rdkafka_consumer(cluster.bootstrap, "readers")
    again.subscribe(["orders"])
    values = read_values(again, 300)
    values += read_values(again, 1, timeout_s=1.0)  # nothing more may come: no replay
    again.close()
    assert sorted(values) == sorted(b"v%d" % i for i in range(RECORDS, RECORDS + 300))


def test_kafka_python_subscribes_commits_and_resumes(shared_broker):
    from kafka import KafkaConsumer

    cluster = shared_broker
    create_topic(cluster.bootstrap, "kp-orders", 2)
    produce(cluster.bootstrap, "kp-orders", 0, RECORDS, 2)

    def consume(expected: int) -> list[bytes]:
        consumer = KafkaConsumer("kp-orders", bootstrap_servers=cluster.bootstrap, group_id="kp-readers",
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 consumer_timeout_ms=2_000)
        values: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                values += [record.value for record in batch]
        values += [record.value for batch in consumer.poll(timeout_ms=500).values() for record in batch]
        consumer.commit()
        consumer.close()
        return values

    assert sorted(consume(RECORDS)) == sorted(b"v%d" % i for i in range(RECORDS))
    produce(cluster.bootstrap, "kp-orders", RECORDS, 100, 2)
    assert sorted(consume(100)) == sorted(b"v%d" % i for i in range(RECORDS, RECORDS + 100))


def test_members_split_the_partitions_and_rebalance_when_one_leaves(shared_broker):
    cluster = shared_broker
    create_topic(cluster.bootstrap, "shared", 6)
    members = [rdkafka_consumer(cluster.bootstrap, "splitters") for _ in range(3)]
    for member in members:
        member.subscribe(["shared"])

    def split(group: list[Consumer], each: int) -> bool:
        sets = [assigned(m) for m in group]
        return all(len(s) == each for s in sets) and set().union(*sets) == set(range(6))

    poll_until(members, lambda: split(members, 2), what="three members with two partitions each")
    members[2].close()  # a LeaveGroup: the others rebalance at once, no session timeout
    rest = members[:2]
    took = poll_until(rest, lambda: split(rest, 3), what="two members with three partitions each")
    assert took < 6.0, f"rebalance after a leave took {took:.1f} s (the session timeout is 6 s)"
    print(f"\nrebalance after a LeaveGroup: {took * 1000:.0f} ms")
    for member in rest:
        member.close()


_STOPPABLE_MEMBER = textwrap.dedent("""
    import json, sys
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                         "session.timeout.ms": 2000, "heartbeat.interval.ms": 300,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([sys.argv[3]])
    last = None
    while True:
        consumer.poll(0.1)
        now = sorted(tp.partition for tp in consumer.assignment())
        if now != last:
            print(json.dumps(now), flush=True)
            last = now
""")


def test_a_stopped_member_is_expelled_after_its_session_timeout(shared_broker, tmp_path):
    cluster = shared_broker
    create_topic(cluster.bootstrap, "watched", 4)
    script = tmp_path / "member.py"
    script.write_text(_STOPPABLE_MEMBER)
    other = subprocess.Popen([sys.executable, str(script), cluster.bootstrap, "watchers", "watched"],
                             stdout=subprocess.PIPE, text=True)
    try:
        member = rdkafka_consumer(cluster.bootstrap, "watchers")
        member.subscribe(["watched"])
        poll_until([member], lambda: len(assigned(member)) == 2, what="the partitions split in two")
        other.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        poll_until([member], lambda: assigned(member) == {0, 1, 2, 3}, timeout_s=30,
                   what="the stopped member's partitions move")
        took = time.monotonic() - stopped
        # Expelled by its 2 s session timeout, not earlier; the rebalance waits at most the
        # survivor's rebalance timeout on top.
        assert 1.5 <= took < 20, took
        print(f"\nthe stopped member's partitions moved {took:.1f} s after SIGSTOP (session.timeout.ms 2000)")
        member.close()
    finally:
        other.send_signal(signal.SIGCONT)
        other.kill()
        other.wait(10)
        other.stdout.close()


def test_bad_input_gets_kafkas_errors_and_the_group_goes_on(shared_broker):
    from broker.wire import HeartbeatRequest, JoinGroupRequest, OffsetCommitRequest

    cluster = shared_broker
    create_topic(cluster.bootstrap, "guarded", 2)
    produce(cluster.bootstrap, "guarded", 0, 10, 2)
    member = rdkafka_consumer(cluster.bootstrap, "guards")
    member.subscribe(["guarded"])
    assert len(read_values(member, 10)) == 10
    port = cluster.brokers[0].port
    with raw_socket.Raw(port, client_id="bad-input") as raw:
        join = raw.call(ApiKey.JOIN_GROUP, 5, JoinGroupRequest(
            group_id="", session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
            protocol_type="consumer", protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range",
                                                                                          metadata=b"")]))
        assert join.error_code == ErrorCode.INVALID_GROUP_ID
        heartbeat = raw.call(ApiKey.HEARTBEAT, 4, HeartbeatRequest(group_id="guards", generation_id=1,
                                                                   member_id="nobody"))
        assert heartbeat.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        P = OffsetCommitRequest.OffsetCommitRequestPartition
        commit = raw.call(ApiKey.OFFSET_COMMIT, 8, OffsetCommitRequest(
            group_id="loners", generation_id_or_member_epoch=-1, member_id="", topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(name="guarded", partitions=[
                    P(partition_index=0, committed_offset=3, committed_metadata=""),
                    P(partition_index=9, committed_offset=3, committed_metadata="")]),
                OffsetCommitRequest.OffsetCommitRequestTopic(name="no-such-topic", partitions=[
                    P(partition_index=0, committed_offset=3, committed_metadata="")])]))
        assert [[p.error_code for p in t.partitions] for t in commit.topics] == [
            [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION], [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]]
    # The group goes on: its member still consumes and commits.
    produce(cluster.bootstrap, "guarded", 10, 10, 2)
    assert len(read_values(member, 10)) == 10
    member.commit(asynchronous=False)
    member.close()


# --------------------------------------------------- three brokers: the coordinator's broker dies


def test_committed_offsets_survive_the_coordinators_broker_being_killed(broker_cluster):
    """Offsets RF 3: a librdkafka member commits after every record (synchronously) while the
    broker that coordinates its group is SIGKILLed. The group re-forms on the new coordinator,
    and no offset whose commit was acknowledged is lost or goes backwards."""
    cluster = broker_cluster(3, offsets_topic_replication_factor="3", offsets_topic_num_partitions="10",
                             controlled_shutdown_enable="false", **GROUP_SETTINGS)
    create_topic(cluster.bootstrap, "ledger", 3, replication=3)
    produce(cluster.bootstrap, "ledger", 0, 600, 3)
    survivor_port = cluster.brokers[0].port
    member = rdkafka_consumer(cluster.bootstrap, "bookkeepers")
    member.subscribe(["ledger"])
    acknowledged: dict[int, int] = {}
    commits, failures, killed = 0, 0, None
    started = time.monotonic()
    deadline = started + 2 * WAIT_S
    while (killed is None or commits < 400) and time.monotonic() < deadline:
        message = member.poll(0.2)
        if message is None or message.error() is not None:
            continue
        try:
            member.commit(message=message, asynchronous=False)
        except KafkaException:
            failures += 1  # the coordinator moving: this commit may or may not have landed
            continue
        commits += 1
        acknowledged[message.partition()] = max(acknowledged.get(message.partition(), 0), message.offset() + 1)
        if killed is None and commits == 150:
            killed = wait_for_coordinator(survivor_port, "bookkeepers")
            cluster.broker(killed).kill()
            survivor_port = next(b.port for b in cluster.brokers if b.broker_id != killed)
    assert killed is not None and commits >= 400, (commits, failures)
    elapsed = time.monotonic() - started
    member.close()
    new_coordinator = wait_for_coordinator(survivor_port, "bookkeepers")
    assert new_coordinator != killed
    reader = rdkafka_consumer(",".join(b.bootstrap for b in cluster.brokers if b.broker_id != killed),
                              "bookkeepers")
    committed = {tp.partition: tp.offset for tp in
                 reader.committed([TopicPartition("ledger", p) for p in range(3)], timeout=30)}
    reader.close()
    for partition, offset in acknowledged.items():
        assert committed[partition] >= offset, (partition, committed[partition], offset)
    print(f"\n{commits} synchronous commits in {elapsed:.1f} s ({commits / elapsed:.0f}/s) across a "
          f"coordinator kill (broker {killed} -> {new_coordinator}), {failures} failed while it moved")


def test_a_rebalance_survives_the_coordinators_broker_being_killed(broker_cluster):
    """Two members are Stable; a third joins (a rebalance starts) and at that moment the
    coordinator's broker is SIGKILLed. The members find the new coordinator, which loaded the
    group from the replicated offsets partition, and the three of them split the partitions."""
    cluster = broker_cluster(3, offsets_topic_replication_factor="3", offsets_topic_num_partitions="10",
                             controlled_shutdown_enable="false", **GROUP_SETTINGS)
    create_topic(cluster.bootstrap, "rota", 6, replication=3)
    members = [rdkafka_consumer(cluster.bootstrap, "rotas") for _ in range(2)]
    for member in members:
        member.subscribe(["rota"])

    def split(group: list[Consumer]) -> bool:
        sets = [assigned(m) for m in group]
        return all(len(s) == 6 // len(group) for s in sets) and set().union(*sets) == set(range(6))

    poll_until(members, lambda: split(members), what="two members with three partitions each")
    coordinator = wait_for_coordinator(cluster.brokers[0].port, "rotas")
    members.append(rdkafka_consumer(cluster.bootstrap, "rotas"))
    members[2].subscribe(["rota"])
    members[2].poll(0.3)  # its FindCoordinator and JoinGroup are on the way: a rebalance begins
    cluster.broker(coordinator).kill()
    took = poll_until(members, lambda: split(members), what="three members with two partitions each")
    survivor = next(b for b in cluster.brokers if b.broker_id != coordinator)
    assert wait_for_coordinator(survivor.port, "rotas") != coordinator
    print(f"\nthe group of three formed {took:.1f} s after its coordinator's broker was killed")
    for member in members:
        member.close()
