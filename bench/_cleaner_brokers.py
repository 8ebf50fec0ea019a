"""The broker measurements of ``bench/log_cleaner.py``: pylog's produce throughput while its
cleaner runs, and Apache Kafka's cleaner on the same records.

pylog (one broker, ``broker.tools.perf_local.LocalCluster``): the compacted topic ``compacted``
is loaded with the benchmark's records while ``log.cleaner.enable=false``, and a copy of its
dirty partition directory is kept. Each round then: the broker restarted with the cleaner off and
the dirty copy put back (no ``cleaner-offset-checkpoint``); ``pylog perf produce`` writes
``produce_records`` 100-byte records to ``other`` (a delete topic); the broker is restarted with
the cleaner on (``log.cleaner.backoff.ms=100``), which at once starts cleaning ``compacted-0``
(dirty ratio 1.0), and the same produce runs again; the broker's log line "cleaned compacted-0"
says when the pass ended, so the run says whether it overlapped the whole produce. A third
produce after the pass is the idle reference after the restart. The ratio is during / off of the
same round; the table gives the median over rounds (the machine's load moves between them).

Kafka (one KRaft node, its own server JVM flags, ``log.cleaner.backoff.ms=100``, INFO logging so
``kafka.log.LogCleaner`` prints its statistics): ``compacted`` is created with
``min.compaction.lag.ms`` a century (the records' timestamps are fixed, in 2025), so nothing
is cleanable while it is loaded; then
``kafka-configs --alter`` sets it to 0 and the cleaner starts. Its "Log cleaner thread 0 cleaned
log compacted-0" statistics give the seconds it took (and the wall time from the alter to the
line is reported beside them).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _sbs_tools as tools  # noqa: E402
from _cleaner_data import SEGMENT_BYTES, chunks  # noqa: E402
from broker.client import AdminClient, Producer  # noqa: E402
from broker.tools.kafka_peer import ApacheKafkaCluster, find_kafka_install, run_kafka_tool  # noqa: E402
from broker.tools.perf_local import LocalCluster, _answers_api_versions  # noqa: E402

# The records' timestamps are fixed (in 2025): a lag of a century holds them back until the alter.
HELD_LAG_MS = 100 * 365 * 24 * 3600 * 1000
ROWS_PER_BATCH = 140  # 140 x ~110 B encoded: one batch under 16 KiB
PRODUCE_PROPS = {"acks": "1", "enable.idempotence": "false", "linger.ms": "5", "batch.size": "131072"}
_KAFKA_CLEANED = re.compile(r"Log cleaner thread \d+ cleaned log compacted-0 .*?\n\s*([\d,.]+) MB of log "
                            r"processed in ([\d,.]+) seconds", re.S)
_KAFKA_END = re.compile(r"End size: ([\d,.]+) MB \(([\d,]+) messages\)")


def load(bootstrap: str, topic: str, records: int, keys: int) -> float:
    """Produce the benchmark's records to partition 0 of ``topic`` with pylog's client, one
    ``send_arrow`` per ``ROWS_PER_BATCH`` rows (one batch each, about 15 KiB); seconds taken.

    One call per batch because ``send_arrow`` gives the batches of one call baseOffset = rows
    before them, and Kafka 4.1 refuses a non-zero baseOffset on a compacted topic (INVALID_RECORD,
    "The baseOffset of the record batch in the append to compacted-0 should be 0"); the Java
    client and librdkafka always send 0."""
    start = time.perf_counter()
    with Producer(bootstrap, acks=1, enable_idempotence=False, linger_ms=5, batch_bytes_max=16_384,
                  buffer_bytes_max=256 << 20, delivery_timeout_ms=600_000) as producer:
        for table in chunks(records, keys):
            for row in range(0, table.num_rows, ROWS_PER_BATCH):
                producer.send_arrow(topic, table.slice(row, ROWS_PER_BATCH), partition=0,
                                    timestamp_column="timestamp")
        producer.flush()
    return time.perf_counter() - start


def _produce_other(bootstrap: str, records: int) -> dict:
    args = ["--bootstrap-server", bootstrap, "--topic", "other", "--num-records", str(records),
            "--record-size", "100", "--throughput", "-1",
            "--producer-props", *(f"{k}={v}" for k, v in PRODUCE_PROPS.items())]
    return tools.pylog_perf("produce", args, timeout_s=600)


def _restart(cluster: LocalCluster, cleaner: dict[str, str], while_stopped=None) -> None:
    """Stop broker 1 cleanly and start it again with ``cleaner`` settings changed (and
    ``while_stopped()`` run in between)."""
    popen = cluster.processes[0]
    popen.send_signal(signal.SIGTERM)
    popen.wait(120)
    if while_stopped is not None:
        while_stopped()
    directory = cluster.root / "broker-1"
    config = directory / "server.properties"
    lines = [line for line in config.read_text().splitlines() if line.split("=")[0] not in cleaner]
    config.write_text("\n".join(lines + [f"{k}={v}" for k, v in cleaner.items()]) + "\n")
    with open(directory / "broker.log", "ab") as log_file:
        cluster.processes[0] = subprocess.Popen(
            [sys.executable, "-m", "broker.server", "--config", str(config)], stdin=subprocess.DEVNULL,
            stdout=log_file, stderr=subprocess.STDOUT, cwd=cluster.broker_root, start_new_session=True)
    deadline = time.monotonic() + 300
    while not _answers_api_versions(cluster.ports[0]):
        if cluster.processes[0].poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"broker did not restart: {(directory / 'broker.log').read_text()[-2000:]}")
        time.sleep(0.1)


def _cleaned_lines(cluster: LocalCluster) -> int:
    return (cluster.root / "broker-1" / "broker.log").read_text(errors="replace").count("cleaned compacted-0:")


def pylog_produce_during_cleaning(root: Path, records: int, keys: int, produce_records: int,
                                  rounds: int = 1) -> dict:
    overrides = {"log.cleaner.enable": "false", "log.segment.bytes": str(SEGMENT_BYTES)}
    with LocalCluster(1, overrides, root=root) as cluster:
        with AdminClient(cluster.bootstrap) as admin:
            admin.create_topics("compacted", partitions=1, replication_factor=1,
                                config={"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES)})
            admin.create_topics("other", partitions=1, replication_factor=1)
        load_s = load(cluster.bootstrap, "compacted", records, keys)
        data = cluster.root / "broker-1" / "data"
        saved = root / "compacted-0.dirty"

        def save() -> None:
            shutil.copytree(data / "compacted-0", saved)

        def restore() -> None:
            shutil.rmtree(data / "compacted-0")
            shutil.copytree(saved, data / "compacted-0")
            (data / "cleaner-offset-checkpoint").unlink(missing_ok=True)

        _restart(cluster, {}, save)
        runs = [_round(cluster, produce_records, restore if n else None) for n in range(rounds)]
    ratios = [run["during"]["mb_per_sec"] / run["without"]["mb_per_sec"] for run in runs]
    return {"load_s": load_s, "rounds": runs, "ratios": ratios, "median_ratio": statistics.median(ratios),
            **runs[0]}


def _round(cluster: LocalCluster, produce_records: int, restore) -> dict:
    if restore is not None:
        _restart(cluster, {"log.cleaner.enable": "false"}, restore)
    os.sync()  # the load's (or restore's) dirty pages written back before any measurement, not during one
    without = _produce_other(cluster.bootstrap, produce_records)
    cleaned_before = _cleaned_lines(cluster)
    _restart(cluster, {"log.cleaner.enable": "true", "log.cleaner.backoff.ms": "100"})
    started = time.perf_counter()
    during = _produce_other(cluster.bootstrap, produce_records)
    produce_end = time.perf_counter() - started
    overlapped = _cleaned_lines(cluster) == cleaned_before
    while _cleaned_lines(cluster) == cleaned_before and time.perf_counter() - started < 1800:
        time.sleep(0.2)
    clean_s = time.perf_counter() - started
    after = _produce_other(cluster.bootstrap, produce_records)
    return {"without": without, "during": during, "after": after, "produce_s": produce_end,
            "broker_clean_s": clean_s, "overlapped": overlapped, "load": round(os.getloadavg()[0], 1)}


def kafka_cleaner(root: Path, records: int, keys: int) -> dict:
    os.environ["KAFKA_PEER_LOG_LEVEL"] = "INFO"  # LogCleaner's statistics are INFO lines
    install = find_kafka_install()
    server = tools._ServerJvmInstall(install.java, install.libs)
    overrides = {"log.cleaner.backoff.ms": "100", "log.segment.bytes": str(SEGMENT_BYTES)}
    cluster = ApacheKafkaCluster(root, 1, overrides, install=server)
    cluster.start()
    try:
        with AdminClient(cluster.bootstrap) as admin:
            admin.create_topics("compacted", partitions=1, replication_factor=1,
                                config={"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
                                        "min.compaction.lag.ms": str(HELD_LAG_MS)})
        load_s = load(cluster.bootstrap, "compacted", records, keys)
        out = cluster.nodes[0].out_path
        cleaned_before = len(list(_KAFKA_CLEANED.finditer(out.read_text(errors="replace"))))
        started = time.perf_counter()
        result = run_kafka_tool("kafka-configs", [
            "--bootstrap-server", cluster.bootstrap, "--alter", "--entity-type", "topics",
            "--entity-name", "compacted", "--add-config", "min.compaction.lag.ms=0"])
        if result.returncode != 0:
            raise RuntimeError(f"kafka-configs failed: {result.stderr.decode(errors='replace')[-1000:]}")
        while len(matches := list(_KAFKA_CLEANED.finditer(out.read_text(errors="replace")))) <= cleaned_before:
            if time.perf_counter() - started > 1800:
                raise RuntimeError("Kafka's cleaner did not finish in 30 minutes")
            time.sleep(0.2)
        match = matches[-1]
        wall_s = time.perf_counter() - started
        text = out.read_text(errors="replace")
        end = _KAFKA_END.search(text, match.start())
        return {"load_s": load_s, "passes_before_alter": cleaned_before, "seconds": float(match.group(2).replace(",", "")),
                "mb": float(match.group(1).replace(",", "")), "wall_s": wall_s,
                "end_messages": int(end.group(2).replace(",", "")) if end else None,
                "stats": text[match.start():match.start() + 900]}
    finally:
        cluster.stop()
