"""Apache Kafka's ``kafka-dump-log --print-data-log`` reads segments pylog's cleaner wrote: every
batch valid, the same batches (offsets, counts, empty ones included), the same surviving record
offsets, and the delete horizon (KIP-534) where pylog's ``dump-log`` shows it.

No cluster: the segments are written by pylog's log and cleaner in this process and handed to
Kafka's tool as files, as an operator would."""

from __future__ import annotations

import io
import random
import re

from broker.log import Log, LogConfig
from broker.log.cleaner.cleaning_pass import CleanerSettings, clean_once
from broker.records import Record, encode_batch
from broker.tools.dump_log import dump_segment
from broker.tools.kafka_peer import run_kafka_tool

T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=1200, index_interval_bytes=128, delete_retention_ms=1000,
                   cleanup_policy=frozenset({"compact"}))
KAFKA_BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*producerId: (-?\d+) .*"
                         r"deleteHorizonMs: (OptionalLong\.empty|OptionalLong\[(\d+)\]) .* isvalid: (\w+)$")
KAFKA_RECORD = re.compile(r"^\| offset: (\d+) CreateTime: \d+ keySize: (-?\d+) valueSize: (-?\d+) .*$")
PYLOG_BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* producerId: (-?\d+) .*crcValid: true"
                         r"(?: deleteHorizonMs: (\d+) \([^)]*\))?(?: empty: .*)?$")


def cleaned_segments(directory) -> list[str]:
    """A compacted log after one pass: superseded records gone (gaps), tombstones stamped with a
    delete horizon, producer 5's superseded last batch kept empty."""
    log = Log.open(directory, CONFIG, lambda: T0, clean_shutdown=True)
    rng = random.Random(11)

    def append(records, producer_id=-1):
        log.append_as_leader(encode_batch(records, producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                          base_sequence=0 if producer_id >= 0 else -1), 0)

    append([Record(0, T0, b"a", b"1"), Record(1, T0, b"b", b"1")], producer_id=5)
    for i in range(0, 120, 3):
        append([Record(j, T0 + i + j, b"key-%d" % rng.randrange(12), None if rng.random() < 0.25 else b"v%d" % i)
                for j in range(3)])
    append([Record(0, T0, b"a", b"2"), Record(1, T0, b"b", b"2")])
    log.roll()
    end = log.log_end_offset
    clean_once(log, checkpoint=None, high_watermark=end, last_stable_offset=end, now_ms=T0,
               producer_last_offsets={5: 1}, settings=CleanerSettings(hash_keys=(1, 2, 3, 4), io_buffer_bytes=700))
    paths = [str(s.log_path) for s in log.segments[:-1]]
    log.close()
    return paths


def pylog_dump(paths):
    batches, offsets = [], []
    for path in paths:
        out = io.StringIO()
        assert dump_segment(path, out, print_records=True) == 0
        for line in out.getvalue().splitlines():
            if line.startswith("baseOffset"):
                match = PYLOG_BATCH.match(line)
                assert match, line
                batches.append((int(match[1]), int(match[2]), int(match[3]), int(match[4]),
                                None if match[5] is None else int(match[5])))
            elif line.startswith("| offset: "):
                offsets.append(int(line.split()[2]))
    return batches, offsets


def test_kafka_dump_log_reads_pylog_cleaned_segments(tmp_path):
    paths = cleaned_segments(tmp_path / "t-0")
    run = run_kafka_tool("kafka-dump-log", ["--files", ",".join(paths), "--print-data-log"])
    out, err = run.stdout.decode(), run.stderr.decode()
    assert run.returncode == 0 and "Exception" not in out + err, err[-2000:]
    batches, offsets = [], []
    for line in out.splitlines():
        if line.startswith("baseOffset"):
            match = KAFKA_BATCH.match(line)
            assert match and match[7] == "true", line
            batches.append((int(match[1]), int(match[2]), int(match[3]), int(match[4]),
                            None if match[6] is None else int(match[6])))
        elif line.startswith("| offset: "):
            assert KAFKA_RECORD.match(line), line
            offsets.append(int(line.split()[2]))
    ours = pylog_dump(paths)
    assert (batches, offsets) == ours
    # What makes the segments "cleaned" is there, so the comparison above covered it.
    assert any(count == 0 and producer == 5 for _, _, count, producer, _ in batches)
    assert any(horizon == T0 + CONFIG.delete_retention_ms for *_, horizon in batches)
    assert len(offsets) < offsets[-1] + 1  # gaps: fewer records than offsets
