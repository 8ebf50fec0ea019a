"""Burrow (Debian's ``burrow``, installed by ``make setup``) evaluating pylog's consumer groups with
the documented conf/burrow/burrow.toml: a group that keeps committing the same offset while it
lags must be reported STALL (group status ERR), through both stores Burrow reads — the offsets
topic (``__consumer_offsets``) and ZooKeeper (``/consumers/<group>/offsets``) — while a group that
keeps up is OK.

Debian bookworm's Burrow 1.2.1 (sarama of 2018) asks for end offsets with ListOffsets **v0**,
which Apache Kafka removed in 4.0 (KIP-896); pylog serves it for this reason (handlers/list_offsets.py),
and Burrow's log must show no UNSUPPORTED_VERSION answer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.client.offset_store import ZkOffsetStore
from broker.tools.zookeeper import reserve_free_port
from integration_support import REPO_ROOT, ClusterFactory

pytestmark = [pytest.mark.integration]

BURROW = "/usr/bin/Burrow"
TOPIC = "burrowed"
DEADLINE_S = 60.0
_UNSUPPORTED = "The version of API is not supported"
COMMIT_EVERY_S = 1.1  # above the config's min-distance (1 s): each commit is its own interval


def burrow_config(zookeeper: str, chroot: str, bootstrap: str, http_port: int, run_dir: Path) -> str:
    """conf/burrow/burrow.toml with this test's addresses, and a 3-commit window (10 as shipped)."""
    text = (REPO_ROOT / "conf" / "burrow" / "burrow.toml").read_text()
    for old, new in {'"127.0.0.1:2181"': f'"{zookeeper}"', '"127.0.0.1:9092"': f'"{bootstrap}"',
                     'address="127.0.0.1:8000"': f'address="127.0.0.1:{http_port}"',
                     'zookeeper-path=""': f'zookeeper-path="{chroot}"',
                     'root-path="/burrow"': f'root-path="/burrow-{os.getpid()}"',
                     'pidfile="burrow.pid"': f'pidfile="{run_dir / "burrow.pid"}"',
                     'filename="burrow.log"': f'filename="{run_dir / "burrow.log"}"',
                     "intervals=10": "intervals=3", "offset-refresh=5": "offset-refresh=1",
                     "topic-refresh=10": "topic-refresh=2"}.items():
        assert old in text, f"conf/burrow/burrow.toml no longer has {old}"
        text = text.replace(old, new)
    return text


def status(port: int, group: str) -> dict:
    url = f"http://127.0.0.1:{port}/v3/kafka/pylog/consumer/{group}/status"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.loads(answer.read()).get("status") or {}
    except (urllib.error.URLError, OSError, ValueError):
        return {}


def test_burrow_reports_a_stalled_group_from_both_offset_stores(zookeeper, tmp_path):
    if shutil.which(BURROW) is None:
        pytest.fail("Debian's burrow is not installed: run `make setup`")
    factory = ClusterFactory(zookeeper.connect_string, tmp_path)
    burrow = None
    try:
        cluster = factory.make(1, offsets_topic_replication_factor="1", offsets_topic_num_partitions="2",
                               group_initial_rebalance_delay_ms="0")
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap})
        for i in range(20):
            producer.produce(TOPIC, value=b"%d" % i)
        assert producer.flush(30) == 0

        zk_store = ZkOffsetStore(cluster.zk_connect)
        kafka_committer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "stalled-kafka",
                                    "enable.auto.commit": False})
        healthy = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "keeping-up",
                            "enable.auto.commit": False})

        def commit_all() -> None:
            zk_store.commit("stalled-zk", {(TOPIC, 0): 5})
            kafka_committer.commit(offsets=[TopicPartition(TOPIC, 0, 5)], asynchronous=False)
            healthy.commit(offsets=[TopicPartition(TOPIC, 0, 20)], asynchronous=False)

        commit_all()  # /consumers exists before Burrow lists it
        run_dir = tmp_path / "burrow"
        run_dir.mkdir()
        http_port = reserve_free_port()
        zk_host, chroot = cluster.zk_connect.split("/", 1)
        (run_dir / "burrow.toml").write_text(burrow_config(zk_host, "/" + chroot, cluster.bootstrap, http_port,
                                                           run_dir))
        burrow = subprocess.Popen([BURROW, "-config-dir", str(run_dir)], cwd=run_dir,
                                  stdout=open(run_dir / "stdout.log", "wb"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + DEADLINE_S
        seen: dict = {}
        while time.monotonic() < deadline:
            commit_all()
            seen = {g: status(http_port, g) for g in ("stalled-kafka", "stalled-zk", "keeping-up")}
            stalled = [g for g in ("stalled-kafka", "stalled-zk")
                       if seen[g].get("status") == "ERR"
                       and [p["status"] for p in seen[g].get("partitions", [])] == ["STALL"]]
            if len(stalled) == 2 and seen["keeping-up"].get("status") == "OK":
                break
            assert burrow.poll() is None, (run_dir / "stdout.log").read_text()[-2000:]
            time.sleep(COMMIT_EVERY_S)
        else:
            log = (run_dir / "burrow.log").read_text()[-3000:] if (run_dir / "burrow.log").exists() else ""
            raise AssertionError(f"Burrow did not report the stall: {json.dumps(seen)[:2000]}\n{log}")
        assert seen["stalled-kafka"]["maxlag"]["current_lag"] == 15
        assert seen["stalled-zk"]["maxlag"]["current_lag"] == 15
        assert _UNSUPPORTED not in (run_dir / "burrow.log").read_text()
        kafka_committer.close()
        healthy.close()
        zk_store.close()
    finally:
        if burrow is not None:
            burrow.terminate()
            try:
                burrow.wait(10)
            except subprocess.TimeoutExpired:
                burrow.kill()
        factory.close()
