"""``pylog groups`` (and ``GroupAdmin``/``KafkaOffsetStore`` under it) against a real group
coordinator: the same scenarios on Apache Kafka and on pylog, with a confluent-kafka consumer
as the group's member. What is asserted is what Apache Kafka 4.1's ``kafka-consumer-groups``
shows and refuses in the same situation (checked when these tests were written)."""

from __future__ import annotations

import argparse
import io
import itertools
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from broker.client.offset_store import KafkaOffsetStore, ZkOffsetStore
from broker.client.producer import Producer
from broker.tools.groups import add_groups_parser, run_groups
from broker.tools.kafka_peer import run_kafka_tool
from peer_support import on_both_peers, unique_topic

DEADLINE_S = 30.0
_groups = itertools.count()

def unique_group() -> str:
    return f"tool-group-{next(_groups)}-{time.monotonic_ns() % 1_000_000}"


def wait_until(condition, what: str, timeout_s: float = DEADLINE_S):
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)
    return value


def groups(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    add_groups_parser(parser.add_subparsers(dest="command"))
    out, err = io.StringIO(), io.StringIO()
    code = run_groups(parser.parse_args(["groups", *argv]), out, err)
    return code, out.getvalue(), err.getvalue()


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    with Producer(bootstrap, acks="all") as producer:
        for partition, count in per_partition.items():
            for i in range(count):
                producer.send(topic, f"{partition}-{i}".encode(), partition=partition)
        producer.flush()


class Member:
    """A confluent-kafka consumer subscribed to ``topic``, the group's only member; records a
    poll returns before the test asks for them are kept for ``read``."""

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str = "tool-test") -> None:
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": client_id,
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        self.values: list[bytes] = []
        self.consumer.subscribe([topic])
        wait_until(lambda: self._poll() or self.consumer.assignment(), f"{group} owns {topic}")

    def _poll(self) -> bool:
        message = self.consumer.poll(0.1)
        if message is not None and message.error() is None:
            self.values.append(message.value())
        return False

    def read(self, count: int) -> list[bytes]:
        wait_until(lambda: self._poll() or len(self.values) >= count, f"{count} records read")
        return self.values

    def commit(self, offsets=None) -> None:
        if offsets is None:
            self.consumer.commit(asynchronous=False)
        else:
            self.consumer.commit(offsets=offsets, asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


@on_both_peers("system")
def test_describe_shows_lag_members_and_refuses_changes_while_active(system):
    bootstrap, topic, group = system.bootstrap, unique_topic("tool-lag"), unique_group()
    system.create_topic(topic, partitions=2)
    produce(bootstrap, topic, {0: 10, 1: 10})
    consumer = Member(bootstrap, group, topic)
    try:
        consumer.commit([TopicPartition(topic, 0, 7), TopicPartition(topic, 1, 4)])
        code, out, _ = groups("describe", "--bootstrap-server", bootstrap, "--group", group)
        rows = table(out)
        assert rows[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                           "CONSUMER-ID", "HOST", "CLIENT-ID"]
        assert [r[:6] for r in rows[1:]] == [[group, topic, "0", "7", "10", "3"], [group, topic, "1", "4", "10", "6"]]
        assert {r[6].startswith("tool-test-") and r[8] == "tool-test" for r in rows[1:]} == {True}
        theirs = run_kafka_tool("kafka-consumer-groups", ["--bootstrap-server", bootstrap, "--describe",
                                                           "--group", group])
        assert theirs.returncode == 0, theirs.stderr.decode()
        # Kafka's own tool, on the same group, shows the same rows (its order within a member
        # follows a hash map's; ours is by partition).
        kafka_rows = table(theirs.stdout.decode())
        assert kafka_rows[0] == rows[0] and sorted(kafka_rows[1:]) == rows[1:]
        _, members, _ = groups("describe", "--bootstrap-server", bootstrap, "--group", group, "--members", "--verbose")
        assert table(members)[1][4:] == ["2", f"{topic}:0,1"]
        _, state, _ = groups("describe", "--bootstrap-server", bootstrap, "--group", group, "--state")
        assert table(state)[1][-3:] == ["range", "Stable", "1"]
        _, listed, _ = groups("list", "--bootstrap-server", bootstrap, "--state", "Stable")
        assert [group, "Stable"] in table(listed)

        with pytest.raises(ValueError, match=f"Assignments can only be reset if the group '{group}' is "
                                             f"inactive, but the current state is Stable"):
            groups("reset-offsets", "--bootstrap-server", bootstrap, "--group", group, "--topic", topic,
                   "--to-earliest", "--execute")
        with pytest.raises(ValueError, match="NON_EMPTY_GROUP"):
            groups("delete", "--bootstrap-server", bootstrap, "--group", group)
        with pytest.raises(ValueError, match="GROUP_SUBSCRIBED_TO_TOPIC"):
            groups("delete-offsets", "--bootstrap-server", bootstrap, "--group", group, "--topic", topic)
        with KafkaOffsetStore(bootstrap) as store:
            assert store.fetch(group) == {(topic, 0): 7, (topic, 1): 4}  # nothing was changed
            with pytest.raises(Exception, match="UNKNOWN_MEMBER_ID"):  # a simple commit is refused
                store.commit(group, {(topic, 0): 0})
    finally:
        consumer.close()


@on_both_peers("system")
def test_reset_to_earliest_then_a_consumer_reads_again(system):
    bootstrap, topic, group = system.bootstrap, unique_topic("tool-reset"), unique_group()
    system.create_topic(topic, partitions=2)
    produce(bootstrap, topic, {0: 5, 1: 3})
    first = Member(bootstrap, group, topic)
    try:
        assert len(first.read(8)) == 8
        first.commit()
    finally:
        first.close()  # LeaveGroup: the group is Empty at once
    _, out, err = groups("describe", "--bootstrap-server", bootstrap, "--group", group)
    assert [r[3:6] for r in table(out)[1:]] == [["5", "5", "0"], ["3", "3", "0"]]
    assert f"Consumer group '{group}' has no active members." in err

    _, plan, err = groups("reset-offsets", "--bootstrap-server", bootstrap, "--group", group, "--all-topics",
                          "--to-earliest")
    assert table(plan)[1:] == [[group, topic, "0", "0"], [group, topic, "1", "0"]]
    assert "--execute option is missing" in err
    with KafkaOffsetStore(bootstrap) as store:
        assert store.fetch(group) == {(topic, 0): 5, (topic, 1): 3}  # a dry run changes nothing
    groups("reset-offsets", "--bootstrap-server", bootstrap, "--group", group, "--topic", f"{topic}:0",
           "--shift-by", "-2", "--execute")
    groups("reset-offsets", "--bootstrap-server", bootstrap, "--group", group, "--topic", f"{topic}:1",
           "--to-earliest", "--execute")
    with KafkaOffsetStore(bootstrap) as store:
        assert store.fetch(group) == {(topic, 0): 3, (topic, 1): 0}

    again = Member(bootstrap, group, topic)
    try:
        assert sorted(again.read(5)) == sorted([b"0-3", b"0-4", b"1-0", b"1-1", b"1-2"])
    finally:
        again.close()
    _, out, _ = groups("delete", "--bootstrap-server", bootstrap, "--group", group)
    assert f"'{group}'" in out and "successful" in out
    _, listed, _ = groups("list", "--bootstrap-server", bootstrap)
    assert group not in listed.split()


@on_both_peers("system")
def test_kafka_offset_store_round_trip(system):
    bootstrap, topic, group = system.bootstrap, unique_topic("tool-store"), unique_group()
    system.create_topic(topic, partitions=3)
    with KafkaOffsetStore(bootstrap) as store:
        assert store.fetch(group) == {}
        store.commit(group, {(topic, 0): 4, (topic, 2): 9})
        store.commit(group, {(topic, 0): 6})
        assert store.fetch(group) == {(topic, 0): 6, (topic, 2): 9}
        assert store.fetch(group, ["other"]) == {}
        assert group in store.groups()
        store.delete(group, topic)
        assert store.fetch(group) == {}
        store.commit(group, {(topic, 1): 1})
        store.delete(group)
        store.delete(group)  # deleting a group that is gone is not an error, as in ZooKeeper
        assert group not in store.groups()


@on_both_peers("system")
def test_zookeeper_store_beside_the_kafka_store(system, zookeeper):
    """Groups whose offsets live in ZooKeeper keep working, and ``--store all`` shows both."""
    bootstrap, topic = system.bootstrap, unique_topic("tool-zk")
    zk_group, kafka_group = unique_group(), unique_group()
    system.create_topic(topic, partitions=1)
    produce(bootstrap, topic, {0: 6})
    with ZkOffsetStore(zookeeper.connect_string) as zk, KafkaOffsetStore(bootstrap) as kafka:
        zk.commit(zk_group, {(topic, 0): 2})
        kafka.commit(kafka_group, {(topic, 0): 5})
    both = ("--bootstrap-server", bootstrap, "--zookeeper-connect", zookeeper.connect_string, "--store", "all")
    _, listed, _ = groups("list", *both)
    assert [zk_group, "zookeeper"] in table(listed) and [kafka_group, "kafka"] in table(listed)
    _, out, _ = groups("describe", *both, "--group", zk_group, "--group", kafka_group)
    rows = table(out)
    assert rows[0][-1] == "STORE"
    assert [zk_group, topic, "0", "2", "6", "4", "-", "-", "-", "zookeeper"] in rows
    assert [kafka_group, topic, "0", "5", "6", "1", "-", "-", "-", "kafka"] in rows
    zk_only = ("--bootstrap-server", bootstrap, "--zookeeper-connect", zookeeper.connect_string)
    groups("reset-offsets", *zk_only, "--group", zk_group, "--all-topics", "--to-latest", "--execute")
    _, out, _ = groups("describe", *zk_only, "--group", zk_group)
    assert table(out) == [["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"],
                          [zk_group, topic, "0", "6", "6", "0"]]
    groups("delete", *zk_only, "--group", zk_group)
    with ZkOffsetStore(zookeeper.connect_string) as zk:
        assert zk.fetch(zk_group) == {}


@on_both_peers("system")
def test_reset_plans_by_time_and_clamped_offsets(system):
    """Dry runs for a group that does not exist yet (Kafka resets a Dead group too): the plan
    comes from ListOffsets by timestamp and the log's bounds."""
    bootstrap, topic, group = system.bootstrap, unique_topic("tool-time"), unique_group()
    system.create_topic(topic, partitions=1)
    hour_ms = 3_600_000
    now_ms = int(time.time() * 1000)
    with Producer(bootstrap, acks="all") as producer:
        for i, ago in enumerate((3, 2, 1, 0)):
            producer.send(topic, f"r{i}".encode(), partition=0, timestamp_ms=now_ms - ago * hour_ms)
        producer.flush()

    def plan(*scenario: str) -> tuple[str, str]:
        _, out, err = groups("reset-offsets", "--bootstrap-server", bootstrap, "--group", group,
                             "--topic", topic, *scenario)
        assert table(out)[0] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
        return table(out)[1][3], err

    two_hours_ago = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((now_ms - 2 * hour_ms - 60_000) / 1000))
    assert plan("--to-datetime", f"{two_hours_ago}.000")[0] == "1"
    assert plan("--to-datetime", f"{two_hours_ago}.000+00:00")[0] == "1"
    assert plan("--by-duration", "PT90M")[0] == "2"
    future = time.strftime("%Y-%m-%dT%H:%M:%S.000", time.gmtime(now_ms / 1000 + 3600))
    offset, err = plan("--to-datetime", future)
    assert offset == "4" and f"Partition 0 from topic {topic} is empty. Falling back" in err
    offset, err = plan("--to-offset", "99")
    assert offset == "4" and "New offset (99) is higher than latest offset" in err
    assert plan("--to-earliest")[0] == "0" and plan("--to-latest")[0] == "4"
    with KafkaOffsetStore(bootstrap) as store:
        assert store.fetch(group) == {}  # dry runs all
