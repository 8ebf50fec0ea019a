"""``pylog groups``: which store a command uses, and the mistakes refused before any I/O. The
cluster side runs in tests/peer/test_peer_groups_tool.py."""

from __future__ import annotations

import argparse
import io

import pytest

from broker.tools.groups import GroupSession, add_groups_parser, run_groups

B = ("--bootstrap-server", "h:9092")
Z = ("--zookeeper-connect", "h:2181")


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_groups_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["groups", *argv])


@pytest.mark.parametrize("argv, mutating, stores", [
    (B, False, ["kafka"]),
    (Z, False, ["zookeeper"]),
    (B + Z, False, ["zookeeper"]),  # as before the kafka store: the cluster only adds log ends
    (B + Z + ("--store", "kafka"), True, ["kafka"]),
    (B + Z + ("--store", "all"), False, ["kafka", "zookeeper"]),
])
def test_store_selection(argv, mutating, stores):
    assert GroupSession(parse("list", *argv)).stores(mutating) == stores


@pytest.mark.parametrize("argv, mutating, message", [
    ((), False, "give --bootstrap-server"),
    (Z + ("--store", "kafka"), False, "--store kafka needs --bootstrap-server"),
    (B + ("--store", "zookeeper"), False, "--store zookeeper needs --zookeeper-connect"),
    (B + ("--store", "all"), False, "--store all needs --zookeeper-connect"),
    (B + Z + ("--store", "all"), True, "only lists and describes"),
])
def test_store_mistakes(argv, mutating, message):
    with pytest.raises(ValueError, match=message):
        GroupSession(parse("list", *argv)).stores(mutating)


def test_reset_needs_one_scenario_and_one_scope():
    with pytest.raises(SystemExit):
        parse("reset-offsets", *B, "--group", "g", "--topic", "t")  # no scenario
    with pytest.raises(SystemExit):
        parse("reset-offsets", *B, "--group", "g", "--to-earliest")  # no scope
    with pytest.raises(SystemExit):
        parse("reset-offsets", *B, "--group", "g", "--all-topics", "--to-earliest", "--to-latest")
    with pytest.raises(SystemExit):
        parse("reset-offsets", *B, "--group", "g", "--all-topics", "--to-earliest", "--dry-run", "--execute")
    args = parse("reset-offsets", *B, "--group", "g", "--topic", "t:0,1", "--topic", "u", "--shift-by", "-3")
    assert (args.topic, args.shift_by, args.execute) == (["t:0,1", "u"], -3, False)


def test_describe_views_exclude_each_other_and_need_a_group():
    with pytest.raises(SystemExit):
        parse("describe", *B, "--group", "g", "--members", "--state")
    with pytest.raises(SystemExit):
        parse("describe", *B)
    assert parse("describe", *B, "--all-groups").all_groups


@pytest.mark.parametrize("argv, message", [
    (("describe", *Z, "--group", "g", "--members"), "--members and --state describe the kafka store"),
    (("reset-offsets", *B, *Z, "--store", "all", "--group", "g", "--all-topics", "--to-latest"), "only lists"),
    (("list", *B, "--timeout-ms", "0"), "--timeout-ms must be positive"),
])
def test_mistakes_refused_before_any_request(argv, message):
    with pytest.raises(ValueError, match=message):
        run_groups(parse(*argv), io.StringIO())
