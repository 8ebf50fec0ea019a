"""Request handlers over real logs in a temporary directory and a hand-made cluster snapshot."""

from __future__ import annotations

import asyncio
import struct

import pytest
from test_server_harness import NOW_MS, Harness, batch, run

from broker.records import Record, encode_batch, iter_batches
from broker.records.header import CRC_OFFSET, HEADER_SIZE, compute_crc
from broker.server.network import CloseConnection
from broker.wire import ErrorCode

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
INIT_PID, CREATE, DELETE, DESCRIBE, OFFSET_FOR_EPOCH, FIND_COORD = 22, 19, 20, 32, 23, 10


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path, broker_id=1, brokers=(1, 2))
    h.add_topic("events", {0: [1], 1: [1], 2: [2]})  # partition 2 is led by broker 2
    yield h
    h.close()


def produce_request(topic: str, partition: int, records: bytes | None, acks: int = -1,
                    transactional_id: str | None = None) -> dict:
    return {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 1000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def produce(h: Harness, topic: str, partition: int, records, version: int = 9, **kw):
    response = run(h.call(PRODUCE, version, produce_request(topic, partition, records, **kw)))
    return response.responses[0].partition_responses[0]


def fetch_request(partitions, max_wait_ms: int = 0, min_bytes: int = 1, max_bytes: int = 1 << 20,
                  isolation: int = 0, partition_max_bytes: int = 1 << 20, epoch: int = -1) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": isolation, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": t, "partitions": [{"partition": p, "fetch_offset": o, "current_leader_epoch": epoch,
                                                     "partition_max_bytes": partition_max_bytes}]}
                       for t, p, o in partitions]}


def fetch(h: Harness, partitions, version: int = 12, **kw):
    response = run(h.call(FETCH, version, fetch_request(partitions, **kw)))
    return [p for t in response.responses for p in t.partitions]


# -------------------------------------------------------------------------------- produce


def test_produce_assigns_offsets_and_reports_log_start(harness):
    first = produce(harness, "events", 0, batch(3))
    second = produce(harness, "events", 0, batch(2), acks=1)
    assert (first.error_code, first.base_offset, first.log_start_offset) == (0, 0, 0)
    assert (second.error_code, second.base_offset) == (0, 3)
    assert harness.replicas.get("events", 0).high_watermark == 5


@pytest.mark.parametrize("topic, partition, error", [
    ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ("events", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ("events", 2, ErrorCode.NOT_LEADER_OR_FOLLOWER),
])
def test_produce_to_a_partition_this_broker_does_not_lead(harness, topic, partition, error):
    assert produce(harness, topic, partition, batch()).error_code == error


def test_produce_request_level_errors(harness):
    assert produce(harness, "events", 0, batch(), acks=2).error_code == ErrorCode.INVALID_REQUIRED_ACKS
    # A transactional id with plain batches: appended, as Kafka does.
    assert (produce(harness, "events", 0, batch(), transactional_id="tx").error_code,) == (ErrorCode.NONE,)
    transactional = encode_batch([Record(0, NOW_MS, None, b"v")], producer_id=7, producer_epoch=0,
                                 base_sequence=0, transactional=True)
    refused = produce(harness, "events", 0, transactional, transactional_id="tx")
    assert refused.error_code == ErrorCode.INVALID_TXN_STATE and refused.error_message
    # Transactional records without a transactional id, and acks=2 too: Kafka checks them first.
    unauthorized = produce(harness, "events", 0, transactional, acks=2)
    assert (unauthorized.error_code, unauthorized.base_offset) == (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)


def test_acks_zero_gets_no_response_and_a_failure_closes(harness):
    assert run(harness.call(PRODUCE, 9, produce_request("events", 0, batch(), acks=0))) is None
    assert harness.replicas.get("events", 0).log.log_end_offset == 3
    with pytest.raises(CloseConnection):
        run(harness.call(PRODUCE, 9, produce_request("nope", 0, batch(), acks=0)))


@pytest.mark.parametrize("damage, error", [
    ("crc", ErrorCode.CORRUPT_MESSAGE),
    ("two-batches", ErrorCode.INVALID_RECORD),
    ("empty", ErrorCode.INVALID_RECORD),
    ("too-large", ErrorCode.MESSAGE_TOO_LARGE),
    ("magic", ErrorCode.INVALID_RECORD),
    ("count-with-valid-crc", ErrorCode.INVALID_RECORD),
    ("record-overrun-with-valid-crc", ErrorCode.INVALID_RECORD),
    ("control", ErrorCode.INVALID_RECORD),
])
def test_bad_batches_are_refused_with_v8_details(harness, damage, error):
    """As Kafka answers them (tests/peer/test_peer_errors.py): a message, no record errors, and
    the log start offset only for what Kafka's LogValidator refuses (INVALID_RECORD from a batch
    whose size and CRC passed)."""
    records = bytearray(batch(3))
    if damage == "crc":
        records[-1] ^= 0xFF
    elif damage == "two-batches":
        records += batch(1)
    elif damage == "empty":
        records = bytearray()
    elif damage == "too-large":
        records = bytearray(batch(1, value_size=1_100_000))
    elif damage == "magic":
        records[16] = 1
    else:
        field, value = {"count-with-valid-crc": ((">i", 57), 5), "control": ((">h", 21), 0x20),
                        "record-overrun-with-valid-crc": ((">B", HEADER_SIZE), 0x7E)}[damage]
        struct.pack_into(field[0], records, field[1], value)
        struct.pack_into(">I", records, CRC_OFFSET, compute_crc(records, 0, len(records)))
    result = produce(harness, "events", 0, bytes(records), version=8)
    assert result.error_code == error and result.error_message
    validator = damage.endswith("valid-crc") or damage == "control"
    assert (result.record_errors, result.log_start_offset) == ([], 0 if validator else -1)
    assert harness.replicas.get("events", 0).log.log_end_offset == 0


def test_idempotent_duplicates_get_their_original_offsets(harness):
    produce(harness, "events", 0, batch(2))  # a non-idempotent batch first: offsets 0-1
    first = produce(harness, "events", 0, batch(3, producer_id=7, epoch=0, sequence=0))
    retry = produce(harness, "events", 0, batch(3, producer_id=7, epoch=0, sequence=0))
    gap = produce(harness, "events", 0, batch(1, producer_id=7, epoch=0, sequence=9))
    following = produce(harness, "events", 0, batch(1, producer_id=7, epoch=0, sequence=3))
    assert (first.error_code, first.base_offset) == (0, 2)
    assert (retry.error_code, retry.base_offset) == (0, 2)
    # Kafka's answer to a duplicate: the batch's max timestamp as its log append time.
    assert (first.log_append_time_ms, retry.log_append_time_ms) == (-1, NOW_MS + 2)
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (following.error_code, following.base_offset) == (0, 5)
    assert harness.replicas.get("events", 0).log.log_end_offset == 6


def test_older_epoch_is_fenced(harness):
    produce(harness, "events", 0, batch(1, producer_id=7, epoch=3, sequence=0))
    stale = produce(harness, "events", 0, batch(1, producer_id=7, epoch=2, sequence=1))
    assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH


# ---------------------------------------------------------------------------------- fetch


def test_fetch_returns_whole_batches_with_offsets(harness):
    produce(harness, "events", 0, batch(3))
    produce(harness, "events", 0, batch(2))
    [part] = fetch(harness, [("events", 0, 0)])
    assert (part.error_code, part.high_watermark, part.last_stable_offset, part.log_start_offset) == (0, 5, 5, 0)
    assert [h.base_offset for _, h in iter_batches(part.records)] == [0, 3]
    assert part.aborted_transactions is None
    [committed] = fetch(harness, [("events", 0, 3)], isolation=1)
    assert committed.aborted_transactions == [] and committed.last_stable_offset == 5
    assert [h.base_offset for _, h in iter_batches(committed.records)] == [3]


@pytest.mark.parametrize("offset", [4, 6, -1])
def test_fetch_out_of_range(harness, offset):
    """A consumer gets the error with every offset unknown (-1), as from Kafka
    (tests/peer/test_peer_errors.py); offset 3, the log end, is a valid empty fetch."""
    produce(harness, "events", 0, batch(3))
    [part] = fetch(harness, [("events", 0, offset)])
    assert (part.error_code, part.high_watermark, part.last_stable_offset, part.log_start_offset) == (
        ErrorCode.OFFSET_OUT_OF_RANGE, -1, -1, -1)
    [at_end] = fetch(harness, [("events", 0, 3)])
    assert (at_end.error_code, at_end.high_watermark) == (ErrorCode.NONE, 3)


def test_fetch_errors_per_partition(harness):
    parts = fetch(harness, [("events", 2, 0), ("nope", 0, 0), ("events", 0, 0)])
    assert [p.error_code for p in parts] == [ErrorCode.NOT_LEADER_OR_FOLLOWER,
                                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0]


@pytest.mark.parametrize("epoch, error", [(0, 0), (-1, 0), (1, ErrorCode.UNKNOWN_LEADER_EPOCH)])
def test_fetch_leader_epoch_fencing(harness, epoch, error):
    assert fetch(harness, [("events", 0, 0)], epoch=epoch)[0].error_code == error


def test_fenced_leader_epoch(tmp_path):
    h = Harness(tmp_path)
    h.add_topic("t", {0: [1]}, leader_epoch=4)
    try:
        assert fetch(h, [("t", 0, 0)], epoch=3)[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    finally:
        h.close()


def test_fetch_byte_limits_and_min_one_batch(harness):
    produce(harness, "events", 0, batch(3, value_size=500))
    produce(harness, "events", 1, batch(3, value_size=500))
    one_batch = len(batch(3, value_size=500))
    first, second = fetch(harness, [("events", 0, 0), ("events", 1, 0)], max_bytes=10, partition_max_bytes=10)
    assert len(first.records) == one_batch  # the first partition with data: one whole batch
    assert second.records == b""  # nothing else fits
    both = fetch(harness, [("events", 0, 0), ("events", 1, 0)], max_bytes=2 * one_batch)
    assert [len(p.records) for p in both] == [one_batch, one_batch]


def test_fetch_sessions_are_declined(harness):
    request = fetch_request([("events", 0, 0)])
    request["session_id"] = 99
    response = run(harness.call(FETCH, 12, request))
    assert (response.error_code, response.session_id) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0)


def test_long_poll_is_woken_by_a_produce(harness):
    async def scenario():
        loop = asyncio.get_running_loop()
        started = loop.time()
        poll = asyncio.create_task(harness.call(FETCH, 12, fetch_request([("events", 0, 0)], max_wait_ms=5000)))
        await asyncio.sleep(0.1)
        assert not poll.done()
        await harness.call(PRODUCE, 9, produce_request("events", 0, batch(2)))
        response = await poll
        return response.responses[0].partitions[0], loop.time() - started

    part, elapsed = run(scenario())
    assert part.high_watermark == 2 and part.records and elapsed < 2


def test_long_poll_times_out_empty(harness):
    async def scenario():
        loop = asyncio.get_running_loop()
        started = loop.time()
        response = await harness.call(FETCH, 12, fetch_request([("events", 0, 0)], max_wait_ms=300))
        return response.responses[0].partitions[0], loop.time() - started

    part, elapsed = run(scenario())
    assert part.error_code == 0 and part.records == b"" and 0.29 <= elapsed < 2
    assert harness.replicas.purgatory.waiting == 0


def test_long_poll_answers_at_once_when_stopping(harness):
    harness.context.stopping = True
    async def scenario():
        loop = asyncio.get_running_loop()
        started = loop.time()
        await harness.call(FETCH, 12, fetch_request([("events", 0, 0)], max_wait_ms=5000))
        return loop.time() - started

    assert run(scenario()) < 1


# ---------------------------------------------------------------------------- list offsets


def list_offsets(h: Harness, timestamp: int, version: int = 7, isolation: int = 0, epoch: int = -1):
    request = {"replica_id": -1, "isolation_level": isolation, "topics": [
        {"name": "events", "partitions": [{"partition_index": 0, "timestamp": timestamp,
                                           "current_leader_epoch": epoch}]}]}
    return run(h.call(LIST_OFFSETS, version, request)).topics[0].partitions[0]


def test_list_offsets(harness):
    produce(harness, "events", 0, batch(3, start_ts=1_000))
    produce(harness, "events", 0, batch(3, start_ts=5_000))
    assert (list_offsets(harness, -2).offset, list_offsets(harness, -1).offset) == (0, 6)
    assert list_offsets(harness, -1, isolation=1).offset == 6
    found = list_offsets(harness, 5_001)
    assert (found.offset, found.timestamp, found.leader_epoch) == (4, 5_001, 0)
    assert (list_offsets(harness, -3).offset, list_offsets(harness, -3).timestamp) == (5, 5_002)
    missing = list_offsets(harness, 9_999)
    assert (missing.error_code, missing.offset, missing.timestamp) == (0, -1, -1)
    assert list_offsets(harness, -1, epoch=5).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_list_offsets_v0_answers_old_style_offset_lists(harness):
    """v0 (Burrow 1.2.1 sends it): latest is the high watermark, earliest the log start; one
    segment here, so a timestamp before its last write finds nothing and one after it finds
    the log end and the segment base, newest first."""
    produce(harness, "events", 0, batch(3))
    produce(harness, "events", 0, batch(2))

    def v0(timestamp: int, max_num: int = 1):
        request = {"replica_id": -1, "topics": [{"name": "events", "partitions": [
            {"partition_index": 0, "timestamp": timestamp, "max_num_offsets": max_num}]}]}
        answer = run(harness.call(LIST_OFFSETS, 0, request)).topics[0].partitions[0]
        return answer.error_code, list(answer.old_style_offsets)

    assert v0(-1) == (0, [5]) and v0(-2) == (0, [0])
    assert v0(-1, max_num=10) == (0, [5, 0])
    assert v0(0, max_num=10) == (0, [])
    assert v0(2**62, max_num=10) == (0, [5, 0])
    assert v0(-5)[0] == ErrorCode.INVALID_REQUEST
    request = {"replica_id": -1, "topics": [{"name": "events", "partitions": [
        {"partition_index": 2, "timestamp": -1, "max_num_offsets": 1}]}]}
    led_elsewhere = run(harness.call(LIST_OFFSETS, 0, request)).topics[0].partitions[0]
    assert led_elsewhere.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_old_style_offsets_stop_at_the_high_watermark():
    from broker.server.handlers.list_offsets import old_style_offsets
    points = [(0, 1_000), (10, 2_000), (20, 3_000), (25, 9_000)]  # the last: log end, "now"
    assert old_style_offsets(points, -1, 2, high_watermark=25) == [25, 20]
    assert old_style_offsets(points, -1, 3, high_watermark=22) == [22, 20, 10]
    assert old_style_offsets(points, -1, 3, high_watermark=20) == [20, 10, 0]
    assert old_style_offsets(points, 2_500, 5, high_watermark=25) == [10, 0]
    assert old_style_offsets(points, 999, 5, high_watermark=25) == []
    assert old_style_offsets(points, -2, 5, high_watermark=25) == [0]


def test_list_offsets_answers_a_partition_asked_twice_once_with_invalid_request(harness):
    produce(harness, "events", 0, batch(3))
    request = {"replica_id": -1, "topics": [{"name": "events", "partitions": [
        {"partition_index": 0, "timestamp": -2}, {"partition_index": 1, "timestamp": -1},
        {"partition_index": 0, "timestamp": -1}]}]}
    (topic,) = run(harness.call(LIST_OFFSETS, 7, request)).topics
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [
        (0, ErrorCode.INVALID_REQUEST), (1, ErrorCode.NONE)]


def test_offset_for_leader_epoch(harness):
    produce(harness, "events", 0, batch(4))
    request = {"replica_id": -1, "topics": [{"topic": "events", "partitions": [
        {"partition": 0, "current_leader_epoch": 0, "leader_epoch": 0},
        {"partition": 2, "current_leader_epoch": -1, "leader_epoch": 0}]}]}
    parts = run(harness.call(OFFSET_FOR_EPOCH, 4, request)).topics[0].partitions
    assert [(p.error_code, p.leader_epoch, p.end_offset) for p in parts] == [
        (0, 0, 4), (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)]


# ------------------------------------------------------------------------------- metadata


def test_metadata_all_topics(harness):
    for version, topics in ((1, None), (12, None), (0, [])):
        response = run(harness.call(METADATA, version, {"topics": topics}))
        assert [t.name for t in response.topics] == ["events"]
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, "host1", 9091), (2, "host2", 9092)]
    response = run(harness.call(METADATA, 12, {"topics": None}))
    assert (response.cluster_id, response.controller_id) == ("test-cluster", 1)
    partitions = response.topics[0].partitions
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes) for p in partitions] == [
        (0, 1, 0, [1], [1]), (1, 1, 0, [1], [1]), (2, 2, 0, [2], [2])]


def test_metadata_partition_without_leader(tmp_path):
    h = Harness(tmp_path, brokers=(1,))
    h.add_topic("t", {0: [1], 1: [3], 2: [1]}, without_state=(2,))
    try:
        response = run(h.call(METADATA, 12, {"topics": [{"name": "t"}]}))
        parts = response.topics[0].partitions
        assert [(p.error_code, p.leader_id, p.offline_replicas) for p in parts] == [
            (0, 1, []), (ErrorCode.LEADER_NOT_AVAILABLE, -1, [3]), (ErrorCode.LEADER_NOT_AVAILABLE, -1, [])]
    finally:
        h.close()


def test_metadata_unknown_and_invalid_topics(harness):
    response = run(harness.call(METADATA, 12, {"topics": [{"name": "nope"}, {"name": "bad name"}],
                                               "allow_auto_topic_creation": True}))
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION)]
    assert harness.controller.created == []  # auto.create.topics.enable is false by default


def test_metadata_by_unknown_topic_id(harness):
    import uuid
    response = run(harness.call(METADATA, 12, {"topics": [{"name": None, "topic_id": uuid.uuid4()}]}))
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID


@pytest.mark.parametrize("version, asked, topic_operations, cluster_operations", [
    (8, False, -(2**31), -(2**31)), (8, True, 3576, 8096), (10, True, 3576, 8096), (12, True, 3576, -(2**31))])
def test_metadata_authorized_operations_are_all_when_asked(harness, version, asked, topic_operations,
                                                           cluster_operations):
    """No authorizer: every operation of the resource type, for known and unknown topic names
    alike (what Apache Kafka answers without one), "not computed" for an unknown topic id;
    cluster operations exist in v8-10 only."""
    response = run(harness.call(METADATA, version, {
        "topics": [{"name": "events"}, {"name": "nope"}], "allow_auto_topic_creation": False,
        "include_topic_authorized_operations": asked, "include_cluster_authorized_operations": asked}))
    assert [t.topic_authorized_operations for t in response.topics] == [topic_operations] * 2
    assert response.cluster_authorized_operations == cluster_operations
    if version == 12:
        import uuid
        response = run(harness.call(METADATA, 12, {"topics": [{"name": None, "topic_id": uuid.uuid4()}],
                                                   "include_topic_authorized_operations": True}))
        assert response.topics[0].topic_authorized_operations == -(2**31)


@pytest.mark.parametrize("version, allow, created", [(12, True, True), (12, False, False), (3, False, True)])
def test_metadata_auto_creation(tmp_path, version, allow, created):
    h = Harness(tmp_path, auto_create_topics_enable="true", num_partitions="3")
    try:
        response = run(h.call(METADATA, version, {"topics": [{"name": "auto"}], "allow_auto_topic_creation": allow}))
        expected = ErrorCode.LEADER_NOT_AVAILABLE if created else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert response.topics[0].error_code == expected
        assert ("auto" in h.snapshot.topics) == created
        if created:
            assert len(h.snapshot.topics["auto"].partitions) == 3
    finally:
        h.close()


# --------------------------------------------------------------------------- admin APIs


def create(h: Harness, topics: list[dict], version: int = 7, validate_only: bool = False):
    request = {"topics": [{"num_partitions": -1, "replication_factor": -1, **t} for t in topics],
               "timeout_ms": 5000, "validate_only": validate_only}
    return run(h.call(CREATE, version, request)).topics


def test_create_topics(harness):
    [result] = create(harness, [{"name": "new", "num_partitions": 4, "configs": [{"name": "retention.ms", "value": "1000"}]}])
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 4, 1)
    assert {c.name: c.value for c in result.configs}["retention.ms"] == "1000"
    topic = harness.snapshot.topics["new"]
    assert len(topic.partitions) == 4 and topic.config == {"retention.ms": "1000"}
    local = [p for p, v in topic.partitions.items() if 1 in v.replicas]
    assert all(harness.replicas.get("new", p).log.config.retention_ms == 1000 for p in local)


@pytest.mark.parametrize("topic, error", [
    ({"name": "events"}, ErrorCode.TOPIC_ALREADY_EXISTS),
    ({"name": "bad/name"}, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ({"name": "x", "num_partitions": 0}, ErrorCode.INVALID_PARTITIONS),
    ({"name": "x", "replication_factor": 0}, ErrorCode.INVALID_REPLICATION_FACTOR),
    ({"name": "x", "replication_factor": 3}, ErrorCode.INVALID_REPLICATION_FACTOR),
    ({"name": "x", "configs": [{"name": "retention.ms", "value": "soon"}]}, ErrorCode.INVALID_CONFIG),
    ({"name": "x", "configs": [{"name": "no.such.config", "value": "1"}]}, ErrorCode.INVALID_CONFIG),
    ({"name": "x", "configs": [{"name": "cleanup.policy", "value": "forever"}]}, ErrorCode.INVALID_CONFIG),
    ({"name": "x", "assignments": [{"partition_index": 0, "broker_ids": [9]}]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ({"name": "x", "num_partitions": 1, "assignments": [{"partition_index": 0, "broker_ids": [1]}]},
     ErrorCode.INVALID_REQUEST),
])
def test_create_topics_refusals(harness, topic, error):
    [result] = create(harness, [topic])
    assert result.error_code == error and result.error_message
    assert harness.controller.created == []


def test_create_topics_duplicates_validate_only_and_manual_assignment(harness):
    dup = create(harness, [{"name": "d"}, {"name": "ok"}, {"name": "d"}, {"name": "d"}])
    assert [(r.name, r.error_code) for r in dup] == [("d", ErrorCode.INVALID_REQUEST), ("ok", 0)]  # as Kafka
    [checked] = create(harness, [{"name": "v", "num_partitions": 2}], validate_only=True)
    assert checked.error_code == 0 and "v" not in harness.snapshot.topics
    [manual] = create(harness, [{"name": "m", "assignments": [{"partition_index": 0, "broker_ids": [2]},
                                                              {"partition_index": 1, "broker_ids": [1]}]}])
    assert manual.error_code == 0
    assert {p: v.replicas for p, v in harness.snapshot.topics["m"].partitions.items()} == {0: (2,), 1: (1,)}


def test_admin_requests_need_the_controller(harness):
    harness.controller.active = False
    [result] = create(harness, [{"name": "x"}])
    deleted = run(harness.call(DELETE, 6, {"topics": [{"name": "events"}], "timeout_ms": 1000}))
    assert result.error_code == deleted.responses[0].error_code == ErrorCode.NOT_CONTROLLER


def test_delete_topics(harness):
    produce(harness, "events", 0, batch())
    log_dir = harness.replicas.get("events", 0).log.directory
    response = run(harness.call(DELETE, 3, {"topic_names": ["events", "nope"], "timeout_ms": 1000}))
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("events", 0), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert "events" not in harness.snapshot.topics and harness.replicas.get("events", 0) is None
    assert not log_dir.exists()


def test_delete_topics_answers_a_name_given_twice_once_and_deletes_nothing(harness):
    response = run(harness.call(DELETE, 6, {"topics": [{"name": "events"}, {"name": "nope"}, {"name": "events"}],
                                            "timeout_ms": 1000}))
    assert [(r.name, r.error_code) for r in response.responses] == [
        ("events", ErrorCode.INVALID_REQUEST), ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]  # as Kafka
    assert "events" in harness.snapshot.topics


def test_describe_configs(tmp_path):
    h = Harness(tmp_path, log_retention_hours="2")
    h.add_topic("t", {0: [1]}, config={"segment.bytes": "1048576"})
    try:
        request = {"resources": [
            {"resource_type": 2, "resource_name": "t", "configuration_keys": None},
            {"resource_type": 2, "resource_name": "nope", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "1", "configuration_keys": [
                "num.partitions", "broker.id", "offsets.topic.num.partitions", "log.retention.ms"]},
            {"resource_type": 4, "resource_name": "2", "configuration_keys": None},
        ], "include_synonyms": True}
        results = run(h.call(DESCRIBE, 4, request)).results
        topic = {c.name: c for c in results[0].configs}
        assert (topic["segment.bytes"].value, topic["segment.bytes"].config_source) == ("1048576", 1)
        assert [s.name for s in topic["segment.bytes"].synonyms] == ["segment.bytes", "log.segment.bytes"]
        assert topic["retention.ms"].value == "7200000"
        # Kafka lists no broker synonym here: log.retention.ms is unset (null default) and the
        # log.retention.hours entries before it are dropped (ConfigHelper.configSynonyms).
        assert (topic["retention.ms"].synonyms, topic["retention.ms"].config_source) == ([], 5)
        assert results[1].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # a key read only at start is listed, read-only (as Kafka); a dynamic log default is not read-only
        assert {c.name: (c.value, c.config_source, c.read_only) for c in results[2].configs} == {
            "broker.id": ("1", 4, True), "num.partitions": ("1", 5, True),
            "offsets.topic.num.partitions": ("50", 5, True), "log.retention.ms": (None, 5, False)}
        assert not any(c.read_only for c in results[0].configs)  # topic configs never are
        assert results[3].error_code == ErrorCode.INVALID_REQUEST
        v0 = run(h.call(DESCRIBE, 0, {"resources": request["resources"][:1]})).results[0]
        assert {c.name: c.is_default for c in v0.configs}["segment.bytes"] is False
    finally:
        h.close()


# --------------------------------------------------------------------- producer ids etc.


def init_pid(h: Harness, version: int = 4, **fields):
    return run(h.call(INIT_PID, version, {"transactional_id": None, "transaction_timeout_ms": 60000, **fields}))


def test_init_producer_id(harness):
    first, second = init_pid(harness, version=0), init_pid(harness)
    assert [(r.error_code, r.producer_id, r.producer_epoch) for r in (first, second)] == [(0, 0, 0), (0, 1, 0)]
    # With the current id and epoch (KIP-360): a new id at epoch 0, as Kafka answers.
    bumped = init_pid(harness, producer_id=1, producer_epoch=0)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (0, 2, 0)
    exhausted = init_pid(harness, producer_id=2, producer_epoch=32767)
    assert (exhausted.producer_id, exhausted.producer_epoch) == (3, 0)
    assert init_pid(harness, producer_id=1, producer_epoch=-1).error_code == ErrorCode.INVALID_REQUEST
    assert init_pid(harness, transactional_id="tx").error_code == ErrorCode.COORDINATOR_NOT_AVAILABLE


@pytest.mark.parametrize("version", range(5))
def test_find_coordinator_is_not_available(harness, version):
    request = {"key": "g", "key_type": 0, "coordinator_keys": ["g", "h"]}
    response = run(harness.call(FIND_COORD, version, request))
    if version >= 4:
        assert [c.error_code for c in response.coordinators] == [ErrorCode.COORDINATOR_NOT_AVAILABLE] * 2
    else:
        assert (response.error_code, response.node_id) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1)


def test_timestamps_are_kept(harness):
    produce(harness, "events", 0, batch(3, start_ts=NOW_MS - 5))
    [part] = fetch(harness, [("events", 0, 0)])
    [(_, header)] = list(iter_batches(part.records))
    assert (header.base_timestamp, header.max_timestamp) == (NOW_MS - 5, NOW_MS - 3)
