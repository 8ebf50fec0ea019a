"""End-to-end ingest into one pylog broker process, with Redis Streams as the peer.

pylog: `pylog cluster up` (ZooKeeper + 1 broker, conf/server-0.properties) in a temporary
directory; a confluent-kafka (librdkafka) producer writes ``--records`` records of
``--value-bytes`` bytes (no key) into a fresh 6-partition topic, once per combination of
acks (1, all) and compression (none, lz4), with linger.ms 10 and batch.size 1 MiB. The clock runs
from the first produce call to the end of ``flush()`` (every record acknowledged; delivery
reports only for errors, and any error fails the run). The high watermarks must then sum to the
record count. A confluent-kafka consumer then reads each uncompressed and lz4 topic from the
beginning. Enqueueing uses ``produce_batch`` with prepared messages so the Python loop of the
client is not what is measured. The broker's CPU use (utime+stime over wall time) is reported
for each run: ~1.0 means one core saturated, the ceiling of a single-threaded asyncio broker.

Peer: ``redis-server`` on a free loopback port with ``appendonly yes`` and ``appendfsync
everysec`` (durability comparable to a broker that leaves flushing to the OS), driven by
``redis-benchmark -P 64 -n N -d 100 XADD ...`` (50 connections, 64-deep pipelines; the value is a
literal of ``--value-bytes`` bytes, since ``-d`` only sizes the built-in tests). XLEN must equal N.

Two more figures separate the broker from the client. ``raw produce``: pre-encoded Produce v9
requests (one ~1 MiB batch per partition, 5 in flight on one connection) from a socket, so the
client does no work per record: the broker's own ceiling. ``records_per_broker_cpu_s``: records
over the broker's CPU seconds, which other processes on a busy machine disturb less than
records/s.

``--profile`` (default on when py-spy is installed) samples the broker with ``py-spy record``
during one extra acks=1 uncompressed run and prints where its time goes (self time by function
and by module; idle threads excluded).

Not part of the tests; ``make bench`` runs it. Target from the issue: >= 1,000,000 records/s.
"""

from __future__ import annotations

import argparse
import base64
import collections
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402
from broker.tools.cluster import cluster_down, cluster_status, cluster_up  # noqa: E402
from broker.tools.zookeeper import find_free_port  # noqa: E402

TARGET_RECORDS_PER_S = 1_000_000
PRODUCE_BATCH = 10_000  # messages per produce_batch call
RUNS = [("1", "none"), ("all", "none"), ("1", "lz4"), ("all", "lz4")]
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--linger-ms", type=int, default=10)
    parser.add_argument("--dir", default=None, help="working directory (default: a temporary one)")
    parser.add_argument("--profile", action=argparse.BooleanOptionalAction, default=shutil.which("py-spy") is not None
                        or Path(sys.executable).with_name("py-spy").exists())
    parser.add_argument("--profile-top", type=int, default=25)
    parser.add_argument("--skip-redis", action="store_true")
    return parser.parse_args()


# ----------------------------------------------------------------------------------- pylog


@contextmanager
def pylog_cluster(root: Path):
    """(bootstrap, broker pid) of a fresh one-broker cluster; `down` on exit."""
    port, zk_port = find_free_port(), find_free_port()
    spec = cluster_up(root, 1, port, zk_port, [], err=sys.stderr)
    try:
        yield spec.bootstrap_servers(), cluster_status(root)["brokers"][0]["pid"]
    finally:
        cluster_down(root, err=sys.stderr)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime, stime


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(60)


def make_values(size: int, count: int = PRODUCE_BATCH) -> list[bytes]:
    """``count`` distinct values of ``size`` random base64 characters (seeded): what lz4 gets
    from them is its overhead, not a saving, so compressed runs are not flattered by a
    repeated value."""
    rng = random.Random(20240611)
    return [base64.b64encode(rng.randbytes(size))[:size] for _ in range(count)]


def produce(bootstrap: str, topic: str, records: int, values: list[bytes], acks: str, compression: str,
            linger_ms: int) -> tuple[float, float, float]:
    """(seconds from the first enqueue to the last acknowledgement, seconds spent enqueueing,
    CPU cores this client process used meanwhile: Python plus librdkafka's threads)."""
    from confluent_kafka import Producer

    errors: list = []
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "compression.type": compression,
        "linger.ms": linger_ms, "batch.size": 1 << 20, "batch.num.messages": 1_000_000,
        "message.max.bytes": 1_048_588, "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 2_097_151, "enable.idempotence": False,
        "delivery.report.only.error": True, "log_level": 3,
    })
    on_error = lambda err, msg: errors.append(err)  # noqa: E731 - called only for failures
    producer.produce(topic, b"warm-up", on_delivery=on_error)  # connections and metadata first
    assert producer.flush(30) == 0 and not errors, errors
    messages = [{"value": v} for v in values]
    cpu_before = _own_cpu_seconds()
    start = time.perf_counter()
    sent = 0
    while sent < records:
        chunk = messages if records - sent >= len(messages) else messages[: records - sent]
        try:
            sent += producer.produce_batch(topic, chunk, on_delivery=on_error)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    enqueued = time.perf_counter() - start
    remaining = producer.flush(300)
    elapsed = time.perf_counter() - start
    client_cpu = (_own_cpu_seconds() - cpu_before) / elapsed
    assert remaining == 0 and not errors, f"{remaining} unacknowledged, errors: {errors[:3]}"
    return elapsed, enqueued, client_cpu


def _per_cpu(records: int, cpu_s: float) -> int | None:
    """Records per CPU-second of the broker: what one core would ingest if it were the limit.
    Less disturbed by other processes on a shared machine than records/s."""
    return round(records / cpu_s) if cpu_s > 0 else None


def _own_cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def high_watermark_total(bootstrap: str, topic: str, partitions: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-watermarks", "log_level": 3})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                   for p in range(partitions))
    finally:
        consumer.close()


def consume(bootstrap: str, topic: str, partitions: int, expected: int) -> tuple[float, float]:
    """(seconds from the first record to the last, seconds before the first record) to read
    ``expected`` records from the beginning of every partition. The first part of the start-up
    is the client's (coordinator lookup, offsets, a long poll on a partition that is empty)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}",
                         "enable.auto.commit": False, "fetch.max.bytes": 52_428_800,
                         "max.partition.fetch.bytes": 10_485_760, "queued.min.messages": 1_000_000,
                         "log_level": 3})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    count = 0
    start = time.perf_counter()
    first = None
    deadline = start + 600
    try:
        while count < expected and time.perf_counter() < deadline:
            # consume() returns once it has num_messages or at the timeout: never ask for more
            # than what is left, or the last call waits out its timeout.
            for message in consumer.consume(num_messages=min(100_000, expected - count), timeout=1.0):
                if message.error() is not None:
                    raise RuntimeError(f"consume error: {message.error()}")
                if first is None:
                    first = time.perf_counter()
                count += 1
        end = time.perf_counter()
    finally:
        consumer.close()
    assert count == expected and first is not None, f"consumed {count} of {expected}"
    return end - first, first - start


def bench_pylog(args: argparse.Namespace, root: Path) -> dict[str, float]:
    values = make_values(args.value_bytes)
    rates: dict[str, float] = {}
    with pylog_cluster(root) as (bootstrap, broker_pid):
        for acks, compression in RUNS:
            topic = f"ingest-acks-{acks}-{compression}"
            create_topic(bootstrap, topic, args.partitions)
            cpu_before = cpu_seconds(broker_pid)
            seconds, enqueue, client_cpu = produce(bootstrap, topic, args.records, values, acks, compression,
                                                   args.linger_ms)
            broker_cpu = (cpu_seconds(broker_pid) - cpu_before) / seconds
            total = high_watermark_total(bootstrap, topic, args.partitions)
            assert total == args.records + 1, f"{topic}: high watermarks sum to {total}"  # + warm-up
            rates[f"acks={acks} {compression}"] = rate = args.records / seconds
            report("broker_ingest pylog produce", acks=acks, compression=compression, records=args.records,
                   seconds=round(seconds, 3), records_per_s=round(rate),
                   mib_per_s=round(rate * args.value_bytes / 2**20, 1), enqueue_seconds=round(enqueue, 3),
                   broker_cpu_cores=round(broker_cpu, 2), client_cpu_cores=round(client_cpu, 2),
                   records_per_broker_cpu_s=_per_cpu(args.records, seconds * broker_cpu),
                   target_ratio=round(rate / TARGET_RECORDS_PER_S, 3))
        for acks, compression in RUNS:
            topic = f"ingest-kcat-acks-{acks}-{compression}"
            create_topic(bootstrap, topic, args.partitions)
            cpu_before = cpu_seconds(broker_pid)
            seconds = produce_kcat(bootstrap, topic, args.records, args.value_bytes, acks, compression,
                                   args.linger_ms, root)
            broker_cpu = (cpu_seconds(broker_pid) - cpu_before) / seconds
            total = high_watermark_total(bootstrap, topic, args.partitions)
            assert total == args.records, f"{topic}: high watermarks sum to {total}"
            rates[f"kcat acks={acks} {compression}"] = rate = args.records / seconds
            report("broker_ingest pylog produce (kcat)", acks=acks, compression=compression,
                   records=args.records, seconds=round(seconds, 3), records_per_s=round(rate),
                   broker_cpu_cores=round(broker_cpu, 2), target_ratio=round(rate / TARGET_RECORDS_PER_S, 3))
        for compression in ("none", "lz4"):
            topic = f"ingest-acks-1-{compression}"
            cpu_before = cpu_seconds(broker_pid)
            seconds, startup = consume(bootstrap, topic, args.partitions, args.records + 1)
            broker_cpu = (cpu_seconds(broker_pid) - cpu_before) / (seconds + startup)
            report("broker_ingest pylog consume", compression=compression, records=args.records + 1,
                   seconds=round(seconds, 3), startup_seconds=round(startup, 3),
                   records_per_s=round((args.records + 1) / seconds), broker_cpu_cores=round(broker_cpu, 2))
        bench_raw(args, bootstrap, broker_pid, values, root, args.profile)
        if args.profile:
            profile_broker(args, bootstrap, broker_pid, values, root)
    return rates


def produce_kcat(bootstrap: str, topic: str, records: int, value_bytes: int, acks: str, compression: str,
                 linger_ms: int, root: Path) -> float:
    """The same ingest from librdkafka without a Python loop in front of it: kcat (librdkafka's
    own command-line producer) reads one record per line from stdin. This measures the broker,
    where the confluent-kafka runs above are bound by Python's per-record ``produce()`` call."""
    lines = root / f"records-{value_bytes}.txt"
    if not lines.exists():
        lines.write_bytes((b"x" * (value_bytes - 1) + b"\n") * records)
    command = ["kcat", "-P", "-b", bootstrap, "-t", topic, "-X", f"acks={acks}",
               "-X", f"linger.ms={linger_ms}", "-X", "batch.size=1000000",
               "-X", f"queue.buffering.max.messages={2 * records}", "-X", f"compression.codec={compression}"]
    with lines.open("rb") as stdin:
        start = time.perf_counter()
        subprocess.run(command, stdin=stdin, check=True)
        return time.perf_counter() - start


# ------------------------------------------------------------------- broker-only ceiling


def raw_batch(values: list[bytes], compression: int) -> bytes:
    from broker.records import Record, encode_batch

    now = int(time.time() * 1000)
    return encode_batch([Record(i, now, None, v) for i, v in enumerate(values)], compression=compression)


def raw_produce(port: int, topic: str, records: int, values: list[bytes], acks: int, compression: str,
                partitions: int, inflight: int = 5) -> tuple[float, int]:
    """(seconds, records written) for pre-encoded Produce v9 requests, one ~1 MiB batch per
    partition each, pipelined ``inflight`` deep on one connection: the broker's own ceiling,
    with no client work per record (the same batch bytes are sent again and again; the broker
    assigns offsets)."""
    import socket
    import struct
    from collections import deque

    from broker.records import Compression
    from broker.wire import ApiKey, ProduceRequest, decode_response, encode_request, with_size_prefix

    codec = {"none": Compression.NONE, "lz4": Compression.LZ4}[compression]
    per_batch = min(len(values), 1_000_000 // (len(values[0]) + 12))  # under message.max.bytes (1048588)
    batch = raw_batch(values[:per_batch], codec)
    data = [ProduceRequest.PartitionProduceData(index=p, records=batch) for p in range(partitions)]
    body = ProduceRequest(acks=acks, timeout_ms=30_000,
                          topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=data)])
    requests = -(-records // (per_batch * partitions))
    frames = [with_size_prefix(encode_request(ApiKey.PRODUCE, 9, i, "bench-raw", body)) for i in range(requests)]
    pending: deque[int] = deque()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = sock.makefile("rb")
        start = time.perf_counter()
        for i, frame in enumerate(frames):
            if len(pending) >= inflight:
                _check_raw_response(reader, pending.popleft(), struct, decode_response, ApiKey)
            sock.sendall(frame)
            pending.append(i)
        while pending:
            _check_raw_response(reader, pending.popleft(), struct, decode_response, ApiKey)
        elapsed = time.perf_counter() - start
    return elapsed, requests * per_batch * partitions


def _check_raw_response(reader, correlation_id: int, struct, decode_response, ApiKey) -> None:
    (size,) = struct.unpack(">i", reader.read(4))
    got, response = decode_response(ApiKey.PRODUCE, 9, reader.read(size))
    assert got == correlation_id
    errors = [p.error_code for t in response.responses for p in t.partition_responses if p.error_code]
    assert not errors, f"produce errors {errors}"


def bench_raw(args, bootstrap: str, broker_pid: int, values: list[bytes], root: Path, profile: bool) -> None:
    port = int(bootstrap.rsplit(":", 1)[1])
    for acks, compression in RUNS:
        topic = f"raw-acks-{acks}-{compression}"
        create_topic(bootstrap, topic, args.partitions)
        cpu_before = cpu_seconds(broker_pid)
        seconds, written = raw_produce(port, topic, args.records, values, -1 if acks == "all" else 1,
                                       compression, args.partitions)
        broker_cpu = (cpu_seconds(broker_pid) - cpu_before) / seconds
        report("broker_ingest pylog raw produce", acks=acks, compression=compression, records=written,
               seconds=round(seconds, 3), records_per_s=round(written / seconds),
               mib_per_s=round(written * args.value_bytes / seconds / 2**20, 1),
               broker_cpu_cores=round(broker_cpu, 2), records_per_broker_cpu_s=_per_cpu(written, seconds * broker_cpu),
               target_ratio=round(written / seconds / TARGET_RECORDS_PER_S, 3))
    if profile:
        topic = "raw-profiled"
        create_topic(bootstrap, topic, args.partitions)
        with py_spy(broker_pid, root / "broker-profile-raw.txt", args.profile_top) as profiled:
            seconds, written = raw_produce(port, topic, 3 * args.records, values, 1, "none", args.partitions)
            profiled["label"] = f"raw produce acks=1 none, {written / seconds:,.0f} records/s"


# --------------------------------------------------------------------------------- profile


def profile_broker(args, bootstrap: str, broker_pid: int, values: list[bytes], root: Path) -> None:
    """py-spy samples the broker during one more acks=1 uncompressed librdkafka run."""
    topic = "ingest-profiled"
    create_topic(bootstrap, topic, args.partitions)
    with py_spy(broker_pid, root / "broker-profile-librdkafka.txt", args.profile_top) as profiled:
        seconds, _, _ = produce(bootstrap, topic, args.records, values, "1", "none", args.linger_ms)
        profiled["label"] = f"librdkafka produce acks=1 none, {args.records / seconds:,.0f} records/s"


@contextmanager
def py_spy(pid: int, raw: Path, top: int):
    """Sample ``pid`` with py-spy while the body runs, then print the summary."""
    executable = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    spy = subprocess.Popen([executable, "record", "--pid", str(pid), "--rate", "250", "--format", "raw",
                            "--output", str(raw), "--nonblocking"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # py-spy attaches
    profiled = {"label": ""}
    cpu_before, wall_before = cpu_seconds(pid), time.perf_counter()
    try:
        yield profiled
    finally:
        busy = (cpu_seconds(pid) - cpu_before) / (time.perf_counter() - wall_before)
        spy.send_signal(signal.SIGINT)
        _, spy_err = spy.communicate(timeout=60)
    if not raw.exists():
        print(f"py-spy wrote no profile: {spy_err.decode(errors='replace').strip()[-300:]}", file=sys.stderr)
        return
    print(f"\nbroker profile during {profiled['label']} (broker CPU {busy:.2f} cores; raw stacks: {raw})")
    print_profile(raw, top)


def print_profile(raw: Path, top: int) -> None:
    """Self time per function and per module from py-spy's collapsed stacks."""
    by_function: collections.Counter = collections.Counter()
    by_module: collections.Counter = collections.Counter()
    inclusive: collections.Counter = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        frames = stack.split(";")
        n = int(count)
        total += n
        leaf = frames[-1]
        by_function[_short(leaf)] += n
        by_module[_module(leaf)] += n
        for name in {_short(f) for f in frames}:
            inclusive[name] += n
    if not total:
        print("profile: no samples")
        return
    print(f"  {total} samples of busy threads (py-spy, 250 Hz)")
    print("  self time by function:")
    for name, n in by_function.most_common(top):
        print(f"    {100 * n / total:5.1f}%  {name}")
    print("  self time by module:")
    for name, n in by_module.most_common(12):
        print(f"    {100 * n / total:5.1f}%  {name}")
    print("  inclusive time (broker code paths):")
    shown = [(name, n) for name, n in inclusive.most_common() if "broker/" in name][:top]
    for name, n in shown:
        print(f"    {100 * n / total:5.1f}%  {name}")


_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]+)(?::\d+)?\)$")


def _short(frame: str) -> str:
    match = _FRAME.match(frame)
    if not match:
        return frame
    path = match.group("file")
    for marker in ("/broker/", "/asyncio/", "/site-packages/", "/lib/python"):
        if marker in path:
            path = marker.strip("/") + "/" + path.split(marker, 1)[1]
            break
    return f"{match.group('func')} ({path})"


def _module(frame: str) -> str:
    match = _FRAME.match(frame)
    return _short(frame).split("(", 1)[1].rstrip(")") if match else frame


# ----------------------------------------------------------------------------------- redis


def bench_redis(args: argparse.Namespace, root: Path) -> float | None:
    server, benchmark = shutil.which("redis-server"), shutil.which("redis-benchmark")
    if server is None or benchmark is None:
        print("redis-server/redis-benchmark not found (make bench installs them); no peer", file=sys.stderr)
        return None
    port = find_free_port()
    data = root / "redis"
    data.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data),
                                "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                                "--daemonize", "no", "--logfile", str(data / "redis.log")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_redis(port)
        value = "v" * args.value_bytes
        start = time.perf_counter()
        out = subprocess.run([benchmark, "-h", "127.0.0.1", "-p", str(port), "-P", "64", "-n", str(args.records),
                              "-d", str(args.value_bytes), "-q", "XADD", "bench", "*", "v", value],
                             capture_output=True, text=True, check=True).stdout
        elapsed = time.perf_counter() - start
        length = int(_redis_cli(port, "XLEN", "bench"))
        # With -P 64 each of the 50 clients sends whole pipelines, so a few more than -n arrive.
        assert length >= args.records, f"XLEN {length}, expected at least {args.records}"
        match = re.findall(r"([\d.]+) requests per second", out)
        rate = float(match[-1]) if match else args.records / elapsed
        report("broker_ingest redis XADD", records=args.records, clients=50, pipeline=64,
               records_per_s=round(rate), xlen=length, wall_records_per_s=round(length / elapsed),
               appendfsync="everysec")
        return rate
    finally:
        process.terminate()
        process.wait(30)


def _redis_cli(port: int, *command: str) -> str:
    return subprocess.run(["redis-cli", "-p", str(port), *command], capture_output=True, text=True,
                          check=True).stdout.strip()


def _wait_for_redis(port: int, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if _redis_cli(port, "PING") == "PONG":
                return
        except subprocess.CalledProcessError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"redis-server on port {port} did not answer PING")
        time.sleep(0.1)


def main() -> None:
    args = parse_args()
    # Other processes on the machine skew every number here: say how busy it was.
    report("broker_ingest machine", cpus=os.cpu_count(), load_average_1m=round(os.getloadavg()[0], 2))
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="pylog-bench-ingest-"))
    try:
        rates = bench_pylog(args, root / "cluster")
        peer = None if args.skip_redis else bench_redis(args, root)
        if peer:
            for run, rate in rates.items():
                report("broker_ingest pylog/redis", run=run, pylog_records_per_s=round(rate),
                       redis_records_per_s=round(peer), ratio=round(rate / peer, 3))
    finally:
        report("broker_ingest machine", cpus=os.cpu_count(), load_average_1m=round(os.getloadavg()[0], 2))
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
