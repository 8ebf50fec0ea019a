"""Replication throttles (KIP-73, issue 18) on a real 3-broker cluster.

``pylog reassign --execute --throttle`` adds a replica to a partition holding 4 MiB while an
acks=all producer writes 2 MiB more to it: the new replica catches up at the throttled rate
(the leader counts what it sends to every follower of a throttled partition, in sync or not,
so 4 + 2 + 2 MiB at 1 MB/s), the producer is not slowed (its in-sync follower is never
throttled), and ``--verify`` removes the throttles once the move is done. One cluster, one
scenario (~10 s of throttled copying).
"""

from __future__ import annotations

import argparse
import io
import json
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.client import AdminClient as PylogAdmin
from broker.client.partition_admin import list_partition_reassignments
from broker.tools.reassign import add_reassign_parser, run_reassign
from integration_support import ClusterFactory

pytestmark = [pytest.mark.integration]

DEADLINE_S = 60.0
TOPIC = "throttled"
RATE_BYTES_PER_S = 1_000_000
VALUE_BYTES = 100 << 10
PREFILL_BYTES = 4 << 20  # on the partition before the move
EXTRA_BYTES = 2 << 20  # produced acks=all while the new replica copies


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    factory = ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("throttle"))
    try:
        yield factory.make(3, overrides={"controlled.shutdown.enable": "false", "offsets.topic.replication.factor": "1",
                                         "offsets.topic.num.partitions": "1"})
    finally:
        factory.close()


def _wait(condition, what: str, deadline_s: float = DEADLINE_S):
    deadline = time.monotonic() + deadline_s
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return value


def _produce(bootstrap: str, total_bytes: int) -> float:
    """acks=all records of VALUE_BYTES to partition 0; the seconds until all are acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    started = time.monotonic()
    for _ in range(total_bytes // VALUE_BYTES):
        producer.produce(TOPIC, b"x" * VALUE_BYTES, partition=0)
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0
    return time.monotonic() - started


def _reassign(bootstrap: str, *args: str) -> tuple[int, str]:
    out = io.StringIO()
    parser = argparse.ArgumentParser()
    add_reassign_parser(parser.add_subparsers(dest="command"))
    code = run_reassign(parser.parse_args(["reassign", "--bootstrap-server", bootstrap, *args]), out, io.StringIO())
    return code, out.getvalue()


def test_a_throttled_reassignment_moves_at_the_rate_and_the_isr_is_not_slowed(cluster, tmp_path):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    _wait(lambda: len(admin.list_topics(timeout=5).brokers) == 3, "all 3 brokers registered")
    admin.create_topics([NewTopic(TOPIC, 1, replica_assignment=[[1, 2]])])[TOPIC].result(DEADLINE_S)
    _wait(lambda: admin.list_topics(TOPIC, timeout=5).topics[TOPIC].partitions[0].leader == 1, "leader 1")
    _produce(cluster.bootstrap, PREFILL_BYTES)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": TOPIC, "partition": 0, "replicas": [1, 2, 3]}]}))

    started = time.monotonic()
    code, out = _reassign(cluster.bootstrap, "--execute", "--reassignment-json-file", str(plan),
                          "--throttle", str(RATE_BYTES_PER_S))
    assert code == 0 and (
        "Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
        f"throttle is removed.\nThe inter-broker throttle limit was set to {RATE_BYTES_PER_S} B/s\n"
        f"Successfully started partition reassignments for {TOPIC}-0\n") in out, out
    isr_seconds = _produce(cluster.bootstrap, EXTRA_BYTES)
    with PylogAdmin(cluster.bootstrap) as pylog:
        _wait(lambda: (pylog.describe_configs(TOPIC)["leader.replication.throttled.replicas"],
                       pylog.describe_configs(TOPIC)["follower.replication.throttled.replicas"]) == ("0:1,0:2", "0:3"),
              "the topic throttles (kafka-reassign-partitions' lists)", 10)
        assert pylog.describe_broker_configs(3)["follower.replication.throttled.rate"] == str(RATE_BYTES_PER_S)
        _wait(lambda: list_partition_reassignments(pylog) == {}, "the reassignment to complete")
    moved_seconds = time.monotonic() - started
    expected_seconds = (PREFILL_BYTES + 2 * EXTRA_BYTES) / RATE_BYTES_PER_S
    print(f"\nthrottled move: {moved_seconds:.1f} s (throttle-bound {expected_seconds:.1f} s); "
          f"{EXTRA_BYTES >> 20} MiB acks=all alongside: {isr_seconds:.2f} s")
    assert 0.75 * expected_seconds <= moved_seconds <= 2.5 * expected_seconds
    assert isr_seconds < 0.6 * EXTRA_BYTES / RATE_BYTES_PER_S  # the in-sync follower was not throttled

    code, out = _reassign(cluster.bootstrap, "--verify", "--reassignment-json-file", str(plan))
    assert (code, out) == (0, f"Status of partition reassignment:\nReassignment of partition {TOPIC}-0 is completed.\n"
                              f"Clearing broker-level throttles on brokers 1,2,3\n"
                              f"Clearing topic-level throttles on topic {TOPIC}\n")
    with PylogAdmin(cluster.bootstrap) as pylog:
        _wait(lambda: pylog.describe_configs(TOPIC)["leader.replication.throttled.replicas"] == "", "topic cleared", 10)
        _wait(lambda: pylog.describe_broker_configs(3).get("follower.replication.throttled.rate") is None,
              "broker cleared", 10)
