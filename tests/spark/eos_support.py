"""The exactly-once tests' oracle and cluster settings (tests/spark/test_spark_exactly_once*.py,
the fault driver ``eos_driver.py``).

The oracle reads the whole output topic under read_committed and checks: every input record
exactly once, in order per key (values carry a per-key sequence number), and no transaction of
the query's prefix left open (ListTransactions) with the LSO at the high watermark.
"""

from __future__ import annotations

import time
from collections import defaultdict

from broker.client import AdminClient, ClientConfig, Cluster, Consumer
from broker.client.txn_admin import TxnAdmin

TXN_BROKER_SETTINGS = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    "transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5",
}


def txn_overrides(n: int) -> dict[str, str]:
    factor = str(min(n, 3))
    return {**TXN_BROKER_SETTINGS, "transaction.state.log.replication.factor": factor,
            "transaction.state.log.min.isr": str(min(n, 2)), "offsets.topic.replication.factor": factor,
            "default.replication.factor": factor, "min.insync.replicas": str(min(n, 2)),
            "num.partitions": "2"}


def produce_keyed(bootstrap: str, topic: str, count: int, keys: int = 7, start: int = 0) -> None:
    """``count`` records, key ``k<i % keys>``, value ``k<key>:<sequence within the key>``, all
    records of a key in one partition (the default partitioner), so their order is defined."""
    from broker.client import Producer

    with Producer(bootstrap) as producer:
        for i in range(start, start + count):
            k = i % keys
            producer.send(topic, f"k{k}:{i // keys}".encode(), key=f"k{k}".encode())
        producer.flush()


SETTLE_S = 30.0  # how long read_committed waits for the last commit's markers (a deadline)


def read_committed(bootstrap: str, topic: str, settle: bool = True) -> list[tuple[bytes, bytes]]:
    """Every (key, value) of ``topic`` visible under read_committed, up to the LSO. ``settle``:
    first wait (up to ``SETTLE_S``) for the LSO to reach the high watermark: EndTxn is answered
    before the coordinator writes the markers (as on Kafka), so right after a query ends the last
    batch may not be visible yet. Off where a transaction is meant to stay open."""
    with AdminClient(bootstrap) as admin:
        partitions = sorted(admin.cluster.refresh([topic]).topics[topic].partitions)
        deadline = time.monotonic() + (SETTLE_S if settle else 0)
        while True:
            ends = admin.list_offsets(topic, partitions, "latest", isolation_level="read_committed")
            if time.monotonic() >= deadline or ends == admin.list_offsets(topic, partitions, "latest"):
                break
            time.sleep(0.05)
    out = []
    with Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest") as consumer:
        tps = [(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        while any(consumer.position(tp) < ends[tp[1]] for tp in tps):
            for r in consumer.poll(timeout_ms=1000, max_records=10_000):
                out.append((r.key, r.value))
    return out


def check_exactly_once(bootstrap: str, topic: str, count: int, keys: int = 7, ordered: bool = True) -> None:
    """Each of the ``count`` input records exactly once, in order per key (``ordered``: when one
    task wrote all of a key's records; a batch job spreads a key over tasks)."""
    rows = read_committed(bootstrap, topic)
    per_key = defaultdict(list)
    for key, value in rows:
        k, seq = value.decode().split(":")
        assert key.decode() == k
        per_key[k].append(int(seq))
    expected = defaultdict(list)
    for i in range(count):
        expected[f"k{i % keys}"].append(i // keys)
    missing = {k: len(expected[k]) - len(per_key.get(k, [])) for k in expected}
    assert len(rows) == count, f"{len(rows)} records read_committed, {count} expected; per key short by {missing}"
    if not ordered:
        per_key = {k: sorted(v) for k, v in per_key.items()}
    assert dict(per_key) == dict(expected), "records out of order or duplicated within a key"


def open_transactions(bootstrap: str, prefix: str = "") -> list[str]:
    cluster = Cluster(bootstrap, ClientConfig(client_id="eos-oracle"))
    try:
        cluster.refresh_brokers()
        listed = TxnAdmin(cluster).list_transactions(states=["Ongoing"])
        return sorted(t.transactional_id for ts in listed.values() for t in ts
                      if t.transactional_id.startswith(prefix))
    finally:
        cluster.close()


def lso_at_hw(bootstrap: str, topic: str) -> bool:
    with AdminClient(bootstrap) as admin:
        partitions = sorted(admin.cluster.refresh([topic]).topics[topic].partitions)
        lso = admin.list_offsets(topic, partitions, "latest", isolation_level="read_committed")
        hw = admin.list_offsets(topic, partitions, "latest")
    return lso == hw
