"""The embedded consumer protocol: what a consumer puts in JoinGroup's protocol ``metadata``
(its subscription) and what the leader puts in SyncGroup's ``assignment`` bytes, for groups of
protocol type "consumer" (Kafka's ``ConsumerProtocolSubscription.json`` and
``ConsumerProtocolAssignment.json``, read by ``ConsumerProtocol``).

The coordinator never looks inside these bytes; consumers and the group tools do. Encoding is an
int16 version, then the body at that version, never flexible:

* Subscription v0 topics + user_data, v1 owned_partitions (KIP-429, cooperative rebalancing),
  v2 generation_id (KIP-792, default -1), v3 rack_id (KIP-881, nullable).
* Assignment v0-3 all have the same body: assigned_partitions + user_data (the version only
  follows the subscription's).

Forward compatibility, as Kafka does it: a member may encode a version newer than ours. Its
fields are only ever added at the end, so decoding reads the body at our highest version and
ignores what follows. Trailing bytes are ignored at every version (Kafka's generated readers do
not check for them either).

Usage::

    data = encode_subscription(ConsumerProtocolSubscription(topics=["a"]), version=3)
    subscription = decode_subscription(data)      # subscription.generation_id == -1 below v2
"""

from __future__ import annotations

import struct as _struct
from typing import Any

from broker.wire.codec import struct_decoder, struct_encoder
from broker.wire.errors import MalformedMessage
from broker.wire.message import make_message_classes
from broker.wire.schema import BYTES, INT32, STRING, Versions, array, field, struct

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "SUBSCRIPTION_VERSIONS", "ASSIGNMENT_VERSIONS",
    "ConsumerProtocolSubscription", "ConsumerProtocolAssignment",
    "encode_subscription", "decode_subscription",
    "encode_assignment", "decode_assignment",
    "encoded_version",
]

CONSUMER_PROTOCOL_TYPE = "consumer"  # JoinGroup's protocol_type for these payloads

SUBSCRIPTION_VERSIONS = Versions(0, 3)
ASSIGNMENT_VERSIONS = Versions(0, 3)

_SUBSCRIPTION = struct(
    "ConsumerProtocolSubscription",
    field("topics", array(STRING), "0+"),
    field("user_data", BYTES, "0+", nullable="0+", default=None),
    field("owned_partitions", array(struct(
        "TopicPartition",
        field("topic", STRING, "1+"),
        field("partitions", array(INT32), "1+"),
    )), "1+"),
    field("generation_id", INT32, "2+", default=-1),
    field("rack_id", STRING, "3+", nullable="3+", default=None),
)

_ASSIGNMENT = struct(
    "ConsumerProtocolAssignment",
    field("assigned_partitions", array(struct(
        "TopicPartition",
        field("topic", STRING, "0+"),
        field("partitions", array(INT32), "0+"),
    )), "0+"),
    field("user_data", BYTES, "0+", nullable="0+", default=None),
)

ConsumerProtocolSubscription = make_message_classes(_SUBSCRIPTION)
ConsumerProtocolAssignment = make_message_classes(_ASSIGNMENT)

_VERSION = _struct.Struct(">h")


def encode_subscription(subscription: Any, version: int = SUBSCRIPTION_VERSIONS.high) -> bytes:
    """``subscription`` is a ConsumerProtocolSubscription or a dict of its fields. Fields newer
    than ``version`` are dropped, as Kafka drops them (they are all ignorable)."""
    return _encode(_SUBSCRIPTION, SUBSCRIPTION_VERSIONS, subscription, version)


def decode_subscription(data: bytes | memoryview) -> Any:
    """The subscription in ``data``; fields the encoded version lacks hold their defaults."""
    return _decode(_SUBSCRIPTION, SUBSCRIPTION_VERSIONS, data)


def encode_assignment(assignment: Any, version: int = ASSIGNMENT_VERSIONS.high) -> bytes:
    return _encode(_ASSIGNMENT, ASSIGNMENT_VERSIONS, assignment, version)


def decode_assignment(data: bytes | memoryview) -> Any:
    return _decode(_ASSIGNMENT, ASSIGNMENT_VERSIONS, data)


def encoded_version(data: bytes | memoryview) -> int:
    """The version a member wrote (may be newer than ours: the body is still readable)."""
    if len(data) < _VERSION.size:
        raise MalformedMessage("ConsumerProtocol.version", "2 bytes", f"{len(data)} bytes", 0)
    return _VERSION.unpack_from(data)[0]


def _encode(stype, versions: Versions, message: Any, version: int) -> bytes:
    if version not in versions:
        raise ValueError(f"{stype.name} v{version}: we write v{versions.low}-{versions.high}")
    out: list = [_VERSION.pack(version)]
    struct_encoder(stype, version, False)(message, out)
    return b"".join(out)


def _decode(stype, versions: Versions, data: bytes | memoryview) -> Any:
    version = encoded_version(data)
    if version < versions.low:
        raise MalformedMessage(f"{stype.name}.version", f"a version >= {versions.low}",
                               str(version), 0)
    read = struct_decoder(stype, min(version, versions.high), False)
    message, _ = read(memoryview(data), _VERSION.size)
    return message
