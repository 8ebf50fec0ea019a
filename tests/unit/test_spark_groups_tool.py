"""``pylog groups``: rows and table for the ZooKeeper-committed offsets the Spark connector
publishes. Pure (the ZooKeeper and broker parts run in tests/spark/test_spark_offsets_zk.py)."""

from __future__ import annotations

import argparse
import io

import pytest

from broker.client.offset_store import OffsetStoreError, consumer_offset_path
from broker.tools.group_plan import committed_rows, describe_table
from broker.tools.groups import add_groups_parser, run_groups


def test_rows_sorted_with_lag():
    rows = committed_rows("g", {("b", 0): 5, ("a", 1): 10, ("a", 0): 3}, {("a", 0): 3, ("a", 1): 15})
    assert [(r.topic, r.partition, r.committed, r.log_end, r.lag) for r in rows] == [
        ("a", 0, 3, 3, 0), ("a", 1, 10, 15, 5), ("b", 0, 5, None, None)]


def test_lag_is_never_negative():
    # A committed offset past the log end (topic re-created, truncated replica) shows no lag.
    assert committed_rows("g", {("a", 0): 9}, {("a", 0): 4})[0].lag == 0


def test_table_layout():
    # The ZooKeeper store has no members: Kafka's first six columns.
    text = describe_table(committed_rows("loads", {("orders", 0): 1200}, {("orders", 0): 1250}), with_members=False)
    assert text.splitlines() == [
        "GROUP  TOPIC   PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG",
        "loads  orders  0          1200            1250            50",
    ]
    assert describe_table(committed_rows("g", {("t", 3): 7}, None), with_members=False).splitlines()[1].split() == \
        ["g", "t", "3", "7", "-", "-"]


def test_cli_arguments():
    parser = argparse.ArgumentParser()
    add_groups_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["groups", "describe", "--group", "g", "--zookeeper-connect", "h:2181/c",
                              "--bootstrap-server", "h:9092"])
    assert (args.groups_command, args.group, args.zookeeper_connect, args.bootstrap_server) == \
        ("describe", ["g"], "h:2181/c", "h:9092")
    bare = parser.parse_args(["groups", "describe", "--group", "g"])
    with pytest.raises(ValueError, match="--bootstrap-server .* or --zookeeper-connect"):
        run_groups(bare, io.StringIO())  # one store is needed


@pytest.mark.parametrize("group, topic, partition", [
    ("a/b", "t", 0), ("..", "t", 0), ("", "t", 0), ("g", "t/x", 0), ("g", "t", -1), ("g", "t", True)])
def test_offset_paths_refuse_names_that_leave_the_tree(group, topic, partition):
    with pytest.raises(OffsetStoreError):
        consumer_offset_path(group, topic, partition)


def test_offset_path_layout():
    assert consumer_offset_path("g", "orders", 3) == "/consumers/g/offsets/orders/3"
