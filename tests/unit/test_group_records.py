"""``broker.coordinator.group.records``: Kafka's ``__consumer_offsets`` layout.

The hand-built byte strings follow Kafka's JSON specs (OffsetCommitKey/Value, GroupMetadataKey/
Value) field by field, so a layout slip (a missing leader epoch, a non-nullable string, a
flexible encoding at v3) fails here before Kafka's own decoder sees it.
"""

import struct

import pytest
from hypothesis import given, settings, strategies as st

from broker.coordinator.group import records as r


def s16(text):  # classic STRING: int16 length + UTF-8
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def b32(data):  # classic BYTES: int32 length
    return struct.pack(">i", len(data)) + data


def test_offset_commit_key_layout():
    key = r.encode_offset_commit_key("g1", "topic-a", 7)
    assert key == struct.pack(">h", 1) + s16("g1") + s16("topic-a") + struct.pack(">i", 7)
    assert r.decode_key(key) == r.OffsetCommitKey("g1", "topic-a", 7)
    # key version 0 is the same struct
    assert r.decode_key(struct.pack(">h", 0) + key[2:]) == r.OffsetCommitKey("g1", "topic-a", 7)


def test_group_metadata_key_layout():
    key = r.encode_group_metadata_key("grp")
    assert key == struct.pack(">h", 2) + s16("grp")
    assert r.decode_key(key) == r.GroupMetadataKey("grp")


def test_unknown_key_version_is_reported_not_raised():
    assert r.decode_key(struct.pack(">h", 3) + b"xyz") == r.UnknownKey(3)


def test_offset_commit_value_v3_layout():
    value = r.OffsetCommitValue(offset=42, leader_epoch=5, metadata="m", commit_timestamp=1000)
    data = r.encode_offset_commit_value(value)
    assert data == (struct.pack(">hqi", 3, 42, 5) + s16("m") + struct.pack(">q", 1000))
    back = r.decode_offset_commit_value(data)
    assert (back.offset, back.leader_epoch, back.metadata, back.commit_timestamp) == (42, 5, "m", 1000)


def test_offset_commit_value_v1_has_expire_timestamp_and_no_epoch():
    data = struct.pack(">hq", 1, 9) + s16("") + struct.pack(">qq", 5, 77)
    back = r.decode_offset_commit_value(data)
    assert (back.offset, back.leader_epoch, back.commit_timestamp, back.expire_timestamp) == (9, -1, 5, 77)


def test_offset_commit_value_v4_is_flexible():
    data = struct.pack(">hqi", 4, 9, 2) + bytes([2]) + b"x" + struct.pack(">q", 5) + b"\x00"
    back = r.decode_offset_commit_value(data)
    assert (back.offset, back.leader_epoch, back.metadata, back.commit_timestamp) == (9, 2, "x", 5)


def test_group_metadata_value_v3_layout():
    member = r.MemberMetadata(member_id="c-1", group_instance_id=None, client_id="c",
                              client_host="/10.0.0.1", rebalance_timeout=300000,
                              session_timeout=45000, subscription=b"\x00\x01", assignment=b"")
    value = r.GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range",
                                 leader="c-1", current_state_timestamp=1234, members=[member])
    data = r.encode_group_metadata_value(value)
    expected = (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 3) + s16("range")
                + s16("c-1") + struct.pack(">q", 1234) + struct.pack(">i", 1)
                + s16("c-1") + struct.pack(">h", -1) + s16("c") + s16("/10.0.0.1")
                + struct.pack(">ii", 300000, 45000) + b32(b"\x00\x01") + b32(b""))
    assert data == expected
    back = r.decode_group_metadata_value(data)
    assert back.members[0].member_id == "c-1" and bytes(back.members[0].subscription) == b"\x00\x01"


def test_group_metadata_value_v0_empty_group_null_protocol():
    data = struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 1) + struct.pack(">hh", -1, -1) \
        + struct.pack(">i", 0)
    back = r.decode_group_metadata_value(data)
    assert (back.protocol, back.leader, back.current_state_timestamp, back.members) == (None, None, -1, [])


@pytest.mark.parametrize("data", [b"", b"\x00", struct.pack(">h", 9) + b"\x00" * 30,
                                  struct.pack(">hq", 3, 1)])
def test_bad_values_raise_record_format_error(data):
    with pytest.raises(r.RecordFormatError):
        r.decode_offset_commit_value(data)


def test_trailing_bytes_refused():
    data = r.encode_offset_commit_value(r.OffsetCommitValue(offset=1)) + b"\x00"
    with pytest.raises(r.RecordFormatError):
        r.decode_offset_commit_value(data)


names = st.text(max_size=20)
nullable_names = st.none() | names
int32 = st.integers(-2**31, 2**31 - 1)
int64 = st.integers(-2**63, 2**63 - 1)


@settings(max_examples=200, deadline=None)
@given(group=names, topic=names, partition=int32)
def test_keys_round_trip(group, topic, partition):
    assert r.decode_key(r.encode_offset_commit_key(group, topic, partition)) == \
        r.OffsetCommitKey(group, topic, partition)
    assert r.decode_key(r.encode_group_metadata_key(group)) == r.GroupMetadataKey(group)


@settings(max_examples=200, deadline=None)
@given(version=st.integers(0, 4), offset=int64, epoch=int32, metadata=names, ts=int64, expire=int64)
def test_offset_commit_value_round_trips_every_version(version, offset, epoch, metadata, ts, expire):
    value = r.OffsetCommitValue(offset=offset, leader_epoch=epoch if version >= 3 else -1,
                                metadata=metadata, commit_timestamp=ts,
                                expire_timestamp=expire if version == 1 else -1)
    assert r.decode_offset_commit_value(r.encode_offset_commit_value(value, version)) == value


members = st.builds(
    lambda mid, iid, cid, host, rt, st_, sub, asg: (mid, iid, cid, host, rt, st_, sub, asg),
    names, nullable_names, names, names, int32, int32, st.binary(max_size=30), st.binary(max_size=30))


@settings(max_examples=200, deadline=None)
@given(version=st.integers(0, 4), ptype=names, gen=int32, protocol=nullable_names,
       leader=nullable_names, ts=int64, ms=st.lists(members, max_size=4))
def test_group_metadata_value_round_trips_every_version(version, ptype, gen, protocol, leader, ts, ms):
    value = r.GroupMetadataValue(
        protocol_type=ptype, generation=gen, protocol=protocol, leader=leader,
        current_state_timestamp=ts if version >= 2 else -1,
        members=[r.MemberMetadata(member_id=m[0], group_instance_id=m[1] if version >= 3 else None,
                                  client_id=m[2], client_host=m[3],
                                  rebalance_timeout=m[4] if version >= 1 else -1,
                                  session_timeout=m[5], subscription=m[6], assignment=m[7])
                 for m in ms])
    back = r.decode_group_metadata_value(r.encode_group_metadata_value(value, version))
    assert back.to_dict() == value.to_dict()


@settings(max_examples=300, deadline=None)
@given(key_version=st.sampled_from([0, 1]), version=st.integers(0, 4), group=names, topic=names,
       partition=int32, offset=int64, epoch=int32, metadata=names, ts=int64, expire=int64,
       tombstone=st.booleans())
def test_fast_offset_decoder_agrees_with_the_checked_one(key_version, version, group, topic, partition,
                                                         offset, epoch, metadata, ts, expire, tombstone):
    key = struct.pack(">h", key_version) + r.encode_offset_commit_key(group, topic, partition)[2:]
    value = None if tombstone else r.encode_offset_commit_value(r.OffsetCommitValue(
        offset=offset, leader_epoch=epoch if version >= 3 else -1, metadata=metadata,
        commit_timestamp=ts, expire_timestamp=expire if version == 1 else -1), version)
    fast = r.decode_offset_commit_fast(key, value)
    if version == 4 and not tombstone:
        assert fast is None  # flexible: the checked path reads it
        return
    checked_key = r.decode_key(key)
    assert fast[:3] == (checked_key.group, checked_key.topic, checked_key.partition)
    if tombstone:
        assert fast[3:] == (None,) * 5
    else:
        v = r.decode_offset_commit_value(value)
        assert fast[3:] == (v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)


@pytest.mark.parametrize("key,value", [
    (b"\x00\x01\x00", None), (struct.pack(">h", 2) + s16("g"), None),
    (r.encode_offset_commit_key("g", "t", 0) + b"\x00", None),
    (r.encode_offset_commit_key("g", "t", 0), struct.pack(">hq", 3, 1)),
    (r.encode_offset_commit_key("g", "t", 0), struct.pack(">hqih", 3, 1, 1, 50) + b"x"),
])
def test_fast_offset_decoder_declines_irregular_bytes(key, value):
    assert r.decode_offset_commit_fast(key, value) is None


@settings(max_examples=300, deadline=None)
@given(group=names, topic=names, partition=int32, offset=int64, epoch=int32, metadata=names, ts=int64)
def test_fast_encoders_write_the_schema_encoders_bytes(group, topic, partition, offset, epoch, metadata, ts):
    schema_key = r._encode(r._OFFSET_COMMIT_KEY, 1, r._OffsetCommitKeyData(group=group, topic=topic,
                                                                            partition=partition))
    assert r.encode_offset_commit_key(group, topic, partition) == schema_key
    assert r.encode_offset_commit_value_v3(offset, epoch, metadata, ts) == r.encode_offset_commit_value(
        r.OffsetCommitValue(offset=offset, leader_epoch=epoch, metadata=metadata, commit_timestamp=ts))
