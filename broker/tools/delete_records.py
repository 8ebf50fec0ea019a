"""``pylog delete-records``: Kafka's ``kafka-delete-records.sh``. The offsets come in Kafka's JSON
file format::

    {"partitions": [{"topic": "orders", "partition": 0, "offset": 1200}], "version": 1}

(``offset`` -1: up to the high watermark). Each partition's leader moves its log start offset
(DeleteRecords); the output is the tool's::

    Executing records delete operation
    Records delete operation completed:
    partition: orders-0	low_watermark: 1200

A refused partition prints ``error: NAME (code): message`` in place of the low watermark (Kafka
prints its exception class) and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TextIO

from broker.client import AdminClient
from broker.client.errors import KafkaError
from broker.client.partition_admin import delete_records

__all__ = ["add_delete_records_parser", "run_delete_records", "parse_offsets_json"]


def add_delete_records_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("delete-records", help="move partitions' log start offsets (kafka-delete-records)")
    parser.add_argument("--bootstrap-server", required=True, help="host:port[,host:port...]")
    parser.add_argument("--offset-json-file", required=True, type=Path,
                        help='{"partitions": [{"topic": t, "partition": p, "offset": o}], "version": 1}')
    return parser


def parse_offsets_json(text: str) -> dict[tuple[str, int], int]:
    """Kafka's offset JSON to (topic, partition) -> offset; ValueError with the reason."""
    try:
        data = json.loads(text)
        entries = data["partitions"]
        offsets = {}
        for entry in entries:
            key = (str(entry["topic"]), int(entry["partition"]))
            if key in offsets:
                raise ValueError(f"Offset json file contains duplicate topic partitions: {key[0]}-{key[1]}")
            offsets[key] = int(entry["offset"])
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        raise ValueError(f"the offset JSON file is not in Kafka's format: {exc}") from None
    if not offsets:
        raise ValueError("the offset JSON file names no partitions")
    return offsets


def run_delete_records(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    offsets = parse_offsets_json(args.offset_json_file.read_text())
    print("Executing records delete operation", file=out)
    with AdminClient(args.bootstrap_server) as admin:
        answers = delete_records(admin, offsets)
    print("Records delete operation completed:", file=out)
    failed = False
    for (topic, partition), (low, code) in sorted(answers.items()):
        if code == 0:
            print(f"partition: {topic}-{partition}\tlow_watermark: {low}", file=out)
        else:
            failed = True
            print(f"partition: {topic}-{partition}\terror: {KafkaError(code)}", file=out)
    return 1 if failed else 0
