"""The exactly-once pylog sink (issue 16) on Apache Kafka 4.1.1: the "outgrow the Python broker"
path keeps the guarantee. Tasks prepare their transactions on Kafka's coordinator, the driver
completes them with EndTxn, the commit log is a compacted topic on Kafka. One streaming copy,
then a replayed micro-batch (SPARK-28908: the checkpoint's last commit entry lost) after more
input; a read_committed reader of the output sees every input record once, in order per key,
and no transaction of the query is left open."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from peer_support import unique_topic

from spark_log.transactions import default_prefix

pytestmark = pytest.mark.integration

_EOS = Path(__file__).resolve().parents[1] / "spark" / "eos_support.py"
if "pylog_eos_support" in sys.modules:
    eos = sys.modules["pylog_eos_support"]
else:  # tests/spark's oracle, loaded under its own name (both tiers may run in one process)
    _spec = importlib.util.spec_from_file_location("pylog_eos_support", _EOS)
    eos = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = eos
    _spec.loader.exec_module(eos)

QUERY_TIMEOUT_S = 300  # a deadline: AvailableNow queries end by themselves


def copy(spark, bootstrap: str, source: str, sink: str, checkpoint: str) -> None:
    df = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source).option("startingOffsets", "earliest")
          .option("kafka.isolation.level", "read_committed").option("maxOffsetsPerTrigger", "300").load()
          .select("key", "value"))
    query = (df.writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink).option("deliveryGuarantee", "exactly-once")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    assert query.awaitTermination(QUERY_TIMEOUT_S), f"the copy did not finish in {QUERY_TIMEOUT_S} s"
    assert query.exception() is None, query.exception()


def test_exactly_once_stream_copy_on_apache_kafka(spark, kafka_peer, tmp_path):
    bootstrap = kafka_peer.bootstrap
    source = kafka_peer.create_topic(unique_topic("eos-in"), 2)
    sink = kafka_peer.create_topic(unique_topic("eos-out"), 2)
    checkpoint = str(tmp_path / "ck")
    eos.produce_keyed(bootstrap, source, 900)
    copy(spark, bootstrap, source, sink, checkpoint)
    eos.check_exactly_once(bootstrap, sink, 900)
    commits = sorted(Path(checkpoint, "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    assert len(commits) >= 2, "maxOffsetsPerTrigger cuts the copy into batches"
    commits[-1].unlink()  # the last batch is replayed on restart; the commit log says it is done
    Path(checkpoint, "commits", f".{commits[-1].name}.crc").unlink(missing_ok=True)
    eos.produce_keyed(bootstrap, source, 300, start=900)
    copy(spark, bootstrap, source, sink, checkpoint)
    eos.check_exactly_once(bootstrap, sink, 1200)
    assert eos.open_transactions(bootstrap, default_prefix(checkpoint)) == []
    assert eos.lso_at_hw(bootstrap, sink)
