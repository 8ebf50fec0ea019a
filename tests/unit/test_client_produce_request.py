"""The producer's pure byte work: producer fields stamped with a valid CRC, a ``send`` batch
encoded by either encoder into the same records, the fast binary-column builder."""

from __future__ import annotations

import pyarrow as pa
import pytest

from broker.client.accumulator import ProducerBatch
from broker.client.produce_request import _binary_array, encode_records, stamp_producer
from broker.records import Record, decode_batch, encode_batch, validate_batch


def test_stamp_sets_producer_fields_and_a_valid_crc():
    payload = encode_batch([Record(0, 1, None, b"a"), Record(1, 2, b"k", b"b")], base_offset=0)
    stamped = stamp_producer(payload, 4242, 3, 17)
    header = validate_batch(stamped)  # checks the CRC
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 3, 17)
    assert [r.value for r in decode_batch(stamped).records] == [b"a", b"b"]
    assert stamp_producer(stamped, 4242, 3, 17) is stamped  # already right: no copy


@pytest.mark.parametrize("count", [3, 200])  # the reference encoder, then the vectorized one
def test_both_encoders_write_the_same_records(count):
    batch = ProducerBatch(("t", 0), 0, 0.0)
    for i in range(count):
        batch.keys.append(None if i % 3 else b"k%d" % i)
        batch.has_keys = True
        batch.values.append(None if i == 1 else b"v%d" % i)
        batch.timestamps.append((1000 + i) * 1_000_000 + 999_999)  # ns, floored to ms when encoded
    batch.record_count = count
    batch.producer_id, batch.producer_epoch, batch.base_sequence = 7, 0, 5
    decoded = decode_batch(encode_records(batch, compression=0))
    assert decoded.header.producer_id == 7 and decoded.header.base_sequence == 5
    assert [(r.key, r.value, r.timestamp, r.offset) for r in decoded.records] == [
        (batch.keys[i], batch.values[i], 1000 + i, i) for i in range(count)]


@pytest.mark.parametrize("items", [[b"a", b"", b"ccc"], [b"a", None, b"c"], []])
def test_binary_array_equals_pa_array(items):
    assert _binary_array(items).equals(pa.array(items, pa.binary()))
