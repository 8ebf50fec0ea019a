"""Read throughput by offset, and crash-recovery time per GiB, of a partition log.

Builds a ~1 GiB log of 16 KiB batches (150 records of 100 B each) across 256 MiB segments, then:
- sequential read by offset, 1 MiB per ``read``, from the log start to its end; peer: ``os.pread``
  of the same files in 1 MiB chunks (the floor for any reader);
- random reads: ``read(offset, 64 KiB)`` at random offsets (index lookup + header scan + pread);
- recovery: reopen with no clean-shutdown marker and recovery point 0, so every batch of every
  segment is re-validated with its CRC; peer: crc32c over the same bytes read in 1 MiB chunks.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

import crc32c

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402
from broker.log import Log, LogConfig  # noqa: E402
from broker.records import Record, encode_batch  # noqa: E402

RECORDS_PER_BATCH = 150


def clock_ms() -> int:
    return int(time.time() * 1000)


def build(directory: Path, gib: float) -> tuple[int, int]:
    value = (b"0123456789abcdef" * 7)[:100]
    batch = encode_batch([Record(i, 1_700_000_000_000 + i, b"k%07d" % i, value)
                          for i in range(RECORDS_PER_BATCH)])
    config = LogConfig(segment_bytes=256 << 20)
    log = Log.open(directory, config, now_ms=clock_ms)
    count = int(gib * (1 << 30)) // len(batch)
    for _ in range(count):
        log.append_as_leader(batch, leader_epoch=0)
    log.flush()
    end = log.log_end_offset
    size = sum(p.stat().st_size for p in directory.glob("*.log"))
    log.close()
    return end, size


def sequential_read(directory: Path, end: int) -> tuple[float, int]:
    log = Log.open(directory, LogConfig(segment_bytes=256 << 20), now_ms=clock_ms, clean_shutdown=True)
    offset, batches, start = 0, 0, time.perf_counter()
    while offset < end:
        fetched = log.read(offset, 1 << 20)
        batches += fetched.batches
        offset = fetched.next_offset
    records = offset
    elapsed = time.perf_counter() - start
    log.close()
    assert records == end and batches == end // RECORDS_PER_BATCH, (records, batches, end)
    return elapsed, records


def random_reads(directory: Path, end: int, n: int) -> float:
    log = Log.open(directory, LogConfig(segment_bytes=256 << 20), now_ms=clock_ms, clean_shutdown=True)
    rng = random.Random(7)
    offsets = [rng.randrange(end) for _ in range(n)]
    start = time.perf_counter()
    for offset in offsets:
        assert len(log.read(offset, 64 << 10).records) > 0
    elapsed = time.perf_counter() - start
    log.close()
    return elapsed


def pread_files(directory: Path, checksum: bool) -> float:
    start = time.perf_counter()
    for path in sorted(directory.glob("*.log")):
        fd = os.open(path, os.O_RDONLY)
        size, pos = os.fstat(fd).st_size, 0
        while pos < size:
            chunk = os.pread(fd, 1 << 20, pos)
            if checksum:
                crc32c.crc32c(chunk)
            pos += len(chunk)
        os.close(fd)
    return time.perf_counter() - start


def recover(directory: Path) -> float:
    start = time.perf_counter()
    log = Log.open(directory, LogConfig(segment_bytes=256 << 20), now_ms=clock_ms,
                   recovery_point=0, clean_shutdown=False)
    elapsed = time.perf_counter() - start
    log.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--gib", type=float, default=1.0)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pylog-bench-", dir=args.dir))
    directory = root / "bench-0"
    try:
        end, size = build(directory, args.gib)
        gb = size / 1e9
        pread_files(directory, checksum=False)  # warm the page cache for both sides alike
        t_read, records = sequential_read(directory, end)
        t_pread = pread_files(directory, checksum=False)
        report("log_read.sequential_1MiB", log_gb_per_s=gb / t_read, pread_gb_per_s=gb / t_pread,
               ratio=t_pread / t_read, records_per_s=records / t_read)
        n = 20_000
        t_random = random_reads(directory, end, n)
        report("log_read.random_64KiB", reads_per_s=n / t_random, us_per_read=t_random / n * 1e6)
        t_recover = recover(directory)
        t_crc = pread_files(directory, checksum=True)
        gib = size / (1 << 30)
        report("log_recovery.full", log_gib=gib, seconds_per_gib=t_recover / gib,
               crc_scan_seconds_per_gib=t_crc / gib, ratio=t_crc / t_recover)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
