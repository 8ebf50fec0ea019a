"""The classic consumer-group APIs (issue 14) in broker.wire: JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete, ListGroups, DescribeGroups, DeleteGroups.

Every version of every one round-trips; every version kafka-python 3.0 generates from Kafka's JSON
has the same fields as our spec and the same bytes both ways (the machinery is
test_wire_kafka_python's). kafka-python's JSON is newer than the versions we cover (Kafka 4.x
dropped OffsetCommit v0-1 and OffsetFetch v0), so those three versions are checked against its
hand-written pre-JSON classes (``kafka.protocol.old.commit``) instead.
"""

from __future__ import annotations

import random

import pytest
from kafka.protocol.admin.groups import DeleteGroupsRequest as KpDeleteGroupsRequest
from kafka.protocol.admin.groups import DeleteGroupsResponse as KpDeleteGroupsResponse
from kafka.protocol.admin.groups import DescribeGroupsRequest as KpDescribeGroupsRequest
from kafka.protocol.admin.groups import DescribeGroupsResponse as KpDescribeGroupsResponse
from kafka.protocol.admin.groups import ListGroupsRequest as KpListGroupsRequest
from kafka.protocol.admin.groups import ListGroupsResponse as KpListGroupsResponse
from kafka.protocol.consumer import group as kp_group
from kafka.protocol.old import commit as kp_old_commit
from test_wire_kafka_python import (
    CLIENT_IDS,
    INT32_MIN,
    VARIANTS,
    bits_to_int,
    describe_kp,
    describe_ours,
    from_kp,
    sample_dict,
    sample_struct,
    to_kp,
)

from broker.wire import (
    SUPPORTED_API_VERSIONS,
    ApiKey,
    decode_request,
    decode_response,
    encode_request,
    encode_request_header,
    encode_response,
)
from broker.wire.apis import API_SPECS
from broker.wire.schema import ArrayOf, StructType

GROUP_APIS = {
    ApiKey.JOIN_GROUP: ("0-9", kp_group.JoinGroupRequest, kp_group.JoinGroupResponse),
    ApiKey.SYNC_GROUP: ("0-5", kp_group.SyncGroupRequest, kp_group.SyncGroupResponse),
    ApiKey.HEARTBEAT: ("0-4", kp_group.HeartbeatRequest, kp_group.HeartbeatResponse),
    ApiKey.LEAVE_GROUP: ("0-5", kp_group.LeaveGroupRequest, kp_group.LeaveGroupResponse),
    ApiKey.OFFSET_COMMIT: ("0-9", kp_group.OffsetCommitRequest, kp_group.OffsetCommitResponse),
    ApiKey.OFFSET_FETCH: ("0-9", kp_group.OffsetFetchRequest, kp_group.OffsetFetchResponse),
    ApiKey.OFFSET_DELETE: ("0-0", kp_group.OffsetDeleteRequest, kp_group.OffsetDeleteResponse),
    ApiKey.LIST_GROUPS: ("0-5", KpListGroupsRequest, KpListGroupsResponse),
    ApiKey.DESCRIBE_GROUPS: ("0-6", KpDescribeGroupsRequest, KpDescribeGroupsResponse),
    ApiKey.DELETE_GROUPS: ("0-2", KpDeleteGroupsRequest, KpDeleteGroupsResponse),
}


def test_versions_and_names_are_kafkas():
    expected = {11: "JoinGroup", 14: "SyncGroup", 12: "Heartbeat", 13: "LeaveGroup",
                8: "OffsetCommit", 9: "OffsetFetch", 47: "OffsetDelete", 16: "ListGroups",
                15: "DescribeGroups", 42: "DeleteGroups"}
    for key, (versions, _, _) in GROUP_APIS.items():
        spec = API_SPECS[key]
        assert spec.name == expected[int(key)]
        assert f"{spec.valid.low}-{spec.valid.high}" == versions


def test_group_apis_are_advertised_at_kafka_41s_classic_versions():
    """Apache Kafka 4.1's advertised ranges (tests/peer/test_peer_metadata.py compares them)."""
    assert {key: SUPPORTED_API_VERSIONS[key] for key in GROUP_APIS} == {
        ApiKey.JOIN_GROUP: (0, 9), ApiKey.SYNC_GROUP: (0, 5), ApiKey.HEARTBEAT: (0, 4),
        ApiKey.LEAVE_GROUP: (0, 5), ApiKey.OFFSET_COMMIT: (2, 9), ApiKey.OFFSET_FETCH: (1, 9),
        ApiKey.OFFSET_DELETE: (0, 0), ApiKey.LIST_GROUPS: (0, 5), ApiKey.DESCRIBE_GROUPS: (0, 6),
        ApiKey.DELETE_GROUPS: (0, 2)}


def all_versions():
    for key in GROUP_APIS:
        spec = API_SPECS[key]
        for version in range(spec.valid.low, spec.valid.high + 1):
            yield key, spec, version


ROUND_TRIP_CASES = [
    pytest.param(key, version, kind, variant, id=f"{spec.name}-v{version}-{kind}-{variant}")
    for key, spec, version in all_versions()
    for kind in ("request", "response")
    for variant in VARIANTS
]


@pytest.mark.parametrize("key, version, kind, variant", ROUND_TRIP_CASES)
def test_every_version_round_trips(key, version, kind, variant):
    spec = API_SPECS[key]
    stype = spec.request if kind == "request" else spec.response
    rng = random.Random(f"rt-{key}-{version}-{kind}-{variant}")
    ours = stype.message_class.from_dict(sample_struct(stype, version, spec.is_flexible(version), rng, variant))
    if kind == "request":
        frame = encode_request(key, version, 9, "c", ours)
        header, decoded = decode_request(frame)
        assert (header.api_key, header.api_version, header.correlation_id) == (key, version, 9)
        assert encode_request(key, version, 9, "c", decoded) == frame
    else:
        frame = encode_response(key, version, 9, ours)
        correlation_id, decoded = decode_response(key, version, frame)
        assert correlation_id == 9
        assert encode_response(key, version, 9, decoded) == frame
    assert decoded == ours


# --------------------------------------------------------------- kafka-python, JSON-generated


def kp_versions():
    for key, spec, version in all_versions():
        _, request, _ = GROUP_APIS[key]
        low, high = request._valid_versions
        if low <= version <= high:
            yield key, spec, version


KP_CASES = [
    pytest.param(key, version, kind, variant, id=f"{spec.name}-v{version}-{kind}-{variant}")
    for key, spec, version in kp_versions()
    for kind in ("request", "response")
    for variant in VARIANTS
]
KP_SCHEMA_CASES = sorted({(k, v, kind) for k, v, kind, _ in (c.values for c in KP_CASES)})


def kp_class(key, kind):
    _, request, response = GROUP_APIS[key]
    return request if kind == "request" else response


def test_kafka_python_covers_all_but_the_oldest_offset_versions():
    """Guard: if kafka-python's coverage shrinks, the JSON oracle silently tests less."""
    missing = {(int(k), v) for k, _, v in all_versions()} - {(int(k), v) for k, _, v in kp_versions()}
    assert missing == {(8, 0), (8, 1), (9, 0)}


def describe_kp_patched(klass, stype, version, flexible):
    """kafka-python patches DescribedGroup.authorized_operations into a set of bit positions
    with default None (= INT32_MIN, "not computed"); undo that for the comparison."""
    rows = describe_kp(klass._struct, stype.name, version, flexible)
    return _restore_authorized_operations(rows)


def _restore_authorized_operations(rows):
    out = []
    for row in rows:
        if len(row) == 2:
            out.append((row[0], _restore_authorized_operations(row[1])))
        elif row[0] == "authorized_operations" and row[4] is None:
            out.append((*row[:4], INT32_MIN))
        else:
            out.append(row)
    return out


@pytest.mark.parametrize("key, version, kind", KP_SCHEMA_CASES)
def test_spec_fields_match_kafka_python(key, version, kind):
    spec = API_SPECS[key]
    stype = spec.request if kind == "request" else spec.response
    flexible = spec.is_flexible(version)
    klass = kp_class(key, kind)
    assert klass.flexible_version_q(version) == flexible
    assert describe_ours(stype, version, flexible) == describe_kp_patched(klass, stype, version, flexible)


@pytest.mark.parametrize("key, version, kind, variant", KP_CASES)
def test_bytes_match_kafka_python_both_ways(key, version, kind, variant):
    spec = API_SPECS[key]
    stype = spec.request if kind == "request" else spec.response
    rng = random.Random(f"kp-{key}-{version}-{kind}-{variant}")
    ours = stype.message_class.from_dict(sample_struct(stype, version, spec.is_flexible(version), rng, variant))
    klass = kp_class(key, kind)
    theirs = to_kp(klass._struct.fields, klass, stype.name, sample_dict(ours, stype, version), version, top=True)
    correlation_id = rng.randint(-(2**31), 2**31 - 1)
    if kind == "request":
        client_id = rng.choice(CLIENT_IDS)
        theirs.with_header(correlation_id=correlation_id, client_id=client_id)
        our_bytes = encode_request(key, version, correlation_id, client_id, ours)
        their_bytes = theirs.encode(header=True)
        assert our_bytes == their_bytes
        _, decoded = decode_request(their_bytes)
    else:
        theirs.with_header(correlation_id=correlation_id)
        our_bytes = encode_response(key, version, correlation_id, ours)
        their_bytes = theirs.encode(header=True)
        assert our_bytes == their_bytes
        _, decoded = decode_response(key, version, their_bytes)
    their_decoded = klass.decode(our_bytes, version=version, header=True)
    assert decoded == ours
    assert from_kp(their_decoded, stype, version) == ours


def test_describe_groups_authorized_operations_bits_survive_kafka_python():
    """The one field kafka-python reshapes: an int32 bitfield in ours, a set of bits in theirs."""
    spec = API_SPECS[ApiKey.DESCRIBE_GROUPS]
    ours = spec.response_class.from_dict({"groups": [{"group_id": "g", "authorized_operations": 0b1010}]})
    theirs = KpDescribeGroupsResponse.decode(encode_response(15, 5, 1, ours), version=5, header=True)
    assert theirs.groups[0].authorized_operations == {1, 3}
    assert bits_to_int(theirs.groups[0].authorized_operations) == 0b1010


# ------------------------------------------- OffsetCommit v0-1, OffsetFetch v0: the old classes

OLD_CASES = [
    pytest.param(ApiKey.OFFSET_COMMIT, 0, id="OffsetCommit-v0"),
    pytest.param(ApiKey.OFFSET_COMMIT, 1, id="OffsetCommit-v1"),
    pytest.param(ApiKey.OFFSET_FETCH, 0, id="OffsetFetch-v0"),
]


def old_class(key, version, kind):
    name = f"{API_SPECS[key].name}{kind.capitalize()}_v{version}"
    return getattr(kp_old_commit, name)


def as_tuple(message, stype: StructType, version: int) -> tuple:
    """Our message as the positional tuples kafka-python's old Struct classes take (wire order)."""
    values = []
    for f in stype.fields:
        if not f.present_in(version):
            continue
        value = getattr(message, f.name)
        element = f.type.element if isinstance(f.type, ArrayOf) else None
        if value is not None and isinstance(element, StructType):
            value = [as_tuple(item, element, version) for item in value]
        values.append(value)
    return tuple(values)


@pytest.mark.parametrize("key, version", OLD_CASES)
@pytest.mark.parametrize("kind", ["request", "response"])
@pytest.mark.parametrize("variant", ["typical", "nulls", "empty"])
def test_oldest_offset_versions_match_kafka_pythons_old_classes(key, version, kind, variant):
    spec = API_SPECS[key]
    stype = spec.request if kind == "request" else spec.response
    rng = random.Random(f"old-{key}-{version}-{kind}-{variant}")
    ours = stype.message_class.from_dict(sample_struct(stype, version, False, rng, variant))
    klass = old_class(key, version, kind)
    assert [name for name in klass.SCHEMA.names] == [
        f.name for f in stype.fields if f.present_in(version)]
    their_body = klass(*as_tuple(ours, stype, version)).encode()
    if kind == "request":
        header = encode_request_header(key, version, 3, "c")
        our_frame = encode_request(key, version, 3, "c", ours)
        assert our_frame == header + their_body
        assert decode_request(header + their_body)[1] == ours
    else:
        our_frame = encode_response(key, version, 3, ours)
        assert our_frame == (3).to_bytes(4, "big", signed=True) + their_body
        assert decode_response(key, version, our_frame)[1] == ours
    decoded = klass.decode(their_body)
    assert klass(*as_tuple(ours, stype, version)).encode() == decoded.encode()
