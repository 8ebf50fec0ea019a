"""Produce to a compacted topic: a record without a key fails the partition's whole produce with
INVALID_RECORD (87) and one record error per keyless record, Kafka's messages (compared with
Apache Kafka in tests/peer/test_peer_compaction_configs.py); other topics take keyless records."""

from __future__ import annotations

import pytest
from test_server_harness import NOW_MS, Harness, run

from broker.records import Record, encode_batch
from broker.wire import ErrorCode

PRODUCE = 0
MESSAGE = "Compacted topic cannot accept message without key in topic partition table-0"


@pytest.fixture
def harness(tmp_path):
    h = Harness(tmp_path)
    h.add_topic("table", {0: [1]}, config={"cleanup.policy": "compact"})
    h.add_topic("stream", {0: [1]})
    yield h
    h.close()


def produce(h: Harness, topic: str, keys, version: int = 9):
    records = encode_batch([Record(i, NOW_MS, k, b"v") for i, k in enumerate(keys)])
    request = {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
               "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": records}]}]}
    return run(h.call(PRODUCE, version, request)).responses[0].partition_responses[0]


def test_keyless_records_fail_the_whole_produce_to_a_compacted_topic(harness):
    assert produce(harness, "table", [b"k"]).error_code == ErrorCode.NONE
    answer = produce(harness, "table", [b"a", None, b"b", None])
    assert (answer.error_code, answer.base_offset, answer.log_start_offset) == (ErrorCode.INVALID_RECORD, -1, 0)
    assert [(e.batch_index, e.batch_index_error_message) for e in answer.record_errors] == [
        (1, MESSAGE), (3, MESSAGE)]
    assert answer.error_message == (
        "One or more records have been rejected due to 2 record errors in total, and only showing the "
        f"first three errors at most: [RecordError(batchIndex=1, message='{MESSAGE}'), "
        f"RecordError(batchIndex=3, message='{MESSAGE}')]")
    log = harness.replicas.get("table", 0).log
    assert log.log_end_offset == 1  # nothing of the refused batch was written
    assert produce(harness, "table", [b"", b"k"]).base_offset == 1  # an empty key is a key


def test_other_topics_take_keyless_records(harness):
    answer = produce(harness, "stream", [None, None])
    assert (answer.error_code, answer.record_errors) == (ErrorCode.NONE, [])


def test_older_produce_versions_get_the_error_without_record_errors(harness):
    answer = produce(harness, "table", [None], version=7)
    assert answer.error_code == ErrorCode.INVALID_RECORD


def test_a_policy_change_to_compact_applies_to_the_next_produce(harness):
    assert produce(harness, "stream", [None]).error_code == ErrorCode.NONE
    log = harness.replicas.get("stream", 0).log
    log.update_config(log.config.with_overrides({"cleanup.policy": "compact,delete"}))
    assert produce(harness, "stream", [None]).error_code == ErrorCode.INVALID_RECORD
