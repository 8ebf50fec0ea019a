"""Apache Kafka's own command-line tools against pylog, and the same tool against Apache Kafka.

Each tool runs as its ``bin/`` script would run it (``run_kafka_tool``: the Java admin client,
producer and consumer of Kafka 4.1), once per system and both at once (a tool's JVM takes about
a second to start; two start side by side in little more). What a tool prints is parsed, checked
against what the test put in, and compared between the two systems after the parts that must
differ (ports, ids, paths) are normalised. Differences kept on purpose are named where they are
normalised, with the reason.

kafka-consumer-perf-test subscribes with a consumer group (4.1 has no assign mode): against pylog
it goes through pylog's group coordinator (issue 14).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from peer_support import Peer, unique_topic

from broker.client.admin import AdminClient
from broker.client.producer import Producer
from broker.tools.kafka_peer import run_kafka_tool

TOOL_TIMEOUT_S = 90.0
DEADLINE_S = 30.0


@dataclass(frozen=True)
class ToolRun:
    returncode: int
    out: str
    err: str
    seconds: float

    def ok(self) -> "ToolRun":
        assert self.returncode == 0, f"exit {self.returncode}:\n{self.err[-3000:]}\n{self.out[-2000:]}"
        return self


def tool(name: str, args: list[str], input: bytes | None = None) -> ToolRun:
    started = time.monotonic()
    result = run_kafka_tool(name, args, input=input, timeout_s=TOOL_TIMEOUT_S)
    return ToolRun(result.returncode, result.stdout.decode(errors="replace"),
                   result.stderr.decode(errors="replace"), time.monotonic() - started)


def on_both(peers: tuple[Peer, Peer], run: Callable[[Peer], object]) -> dict[str, object]:
    """``run(peer)`` for Apache Kafka and pylog side by side: ``{"kafka": ..., "pylog": ...}``."""
    with ThreadPoolExecutor(max_workers=len(peers)) as pool:
        futures = {peer.name: pool.submit(run, peer) for peer in peers}
        return {name: future.result() for name, future in futures.items()}


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)


# ------------------------------------------------------------------------------ kafka-topics


def topics(peer: Peer, *args: str) -> ToolRun:
    return tool("kafka-topics", ["--bootstrap-server", peer.bootstrap, *args])


def parse_describe(text: str, topic: str) -> tuple[dict, list[dict]]:
    """kafka-topics --describe: the topic line's fields and one dict per partition line, with the
    topic id dropped (see the test) and the Configs list sorted (Java prints a hash map's order)."""
    header, partitions = {}, []
    for line in text.splitlines():
        fields = dict(part.split(": ", 1) if ": " in part else (part.rstrip(":"), "")
                      for part in line.strip().split("\t"))
        if line.startswith("Topic: "):
            header = fields
        elif line.startswith("\tTopic: "):
            partitions.append(fields)
    assert header.get("Topic") == topic, text
    header.pop("TopicId", None)
    header["Configs"] = sorted(filter(None, header["Configs"].split(",")))
    return header, partitions


def test_kafka_topics_create_list_describe_delete(peers):
    topic = unique_topic("tools-topics")
    created = on_both(peers, lambda p: topics(p, "--create", "--topic", topic, "--partitions", "3",
                                              "--replication-factor", "1",
                                              "--config", "retention.ms=3600000",
                                              "--config", "segment.bytes=1048576"))
    for run in created.values():
        assert run.ok().out.strip() == f"Created topic {topic}."

    listed = on_both(peers, lambda p: topics(p, "--list", "--exclude-internal"))
    for run in listed.values():
        assert topic in run.ok().out.split()

    described = on_both(peers, lambda p: topics(p, "--describe", "--topic", topic))
    kafka, pylog = (parse_describe(described[name].ok().out, topic) for name in ("kafka", "pylog"))
    for header, partitions in (kafka, pylog):
        assert (header["PartitionCount"], header["ReplicationFactor"]) == ("3", "1")
        assert {"retention.ms=3600000", "segment.bytes=1048576"} <= set(header["Configs"])
        assert [p["Partition"] for p in partitions] == ["0", "1", "2"]
    # Named: Kafka 4 (KRaft, KIP-966) stores min.insync.replicas as a cluster-wide dynamic default
    # when the storage is formatted, so it is not a DEFAULT_CONFIG and kafka-topics lists it; pylog
    # (ZooKeeper mode, no dynamic broker configs) has it as a plain default.
    kafka[0]["Configs"].remove("min.insync.replicas=1")
    assert pylog[0] == kafka[0]

    def node_free(partition: dict) -> dict:  # broker ids differ (Kafka's node 1, pylog's broker 1 or 0)
        return {k: v for k, v in partition.items() if k not in ("Leader", "Replicas", "Isr")}

    assert [node_free(p) for p in pylog[1]] == [node_free(p) for p in kafka[1]]
    for _, partitions in (kafka, pylog):
        # Elr and LastKnownElr come from DescribeTopicPartitions (pylog: empty, never "N/A").
        assert all(p["Leader"] == p["Replicas"] == p["Isr"] and p["Elr"] == p["LastKnownElr"] == ""
                   for p in partitions)

    deleted = on_both(peers, lambda p: topics(p, "--delete", "--topic", topic))
    for peer in peers:
        assert deleted[peer.name].ok().out == ""
        with AdminClient(peer.bootstrap) as admin:
            wait_until(lambda: topic not in admin.list_topics(), f"{topic} deleted on {peer}")


# -------------------------------------------------- console producer, get-offsets, console consumer

CONSOLE_LINES = [  # headers<TAB>key<TAB>value, as kafka-console-producer parses them below
    "h1:a,h2:b\tk0\tv0",
    "h3:c\tk1\tv1",
    "<NULL>\tk2\t<NULL>",  # no headers, null value
    "h4:\tk3\tünïcødé ✓",  # a header with an empty value
    "h5:e\tk4\tv4",
    "h6:f\tk5\tv5",
    "h7:g\tk6\tv6",
    "h8:h\tk7\tv7",
]
NULL_MARKER = "<NULL>"


def get_offsets(peer: Peer, topic: str, time_spec: str) -> dict[int, int]:
    """kafka-get-offsets: ``{partition: offset}`` from its ``topic:partition:offset`` lines."""
    run = tool("kafka-get-offsets", ["--bootstrap-server", peer.bootstrap, "--topic", topic,
                                     "--time", time_spec]).ok()
    answer = {}
    for line in run.out.split():
        name, partition, offset = line.rsplit(":", 2)
        assert name == topic, run.out
        answer[int(partition)] = int(offset) if offset else None
    return answer


def console_consume(peer: Peer, topic: str, partition: int, count: int) -> list[str]:
    run = tool("kafka-console-consumer", [
        "--bootstrap-server", peer.bootstrap, "--topic", topic, "--partition", str(partition),
        "--offset", "earliest", "--max-messages", str(count),
        "--property", "print.partition=true", "--property", "print.offset=true",
        "--property", "print.headers=true", "--property", "print.key=true",
        "--property", f"null.literal={NULL_MARKER}", "--property", "print.timestamp=false",
    ]).ok()
    assert f"Processed a total of {count} messages" in run.err
    return run.out.splitlines()


def test_console_producer_get_offsets_and_console_consumer(peers):
    topic = unique_topic("tools-console")
    for peer in peers:
        peer.create_topic(topic, partitions=2)
    lines = "".join(line + "\n" for line in CONSOLE_LINES).encode()
    produced = on_both(peers, lambda p: tool("kafka-console-producer", [
        "--bootstrap-server", p.bootstrap, "--topic", topic, "--property", "parse.key=true",
        "--property", "parse.headers=true", "--property", f"null.marker={NULL_MARKER}"], input=lines))
    for run in produced.values():
        run.ok()

    ends = on_both(peers, lambda p: get_offsets(p, topic, "-1"))
    # The Java producer places keyed records by murmur2: the same partitions on both systems.
    assert ends["pylog"] == ends["kafka"] and sum(ends["kafka"].values()) == len(CONSOLE_LINES)
    assert all(count > 0 for count in ends["kafka"].values()), ends  # both partitions are read below

    def consume_all(peer: Peer) -> list[str]:
        return [line for partition, count in sorted(ends[peer.name].items())
                for line in console_consume(peer, topic, partition, count)]

    consumed = on_both(peers, consume_all)
    assert consumed["pylog"] == consumed["kafka"]
    seen = []
    for line in consumed["pylog"]:
        partition, offset, headers, key, value = line.split("\t")
        assert partition.startswith("Partition:") and offset.startswith("Offset:")
        headers = NULL_MARKER if headers == "NO_HEADERS" else headers
        seen.append(f"{headers}\t{key}\t{value}")
    assert sorted(seen) == sorted(CONSOLE_LINES)


# ---------------------------------------------------------------- producer and consumer perf tests

PERF_RECORDS = 20_000


@pytest.fixture(scope="module")
def perf_topic(peers):
    """kafka-producer-perf-test's PERF_RECORDS records of 100 bytes, on each system."""
    topic = unique_topic("tools-perf")
    for peer in peers:
        peer.create_topic(topic, partitions=2)
    runs = on_both(peers, lambda p: tool("kafka-producer-perf-test", [
        "--topic", topic, "--num-records", str(PERF_RECORDS), "--record-size", "100",
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={p.bootstrap}", "acks=all"]))
    return topic, runs


def test_producer_perf_test(peers, perf_topic):
    topic, runs = perf_topic
    for peer in peers:
        summary = runs[peer.name].ok().out.strip().splitlines()[-1]
        assert re.match(rf"{PERF_RECORDS} records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), "
                        r"[\d.]+ ms avg latency, [\d.]+ ms max latency, \d+ ms 50th, \d+ ms 95th, "
                        r"\d+ ms 99th, \d+ ms 99.9th\.$", summary), summary
    ends = on_both(peers, lambda p: get_offsets(p, topic, "latest"))
    for peer in peers:
        assert sum(ends[peer.name].values()) == PERF_RECORDS, ends


def consumer_perf(peer: Peer, topic: str, timeout_ms: int) -> tuple[ToolRun, dict[str, str]]:
    run = tool("kafka-consumer-perf-test", ["--bootstrap-server", peer.bootstrap, "--topic", topic,
                                            "--messages", str(PERF_RECORDS), "--timeout", str(timeout_ms)])
    header, row = [line for line in run.ok().out.splitlines() if not line.startswith("WARNING")][-2:]
    return run, dict(zip(header.split(", "), row.split(", ")))


@pytest.mark.parametrize("system", ["kafka", "pylog"])
def test_consumer_perf_test(peers, perf_topic, system):
    """kafka-consumer-perf-test 4.1 always subscribes with a group (its --group defaults to
    perf-consumer-N; it has no option to assign partitions): it joins, is assigned both
    partitions and consumes every record before its --timeout, with no warning."""
    topic, _ = perf_topic
    peer = {p.name: p for p in peers}[system]
    run, stats = consumer_perf(peer, topic, 30_000)
    assert int(stats["data.consumed.in.nMsg"]) == PERF_RECORDS
    assert float(stats["data.consumed.in.MB"]) == pytest.approx(PERF_RECORDS * 100 / 1024 / 1024, abs=0.01)
    assert "WARNING" not in run.out


# ------------------------------------------------------------------- kafka-get-offsets by time


def test_get_offsets_by_time(peers):
    topic = unique_topic("tools-offsets")
    base_ms = (int(time.time()) - 600) * 1000  # recent: no retention check may drop the segment
    sent = {0: [1000, 2000, 3000], 1: [1500, 500]}  # partition: record timestamps - base_ms
    for peer in peers:
        peer.create_topic(topic, partitions=2)
        with Producer(peer.bootstrap, linger_ms=0) as producer:
            for partition, stamps in sent.items():
                for stamp in stamps:
                    producer.send(topic, b"v%d" % stamp, key=b"k", partition=partition,
                                  timestamp_ms=base_ms + stamp)
                producer.flush()
    expected = {
        "earliest": {0: 0, 1: 0},
        "-3": {0: 2, 1: 0},                # max timestamp (KIP-734): the record's own offset
        str(base_ms + 1200): {0: 1, 1: 0},  # first offset with a timestamp at or after
        str(base_ms + 2500): {0: 2},       # partition 1 has none that late: not printed
    }
    answers = on_both(peers, lambda p: {spec: get_offsets(p, topic, spec) for spec in expected})
    assert answers["kafka"] == expected
    assert answers["pylog"] == expected


# ------------------------------------------------------------------------------ kafka-dump-log

DUMP_BATCHES = [  # (compression, records); each group becomes one batch (flush between)
    ("none", [(b"k0", b"v0", (("h", b"1"),)), (None, b"v1", ()), (b"k2", None, (("h", None),))]),
    ("gzip", [(b"k3", b"v3" * 50, ()), (b"k4", b"", (("a", b"x"), ("b", b"y")))]),
    ("lz4", [(b"k%d" % i, b"value-%d" % i, ()) for i in range(5, 9)]),
]
BATCH_LINE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* compresscodec: (\w+) "
                        r"crc: (\d+) isvalid: (\w+)$")
RECORD_LINE = re.compile(r"^\| offset: (\d+) CreateTime: (\d+) keySize: (-?\d+) valueSize: (-?\d+) "
                         r"sequence: (-?\d+) headerKeys: \[(.*?)\](?: key: (.*?))?(?: payload: (.*))?$")


def write_dump_topic(peer: Peer, topic: str, base_ms: int) -> Path:
    """The records of DUMP_BATCHES, one batch per group, non-idempotent (producer id -1, so the
    batches are the same bytes on both systems); every batch indexed (index.interval.bytes=1).
    Named: pylog keeps new index entries in memory until a flush, roll or close (one pwrite per
    batch cost ~3% of an append; Kafka's index is an mmap, visible at once: index_file.py), so the
    topic flushes every batch (flush.messages=1) for the index files to be readable while live."""
    peer.create_topic(topic, configs={"index.interval.bytes": "1", "flush.messages": "1"})
    offset = 0
    for codec, records in DUMP_BATCHES:
        with Producer(peer.bootstrap, compression=codec, enable_idempotence=False, acks=1,
                      linger_ms=10_000) as producer:
            for key, value, headers in records:
                producer.send(topic, value, key=key, partition=0, headers=list(headers),
                              timestamp_ms=base_ms + offset)
                offset += 1
            producer.flush()
    (segment,) = [d / f"{topic}-0" / f"{0:020d}.log" for d in peer.data_dirs if (d / f"{topic}-0").is_dir()]
    return segment


def dump_log(segment: Path) -> list[str]:
    """kafka-dump-log --print-data-log on the segment and its two indexes."""
    index, time_index = segment.with_suffix(".index"), segment.with_suffix(".timeindex")
    run = tool("kafka-dump-log", ["--files", f"{segment},{index},{time_index}", "--print-data-log"]).ok()
    return [line for line in run.out.splitlines() if not line.startswith("Dumping ")]


def test_dump_log_reads_a_pylog_segment(peers):
    topic = unique_topic("tools-dump")
    base_ms = (int(time.time()) - 60) * 1000
    segments = on_both(peers, lambda p: write_dump_topic(p, topic, base_ms))
    dumps = on_both(peers, lambda p: dump_log(segments[p.name]))
    pylog = dumps["pylog"]
    batches = [BATCH_LINE.match(line) for line in pylog if line.startswith("baseOffset")]
    records = [RECORD_LINE.match(line) for line in pylog if line.startswith("| offset")]
    assert all(batches) and all(records), "\n".join(pylog)
    assert [(int(b[1]), int(b[2]), int(b[3]), b[4], b[6]) for b in batches] == [
        (0, 2, 3, "none", "true"), (3, 4, 2, "gzip", "true"), (5, 8, 4, "lz4", "true")]
    sent = [r for _, group in DUMP_BATCHES for r in group]
    assert [(int(r[1]), int(r[2]) - base_ms) for r in records] == [(i, i) for i in range(len(sent))]
    for match, (key, value, headers) in zip(records, sent):
        assert int(match[3]) == (-1 if key is None else len(key))
        assert int(match[4]) == (-1 if value is None else len(value))
        assert match[6] == ",".join(name for name, _ in headers)
        assert match[7] == (None if key is None else key.decode())
        assert match[8] == (None if value is None else value.decode())
    # The same batches on Apache Kafka dump to the same lines: offsets, sizes, positions, CRCs,
    # and the .index/.timeindex entries (one per batch: its last offset and position/timestamp).
    assert pylog == dumps["kafka"], first_difference(pylog, dumps["kafka"])


def first_difference(ours: list[str], theirs: list[str]) -> str:
    for index, (mine, reference) in enumerate(zip(ours, theirs)):
        if mine != reference:
            return f"line {index}:\n  pylog: {mine}\n  kafka: {reference}"
    return f"pylog has {len(ours)} lines, kafka {len(theirs)}"


# ------------------------------------------------------------------- kafka-configs --describe

CONFIG_LINE = re.compile(r"^  (?P<name>[^=]+)=(?P<value>.*) sensitive=(?P<sensitive>true|false) "
                         r"synonyms=\{(?P<synonyms>.*)\}$")


def describe_configs(peer: Peer, entity: list[str]) -> tuple[str, dict[str, tuple[str, str]]]:
    """kafka-configs --describe: its title line and ``{name: (value, synonyms)}``."""
    run = tool("kafka-configs", ["--bootstrap-server", peer.bootstrap, "--describe", *entity]).ok()
    title, *lines = run.out.splitlines()
    entries = {}
    for line in lines:
        match = CONFIG_LINE.match(line)
        assert match, line
        if match["sensitive"] == "false":  # Kafka's few sensitive keys (secrets) pylog has none of
            entries[match["name"]] = (match["value"], match["synonyms"])
    return title, entries


def test_configs_describe_topic(peers):
    topic = unique_topic("tools-configs")
    for peer in peers:
        peer.create_topic(topic, configs={"retention.ms": "3600000", "max.message.bytes": "500000"})
    described = on_both(peers, lambda p: (describe_configs(p, ["--entity-type", "topics", "--entity-name", topic]),
                                          describe_configs(p, ["--entity-type", "topics", "--entity-name", topic,
                                                               "--all"])))
    (kafka_dynamic, kafka_all), (pylog_dynamic, pylog_all) = described["kafka"], described["pylog"]
    assert pylog_dynamic == kafka_dynamic == (f"Dynamic configs for topic {topic} are:", {
        "retention.ms": ("3600000", "DYNAMIC_TOPIC_CONFIG:retention.ms=3600000"),
        "max.message.bytes": ("500000", "DYNAMIC_TOPIC_CONFIG:max.message.bytes=500000, "
                                        "STATIC_BROKER_CONFIG:message.max.bytes=1048588, "
                                        "DEFAULT_CONFIG:message.max.bytes=1048588"),
    })
    assert pylog_all[0] == kafka_all[0] == f"All configs for topic {topic} are:"
    pylog_entries, kafka_entries = pylog_all[1], kafka_all[1]
    # Named: Kafka 4 (KRaft, KIP-966) holds min.insync.replicas as a cluster-wide dynamic default,
    # an extra synonym level pylog (ZooKeeper mode, no dynamic broker configs) does not have.
    assert kafka_entries.pop("min.insync.replicas")[1] == (
        "DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1, DEFAULT_CONFIG:min.insync.replicas=1")
    assert pylog_entries.pop("min.insync.replicas") == ("1", "DEFAULT_CONFIG:min.insync.replicas=1")
    # Every topic config pylog has, Kafka has with the same value and synonyms; the rest are
    # Kafka features pylog does not have (tiered storage, throttles, timestamp bounds, ...).
    assert {name: kafka_entries.get(name) for name in pylog_entries} == pylog_entries
    assert len(pylog_entries) >= 17


# Broker keys whose values depend on the process (ports, directories) or exist on one side only.
_PROCESS_KEYS = {"listeners", "advertised.listeners", "log.dirs"}
# Named: pylog's own defaults, different from Kafka's on purpose: a bound on connections (STYLE:
# every bound explicit), a 1 s flush scheduler (Kafka: Long.MAX, i.e. flush.ms drives flushes),
# no auto-created topics unless asked (the peer tier sets both to false anyway), and broker.id
# required (Kafka's default -1 meant a generated id in ZooKeeper mode; pylog generates none).
_POSSIBLY_DIFFERENT_DEFAULTS = {"max.connections", "log.flush.scheduler.interval.ms", "auto.create.topics.enable",
                                "broker.id"}


def test_configs_describe_broker(peers):
    ids = {"kafka": "1", "pylog": "1"}  # each side's only broker
    described = on_both(peers, lambda p: describe_configs(
        p, ["--entity-type", "brokers", "--entity-name", ids[p.name], "--all"]))
    kafka_all, pylog_all = described["kafka"], described["pylog"]
    assert pylog_all[0] == kafka_all[0] == "All configs for broker 1 are:"
    pylog_entries, kafka_entries = pylog_all[1], kafka_all[1]
    shared = sorted(set(pylog_entries) & set(kafka_entries) - _PROCESS_KEYS - {"min.insync.replicas"})
    assert len(shared) >= 35, shared
    differences = {name: (pylog_entries[name], kafka_entries[name]) for name in shared
                   if pylog_entries[name] != kafka_entries[name] and name not in _POSSIBLY_DIFFERENT_DEFAULTS}
    assert differences == {}
    for name in ("listeners", "log.dirs"):
        assert pylog_entries[name][1].startswith(f"STATIC_BROKER_CONFIG:{name}=")
