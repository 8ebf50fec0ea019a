"""``pylog leader-election``: Kafka's ``kafka-leader-election.sh`` over ElectLeaders::

    pylog leader-election --bootstrap-server B --election-type PREFERRED --topic t --partition 0
    pylog leader-election --bootstrap-server B --election-type UNCLEAN --all-topic-partitions
    pylog leader-election --bootstrap-server B --election-type PREFERRED --path-to-json-file f.json

(``{"partitions": [{"topic": "t", "partition": 0}]}``). Output as the tool's:
``Successfully completed leader election (PREFERRED) for partitions t-0``, ``Valid replica already
elected for partitions t-1``, and for each failure ``Error completing leader election (PREFERRED)
for partition: t-2: NAME (code): message`` with exit status 1.
"""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from broker.client import AdminClient
from broker.client.errors import KafkaError
from broker.client.partition_admin import elect_leaders

__all__ = ["add_leader_election_parser", "run_leader_election"]

_TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
_ELECTION_NOT_NEEDED = 84


def add_leader_election_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("leader-election", help="preferred or unclean leader election (kafka-leader-election)")
    parser.add_argument("--bootstrap-server", required=True, help="host:port[,host:port...]")
    parser.add_argument("--election-type", required=True, type=str.upper, choices=sorted(_TYPES))
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", default=None)
    which.add_argument("--all-topic-partitions", action="store_true")
    which.add_argument("--path-to-json-file", default=None)
    parser.add_argument("--partition", type=int, default=None, help="with --topic")
    return parser


def _partitions(args) -> list[tuple[str, int]] | None:
    if args.all_topic_partitions:
        return None
    if args.topic is not None:
        if args.partition is None:
            raise ValueError("Missing required option(s) [partition]")
        return [(args.topic, args.partition)]
    with open(args.path_to_json_file) as f:
        data = json.load(f)
    return [(str(e["topic"]), int(e["partition"])) for e in data["partitions"]]


def run_leader_election(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    kind = args.election_type
    with AdminClient(args.bootstrap_server) as admin:
        results = elect_leaders(admin, _TYPES[kind], _partitions(args))
    done = [f"{t}-{p}" for (t, p), (code, _) in sorted(results.items()) if code == 0]
    not_needed = [f"{t}-{p}" for (t, p), (code, _) in sorted(results.items()) if code == _ELECTION_NOT_NEEDED]
    failed = {tp: (code, message) for tp, (code, message) in sorted(results.items())
              if code not in (0, _ELECTION_NOT_NEEDED)}
    if done:
        print(f"Successfully completed leader election ({kind}) for partitions {', '.join(done)}", file=out)
    if not_needed:
        print(f"Valid replica already elected for partitions {', '.join(not_needed)}", file=out)
    for (topic, partition), (code, message) in failed.items():
        print(f"Error completing leader election ({kind}) for partition: {topic}-{partition}: "
              f"{KafkaError(code, message)}", file=out)
    return 1 if failed else 0
