"""Kafka's own offsets decoder (``kafka-dump-log --offsets-decoder``) reads the
``__consumer_offsets`` records pylog's group coordinator writes: every key type, value versions 3
and 1, members with static ids, tombstones. Needs only the Kafka jars and ``java`` (no cluster)."""

from __future__ import annotations

import json
import re

import pytest

from broker.coordinator.group import records as r
from broker.records.batch import Record, encode_batch
from broker.tools.kafka_peer import find_kafka_install, run_kafka_tool

T = 1_700_000_000_000
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff"  # v0: topics ["t"], no user data
ASSIGNMENT = b"\x00\x00\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"


@pytest.fixture(scope="module")
def install():
    return find_kafka_install()  # make setup fetches it: missing is a set-up failure, not a skip


def test_kafka_decodes_our_offsets_topic_records(tmp_path, install):
    member = r.MemberMetadata(member_id="c-1", group_instance_id="inst", client_id="c",
                              client_host="/10.0.0.1", rebalance_timeout=300_000, session_timeout=45_000,
                              subscription=SUBSCRIPTION, assignment=ASSIGNMENT)
    writes = [
        (r.encode_offset_commit_key("g1", "topic-a", 7), r.encode_offset_commit_value(
            r.OffsetCommitValue(offset=42, leader_epoch=5, metadata="meta", commit_timestamp=T))),
        (r.encode_group_metadata_key("g1"), r.encode_group_metadata_value(r.GroupMetadataValue(
            protocol_type="consumer", generation=3, protocol="range", leader="c-1",
            current_state_timestamp=T + 1, members=[member]))),
        (r.encode_offset_commit_key("g1", "topic-a", 8), r.encode_offset_commit_value(
            r.OffsetCommitValue(offset=9, metadata="", commit_timestamp=T, expire_timestamp=T + 5), 1)),
        (r.encode_offset_commit_key("g1", "topic-a", 7), None),
        (r.encode_group_metadata_key("g1"), None),
    ]
    segment = tmp_path / "00000000000000000000.log"
    segment.write_bytes(encode_batch([Record(i, T, k, v) for i, (k, v) in enumerate(writes)], base_offset=0))
    done = run_kafka_tool("kafka-dump-log", ["--files", str(segment), "--offsets-decoder"], install=install)
    assert done.returncode == 0, done.stderr.decode()
    lines = [line for line in done.stdout.decode().splitlines() if line.startswith("| offset:")]
    parsed = []
    for line in lines:
        m = re.search(r" key: (\{.*\}) payload: (.*)$", line)
        assert m, line
        payload = m[2] if m[2] == "<DELETE>" else json.loads(m[2])
        parsed.append((json.loads(m[1]), payload))
    assert parsed[0] == ({"type": "1", "data": {"group": "g1", "topic": "topic-a", "partition": 7}},
                         {"version": "3", "data": {"offset": 42, "leaderEpoch": 5, "metadata": "meta",
                                                   "commitTimestamp": T}})
    key, value = parsed[1]
    assert key == {"type": "2", "data": {"group": "g1"}} and value["version"] == "3"
    assert {k: v for k, v in value["data"].items() if k != "members"} == {
        "protocolType": "consumer", "generation": 3, "protocol": "range", "leader": "c-1",
        "currentStateTimestamp": T + 1}
    (m,) = value["data"]["members"]
    assert (m["memberId"], m["groupInstanceId"], m["clientHost"], m["rebalanceTimeout"], m["sessionTimeout"]) == (
        "c-1", "inst", "/10.0.0.1", 300_000, 45_000)
    assert m["subscription"]["topics"] == ["t"]
    assert m["assignment"]["assignedPartitions"] == [{"topic": "t", "partitions": [0]}]
    assert parsed[2][1] == {"version": "1", "data": {"offset": 9, "metadata": "", "commitTimestamp": T,
                                                     "expireTimestamp": T + 5}}
    assert [p for _, p in parsed[3:]] == ["<DELETE>", "<DELETE>"]
