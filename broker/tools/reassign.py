"""``pylog reassign``: Kafka's ``kafka-reassign-partitions.sh`` over AlterPartitionReassignments and
ListPartitionReassignments, with the tool's JSON::

    {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3],
                                   "log_dirs": ["any", "any"]}]}

- ``--generate --topics-to-move-json-file F --broker-list 1,2,3``: the current assignment and a
  proposal spreading the topics' partitions over the listed brokers (Kafka's round-robin
  placement), nothing changed;
- ``--execute --reassignment-json-file F``: prints the current assignment (keep it to roll back),
  starts the reassignments; refused (exit 1, Kafka's message, nothing changed) while any
  reassignment is in progress in the cluster, unless ``--additional`` is given, as Kafka's tool;
- ``--verify --reassignment-json-file F``: ``Reassignment of partition t-0 is completed.`` or
  ``... is still in progress.``; exit 1 while any is in progress;
- ``--cancel --reassignment-json-file F``: cancels the ones in progress;
- ``--throttle RATE`` with ``--execute``: replication throttles in bytes/s on the moving
  replicas, removed by the ``--verify`` that finds them all done (``reassign_throttle``).

Not yet: ``log_dirs`` other than ``any``, ``--replica-alter-log-dirs-throttle``,
``--preserve-throttles``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from random import Random
from typing import TextIO

from broker.client import AdminClient
from broker.client.errors import KafkaError
from broker.client.partition_admin import alter_partition_reassignments, list_partition_reassignments
from broker.server.replica_assignment import assign_replicas
from broker.tools.reassign_throttle import VERIFY_WARNING, clear_throttles, move_map, set_throttles

__all__ = ["add_reassign_parser", "run_reassign", "assignment_json", "CANNOT_EXECUTE_BECAUSE_OF_EXISTING"]

# Kafka 4.1's ReassignPartitionsCommand, word for word (two spaces after the first sentence too).
CANNOT_EXECUTE_BECAUSE_OF_EXISTING = (
    "Cannot execute because there is an existing partition assignment.  Use --additional to override this and "
    "create a new partition assignment in addition to the existing one. The --additional flag can also be used "
    "to change the throttle by resubmitting the current reassignment.")


def add_reassign_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("reassign", help="move partition replicas between brokers (kafka-reassign-partitions)")
    parser.add_argument("--bootstrap-server", required=True, help="host:port[,host:port...]")
    action = parser.add_mutually_exclusive_group(required=True)
    for name in ("generate", "execute", "verify", "cancel"):
        action.add_argument(f"--{name}", action="store_true")
    parser.add_argument("--topics-to-move-json-file", type=Path, default=None)
    parser.add_argument("--broker-list", default=None, help="with --generate: 1,2,3")
    parser.add_argument("--reassignment-json-file", type=Path, default=None)
    parser.add_argument("--throttle", type=int, default=-1,
                        help="with --execute: replication throttle in B/s on the moving replicas")
    parser.add_argument("--additional", action="store_true",
                        help="with --execute: start it although other reassignments are in progress")
    return parser


def assignment_json(assignment: dict[tuple[str, int], list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": list(r), "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _read_reassignment(path: Path | None) -> dict[tuple[str, int], list[int]]:
    if path is None:
        raise ValueError("--reassignment-json-file is required")
    try:
        data = json.loads(path.read_text())
        return {(str(e["topic"]), int(e["partition"])): [int(b) for b in e["replicas"]] for e in data["partitions"]}
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"the reassignment JSON file is not in Kafka's format: {exc}") from None


def _current(admin: AdminClient, topics: list[str]) -> dict[tuple[str, int], list[int]]:
    return {(d.name, p.partition): list(p.replicas) for d in admin.describe_topics(topics) for p in d.partitions}


def run_reassign(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    with AdminClient(args.bootstrap_server) as admin:
        if args.generate:
            return _generate(admin, args, out)
        wanted = _read_reassignment(args.reassignment_json_file)
        if args.execute:
            ongoing = list_partition_reassignments(admin)
            if not args.additional and ongoing:
                print(CANNOT_EXECUTE_BECAUSE_OF_EXISTING, file=out)  # Kafka prints it on stdout, exit 1
                return 1
            current = _current(admin, sorted({t for t, _ in wanted}))
            print(f"Current partition replica assignment\n\n{assignment_json({tp: current[tp] for tp in wanted if tp in current})}\n\n"
                  "Save this to use as the --reassignment-json-file option during rollback", file=out)
            if args.throttle >= 0:
                print(VERIFY_WARNING, file=out)
                set_throttles(admin, move_map(ongoing, wanted, current), args.throttle, out)
            return _report(alter_partition_reassignments(admin, wanted), "started", out)
        if args.cancel:
            ongoing = list_partition_reassignments(admin)
            return _report(alter_partition_reassignments(admin, {tp: None for tp in wanted if tp in ongoing}),
                           "cancelled", out)
        return _verify(admin, wanted, out)


def _generate(admin: AdminClient, args, out: TextIO) -> int:
    if args.topics_to_move_json_file is None or args.broker_list is None:
        raise ValueError("--generate needs --topics-to-move-json-file and --broker-list")
    topics = [str(t["topic"]) for t in json.loads(args.topics_to_move_json_file.read_text())["topics"]]
    brokers = [int(b) for b in args.broker_list.split(",") if b]
    current = _current(admin, topics)
    proposed = {}
    for topic in topics:
        parts = sorted(p for t, p in current if t == topic)
        factor = len(current[(topic, parts[0])])
        placed = assign_replicas(brokers, len(parts), factor, Random())
        proposed.update({(topic, p): placed[p] for p in parts})
    print(f"Current partition replica assignment\n{assignment_json(current)}\n", file=out)
    print(f"Proposed partition reassignment configuration\n{assignment_json(proposed)}", file=out)
    return 0


def _report(results: dict, verb: str, out: TextIO) -> int:
    done = [f"{t}-{p}" for (t, p), (code, _) in sorted(results.items()) if code == 0]
    failed = {tp: KafkaError(code, message) for tp, (code, message) in sorted(results.items()) if code != 0}
    if done:
        print(f"Successfully {verb} partition reassignments for {','.join(done)}", file=out)
    for (topic, partition), error in failed.items():
        print(f"Error reassigning partition(s):\n{topic}-{partition}: {error}", file=out)
    return 1 if failed else 0


def _verify(admin: AdminClient, wanted: dict[tuple[str, int], list[int]], out: TextIO) -> int:
    ongoing = list_partition_reassignments(admin)
    current = _current(admin, sorted({t for t, _ in wanted}))
    print("Status of partition reassignment:", file=out)
    pending = False
    for (topic, partition), replicas in sorted(wanted.items()):
        if (topic, partition) in ongoing:
            pending = True
            print(f"Reassignment of partition {topic}-{partition} is still in progress.", file=out)
        elif current.get((topic, partition)) == replicas:
            print(f"Reassignment of partition {topic}-{partition} is completed.", file=out)
        else:
            pending = True
            print(f"There is no active reassignment of partition {topic}-{partition}, but replica set is "
                  f"{current.get((topic, partition))} rather than {replicas}.", file=out)
    if not ongoing:  # Kafka clears every throttle once no reassignment is in progress in the cluster
        clear_throttles(admin, wanted, out)
    return 1 if pending else 0
