"""A Spark query's progress in Kafka's offsets topic (issue 14, item 6), on Apache Kafka and on pylog.

``offsets.store=kafka`` with ``kafka.group.id``: each micro-batch's end offsets are committed to
``__consumer_offsets`` through the group coordinator ("simple" commits, as an ``assign()``
consumer sends them), one batch behind the query because Spark calls ``commit(end of batch N)``
when it plans batch N+1. What the test checks on each system, with one stated outcome:

- Kafka's own ``kafka-consumer-groups --describe`` shows the group's offsets, log end and lag,
  and ``pylog groups describe --store kafka`` the same rows;
- ``KafkaOffsetStore.fetch`` (an OffsetFetch) answers the same offsets;
- a new query (new checkpoint) with ``startingOffsets=group`` starts exactly there, and so does a
  batch read and an offline load, whose ``commit`` moves the group to the load's end;
- a query given the id of a group that has members fails with the reason, the group goes on.

Both systems are held to the same literal outcome (what Apache Kafka 4.1 does). Each test runs
on both at once (``on_both_peers``: two queries in the one SparkSession, own topics, groups and
checkpoints), so one system's waits overlap the other's work.
"""

from __future__ import annotations

import json
import time

import pytest
from peer_support import on_both_peers, unique_topic
from pyspark.errors import StreamingQueryException

from broker.client.producer import Producer
from broker.tools.kafka_peer import run_kafka_tool

pytestmark = pytest.mark.integration

PARTITIONS = 2
PER_PARTITION = 30
MAX_OFFSETS_PER_TRIGGER = 20  # 10 per partition per batch: three batches
QUERY_TIMEOUT_S = 120.0  # a deadline: AvailableNow queries end by themselves
TOOL_TIMEOUT_S = 90.0


def produce(bootstrap: str, topic: str, per_partition: int, start: int = 0) -> None:
    with Producer(bootstrap) as producer:
        for i in range(start, start + per_partition):
            for p in range(PARTITIONS):
                producer.send(topic, f"p{p}-{i}".encode(), key=f"k{i}".encode(), partition=p)
        producer.flush()


def run_available_now(spark, options: dict, checkpoint: str) -> list[dict]:
    """The end offsets of each non-empty batch of one ``Trigger.AvailableNow`` run."""
    query = (spark.readStream.format("pylog").options(**options).load().writeStream.format("noop")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    deadline = time.monotonic() + QUERY_TIMEOUT_S
    while query.isActive and time.monotonic() < deadline:
        query.awaitTermination(1)
    if query.isActive:
        query.stop()
        raise AssertionError(f"the query did not finish within {QUERY_TIMEOUT_S} s")
    assert query.exception() is None, query.exception()
    return [json.loads(p["sources"][0]["endOffset"]) for p in query.recentProgress if p["numInputRows"]]


def fetch_committed(bootstrap: str, group: str, topic: str) -> dict:
    from broker.client.offset_store import KafkaOffsetStore

    with KafkaOffsetStore(bootstrap) as store:
        return store.fetch(group, [topic])


def describe_group(bootstrap: str, group: str) -> list[list[str]]:
    """``kafka-consumer-groups --describe`` rows of ``group``: GROUP TOPIC PARTITION
    CURRENT-OFFSET LOG-END-OFFSET LAG (the member columns are '-': nobody is a member)."""
    result = run_kafka_tool("kafka-consumer-groups", ["--bootstrap-server", bootstrap, "--describe",
                                                      "--group", group], timeout_s=TOOL_TIMEOUT_S)
    out, err = result.stdout.decode(errors="replace"), result.stderr.decode(errors="replace")
    assert result.returncode == 0, f"exit {result.returncode}:\n{err[-3000:]}\n{out[-2000:]}"
    header = next(line.split() for line in out.splitlines() if line.startswith("GROUP"))
    assert header[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"], out
    return sorted(line.split()[:6] for line in out.splitlines() if line.split()[:1] == [group])


def pylog_describe_group(bootstrap: str, group: str) -> list[list[str]]:
    """``pylog groups describe --store kafka`` rows of ``group``, the same six columns."""
    import argparse
    import io

    from broker.tools.groups import add_groups_parser, run_groups

    parser = argparse.ArgumentParser()
    add_groups_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["groups", "describe", "--group", group, "--bootstrap-server", bootstrap,
                              "--store", "kafka"])
    out = io.StringIO()
    assert run_groups(args, out) == 0, out.getvalue()
    return sorted(line.split()[:6] for line in out.getvalue().splitlines() if line.split()[:1] == [group])


@on_both_peers()
def test_streaming_commits_to_the_offsets_topic_and_group_start_resumes(spark, peer, tmp_path):
    tmp_path = tmp_path / peer.name  # both systems' halves run at once: checkpoints of their own
    topic, group = unique_topic("spark-commit"), unique_topic("spark-group")
    peer.create_topic(topic, partitions=PARTITIONS)
    produce(peer.bootstrap, topic, PER_PARTITION)
    options = {"kafka.bootstrap.servers": peer.bootstrap, "subscribe": topic, "startingOffsets": "earliest",
               "kafka.group.id": group, "offsets.store": "kafka",
               "maxOffsetsPerTrigger": str(MAX_OFFSETS_PER_TRIGGER)}

    ends = run_available_now(spark, options, str(tmp_path / "first"))
    assert ends == [{topic: {"0": n, "1": n}} for n in (10, 20, 30)]
    # Batch 3 is planned after batch 2's commit; nothing plans a batch 4 in this run.
    assert fetch_committed(peer.bootstrap, group, topic) == {(topic, 0): 20, (topic, 1): 20}
    described = describe_group(peer.bootstrap, group)  # one kafka-consumer-groups run serves both checks
    assert described == [[group, topic, str(p), "20", "30", "10"] for p in range(PARTITIONS)]
    assert pylog_describe_group(peer.bootstrap, group) == described

    # A new query of the group (its own checkpoint) starts where the group is: the 20 offsets the
    # first run read but did not commit, and the 20 produced since.
    produce(peer.bootstrap, topic, 10, start=PER_PARTITION)
    resumed = {k: v for k, v in options.items() if k != "maxOffsetsPerTrigger"}
    ends = run_available_now(spark, {**resumed, "startingOffsets": "group"}, str(tmp_path / "second"))
    assert ends == [{topic: {"0": 40, "1": 40}}]
    # One batch only, so nothing committed in this run: the group has not moved.
    assert fetch_committed(peer.bootstrap, group, topic) == {(topic, 0): 20, (topic, 1): 20}

    # A batch read of the group reads from its offsets to the end, and commits nothing.
    rows = (spark.read.format("pylog").options(**{**resumed, "startingOffsets": "group"}).load()
            .select("partition", "offset").collect())
    assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in range(PARTITIONS) for o in range(20, 40)]
    assert fetch_committed(peer.bootstrap, group, topic) == {(topic, 0): 20, (topic, 1): 20}


@on_both_peers()
def test_offline_load_keeps_its_place_in_the_offsets_topic(spark, peer):
    from spark_log import offline

    topic, group = unique_topic("spark-offline"), unique_topic("spark-offline-group")
    peer.create_topic(topic, partitions=PARTITIONS)
    produce(peer.bootstrap, topic, 15)
    options = {"kafka.bootstrap.servers": peer.bootstrap, "subscribe": topic, "kafka.group.id": group,
               "offsets.store": "kafka"}
    first = offline.plan_load(options)  # a group without offsets starts at earliest
    assert first.per_partition() == {(topic, p): (0, 15) for p in range(PARTITIONS)}
    assert offline.read(spark, first).count() == 30
    offline.commit(first)
    assert describe_group(peer.bootstrap, group) == [[group, topic, str(p), "15", "15", "0"]
                                                     for p in range(PARTITIONS)]
    produce(peer.bootstrap, topic, 5, start=15)
    second = offline.plan_load(options)
    assert second.per_partition() == {(topic, p): (15, 20) for p in range(PARTITIONS)}
    assert sorted(r.offset for r in offline.read(spark, second).select("offset").collect()) == [15] * 2 + \
        [16] * 2 + [17] * 2 + [18] * 2 + [19] * 2


def subscribed_member(bootstrap: str, group: str, topic: str):
    """A confluent-kafka consumer that has joined ``group`` and holds ``topic``'s partitions."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
    consumer.subscribe([topic])
    deadline = time.monotonic() + 30.0
    while not consumer.assignment():
        if time.monotonic() > deadline:
            consumer.close()
            raise AssertionError(f"the consumer did not join {group} within 30 s")
        consumer.poll(0.2)
    return consumer


@on_both_peers()
def test_a_query_may_not_commit_to_a_group_with_members(spark, peer, tmp_path):
    """A group id that a subscribing consumer group is using: the coordinator refuses the query's
    simple commit (UNKNOWN_MEMBER_ID: a commit without a member id to a group that has members), and
    the query fails saying so and what to do, instead of committing nothing silently; the consumer
    group goes on."""
    tmp_path = tmp_path / peer.name  # both systems' halves run at once: checkpoints of their own
    topic, group = unique_topic("spark-shared"), unique_topic("spark-shared-group")
    peer.create_topic(topic, partitions=PARTITIONS)
    produce(peer.bootstrap, topic, PER_PARTITION)
    member = subscribed_member(peer.bootstrap, group, topic)
    try:
        options = {"kafka.bootstrap.servers": peer.bootstrap, "subscribe": topic, "startingOffsets": "earliest",
                   "kafka.group.id": group, "offsets.store": "kafka",
                   "maxOffsetsPerTrigger": str(MAX_OFFSETS_PER_TRIGGER)}
        with pytest.raises(StreamingQueryException) as info:
            run_available_now(spark, options, str(tmp_path / "ck"))
        assert member.assignment()  # the consumer group went on undisturbed
    finally:
        member.close()
    message = str(info.value)
    assert f"Committing the offsets of group '{group}' to the kafka offsets store failed: UNKNOWN_MEMBER_ID" \
        in message, message[:3000]
    assert "give it another 'kafka.group.id'" in message


@on_both_peers()
def test_a_restarted_query_resumes_from_its_checkpoint_not_the_group(spark, peer, tmp_path):
    """The checkpoint is the source of truth: after the group's offsets were moved back (a reset
    by hand), the query restarted on its checkpoint reads on from where it stopped, and commits
    its progress over the reset."""
    from broker.client.offset_store import KafkaOffsetStore

    tmp_path = tmp_path / peer.name  # both systems' halves run at once: checkpoints of their own

    topic, group = unique_topic("spark-restart"), unique_topic("spark-restart-group")
    peer.create_topic(topic, partitions=PARTITIONS)
    produce(peer.bootstrap, topic, PER_PARTITION)
    options = {"kafka.bootstrap.servers": peer.bootstrap, "subscribe": topic, "startingOffsets": "group",
               "kafka.group.id": group, "offsets.store": "kafka",
               "maxOffsetsPerTrigger": str(MAX_OFFSETS_PER_TRIGGER)}
    checkpoint = str(tmp_path / "ck")
    # A group without offsets starts at earliest.
    assert run_available_now(spark, options, checkpoint) == [{topic: {"0": n, "1": n}} for n in (10, 20, 30)]
    with KafkaOffsetStore(peer.bootstrap) as store:
        store.commit(group, {(topic, p): 0 for p in range(PARTITIONS)})
    produce(peer.bootstrap, topic, 20, start=PER_PARTITION)
    assert run_available_now(spark, options, checkpoint) == [{topic: {"0": n, "1": n}} for n in (40, 50)]
    assert fetch_committed(peer.bootstrap, group, topic) == {(topic, 0): 40, (topic, 1): 40}
