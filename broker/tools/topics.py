"""``pylog topics {create,list,describe,alter,delete}``: Kafka's ``kafka-topics.sh`` over ``AdminClient``.

User mistakes (a bad name, a missing option value, a topic that already exists, an unreachable
broker) raise ``ValueError`` with one line of explanation; ``pylog``'s main prints it and exits
non-zero, never with a traceback. ``describe`` prints Kafka's layout::

    Topic: orders	TopicId: ...	PartitionCount: 2	ReplicationFactor: 3
    	Topic: orders	Partition: 0	Leader: 1	Replicas: 1,2,3	Isr: 1,2	Offline: 3

``Offline`` (replicas on brokers that are not registered) appears only when there are some, as in
Kafka. The topic line also carries ``CleanupPolicy`` (``delete``, ``compact`` or both: what
retention and the log cleaner do with the topic) and Kafka's ``Configs`` (the settings that are
not defaults, ``k=v`` joined by commas). With ``--broker-config server.properties`` (repeat or
list several) a compacted topic's partition lines add the cleaner's figures, read from those
brokers' log directories: ``DirtyRatio: 1=0.42,2=0.40`` per replica copy and ``Uncleanable: 2``
(``broker.tools.cleaner_columns`` says why they come from the files and not from the broker).
``--under-replicated-partitions`` keeps partitions whose ISR is smaller than their replica
list, ``--unavailable-partitions`` those without a live leader: the two questions an operator asks
after a broker dies.
"""

from __future__ import annotations

import argparse
import time
from typing import TextIO

from broker.client import AdminClient, ClientConfig, KafkaError
from broker.client.admin import ConfigValue
from broker.cluster.names import COLLISION_WARNING, has_collision_chars, validate_topic_name
from broker.tools.cleaner_columns import broker_log_dirs, cleaner_columns

__all__ = ["add_topics_parser", "run_topics", "parse_configs"]


def add_topics_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``topics`` with its four actions to ``pylog``'s subparsers."""
    topics = subparsers.add_parser("topics", help="create, list, describe and delete topics")
    actions = topics.add_subparsers(dest="topics_command", required=True, metavar="ACTION")

    create = actions.add_parser("create", help="create a topic")
    _common(create)
    create.add_argument("--topic", required=True, help="topic name")
    create.add_argument("--partitions", type=int, default=None,
                        help="number of partitions (default: the broker's num.partitions)")
    create.add_argument("--replication-factor", type=int, default=None,
                        help="replicas per partition (default: the broker's default.replication.factor)")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a topic config override; repeat for several")
    create.add_argument("--if-not-exists", action="store_true",
                        help="succeed quietly if the topic already exists")

    listing = actions.add_parser("list", help="list topic names")
    _common(listing)
    listing.add_argument("--exclude-internal", action="store_true", help="leave out internal topics")

    describe = actions.add_parser("describe", help="partitions, leaders, replicas and ISR")
    _common(describe)
    describe.add_argument("--topic", default=None, help="one topic (default: all)")
    describe.add_argument("--broker-config", action="extend", nargs="+", default=[], metavar="FILE",
                          help="server.properties of brokers on this machine: a compacted topic's "
                               "partitions then show the dirty ratio and uncleanable state of their copies")
    only = describe.add_mutually_exclusive_group()
    only.add_argument("--under-replicated-partitions", action="store_true",
                      help="only partitions whose ISR is smaller than their replica list")
    only.add_argument("--unavailable-partitions", action="store_true",
                      help="only partitions without a live leader")

    alter = actions.add_parser("alter", help="add partitions to a topic (kafka-topics --alter)")
    _common(alter)
    alter.add_argument("--topic", required=True, help="topic name")
    alter.add_argument("--partitions", type=int, required=True, help="the new, larger partition count")
    alter.add_argument("--replica-assignment", default=None, metavar="B1:B2,B3:B4",
                       help="replicas of each new partition (colon-separated brokers, comma between partitions)")

    delete = actions.add_parser("delete", help="delete a topic")
    _common(delete)
    delete.add_argument("--topic", required=True, help="topic name")
    return topics


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]",
                        help="brokers to bootstrap from")
    parser.add_argument("--timeout-ms", type=int, default=30_000,
                        help="how long to wait for the cluster (default 30000)")


def parse_configs(items: list[str]) -> dict[str, str]:
    """``["retention.ms=1000", ...]`` to a dict; ValueError for an item without ``=``."""
    configs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"invalid --config {item!r}: expected KEY=VALUE")
        configs[key.strip()] = value.strip()
    return configs


def run_topics(args: argparse.Namespace, out: TextIO, err: TextIO | None = None) -> int:
    """Run the action in ``args``; returns the exit code. Raises ValueError for user mistakes."""
    if args.timeout_ms <= 0:
        raise ValueError(f"--timeout-ms must be positive, got {args.timeout_ms}")
    action = _ACTIONS[args.topics_command]
    if getattr(args, "topic", None) is not None:
        validate_topic_name(args.topic)  # InvalidTopicError is a ValueError
    config = ClientConfig(client_id="pylog-topics", request_timeout_ms=args.timeout_ms)
    try:
        with AdminClient(args.bootstrap_server, config=config) as admin:
            return action(admin, args, out, err)
    except KafkaError as exc:
        raise ValueError(str(exc)) from None


def _create(admin: AdminClient, args, out: TextIO, err: TextIO | None) -> int:
    for option, value in (("--partitions", args.partitions), ("--replication-factor", args.replication_factor)):
        if value is not None and value < 1:
            raise ValueError(f"{option} must be at least 1, got {value}")
    configs = parse_configs(args.config)
    if err is not None and has_collision_chars(args.topic):
        print(COLLISION_WARNING, file=err)
    try:
        admin.create_topics(
            args.topic,
            partitions=-1 if args.partitions is None else args.partitions,
            replication_factor=-1 if args.replication_factor is None else args.replication_factor,
            config=configs,
        )
    except KafkaError as exc:
        if args.if_not_exists and exc.name == "TOPIC_ALREADY_EXISTS":
            return 0
        raise
    print(f"Created topic {args.topic}.", file=out)
    return 0


def _alter(admin: AdminClient, args, out: TextIO, err: TextIO | None) -> int:
    """CreatePartitions. As kafka-topics, ``--replica-assignment`` lists every partition's
    replicas and only those past the current count are sent. Keys map to partitions by
    ``murmur2(key) % partitions``: most keys move to another partition from now on."""
    from broker.client.partition_admin import create_partitions

    assignments = None
    if args.replica_assignment is not None:
        rows = [[int(b) for b in part.split(":")] for part in args.replica_assignment.split(",")]
        current = len(next(t for t in admin.describe_topics([args.topic])).partitions)
        assignments = rows[current:]
    create_partitions(admin, args.topic, args.partitions, assignments)
    return 0


def _list(admin: AdminClient, args, out: TextIO, err: TextIO | None) -> int:
    for name in admin.list_topics(include_internal=not args.exclude_internal):
        print(name, file=out)
    return 0


def _describe(admin: AdminClient, args, out: TextIO, err: TextIO | None) -> int:
    topics = admin.describe_topics(None if args.topic is None else [args.topic])
    under = getattr(args, "under_replicated_partitions", False)
    unavailable = getattr(args, "unavailable_partitions", False)
    filtered = under or unavailable
    configs = {} if filtered else admin.describe_topic_configs([t.name for t in topics])
    log_dirs = broker_log_dirs(getattr(args, "broker_config", []))
    now_ms = time.time_ns() // 1_000_000  # the tool's edge: the cleaner's lag settings compare with it
    for topic in topics:
        settings = {c.name: c.value for c in configs.get(topic.name, []) if c.value is not None}
        if not filtered:  # Kafka prints the topic line only for a full description
            topic_id = str(topic.topic_id) if topic.topic_id is not None else "none"
            print(f"Topic: {topic.name}\tTopicId: {topic_id}\tPartitionCount: {len(topic.partitions)}\t"
                  f"ReplicationFactor: {topic.replication_factor}"
                  f"{_compaction_columns(configs.get(topic.name, []))}"
                  f"\tConfigs: {_non_default(configs.get(topic.name, []))}", file=out)
        for p in topic.partitions:
            if under and len(p.isr) >= len(p.replicas):
                continue
            if unavailable and p.leader >= 0 and p.leader not in p.offline_replicas:
                continue
            leader = str(p.leader) if p.leader >= 0 else "none"
            offline = f"\tOffline: {_ids(p.offline_replicas)}" if p.offline_replicas else ""
            print(f"\tTopic: {topic.name}\tPartition: {p.partition}\tLeader: {leader}\t"
                  f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}{offline}"
                  f"{cleaner_columns(topic.name, p.partition, p.replicas, settings, log_dirs, now_ms)}", file=out)
    return 0


def _delete(admin: AdminClient, args, out: TextIO, err: TextIO | None) -> int:
    admin.delete_topics(args.topic)
    print(f"Deleted topic {args.topic}.", file=out)
    return 0


def _compaction_columns(configs: list[ConfigValue]) -> str:
    """``\tCleanupPolicy: compact``: the topic's policy, overridden or the broker's (a broker
    that does not report it runs Kafka's default, delete)."""
    policy = next((c.value for c in configs if c.name == "cleanup.policy"), None)
    return f"\tCleanupPolicy: {policy if policy is not None else 'delete'}"


def _non_default(configs: list[ConfigValue]) -> str:
    return ",".join(f"{c.name}={c.value}" for c in configs if not c.is_default)


def _ids(ids) -> str:
    return ",".join(str(i) for i in ids)


_ACTIONS = {"create": _create, "list": _list, "describe": _describe, "delete": _delete, "alter": _alter}
