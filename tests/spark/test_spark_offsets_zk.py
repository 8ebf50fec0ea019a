"""Offsets committed for the world: a streaming query publishes consumed offsets to ZooKeeper
(one batch behind, as Spark calls commit), ``startingOffsets=group`` resumes from them,
``pylog groups describe`` shows them with lag, and the offline-load notebook runs against the
cluster and resumes where the group stopped. With ``offsets.store=kafka`` the query commits to
``__consumer_offsets`` and ``pylog lag`` sees its lag grow and fall."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from broker.cli import _build_parser
from broker.client.offset_store import ZkOffsetStore
from broker.tools.groups import run_groups
from broker.tools.lag import run_lag

from spark_helpers import create_topic, produce, unique

pytestmark = pytest.mark.integration

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "offline_load.ipynb"


@pytest.fixture(scope="module")
def cluster(cluster_factory):
    """One broker, whose offsets topic fits on it (RF 1, one partition: the kafka store)."""
    return cluster_factory.make(1, overrides={"offsets.topic.replication.factor": "1",
                                              "offsets.topic.num.partitions": "1"})


def group_options(cluster, group: str) -> dict:
    return {"kafka.bootstrap.servers": cluster.bootstrap, "kafka.group.id": group,
            "offsets.store": "zookeeper", "zookeeper.connect": cluster.zk_connect}


def committed(cluster, group: str) -> dict:
    with ZkOffsetStore(cluster.zk_connect) as store:
        return store.fetch(group)


def run_available_now(spark, options: dict, checkpoint: str) -> list:
    reader = spark.readStream.format("pylog")
    for key, value in options.items():
        reader = reader.option(key, value)
    query = (reader.load().writeStream.format("noop").option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    return [p["sources"][0]["endOffset"] for p in query.recentProgress if p["numInputRows"]]


def test_streaming_commits_offsets_to_zookeeper_one_batch_behind(spark, cluster, tmp_path):
    topic = create_topic(cluster.bootstrap, unique("zk"), partitions=2)
    produce(cluster.bootstrap, topic, 60, partitions=2)
    options = {**group_options(cluster, "g-stream"), "subscribe": topic, "startingOffsets": "earliest",
               "maxOffsetsPerTrigger": "20"}
    ends = run_available_now(spark, options, str(tmp_path / "ck"))
    assert len(ends) == 3
    # Spark commits batch N when it plans batch N+1: the last batch is not committed in this run.
    assert committed(cluster, "g-stream") == {(topic, 0): 20, (topic, 1): 20}
    out = io.StringIO()
    run_groups(argparse.Namespace(groups_command="describe", group="g-stream", zookeeper_connect=cluster.zk_connect,
                                  bootstrap_server=cluster.bootstrap, timeout_ms=10_000), out)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
    assert [line.split() for line in lines[1:]] == [["g-stream", topic, "0", "20", "30", "10"],
                                                    ["g-stream", topic, "1", "20", "30", "10"]]
    # A new query of the group (new checkpoint) resumes from the committed offsets.
    resumed = {**options, "startingOffsets": "group"}
    resumed.pop("maxOffsetsPerTrigger")
    ends = run_available_now(spark, resumed, str(tmp_path / "ck2"))
    assert len(ends) == 1  # exactly the 20 rows the first run did not publish
    assert json.loads(ends[0]) == {topic: {"0": 30, "1": 30}}


def lag_total(cluster, group: str) -> int:
    """``pylog lag --group <group>`` (the offsets-topic store): its TOTAL-LAG."""
    out = io.StringIO()
    assert run_lag(_build_parser().parse_args(["lag", "--bootstrap-server", cluster.bootstrap,
                                               "--group", group]), out) == 0
    return int(out.getvalue().split("TOTAL-LAG")[1].split()[0])


def test_streaming_commits_to_the_offsets_topic_and_pylog_lag_sees_it_fall(spark, cluster, tmp_path):
    topic = create_topic(cluster.bootstrap, unique("kstore"), partitions=2)
    produce(cluster.bootstrap, topic, 60, partitions=2)
    options = {"kafka.bootstrap.servers": cluster.bootstrap, "kafka.group.id": "g-kafka-store",
               "offsets.store": "kafka", "subscribe": topic, "startingOffsets": "earliest",
               "maxOffsetsPerTrigger": "20"}
    checkpoint = str(tmp_path / "ck")
    assert len(run_available_now(spark, options, checkpoint)) == 3
    assert lag_total(cluster, "g-kafka-store") == 20  # 20 of 30 per partition committed (one batch behind)
    produce(cluster.bootstrap, topic, 20, partitions=2, start=60)
    assert lag_total(cluster, "g-kafka-store") == 40
    # Restarted from its checkpoint: planning the new batch commits the last run's final one.
    assert len(run_available_now(spark, options, checkpoint)) == 1
    assert lag_total(cluster, "g-kafka-store") == 20


def test_offline_load_notebook_resumes_from_committed_offsets(spark, cluster, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    from spark_log import offline

    topic = create_topic(cluster.bootstrap, unique("nb"), partitions=3)
    produce(cluster.bootstrap, topic, 90, partitions=3)
    options = {**group_options(cluster, "g-offline"), "subscribe": topic}
    first = offline.plan_load(options)  # a first load, done here: 90 rows
    assert first.records == 90 and offline.read(spark, first).count() == 90
    offline.commit(first)
    produce(cluster.bootstrap, topic, 60, partitions=3, start=90)

    output = tmp_path / "parquet"
    for name, value in {"PYLOG_BOOTSTRAP": cluster.bootstrap, "PYLOG_ZOOKEEPER": cluster.zk_connect,
                        "PYLOG_TOPIC": topic, "PYLOG_GROUP": "g-offline", "PYLOG_OUTPUT": str(output)}.items():
        monkeypatch.setenv(name, value)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()

    text = "\n".join(o.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                     for o in cell.get("outputs", []))
    assert "this load: 60 offsets" in text and "appended 60 rows" in text
    assert any("image/png" in o.get("data", {}) for cell in notebook.cells for o in cell.get("outputs", []))
    assert (tmp_path / "parquet-records_per_partition.png").is_file()
    rows = spark.read.parquet(str(output)).where(f"topic = '{topic}'").select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(p, o) for p in range(3) for o in range(30, 50)]
    assert committed(cluster, "g-offline") == {(topic, p): 50 for p in range(3)}
