"""``pylog log-dirs --describe``: Kafka's ``kafka-log-dirs.sh``. Each broker (``--broker-list``, or
all) is asked DescribeLogDirs for the topics in ``--topic-list`` (or all); the output is the
tool's: two lines, then one JSON document::

    Querying brokers for log directories information
    Received log directory information from brokers 1,2,3
    {"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"t-0","size":1024,
      "offsetLag":0,"isFuture":false}],"error":null,"logDir":"/data/1"}]}],"version":1}
"""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from broker.client import AdminClient
from broker.client.errors import KafkaError
from broker.wire import ApiKey

__all__ = ["add_log_dirs_parser", "run_log_dirs", "describe_log_dirs"]


def add_log_dirs_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("log-dirs", help="log directories and partition sizes per broker (kafka-log-dirs)")
    parser.add_argument("--bootstrap-server", required=True, help="host:port[,host:port...]")
    parser.add_argument("--describe", action="store_true", required=True)
    parser.add_argument("--topic-list", default="", help="t1,t2 (default: all topics)")
    parser.add_argument("--broker-list", default="", help="1,2 (default: all brokers)")
    return parser


def describe_log_dirs(admin: AdminClient, broker: int, topics: list[str] | None) -> list[dict]:
    """One broker's log directories in kafka-log-dirs' JSON shape."""
    conn = admin.cluster.connection(broker)
    request_topics = None
    if topics:
        snapshot = admin.cluster.refresh(topics)
        request_topics = [{"topic": t, "partitions": sorted(snapshot.topics[t].partitions)}
                          for t in topics if t in snapshot.topics]
    response = conn.request(ApiKey.DESCRIBE_LOG_DIRS, {"topics": request_topics},
                            conn.version_for(ApiKey.DESCRIBE_LOG_DIRS, min_version=1))
    dirs = []
    for result in response.results:
        partitions = [{"partition": f"{t.name}-{p.partition_index}", "size": p.partition_size,
                       "offsetLag": p.offset_lag, "isFuture": p.is_future_key}
                      for t in result.topics for p in t.partitions]
        error = None if result.error_code == 0 else KafkaError(result.error_code).name
        dirs.append({"partitions": partitions, "error": error, "logDir": result.log_dir})
    return dirs


def run_log_dirs(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    topics = [t for t in args.topic_list.split(",") if t] or None
    with AdminClient(args.bootstrap_server) as admin:
        brokers = [int(b) for b in args.broker_list.split(",") if b] or sorted(admin.cluster.brokers)
        print("Querying brokers for log directories information", file=out)
        described = [{"broker": b, "logDirs": describe_log_dirs(admin, b, topics)} for b in brokers]
    print(f"Received log directory information from brokers {','.join(map(str, brokers))}", file=out)
    print(json.dumps({"brokers": described, "version": 1}, separators=(",", ":")), file=out)
    return 0
