"""Exactly-once writes (issue 16) on one transactional pylog broker: streaming copy with restarts
and a replayed batch, batch writes all-or-nothing, speculation with a forced task failure, the
options. The oracle (``eos_support``) reads the output under read_committed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from broker.client import Producer
from spark_log import transactions
from spark_log.options import OptionError, parse_sink_options
from spark_log.sink import read_query_id
from spark_log.transactions import DEFAULT_COMMIT_LOG_TOPIC, Committer, TxnSettings, default_prefix, transactional_id

from eos_support import check_exactly_once, lso_at_hw, open_transactions, produce_keyed, read_committed, txn_overrides
from spark_helpers import create_topic, unique


QUERY_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def txn_cluster(cluster_factory):
    return cluster_factory.make(1, overrides=txn_overrides(1))


def copy_stream(spark, bootstrap: str, source_topic: str, sink_topic: str, checkpoint: str, **extra):
    df = (spark.readStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", source_topic).option("startingOffsets", "earliest")
          .option("isolation.level", "read_committed").option("maxOffsetsPerTrigger", "300").load()
          .select("key", "value"))
    writer = (df.writeStream.format("pylog").option("kafka.bootstrap.servers", bootstrap)
              .option("topic", sink_topic).option("deliveryGuarantee", "exactly-once")
              .option("checkpointLocation", checkpoint).trigger(availableNow=True))
    for key, value in extra.items():
        writer = writer.option(key, value)
    query = writer.start()
    # A deadline, not a wait (AvailableNow ends by itself): at a load of 20 a 4-batch copy once
    # took over 120 s, and a query still running must fail here, not in the oracle.
    assert query.awaitTermination(QUERY_TIMEOUT_S), f"the copy did not finish in {QUERY_TIMEOUT_S} s"
    assert query.exception() is None, query.exception()


def test_stream_copy_restart_replay_and_new_query_write_each_record_once(spark, txn_cluster, tmp_path):
    """A copy, a restart from the checkpoint with a replayed batch, then "delete the checkpoint
    and start over": a new query with new input at the same path (same transactional id prefix,
    batch 0 again, a new query id). Every record of all of them once under read_committed."""
    bootstrap = txn_cluster.bootstrap
    source_topic, sink_topic = create_topic(bootstrap, unique("src"), 2), create_topic(bootstrap, unique("out"), 2)
    checkpoint = str(tmp_path / "ck")
    produce_keyed(bootstrap, source_topic, 1000)
    copy_stream(spark, bootstrap, source_topic, sink_topic, checkpoint)
    check_exactly_once(bootstrap, sink_topic, 1000)
    # The driver read the query id from the checkpoint's metadata and keeps it in the commit log.
    settings = TxnSettings(default_prefix(checkpoint), 60_000, DEFAULT_COMMIT_LOG_TOPIC, bootstrap)
    assert Committer(settings).last_record()["query"] == read_query_id(checkpoint) is not None
    # SPARK-28908: the sink committed but the checkpoint's commit entry is lost; Spark replays
    # the last batch with the same id. The commit log says it is done: its rewrite is aborted.
    commits = sorted(Path(checkpoint, "commits").glob("[0-9]*"), key=lambda p: int(p.name))
    assert len(commits) >= 3, "maxOffsetsPerTrigger cuts the copy into batches"
    commits[-1].unlink()
    Path(checkpoint, "commits", f".{commits[-1].name}.crc").unlink(missing_ok=True)
    produce_keyed(bootstrap, source_topic, 500, start=1000)
    copy_stream(spark, bootstrap, source_topic, sink_topic, checkpoint)
    check_exactly_once(bootstrap, sink_topic, 1500)
    # The checkpoint deleted, a new query at its path: its batch 0 (below the old query's last)
    # is not a replay (before 6b0017b it was aborted as one: its rows silently lost).
    old_query = read_query_id(checkpoint)
    shutil.rmtree(checkpoint)
    second = create_topic(bootstrap, unique("src-b"), 2)
    produce_keyed(bootstrap, second, 300, start=1500)  # the next 300 of each key's sequence
    copy_stream(spark, bootstrap, second, sink_topic, checkpoint)
    assert Committer(settings).last_record()["query"] == read_query_id(checkpoint) != old_query
    check_exactly_once(bootstrap, sink_topic, 1800)
    assert open_transactions(bootstrap, default_prefix(checkpoint)) == []
    assert lso_at_hw(bootstrap, sink_topic)


def _prepared(bootstrap: str, topic: str, tid: str, value: bytes):
    with Producer(bootstrap, transactional_id=tid, transaction_timeout_ms=60_000) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, value, partition=0)
        return producer.prepare_transaction()


def test_a_replay_is_aborted_in_a_worker_that_committed_an_earlier_batch(txn_cluster):
    """Spark runs the driver's commits in a pool of reused Python workers (two of them once
    earlier queries' commits overlapped): worker A commits batch 0, worker B batch 1, and the
    replay of batch 1 after a restart (SPARK-28908) reaches A again. A's kept last batch (0) must
    not let the replay be committed a second time (the peer tier once read 1203 of 1200)."""
    bootstrap = txn_cluster.bootstrap
    out = create_topic(bootstrap, unique("replay-out"), 1)
    prefix = unique("pylog-spark-pool")
    committer = Committer(TxnSettings(prefix, 60_000, DEFAULT_COMMIT_LOG_TOPIC, bootstrap))

    def commit(batch: int, attempt: int, value: bytes) -> None:
        tid = transactional_id(prefix, batch, 0, 0, attempt)
        committer.commit([_prepared(bootstrap, out, tid, value)], batch)

    commit(0, 1, b"b0")  # in worker A
    kept_by_a = dict(transactions._last_done)
    transactions._last_done.clear()  # worker B: a process of its own
    commit(1, 2, b"b1")
    transactions._last_done.clear()
    transactions._last_done.update(kept_by_a)  # back in worker A
    committer._log(transactions._clients_for(committer.settings), {"batch": 7, "state": "intent",
                                                                   "transactions": []}, key="another-query")
    commit(1, 3, b"b1-replayed")
    assert [v for _, v in read_committed(bootstrap, out)] == [b"b0", b"b1"]
    assert open_transactions(bootstrap, prefix) == []


def test_a_stale_coordinator_in_a_commit_message_costs_a_lookup_not_the_batch(txn_cluster):
    """The driver's EndTxn starts at the coordinator node the task found (its commit message);
    a node the cluster no longer has (99 here) falls back to FindCoordinator."""
    bootstrap = txn_cluster.bootstrap
    out = create_topic(bootstrap, unique("hint-out"), 1)
    prefix = unique("pylog-spark-hint")
    tid = transactional_id(prefix, 0, 0, 0, 1)
    Committer(TxnSettings(prefix, 60_000, DEFAULT_COMMIT_LOG_TOPIC, bootstrap)).commit(
        [_prepared(bootstrap, out, tid, b"v")], 0, coordinators={tid: 99})
    assert [v for _, v in read_committed(bootstrap, out)] == [b"v"]
    assert open_transactions(bootstrap, prefix) == []


def test_a_new_query_reusing_a_checkpoint_path_is_not_a_replay(txn_cluster, tmp_path):
    """A checkpoint deleted and a new query started at the same path: same prefix, a new query id
    (``<checkpoint>/metadata``), batches from 0 again. Its batches are written, not aborted as
    replays of the old query's (silent data loss before); a replay of its own last batch still is.
    A query whose id is unknown (a non-local checkpoint) at a batch below the last committed one
    is refused with the option to change, not dropped."""
    bootstrap = txn_cluster.bootstrap
    out = create_topic(bootstrap, unique("reuse-out"), 1)
    prefix = unique("pylog-spark-reuse")
    checkpoint = tmp_path / "ck"
    checkpoint.mkdir()
    (checkpoint / "metadata").write_text('{"id":"6f1c0b1e-old"}\n')
    assert read_query_id(str(checkpoint)) == "6f1c0b1e-old" == read_query_id(f"file://{checkpoint}")
    assert read_query_id("s3a://bucket/ck") is None and read_query_id(str(tmp_path / "none")) is None
    attempts = iter(range(100, 200))

    def commit(query_id: str | None, batch: int, value: bytes) -> None:
        committer = Committer(TxnSettings(prefix, 60_000, DEFAULT_COMMIT_LOG_TOPIC, bootstrap,
                                          query_id=query_id, checkpoint_location=str(checkpoint)))
        committer.recover()  # as each stream writer does on the driver
        tid = transactional_id(prefix, batch, 0, 0, next(attempts))
        committer.commit([_prepared(bootstrap, out, tid, value)], batch)

    for batch in range(3):
        commit("6f1c0b1e-old", batch, b"old-%d" % batch)
    commit("6f1c0b1e-old", 2, b"old-2-replayed")  # the old query's own replay: aborted
    commit("7a2d-new", 0, b"new-0")  # the checkpoint deleted, a new query at the same path
    commit("7a2d-new", 1, b"new-1")
    commit("7a2d-new", 1, b"new-1-replayed")
    assert [v for _, v in read_committed(bootstrap, out)] == [b"old-0", b"old-1", b"old-2", b"new-0", b"new-1"]
    with pytest.raises(RuntimeError, match=f"batch 1 committed for transactional id prefix {prefix}, "
                                           "this query is at batch 0: the checkpoint at .* 'transactionalIdPrefix'"):
        commit(None, 0, b"unknown-0")
    assert open_transactions(bootstrap, prefix) == []
    assert lso_at_hw(bootstrap, out)


def test_batch_write_is_all_or_nothing(spark, txn_cluster):
    bootstrap = txn_cluster.bootstrap
    topic = create_topic(bootstrap, unique("batch"), 2)
    rows = spark.range(0, 400, numPartitions=4).select(
        F.concat(F.lit("k"), (F.col("id") % 7).cast("string")).alias("key"),
        F.concat(F.lit("k"), (F.col("id") % 7).cast("string"), F.lit(":"),
                 (F.col("id") / 7).cast("long").cast("string")).alias("value"), "id")
    writer = lambda df: (df.write.format("pylog").option("kafka.bootstrap.servers", bootstrap)  # noqa: E731
                         .option("topic", topic).option("deliveryGuarantee", "exactly-once").mode("append"))
    # One partition fails after the others wrote (and prepared) theirs: nothing becomes visible.
    failing = rows.select("key", F.when(F.col("id") == 399, F.raise_error(F.lit("injected")))
                          .otherwise(F.col("value")).alias("value"))
    with pytest.raises(Exception, match="injected"):
        writer(failing).save()
    assert read_committed(bootstrap, topic) == []
    assert open_transactions(bootstrap, "pylog-spark-write-") == []
    assert lso_at_hw(bootstrap, topic)
    writer(rows.select("key", "value")).save()
    check_exactly_once(bootstrap, topic, 400, ordered=False)


def test_options():
    base = {"kafka.bootstrap.servers": "b:9092", "topic": "t"}
    assert parse_sink_options(base).delivery_guarantee == "at-least-once"
    options = parse_sink_options({**base, "deliveryGuarantee": "exactly-once", "checkpointLocation": "/ck/q1"})
    assert options.exactly_once and options.transactional_id_prefix == default_prefix("/ck/q1")
    assert default_prefix("/ck/q1") == default_prefix("/ck/q1/") != default_prefix("/ck/q2")
    assert parse_sink_options({**base, "deliveryGuarantee": "exactly-once",
                               "transactionalIdPrefix": "p", "transactionTimeoutMs": "9000"}
                              ).transaction_timeout_ms == 9000
    with pytest.raises(OptionError, match="deliveryGuarantee"):
        parse_sink_options({**base, "deliveryGuarantee": "twice"})
    with pytest.raises(OptionError, match="acks"):
        parse_sink_options({**base, "deliveryGuarantee": "exactly-once", "kafka.acks": "1"})


NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "exactly_once_copy.ipynb"


def test_cluster_to_cluster_copy_notebook(txn_cluster, cluster_factory, tmp_path, monkeypatch):
    """notebooks/exactly_once_copy.ipynb copies a topic between two pylog clusters exactly-once;
    a second run after more input copies only the new records."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    target = cluster_factory.make(1, overrides=txn_overrides(1))
    source_topic = create_topic(txn_cluster.bootstrap, unique("nbsrc"), 2)
    target_topic = create_topic(target.bootstrap, unique("nbdst"), 2)
    produce_keyed(txn_cluster.bootstrap, source_topic, 700)
    for name, value in {"PYLOG_SOURCE_BOOTSTRAP": txn_cluster.bootstrap, "PYLOG_TARGET_BOOTSTRAP": target.bootstrap,
                        "PYLOG_SOURCE_TOPIC": source_topic, "PYLOG_TARGET_TOPIC": target_topic,
                        "PYLOG_CHECKPOINT": str(tmp_path / "ck")}.items():
        monkeypatch.setenv(name, value)
    # Both runs in one kernel (its Python and Spark's JVM start once; the notebook's spark.stop()
    # ends its SparkContext, and the second run builds a new one), as a user re-runs all cells.
    client = nbclient.NotebookClient(nbformat.read(NOTEBOOK, as_version=4), timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    with client.setup_kernel():
        for total in (700, 1000):
            client.nb = notebook = nbformat.read(NOTEBOOK, as_version=4)
            for index, cell in enumerate(notebook.cells):
                client.execute_cell(cell, index)
            text = "\n".join(o.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                             for o in cell.get("outputs", []))
            assert f"target {total} records (read_committed), 0 duplicated" in text, text
            check_exactly_once(target.bootstrap, target_topic, total)
            produce_keyed(txn_cluster.bootstrap, source_topic, 300, start=700)
