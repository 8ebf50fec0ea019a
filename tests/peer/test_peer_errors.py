"""The same bad request to Apache Kafka and to pylog: the error each answers, compared.

Each scenario sends identical bytes (built with ``broker.wire``) to both brokers at the same
request version (the highest both advertise, and for the data APIs also an older one clients
still use), reduces the answer to what a client acts on (error codes, offsets; never the
free-text message) and compares the two. A deliberate difference is named where it is asserted.
"""

from __future__ import annotations

import struct
import time

import pytest
from peer_support import COMMON_BROKER_SETTINGS, unique_topic
from wire_probe import (
    batch_of,
    connect,
    highest_common_version,
    produce_partition,
    produce_request,
    serves_after,
)

from broker.records import Compression, Record, encode_batch
from broker.records.header import CRC_OFFSET, HEADER_SIZE, compute_crc
from broker.wire import (
    ApiKey,
    CreateTopicsRequest,
    ErrorCode,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
)

MESSAGE_MAX_BYTES = int(COMMON_BROKER_SETTINGS["message.max.bytes"])
# Older versions still sent by the clients pylog targets (librdkafka 2.16: Produce 7, Fetch 11,
# ListOffsets 5 (its default), Metadata 9 or older; kafka-python: Metadata 8).
OLDER_VERSIONS = {ApiKey.PRODUCE: 7, ApiKey.FETCH: 11, ApiKey.LIST_OFFSETS: 5, ApiKey.METADATA: 8}


@pytest.fixture(scope="module")
def versions(peers) -> dict[int, list[int]]:
    """Per data API, the versions both sides are compared at."""
    keys = (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.CREATE_TOPICS)
    chosen = {}
    for key in keys:
        high = highest_common_version(peers, key)
        chosen[key] = sorted({high, OLDER_VERSIONS.get(key, high)})
    return chosen


def compare(peers, observe) -> dict[str, object]:
    """``observe(peer)`` on each side; returns {"kafka": ..., "pylog": ...}."""
    return {peer.name: observe(peer) for peer in peers}


# ------------------------------------------------------------------------------ unknown topic


def produce_answer(peer, version: int, topic: str, batch: bytes, acks: int = -1):
    with connect(peer) as raw:
        partition = produce_partition(raw, version, produce_request(topic, batch, acks=acks))
    return (ErrorCode(partition.error_code).name, partition.base_offset,
            partition.log_append_time_ms, partition.log_start_offset,
            [e.batch_index for e in partition.record_errors])


def fetch_answer(peer, version: int, topic: str, offset: int, partition: int = 0, leader_epoch: int = -1):
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20,
            current_leader_epoch=leader_epoch)])],
        forgotten_topics_data=[])
    with connect(peer) as raw:
        response = raw.call(ApiKey.FETCH, version, request)
    [answer] = response.responses
    [partition] = answer.partitions
    return (ErrorCode(response.error_code).name, ErrorCode(partition.error_code).name,
            partition.high_watermark, partition.last_stable_offset, partition.log_start_offset,
            bytes(partition.records or b""))


def list_offsets_answer(peer, version: int, topic: str, timestamp: int, partition: int = 0,
                        leader_epoch: int = -1):
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
            partition_index=partition, timestamp=timestamp, current_leader_epoch=leader_epoch)])])
    with connect(peer) as raw:
        response = raw.call(ApiKey.LIST_OFFSETS, version, request)
    [answer] = response.topics
    [partition] = answer.partitions
    return ErrorCode(partition.error_code).name, partition.timestamp, partition.offset, partition.leader_epoch


def metadata_answer(peer, version: int, topic: str):
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                              allow_auto_topic_creation=False)
    with connect(peer) as raw:
        response = raw.call(ApiKey.METADATA, version, request)
    [answer] = response.topics
    return (ErrorCode(answer.error_code).name, answer.name, getattr(answer, "topic_id", None),
            answer.is_internal, len(answer.partitions))


def test_unknown_topic_gets_the_same_error_from_every_data_api(peers, versions):
    topic = unique_topic("never-created")
    for version in versions[ApiKey.PRODUCE]:
        seen = compare(peers, lambda p: produce_answer(p, version, topic, batch_of([b"lost"])))
        assert seen["kafka"] == seen["pylog"], f"Produce v{version}"
        assert seen["pylog"][0] == "UNKNOWN_TOPIC_OR_PARTITION"
    for version in versions[ApiKey.FETCH]:
        seen = compare(peers, lambda p: fetch_answer(p, version, topic, 0))
        assert seen["kafka"] == seen["pylog"], f"Fetch v{version}"
        assert seen["pylog"][1] == "UNKNOWN_TOPIC_OR_PARTITION"
    for version in versions[ApiKey.LIST_OFFSETS]:
        seen = compare(peers, lambda p: list_offsets_answer(p, version, topic, -1))
        assert seen["kafka"] == seen["pylog"], f"ListOffsets v{version}"
        assert seen["pylog"][0] == "UNKNOWN_TOPIC_OR_PARTITION"
    for version in versions[ApiKey.METADATA]:
        seen = compare(peers, lambda p: metadata_answer(p, version, topic))
        assert seen["kafka"] == seen["pylog"], f"Metadata v{version}"
        assert seen["pylog"][0] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert all(serves_after(peer) for peer in peers)


def test_unknown_partition_of_a_known_topic_gets_the_same_error(peers, versions):
    topics = {peer.name: peer.create_topic(unique_topic("one-partition")) for peer in peers}
    version = versions[ApiKey.PRODUCE][-1]

    def observe(peer):
        with connect(peer) as raw:
            request = produce_request(topics[peer.name], batch_of([b"nowhere"]), partition=7)
            partition = produce_partition(raw, version, request)
        return ErrorCode(partition.error_code).name, partition.base_offset

    seen = compare(peers, observe)
    assert seen["kafka"] == seen["pylog"] == ("UNKNOWN_TOPIC_OR_PARTITION", -1)
    for version in versions[ApiKey.FETCH]:
        seen = compare(peers, lambda p: fetch_answer(p, version, topics[p.name], 0, partition=7))
        assert seen["kafka"] == seen["pylog"], f"Fetch v{version}"
    for version in versions[ApiKey.LIST_OFFSETS]:
        seen = compare(peers, lambda p: list_offsets_answer(p, version, topics[p.name], -1, partition=7))
        assert seen["kafka"] == seen["pylog"], f"ListOffsets v{version}"


def leader_epoch(peer, topic: str) -> int:
    with connect(peer) as raw:
        response = raw.call(ApiKey.METADATA, 9, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False))
    [answer] = response.topics
    [partition] = answer.partitions
    return partition.leader_epoch


def test_a_stale_or_future_leader_epoch_is_fenced_alike(peers, versions):
    """KIP-320: a consumer's current_leader_epoch older than the leader's is FENCED_LEADER_EPOCH,
    newer is UNKNOWN_LEADER_EPOCH, -1 is not checked."""
    topics = {peer.name: peer.create_topic(unique_topic("epochs")) for peer in peers}
    epochs = {peer.name: leader_epoch(peer, topics[peer.name]) for peer in peers}
    assert epochs["kafka"] == epochs["pylog"]
    expected = {0: "NONE", 1: "UNKNOWN_LEADER_EPOCH", 5: "UNKNOWN_LEADER_EPOCH", None: "NONE"}
    if epochs["pylog"] > 0:  # epoch - 1 is -1 (not checked) on a fresh topic
        expected[-1] = "FENCED_LEADER_EPOCH"
    for delta, error in expected.items():
        def epoch_for(p):
            return -1 if delta is None else epochs[p.name] + delta
        for version in versions[ApiKey.FETCH]:
            seen = compare(peers, lambda p: fetch_answer(p, version, topics[p.name], 0, leader_epoch=epoch_for(p)))
            assert seen["kafka"] == seen["pylog"], f"Fetch v{version} epoch {delta}"
            assert seen["pylog"][1] == error
        for version in versions[ApiKey.LIST_OFFSETS]:
            seen = compare(peers, lambda p: list_offsets_answer(p, version, topics[p.name], -1,
                                                                leader_epoch=epoch_for(p)))
            assert seen["kafka"] == seen["pylog"], f"ListOffsets v{version} epoch {delta}"
            assert seen["pylog"][0] == error


# ------------------------------------------------------------------------- invalid topic names


INVALID_NAMES = ["x" * 250, "bad/name", "spaces here", "ünïcode", "tab\tname", ".", "..", ""]


def create_topics_answer(peer, version: int, names: list[str]) -> dict[str, str]:
    topics = [CreateTopicsRequest.CreatableTopic(name=n, num_partitions=1, replication_factor=1,
                                                 assignments=[], configs=[]) for n in names]
    with connect(peer) as raw:
        response = raw.call(ApiKey.CREATE_TOPICS, version, CreateTopicsRequest(topics=topics, timeout_ms=10_000))
    return {t.name: ErrorCode(t.error_code).name for t in response.topics}


def test_invalid_topic_names_are_refused_alike(peers, versions):
    valid = unique_topic("valid-beside-invalid")
    for version in versions[ApiKey.CREATE_TOPICS]:
        names = [*INVALID_NAMES, f"{valid}-v{version}"]
        seen = compare(peers, lambda p: create_topics_answer(p, version, names))
        assert seen["kafka"] == seen["pylog"], f"CreateTopics v{version}"
        assert seen["pylog"] == {**{n: "INVALID_TOPIC_EXCEPTION" for n in INVALID_NAMES},
                                 f"{valid}-v{version}": "NONE"}


def test_topic_name_colliding_by_dot_and_underscore_is_refused_alike(peers, versions):
    base = unique_topic("collide")
    version = versions[ApiKey.CREATE_TOPICS][-1]
    for peer in peers:
        peer.create_topic(f"{base}.a")
    seen = compare(peers, lambda p: create_topics_answer(p, version, [f"{base}_a"]))
    assert seen["kafka"] == seen["pylog"] == {f"{base}_a": "INVALID_TOPIC_EXCEPTION"}


def test_metadata_and_produce_for_invalid_topic_names_answer_alike(peers, versions):
    for name in ("bad/name", ".", "x" * 250):
        for version in versions[ApiKey.METADATA]:
            seen = compare(peers, lambda p: metadata_answer(p, version, name))
            assert seen["kafka"] == seen["pylog"], f"Metadata v{version} {name[:20]}"
        for version in versions[ApiKey.PRODUCE]:
            seen = compare(peers, lambda p: produce_answer(p, version, name, batch_of([b"v"])))
            assert seen["kafka"] == seen["pylog"], f"Produce v{version} {name[:20]}"


def create_answer(peer, version: int, topics: list[dict], validate_only: bool = False) -> list[tuple]:
    request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic.from_dict(
        {"assignments": [], "configs": [], **t}) for t in topics], timeout_ms=10_000, validate_only=validate_only)
    with connect(peer) as raw:
        response = raw.call(ApiKey.CREATE_TOPICS, version, request)
    return [(t.name, ErrorCode(t.error_code).name) for t in response.topics]


def test_bad_create_topics_requests_are_refused_alike(peers, versions):
    base = unique_topic("create")
    for peer in peers:
        peer.create_topic(f"{base}-exists")
    config = CreateTopicsRequest.CreatableTopicConfig
    topics = [
        {"name": f"{base}-exists", "num_partitions": 1, "replication_factor": 1},
        {"name": f"{base}-zero-partitions", "num_partitions": 0, "replication_factor": 1},
        {"name": f"{base}-negative-partitions", "num_partitions": -5, "replication_factor": 1},
        {"name": f"{base}-rf-3-of-1", "num_partitions": 1, "replication_factor": 3},
        {"name": f"{base}-rf-0", "num_partitions": 1, "replication_factor": 0},
        {"name": f"{base}-unknown-config", "num_partitions": 1, "replication_factor": 1,
         "configs": [config(name="no.such.config", value="1")]},
        {"name": f"{base}-bad-config-value", "num_partitions": 1, "replication_factor": 1,
         "configs": [config(name="retention.ms", value="soon")]},
        {"name": f"{base}-both-counts-and-assignments", "num_partitions": 2, "replication_factor": 1,
         "assignments": [CreateTopicsRequest.CreatableReplicaAssignment(
             partition_index=0, broker_ids=[1])]},
    ]
    for version in versions[ApiKey.CREATE_TOPICS]:
        for validate_only in (True, False):
            seen = compare(peers, lambda p: create_answer(p, version, topics, validate_only))
            assert seen["kafka"] == seen["pylog"], f"CreateTopics v{version} validate_only={validate_only}"
    twice = [{"name": f"{base}-twice", "num_partitions": 1, "replication_factor": 1}] * 2
    seen = compare(peers, lambda p: create_answer(p, versions[ApiKey.CREATE_TOPICS][-1], twice))
    assert seen["kafka"] == seen["pylog"], "the same topic twice in one request"


def test_produce_with_invalid_acks_is_refused_alike(peers, versions):
    topics = {peer.name: peer.create_topic(unique_topic("acks")) for peer in peers}
    for acks in (5, 2, -2):
        seen = compare(peers, lambda p: produce_answer(p, versions[ApiKey.PRODUCE][-1], topics[p.name],
                                                       batch_of([b"bad acks"]), acks=acks))
        assert seen["kafka"] == seen["pylog"], f"acks={acks}"
        assert seen["pylog"][0] == "INVALID_REQUIRED_ACKS"


# ----------------------------------------------------------------------------- bad batches


def test_batch_over_message_max_bytes_is_refused_alike(peers, versions):
    topics = {peer.name: peer.create_topic(unique_topic("too-large")) for peer in peers}
    batch = batch_of([b"x" * (MESSAGE_MAX_BYTES + 1024)])
    for version in versions[ApiKey.PRODUCE]:
        seen = compare(peers, lambda p: produce_answer(p, version, topics[p.name], batch))
        assert seen["kafka"] == seen["pylog"], f"Produce v{version}"
        assert seen["pylog"][0] == "MESSAGE_TOO_LARGE"
    ok = compare(peers, lambda p: produce_answer(p, versions[ApiKey.PRODUCE][-1], topics[p.name],
                                                 batch_of([b"x" * (MESSAGE_MAX_BYTES - 1024)])))
    assert ok["kafka"][:2] == ok["pylog"][:2] == ("NONE", 0), "just under the limit is accepted"


def test_batch_with_a_bad_crc_is_corrupt_message_alike(peers, versions):
    topics = {peer.name: peer.create_topic(unique_topic("bad-crc")) for peer in peers}
    tampered = bytearray(batch_of([b"tampered-%d" % i for i in range(5)]))
    tampered[-3] ^= 0xFF
    zeroed = bytearray(batch_of([b"crc-zeroed"]))
    zeroed[CRC_OFFSET:CRC_OFFSET + 4] = bytes(4)
    for batch in (bytes(tampered), bytes(zeroed)):
        for version in versions[ApiKey.PRODUCE]:
            seen = compare(peers, lambda p: produce_answer(p, version, topics[p.name], batch))
            assert seen["kafka"] == seen["pylog"], f"Produce v{version}"
            assert seen["pylog"][0] == "CORRUPT_MESSAGE"
    # Nothing was appended on either side: the next batch lands at offset 0.
    seen = compare(peers, lambda p: produce_answer(p, versions[ApiKey.PRODUCE][-1], topics[p.name],
                                                   batch_of([b"fine"])))
    assert seen["kafka"] == seen["pylog"]
    assert seen["pylog"][:2] == ("NONE", 0)


def recrc(batch: bytes) -> bytes:
    fixed = bytearray(batch)
    struct.pack_into(">I", fixed, CRC_OFFSET, compute_crc(fixed, 0, len(fixed)))
    return bytes(fixed)


def patched(batch: bytes, offset: int, fmt: str, value: int) -> bytes:
    """``batch`` with one header field changed and the CRC made right again."""
    changed = bytearray(batch)
    struct.pack_into(fmt, changed, offset, value)
    return recrc(bytes(changed))


def _record_length_overrun() -> bytes:
    batch = bytearray(batch_of([b"a", b"b", b"c"]))
    batch[HEADER_SIZE] = 0x7E  # the first record's length varint: 63, past the batch's end
    return recrc(bytes(batch))


THREE = batch_of([b"a", b"b", b"c"])
# A valid CRC over bytes that are not a valid batch: Kafka's LogValidator (INVALID_RECORD).
VALID_CRC_BAD_CONTENT = {
    "records count above the records": lambda: patched(THREE, 57, ">i", 5),
    "records count below the records": lambda: patched(THREE, 57, ">i", 2),
    "lastOffsetDelta above the count": lambda: patched(THREE, 23, ">i", 5),
    "lastOffsetDelta below the count": lambda: patched(THREE, 23, ">i", 1),
    "a record's length overruns the batch": _record_length_overrun,
    "a control batch from a client": lambda: patched(THREE, 21, ">h", 0x20),
    "idempotent with a negative epoch": lambda: patched(patched(THREE, 43, ">q", 5), 51, ">h", -1),
    "transactional without a transactional id": lambda: patched(THREE, 21, ">h", 0x10),
}


@pytest.mark.parametrize("case", VALID_CRC_BAD_CONTENT)
def test_well_checksummed_bad_batches_are_refused_alike(peers, versions, case):
    topics = {peer.name: peer.create_topic(unique_topic("valid-crc")) for peer in peers}
    batch = VALID_CRC_BAD_CONTENT[case]()
    for version in versions[ApiKey.PRODUCE]:
        seen = compare(peers, lambda p: produce_answer(p, version, topics[p.name], batch))
        assert seen["kafka"] == seen["pylog"], f"Produce v{version}"
        assert seen["pylog"][0] != "NONE"


# Intended difference: a compressed section that does not decompress (or an unknown codec id)
# is CORRUPT_MESSAGE from pylog, which says what is wrong; Kafka's LogValidator fails with an
# unmapped exception and answers UNKNOWN_SERVER_ERROR (-1).
UNDECOMPRESSABLE = {"kafka": ("UNKNOWN_SERVER_ERROR", -1, -1, 0, []),
                    "pylog": ("CORRUPT_MESSAGE", -1, -1, -1, [])}


def _garbled(compression: int) -> bytes:
    now = int(time.time() * 1000)
    batch = bytearray(encode_batch([Record(i, now, None, b"v" * 200) for i in range(50)],
                                   compression=compression))
    batch[HEADER_SIZE + 12:HEADER_SIZE + 40] = b"\xff" * 28
    return recrc(bytes(batch))


@pytest.mark.parametrize("case", ["lz4", "gzip", "codec id 5"])
def test_undecompressable_batches_are_refused_by_both(peers, versions, case):
    topics = {peer.name: peer.create_topic(unique_topic("garbled")) for peer in peers}
    batch = {"lz4": lambda: _garbled(Compression.LZ4), "gzip": lambda: _garbled(Compression.GZIP),
             "codec id 5": lambda: patched(THREE, 21, ">h", 5)}[case]()
    seen = compare(peers, lambda p: produce_answer(p, versions[ApiKey.PRODUCE][-1], topics[p.name], batch))
    assert seen == UNDECOMPRESSABLE


# --------------------------------------------------------------------- out-of-range fetch offset


def test_fetch_offset_out_of_range_is_answered_alike(peers, versions):
    topics = {peer.name: peer.create_topic(unique_topic("range")) for peer in peers}
    for peer in peers:
        assert produce_answer(peer, versions[ApiKey.PRODUCE][-1], topics[peer.name],
                              batch_of([b"r%d" % i for i in range(3)]))[:2] == ("NONE", 0)
    # 3 is the log end (a valid, empty fetch); 4 and far beyond are above it; -1 is below the
    # log start (0 here: neither side has deleted anything).
    for offset in (3, 4, 1 << 40, -1):
        for version in versions[ApiKey.FETCH]:
            seen = compare(peers, lambda p: fetch_answer(p, version, topics[p.name], offset))
            assert seen["kafka"] == seen["pylog"], f"Fetch v{version} at offset {offset}"
            assert seen["pylog"][1] == ("NONE" if offset == 3 else "OFFSET_OUT_OF_RANGE")


def earliest_offset(peer, topic: str) -> int:
    answer = list_offsets_answer(peer, 7, topic, -2)
    assert answer[0] == "NONE", answer
    return answer[2]


def test_fetch_below_a_moved_log_start_is_out_of_range_alike(peers, versions):
    """retention.bytes deletes the two closed segments (one ~600 KB batch each; segment.bytes at
    Kafka's 1 MiB minimum), so the log starts at 2 on both; offsets 0 and 1 are then gone."""
    configs = {"segment.bytes": "1048576", "retention.bytes": "1"}
    topics = {peer.name: peer.create_topic(unique_topic("log-start"), configs=configs) for peer in peers}
    value = b"s" * 600_000
    for peer in peers:
        for offset in range(3):
            answer = produce_answer(peer, versions[ApiKey.PRODUCE][-1], topics[peer.name], batch_of([value]))
            assert answer[:2] == ("NONE", offset), peer.name
    deadline = time.monotonic() + 30
    while any(earliest_offset(p, topics[p.name]) < 2 for p in peers):
        assert time.monotonic() < deadline, {p.name: earliest_offset(p, topics[p.name]) for p in peers}
        time.sleep(0.1)  # retention runs on each broker's own schedule (every 500 ms here)
    for offset in (0, 1, 2):
        for version in versions[ApiKey.FETCH]:
            seen = compare(peers, lambda p: fetch_answer(p, version, topics[p.name], offset)[:5])
            assert seen["kafka"] == seen["pylog"], f"Fetch v{version} at offset {offset}"
            assert seen["pylog"][1] == ("NONE" if offset == 2 else "OFFSET_OUT_OF_RANGE")


def _with_magic(magic: int) -> bytes:
    damaged = bytearray(batch_of([b"old format"]))
    damaged[16] = magic
    return bytes(damaged)


BAD_SHAPES = {
    "two batches": lambda: batch_of([b"first"]) + batch_of([b"second"]),
    "no batch": lambda: b"",
    "magic 1": lambda: _with_magic(1),
    "magic 7": lambda: _with_magic(7),
    "cut short": lambda: batch_of([b"cut short"])[:-5],
    "length 3": lambda: batch_of([b"tiny length"])[:8] + b"\x00\x00\x00\x03" + bytes(40),
}


@pytest.mark.parametrize("shape", BAD_SHAPES)
def test_records_of_the_wrong_shape_are_refused_alike(peers, versions, shape):
    topics = {peer.name: peer.create_topic(unique_topic("shape")) for peer in peers}
    records = BAD_SHAPES[shape]()
    for version in versions[ApiKey.PRODUCE]:
        seen = compare(peers, lambda p: produce_answer(p, version, topics[p.name], records))
        assert seen["kafka"] == seen["pylog"], f"Produce v{version}"
        assert seen["pylog"][0] != "NONE"
