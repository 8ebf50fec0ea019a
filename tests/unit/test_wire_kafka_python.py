"""Conformance of broker.wire with an independent implementation: kafka-python 3.0's protocol
classes, which are generated from Apache Kafka's own message JSON.

For every API and every version in our spec, for requests and responses:
  * our spec's field list (names, types, nullability, tags, defaults) equals kafka-python's;
  * a message built from the spec encodes to exactly kafka-python's bytes (header included),
    each side decodes the other's bytes back to the same message.
Samples come in variants: "typical" (random values), "nulls" (null wherever nullable),
"empty" (empty arrays) and "tagged" (every tagged field set away from its default).
"""

from __future__ import annotations

import random
import uuid

import pytest
from kafka.protocol.admin.cluster import DescribeClusterRequest as KpDescribeClusterRequest
from kafka.protocol.admin.cluster import DescribeClusterResponse as KpDescribeClusterResponse
from kafka.protocol.admin.configs import DescribeConfigsRequest as KpDescribeConfigsRequest
from kafka.protocol.admin.configs import DescribeConfigsResponse as KpDescribeConfigsResponse
from kafka.protocol.admin.topics import CreateTopicsRequest as KpCreateTopicsRequest
from kafka.protocol.admin.topics import CreateTopicsResponse as KpCreateTopicsResponse
from kafka.protocol.admin.topics import DeleteTopicsRequest as KpDeleteTopicsRequest
from kafka.protocol.admin.topics import DeleteTopicsResponse as KpDeleteTopicsResponse
from kafka.protocol.admin.topics import DescribeTopicPartitionsRequest as KpDescribeTopicPartitionsRequest
from kafka.protocol.admin.topics import DescribeTopicPartitionsResponse as KpDescribeTopicPartitionsResponse
from kafka.protocol.admin.topics import ListPartitionReassignmentsRequest as KpListPartitionReassignmentsRequest
from kafka.protocol.admin.topics import ListPartitionReassignmentsResponse as KpListPartitionReassignmentsResponse
from kafka.protocol.consumer.fetch import FetchRequest as KpFetchRequest
from kafka.protocol.consumer.fetch import FetchResponse as KpFetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest as KpListOffsetsRequest
from kafka.protocol.consumer.offsets import ListOffsetsResponse as KpListOffsetsResponse
from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest as KpOffsetForLeaderEpochRequest
from kafka.protocol.consumer.offsets import OffsetForLeaderEpochResponse as KpOffsetForLeaderEpochResponse
from kafka.protocol.metadata import ApiVersionsRequest as KpApiVersionsRequest
from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse
from kafka.protocol.metadata import FindCoordinatorRequest as KpFindCoordinatorRequest
from kafka.protocol.metadata import FindCoordinatorResponse as KpFindCoordinatorResponse
from kafka.protocol.metadata import MetadataRequest as KpMetadataRequest
from kafka.protocol.metadata import MetadataResponse as KpMetadataResponse
from kafka.protocol.producer.produce import ProduceRequest as KpProduceRequest
from kafka.protocol.producer.produce import ProduceResponse as KpProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest as KpInitProducerIdRequest
from kafka.protocol.producer.transaction import InitProducerIdResponse as KpInitProducerIdResponse

from broker.wire import decode_request, decode_response, encode_request, encode_response
from broker.wire.apis import API_SPECS, ApiKey
from broker.wire.primitives import ZERO_UUID
from broker.wire.schema import (
    BOOL, BYTES, FLOAT64, INT8, INT16, INT32, INT64, RECORDS, STRING, UINT16, UUID,
    ArrayOf, StructType,
)

KAFKA_PYTHON = {
    ApiKey.PRODUCE: (KpProduceRequest, KpProduceResponse),
    ApiKey.FETCH: (KpFetchRequest, KpFetchResponse),
    ApiKey.LIST_OFFSETS: (KpListOffsetsRequest, KpListOffsetsResponse),
    ApiKey.METADATA: (KpMetadataRequest, KpMetadataResponse),
    ApiKey.FIND_COORDINATOR: (KpFindCoordinatorRequest, KpFindCoordinatorResponse),
    ApiKey.API_VERSIONS: (KpApiVersionsRequest, KpApiVersionsResponse),
    ApiKey.CREATE_TOPICS: (KpCreateTopicsRequest, KpCreateTopicsResponse),
    ApiKey.DELETE_TOPICS: (KpDeleteTopicsRequest, KpDeleteTopicsResponse),
    ApiKey.INIT_PRODUCER_ID: (KpInitProducerIdRequest, KpInitProducerIdResponse),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (KpOffsetForLeaderEpochRequest, KpOffsetForLeaderEpochResponse),
    ApiKey.DESCRIBE_CONFIGS: (KpDescribeConfigsRequest, KpDescribeConfigsResponse),
    ApiKey.DESCRIBE_CLUSTER: (KpDescribeClusterRequest, KpDescribeClusterResponse),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (KpDescribeTopicPartitionsRequest, KpDescribeTopicPartitionsResponse),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (KpListPartitionReassignmentsRequest, KpListPartitionReassignmentsResponse),
}

# kafka-python patches MetadataResponse: both *_authorized_operations ints become a set of bit
# positions named "authorized_operations" (None = INT32_MIN, "not computed").
RENAMED = {
    ("MetadataResponse", "cluster_authorized_operations"): "authorized_operations",
    ("MetadataResponseTopic", "topic_authorized_operations"): "authorized_operations",
    ("DescribeClusterResponse", "cluster_authorized_operations"): "authorized_operations",
}
INT32_MIN = -(2**31)

TEXTS = ["", "a", "topic-1", "ünïcødé-✓", "x" * 40]
RANGES = {INT8: 8, INT16: 16, INT32: 32, INT64: 64}


def kp_name(struct_name: str, name: str) -> str:
    return RENAMED.get((struct_name, name), name)


def ints_to_bits(value: int):
    if value == INT32_MIN:
        return None
    return {bit for bit in range(32) if (value & 0xFFFFFFFF) >> bit & 1}


def bits_to_int(bits) -> int:
    if bits is None:
        return INT32_MIN
    raw = sum(1 << bit for bit in bits)
    return raw - (1 << 32) if raw >= 1 << 31 else raw


# ------------------------------------------------------------------------- sample messages


def sample_struct(stype: StructType, version: int, flexible: bool, rng: random.Random, variant: str) -> dict:
    values = {}
    for f in stype.fields:
        if not f.present_in(version):
            continue
        tagged = flexible and f.tagged_in(version)
        if tagged and variant != "tagged":
            continue  # left at its default, so not on the wire
        if f.nullable_in(version) and variant == "nulls":
            values[f.name] = None
            continue
        values[f.name] = sample_value(f.type, f.new_default(), version, flexible, rng, variant, tagged)
    if stype.name == "ApiVersionsResponse":
        values["error_code"] = 0  # both codecs read an error response as v0 (KIP-511)
    return values


def sample_value(ftype, default, version, flexible, rng, variant, tagged):
    if isinstance(ftype, StructType):
        return sample_struct(ftype, version, flexible, rng, variant)
    if isinstance(ftype, ArrayOf):
        count = 0 if variant == "empty" and not tagged else rng.randint(1 if tagged else 0, 3)
        return [sample_value(ftype.element, None, version, flexible, rng, variant, False) for _ in range(count)]
    for _ in range(100):  # a tagged value must differ from its default to be sent
        value = sample_primitive(ftype, rng)
        if not tagged or value != default:
            return value
    raise AssertionError(f"no non-default sample for {ftype!r}")


def sample_primitive(ftype, rng: random.Random):
    if ftype in RANGES:
        bits = RANGES[ftype]
        return rng.choice([0, -1, 1, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1, rng.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)])
    if ftype is UINT16:
        return rng.randint(0, 0xFFFF)
    if ftype is BOOL:
        return rng.random() < 0.5
    if ftype is FLOAT64:
        return rng.uniform(-1e9, 1e9)
    if ftype is STRING:
        return rng.choice(TEXTS)
    if ftype in (BYTES, RECORDS):
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 30)))
    if ftype is UUID:
        return uuid.UUID(int=rng.getrandbits(128) | 1)
    raise AssertionError(ftype)


# ------------------------------------------------------------- conversion to/from kafka-python


def to_kp(kp_fields: dict, data_class, struct_name: str, values: dict, version: int, top: bool):
    kwargs = {}
    for name, value in values.items():
        name = kp_name(struct_name, name)
        kp_field = kp_fields[name]
        if value is not None and kp_field.is_struct_array():
            value = [to_kp(kp_field.fields, kp_field.data_class, kp_field.type_str, v, version, False) for v in value]
        elif value is not None and kp_field.is_struct():
            value = to_kp(kp_field.fields, kp_field.data_class, kp_field.type_str, value, version, False)
        elif name == "authorized_operations":
            value = ints_to_bits(value)
        kwargs[name] = value
    return data_class(version=version, **kwargs) if top else data_class(**kwargs)


def from_kp(obj, stype: StructType, version: int):
    values = {}
    for f in stype.fields:
        if not f.present_in(version):
            continue
        name = kp_name(stype.name, f.name)
        value = getattr(obj, name)
        element = f.type.element if isinstance(f.type, ArrayOf) else None
        if value is not None and isinstance(element, StructType):
            value = [from_kp(item, element, version) for item in value]
        elif value is not None and isinstance(f.type, StructType):
            value = from_kp(value, f.type, version)
        elif f.type is UUID and value is None:
            value = ZERO_UUID  # kafka-python reads the zero UUID as None
        elif name == "authorized_operations":
            value = bits_to_int(value)
        elif isinstance(value, memoryview):
            value = bytes(value)
        values[f.name] = value
    return stype.message_class(**values)


# ----------------------------------------------------------------------------- the tables

VARIANTS = ("typical", "nulls", "empty", "tagged")
CLIENT_IDS = [None, "", "rdkafka-✓"]


def api_versions():
    """Every API kafka-python implements (the inter-broker APIs of ZooKeeper mode are not among
    them; test_controller_wire.py checks those byte by byte against Kafka's JSON layouts)."""
    for key, spec in sorted(API_SPECS.items()):
        if key not in KAFKA_PYTHON:
            continue
        for version in range(spec.valid.low, spec.valid.high + 1):
            yield key, spec, version


SCHEMA_CASES = [
    pytest.param(key, version, kind, id=f"{spec.name}-v{version}-{kind}")
    for key, spec, version in api_versions()
    for kind in ("request", "response")
]

BYTE_CASES = [
    pytest.param(key, version, kind, variant, id=f"{spec.name}-v{version}-{kind}-{variant}")
    for key, spec, version in api_versions()
    for kind in ("request", "response")
    for variant in VARIANTS
]


def kp_class(key: int, kind: str):
    request, response = KAFKA_PYTHON[key]
    return request if kind == "request" else response


def describe_ours(stype: StructType, version: int, flexible: bool) -> list:
    rows = []
    for f in stype.fields:
        if not f.present_in(version):
            continue
        default = f.new_default()
        if isinstance(f.type, StructType):
            default = None if default is None else "struct"
        rows.append((
            f.name,
            repr(f.type),
            f.nullable_in(version),
            f.tag if flexible and f.tagged_in(version) else None,
            default,
        ))
        element = f.type.element if isinstance(f.type, ArrayOf) else f.type
        if isinstance(element, StructType):
            rows.append((f.name, describe_ours(element, version, flexible)))
    return rows


def describe_kp(kp_struct, struct_name: str, version: int, flexible: bool) -> list:
    reverse = {kp: ours for (sname, ours), kp in RENAMED.items() if sname == struct_name}
    rows = []
    for kp_field in kp_struct._fields:
        if not kp_field.for_version_q(version):
            continue
        name = reverse.get(kp_field.name, kp_field.name)
        type_str = "int32" if kp_field._type_str == "bitfield" else kp_field._type_str
        default = kp_field.default
        if type_str == "uuid" and default is None:
            default = ZERO_UUID
        if name in reverse.values() and default is None:
            default = INT32_MIN
        if kp_field.is_struct():
            default = None if default is None else "struct"
        rows.append((
            name,
            type_str,
            kp_field.nullable_for_version_q(version),
            kp_field.tag if flexible and kp_field.tagged_field_q(version) else None,
            default,
        ))
        if kp_field.is_struct_array():
            rows.append((name, describe_kp(kp_field.array_of, kp_field.type_str, version, flexible)))
        elif kp_field.is_struct():
            rows.append((name, describe_kp(kp_field, kp_field.type_str, version, flexible)))
    return rows


@pytest.mark.parametrize("key, version, kind", SCHEMA_CASES)
def test_spec_fields_match_kafka_python(key, version, kind):
    spec = API_SPECS[key]
    stype = spec.request if kind == "request" else spec.response
    flexible = spec.is_flexible(version)
    klass = kp_class(key, kind)
    assert klass.flexible_version_q(version) == flexible
    assert describe_ours(stype, version, flexible) == describe_kp(klass._struct, stype.name, version, flexible)


@pytest.mark.parametrize("key, version, kind, variant", BYTE_CASES)
def test_bytes_match_kafka_python_both_ways(key, version, kind, variant):
    spec = API_SPECS[key]
    stype = spec.request if kind == "request" else spec.response
    flexible = spec.is_flexible(version)
    rng = random.Random(f"{key}-{version}-{kind}-{variant}")
    ours = stype.message_class.from_dict(sample_struct(stype, version, flexible, rng, variant))
    klass = kp_class(key, kind)
    theirs = to_kp(klass._struct.fields, klass, stype.name, sample_dict(ours, stype, version), version, top=True)
    correlation_id = rng.randint(-(2**31), 2**31 - 1)

    if kind == "request":
        client_id = rng.choice(CLIENT_IDS)
        theirs.with_header(correlation_id=correlation_id, client_id=client_id)
        our_bytes = encode_request(key, version, correlation_id, client_id, ours)
        their_bytes = theirs.encode(header=True)
        assert our_bytes == their_bytes
        header, decoded = decode_request(their_bytes)
        assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
            key, version, correlation_id, client_id)
        their_decoded = klass.decode(our_bytes, version=version, header=True)
        assert their_decoded.header.correlation_id == correlation_id
        assert their_decoded.header.client_id == client_id
    else:
        theirs.with_header(correlation_id=correlation_id)
        our_bytes = encode_response(key, version, correlation_id, ours)
        their_bytes = theirs.encode(header=True)
        assert our_bytes == their_bytes
        decoded_correlation_id, decoded = decode_response(key, version, their_bytes)
        assert decoded_correlation_id == correlation_id
        their_decoded = klass.decode(our_bytes, version=version, header=True)
        assert their_decoded.header.correlation_id == correlation_id

    assert decoded == ours
    assert from_kp(their_decoded, stype, version) == ours


def sample_dict(message, stype: StructType, version: int) -> dict:
    """The fields of ``message`` that exist at ``version`` (kafka-python rejects others)."""
    values = {}
    for f in stype.fields:
        if not f.present_in(version):
            continue
        value = getattr(message, f.name)
        element = f.type.element if isinstance(f.type, ArrayOf) else None
        if value is not None and isinstance(element, StructType):
            value = [sample_dict(item, element, version) for item in value]
        elif value is not None and isinstance(f.type, StructType):
            value = sample_dict(value, f.type, version)
        values[f.name] = value
    return values


def test_variants_really_differ():
    """Guard: the 'nulls' and 'tagged' variants must put nulls and tags on the wire, or the
    table above would silently test less than it claims."""
    api_versions_spec = API_SPECS[ApiKey.API_VERSIONS].response
    tagged = sample_struct(api_versions_spec, 3, True, random.Random(1), "tagged")
    typical = sample_struct(api_versions_spec, 3, True, random.Random(1), "typical")
    assert tagged["finalized_features_epoch"] != -1 and tagged["supported_features"]
    assert "finalized_features_epoch" not in typical
    assert len(encode_response(18, 3, 0, tagged)) > len(encode_response(18, 3, 0, typical))

    metadata_spec = API_SPECS[ApiKey.METADATA].response
    nulls = sample_struct(metadata_spec, 12, True, random.Random(1), "nulls")
    assert nulls["cluster_id"] is None
    empty = sample_struct(metadata_spec, 12, True, random.Random(1), "empty")
    assert empty["brokers"] == [] and empty["topics"] == []
