"""Append throughput of ``Log.append_as_leader`` with 1 MiB batches against plain ``os.write``.

Both write the same bytes to the same disk (a directory under --dir, default the system temp
dir), alternating, several rounds; the median of each is reported with the ratio (target >= 0.8).
Two variants: page cache only (what a broker without fsync does) and fsync at the end of the run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402
from broker.log import Log, LogConfig  # noqa: E402
from broker.records import Record, encode_batch  # noqa: E402
from broker.records.header import BatchLimits  # noqa: E402

BATCH_RECORDS = 9_000  # ~1 MiB with 100-byte values and 8-byte keys


def one_mib_batch() -> bytes:
    value = (b"0123456789abcdef" * 7)[:100]
    return encode_batch([Record(i, 1_700_000_000_000 + i, b"k%07d" % i, value) for i in range(BATCH_RECORDS)])


def run_plain(path: Path, batch: bytes, count: int, fsync: bool) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    start = time.perf_counter()
    for _ in range(count):
        os.write(fd, batch)
    if fsync:
        os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    path.unlink()
    return elapsed


def run_log(directory: Path, batch: bytes, count: int, fsync: bool) -> float:
    config = LogConfig(segment_bytes=1 << 30, message_max_bytes=len(batch))
    log = Log.open(directory, config, now_ms=lambda: int(time.time() * 1000),
                   limits=BatchLimits(batch_bytes_max=len(batch)))
    start = time.perf_counter()
    for _ in range(count):
        log.append_as_leader(batch, leader_epoch=0)
    if fsync:
        log.flush()
    elapsed = time.perf_counter() - start
    assert log.log_end_offset == count * BATCH_RECORDS
    log.close()
    shutil.rmtree(directory)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", default=tempfile.gettempdir())
    parser.add_argument("--mib", type=int, default=512, help="MiB written per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    batch = one_mib_batch()
    count = args.mib * (1 << 20) // len(batch)
    total = count * len(batch)
    root = Path(tempfile.mkdtemp(prefix="pylog-bench-", dir=args.dir))
    try:
        for fsync in (False, True):
            plain, ours = [], []
            for i in range(args.rounds):
                plain.append(run_plain(root / "plain.bin", batch, count, fsync))
                ours.append(run_log(root / f"bench-{i}", batch, count, fsync))
            plain.sort(), ours.sort()
            t_plain, t_ours = plain[len(plain) // 2], ours[len(ours) // 2]
            report(f"log_append.1MiB{'_fsync' if fsync else ''}",
                   batch_bytes=len(batch), total_mib=total >> 20,
                   log_mb_per_s=total / t_ours / 1e6, os_write_mb_per_s=total / t_plain / 1e6,
                   ratio=t_plain / t_ours, log_records_per_s=count * BATCH_RECORDS / t_ours)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
