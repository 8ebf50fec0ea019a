"""``pylog groups {list,describe}``: consumer groups whose offsets live in ZooKeeper
(``/consumers/<group>/offsets/<topic>/<partition>``, written by ``broker.client.offset_store`` and
by the Spark connector's ``offsets.store=zookeeper``), with lag like ``kafka-consumer-groups.sh``::

    GROUP  TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG
    loads  orders  0          1200            1250            50

CURRENT-OFFSET is the committed offset (the next one the group reads). LOG-END-OFFSET is the
partition's high watermark, asked of the cluster when ``--bootstrap-server`` is given (otherwise,
and for a partition the cluster no longer has, it and LAG show ``-``). The Spark connector commits
one micro-batch behind the query (Spark calls ``commit`` when it plans the next batch), so a
finished AvailableNow run shows the rows of its last batch as lag.

User mistakes (no ZooKeeper there, a bad group name, an unreachable broker) raise ``ValueError``
with one line; ``pylog`` prints it.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Mapping, TextIO

from broker.client import AdminClient, ClientConfig, KafkaError
from broker.client.offset_store import OffsetStoreError, ZkOffsetStore

__all__ = ["GroupRow", "describe_rows", "format_rows", "add_groups_parser", "run_groups"]

TopicPartition = tuple[str, int]
_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")


@dataclass(frozen=True)
class GroupRow:
    group: str
    topic: str
    partition: int
    committed: int
    log_end: int | None  # None: not asked, or the partition is gone

    @property
    def lag(self) -> int | None:
        return None if self.log_end is None else max(self.log_end - self.committed, 0)


def describe_rows(group: str, committed: Mapping[TopicPartition, int],
                  log_ends: Mapping[TopicPartition, int] | None) -> list[GroupRow]:
    """One row per committed partition, by topic then partition. Pure."""
    ends = log_ends or {}
    return [GroupRow(group, t, p, off, ends.get((t, p))) for (t, p), off in sorted(committed.items())]


def format_rows(rows: list[GroupRow]) -> str:
    """The rows as aligned columns under Kafka's headings. Pure."""
    def cell(value) -> str:
        return "-" if value is None else str(value)

    table = [_COLUMNS] + [(r.group, r.topic, str(r.partition), str(r.committed), cell(r.log_end), cell(r.lag))
                          for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(_COLUMNS))]
    return "".join("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() + "\n" for line in table)


def add_groups_parser(subparsers) -> argparse.ArgumentParser:
    groups = subparsers.add_parser("groups", help="consumer groups with committed offsets and lag")
    actions = groups.add_subparsers(dest="groups_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="groups with offsets in ZooKeeper")
    _zookeeper(listing)
    describe = actions.add_parser("describe", help="committed offset, log end and lag per partition")
    _zookeeper(describe)
    describe.add_argument("--group", required=True, help="consumer group id")
    describe.add_argument("--bootstrap-server", default=None, metavar="HOST:PORT[,HOST:PORT]",
                          help="brokers to ask for log end offsets (without it: no lag)")
    describe.add_argument("--timeout-ms", type=int, default=30_000,
                          help="how long to wait for the cluster (default 30000)")
    return groups


def _zookeeper(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--zookeeper-connect", required=True, metavar="HOST:PORT[/CHROOT]",
                        help="the ZooKeeper holding /consumers (the cluster's zookeeper.connect)")


def _log_ends(bootstrap: str, partitions: list[TopicPartition], timeout_ms: int) -> dict[TopicPartition, int]:
    config = ClientConfig(client_id="pylog-groups", request_timeout_ms=timeout_ms)
    out: dict[TopicPartition, int] = {}
    with AdminClient(bootstrap, config=config) as admin:
        existing = {name: set(admin.cluster.partitions_for(name))
                    for name in admin.list_topics() if name in {t for t, _ in partitions}}
        for topic in sorted(existing):
            wanted = sorted(p for t, p in partitions if t == topic and p in existing[topic])
            if wanted:
                out.update({(topic, p): off for p, off in admin.list_offsets(topic, wanted, "latest").items()})
    return out


def run_groups(args: argparse.Namespace, out: TextIO, err: TextIO | None = None) -> int:
    """Run the action in ``args``; returns the exit code. Raises ValueError for user mistakes."""
    try:
        with ZkOffsetStore(args.zookeeper_connect) as store:
            if args.groups_command == "list":
                for group in store.groups():
                    out.write(f"{group}\n")
                return 0
            committed = store.fetch(args.group)
    except OffsetStoreError as exc:
        raise ValueError(str(exc)) from None
    if not committed:
        raise ValueError(f"group {args.group!r} has no committed offsets in {args.zookeeper_connect}")
    log_ends = None
    if args.bootstrap_server:
        if args.timeout_ms <= 0:
            raise ValueError(f"--timeout-ms must be positive, got {args.timeout_ms}")
        try:
            log_ends = _log_ends(args.bootstrap_server, list(committed), args.timeout_ms)
        except KafkaError as exc:
            raise ValueError(f"cannot read log end offsets from {args.bootstrap_server}: {exc}") from None
    out.write(format_rows(describe_rows(args.group, committed, log_ends)))
    return 0
