"""check_batches(keys_required=True): the records without a key, by batch and index, for every
codec pylog reads; keyed records (an empty key included) and other topics pass as before."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.records import (
    Compression,
    CorruptRecordError,
    InvalidRecordError,
    KeylessRecordError,
    Record,
    encode_batch,
)
from broker.records.arrow import check_batches

CODECS = [Compression.NONE, Compression.GZIP, Compression.LZ4]


def batch_of(keys, compression=Compression.NONE) -> bytes:
    return encode_batch([Record(i, 1_700_000_000_000, k, b"value-%d" % i) for i, k in enumerate(keys)],
                        compression=compression)


@pytest.mark.parametrize("compression", CODECS)
def test_keyless_records_are_named_by_batch_and_index(compression):
    data = batch_of([b"a", None, b"", None, b"b"], compression)
    with pytest.raises(KeylessRecordError) as info:
        check_batches(data, keys_required=True)
    assert info.value.records == ((0, 1), (0, 3))
    assert isinstance(info.value, InvalidRecordError) and info.value.kafka_error_code == 87
    assert check_batches(data) == 5  # without the requirement the batch is fine


def test_batches_are_counted_across_codecs():
    data = batch_of([b"a", b"b"]) + batch_of([None, b"c"], Compression.GZIP) + batch_of([b"d", None])
    with pytest.raises(KeylessRecordError) as info:
        check_batches(data, keys_required=True)
    assert info.value.records == ((1, 0), (2, 1))


@pytest.mark.parametrize("compression", CODECS)
def test_keyed_records_pass(compression):
    assert check_batches(batch_of([b"a", b"", b"c" * 300], compression), keys_required=True) == 3


def test_corruption_is_reported_before_missing_keys():
    data = bytearray(batch_of([None, None]))
    data[-1] ^= 0xFF  # breaks the CRC
    with pytest.raises(CorruptRecordError):
        check_batches(bytes(data), keys_required=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), st.binary(max_size=20),  # 1-byte and 2-byte key lengths
                                  st.binary(min_size=60, max_size=300)), min_size=1, max_size=12),
                min_size=1, max_size=4),
       st.sampled_from(CODECS))
def test_exactly_the_null_keys_are_found(batches, compression):
    data = b"".join(batch_of(keys, compression) for keys in batches)
    expected = tuple((b, i) for b, keys in enumerate(batches) for i, key in enumerate(keys) if key is None)
    if not expected:
        assert check_batches(data, keys_required=True) == sum(map(len, batches))
        return
    with pytest.raises(KeylessRecordError) as info:
        check_batches(data, keys_required=True)
    assert info.value.records == expected
