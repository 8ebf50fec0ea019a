"""``pylog lag`` against one real broker and ZooKeeper: a group committed in the offsets topic and
another in ZooKeeper (``/consumers``) show the lag ``groups describe`` computes, tick after tick;
a commit between ticks makes the lag fall; ``--plot`` writes a PNG of it."""

from __future__ import annotations

import argparse
import io

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.cli import _build_parser
from broker.client.offset_store import KafkaOffsetStore, ZkOffsetStore
from broker.tools.lag import run_lag
from integration_support import ClusterFactory

pytestmark = [pytest.mark.integration]

TOPIC = "lagged"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    factory = ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("lag"))
    try:
        made = factory.make(1, offsets_topic_replication_factor="1", offsets_topic_num_partitions="1",
                            group_initial_rebalance_delay_ms="0")
        admin = AdminClient({"bootstrap.servers": made.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(30)
        yield made
    finally:
        factory.close()


def produce(bootstrap: str, partition: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(count):
        producer.produce(TOPIC, value=b"%d" % i, partition=partition)
    assert producer.flush(30) == 0


def lag_args(cluster, *extra: str) -> argparse.Namespace:
    return _build_parser().parse_args(["lag", "--bootstrap-server", cluster.bootstrap,
                                       "--zookeeper-connect", cluster.zk_connect, *extra])


def tables(text: str) -> list[dict]:
    """Each tick's rows as {(group, partition, store): (committed, log end, lag)} plus its total."""
    ticks = []
    for block in text.strip().split("\n\n"):
        lines = block.splitlines()
        assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "STORE"]
        rows = {}
        for line in lines[2:-1]:
            group, topic, partition, committed, end, lag, store = line.split()
            assert topic == TOPIC
            rows[(group, int(partition), store)] = (int(committed), int(end), int(lag))
        assert lines[-1].startswith("TOTAL-LAG ")
        ticks.append({"rows": rows, "total": int(lines[-1].split()[1])})
    return ticks


def test_lag_of_both_stores_falls_after_a_commit_and_is_plotted(cluster, tmp_path):
    produce(cluster.bootstrap, 0, 10)
    produce(cluster.bootstrap, 1, 10)
    kafka_store = KafkaOffsetStore(cluster.bootstrap)
    zk_store = ZkOffsetStore(cluster.zk_connect)
    try:
        kafka_store.commit("lag-kafka", {(TOPIC, 0): 3, (TOPIC, 1): 4})
        zk_store.commit("lag-zk", {(TOPIC, 0): 5})
        produce(cluster.bootstrap, 0, 5)  # log end of partition 0 is now 15

        slept: list[float] = []

        def commit_between_ticks(seconds: float) -> None:
            slept.append(seconds)
            kafka_store.commit("lag-kafka", {(TOPIC, 0): 15})
            zk_store.commit("lag-zk", {(TOPIC, 0): 14})

        plot = tmp_path / "lag.png"
        out = io.StringIO()
        args = lag_args(cluster, "--group", "lag-kafka", "--group", "lag-zk", "--store", "all",
                        "--watch", "--interval", "0.1", "--iterations", "2", "--plot", str(plot))
        assert run_lag(args, out, sleep=commit_between_ticks) == 0
    finally:
        kafka_store.close()
        zk_store.close()
    assert slept == [0.1]  # two ticks, one --interval between them
    first, second = tables(out.getvalue())
    assert first["rows"] == {("lag-kafka", 0, "kafka"): (3, 15, 12), ("lag-kafka", 1, "kafka"): (4, 10, 6),
                             ("lag-zk", 0, "zookeeper"): (5, 15, 10)}
    assert first["total"] == 28
    assert second["rows"] == {("lag-kafka", 0, "kafka"): (15, 15, 0), ("lag-kafka", 1, "kafka"): (4, 10, 6),
                              ("lag-zk", 0, "zookeeper"): (14, 15, 1)}
    assert second["total"] == 7
    data = plot.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and data.endswith(b"IEND\xaeB`\x82") and len(data) > 5_000


def test_unknown_group_and_bad_options_are_one_line_errors(cluster):
    with pytest.raises(ValueError, match="Consumer group 'nobody' does not exist"):
        run_lag(lag_args(cluster, "--group", "nobody", "--store", "kafka"), io.StringIO())
    with pytest.raises(ValueError, match="--interval must be positive"):
        run_lag(lag_args(cluster, "--group", "lag-kafka", "--interval", "0"), io.StringIO())
