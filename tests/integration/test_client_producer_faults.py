"""Our producer against a real broker whose connections fail mid-flight: every record written
exactly once (checked by unique values), in order per partition.

Two faults: a loopback TCP proxy between client and broker (the broker advertises the proxy's
port, so every client connection goes through it) that cuts every connection every few tens of
milliseconds, wherever the bytes are (a request half sent, a response half received); and a
broker killed with SIGKILL and restarted on the same port and data while records are in flight.
"""

from __future__ import annotations

import signal
import socket
import threading
import time

import pytest

from broker.client import AdminClient, ClientConfig, Consumer, Producer
from broker.tools.zookeeper import find_free_port

pytestmark = pytest.mark.integration

FAULTY = ClientConfig(request_timeout_ms=5000, connect_timeout_ms=2000, retry_backoff_ms=20)


class TcpProxy:
    """Forwards 127.0.0.1:port to 127.0.0.1:target; ``cut_all`` resets every open connection;
    ``cut_after_next_request`` resets the connection that next carries bytes to the broker, right
    after they are forwarded: the request reaches the broker and its answer is lost, so the client
    must retry (a cut at a random moment often finds the connection idle, and proves nothing)."""

    def __init__(self) -> None:
        self.port = find_free_port()
        self.target: int | None = None
        self.cuts = 0
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._closed = False
        self._armed = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def start(self, target: int) -> None:
        self.target = target
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()  # the broker is down: the client sees a refused/closed connection
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                to_broker = src is client
                threading.Thread(target=self._pump, args=(src, dst, to_broker), daemon=True).start()

    def cut_after_next_request(self) -> None:
        self._armed.set()

    def _pump(self, src: socket.socket, dst: socket.socket, to_broker: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
                if to_broker and self._armed.is_set():
                    self._armed.clear()
                    self._cut((src, dst))
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def cut_all(self) -> None:
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            self._cut(pair, counted=False)
        self.cuts += bool(pairs)

    def _cut(self, pair: tuple[socket.socket, socket.socket], counted: bool = True) -> None:
        if counted:
            with self._lock:
                self.cuts += 1
                if pair in self._pairs:
                    self._pairs.remove(pair)
        for sock in pair:
            try:
                # Linger 0: an RST when the last reference goes. shutdown() first: a plain
                # close() does not wake the pump blocked in recv() on it (Linux), and the
                # connection would hang silently instead of failing.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut_all()


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float = 60):
    values: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
    with Consumer(bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        got = 0
        while got < expected and time.monotonic() < deadline:
            table = consumer.poll_arrow(timeout_ms=500)
            for row in table.select(["partition", "value"]).to_pylist():
                values[row["partition"]].append(row["value"])
            got += table.num_rows
        extra = consumer.poll_arrow(timeout_ms=500).num_rows  # nothing beyond what was sent
    return values, got + extra


def check_exactly_once(values: dict[int, list[bytes]], sent: list[bytes]) -> None:
    everything = [v for vs in values.values() for v in vs]
    assert len(everything) == len(set(everything)), "a record was written twice"
    assert sorted(everything) == sorted(sent), "a record was lost"
    for vs in values.values():  # one producer, one partition: the order it sent them in
        assert vs == sorted(vs)


def test_idempotent_producer_through_a_proxy_that_keeps_cutting_connections(broker_cluster):
    proxy = TcpProxy()
    cluster = broker_cluster(1, overrides={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    proxy.start(cluster.brokers[0].port)
    bootstrap = f"127.0.0.1:{proxy.port}"
    try:
        with AdminClient(bootstrap, config=FAULTY) as admin:
            admin.create_topics("cuts", partitions=3, replication_factor=1)
        stop = threading.Event()

        def chaos() -> None:
            tick = 0
            while not stop.wait(0.1):
                tick += 1
                if tick % 2:
                    proxy.cut_after_next_request()  # an answer lost: the client must retry
                else:
                    proxy.cut_all()  # idle connections too: the client must reconnect

        sent = [b"%08d" % i for i in range(20_000)]
        acknowledged = {}  # value -> (error, partition, offset), from produce()'s callbacks

        def on_delivery(error, delivery, value) -> None:
            assert value not in acknowledged, "a callback ran twice"
            acknowledged[value] = (error, delivery.partition, delivery.offset)

        with Producer(bootstrap, config=FAULTY, linger_ms=2, batch_bytes_max=4096,
                      delivery_timeout_ms=120_000) as producer:
            assert producer.idempotent
            producer.partitions_for("cuts")
            cutter = threading.Thread(target=chaos, daemon=True)
            cutter.start()
            for i, value in enumerate(sent):
                if i % 2:  # half through send, half through produce with a callback
                    producer.send("cuts", value, partition=i % 3)
                else:
                    producer.produce("cuts", value, partition=i % 3,
                                     on_delivery=lambda e, d, v=value: on_delivery(e, d, v))
                if i % 500 == 0:
                    time.sleep(0.03)  # spread the run over many cuts, landing mid-flight
            producer.flush()
            assert len(acknowledged) == len(sent) // 2  # flush waited for every callback
            stop.set()
            cutter.join()
            stats = producer.statistics()
        assert proxy.cuts >= 3 and stats.get("retries", 0) >= 1, (proxy.cuts, stats)
        values, total = consume_all(bootstrap, "cuts", 3, len(sent))
        assert total == len(sent)
        check_exactly_once(values, sent)
        written_at = {v: (None, p, offset) for p, vs in values.items() for offset, v in enumerate(vs)}
        assert {v: written_at[v] for v in acknowledged} == acknowledged  # the offsets the log has
    finally:
        proxy.close()


def test_idempotent_producer_across_a_broker_killed_and_restarted(broker_cluster):
    cluster = broker_cluster(1)
    broker = cluster.brokers[0]
    with AdminClient(cluster.bootstrap, config=FAULTY) as admin:
        admin.create_topics("crash", partitions=2, replication_factor=1)
    sent = [b"%08d" % i for i in range(30_000)]
    with Producer(cluster.bootstrap, config=FAULTY, linger_ms=2, batch_bytes_max=8192,
                  delivery_timeout_ms=180_000) as producer:
        producer.partitions_for("crash")

        def crash_when_busy() -> None:
            while producer.statistics().get("records_acknowledged", 0) < 5000:
                time.sleep(0.005)
            broker.kill(signal.SIGKILL)  # mid-stream: requests are in flight
            broker.start()

        killer = threading.Thread(target=crash_when_busy, daemon=True)
        killer.start()
        for i, value in enumerate(sent):
            producer.send("crash", value, partition=i % 2)
            if i % 1000 == 0:
                time.sleep(0.01)
        producer.flush()
        killer.join()
        stats = producer.statistics()
    assert broker.starts == 2 and stats["retries"] >= 1, stats
    values, total = consume_all(cluster.bootstrap, "crash", 2, len(sent))
    assert total == len(sent)
    check_exactly_once(values, sent)
