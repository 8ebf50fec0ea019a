"""ZooKeeper restarts under a replicated cluster: the brokers and the controller recover without
an operator (reliability.md scenario 9, the ZooKeeper half).

A dedicated ZooKeeper (the session one is shared by every other test) is stopped long enough
for every broker session to expire (longer than ``zookeeper.session.timeout.ms``), then started
again. While it is down, leaders keep serving what needs no ZooKeeper; afterwards every broker
registers again (new sessions), a controller is elected, ISRs fill up, and acknowledged writes
from before, during and after the outage are all there exactly once.
"""

from __future__ import annotations

import time

import pytest
from integration_support import ZOOKEEPER_SETTINGS, ZOOKEEPER_START_TIMEOUT_S, ClusterFactory
from history import History, ProducerWorkload, read_all
from test_replication_failover import isr, wait_until

from broker.cluster.zk import KafkaZkClient
from broker.tools.zookeeper import ZooKeeperProcess, find_free_port

SESSION_TIMEOUT_MS = 6000
PARTITIONS = 3


@pytest.fixture
def own_zookeeper(tmp_path):
    process = ZooKeeperProcess(tmp_path / "zk-data", find_free_port(), tmp_path / "zk-log",
                               settings=ZOOKEEPER_SETTINGS)
    process.start(timeout_s=ZOOKEEPER_START_TIMEOUT_S)
    try:
        yield process
    finally:
        process.stop()


def test_cluster_recovers_from_a_zookeeper_restart_without_operator_action(own_zookeeper, tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    factory = ClusterFactory(own_zookeeper.connect_string, tmp_path / "cluster")
    try:
        cluster = factory.make(3, overrides={"zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                                             "replica.lag.time.max.ms": "3000",
                                             "replica.fetch.backoff.ms": "200"})
        topic = "through-a-zk-restart"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
        zk = KafkaZkClient(cluster.zk_connect, 20_000, 60_000)
        zk.start()
        try:
            wait_until(lambda: all(len(isr(zk, topic, p)) == 3 for p in range(PARTITIONS)), 30, "full ISRs")
            history = History()
            workload = ProducerWorkload(cluster.bootstrap, topic, PARTITIONS, history).start()
            try:
                workload.wait_for_acks(300)
                own_zookeeper.stop()
                time.sleep(SESSION_TIMEOUT_MS / 1000 + 2)  # every session is due to expire
                before = history.acked()
                own_zookeeper.start(timeout_s=ZOOKEEPER_START_TIMEOUT_S)
                wait_until(lambda: sorted(zk.get_broker_ids()) == [1, 2, 3], 60, "all brokers registered")
                wait_until(lambda: zk.get_controller_id() in (1, 2, 3), 30, "a controller")
                workload.wait_for_acks(before + 300, timeout_s=90)
            finally:
                workload.stop()
            wait_until(lambda: all(len(isr(zk, topic, p)) == 3 for p in range(PARTITIONS)), 60,
                       "full ISRs after the restart")
            read_all(cluster.bootstrap, topic, PARTITIONS, history)
            report = history.check()
            assert report.ok, report.summary()
            assert report.failed == 0 and report.indefinite == 0, report.summary()
        finally:
            zk.close()
    finally:
        factory.close()
