"""Partition choice: Kafka's murmur2 (Java vectors), the key -> partition mapping, sticky keyless."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.partitioner import StickyPartitioner, murmur2, partition_for_key, to_positive

# org.apache.kafka.common.utils.UtilsTest#testMurmur2 (as quoted by kafka_ex and ClickHouse's
# kafkaMurmurHash tests) and the values Akka's Murmur2Spec checks against Kafka's Utils.murmur2.
JAVA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"1", -1993445489),
    (b"12", 126087238),
    (b"123", -267702483),
    (b"1234", -1614185708),
    (b"12345", -1188365604),
]


@pytest.mark.parametrize("data, expected", JAVA_VECTORS, ids=[v[0].decode() for v in JAVA_VECTORS])
def test_murmur2_matches_the_java_client(data, expected):
    assert murmur2(data) == expected


def test_vectors_cover_every_tail_length():
    """The tail switch (0-3 leftover bytes) is where ports go wrong; the vectors hit all four."""
    assert {len(data) % 4 for data, _ in JAVA_VECTORS} == {0, 1, 2, 3}


def test_empty_key_is_hashed_not_treated_as_null():
    # Java hashes a non-null empty byte[]; only a null key goes to the sticky partitioner.
    assert murmur2(b"") == 275646681
    assert partition_for_key(b"", 7) == 275646681 % 7


@given(st.binary(max_size=64))
@settings(max_examples=300)
def test_murmur2_agrees_with_kafka_python(data):
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2  # returns it unsigned

    assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data)
    assert -(2**31) <= murmur2(data) < 2**31


@given(st.binary(min_size=0, max_size=32), st.integers(min_value=1, max_value=1000))
@settings(max_examples=300)
def test_partition_for_key_is_javas_to_positive_modulo(key, partitions):
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2

    expected = (kafka_python_murmur2(key) & 0x7FFFFFFF) % partitions
    assert partition_for_key(key, partitions) == expected


@pytest.mark.parametrize("n, expected", [(0, 0), (5, 5), (-1, 0x7FFFFFFF), (-(2**31), 0), (-2, 0x7FFFFFFE)])
def test_to_positive_clears_the_sign_bit_like_java(n, expected):
    assert to_positive(n) == expected


def test_known_key_partition_assignments():
    # toPositive(murmur2("foobar")) % 3 with murmur2 = -790332482 -> 1357151166 % 3 == 0
    assert partition_for_key(b"foobar", 3) == (-790332482 & 0x7FFFFFFF) % 3 == 0
    assert partition_for_key(b"21", 10) == (-973932308 & 0x7FFFFFFF) % 10 == 0
    assert partition_for_key(b"abc", 10) == 479470107 % 10 == 7


def test_sticky_partitioner_sticks_then_rotates():
    sticky = StickyPartitioner(random.Random(7))
    first = sticky.partition("t", 4)
    assert all(sticky.partition("t", 4) == first for _ in range(10))
    nxt = sticky.next_partition("t", 4)
    assert nxt == (first + 1) % 4
    assert sticky.partition("t", 4) == nxt
    seen = {sticky.next_partition("t", 4) for _ in range(4)}
    assert seen == {0, 1, 2, 3}  # round-robin visits every partition


def test_sticky_partitioner_is_per_topic_and_survives_fewer_partitions():
    sticky = StickyPartitioner(random.Random(1))
    a = sticky.partition("a", 100)
    sticky.partition("b", 100)
    sticky.next_partition("b", 100)
    assert sticky.partition("a", 100) == a  # moving b does not move a
    assert 0 <= sticky.partition("a", 1) < 1  # a topic that shrank (metadata) gets a valid choice


# ------------------------------------------------------------------ vectorized (send_arrow)


def _buffers(keys: list[bytes]):
    import numpy as np
    import pyarrow as pa

    array = pa.array(keys, pa.binary())
    offsets = np.frombuffer(array.buffers()[1], np.int32)[: len(array) + 1]
    data_buffer = array.buffers()[2]
    data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.empty(0, np.uint8)
    return offsets, data


def test_murmur2_array_matches_the_java_vectors():
    from broker.client.partitioner import murmur2_array

    offsets, data = _buffers([k for k, _ in JAVA_VECTORS] + [b""])
    assert murmur2_array(offsets, data).tolist() == [v for _, v in JAVA_VECTORS] + [275646681]


@given(st.lists(st.binary(max_size=40), max_size=60), st.integers(min_value=1, max_value=50))
@settings(max_examples=200)
def test_murmur2_array_and_partitions_agree_with_the_scalar_version(keys, partitions):
    from broker.client.partitioner import murmur2_array, partitions_for_keys

    offsets, data = _buffers(keys)
    assert murmur2_array(offsets, data).tolist() == [murmur2(k) for k in keys]
    assert partitions_for_keys(offsets, data, partitions).tolist() == [partition_for_key(k, partitions) for k in keys]


def test_murmur2_array_of_equal_length_keys_uses_one_block():
    from broker.client.partitioner import murmur2_array

    keys = [b"key-%06d" % i for i in range(1000)]  # all 10 bytes: the contiguous fast path
    offsets, data = _buffers(keys)
    assert murmur2_array(offsets, data).tolist() == [murmur2(k) for k in keys]
