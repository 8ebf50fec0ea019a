"""Replication under faults: three broker processes, RF=3, min.insync.replicas=2, an idempotent
acks=all librdkafka producer with retries, and a history checker (``history.py``) that finds
lost, duplicated and reordered records (reliability.md scenarios 1, 2, 4 and 6).

One cluster serves the whole module (starting three brokers costs seconds on two cores); every
test uses its own topic and ``heal`` puts the cluster back (every broker running and in every
ISR) before the next. Timeouts are short so faults resolve quickly: ZooKeeper sessions of 6 s,
``replica.lag.time.max.ms`` 3 s.
"""

from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path

import pytest
from integration_support import ClusterFactory
from history import History, ProducerWorkload, read_all

from broker.cluster.errors import UnknownTopicOrPartitionError
from broker.cluster.zk import KafkaZkClient

SESSION_TIMEOUT_MS = 6000
LAG_TIME_MS = 3000
OVERRIDES = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": str(LAG_TIME_MS),
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "500",
    "leader.imbalance.check.interval.seconds": "3",
    "log.flush.offset.checkpoint.interval.ms": "1000",
}
PARTITIONS = 3
_topics = itertools.count()


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    factory = ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("replication"))
    try:
        yield factory.make(3, overrides=OVERRIDES)
    finally:
        factory.close()


@pytest.fixture(scope="module")
def zk(cluster):
    client = KafkaZkClient(cluster.zk_connect, 10_000, 10_000)
    client.start()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def topic(cluster, zk):
    """A fresh RF=3, min.insync.replicas=2 topic; the cluster is healed afterwards."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"replicated-{next(_topics)}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[name].result(30)
    wait_until(lambda: all(len(isr(zk, name, p)) == 3 for p in range(PARTITIONS)), 30, "full ISRs")
    yield name
    heal(cluster, zk, name)


# ------------------------------------------------------------------------------ helpers


def wait_until(condition, timeout_s: float, what: str, interval_s: float = 0.1) -> float:
    """Seconds it took; fails the test after ``timeout_s``."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout_s, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(interval_s)
    return time.monotonic() - start


def state(zk: KafkaZkClient, topic: str, partition: int):
    try:
        return zk.get_partition_state(topic, partition)[0]
    except UnknownTopicOrPartitionError:
        return None


def leader(zk: KafkaZkClient, topic: str, partition: int) -> int:
    found = state(zk, topic, partition)
    return found.leader if found is not None else -1


def isr(zk: KafkaZkClient, topic: str, partition: int) -> tuple[int, ...]:
    found = state(zk, topic, partition)
    return found.isr if found is not None else ()


def heal(cluster, zk: KafkaZkClient, topic: str, partitions: int = PARTITIONS) -> None:
    for broker in cluster.brokers:
        if broker.is_running():
            broker.popen.send_signal(signal.SIGCONT)
        else:
            broker.start()
    wait_until(lambda: zk.get_controller_id() in {b.broker_id for b in cluster.brokers}, 30, "a controller")
    wait_until(lambda: all(len(isr(zk, topic, p)) == 3 for p in range(partitions)), 60, "healed ISRs")


def run_and_check(cluster, topic: str, fault, min_acks_after: int = 300) -> History:
    """Produce, apply ``fault`` mid-stream, keep producing, stop, read everything, check."""
    history = History()
    workload = ProducerWorkload(cluster.bootstrap, topic, PARTITIONS, history).start()
    try:
        workload.wait_for_acks(300)
        fault()
        acked = history.acked()
        workload.wait_for_acks(acked + min_acks_after, timeout_s=90)
    finally:
        workload.stop()
    assert workload.unflushed == 0
    read_all(cluster.bootstrap, topic, PARTITIONS, history)
    report = history.check()
    assert report.ok, report.summary()
    assert report.failed == 0 and report.indefinite == 0, report.summary()  # retries absorb faults
    return history


# -------------------------------------------------------------------------------- tests


def test_leader_sigkill_then_restart_loses_and_duplicates_nothing(cluster, zk, topic):
    victim = cluster.broker(leader(zk, topic, 0))

    def fault() -> None:
        victim.kill(signal.SIGKILL)
        took = wait_until(lambda: leader(zk, topic, 0) not in (-1, victim.broker_id), 30, "a new leader")
        assert took < (SESSION_TIMEOUT_MS + 5000) / 1000
        victim.start()

    run_and_check(cluster, topic, fault)
    wait_until(lambda: all(victim.broker_id in isr(zk, topic, p) for p in range(PARTITIONS)), 60,
               "the restarted broker back in every ISR")


def test_sigterm_moves_leadership_before_the_broker_exits(cluster, zk, topic):
    victim = cluster.broker(leader(zk, topic, 0))
    seen = {}

    def fault() -> None:
        victim.popen.send_signal(signal.SIGTERM)
        start = time.monotonic()
        while victim.is_running():
            if "moved" not in seen and leader(zk, topic, 0) != victim.broker_id:
                seen["moved"] = time.monotonic() - start
            if "registered" not in seen and victim.broker_id not in zk.get_broker_ids():
                seen["unregistered"] = time.monotonic() - start
            time.sleep(0.01)
        seen["exited"] = time.monotonic() - start
        victim.start()

    run_and_check(cluster, topic, fault)
    assert "moved" in seen, f"leadership had not moved when the broker exited: {seen}"
    assert seen["moved"] <= seen.get("unregistered", seen["exited"]), seen
    assert "controlled shutdown done" in victim.log_path.read_text()


def test_killed_controller_is_replaced_within_the_session_timeout(cluster, zk, topic):
    controller = cluster.broker(zk.get_controller_id())
    took = {}

    def fault() -> None:
        controller.kill(signal.SIGKILL)
        took["election"] = wait_until(
            lambda: zk.get_controller_id() not in (-1, controller.broker_id), 30, "a new controller")
        # the old controller led partitions of the topic too; they fail over through the new one
        wait_until(lambda: all(leader(zk, topic, p) not in (-1, controller.broker_id)
                               for p in range(PARTITIONS)), 30, "leaders off the dead controller")
        controller.start()

    run_and_check(cluster, topic, fault)
    assert took["election"] < (SESSION_TIMEOUT_MS + 3000) / 1000, took


def test_paused_follower_leaves_the_isr_and_rejoins_after_sigcont(cluster, zk, topic):
    first_leader = leader(zk, topic, 0)
    follower = cluster.broker(next(r for r in isr(zk, topic, 0) if r != first_leader))

    def fault() -> None:
        follower.popen.send_signal(signal.SIGSTOP)
        try:
            wait_until(lambda: follower.broker_id not in isr(zk, topic, 0), (LAG_TIME_MS + 4000) / 1000,
                       "the ISR to shrink")
            time.sleep(0.5)  # writes continue meanwhile: min.insync.replicas=2 holds with two
        finally:
            follower.popen.send_signal(signal.SIGCONT)
        wait_until(lambda: all(follower.broker_id in isr(zk, topic, p) for p in range(PARTITIONS)), 30,
                   "the follower to rejoin every ISR")

    run_and_check(cluster, topic, fault)


def test_broker_with_a_torn_segment_tail_recovers_truncates_and_rejoins(cluster, zk, topic):
    victim = cluster.broker(leader(zk, topic, 1))

    def fault() -> None:
        victim.kill(signal.SIGKILL)
        for p in range(PARTITIONS):
            tear_tail(victim.data_dir / f"{topic}-{p}")
        victim.start()
        wait_until(lambda: all(victim.broker_id in isr(zk, topic, p) for p in range(PARTITIONS)), 60,
                   "the torn broker back in every ISR")

    run_and_check(cluster, topic, fault)
    log = victim.log_path.read_text()
    assert "truncat" in log.lower(), "recovery should have cut the torn tail"


def tear_tail(partition_dir: Path) -> None:
    """What a crash mid-write leaves: the last batch cut short, then garbage after it (the OS
    may persist a file's new size before its data, reliability.md section 3)."""
    segment = max(partition_dir.glob("*.log"))
    size = segment.stat().st_size
    if size > 40:
        os.truncate(segment, size - 17)
    with open(segment, "ab") as f:
        f.write(os.urandom(100))


def test_pylog_topics_create_and_describe_show_leaders_replicas_and_isr(cluster, zk):
    import subprocess
    import sys

    REPO_ROOT = Path(__file__).resolve().parents[2]  # not from conftest: tests/spark has one too

    def pylog(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "broker.cli", "topics", *args,
                               "--bootstrap-server", cluster.bootstrap], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def described() -> dict[int, tuple[int, str, str]]:
        rows = {}
        for line in pylog("describe", "--topic", "cli-replicated").splitlines()[1:]:
            fields = dict(f.split(": ") for f in line.strip().split("\t"))
            fields.pop("Offline", None)
            rows[int(fields["Partition"])] = (int(fields["Leader"]), fields["Replicas"], fields["Isr"])
        return rows

    assert "Created topic cli-replicated." in pylog("create", "--topic", "cli-replicated", "--partitions", "2",
                                                    "--replication-factor", "3",
                                                    "--config", "min.insync.replicas=2")
    assert zk.get_topic_config("cli-replicated") == {"min.insync.replicas": "2"}
    wait_until(lambda: all(len(isr(zk, "cli-replicated", p)) == 3 for p in range(2)), 30, "full ISRs")
    wait_until(lambda: all(r[2].count(",") == 2 for r in described().values()), 30, "describe to catch up")
    for partition, (leader_id, replicas, in_sync) in described().items():
        found = state(zk, "cli-replicated", partition)
        assert leader_id == found.leader and in_sync == ",".join(map(str, found.isr))
        assert sorted(replicas.split(",")) == ["1", "2", "3"]
    assert pylog("describe", "--topic", "cli-replicated", "--under-replicated-partitions") == ""
    victim = next(b for b in cluster.brokers if b.broker_id != leader(zk, "cli-replicated", 0))
    victim.kill(signal.SIGKILL)
    try:
        wait_until(lambda: str(victim.broker_id) not in described()[0][2], (SESSION_TIMEOUT_MS + 10_000) / 1000,
                   "describe to show the shrunk ISR")
        # The dead broker is listed as offline, and both partitions are now under-replicated
        # (the victim was a follower of partition 0 and a replica of both) but not unavailable.
        # Waited for, not asserted at once: the ISR can shrink on lag before the victim's
        # ZooKeeper session expires and its registration (what "offline" means) disappears.
        wait_until(lambda: f"\tOffline: {victim.broker_id}" in pylog("describe", "--topic", "cli-replicated"),
                   (SESSION_TIMEOUT_MS + 10_000) / 1000, "describe to list the dead broker as offline")
        wait_until(lambda: len(pylog("describe", "--topic", "cli-replicated",
                                     "--under-replicated-partitions").splitlines()) == 2, 30,
                   "both partitions to be reported under-replicated")
        wait_until(lambda: pylog("describe", "--topic", "cli-replicated", "--unavailable-partitions") == "",
                   30, "no partition left without a leader")
    finally:
        heal(cluster, zk, "cli-replicated", partitions=2)
