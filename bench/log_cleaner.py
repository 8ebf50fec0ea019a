"""The log cleaner (issue 13's benchmark): pylog's cleaning throughput, memory and effect on
produce, beside Apache Kafka's cleaner on the same records, in one run.

    python bench/log_cleaner.py [--quick] [--rounds N] [--records N] [--keys N] [--dir DIR] [--skip-broker] [--skip-kafka]

Records: ``--records`` (default 10 M) of 100 bytes of key and value (``bench/_cleaner_data.py``),
keys uniform over ``--keys`` (default 1 M), 16 KiB batches, 128 MiB segments, about 1.1 GiB of
log; 7-8 minutes at load 11-19 on 2 cores, at most ~4.5 GiB of temporary files (the log, a
copy being cleaned, the pylog broker's and Kafka's copies). ``--quick``: 1 M records, 100 k keys,
16 MiB segments (about 3 minutes). Rows:

(a) read + CRC: every segment file read and checked by ``check_batches`` (CRC-32C, headers,
    every record's framing), in this process;
(b) pylog cleaning: ``clean_once`` passes on a copy of the log until it is clean, in a
    subprocess, with the dedupe buffer at 128 MiB (Kafka's default, as Kafka runs below);
    the target is (b) >= 0.3 x (a) in bytes per second of the log before cleaning;
(c) the same with 64 MiB: the cleaner's peak RSS (VmHWM) minus its RSS before cleaning
    (interpreter, numpy, pyarrow, the loaded numba kernels: the constant) against the buffer;
(d) a pylog broker: produce throughput to another topic while its cleaner cleans the loaded
    compacted partition, against the same without the cleaner (``bench/_cleaner_brokers.py``);
    target >= 0.8x;
(e) Apache Kafka 4.1's cleaner on the same records (its own statistics line).

``--rounds`` (default 3): (a) and (b) are measured in turn that many times, and (d) that many
rounds; each ratio is taken within a round (both sides under the same load) and the table gives
the median with the rounds' ratios beside it. The machine's 1-minute load average is printed with
the table: on a shared 2-core machine every number moves with it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _cleaner_data as data  # noqa: E402
from _report import report  # noqa: E402

_WORKER = Path(__file__).resolve().parent / "_cleaner_data.py"
MIB = 1 << 20


def _clean_in_subprocess(source: Path, work: Path, dedupe_bytes: int, segment_bytes: int) -> dict:
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(source, work)
    result = subprocess.run([sys.executable, str(_WORKER), "clean", str(work), str(dedupe_bytes),
                             str(segment_bytes)], capture_output=True, text=True, timeout=3600)
    if result.returncode != 0:
        raise RuntimeError(f"cleaner worker failed: {result.stderr[-2000:]}")
    out = json.loads(result.stdout.strip().splitlines()[-1])
    out["records_after"] = data.count_records(work)
    shutil.rmtree(work, ignore_errors=True)
    return out


def _clean_row(source: Path, root: Path, buffer: int, segment_bytes: int, name: str) -> dict:
    out = _clean_in_subprocess(source, root / "work-0", buffer, segment_bytes)
    out["mb_per_s"] = out["bytes_read"] / out["seconds"] / 1e6
    out["dedupe_bytes"] = buffer
    out["extra_rss_bytes"] = out["peak_rss_bytes"] - out["baseline_rss_bytes"]
    report(f"cleaner.{name}_pylog_clean", **out)
    return out


def _load() -> float:
    return round(os.getloadavg()[0], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 M records, 100 k keys, 16 MiB segments")
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--keys", type=int, default=None)
    parser.add_argument("--segment-mib", type=int, default=None)
    parser.add_argument("--produce-records", type=int, default=None,
                        help="records per produce run of (d) (default 3 M, quick 500 k)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (a)+(b) and of (d); medians reported")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the temporary data goes")
    parser.add_argument("--skip-kafka", action="store_true")
    parser.add_argument("--skip-broker", action="store_true")
    args = parser.parse_args()
    records = args.records or (1_000_000 if args.quick else 10_000_000)
    keys = args.keys or (100_000 if args.quick else 1_000_000)
    segment_bytes = (args.segment_mib or (16 if args.quick else 128)) * MIB
    produce_records = args.produce_records or (500_000 if args.quick else 3_000_000)
    data.SEGMENT_BYTES = segment_bytes
    root = Path(tempfile.mkdtemp(prefix="pylog-cleaner-bench-", dir=args.dir))
    rows: dict[str, dict] = {}
    loads = [_load()]
    started = dt.datetime.now(dt.timezone.utc)
    try:
        source = root / "compacted-0"
        built = data.build_log(source, records, keys, segment_bytes)
        report("cleaner.log", **built)
        data.read_with_crc(source)  # page cache warm for every row alike
        rounds = []
        for _ in range(args.rounds):  # (a) and (b) in turn: each round's ratio under one load
            seconds, size, count = data.read_with_crc(source)
            a = {"seconds": seconds, "mb_per_s": size / seconds / 1e6}
            report("cleaner.a_read_crc", **a, records=count)
            b = _clean_row(source, root, 128 * MIB, segment_bytes, "b")
            rounds.append((a, b, b["mb_per_s"] / a["mb_per_s"]))
            loads.append(_load())
        middle = sorted(rounds, key=lambda r: r[2])[len(rounds) // 2]
        rows["a"], rows["b"] = middle[0], middle[1]
        rows["b"]["ratios"] = [r[2] for r in rounds]
        rows["c"] = _clean_row(source, root, 64 * MIB, segment_bytes, "c")
        loads.append(_load())
        if not args.skip_broker:
            import _cleaner_brokers as brokers

            rows["d"] = brokers.pylog_produce_during_cleaning(root / "pylog", records, keys, produce_records,
                                                              rounds=args.rounds)
            report("cleaner.d_produce", load_s=rows["d"]["load_s"], ratios=rows["d"]["ratios"],
                   median_ratio=rows["d"]["median_ratio"])
            loads.append(_load())
        if not args.skip_kafka:
            import _cleaner_brokers as brokers

            try:
                rows["e"] = brokers.kafka_cleaner(root / "kafka", records, keys)
            except Exception as exc:  # the pylog rows are still worth their table
                print(f"Apache Kafka's row failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            else:
                report("cleaner.e_kafka", **{k: v for k, v in rows["e"].items() if k != "stats"})
                print(rows["e"]["stats"])
            loads.append(_load())
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print_table(rows, built, records, keys, loads, started)


def print_table(rows: dict, built: dict, records: int, keys: int, loads: list[float], started) -> None:
    a, b, c = rows["a"], rows["b"], rows["c"]
    print()
    print(f"log cleaner, {records:,} records of 100 B, {keys:,} keys, {built['bytes'] / MIB:,.0f} MiB in "
          f"{built['segments']} segments; {started:%Y-%m-%d %H:%M} UTC; 1-min load {min(loads)}-{max(loads)} "
          f"on {os.cpu_count()} cores")
    print(f"| measure | pylog | Apache Kafka 4.1 | ratio |")
    print(f"|---|---|---|---|")
    print(f"| (a) read + CRC (check_batches) | {a['mb_per_s']:,.0f} MB/s | | |")
    e = rows.get("e")
    kafka_rate = e["mb"] * 1.048576 / e["seconds"] if e and e["seconds"] else None
    kafka_cell = f"{kafka_rate:,.0f} MB/s ({e['seconds']:.1f} s; {e['wall_s']:.1f} s wall)" if kafka_rate else "-"
    ratio = f"{b['mb_per_s'] / kafka_rate:.2f}x of Kafka" if kafka_rate else ""
    ratios = ", ".join(f"{r:.2f}" for r in b["ratios"])
    print(f"| (b) cleaning, 128 MiB buffer | {b['mb_per_s']:,.0f} MB/s ({b['seconds']:.1f} s, {b['passes']} pass(es)) "
          f"= {b['mb_per_s'] / a['mb_per_s']:.2f}x (a), the median round of {len(b['ratios'])} ({ratios}) "
          f"| {kafka_cell} | {ratio} |")
    kafka_left = f"{e['end_messages']:,} records left" if e and e.get("end_messages") else ""
    print(f"| records left in the cleaned segments | {b['records_after']:,} | {kafka_left} | |")
    for row in (b, c):
        print(f"| (c) peak RSS, {row['dedupe_bytes'] // MIB} MiB buffer | {row['peak_rss_bytes'] / MIB:,.0f} MiB = "
              f"{row['baseline_rss_bytes'] / MIB:,.0f} MiB before + {row['extra_rss_bytes'] / MIB:,.0f} MiB | | |")
    d = rows.get("d")
    if d:
        for n, run in enumerate(d["rounds"], 1):
            without, during, after = (run[k]["mb_per_sec"] for k in ("without", "during", "after"))
            print(f"| (d) round {n}: produce to another topic, cleaner off / during cleaning / after | "
                  f"{without:,.1f} / {during:,.1f} / {after:,.1f} MB/s = {during / without:.2f}x (overlapped: "
                  f"{run['overlapped']}, broker pass {run['broker_clean_s']:.0f} s, load {run['load']}) | | |")
        print(f"| (d) during / off, median of {len(d['ratios'])} rounds | {d['median_ratio']:.2f}x | | |")


if __name__ == "__main__":
    main()
