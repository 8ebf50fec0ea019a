"""Broker CPU per small request: what the end-to-end latency target at 10,000 records/s costs.

    python bench/broker_small_requests.py [--requests 4000] [--records 1,10] [--repeat 3]
                                          [--broker-root DIR ...] [--no-peer]

At linger.ms=0 a producer sends one Produce per few records and a consumer one Fetch per wake-up,
so the broker's fixed cost per request, not its cost per byte, decides how much CPU 10,000
records/s take (and, on a shared box, the latency). This measures that cost directly: the broker
process's user+system CPU (``/proc/<pid>/stat``) over N requests, divided by N.

Driven over loopback with pre-encoded frames from one thread (the driver's own CPU does not enter
the number; what it spends encoding happens before the clock starts):

- ``produce`` -- N sequential Produce v9 requests, acks=1, one idempotent batch of k 100-byte
  records each (the requests our producer sends at linger.ms=0).
- ``fetch`` -- N Fetch v12 requests that find k records at once (max_wait 500 ms, min_bytes 1).
- ``longpoll-pair`` -- a Fetch parked at the log end, then a Produce on a second connection that
  wakes it: CPU per pair (subtract ``produce`` for the woken long poll alone; the difference of
  two noisy numbers, so it is not printed).
- ``peer-produce`` -- confluent-kafka (librdkafka) producing one record and flushing, N times:
  one Produce per record, librdkafka's own request versions.
- ``network-floor`` -- ``broker.server.network.KafkaServer`` alone, with a handler that answers
  at once: what the network layer costs per request before any Kafka work.
- ``peer-pair`` -- the same plus a confluent-kafka consumer polling the record back before the
  next is produced (Kafka's EndToEndLatency); its fetch count is librdkafka's business, so this
  is CPU per record, not per request.

``--broker-root`` (repeatable) runs brokers from other source trees, e.g. a ``git archive`` of
HEAD, so a change is measured against the code before it in the same run; the rounds alternate
between the trees. Reports min/median/max over rounds and the load average.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _report import report  # noqa: E402
from broker.client import AdminClient  # noqa: E402
from broker.records import Record, encode_batch  # noqa: E402
from broker.tools.perf_local import LocalCluster  # noqa: E402
from broker.wire import (  # noqa: E402
    ApiKey,
    decode_response,
    encode_request,
    with_size_prefix,
)

_SIZE = struct.Struct(">i")
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")
_PRODUCE_V, _FETCH_V = 9, 12


def broker_cpu_s(pid: int) -> float:
    """utime + stime of the broker process (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S


class _Conn:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation = 0

    def frame(self, api_key: int, version: int, body) -> bytes:
        self.correlation += 1
        return with_size_prefix(encode_request(api_key, version, self.correlation, "bench", body))

    def read_response(self) -> bytes:
        size = _SIZE.unpack(self._exactly(4))[0]
        return self._exactly(size)

    def _exactly(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(left)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def call(self, api_key: int, version: int, body):
        self.sock.sendall(self.frame(api_key, version, body))
        return decode_response(api_key, version, self.read_response())[1]

    def close(self) -> None:
        self.sock.close()


class _Driver:
    """One broker, one topic of one partition, an idempotent producer id."""

    def __init__(self, cluster: LocalCluster, topic: str) -> None:
        self.pid = cluster.broker_pids[0]
        self.port = cluster.ports[0]
        self.topic = topic
        self.produce_conn = _Conn(self.port)
        self.fetch_conn = _Conn(self.port)
        answer = self.produce_conn.call(ApiKey.INIT_PRODUCER_ID, 4, {
            "transactional_id": None, "transaction_timeout_ms": -1, "producer_id": -1,
            "producer_epoch": -1})
        assert answer.error_code == 0, answer
        self.producer_id, self.producer_epoch = answer.producer_id, answer.producer_epoch
        self.sequence = 0
        self.end_offset = 0

    def _produce_frames(self, n: int, records: int) -> list[bytes]:
        frames = []
        value = b"v" * 100
        now = int(time.time() * 1000)
        for _ in range(n):
            batch = encode_batch([Record(i, now, None, value) for i in range(records)],
                                 producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                                 base_sequence=self.sequence)
            self.sequence += records
            frames.append(self.produce_conn.frame(ApiKey.PRODUCE, _PRODUCE_V, {
                "transactional_id": None, "acks": 1, "timeout_ms": 30_000,
                "topic_data": [{"name": self.topic, "partition_data": [
                    {"index": 0, "records": batch}]}]}))
        return frames

    def _fetch_frame(self, offset: int, max_wait_ms: int) -> bytes:
        return self.fetch_conn.frame(ApiKey.FETCH, _FETCH_V, {
            "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 52_428_800,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": self.topic, "partitions": [
                {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1_048_576}]}],
            "forgotten_topics_data": []})

    def produce(self, n: int, records: int) -> float:
        frames = self._produce_frames(n, records)
        sock, conn = self.produce_conn.sock, self.produce_conn
        before = broker_cpu_s(self.pid)
        for frame in frames:
            sock.sendall(frame)
            conn.read_response()
        spent = broker_cpu_s(self.pid) - before
        self._check_last_produce(conn)
        self.end_offset += n * records
        return spent / n

    def _check_last_produce(self, conn: _Conn) -> None:
        frame = conn.frame(ApiKey.PRODUCE, _PRODUCE_V, {
            "transactional_id": None, "acks": 1, "timeout_ms": 30_000, "topic_data": []})
        conn.sock.sendall(frame)
        decode_response(ApiKey.PRODUCE, _PRODUCE_V, conn.read_response())

    def fetch(self, n: int, records: int) -> float:
        """Fetches that each find ``records`` records (the last ``records`` produced)."""
        offset = self.end_offset - records
        frames = [self._fetch_frame(offset, 500) for _ in range(n)]
        sock, conn = self.fetch_conn.sock, self.fetch_conn
        before = broker_cpu_s(self.pid)
        for frame in frames:
            sock.sendall(frame)
            conn.read_response()
        spent = broker_cpu_s(self.pid) - before
        last = decode_response(ApiKey.FETCH, _FETCH_V, self._one_fetch(offset))[1]
        assert len(last.responses[0].partitions[0].records) > 0, "the fetch found no records"
        return spent / n

    def _one_fetch(self, offset: int) -> bytes:
        self.fetch_conn.sock.sendall(self._fetch_frame(offset, 500))
        return self.fetch_conn.read_response()

    def longpoll_pairs(self, n: int, records: int) -> float:
        """A Fetch parked at the log end, woken by a Produce: CPU per pair."""
        produce_frames = self._produce_frames(n, records)
        fetch_frames = [self._fetch_frame(self.end_offset + i * records, 5_000) for i in range(n)]
        psock, fsock = self.produce_conn.sock, self.fetch_conn.sock
        before = broker_cpu_s(self.pid)
        for fetch, produce in zip(fetch_frames, produce_frames):
            fsock.sendall(fetch)
            time.sleep(0)  # let the broker park the fetch before the produce arrives (usually)
            psock.sendall(produce)
            self.produce_conn.read_response()
            self.fetch_conn.read_response()
        spent = broker_cpu_s(self.pid) - before
        self.end_offset += n * records
        return spent / n

    def close(self) -> None:
        self.produce_conn.close()
        self.fetch_conn.close()


_FLOOR_SERVER = """
import asyncio, sys
sys.path.insert(0, {root!r})
from broker.server.network import KafkaServer, NetworkLimits

class Answer:
    async def handle(self, frame):
        return b"ok" * 20

async def main():
    server = KafkaServer(Answer(), "127.0.0.1", 0, NetworkLimits())
    await server.start()
    print(server.port, flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


class _FloorServer:
    """The network layer of one source tree in its own process, answering every frame at once."""

    def __init__(self, root: str) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", _FLOOR_SERVER.format(root=root)],
                                        stdout=subprocess.PIPE, cwd=root)
        port = int(self.process.stdout.readline())
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def cpu_per_request(self, n: int) -> float:
        frame = _SIZE.pack(200) + b"x" * 200
        before = broker_cpu_s(self.process.pid)
        for _ in range(n):
            self.sock.sendall(frame)
            self.sock.recv(100)
        return (broker_cpu_s(self.process.pid) - before) / n

    def close(self) -> None:
        self.sock.close()
        self.process.kill()
        self.process.wait()


def peer_produce(cluster: LocalCluster, topic: str, n: int) -> float:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1,
                                         "linger.ms": 0})
    producer.produce(topic, b"w" * 100, partition=0)
    producer.flush(30)
    value = b"v" * 100
    pid = cluster.broker_pids[0]
    before = broker_cpu_s(pid)
    for _ in range(n):
        producer.produce(topic, value, partition=0)
        producer.flush(30)
    spent = broker_cpu_s(pid) - before
    return spent / n


def peer_pair(cluster: LocalCluster, topic: str, n: int) -> float:
    import confluent_kafka

    consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "bench",
                                         "enable.auto.commit": False, "fetch.wait.max.ms": 500})
    _, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, 0), timeout=10)
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, high)])
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "acks": 1,
                                         "linger.ms": 0})
    value = b"v" * 100
    pid = cluster.broker_pids[0]

    def one() -> None:
        producer.produce(topic, value, partition=0)
        producer.flush(30)
        message = consumer.poll(30)
        assert message is not None and message.error() is None, "no record within 30 s"

    for _ in range(20):
        one()  # connections up, fetch loop running
    before = broker_cpu_s(pid)
    for _ in range(n):
        one()
    spent = broker_cpu_s(pid) - before
    consumer.close()
    return spent / n


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--records", default="1,10", help="records per request, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--broker-root", action="append", default=[],
                        help="also measure brokers run from this source tree (repeatable)")
    parser.add_argument("--no-peer", action="store_true", help="skip the confluent-kafka rows")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.records.split(",")]
    roots = {"this": None, **{f"root{i}:{r}": r for i, r in enumerate(args.broker_root)}}
    clusters = {name: LocalCluster(1, broker_root=root).start() for name, root in roots.items()}
    floors = {name: _FloorServer(str(root or Path(__file__).resolve().parents[1]))
              for name, root in roots.items()}
    samples: dict[tuple[str, str], list[float]] = {}
    try:
        drivers = {}
        for name, cluster in clusters.items():
            topic = f"small-{int(time.time())}"
            with AdminClient(cluster.bootstrap) as admin:
                admin.create_topics(topic, partitions=1, replication_factor=1)
                admin.create_topics(topic + "-peer", partitions=1, replication_factor=1)
            drivers[name] = _Driver(cluster, topic)
            drivers[name].produce(200, 10)  # warm-up: numba kernels, caches
            drivers[name].fetch(200, 10)
        for _ in range(args.repeat):
            for name, driver in drivers.items():
                for k in sizes:
                    n = args.requests
                    produce = driver.produce(n, k)
                    samples.setdefault((name, f"produce k={k}"), []).append(produce * 1e6)
                    samples.setdefault((name, f"fetch k={k}"), []).append(driver.fetch(n, k) * 1e6)
                    samples.setdefault((name, f"longpoll-pair k={k}"), []).append(
                        driver.longpoll_pairs(n // 2, k) * 1e6)
                samples.setdefault((name, "network-floor"), []).append(
                    floors[name].cpu_per_request(args.requests * 2) * 1e6)
                if not args.no_peer:
                    cluster = clusters[name]
                    samples.setdefault((name, "peer-produce k=1"), []).append(
                        peer_produce(cluster, driver.topic + "-peer", args.requests) * 1e6)
                    samples.setdefault((name, "peer-pair k=1"), []).append(
                        peer_pair(cluster, driver.topic + "-peer", args.requests // 2) * 1e6)
        for driver in drivers.values():
            driver.close()
    finally:
        for floor in floors.values():
            floor.close()
        for cluster in clusters.values():
            cluster.stop()
    load = os.getloadavg()[0]
    for (name, what), values in samples.items():
        report(f"broker cpu {what} [{name}]", us_per_request_median=statistics.median(values),
               us_min=min(values), us_max=max(values), rounds=len(values), load=round(load, 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
