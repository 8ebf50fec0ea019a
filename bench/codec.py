"""Records/s of the Arrow record codec (broker.records.arrow) against kafka-python's, same run.

Data: 100-byte JSON-like values (lz4 shrinks them about 3.3x), 8-16 byte keys, increasing
timestamps, no headers (and a case with two). For each codec (none, lz4, gzip) and batch size
(1 MiB, and Kafka's default batch.size of 16 KiB):
- ours encode: ``encode_batches`` of Arrow columns into batches (new ``bytes`` out, CRC set);
  for none also ``encode_views``: ``copy=False``, batches as views into one reused buffer;
- ours decode: ``decode_batches`` of those batches, end to end, into Spark's schema;
- peer encode: kafka-python ``DefaultRecordBatchBuilder.append`` per record, ``build()`` per batch
  (its bytearray is the result, not copied again); same batch_size, and the bench checks both
  put the same number of records in every batch;
- peer decode: kafka-python ``DefaultRecordBatch`` + ``validate_crc()``, iterating every record
  and reading its offset, timestamp, key and value.
Like with like: both sides use the same CRC-32C library (crc32c) and the same lz4 frame settings
(64 KiB independent blocks, level 0); kafka-python's gzip defaults to level 9, so here it is set
to 6, pylog's and Java Kafka's default.
Both sides run in this one single-threaded process (the kernels use no threads), so records/s
is per core. The machine is shared, so ours and the peer alternate in ``--rounds`` rounds; a
round's figure is the median of its repeats, and each result is min/median/max over rounds of
records/s by wall time and by process CPU time (user + system: page faults count), the ratios
taken within each round. ``faults_per_call``/``sys_share`` show the cost of first-touch pages.
Compressor floor (lz4 and gzip cases): in the same rounds, the compression library call alone,
with the settings ``broker.records.compression`` uses, on the very record sections of our batches
(encoded uncompressed, the 61-byte header sliced off; the bench checks it returns our payloads
byte for byte); for decode, the library's one-shot decompress of our payloads (no cap: a lower
bound for any capped decoder). Both sides spend most of a compressed batch in that call, so it
bounds what any encoder or decoder with this library can reach: ``compressor_records_per_s`` is
its rate, ``compressor_share`` its part of our time, ``ours_non_compressor_us_per_batch`` what
the codec adds per batch (kernel, CRC, header, copies), and ``ratio_ceiling`` = kafka-python's time
/ the floor's, the best ratio against this peer any encoder (decoder) using this compressor could
report. Each is a min/median/max over rounds, taken within a round like the ratios.
Also: first-import JIT compile time with an empty cache and import time with a warm one,
each in a fresh interpreter; and a small-batch decode case (16 records/batch), where the Python
work per batch (header checks, one kernel call per call) shows.
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

import lz4.frame
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))

import kafka.codec  # noqa: E402
import kafka.record.default_records as kafka_records  # noqa: E402
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder  # noqa: E402

from _report import report  # noqa: E402
from broker.records.arrow import HEADERS_TYPE, decode_batches, encode_batches  # noqa: E402
from broker.records.header import HEADER_SIZE  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CODECS = {"none": 0, "lz4": 3, "gzip": 1}
GZIP_LEVEL = 6  # pylog's compression.compress default, and Java Kafka's (Deflater default)
kafka_records.gzip_encode = functools.partial(kafka.codec.gzip_encode, compresslevel=GZIP_LEVEL)


def lz4_frame_compress(data) -> bytes:
    """lz4.frame.compress(data, level 0, 64 KiB blocks, no content/block checksum, independent).

    By position: as keywords the arguments cost ~0.7 us a call to parse, no part of the compressor.
    """
    return lz4.frame.compress(data, 0, lz4.frame.BLOCKSIZE_MAX64KB, False, False, False)


# The floor: one library call per batch with broker.records.compression's settings (measure_codec
# checks the output is our payload byte for byte), and the one-shot decompress of that payload.
COMPRESSOR_FLOOR = {3: lz4_frame_compress,
                    1: functools.partial(zlib.compress, level=GZIP_LEVEL, wbits=31)}
DECOMPRESSOR_FLOOR = {3: lz4.frame.decompress, 1: functools.partial(zlib.decompress, wbits=31)}


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


class Timing:
    """One round: median wall and CPU seconds per call, minor faults per call, system CPU share."""

    def __init__(self, fn, repeat: int) -> None:
        walls, cpus = [], []
        start = resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(repeat):
            cpu, wall = time.process_time(), time.perf_counter()
            fn()
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        end = resource.getrusage(resource.RUSAGE_SELF)
        self.wall, self.cpu = statistics.median(walls), statistics.median(cpus)
        self.faults = (end.ru_minflt - start.ru_minflt) / repeat
        self.sys_share = (end.ru_stime - start.ru_stime) / max(1e-9, sum(cpus))


def timed(fn, repeat: int) -> tuple[float, float, float]:
    """(median wall s, median CPU s, system share of CPU) over ``repeat`` runs."""
    t = Timing(fn, repeat)
    return t.wall, t.cpu, t.sys_share


def kafka_python_encode(values, keys, timestamps, codec: int, headers=None,
                        batch_size: int = 1 << 20) -> list[bytearray]:
    out, i, n = [], 0, len(values)
    while i < n:
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False,
                                            producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                            batch_size=batch_size)
        first = i
        while i < n and builder.append(i - first, int(timestamps[i]), keys[i], values[i],
                                       headers[i] if headers else []) is not None:
            i += 1
        out.append(builder.build())
    return out


def kafka_python_decode(batches, headers: bool = False) -> int:
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


def _spread(name: str, values: list[float]) -> dict[str, float]:
    """``name`` = the median over rounds, with ``name_min`` and ``name_max``."""
    return {name: statistics.median(values), f"{name}_min": min(values), f"{name}_max": max(values)}


def _floor_fields(rows: int, peer_rows: int, batches: int, ours: list[Timing], peer: list[Timing],
                  floor: list[Timing]) -> dict[str, float]:
    """The compressor floor's rate, its share of our time, what we add per batch, the ratio ceiling."""
    floor_wall = [rows / f.wall for f in floor]
    return {**_spread("compressor_records_per_s", floor_wall),
            **_spread("compressor_share", [f.wall / o.wall for f, o in zip(floor, ours)]),
            **_spread("ours_non_compressor_us_per_batch",
                      [(o.wall - f.wall) / batches * 1e6 for f, o in zip(floor, ours)]),
            **_spread("ratio_ceiling", [f / (peer_rows / p.wall) for f, p in zip(floor_wall, peer)])}


def _report_rounds(name: str, rows: int, peer_rows: int, ours: list[Timing], peer: list[Timing],
                   floor: dict[str, float] | None = None, **extra) -> None:
    wall = [rows / o.wall for o in ours]
    cpu = [rows / o.cpu for o in ours]
    peer_wall = [peer_rows / p.wall for p in peer]
    peer_cpu = [peer_rows / p.cpu for p in peer]
    report(name, records=rows, **extra, rounds=len(ours),
           **_spread("records_per_s", wall), **_spread("cpu_records_per_s", cpu),
           **_spread("kafka_python_records_per_s", peer_wall),
           **_spread("kafka_python_cpu_records_per_s", peer_cpu),
           **_spread("ratio", [a / b for a, b in zip(wall, peer_wall)]),
           **_spread("cpu_ratio", [a / b for a, b in zip(cpu, peer_cpu)]),
           faults_per_call=statistics.median(o.faults for o in ours),
           sys_share=statistics.median(o.sys_share for o in ours),
           kafka_python_sys_share=statistics.median(p.sys_share for p in peer),
           **(floor or {}), load=os.getloadavg()[0])


def compressor_floor(codec: int, value_col, key_col, ts_col, batch_bytes: int, batches):
    """(compress floor, decompress floor): callables over the record sections of ``batches``.

    The sections come from the same columns encoded uncompressed: the same cut (batches are cut
    by uncompressed size) and the same record bytes; only the header's attributes differ.
    """
    plain = encode_batches(value_col, keys=key_col, timestamps=ts_col,
                           batch_bytes_max=batch_bytes, copy=False)
    sections = [memoryview(b.data)[HEADER_SIZE:] for b in plain]
    payloads = [memoryview(b.data)[HEADER_SIZE:] for b in batches]
    compress, decompress = COMPRESSOR_FLOOR[codec], DECOMPRESSOR_FLOOR[codec]
    assert [b.record_count for b in plain] == [b.record_count for b in batches]
    assert all(compress(s) == p for s, p in zip(sections, payloads)), "not our compressor call"
    assert all(decompress(p) == s for s, p in zip(sections, payloads))
    return (lambda: [compress(s) for s in sections]), (lambda: [decompress(p) for p in payloads])


def measure_codec(name: str, codec: int, batch_bytes: int, rows: int, peer_rows: int,
                  rounds: int, repeat: int) -> None:
    values, keys, timestamps = make_rows(rows)
    value_col, key_col = pa.array(values, pa.binary()), pa.array(keys, pa.binary())
    ts_col = pa.array(timestamps)

    def encode(copy: bool = True):
        return encode_batches(value_col, keys=key_col, timestamps=ts_col, compression=codec,
                              batch_bytes_max=batch_bytes, copy=copy)

    def peer_encode():
        return kafka_python_encode(values[:peer_rows], keys[:peer_rows], timestamps, codec,
                                   batch_size=batch_bytes)

    batches = encode()
    data = b"".join(b.data for b in batches)
    assert decode_batches(data, topic="t", partition=0).num_rows == rows
    peer_batches = peer_encode()
    assert kafka_python_decode(peer_batches) == peer_rows
    ours_counts = [b.record_count for b in encode_batches(
        value_col[:peer_rows], keys=key_col[:peer_rows], timestamps=ts_col[:peer_rows],
        compression=codec, batch_bytes_max=batch_bytes)]
    peer_counts = [DefaultRecordBatch(bytearray(b)).next_offset for b in peer_batches]
    assert ours_counts == peer_counts, "kafka-python cuts batches elsewhere: not like with like"

    peer_repeat = max(1, repeat // 3)
    floor_encode = floor_decode = None
    if codec != 0:
        floor_encode, floor_decode = compressor_floor(codec, value_col, key_col, ts_col,
                                                      batch_bytes, batches)
    results: dict[str, tuple[list[Timing], list[Timing], list[Timing]]] = {}
    cases = {"encode": (encode, peer_encode, floor_encode),
             "decode": (lambda: decode_batches(data, topic="t", partition=0),
                        lambda: kafka_python_decode(peer_batches), floor_decode)}
    if codec == 0:
        cases["encode_views"] = (lambda: encode(copy=False), peer_encode, None)
    for _ in range(rounds):
        for op, (ours_fn, peer_fn, floor_fn) in cases.items():
            ours_t, peer_t, floor_t = results.setdefault(op, ([], [], []))
            ours_t.append(Timing(ours_fn, repeat))
            peer_t.append(Timing(peer_fn, peer_repeat))
            if floor_fn is not None:
                floor_t.append(Timing(floor_fn, repeat))
    suffix = "" if batch_bytes == 1 << 20 else f"_batch_{batch_bytes // 1024}k"
    for op, (ours_t, peer_t, floor_t) in results.items():
        floor = (_floor_fields(rows, peer_rows, len(batches), ours_t, peer_t, floor_t)
                 if floor_t else None)
        _report_rounds(f"codec.{name}.{op}{suffix}", rows, peer_rows, ours_t, peer_t, floor,
                       batches=len(batches), batch_bytes=len(batches[0].data),
                       records_per_batch=batches[0].record_count)


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
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--codecs", default="none,lz4,gzip")
    parser.add_argument("--batch-bytes", default=f"{1 << 20},16384")
    parser.add_argument("--quick", action="store_true", help="skip the JIT, headers and small-batch cases")
    args = parser.parse_args()
    print(f"load: {os.getloadavg()}  cores: {os.cpu_count()}  (single-threaded measurement)")
    if not args.quick:
        measure_jit()
    for batch_bytes in map(int, args.batch_bytes.split(",")):
        for name in args.codecs.split(","):
            # gzip costs microseconds a record on both sides: fewer rows keep the run short
            scale = 5 if name == "gzip" else 1
            measure_codec(name, CODECS[name], batch_bytes, args.rows // scale,
                          args.peer_rows // scale, args.rounds, args.repeat)
    if not args.quick:
        measure_headers(args.rows, args.peer_rows, args.repeat)
        measure_small_batches(args.rows // 4, args.repeat)
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
