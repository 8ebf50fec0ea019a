"""The cleaner's figures as ``pylog topics describe --broker-config`` reads them from a log
directory: the same dirty section the broker's cleaner computes, read without changing a file,
and the logs the cleaner gave up on."""

from __future__ import annotations

import argparse
import io
import random

from fake_kafka import InMemoryKafka
from test_log_cleaner import Clock, random_writes, write
from test_log_cleaner_service import COMPACT, StubReplicas, make_log, run_pass, service

from broker.log.cleaner.cleaning_pass import summarize
from broker.log.cleaner.plan import cleanable_section
from broker.log.cleaner.status import UNCLEANABLE_FILE, dirty_section, read_uncleanable, write_uncleanable
from broker.tools.topics import add_topics_parser, run_topics


def files(directory):
    return {p.relative_to(directory): (p.stat().st_mtime_ns, p.read_bytes()) for p in directory.rglob("*")
            if p.is_file()}


def section_from_files(log_dir, clock, name="table"):
    return dirty_section(log_dir, name, 0, now_ms=clock(), min_compaction_lag_ms=0, max_compaction_lag_ms=2**63 - 1)


def test_the_dirty_section_read_from_files_is_the_cleaners(tmp_path):
    clock = Clock()
    table, _ = make_log(tmp_path, "table", COMPACT, clock, 1)
    cleaner = service(StubReplicas(tmp_path, [table]))
    log = table.log

    def cleaners_view(checkpoint):
        end = log.log_end_offset
        return cleanable_section(summarize(log.segments), log_start_offset=log.log_start_offset,
                                 checkpoint=checkpoint, high_watermark=end, last_stable_offset=end,
                                 now_ms=clock(), min_compaction_lag_ms=0, max_compaction_lag_ms=2**63 - 1)

    before = files(tmp_path)
    assert section_from_files(tmp_path, clock) == cleaners_view(None)
    assert section_from_files(tmp_path, clock).dirty_ratio == 1.0
    assert files(tmp_path) == before  # read-only: not a byte or an mtime changed
    first_dirty = run_pass(cleaner)
    assert section_from_files(tmp_path, clock) == cleaners_view(first_dirty)
    assert section_from_files(tmp_path, clock).dirty_ratio == 0.0
    write(log, random_writes(random.Random(9), 100, keys=15))  # more dirty data, then roll
    log.roll()
    after = section_from_files(tmp_path, clock)
    assert after == cleaners_view(first_dirty) and 0.0 < after.dirty_ratio < 1.0
    assert section_from_files(tmp_path, clock, "absent") is None


def test_uncleanable_logs_are_written_for_tools_and_cleared_by_the_next_broker(tmp_path):
    clock = Clock()
    bad, _ = make_log(tmp_path, "bad", COMPACT, clock, 3)
    good, _ = make_log(tmp_path, "good", COMPACT, clock, 4)
    with open(bad.log.segments[0].log_path, "r+b") as f:  # a flipped bit: the CRC fails
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0x40]))
    cleaner = service(StubReplicas(tmp_path, [bad, good]))
    for _ in range(3):
        run_pass(cleaner)
    marked = read_uncleanable(tmp_path)
    assert list(marked) == [("bad", 0)] and "CRC" in marked[("bad", 0)] and "\n" not in marked[("bad", 0)]
    service(StubReplicas(tmp_path, [bad, good]))._next_partition()  # a restarted broker retries every log
    assert not (tmp_path / UNCLEANABLE_FILE).exists()


def test_a_malformed_uncleanable_file_reads_as_empty(tmp_path):
    write_uncleanable(tmp_path, {("t", 2): "OSError: a\nb"})
    assert read_uncleanable(tmp_path) == {("t", 2): "OSError: a b"}
    (tmp_path / UNCLEANABLE_FILE).write_text("0\n2\nt 2 x\n")  # count says 2, one line
    assert read_uncleanable(tmp_path) == {}


def describe(kafka, *argv: str) -> str:
    parser = argparse.ArgumentParser(prog="pylog")
    add_topics_parser(parser.add_subparsers(dest="command", required=True))
    out = io.StringIO()
    args = parser.parse_args(["topics", "describe", "--bootstrap-server", kafka.bootstrap, *argv])
    assert run_topics(args, out, io.StringIO()) == 0
    return out.getvalue()


def test_topics_describe_shows_each_copys_dirty_ratio_and_uncleanable_state(tmp_path):
    clock = Clock()
    data = tmp_path / "data"
    table, _ = make_log(data, "table", COMPACT, clock, 1)
    config = tmp_path / "server.properties"
    config.write_text(f"broker.id=0\nlog.dirs={data}\nzookeeper.connect=localhost:2181\n")
    with InMemoryKafka(brokers=2) as kafka:
        kafka.create_topic("table", 1, config={"cleanup.policy": "compact"})
        kafka.create_topic("plain", 1)
        kafka.create_topic("elsewhere", 2, config={"cleanup.policy": "compact,delete"})
        out = describe(kafka, "--broker-config", str(config))
        assert "\tTopic: table\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\tDirtyRatio: 0=1.00\n" in out
        assert "\tTopic: plain\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\n" in out
        assert "\tTopic: elsewhere\tPartition: 0\tLeader: 0\tReplicas: 0\tIsr: 0\tDirtyRatio: unknown\n" in out
        run_pass(service(StubReplicas(data, [table])))
        write_uncleanable(data, {("table", 0): "OSError: no space"})
        assert "\tIsr: 0\tDirtyRatio: 0=0.00\tUncleanable: 0\n" in describe(
            kafka, "--topic", "table", "--broker-config", str(config))
        assert "DirtyRatio" not in describe(kafka, "--topic", "table")  # Kafka's lines without configs
