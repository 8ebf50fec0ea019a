"""Compaction during leader failover: three brokers, a compacted RF=3 topic (min.insync.replicas=2,
4 KiB segments, dirty ratio 0.01), an idempotent acks=all librdkafka producer writing keyed
records and tombstones while the leader is SIGKILLed and restarted and the next leader is
SIGTERMed and restarted; every replica cleans its own copy meanwhile.

What must hold at the end (``../shared/reference/coordinators.md`` 1, issue 13):
- no acknowledged write is lost: for every key, a read from the beginning ends with the last
  acknowledged value at its offset, or a later value of that key that was sent;
- every record read is what was acknowledged at its offset, no value twice, none unsent;
- a follower whose data dir was wiped catches up from the cleaned leader (its fetches ask for
  offsets cleaned away and get the next batch) and cleans its copy;
- once everything written before the roll records is inactive everywhere, all three replicas'
  logs (read from their data dirs) hold the same records below the roll, one per key.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from collections import defaultdict
from dataclasses import dataclass

import confluent_kafka
import pytest
from integration_support import ClusterFactory
from test_log_compaction import read_all

from broker.client import AdminClient, ClientConfig
from broker.cluster.errors import UnknownTopicOrPartitionError
from broker.cluster.zk import KafkaZkClient
from broker.log.checkpoint import read_checkpoint
from broker.records import RecordsError, decode_batch, validate_batch
from broker.records.header import BatchLimits

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_MS = 6000
OVERRIDES = {
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "200",
    "controlled.shutdown.retry.backoff.ms": "500",
    "leader.imbalance.check.interval.seconds": "3",
    "log.flush.offset.checkpoint.interval.ms": "1000",
    "log.cleaner.backoff.ms": "100",
}
TOPIC = "compacted-failover"
TOPIC_CONFIG = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": "600000", "min.insync.replicas": "2"}
KEYS = 40
TOMBSTONE_EVERY = 13  # every 13th send deletes its key
CLIENT = ClientConfig(request_timeout_ms=10_000, retry_backoff_ms=50)
_SCAN_LIMITS = BatchLimits(batch_bytes_max=2**31 - 1)


def wait_until(condition, timeout_s: float, what: str, interval_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(interval_s)


# What a replica's cleaner may spend without getting there. Its worker process (nice 19, in its
# broker's session, so it gets what the broker leaves of their share of the CPU) is started on the
# first pass: imports, the cached numba kernels and the first pass took 0.6-0.85 s of its CPU (3
# brokers, load 2 and load 16), 8-10 s of wall time at load 16 and more than 30 s at load ~20. So
# the cleaner waits fail on the CPU its worker burned without result, not on wall time.
CLEANER_CPU_BUDGET_S = 5.0
CLEANER_HANG_GUARD_S = 180  # only for a cleaner that never runs at all (no worker, no CPU used)
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def cleaner_cpu_s(broker) -> float:
    """CPU seconds (user + system) the broker's live cleaner worker processes have used."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) != broker.pid:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"broker.server.cleaner_worker" not in f.read():
                    continue
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        total += (int(fields[11]) + int(fields[12])) / _CLK_TCK
    return total


def wait_for_cleaners(condition, brokers, what: str, interval_s: float = 0.1):
    """Until ``condition()`` holds; fails once a broker's cleaner has used
    ``CLEANER_CPU_BUDGET_S`` of CPU during the wait without it (a worker replaced by a restart
    counts from zero), or after ``CLEANER_HANG_GUARD_S`` if the cleaners never ran."""
    used = {b.broker_id: 0.0 for b in brokers}
    seen = {b.broker_id: (b.pid, cleaner_cpu_s(b)) for b in brokers}
    deadline = time.monotonic() + CLEANER_HANG_GUARD_S
    while True:
        value = condition()
        if value:
            return value
        for b in brokers:
            pid, before = seen[b.broker_id]
            now = cleaner_cpu_s(b) if b.pid is not None else 0.0
            used[b.broker_id] += max(0.0, now - before) if b.pid == pid else now
            seen[b.broker_id] = (b.pid, now)
        worst = max(used, key=used.get)
        assert used[worst] < CLEANER_CPU_BUDGET_S, \
            f"broker {worst}'s cleaner used {used[worst]:.1f} CPU s waiting for {what}; CPU s per broker: {used}"
        assert time.monotonic() < deadline, \
            f"timed out after {CLEANER_HANG_GUARD_S} s waiting for {what}; cleaner CPU s per broker: {used}"
        time.sleep(interval_s)


def partition_state(zk: KafkaZkClient):
    try:
        return zk.get_partition_state(TOPIC, 0)[0]
    except UnknownTopicOrPartitionError:
        return None


def leader(zk: KafkaZkClient) -> int:
    found = partition_state(zk)
    return found.leader if found is not None else -1


def isr(zk: KafkaZkClient) -> tuple[int, ...]:
    found = partition_state(zk)
    return found.isr if found is not None else ()


# ------------------------------------------------------------------------------- the workload


@dataclass
class Send:
    key: bytes
    value: bytes | None  # None: a tombstone
    status: str = "invoke"  # invoke | ok | info
    offset: int = -1
    error: str | None = None


class KeyedWorkload:
    """An idempotent acks=all librdkafka producer in a thread: key ``k<i % KEYS>``, a unique
    value per send, every ``TOMBSTONE_EVERY``-th send a tombstone; each outcome recorded.
    Batches stay under 2000 bytes: what piles up while a leader is down must still fit a 4 KiB
    segment (a larger batch is RECORD_LIST_TOO_LARGE, on Kafka too)."""

    def __init__(self, bootstrap: str, rate_per_s: float = 400.0) -> None:
        self.config = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                       "linger.ms": 5, "batch.size": 2000, "message.timeout.ms": 120_000, "retry.backoff.ms": 100,
                       "topic.metadata.refresh.interval.ms": 2_000}
        self.rate_per_s = rate_per_s
        self.sends: list[Send] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="keyed-producer", daemon=True)
        self.unflushed = -1

    def start(self) -> "KeyedWorkload":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(130)
        assert not self._thread.is_alive(), "the producer did not finish flushing"

    def acked(self) -> int:
        with self._lock:
            return sum(1 for s in self.sends if s.status == "ok")

    def wait_for_acks(self, count: int, timeout_s: float = 60.0) -> None:
        wait_until(lambda: self.acked() >= count, timeout_s, f"{count} acks", interval_s=0.05)

    def _run(self) -> None:
        producer = confluent_kafka.Producer(self.config)
        started, n = time.monotonic(), 0
        try:
            while not self._stop.is_set():
                send = Send(b"k%d" % (n % KEYS), None if n % TOMBSTONE_EVERY == TOMBSTONE_EVERY - 1 else b"v%d" % n)
                with self._lock:
                    self.sends.append(send)
                self._produce(producer, send)
                n += 1
                producer.poll(0)
                ahead_s = n / self.rate_per_s - (time.monotonic() - started)
                if ahead_s > 0:
                    time.sleep(ahead_s)
        finally:
            self.unflushed = producer.flush(120)

    def _produce(self, producer, send: Send) -> None:
        def delivered(err, msg) -> None:
            with self._lock:
                if err is None:
                    send.status, send.offset = "ok", msg.offset()
                else:
                    send.status, send.error = "info", f"{err.name()}: {err.str()}"

        while True:
            try:
                producer.produce(TOPIC, value=send.value, key=send.key, partition=0, on_delivery=delivered)
                return
            except BufferError:
                producer.poll(0.05)


# ------------------------------------------------------------------------------- reading


def replica_records(data_dir) -> list[tuple[int, bytes, bytes | None]] | None:
    """The records in one replica's segment files, in offset order; None when the files changed
    under the read (a swap renamed one, an append is half-written): the caller reads again."""
    out = []
    try:
        for path in sorted((data_dir / f"{TOPIC}-0").glob("*.log")):
            data = path.read_bytes()
            pos = 0
            while pos < len(data):
                header = validate_batch(data, pos, _SCAN_LIMITS)
                out.extend((r.offset, r.key, r.value) for r in decode_batch(data, pos, _SCAN_LIMITS).records)
                pos += header.size
    except (OSError, RecordsError):
        return None
    offsets = [o for o, _, _ in out]
    return out if offsets == sorted(set(offsets)) else None


def cleaner_checkpoint(data_dir) -> int:
    try:
        return read_checkpoint(data_dir / "cleaner-offset-checkpoint").get((TOPIC, 0), 0)
    except Exception:  # not written yet, or being replaced
        return 0


def check_history(sends: list[Send], records: list[tuple[int, bytes, bytes | None]]) -> None:
    """No acknowledged write lost, nothing read that contradicts an acknowledgement."""
    acked_at = {s.offset: s for s in sends if s.status == "ok"}
    sent_values = {s.value: s for s in sends if s.value is not None}
    seen_values: set[bytes] = set()
    last_read: dict[bytes, tuple[int, bytes | None]] = {}
    for offset, key, value in records:
        if offset in acked_at:
            send = acked_at[offset]
            assert (key, value) == (send.key, send.value), f"offset {offset}: read {key!r}={value!r}, acked {send}"
        if value is not None:
            assert value in sent_values and sent_values[value].key == key, f"unexpected {key!r}={value!r}"
            assert value not in seen_values, f"{value!r} read twice"
            seen_values.add(value)
        last_read[key] = (offset, value)
    last_acked: dict[bytes, Send] = {}
    for send in sends:
        if send.status == "ok" and (send.key not in last_acked or send.offset > last_acked[send.key].offset):
            last_acked[send.key] = send
    for key, send in last_acked.items():
        assert key in last_read, f"{key!r}: its last acknowledged write at {send.offset} is lost"
        offset, value = last_read[key]
        assert offset >= send.offset, f"{key!r}: read {value!r} at {offset}, acked {send.value!r} at {send.offset}"
        if offset > send.offset and value is not None:  # a later send whose ack was not seen
            assert sent_values[value].status != "ok" or sent_values[value].offset == offset


# ------------------------------------------------------------------------------- the test


@pytest.fixture
def cluster(zookeeper, tmp_path):
    factory = ClusterFactory(zookeeper.connect_string, tmp_path)
    try:
        yield factory.make(3, overrides=OVERRIDES)
    finally:
        factory.close()


@pytest.fixture
def zk(cluster):
    client = KafkaZkClient(cluster.zk_connect, 10_000, 10_000)
    client.start()
    try:
        yield client
    finally:
        client.close()


def produce_one(bootstrap: str, key: bytes, value: bytes | None) -> int:
    """One record, acknowledged by every replica in the ISR (acks=all); its offset."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                         "enable.idempotence": True, "compression.type": "none"})
    got = []
    producer.produce(TOPIC, value, key, partition=0, on_delivery=lambda err, msg: got.append((err, msg.offset())))
    assert producer.flush(30) == 0 and got[0][0] is None, got
    return got[0][1]


def test_compaction_during_failover_loses_nothing_and_replicas_converge(cluster, zk):
    wait_until(lambda: len(zk.get_broker_ids()) == 3, 30, "three registered brokers")
    with AdminClient(cluster.bootstrap, config=CLIENT) as admin:
        admin.create_topics(TOPIC, 1, 3, TOPIC_CONFIG)
    wait_until(lambda: len(isr(zk)) == 3, 30, "a full ISR")

    workload = KeyedWorkload(cluster.bootstrap).start()
    try:
        workload.wait_for_acks(1500)
        # Leaders and followers clean while the producer writes.
        wait_for_cleaners(lambda: all(cleaner_checkpoint(b.data_dir) > 0 for b in cluster.brokers),
                          cluster.brokers, "every replica to clean its copy")
        first = cluster.broker(leader(zk))
        first.kill(signal.SIGKILL)
        wait_until(lambda: leader(zk) not in (-1, first.broker_id), 30, "a new leader after SIGKILL")
        first.start()
        workload.wait_for_acks(workload.acked() + 1000)
        wait_until(lambda: len(isr(zk)) == 3, 60, "the killed broker back in the ISR")
        second = cluster.broker(leader(zk))
        second.stop()  # SIGTERM: a controlled shutdown moves leadership first
        second.start()
        workload.wait_for_acks(workload.acked() + 1000)
    finally:
        workload.stop()
    assert workload.unflushed == 0
    failed = [s for s in workload.sends if s.status != "ok"]
    assert not failed, f"librdkafka's retries should absorb the faults: {len(failed)} not acked, e.g. {failed[:3]}"
    wait_until(lambda: len(isr(zk)) == 3, 60, "a full ISR after the faults")

    # A follower loses its disk and catches up from the cleaned leader: it fetches offsets that
    # were cleaned away there and gets the next batch.
    lead = leader(zk)
    wait_for_cleaners(lambda: cleaner_checkpoint(cluster.broker(lead).data_dir) > 0, [cluster.broker(lead)],
                      "the leader to have cleaned")
    wiped = next(b for b in cluster.brokers if b.broker_id != lead)
    wiped.kill(signal.SIGKILL)
    shutil.rmtree(wiped.data_dir)
    wiped.start()
    wait_until(lambda: wiped.broker_id in isr(zk), 60, "the wiped follower back in the ISR")

    # Some keys end deleted, whatever the workload's last sends were.
    for key in (b"k0", b"k1", b"k2"):
        workload.sends.append(Send(key, None, "ok", produce_one(cluster.bootstrap, key, None)))

    # Roll records, one at a time and acknowledged by all three (acks=all, full ISR): each
    # replica appends each alone, and 3000 incompressible bytes do not fit a 4 KiB segment with
    # anything else, so every record before ``roll_at`` is inactive on every replica.
    wait_until(lambda: len(isr(zk)) == 3, 60, "a full ISR before the roll")
    roll_at = produce_one(cluster.bootstrap, b"roll", os.urandom(3000))
    for _ in range(2):
        produce_one(cluster.bootstrap, b"roll", os.urandom(3000))

    def converged():
        logs = [replica_records(b.data_dir) for b in cluster.brokers]
        if any(log is None for log in logs):
            return None
        below = [[r for r in log if r[0] < roll_at] for log in logs]
        if any(len({key for _, key, _ in part}) != len(part) for part in below):
            return None  # a replica still holds an older value of some key
        return below

    replicas = wait_for_cleaners(converged, cluster.brokers, "every replica's copy compacted below the roll",
                                 interval_s=0.2)
    assert replicas[0] == replicas[1] == replicas[2], "the replicas' surviving records differ"
    assert len(replicas[0]) == KEYS and roll_at > 10 * KEYS  # one record per key, gaps between them

    records = [r for r in read_all(cluster.bootstrap, TOPIC) if r[0] < roll_at]
    assert records == replicas[0]
    check_history(workload.sends, records)
    tombstones = {key for _, key, value in replicas[0] if value is None}
    assert {b"k0", b"k1", b"k2"} <= tombstones  # kept until delete.retention.ms
    for broker in cluster.brokers:  # truncations and restarts never made the cleaner give up a log
        assert "is uncleanable from now on" not in broker.log_path.read_text(), broker.broker_id
