"""Apache Kafka's own group tools against Apache Kafka and against pylog (issue 14):
``kafka-consumer-groups --describe`` (offsets, lag, state, members), and Kafka's decoders of
``__consumer_offsets`` (``kafka-console-consumer`` with ``OffsetsMessageFormatter`` and
``GroupMetadataMessageFormatter``, ``kafka-dump-log --offsets-decoder`` on the partition's
segment file) reading what each coordinator wrote.

Each scenario states its outcome once (what Apache Kafka 4.1 prints) and checks it on each
system, both systems at once (``on_both_peers``). Parts that must differ (member ids, ports,
timestamps) are normalised where parsed, and differences kept on purpose are named where they are
allowed, with the reason.
"""

from __future__ import annotations

import base64
import json
import time

from group_clients import (
    GroupMember,
    produce_spread,
    unique_group,
    wait_until,
)
from group_wire import GroupWire, consumer_assignment, consumer_subscription
from peer_support import on_both_peers, unique_topic

from broker.client.admin import AdminClient
from broker.tools.kafka_peer import run_kafka_tool

TOOL_TIMEOUT_S = 90.0
OFFSETS_TOPIC = "__consumer_offsets"
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions, the default on both
CLIENT_ID = "peer-tools"


def tool_run(name: str, args: list[str]) -> tuple[str, str]:
    """The tool's (stdout, stderr); its exit status must be 0."""
    result = run_kafka_tool(name, args, timeout_s=TOOL_TIMEOUT_S)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]
    return result.stdout.decode(errors="replace"), result.stderr.decode(errors="replace")


def tool(name: str, args: list[str]) -> str:
    return tool_run(name, args)[0]


# ------------------------------------------------------------------- kafka-consumer-groups


def consumer_groups(peer, *args: str) -> tuple[list[str], list[list[str]], list[str]]:
    """kafka-consumer-groups: (header columns, rows sorted, the lines of stderr, where it says
    that a group has no active members). Columns are separated by runs of spaces and no value
    has one, except ``COORDINATOR (ID)`` (``host:port  (id)``), joined back here. Rows are
    sorted: Java prints the partitions in a hash map's order."""
    out, err = tool_run("kafka-consumer-groups", ["--bootstrap-server", peer.bootstrap, *args])
    lines = [line for line in out.splitlines() if line.strip()]
    header_at = next(i for i, line in enumerate(lines) if line.startswith("GROUP"))
    assert header_at == 0, out
    header = lines[header_at].replace("COORDINATOR (ID)", "COORDINATOR-(ID)").split()
    rows = []
    for line in lines[header_at + 1:]:
        cells = line.split()
        if "COORDINATOR-(ID)" in header:  # "127.0.0.1:port  (1)" is one cell
            at = header.index("COORDINATOR-(ID)")
            cells[at:at + 2] = [f"{cells[at]} {cells[at + 1]}"]
        assert len(cells) == len(header), (header, line)
        rows.append(cells)
    return header, sorted(rows), [line for line in err.splitlines() if line.strip()]


OFFSETS_HEADER = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID",
                  "HOST", "CLIENT-ID"]


def offsets_columns(rows: list[list[str]]) -> list[tuple]:
    """(group, topic, partition, current offset, log end offset, lag) per row: the columns that
    must be equal; CONSUMER-ID, HOST and CLIENT-ID are checked by the test on their own."""
    return [tuple(row[:6]) for row in rows]


@on_both_peers("group_peer")
def test_consumer_groups_describe_offsets_state_and_members(group_peer):
    """An Empty group with committed offsets (a simple commit, as ``assign()`` users and tools
    make), then the same group with an active member: the offsets table (current offset, log
    end offset, lag), ``--state`` and ``--members --verbose``."""
    topic, group = unique_topic("tools-groups"), unique_group("tools-describe")
    group_peer.create_topic(topic, partitions=3)
    produce_spread(group_peer, topic, 3, 10)
    with GroupWire(group_peer) as wire:
        wire.ready(group)
        assert set(wire.commit(group, {(topic, 0): 4, (topic, 1): 10, (topic, 2): 0}).values()) == {"NONE"}
    offsets = [(group, topic, "0", "4", "10", "6"), (group, topic, "1", "10", "10", "0"),
               (group, topic, "2", "0", "10", "10")]

    header, rows, other = consumer_groups(group_peer, "--describe", "--group", group)
    assert header == OFFSETS_HEADER and offsets_columns(rows) == offsets
    assert {tuple(row[6:]) for row in rows} == {("-", "-", "-")}
    assert other == [f"Consumer group '{group}' has no active members."]
    header, rows, other = consumer_groups(group_peer, "--describe", "--group", group, "--state")
    assert header == ["GROUP", "COORDINATOR-(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]
    assert [row[:1] + row[2:] for row in rows] == [[group, "-", "Empty", "0"]]

    member = GroupMember("confluent", group_peer.bootstrap, group, [topic], **{"client.id": CLIENT_ID})
    try:
        wait_until(lambda: len(member.assignment) == 3, f"{group}'s member holds the 3 partitions")
        header, rows, other = consumer_groups(group_peer, "--describe", "--group", group)
        assert header == OFFSETS_HEADER and offsets_columns(rows) == offsets and other == []
        consumer_ids = {row[6] for row in rows}
        assert len(consumer_ids) == 1 and consumer_ids.pop().startswith(f"{CLIENT_ID}-")
        assert {(row[7], row[8]) for row in rows} == {("/127.0.0.1", CLIENT_ID)}  # Java's InetAddress.toString()

        header, rows, _ = consumer_groups(group_peer, "--describe", "--group", group, "--state", "--verbose")
        assert header == ["GROUP", "COORDINATOR-(ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                          "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"]
        [[name, coordinator, *state]] = rows
        assert (name, state) == (group, ["range", "Stable", "-", "-", "1"])
        assert coordinator == f"127.0.0.1:{group_peer.ports[0]} (1)"  # each side's broker id is 1

        header, rows, _ = consumer_groups(group_peer, "--describe", "--group", group, "--members", "--verbose")
        assert header == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                          "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        [[name, consumer_id, host, client_id, *assigned]] = rows
        assert (name, host, client_id, assigned) == (group, "/127.0.0.1", CLIENT_ID,
                                                     ["3", "-", f"{topic}:0,1,2", "-", "-"])
        assert consumer_id.startswith(f"{CLIENT_ID}-")
    finally:
        member.stop()


@on_both_peers("group_peer")
def test_consumer_groups_list_with_state(group_peer):
    stable, empty = unique_group("tools-list-stable"), unique_group("tools-list-empty")
    topic = group_peer.create_topic(unique_topic("tools-list"), partitions=2)
    with GroupWire(group_peer) as wire:
        for group in (stable, empty):
            wire.ready(group)
        wire.commit(empty, {(topic, 0): 1})
        member = wire.stable_member(stable, topic, [0, 1])
        header, rows, _ = consumer_groups(group_peer, "--list", "--state")
        wire.leave(stable, [member.member_id])
    assert header == ["GROUP", "STATE"]
    assert [stable, "Stable"] in rows and [empty, "Empty"] in rows
    plain = tool("kafka-consumer-groups", ["--bootstrap-server", group_peer.bootstrap, "--list"]).split()
    assert stable in plain and empty in plain


# ------------------------------------------------------------- __consumer_offsets, decoded

# Named: Kafka 4.1 writes OffsetCommitValue version 4 (flexible, KIP-915 lets 3.5+ read it);
# pylog writes version 3, which every Kafka tool since 2.3 reads (coordinators.md §3). The
# fields are the same: offset, leaderEpoch, metadata, commitTimestamp.
OFFSET_COMMIT_VALUE_VERSIONS = {"kafka": 4, "pylog": 3}


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``31*h + c`` over UTF-16 code units, int32 wrap-around, signed."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group: str) -> int:
    """The group's partition of ``__consumer_offsets`` as Kafka computes it:
    ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``, where ``Utils.abs`` is
    ``Math.abs`` with Integer.MIN_VALUE mapped to 0 (not ``toPositive``'s ``& 0x7fffffff``, which
    the partitioner uses: the two differ for every negative hash)."""
    h = java_string_hash(group)
    return (0 if h == -(1 << 31) else abs(h)) % OFFSETS_PARTITIONS


def group_with_hash(prefix: str, negative: bool) -> str:
    """A new group id whose Java hash is negative (or not): for a non-negative hash both ways of
    making it positive agree, so a test that is not about placement takes such a group."""
    while (java_string_hash(group := unique_group(prefix)) < 0) != negative:
        pass
    return group


@on_both_peers("group_peer")
def test_group_records_are_in_kafkas_partition_for_the_group(group_peer):
    """A group with a negative Java hash: its commit is appended to partition
    ``abs(hash) % 50`` of ``__consumer_offsets`` (where Kafka's coordinator, Burrow and any tool
    that reads one group's records look), not ``(hash & 0x7fffffff) % 50``."""
    topic = group_peer.create_topic(unique_topic("tools-placement"), partitions=1)
    group = group_with_hash("tools-placement", negative=True)
    h = java_string_hash(group)
    expected, masked = offsets_partition(group), (h & 0x7FFFFFFF) % OFFSETS_PARTITIONS
    with GroupWire(group_peer) as wire:
        wire.ready(group)
        with AdminClient(group_peer.bootstrap) as admin:
            before = admin.list_offsets(OFFSETS_TOPIC, [expected, masked], "latest")
            assert wire.commit(group, {(topic, 0): 1}) == {(topic, 0): "NONE"}
            after = admin.list_offsets(OFFSETS_TOPIC, [expected, masked], "latest")
    if expected != masked:
        assert after[masked] == before[masked], f"{group}'s commit went to partition {masked}"
    assert after[expected] == before[expected] + 1, (group, expected, before, after)


def committed_group(peer, topic: str, group: str) -> tuple[str, int, int]:
    """The scenario both decoders read: a simple commit of two partitions while the group is
    Empty, one member (generation 1) that commits partition 0 again, then leaves (generation 2,
    Empty). Returns (member id, and the time window of the writes in ms)."""
    started_ms = int(time.time() * 1000)
    with GroupWire(peer) as wire:
        wire.ready(group)
        assert wire.commit(group, {(topic, 0): 4, (topic, 1): 10}) == {(topic, 0): "NONE", (topic, 1): "NONE"}
        member = wire.stable_member(group, topic, [0, 1])
        assert wire.commit(group, {(topic, 0): 5}, member.member_id, member.generation_id) == {(topic, 0): "NONE"}
        assert wire.leave(group, [member.member_id]) == ("NONE", [(member.member_id, "NONE")])
    return member.member_id, started_ms, int(time.time() * 1000)


def expected_offsets(topic: str) -> list[tuple]:
    """(topic, partition, offset, leader epoch, metadata) of each commit record, in order."""
    return [(topic, 0, 4, -1, "m4"), (topic, 1, 10, -1, "m10"), (topic, 0, 5, -1, "m5")]


def json_objects(text: str) -> list[dict]:
    """The formatters print one JSON object per record with no separator between them."""
    decoder, objects, at = json.JSONDecoder(), [], 0
    text = text.strip()
    while at < len(text):
        obj, at = decoder.raw_decode(text, at)
        objects.append(obj)
        while at < len(text) and text[at].isspace():
            at += 1
    return objects


def read_offsets_partition(peer, partition: int, formatter: str) -> list[dict]:
    """kafka-console-consumer on one partition of ``__consumer_offsets`` (assigned: no group),
    every record up to its end offset, through ``formatter``."""
    with AdminClient(peer.bootstrap) as admin:
        end = admin.list_offsets(OFFSETS_TOPIC, [partition], "latest")[partition]
    out = tool("kafka-console-consumer", [
        "--bootstrap-server", peer.bootstrap, "--topic", OFFSETS_TOPIC, "--partition", str(partition),
        "--offset", "earliest", "--max-messages", str(end), "--timeout-ms", "20000",
        "--formatter", f"org.apache.kafka.tools.consumer.{formatter}"])
    return json_objects(out)


def check_group_metadata(values: list[dict], topic: str, member_id: str) -> None:
    """GroupMetadataValue v3: generation 1 with the member (its subscription and assignment as
    sent), then generation 2 Empty after it left."""
    assert [v["version"] for v in values] == [3, 3]
    joined, left = (v["data"] for v in values)
    [member] = joined.pop("members")
    assert (joined["protocolType"], joined["generation"], joined["protocol"], joined["leader"]) == (
        "consumer", 1, "range", member_id)
    subscription, assignment = member.pop("subscription"), member.pop("assignment")
    assert member == {"memberId": member_id, "groupInstanceId": None, "clientId": "peer-tier",
                      "clientHost": "/127.0.0.1", "rebalanceTimeout": 10_000, "sessionTimeout": 6_000}
    assert subscription in (base64.b64encode(consumer_subscription([topic])).decode(),  # console
                            {"topics": [topic], "userData": None})                          # dump-log
    assert assignment in (base64.b64encode(consumer_assignment({topic: [0, 1]})).decode(),
                          {"assignedPartitions": [{"topic": topic, "partitions": [0, 1]}], "userData": None})
    assert (left["protocolType"], left["generation"], left["protocol"], left["leader"], left["members"]) == (
        "consumer", 2, None, None, [])
    assert joined["currentStateTimestamp"] <= left["currentStateTimestamp"]


@on_both_peers("group_peer")
def test_console_consumer_decodes_the_offsets_topic(group_peer):
    topic, group = unique_topic("tools-decode"), group_with_hash("tools-decode", negative=False)
    group_peer.create_topic(topic, partitions=2)
    member_id, started_ms, ended_ms = committed_group(group_peer, topic, group)
    partition = offsets_partition(group)

    commits = [r for r in read_offsets_partition(group_peer, partition, "OffsetsMessageFormatter")
               if r["key"]["data"]["group"] == group]
    assert {r["key"]["type"] for r in commits} == {1}
    seen = [(r["key"]["data"]["topic"], r["key"]["data"]["partition"], r["value"]["data"]["offset"],
             r["value"]["data"]["leaderEpoch"], r["value"]["data"]["metadata"]) for r in commits]
    assert seen == expected_offsets(topic)
    assert {r["value"]["version"] for r in commits} == {OFFSET_COMMIT_VALUE_VERSIONS[group_peer.name]}
    assert all(started_ms <= r["value"]["data"]["commitTimestamp"] <= ended_ms for r in commits)

    metadata = [r for r in read_offsets_partition(group_peer, partition, "GroupMetadataMessageFormatter")
                if r["key"]["data"]["group"] == group]
    assert {r["key"]["type"] for r in metadata} == {2}
    check_group_metadata([r["value"] for r in metadata], topic, member_id)


def dump_offsets_segment(peer, partition: int) -> list[tuple[dict, dict]]:
    """kafka-dump-log --offsets-decoder on the partition's first segment: (key, payload) per record,
    payload None for a tombstone; every batch must be valid (CRC)."""
    [segment] = [d / f"{OFFSETS_TOPIC}-{partition}" / f"{0:020d}.log" for d in peer.data_dirs
                 if (d / f"{OFFSETS_TOPIC}-{partition}").is_dir()]
    out = tool("kafka-dump-log", ["--files", str(segment), "--offsets-decoder"])
    batches = [line for line in out.splitlines() if line.startswith("baseOffset")]
    assert batches and all(line.endswith("isvalid: true") for line in batches), out[-2000:]
    records = []
    for line in out.splitlines():
        if line.startswith("| offset: "):
            key, _, payload = line.partition(" key: ")[2].partition(" payload: ")
            records.append((json.loads(key), None if payload == "<DELETE>" else json.loads(payload)))
    return records


@on_both_peers("group_peer")
def test_dump_log_decodes_the_offsets_segment(group_peer):
    """The same records through kafka-dump-log, and the tombstones DeleteGroups writes."""
    topic, group = unique_topic("tools-dump-offsets"), group_with_hash("tools-dump-offsets", negative=False)
    group_peer.create_topic(topic, partitions=2)
    member_id, _, _ = committed_group(group_peer, topic, group)
    with GroupWire(group_peer) as wire:
        assert wire.delete_groups([group]) == {group: "NONE"}
    records = [(k, v) for k, v in dump_offsets_segment(group_peer, offsets_partition(group))
               if k["data"]["group"] == group]
    # DeleteGroups wrote tombstones, one batch: each committed partition's, then the group's
    records, tombstones = records[:-3], records[-3:]
    assert [v for _, v in tombstones] == [None, None, None]
    assert sorted((k["type"], k["data"].get("partition")) for k, _ in tombstones[:2]) == [("1", 0), ("1", 1)]
    assert tombstones[2][0] == {"type": "2", "data": {"group": group}}
    # dump-log prints the key type and value version as strings
    commits = [(k["data"]["topic"], k["data"]["partition"], v["data"]["offset"], v["data"]["leaderEpoch"],
                v["data"]["metadata"]) for k, v in records if k["type"] == "1"]
    assert commits == expected_offsets(topic)
    versions = {v["version"] for k, v in records if k["type"] == "1"}
    assert versions == {str(OFFSET_COMMIT_VALUE_VERSIONS[group_peer.name])}
    metadata = [{**v, "version": int(v["version"])} for k, v in records if k["type"] == "2"]
    check_group_metadata(metadata, topic, member_id)
    assert [k["type"] for k, _ in records] == ["1", "1", "2", "1", "2"]  # in the order written


# --------------------------------------------------- kafka-consumer-groups changing a group


def consumer_groups_lines(peer, *args: str) -> list[str]:
    """kafka-consumer-groups' stdout lines (it prints its refusals there, with exit status 0)."""
    out = tool("kafka-consumer-groups", ["--bootstrap-server", peer.bootstrap, *args])
    return [line.rstrip() for line in out.splitlines() if line.strip()]


@on_both_peers("group_peer")
def test_consumer_groups_reset_delete_offsets_and_delete(group_peer):
    """--reset-offsets --execute and --delete-offsets on an Empty group (simple commits and
    OffsetDelete through Kafka's admin client), both refused while a member is active, as is
    --delete; --delete of the Empty group then succeeds."""
    topic, group = unique_topic("tools-reset"), unique_group("tools-reset")
    group_peer.create_topic(topic, partitions=2)
    produce_spread(group_peer, topic, 2, 10)
    with GroupWire(group_peer) as wire:
        wire.ready(group)
        wire.commit(group, {(topic, 0): 4, (topic, 1): 6})
        header, rows, _ = consumer_groups(group_peer, "--reset-offsets", "--group", group, "--topic", topic,
                                          "--shift-by", "3", "--execute")
        assert (header, rows) == (["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                                  [[group, topic, "0", "7"], [group, topic, "1", "9"]])
        assert wire.fetch_offsets(group, None) == ("NONE", {(topic, 0): (7, "", "NONE"), (topic, 1): (9, "", "NONE")})
        assert consumer_groups_lines(group_peer, "--delete-offsets", "--group", group, "--topic", f"{topic}:1") == [
            f"Request succeeded for deleting offsets from group {group}.",
            "TOPIC           PARTITION  STATUS", f"{topic:<15} 1          Successful"]
        assert wire.fetch_offsets(group, None) == ("NONE", {(topic, 0): (7, "", "NONE")})

        member = GroupMember("confluent", group_peer.bootstrap, group, [topic])
        try:
            wait_until(lambda: len(member.assignment) == 2, f"{group}'s member holds both partitions")
            refused = consumer_groups_lines(group_peer, "--reset-offsets", "--group", group, "--topic", topic,
                                            "--to-latest", "--execute")
            assert refused[0] == (f"Error: Assignments can only be reset if the group '{group}' is inactive, "
                                  "but the current state is Stable.")
            assert consumer_groups_lines(group_peer, "--delete", "--group", group) == [
                "Error: Deletion of some consumer groups failed:",
                f"* Group '{group}' could not be deleted due to: org.apache.kafka.common.errors."
                "GroupNotEmptyException: The group is not empty."]
        finally:
            member.stop()
        assert wire.fetch_offsets(group, None)[1][(topic, 0)][0] == 7  # the refused reset changed nothing
    assert consumer_groups_lines(group_peer, "--delete", "--group", group) == [
        f"Deletion of requested consumer groups ('{group}') was successful."]


@on_both_peers("group_peer")
def test_java_consumer_commits_what_it_read(group_peer):
    """Kafka's own client in a group (kafka-console-consumer --group: subscribe, auto-commit on,
    commit on close, LeaveGroup): it reads every record, and kafka-consumer-groups then shows
    its committed offsets at the log end, lag 0, no member left."""
    topic, group = unique_topic("tools-java-group"), unique_group("tools-java-group")
    group_peer.create_topic(topic, partitions=2)
    produce_spread(group_peer, topic, 2, 15)
    out, err = tool_run("kafka-console-consumer", [
        "--bootstrap-server", group_peer.bootstrap, "--topic", topic, "--group", group, "--from-beginning",
        "--max-messages", "30", "--timeout-ms", "30000",
        "--consumer-property", f"session.timeout.ms={6000}", "--consumer-property", "client.id=peer-java"])
    assert sorted(out.split()) == sorted(f"p{p}-{i}" for p in range(2) for i in range(15))
    assert "Processed a total of 30 messages" in err
    header, rows, other = consumer_groups(group_peer, "--describe", "--group", group)
    assert header == OFFSETS_HEADER
    assert offsets_columns(rows) == [(group, topic, "0", "15", "15", "0"), (group, topic, "1", "15", "15", "0")]
    assert other == [f"Consumer group '{group}' has no active members."]
