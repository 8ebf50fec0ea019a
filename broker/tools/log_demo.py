"""``pylog demo`` (for now): the partition log end to end, with a crash in the middle.

1. Append a few million records (mixed none/lz4/gzip batches) into a log with 64 MiB segments, so
   it rolls; flush most of it (the recovery point), leave the last part unflushed.
2. "Crash": the process never closes the log; the active segment loses the end of its last batch
   and gains random garbage after it, as after a power cut where the OS persisted the new file size
   but not all the data.
3. Reopen: recovery re-validates from the recovery point, truncates at the first bad byte and
   rebuilds the indexes. The demo prints what was truncated and checks the result by reading every
   batch back and appending again.

Later issues replace this with the cluster and Spark demonstration.
"""

from __future__ import annotations

import io
import os
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import TextIO

from broker.log import Log, LogConfig
from broker.records import Compression, Record, decode_batch, encode_batch, iter_batches
from broker.tools.dump_log import dump_segment

RECORDS_PER_BATCH = 1_000
SEGMENT_BYTES = 64 << 20


def clock_ms() -> int:
    return int(time.time() * 1000)


def sample_batches(rng: random.Random, count: int = 12) -> list[bytes]:
    """A few distinct batches of JSON-ish events; the log stamps fresh offsets on each append."""
    codecs = [Compression.NONE, Compression.LZ4, Compression.GZIP]
    batches = []
    now = clock_ms()
    for b in range(count):
        records = []
        for i in range(RECORDS_PER_BATCH):
            user = rng.randrange(10_000)
            value = (b'{"user":%d,"event":"%s","amount":%d.%02d}'
                     % (user, rng.choice([b"view", b"cart", b"buy"]), rng.randrange(500), rng.randrange(100)))
            records.append(Record(i, now + i, b"user-%d" % user, value.ljust(100, b" ")))
        batches.append(encode_batch(records, compression=codecs[b % len(codecs)]))
    return batches


def run_demo(directory: str | None, records: int, out: TextIO) -> int:
    root = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="pylog-demo-"))
    log_dir = root / "events-0"
    if log_dir.exists():
        shutil.rmtree(log_dir)
    rng = random.Random(2026)
    say = lambda text="": print(text, file=out, flush=True)  # noqa: E731
    say(f"pylog log demo: {records:,} records into {log_dir} (segment.bytes={SEGMENT_BYTES >> 20} MiB)")
    config = LogConfig(segment_bytes=SEGMENT_BYTES)
    batches = sample_batches(rng)
    log = Log.open(log_dir, config, now_ms=clock_ms)

    n_batches = max(1, records // RECORDS_PER_BATCH)
    flush_at = int(n_batches * 0.9)
    start = time.perf_counter()
    appended_bytes = 0
    for i in range(n_batches):
        batch = batches[i % len(batches)]
        log.append_as_leader(batch, leader_epoch=0)
        appended_bytes += len(batch)
        if i + 1 == flush_at:
            log.flush()
    elapsed = time.perf_counter() - start
    end_before = log.log_end_offset
    recovery_point = log.recovery_point
    segments = sorted(log_dir.glob("*.log"))
    say(f"1. appended {end_before:,} records in {n_batches:,} batches "
        f"({appended_bytes / 1e6:,.0f} MB) in {elapsed:.2f} s: "
        f"{end_before / elapsed:,.0f} records/s, {appended_bytes / elapsed / 1e6:,.0f} MB/s; "
        f"{len(segments)} segments; flushed up to offset {recovery_point:,}")

    torn = tear_tail(segments[-1], rng)
    say(f"2. crash: cut the last batch of {segments[-1].name} at byte {torn['cut_at']:,} "
        f"(batch of {torn['batch_size']:,} bytes) and appended {torn['garbage']:,} bytes of garbage")
    report = io.StringIO()
    dump_segment(str(segments[-1]), report)
    say("   pylog dump-log says: " + report.getvalue().strip().splitlines()[-1])
    # The crashed process's file descriptors die with it; nothing is flushed or closed cleanly.
    del log

    start = time.perf_counter()
    log = Log.open(log_dir, config, now_ms=clock_ms, recovery_point=recovery_point, clean_shutdown=False)
    recovery_s = time.perf_counter() - start
    end_after = log.log_end_offset
    size_after = segments[-1].stat().st_size
    say(f"3. recovered in {recovery_s * 1000:,.0f} ms from the recovery point {recovery_point:,}: "
        f"truncated {torn['file_size'] - size_after:,} bytes; log end offset {end_before:,} -> "
        f"{end_after:,} ({end_before - end_after:,} unflushed records of the torn batch lost, "
        f"every earlier record kept)")

    counted, last_seen, start = read_back(log)
    say(f"4. read back {counted:,} records by offset in {time.perf_counter() - start:.2f} s; "
        f"offsets 0..{last_seen:,} without a gap")
    info = log.append_as_leader(batches[0], leader_epoch=1)
    say(f"5. appending again continues at offset {info.first_offset:,} (leader epoch 1)")
    sample = decode_batch(log.read(info.first_offset, 1 << 20).records).records[0]
    say(f"   first record: offset={sample.offset} key={sample.key!r} value={sample.value.strip()!r}")
    log.close()
    ok = counted == end_after and last_seen == end_after - 1 and info.first_offset == end_after
    ok = ok and end_after >= recovery_point and end_before - end_after <= RECORDS_PER_BATCH
    say("demo " + ("OK" if ok else "FAILED: the log did not recover as expected"))
    if directory is None:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if ok else 1


def tear_tail(segment: Path, rng: random.Random) -> dict[str, int]:
    data = segment.read_bytes()
    positions = [(pos, header.size) for pos, header in iter_batches(data)]
    last_pos, last_size = positions[-1]
    cut_at = last_pos + rng.randrange(1, last_size)
    garbage = os.urandom(4096)
    with open(segment, "r+b") as f:
        f.truncate(cut_at)
        f.seek(cut_at)
        f.write(garbage)
    return {"cut_at": cut_at, "batch_size": last_size, "garbage": len(garbage),
            "file_size": cut_at + len(garbage)}


def read_back(log: Log) -> tuple[int, int, float]:
    start = time.perf_counter()
    offset, counted, last_seen = log.log_start_offset, 0, -1
    while offset < log.log_end_offset:
        data = log.read(offset, 4 << 20).records
        for _, header in iter_batches(data):
            assert header.base_offset == last_seen + 1, "gap in offsets"
            counted += header.records_count
            last_seen = header.last_offset
        offset = last_seen + 1
    return counted, last_seen, start
