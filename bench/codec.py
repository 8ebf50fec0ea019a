"""Records/s of the Arrow record codec (broker.records.arrow) against kafka-python's, same run.

Data: 100-byte JSON-like values (lz4 shrinks them about 4x), 8-16 byte keys, increasing
timestamps, no headers (and a case with two); ~1 MiB batches. For each codec (none, lz4):
- ours encode: ``encode_batches`` of Arrow columns into ~1 MiB batches (bytes out, CRC set);
- ours decode: ``decode_batches`` of those batches, end to end, into Spark's schema;
- peer encode: kafka-python ``DefaultRecordBatchBuilder.append`` per record, ``build()`` per batch;
- peer decode: kafka-python ``DefaultRecordBatch`` + ``validate_crc()``, iterating every record
  and reading its offset, timestamp, key and value.
Both sides run in this one single-threaded process (the kernels use no threads), so records/s
is per core. Each figure is the median of ``--repeat`` runs of wall time; ``cpu_`` figures divide
by the process CPU time of the same runs instead, which a busy shared machine disturbs less.
Also: first-import JIT compile time with an empty cache and import time with a warm one,
each in a fresh interpreter; and a small-batch case (16 records/batch), where the Python work
per batch (header checks, one kernel call per call) shows.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: E402

from _report import report  # noqa: E402
from broker.records.arrow import HEADERS_TYPE, decode_batches, encode_batches  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CODECS = {"none": 0, "lz4": 3}


def make_rows(count: int, seed: int = 7) -> tuple[list[bytes], list[bytes], np.ndarray]:
    rng = np.random.default_rng(seed)
    users = rng.integers(0, 100_000, count)
    amounts = rng.integers(0, 10_000_000, count)
    values = [(b'{"id":%09d,"user":"u%06d","amount":%9d,"currency":"EUR","status":"settled"}'
               % (i, users[i], amounts[i])).ljust(100, b" ") for i in range(count)]
    keys = [b"user-%0*d" % (3 + i % 9, users[i] * 10_007 % 10 ** (3 + i % 9)) for i in range(count)]
    timestamps = 1_700_000_000_000 + np.arange(count, dtype=np.int64) // 4
    assert {len(v) for v in values} == {100} and 8 <= min(map(len, keys)) and max(map(len, keys)) <= 16
    return values, keys, timestamps


def timed(fn, repeat: int) -> tuple[float, float, float]:
    """(median wall s, median CPU s, share of CPU in the kernel) over ``repeat`` runs.

    The kernel share is mostly first-touch page faults of freshly allocated memory.
    """
    walls, cpus = [], []
    start = resource.getrusage(resource.RUSAGE_SELF)
    for _ in range(repeat):
        cpu, wall = time.process_time(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    end = resource.getrusage(resource.RUSAGE_SELF)
    system = (end.ru_stime - start.ru_stime) / max(1e-9, sum(cpus))
    return statistics.median(walls), statistics.median(cpus), system


def kafka_python_encode(values, keys, timestamps, codec: int, headers=None) -> list[bytes]:
    out, i, n = [], 0, len(values)
    while i < n:
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                            batch_size=1 << 20)
        first = i
        while i < n and builder.append(i - first, int(timestamps[i]), keys[i], values[i],
                                       headers[i] if headers else []) is not None:
            i += 1
        out.append(bytes(builder.build()))
    return out


def kafka_python_decode(batches: list[bytes], headers: bool = False) -> int:
    count = 0
    for data in batches:
        batch = DefaultRecordBatch(bytearray(data))
        assert batch.validate_crc()
        for record in batch:
            record.offset, record.timestamp, record.key, record.value  # noqa: B018
            if headers:
                record.headers  # noqa: B018
            count += 1
    return count


def measure_codec(name: str, codec: int, rows: int, peer_rows: int, repeat: int) -> None:
    values, keys, timestamps = make_rows(rows)
    value_col, key_col = pa.array(values, pa.binary()), pa.array(keys, pa.binary())
    ts_col = pa.array(timestamps)
    batches = encode_batches(value_col, keys=key_col, timestamps=ts_col, compression=codec)
    data = b"".join(b.data for b in batches)
    assert decode_batches(data, topic="t", partition=0).num_rows == rows
    enc = timed(lambda: encode_batches(value_col, keys=key_col, timestamps=ts_col,
                                       compression=codec), repeat)
    dec = timed(lambda: decode_batches(data, topic="t", partition=0), repeat)

    peer_batches = kafka_python_encode(values[:peer_rows], keys[:peer_rows], timestamps, codec)
    assert kafka_python_decode(peer_batches) == peer_rows
    peer_repeat = max(3, repeat // 3)
    peer_enc = timed(lambda: kafka_python_encode(values[:peer_rows], keys[:peer_rows], timestamps,
                                                 codec), peer_repeat)
    peer_dec = timed(lambda: kafka_python_decode(peer_batches), peer_repeat)

    def rate(rows_done, seconds):
        return rows_done / seconds

    for op, ours, peer in (("encode", enc, peer_enc), ("decode", dec, peer_dec)):
        report(f"codec.{name}.{op}", records=rows, batches=len(batches),
               batch_bytes=len(batches[0].data), records_per_batch=batches[0].record_count,
               records_per_s=rate(rows, ours[0]), cpu_records_per_s=rate(rows, ours[1]),
               kafka_python_records_per_s=rate(peer_rows, peer[0]),
               kafka_python_cpu_records_per_s=rate(peer_rows, peer[1]),
               ratio=rate(rows, ours[0]) / rate(peer_rows, peer[0]),
               cpu_ratio=rate(rows, ours[1]) / rate(peer_rows, peer[1]),
               sys_cpu_share=ours[2], kafka_python_sys_cpu_share=peer[2])


def measure_headers(rows: int, peer_rows: int, repeat: int) -> None:
    """Two headers per record (a trace id and a source), decoded into the headers column."""
    values, keys, timestamps = make_rows(rows)
    headers = [[("trace-id", b"%016x" % (i * 2654435761)), ("source", b"billing")]
               for i in range(rows)]
    columns = dict(keys=pa.array(keys, pa.binary()), timestamps=pa.array(timestamps),
                   headers=pa.array(headers, HEADERS_TYPE))
    value_col = pa.array(values, pa.binary())
    batches = encode_batches(value_col, **columns)
    data = b"".join(b.data for b in batches)
    enc = timed(lambda: encode_batches(value_col, **columns), repeat)
    dec = timed(lambda: decode_batches(data, topic="t", partition=0, include_headers=True), repeat)
    peer_batches = kafka_python_encode(values[:peer_rows], keys[:peer_rows], timestamps, 0,
                                       headers[:peer_rows])
    peer_repeat = max(3, repeat // 3)
    peer_enc = timed(lambda: kafka_python_encode(values[:peer_rows], keys[:peer_rows], timestamps,
                                                 0, headers[:peer_rows]), peer_repeat)
    peer_dec = timed(lambda: kafka_python_decode(peer_batches, headers=True), peer_repeat)
    for op, ours, peer in (("encode", enc, peer_enc), ("decode", dec, peer_dec)):
        report(f"codec.none.{op}_2_headers", records=rows, batches=len(batches),
               records_per_s=rows / ours[0], kafka_python_records_per_s=peer_rows / peer[0],
               ratio=(rows / ours[0]) / (peer_rows / peer[0]))


def measure_small_batches(rows: int, repeat: int) -> None:
    values, keys, timestamps = make_rows(rows)
    value_col, key_col = pa.array(values, pa.binary()), pa.array(keys, pa.binary())
    batches = encode_batches(value_col, keys=key_col, timestamps=pa.array(timestamps),
                             batch_bytes_max=2048)
    data = b"".join(b.data for b in batches)
    dec = timed(lambda: decode_batches(data, topic="t", partition=0), repeat)
    peer_dec = timed(lambda: kafka_python_decode([b.data for b in batches]), max(3, repeat // 3))
    report("codec.none.decode_small_batches", records=rows, batches=len(batches),
           records_per_batch=batches[0].record_count, records_per_s=rows / dec[0],
           kafka_python_records_per_s=rows / peer_dec[0], ratio=peer_dec[0] / dec[0])


def measure_jit() -> None:
    """First-import compile time (empty cache) and warm-cache import time, fresh interpreters."""
    probe = ("import time; t = time.perf_counter(); import broker.records.arrow; "
             "print(time.perf_counter() - t)")
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
        runs = [float(subprocess.run([sys.executable, "-c", probe], env=env, check=True,
                                     capture_output=True, text=True).stdout) for _ in range(3)]
    report("codec.jit", first_import_compile_s=runs[0], warm_cache_import_s=min(runs[1:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--peer-rows", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    print(f"load: {os.getloadavg()}  cores: {os.cpu_count()}  (single-threaded measurement)")
    measure_jit()
    for name, codec in CODECS.items():
        measure_codec(name, codec, args.rows, args.peer_rows, args.repeat)
    measure_headers(args.rows, args.peer_rows, args.repeat)
    measure_small_batches(args.rows // 4, args.repeat)
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
