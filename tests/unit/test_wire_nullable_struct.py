"""Nullable struct fields (KIP-893's INT8 presence marker), as DescribeTopicPartitions' cursors
use them: the exact bytes both ways, and truncation as a typed error."""

from __future__ import annotations

import pytest

from broker.wire import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    MalformedRequest,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from broker.wire.codec import size_min

KEY = 75
HEADER = b"\x00\x4b\x00\x00\x00\x00\x00\x07\x00\x01c\x00"  # key 75 v0, correlation 7, "c", no tags


def request(cursor):
    return DescribeTopicPartitionsRequest(
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name="t")],
        response_partition_limit=5, cursor=cursor)


@pytest.mark.parametrize("cursor, body", [
    (None, b"\x02\x02t\x00" + b"\x00\x00\x00\x05" + b"\xff" + b"\x00"),
    (DescribeTopicPartitionsRequest.Cursor(topic_name="t", partition_index=3),
     b"\x02\x02t\x00" + b"\x00\x00\x00\x05" + b"\x01\x02t\x00\x00\x00\x03\x00" + b"\x00"),
])
def test_request_cursor_bytes(cursor, body):
    frame = encode_request(KEY, 0, 7, "c", request(cursor))
    assert frame == HEADER + body
    _, decoded = decode_request(frame)
    assert decoded == request(cursor)


def test_response_next_cursor_round_trips():
    for cursor in (None, DescribeTopicPartitionsResponse.Cursor(topic_name="beta", partition_index=2)):
        response = DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[], next_cursor=cursor)
        encoded = encode_response(KEY, 0, 9, response)
        assert decode_response(KEY, 0, encoded) == (9, response)


def test_a_missing_marker_or_a_cut_cursor_is_malformed():
    frame = encode_request(KEY, 0, 7, "c", request(DescribeTopicPartitionsRequest.Cursor(
        topic_name="t", partition_index=3)))
    marker_at = len(HEADER) + 8
    for cut in (marker_at, marker_at + 3):
        with pytest.raises(MalformedRequest):
            decode_request(frame[:cut])


def test_a_null_struct_takes_one_byte_of_the_minimum_size():
    # topics (1) + limit (4) + cursor marker (1) + tagged section (1)
    assert size_min(DescribeTopicPartitionsRequest._struct, 0, True) == 7
