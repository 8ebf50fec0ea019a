"""broker.wire.primitives: round trips (hypothesis), known vectors, agreement with kafka-python's
varint codecs, and the bounds checks that turn bad lengths into MalformedMessage."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.schemas.fields.codecs.types import UnsignedVarInt32, VarInt32, VarInt64

from broker.wire import primitives as prim
from broker.wire.errors import EncodeError, MalformedMessage
from broker.wire.schema import Versions

U32 = st.integers(0, 2**32 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=200)


def view(data: bytes) -> memoryview:
    return memoryview(data)


@given(U32)
def test_uvarint_round_trip_and_matches_kafka_python(value):
    encoded = prim.encode_uvarint(value)
    assert encoded == UnsignedVarInt32.encode(value)
    assert prim.read_uvarint(view(encoded + b"\xff"), 0, "f") == (value, len(encoded))


@given(I32)
def test_varint_zigzag_round_trip_and_matches_kafka_python(value):
    encoded = prim.encode_varint(value)
    assert encoded == VarInt32.encode(value)
    assert prim.read_varint(view(encoded), 0, "f") == (value, len(encoded))


@given(I64)
def test_varlong_zigzag_round_trip_and_matches_kafka_python(value):
    encoded = prim.encode_varlong(value)
    assert encoded == VarInt64.encode(value)
    assert prim.read_varlong(view(encoded), 0, "f") == (value, len(encoded))


@given(st.integers(0, 2**64 - 1))
def test_uvarlong_round_trip(value):
    encoded = prim.encode_uvarlong(value)
    assert len(encoded) <= 10
    assert prim.read_uvarlong(view(encoded), 0, "f") == (value, len(encoded))


@pytest.mark.parametrize(
    "value, encoded",
    [
        pytest.param(0, b"\x00", id="zero"),
        pytest.param(1, b"\x01", id="one"),
        pytest.param(127, b"\x7f", id="max-one-byte"),
        pytest.param(128, b"\x80\x01", id="min-two-bytes"),
        pytest.param(300, b"\xac\x02", id="300"),
        pytest.param(2**32 - 1, b"\xff\xff\xff\xff\x0f", id="max-u32"),
    ],
)
def test_uvarint_vectors(value, encoded):
    assert prim.encode_uvarint(value) == encoded
    assert prim.read_uvarint(view(encoded), 0, "f") == (value, len(encoded))


@pytest.mark.parametrize(
    "value, encoded",
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (64, b"\x80\x01")],
    ids=["0", "-1", "1", "-64", "64"],
)
def test_varint_zigzag_vectors(value, encoded):
    assert prim.encode_varint(value) == encoded


@pytest.mark.parametrize(
    "reader, data, expected",
    [
        pytest.param(prim.read_uvarint, b"\xff\xff\xff\xff\xff\x01", "at most 5 bytes", id="uvarint-6-bytes"),
        pytest.param(prim.read_uvarint, b"\xff\xff\xff\xff\x1f", "varint <= 4294967295", id="uvarint-over-32-bits"),
        pytest.param(prim.read_varint, b"\x80\x80\x80\x80\x80\x00", "at most 5 bytes", id="varint-6-bytes"),
        pytest.param(prim.read_varlong, b"\xff" * 10 + b"\x01", "at most 10 bytes", id="varlong-11-bytes"),
        pytest.param(prim.read_uvarint, b"\x80\x80", "1 bytes", id="uvarint-truncated"),
        pytest.param(prim.read_uvarint, b"", "1 bytes", id="uvarint-empty"),
    ],
)
def test_bad_varints_are_malformed(reader, data, expected):
    with pytest.raises(MalformedMessage) as info:
        reader(view(data), 0, "T.f")
    assert expected in info.value.expected
    assert info.value.field == "T.f"


@pytest.mark.parametrize(
    "encoder, value",
    [
        (prim.encode_uvarint, -1),
        (prim.encode_uvarint, 2**32),
        (prim.encode_varint, 2**31),
        (prim.encode_varlong, -(2**63) - 1),
        (prim.encode_uvarlong, 2**64),
    ],
    ids=["uvarint-neg", "uvarint-33-bits", "varint-over", "varlong-under", "uvarlong-over"],
)
def test_varint_values_out_of_range_are_encode_errors(encoder, value):
    with pytest.raises(EncodeError):
        encoder(value)


@given(st.one_of(st.none(), TEXT), st.booleans())
def test_strings_round_trip_classic_and_compact(value, compact):
    encoded = prim.encode_string(value, "f", True, compact)
    reader = prim.read_compact_string if compact else prim.read_string
    assert reader(view(encoded), 0, "f", True) == (value, len(encoded))


@given(st.one_of(st.none(), st.binary(max_size=300)), st.booleans())
def test_bytes_round_trip_zero_copy(value, compact):
    out: list = []
    prim.write_bytes(out, value, "f", True, compact)
    encoded = b"".join(out)
    if value:
        assert out[-1] is value  # the payload is appended, not copied
    reader = prim.read_compact_bytes if compact else prim.read_bytes
    frame = view(encoded)
    decoded, pos = reader(frame, 0, "f", True)
    assert pos == len(encoded)
    assert (decoded is None) == (value is None)
    if value is not None:
        assert isinstance(decoded, memoryview) and decoded.obj is encoded and decoded == value


@given(st.one_of(st.none(), st.lists(st.integers(0, 5), max_size=300)), st.booleans())
def test_array_counts_round_trip(items, compact):
    encoded = prim.encode_array_count(items, "f", True, compact)
    padding = b"\x00" * (len(items) if items else 0)
    count, pos = prim.read_array_count(view(encoded + padding), 0, "f", True, compact, 1)
    assert count == (None if items is None else len(items))
    assert pos == len(encoded)


def test_string_vectors():
    assert prim.encode_string("ab", "f", False, False) == b"\x00\x02ab"
    assert prim.encode_string("ab", "f", False, True) == b"\x03ab"
    assert prim.encode_string(None, "f", True, False) == b"\xff\xff"
    assert prim.encode_string(None, "f", True, True) == b"\x00"
    assert prim.encode_string("é", "f", False, False) == b"\x00\x02\xc3\xa9"


@pytest.mark.parametrize(
    "reader, data, nullable, found",
    [
        pytest.param(prim.read_string, b"\xff\xfe", True, "-2", id="string-len-minus-2"),
        pytest.param(prim.read_string, b"\xff\xff", False, "-1", id="string-null-not-nullable"),
        pytest.param(prim.read_string, b"\x00\x05ab", False, "2 bytes left", id="string-overruns"),
        pytest.param(prim.read_string, b"\x00", False, "1 bytes left", id="string-len-truncated"),
        pytest.param(prim.read_string, b"\x00\x02\xff\xfe", False, "invalid UTF-8", id="string-bad-utf8"),
        pytest.param(prim.read_compact_string, b"\x00", False, "-1", id="compact-null-not-nullable"),
        pytest.param(prim.read_compact_string, b"\x81\x80\x02", False, "32768", id="compact-string-too-long"),
        pytest.param(prim.read_compact_string, b"\x05ab", False, "2 bytes left", id="compact-string-overruns"),
        pytest.param(prim.read_bytes, b"\xff\xff\xff\xfe", True, "-2", id="bytes-len-minus-2"),
        pytest.param(prim.read_bytes, b"\x7f\xff\xff\xff" + b"x" * 10, True, "10 bytes left", id="bytes-huge"),
        pytest.param(prim.read_bytes, b"\xff\xff\xff\xff", False, "-1", id="bytes-null-not-nullable"),
        pytest.param(prim.read_compact_bytes, b"\x0a\x00", True, "1 bytes left", id="compact-bytes-overruns"),
    ],
)
def test_bad_lengths_are_malformed(reader, data, nullable, found):
    with pytest.raises(MalformedMessage) as info:
        reader(view(data), 0, "Topic.name", nullable)
    assert found in info.value.found
    assert info.value.field == "Topic.name"


@pytest.mark.parametrize("compact", [False, True], ids=["classic", "compact"])
def test_huge_array_count_is_rejected_before_allocating(compact):
    count = 2**31 - 2
    header = prim.encode_uvarint(count + 1) if compact else struct.pack(">i", count)
    with pytest.raises(MalformedMessage) as info:
        prim.read_array_count(view(header + b"\x00" * 16), 0, "Fetch.topics", False, compact, 4)
    assert info.value.expected == f"{count} items of >= 4 bytes"
    assert info.value.found == "16 bytes left"


def test_array_count_negative_other_than_null_is_malformed():
    with pytest.raises(MalformedMessage) as info:
        prim.read_array_count(view(struct.pack(">i", -5)), 0, "f", True, False, 1)
    assert info.value.found == "-5"


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda: prim.encode_string(None, "f", False, False), id="null-string"),
        pytest.param(lambda: prim.encode_string("x" * 32768, "f", False, True), id="string-too-long"),
        pytest.param(lambda: prim.encode_string(b"bytes", "f", False, True), id="string-not-str"),
        pytest.param(lambda: prim.write_bytes([], None, "f", False, False), id="null-bytes"),
        pytest.param(lambda: prim.write_bytes([], "text", "f", True, False), id="bytes-not-bytes"),
        pytest.param(lambda: prim.encode_array_count(None, "f", False, True), id="null-array"),
        pytest.param(lambda: prim.encode_uuid("not-a-uuid", "f"), id="uuid-not-uuid"),
    ],
)
def test_unencodable_values_are_encode_errors(call):
    with pytest.raises(EncodeError):
        call()


def test_skip_tagged_fields_returns_raw_tags_and_bounds_sizes():
    data = b"\x02" + b"\x01\x02ab" + b"\x05\x00" + b"rest"
    tags, pos = prim.skip_tagged_fields(view(data), 0, "h")
    assert tags == {1: b"ab", 5: b""} and data[pos:] == b"rest"
    with pytest.raises(MalformedMessage):
        prim.skip_tagged_fields(view(b"\x01\x01\x09ab"), 0, "h")  # size 9, 2 bytes left
    with pytest.raises(MalformedMessage):
        prim.skip_tagged_fields(view(b"\x7f\x00"), 0, "h")  # 127 tags cannot fit in 1 byte


@pytest.mark.parametrize(
    "text, low, high",
    [("3+", 3, 0x7FFF), ("0-4", 0, 4), ("5", 5, 5), ("none", 1, 0)],
)
def test_versions_parse_kafka_notation(text, low, high):
    versions = Versions.parse(text)
    assert (versions.low, versions.high) == (low, high)
    assert str(versions) == text
    assert (low in versions) == (low <= high)


def test_kafka_python_reader_agrees_on_our_compact_string():
    from kafka.protocol.schemas.fields.codecs import String

    encoded = prim.encode_string("ünï", "f", False, True)
    assert String("utf-8").decode(io.BytesIO(encoded), compact=True) == "ünï"
