"""Security costs (issue 17): TLS produce beside plaintext produce on one broker in one run, and
SCRAM authentication of 1,000 new connections.

    python bench/security.py [--records N] [--rounds R] [--connections C] [--threads T] [--quick]

One ZooKeeper and one pylog broker (``python -m broker.server``) on loopback, with four listeners:
PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL (P-256 certificates from ``broker.tools.certs``).

1. **TLS produce / plaintext produce** (target >= 0.5): librdkafka (confluent-kafka) produces
   ``--records`` records of 100 bytes (acks=1, linger.ms 5, one partition) over PLAINTEXT and over
   SSL, in the order PLAINTEXT, SSL, SSL, PLAINTEXT per round (a drift of the load weighs on both);
   records/s per run, medians over the rounds, the ratio of the medians. The client is C, so the
   broker's side (asyncio's TLS: decrypting requests, encrypting responses) is what is measured.
2. **SCRAM-SHA-256 logins** (target: 1,000 in <= 5 s): ``--connections`` new connections, each
   TCP connect (+ TLS handshake on SASL_SSL), ApiVersions, SaslHandshake, two SaslAuthenticate
   (client-first, client-final), close; ``--threads`` client threads. pylog's client caches Hi()
   per (password, salt, iterations) as RFC 5802 allows, so the time is the broker's: a ZooKeeper
   read of the credential, HMACs, and the TLS handshake. Reported for SASL_PLAINTEXT (SCRAM alone)
   and SASL_SSL, with the broker's and this client process's CPU time per login (the client's
   threads and the broker share the machine's cores: on 2 cores the wall time is their sum).

The 1-minute load average is printed with every row: on a shared 2-core machine the numbers move
with it. Output: a table and one JSON line per row.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from broker.security.sasl_client import SaslClient  # noqa: E402
from broker.tools.certs import make_ca, make_certificate  # noqa: E402
from broker.tools.zookeeper import DEFAULT_SETTINGS, ZooKeeperProcess, reserve_free_port  # noqa: E402
from broker.wire import decode_response, encode_request  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PASSWORD = "bench-secret"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-secret" user_admin="admin-secret";')


class Broker:
    def __init__(self, root: Path) -> None:
        self.root = root
        make_ca(root / "certs")
        self.pem = make_certificate(root / "certs", "broker", "/CN=localhost")
        self.ca = str(root / "certs" / "ca.pem")
        self.zk = ZooKeeperProcess(root / "zk", reserve_free_port(), root / "zk-log",
                                   settings={**DEFAULT_SETTINGS, "tickTime": "500"})
        self.ports = {name: reserve_free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
        self.popen: subprocess.Popen | None = None

    def start(self) -> None:
        self.zk.start(timeout_s=60)
        props = {
            "broker.id": "1", "log.dirs": str(self.root / "data"),
            "zookeeper.connect": f"{self.zk.connect_string}/bench-security",
            "listeners": ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items()),
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "sasl.jaas.config": JAAS,
            "ssl.keystore.location": str(self.pem), "ssl.truststore.location": self.ca,
            "offsets.topic.replication.factor": "1", "max.connections": "5000",
        }
        config = self.root / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        with open(self.root / "broker.log", "ab") as log:
            self.popen = subprocess.Popen([sys.executable, "-m", "broker.server", "--config", str(config)],
                                          stdout=log, stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True)
        deadline = time.monotonic() + 60
        while not _api_versions(self.ports["PLAINTEXT"]):
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((self.root / "broker.log").read_text()[-2000:])
            time.sleep(0.1)

    def stop(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
        self.zk.stop()

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def _api_versions(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            _request(sock, 18, 0, {})
            return True
    except OSError:
        return False


def _request(sock, api_key: int, version: int, body: dict):
    frame = encode_request(api_key, version, 1, "bench", body)
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    size = struct.unpack(">i", _read(sock, 4))[0]
    return decode_response(api_key, version, _read(sock, size))[1]


def _read(sock, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return bytes(data)


def cpu_s(pid: int) -> float:
    """A process's user + system CPU seconds (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> float:
    return round(os.getloadavg()[0], 1)


def setup(broker: Broker) -> str:
    import confluent_kafka
    from confluent_kafka.admin import AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism, \
        UserScramCredentialUpsertion
    admin = AdminClient({"bootstrap.servers": broker.bootstrap("PLAINTEXT")})
    topic = "bench-security"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), PASSWORD.encode())])["bench"].result()
    assert confluent_kafka  # imported for the produce rows
    return topic


def produce(broker: Broker, topic: str, listener: str, records: int) -> float:
    import confluent_kafka
    config = {"bootstrap.servers": broker.bootstrap(listener), "acks": "1", "linger.ms": 5,
              "queue.buffering.max.messages": 1_000_000, "enable.idempotence": False}
    if listener == "SSL":
        config.update({"security.protocol": "SSL", "ssl.ca.location": broker.ca})
    producer = confluent_kafka.Producer(config)
    value = b"x" * 100
    producer.produce(topic, value)  # connect and learn metadata outside the timing
    producer.flush(30)
    started = time.perf_counter()
    for _ in range(records):
        try:
            producer.produce(topic, value)
        except BufferError:
            producer.poll(0.01)
            producer.produce(topic, value)
    assert producer.flush(120) == 0
    return records / (time.perf_counter() - started)


def logins(broker: Broker, listener: str, connections: int, threads: int) -> float:
    context = ssl.create_default_context(cafile=broker.ca) if listener == "SASL_SSL" else None
    port = broker.ports[listener]
    counter = iter(range(connections))
    lock = threading.Lock()
    failures: list[Exception] = []

    def one() -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        if context is not None:
            sock = context.wrap_socket(sock, server_hostname="localhost")
        with sock:
            _request(sock, 18, 0, {})
            SaslClient("SCRAM-SHA-256", "bench", PASSWORD).exchange(lambda k, v, b: _request(sock, k, v, b), 2)

    def worker() -> None:
        while True:
            with lock:
                if next(counter, None) is None:
                    return
            try:
                one()
            except Exception as exc:  # noqa: BLE001 (counted and reported)
                failures.append(exc)

    started = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} of {connections} logins failed: {failures[0]!r}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="50k records, 1 round, 200 connections")
    args = parser.parse_args()
    if args.quick:
        args.records, args.rounds, args.connections = 50_000, 1, 200
    root = Path(tempfile.mkdtemp(prefix="pylog-bench-security-"))
    broker = Broker(root)
    try:
        broker.start()
        topic = setup(broker)
        rates = {"PLAINTEXT": [], "SSL": []}
        for _ in range(args.rounds):
            for listener in ("PLAINTEXT", "SSL", "SSL", "PLAINTEXT"):
                rates[listener].append(produce(broker, topic, listener, args.records))
        plain, tls = statistics.median(rates["PLAINTEXT"]), statistics.median(rates["SSL"])
        rows = [{"row": "produce records/s", "plaintext": round(plain), "tls": round(tls),
                 "ratio": round(tls / plain, 2), "target": ">= 0.5", "load": load()}]
        for listener in ("SASL_PLAINTEXT", "SASL_SSL"):
            times, broker_cpu, client_cpu = [], [], []
            for _ in range(args.rounds):
                before, client_before = cpu_s(broker.popen.pid), time.process_time()
                times.append(logins(broker, listener, args.connections, args.threads))
                broker_cpu.append(cpu_s(broker.popen.pid) - before)
                client_cpu.append(time.process_time() - client_before)
            rows.append({"row": f"{args.connections} SCRAM-SHA-256 logins ({listener})",
                         "seconds": round(statistics.median(times), 2),
                         "per_second": round(args.connections / statistics.median(times)),
                         "broker_cpu_ms_per_login": round(1000 * statistics.median(broker_cpu) / args.connections, 2),
                         "client_cpu_ms_per_login": round(1000 * statistics.median(client_cpu) / args.connections, 2),
                         "target": "1000 in <= 5 s", "load": load()})
        for row in rows:
            print(json.dumps(row))
        return 0
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
