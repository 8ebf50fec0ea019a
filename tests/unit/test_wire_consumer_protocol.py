"""broker.wire.consumer_protocol: the subscription and assignment bytes inside JoinGroup and
SyncGroup, against kafka-python 3.0 (its JSON-generated classes for v0-3, and its hand-written
pre-JSON v0 classes), plus Kafka's forward-compatibility rule for newer versions."""

from __future__ import annotations

import random

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription
from kafka.protocol.old.consumer_protocol import (
    ConsumerProtocolMemberAssignment_v0,
    ConsumerProtocolMemberMetadata_v0,
)
from test_wire_kafka_python import from_kp, sample_dict, sample_struct, to_kp

from broker.wire import MalformedMessage
from broker.wire.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    encoded_version,
)

KINDS = {
    "subscription": (ConsumerProtocolSubscription, encode_subscription, decode_subscription, KpSubscription),
    "assignment": (ConsumerProtocolAssignment, encode_assignment, decode_assignment, KpAssignment),
}
CASES = [
    pytest.param(kind, version, variant, id=f"{kind}-v{version}-{variant}")
    for kind in KINDS for version in range(4) for variant in ("typical", "nulls", "empty")
]


def sample(kind: str, version: int, variant: str):
    cls = KINDS[kind][0]
    rng = random.Random(f"{kind}-{version}-{variant}")
    return cls.from_dict(sample_struct(cls._struct, version, False, rng, variant))


@pytest.mark.parametrize("kind, version, variant", CASES)
def test_round_trip_and_kafka_python_bytes_both_ways(kind, version, variant):
    cls, encode, decode, kp = KINDS[kind]
    ours = sample(kind, version, variant)
    data = encode(ours, version)
    assert encoded_version(data) == version
    assert decode(data) == ours
    theirs = to_kp(kp._struct.fields, kp, cls._struct.name, sample_dict(ours, cls._struct, version), version, top=True)
    assert theirs.encode(version=version, header=True) == data
    assert from_kp(kp.decode(data, header=True), cls._struct, version) == ours


def test_v0_matches_kafka_pythons_original_classes():
    subscription = ConsumerProtocolSubscription(topics=["events", "ünï"], user_data=b"\x01\x02")
    assert encode_subscription(subscription, 0) == ConsumerProtocolMemberMetadata_v0(
        0, ["events", "ünï"], b"\x01\x02").encode()
    assignment = ConsumerProtocolAssignment.from_dict({"assigned_partitions": [
        {"topic": "events", "partitions": [0, 2]}, {"topic": "x", "partitions": []}], "user_data": b""})
    old = ConsumerProtocolMemberAssignment_v0(0, [("events", [0, 2]), ("x", [])], b"").encode()
    assert encode_assignment(assignment, 0) == old
    assert decode_assignment(old) == assignment


def test_older_versions_decode_with_kafkas_defaults():
    decoded = decode_subscription(encode_subscription({"topics": ["a"], "generation_id": 7, "rack_id": "r1"}, 1))
    assert (decoded.generation_id, decoded.rack_id) == (-1, None)  # not on the wire before v2/v3
    assert decode_subscription(encode_subscription({"topics": ["a"], "generation_id": 7}, 2)).generation_id == 7


@pytest.mark.parametrize("kind", KINDS)
def test_a_newer_version_is_read_as_our_highest_ignoring_what_follows(kind):
    """Kafka's ConsumerProtocol.checkSubscriptionVersion/checkAssignmentVersion: a version above
    ours is read with our highest schema (new fields only ever follow the old ones)."""
    cls, encode, decode, _ = KINDS[kind]
    ours = sample(kind, 3, "typical")
    body = encode(ours, 3)[2:]
    from_the_future = (7).to_bytes(2, "big") + body + b"\x00\x00\x00\x05extra"
    assert encoded_version(from_the_future) == 7
    assert decode(from_the_future) == ours


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff\xff" + b"\x00" * 8, b"\x00\x00\x00\x00\x00\x05ab"],
                         ids=["empty", "half-a-version", "negative-version", "truncated-body"])
def test_bytes_that_do_not_parse_raise_malformed_message(data):
    with pytest.raises(MalformedMessage):
        decode_subscription(data)
    with pytest.raises(MalformedMessage):
        decode_assignment(data)


def test_we_write_only_versions_we_know():
    with pytest.raises(ValueError):
        encode_subscription({"topics": []}, 4)
    with pytest.raises(ValueError):
        encode_assignment({}, -1)
