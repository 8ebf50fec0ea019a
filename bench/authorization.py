"""What ACL authorization costs a produce: issue 17's "authorization adds <= 5 % to produce at
100 B with 1,000 ACLs".

    python bench/authorization.py [--requests 3000] [--records 1] [--acls 1000] [--repeat 3]
                                  [--client-records 50000] [--no-client]

Two single-broker clusters side by side, alike but for ``authorizer.class.name``: ``open`` (no
authorizer) and ``acls`` (the authorizer with ``--acls`` ACLs in ZooKeeper: the producer's WRITE on
its topic, IDEMPOTENT_WRITE and CREATE on the cluster, CLUSTER_ACTION for the broker's own
requests, and the rest spread over other principals' literal and prefixed topics, groups, transactional ids, a wildcard, and other principals' entries on the
benchmark topic itself, so the topic's check scans more than one entry). Rounds alternate between
the two; each reports the median over rounds and the load average. At the end each cluster's log
end must equal what was sent (a refused produce is cheap and would flatter the number).

Run 1 (2026-11-25, load 21.5 on 2 shared cores, 6,000 requests x 3 rounds): broker CPU per
Produce 195 us open, 205 us with 1,000 ACLs (ratio 1.05, rounds within +-20 %: the load is the
noise); confluent-kafka 40,154 vs 45,951 records/s (ratio 1.14, acls faster: noise). In process
(the dispatcher alone, no network, 7 x 3,000 requests, load 21): 73.0 us vs 76.6 us, +3.6 us per
request, so about 2 % of the broker's whole per-request CPU.
Run 2 (same day, load 17, same sizes): broker CPU 175 us open, 153 us with 1,000 ACLs (ratio 0.88:
again inside the noise); confluent-kafka 46,202 vs 46,488 records/s (ratio 1.006).

- ``produce-cpu``: broker CPU (``/proc/<pid>/stat``, utime+stime) per Produce v9 request, acks=1,
  one idempotent batch of ``--records`` 100-byte records, N requests in sequence on one connection
  (``broker_small_requests``' driver). The per-request cost is what authorization adds to; CPU is
  far less noisy than throughput on a loaded box.
- ``produce-client``: confluent-kafka producing ``--client-records`` 100-byte records (linger 5 ms, idempotent,
  acks=all), records/s end to end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kazoo.client import KazooClient  # noqa: E402

from _report import report  # noqa: E402
from broker_small_requests import _Driver  # noqa: E402
from broker.auth.acl import (  # noqa: E402
    AccessControlEntry,
    AclBinding,
    AclOperation as Op,
    AclPermissionType as Perm,
    CLUSTER_NAME,
    PatternType,
    ResourcePattern,
    ResourceType as Rt,
)
from broker.auth.zk_store import AclZkStore  # noqa: E402
from broker.client import AdminClient  # noqa: E402
from broker.tools.perf_local import LocalCluster  # noqa: E402

ANON = "User:ANONYMOUS"
TOPIC = "bench-authz"


def acl_set(count: int) -> list[AclBinding]:
    """The producer's (and the broker's) four ACLs and ``count - 4`` others (module doc)."""
    def ace(principal, op, perm=Perm.ALLOW):
        return AccessControlEntry(principal, "*", op, perm)
    out = [AclBinding(ResourcePattern(Rt.TOPIC, TOPIC), ace(ANON, Op.WRITE)),
           AclBinding(ResourcePattern(Rt.CLUSTER, CLUSTER_NAME), ace(ANON, Op.IDEMPOTENT_WRITE)),
           AclBinding(ResourcePattern(Rt.CLUSTER, CLUSTER_NAME), ace(ANON, Op.CREATE)),
           # the broker's own requests (the controller's LeaderAndIsr to itself) are ANONYMOUS on PLAINTEXT
           AclBinding(ResourcePattern(Rt.CLUSTER, CLUSTER_NAME), ace(ANON, Op.CLUSTER_ACTION))]
    shapes = [
        lambda i: AclBinding(ResourcePattern(Rt.TOPIC, f"topic-{i}"), ace(f"User:u{i}", Op.READ)),
        lambda i: AclBinding(ResourcePattern(Rt.TOPIC, f"team-{i}-", PatternType.PREFIXED), ace(f"User:u{i}", Op.WRITE)),
        lambda i: AclBinding(ResourcePattern(Rt.GROUP, f"group-{i}"), ace(f"User:u{i}", Op.READ)),
        lambda i: AclBinding(ResourcePattern(Rt.TRANSACTIONAL_ID, f"txn-{i}"), ace(f"User:u{i}", Op.WRITE)),
        lambda i: AclBinding(ResourcePattern(Rt.TOPIC, TOPIC), ace(f"User:u{i}", Op.READ)),
        lambda i: AclBinding(ResourcePattern(Rt.TOPIC, "*"), ace(f"User:monitor{i}", Op.DESCRIBE)),
        lambda i: AclBinding(ResourcePattern(Rt.TOPIC, "bench", PatternType.PREFIXED),
                             ace(f"User:u{i}", Op.WRITE, Perm.DENY)),
    ]
    weights = [400, 200, 150, 100, 20, 10, 10]  # per 890 others; scaled to count
    i = 0
    while len(out) < count:
        for shape, weight in zip(shapes, weights):
            for _ in range(max(1, weight * (count - 4) // 890)):
                if len(out) >= count:
                    break
                out.append(shape(i))
                i += 1
    return out[:count]


def seed(cluster: LocalCluster, bindings: list[AclBinding]) -> None:
    zk = KazooClient(hosts=f"{cluster.zookeeper.connect_string}/pylog-perf")
    zk.start()
    try:
        AclZkStore(zk, lambda: int(time.time() * 1000)).add(bindings)
    finally:
        zk.stop()
        zk.close()


def create_topic(cluster: LocalCluster) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with AdminClient(cluster.bootstrap) as admin:
                admin.create_topics([TOPIC], partitions=1, replication_factor=1)
            return
        except Exception as exc:  # the ACLs may not have reached the broker yet
            if time.monotonic() > deadline:
                raise RuntimeError(f"cannot create {TOPIC}: {exc}") from exc
            time.sleep(0.2)


def client_produce(cluster: LocalCluster, records: int) -> float:
    import confluent_kafka
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "acks": "all",
                                         "enable.idempotence": True})
    failed = []
    value = b"v" * 100
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, on_delivery=lambda err, _m: err and failed.append(err))
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)
    spent = time.perf_counter() - started
    if failed:
        raise RuntimeError(f"{len(failed)} records failed, first: {failed[0]}")
    return records / spent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--records", type=int, default=1)
    parser.add_argument("--acls", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--client-records", type=int, default=50_000)
    parser.add_argument("--no-client", action="store_true")
    args = parser.parse_args()
    common = {"offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
              "transaction.state.log.min.isr": "1"}
    systems = {"open": LocalCluster(overrides=common),
               "acls": LocalCluster(overrides={**common, "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})}
    try:
        for name, cluster in systems.items():
            cluster.start()
            if name == "acls":
                seed(cluster, acl_set(args.acls))
            create_topic(cluster)
        drivers = {name: _Driver(cluster, TOPIC) for name, cluster in systems.items()}
        cpu = {name: [] for name in systems}
        rate = {name: [] for name in systems}
        for _ in range(args.repeat):
            for name, driver in drivers.items():
                cpu[name].append(driver.produce(args.requests, args.records) * 1e6)
            if not args.no_client:
                for name, cluster in systems.items():
                    rate[name].append(client_produce(cluster, args.client_records))
        load = os.getloadavg()[0]
        for name in systems:
            report(f"produce-cpu/{name}", us_per_request_median=statistics.median(cpu[name]),
                   rounds=[round(v, 1) for v in cpu[name]], acls=args.acls if name == "acls" else 0,
                   records_per_request=args.records, load=round(load, 1))
        report("produce-cpu/acls-vs-open", ratio=statistics.median(cpu["acls"]) / statistics.median(cpu["open"]),
               load=round(load, 1))
        if not args.no_client:
            for name in systems:
                report(f"produce-client/{name}", records_per_s_median=statistics.median(rate[name]),
                       rounds=[round(v) for v in rate[name]], load=round(load, 1))
            report("produce-client/acls-vs-open", ratio=statistics.median(rate["acls"]) / statistics.median(rate["open"]),
                   load=round(load, 1))
        for name, cluster in systems.items():  # every request appended: no error was measured
            produced = args.repeat * args.requests * args.records + (0 if args.no_client else args.repeat * args.client_records)
            with AdminClient(cluster.bootstrap) as admin:
                end = admin.list_offsets(TOPIC, [0])[0]
            if end != produced:
                raise RuntimeError(f"{name}: log end {end}, expected {produced}: some produce failed")
        for driver in drivers.values():
            driver.close()
    finally:
        for cluster in systems.values():
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
