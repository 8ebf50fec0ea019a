"""The data and the in-process measurements of ``bench/log_cleaner.py``.

Records: ``records`` keyed records, key ``key-%08d`` (12 bytes) drawn uniformly from ``keys``
distinct keys (seeded), value 88 bytes ending in the record's sequence number, timestamp
``BASE_TIMESTAMP_MS + i``: 100 bytes of key and value per record, uncompressed. ``chunks`` yields
them as Arrow tables of ``CHUNK_RECORDS`` rows, so 10 M records never sit in memory at once; both
systems get exactly these rows.

``python bench/_cleaner_data.py clean DIR DEDUPE_BYTES`` is the cleaner worker: it opens the
log in ``DIR``, loads the compiled kernels on a tiny log first (so the baseline RSS includes
them), then runs ``clean_once`` passes until the whole cleanable section is clean, and prints
one JSON line: seconds, passes, bytes read/written, peak RSS (VmHWM) before and after.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.log import Log, LogConfig  # noqa: E402
from broker.log.cleaner.cleaning_pass import CleanerSettings, clean_once  # noqa: E402
from broker.records.arrow import check_batches, encode_batches  # noqa: E402

BASE_TIMESTAMP_MS = 1_750_000_000_000
CHUNK_RECORDS = 500_000
KEY_BYTES, VALUE_BYTES = 12, 88
SEGMENT_BYTES = 128 << 20
BATCH_BYTES = 16_384  # the Java producer's default batch.size


def _digits(numbers: np.ndarray, width: int) -> np.ndarray:
    """(n, width) uint8 ASCII decimal digits of ``numbers``, zero-padded."""
    out = np.empty((len(numbers), width), np.uint8)
    rest = numbers.astype(np.int64)
    for column in range(width - 1, -1, -1):
        rest, digit = np.divmod(rest, 10)
        out[:, column] = digit + ord("0")
    return out


def _binary(matrix: np.ndarray) -> pa.Array:
    rows, width = matrix.shape
    offsets = np.arange(0, (rows + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets), pa.py_buffer(matrix.tobytes())])


def chunks(records: int, keys: int, seed: int = 13):
    """Arrow tables (key, value, timestamp) of the benchmark's records, in order."""
    rng = np.random.default_rng(seed)
    filler = np.frombuffer((b"value-of-" * 10)[:VALUE_BYTES - 10], np.uint8)
    for start in range(0, records, CHUNK_RECORDS):
        n = min(CHUNK_RECORDS, records - start)
        key_ids = rng.integers(0, keys, n)
        key_matrix = np.empty((n, KEY_BYTES), np.uint8)
        key_matrix[:, :4] = np.frombuffer(b"key-", np.uint8)
        key_matrix[:, 4:] = _digits(key_ids, KEY_BYTES - 4)
        value_matrix = np.empty((n, VALUE_BYTES), np.uint8)
        value_matrix[:, :VALUE_BYTES - 10] = filler
        value_matrix[:, VALUE_BYTES - 10:] = _digits(np.arange(start, start + n), 10)
        timestamps = pa.array(np.arange(start, start + n, dtype=np.int64) + BASE_TIMESTAMP_MS)
        yield pa.table({"key": _binary(key_matrix), "value": _binary(value_matrix), "timestamp": timestamps})


def log_config(segment_bytes: int = SEGMENT_BYTES) -> LogConfig:
    return LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=segment_bytes)


def build_log(directory: Path, records: int, keys: int, segment_bytes: int = SEGMENT_BYTES) -> dict:
    """Append the records to a new compacted log in ``directory`` as 16 KiB batches."""
    log = Log.open(directory, log_config(segment_bytes), now_ms=lambda: int(time.time() * 1000))
    try:
        for table in chunks(records, keys):
            for batch in encode_batches(table.column("value"), keys=table.column("key"),
                                        timestamps=table.column("timestamp"), batch_bytes_max=BATCH_BYTES):
                log.append_as_leader(batch.data, leader_epoch=0)
        log.flush()
        return {"records": log.log_end_offset, "bytes": log.size_in_bytes, "segments": len(log.segments)}
    finally:
        log.close()


def read_with_crc(directory: Path) -> tuple[float, int, int]:
    """Read every segment file and check every batch (CRC-32C, header, record framing) with
    ``check_batches``: ``(seconds, bytes, records)``."""
    start = time.perf_counter()
    total = records = 0
    for path in sorted(directory.glob("*.log")):
        fd = os.open(path, os.O_RDONLY)
        try:
            data = os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)
        records += check_batches(data)
        total += len(data)
    return time.perf_counter() - start, total, records


def count_records(directory: Path) -> int:
    """Records in the log's segment files but the last (the active segment, never cleaned: what
    Kafka's "End size" counts too), from the batch headers."""
    from broker.records import iter_batches

    total = 0
    for path in sorted(directory.glob("*.log"))[:-1]:
        data = path.read_bytes()
        total += sum(header.records_count for _, header in iter_batches(data))
    return total


def _warm_up(settings: CleanerSettings) -> None:
    """A tiny pass first, so numba's kernels are loaded before the baseline RSS is taken."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "warm-0"
        build_log(directory, 2_000, 100, segment_bytes=16 << 10)
        _clean_all(directory, settings, 16 << 10)


def _clean_all(directory: Path, settings: CleanerSettings, segment_bytes: int = SEGMENT_BYTES) -> tuple[int, int, int]:
    """``clean_once`` until nothing is cleanable: ``(passes, bytes read, bytes written)``."""
    clock = lambda: int(time.time() * 1000)  # noqa: E731
    log = Log.open(directory, log_config(segment_bytes), now_ms=clock, clean_shutdown=True)
    passes = read = written = 0
    checkpoint = None
    try:
        while True:
            end = log.log_end_offset
            checkpoint, stats = clean_once(log, checkpoint=checkpoint, high_watermark=end, last_stable_offset=end,
                                           now_ms=clock(), settings=settings)
            if stats is None:
                return passes, read, written
            passes, read, written = passes + 1, read + stats.bytes_read, written + stats.bytes_written
    finally:
        log.close()


def _peak_rss_bytes() -> int:
    """VmHWM of this process. Not ``ru_maxrss``: Linux carries the parent's peak across
    fork and exec into it, so a worker started by a big parent would report the parent's."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def _clean_worker(directory: Path, dedupe_bytes: int, segment_bytes: int) -> None:
    settings = CleanerSettings(dedupe_buffer_bytes=dedupe_bytes, hash_keys=(1, 2, 3, 4))
    _warm_up(settings._replace(dedupe_buffer_bytes=1 << 20))
    baseline = _peak_rss_bytes()
    start = time.perf_counter()
    passes, read, written = _clean_all(directory, settings, segment_bytes)
    seconds = time.perf_counter() - start
    peak = _peak_rss_bytes()
    print(json.dumps({"seconds": seconds, "passes": passes, "bytes_read": read, "bytes_written": written,
                      "baseline_rss_bytes": baseline, "peak_rss_bytes": peak}), flush=True)


if __name__ == "__main__":
    assert sys.argv[1] == "clean", "usage: _cleaner_data.py clean DIR DEDUPE_BYTES SEGMENT_BYTES"
    _clean_worker(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
