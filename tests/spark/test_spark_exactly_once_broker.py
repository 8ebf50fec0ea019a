"""Exactly-once through a broker failure (issue 16): on a 3-broker cluster (RF 3, min ISR 2) the
leader of a sink partition is SIGKILLed while the stream copies, after some batches committed,
and started again; the query is restarted from its checkpoint while it fails. The kill waits (up
to ``COORDINATOR_WAIT_S``) for a moment when that broker is also the transaction coordinator of
an open transaction of the stream (a task's, mid-batch): the issue's "partition leader or
transaction coordinator" in one kill. The oracle reads the output under read_committed: every
record once, in order per key, nothing open."""

from __future__ import annotations

import threading

from broker.client import AdminClient, ClientConfig, Cluster, KafkaError
from broker.client.txn_admin import TxnAdmin

from eos_support import check_exactly_once, lso_at_hw, open_transactions, produce_keyed, txn_overrides
from spark_helpers import unique, wait_until
from spark_log.transactions import DEFAULT_COMMIT_LOG_TOPIC, default_prefix

RECORDS = 4000
QUERY_ATTEMPTS = 4
COORDINATOR_WAIT_S = 60  # then the leader is killed anyway (the stream may be about to finish)


def commit_log_records(bootstrap: str) -> int:
    try:
        with AdminClient(bootstrap) as admin:
            return admin.list_offsets(DEFAULT_COMMIT_LOG_TOPIC, [0], "latest")[0]
    except KafkaError:
        return 0


def coordinates_open(cluster: Cluster, prefix: str, broker: int) -> bool:
    """Does ``broker`` coordinate an open transaction of ``prefix`` right now?"""
    try:
        listed = TxnAdmin(cluster).list_transactions(states=["Ongoing"])
    except KafkaError:
        return False
    return any(t.transactional_id.startswith(prefix) for t in listed.get(broker, ()))


def run_copy(spark, bootstrap, source, sink, checkpoint) -> Exception | None:
    df = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("isolation.level", "read_committed").option("maxOffsetsPerTrigger", "400").load()
          .select("key", "value"))
    query = (df.writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap).option("topic", sink)
             .option("deliveryGuarantee", "exactly-once").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination(300)
    except Exception as exc:  # the query failed: restart it from its checkpoint
        return exc
    return query.exception()


def test_sink_leader_killed_mid_stream(spark, cluster_factory, tmp_path):
    cluster = cluster_factory.make(3, overrides=txn_overrides(3))
    bootstrap = cluster.bootstrap
    source, sink = unique("src"), unique("out")
    with AdminClient(bootstrap) as admin:
        admin.create_topics([source, sink], partitions=2, replication_factor=3, config={"min.insync.replicas": "2"})
        leader = next(p.leader for d in admin.describe_topics([sink]) for p in d.partitions if p.partition == 0)
    produce_keyed(bootstrap, source, RECORDS)
    before = commit_log_records(bootstrap)

    checkpoint = str(tmp_path / "ck")
    coordinator_killed = []

    def kill_and_restart():
        wait_until(lambda: commit_log_records(bootstrap) >= before + 4, timeout_s=120, what="two batches committed")
        watcher = Cluster(bootstrap, ClientConfig(client_id="eos-kill-timing"))
        try:
            wait_until(lambda: coordinates_open(watcher, default_prefix(checkpoint), leader),
                       timeout_s=COORDINATOR_WAIT_S, interval_s=0.1, what="the leader coordinating an open one")
            coordinator_killed.append(True)
        except AssertionError:
            pass
        finally:
            watcher.close()
        cluster.broker(leader).kill()
        cluster.broker(leader).start()

    killer = threading.Thread(target=kill_and_restart, daemon=True)
    killer.start()
    errors = []
    for _ in range(QUERY_ATTEMPTS):
        error = run_copy(spark, bootstrap, source, sink, checkpoint)
        if error is None:
            break
        errors.append(error)
    else:
        raise AssertionError(f"the query failed {QUERY_ATTEMPTS} times: {errors[-1]}")
    killer.join(120)
    assert not killer.is_alive()
    # a restart after the kill copies what the killed run did not reach
    assert run_copy(spark, bootstrap, source, sink, checkpoint) is None
    check_exactly_once(bootstrap, sink, RECORDS)
    assert open_transactions(bootstrap, default_prefix(checkpoint)) == []
    assert lso_at_hw(bootstrap, sink)
    print(f"killed broker {leader}: sink leader, coordinator of an open transaction: {bool(coordinator_killed)}")
