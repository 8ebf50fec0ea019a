"""``encode_retained_batch``: the cleaner's rewrite of a batch down to some of its records.

Checked with our reference decoder and with kafka-python's (an independent implementation): the
records kept come back with their offsets, timestamps and headers; the batch keeps the fields that
consumers, followers and producer-state recovery depend on.
"""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch

from broker.records import Compression, Record, decode_batch, encode_batch, encode_retained_batch
from broker.records.header import DELETE_HORIZON_MASK, validate_batch

RECORDS = [
    Record(100, 5_000, b"a", b"1", (("h", b"x"),)),
    Record(101, 5_003, b"b", None),
    Record(102, 4_990, None, b"3"),
    Record(104, 5_010, b"c", b"4", (("h", None),)),
]
CODECS = [Compression.NONE, Compression.GZIP, Compression.LZ4]


def _original(codec: int) -> bytes:
    return encode_batch(RECORDS, compression=codec, partition_leader_epoch=6, producer_id=42,
                        producer_epoch=3, base_sequence=17, transactional=True)


def _kafka_python(buf: bytes) -> tuple[DefaultRecordBatch, list[tuple]]:
    batch = DefaultRecordBatch(bytearray(buf))
    assert batch.validate_crc()
    return batch, [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("horizon", [-1, 9_000_000])
def test_kept_records_and_batch_fields_survive_a_rewrite(codec, horizon):
    original = decode_batch(_original(codec))
    kept = [original.records[1], original.records[3]]
    buf = encode_retained_batch(original.header, kept, delete_horizon_ms=horizon)
    rewritten = decode_batch(buf)  # CRC and every length checked
    assert rewritten.records == kept
    h, o = rewritten.header, original.header
    assert (h.base_offset, h.last_offset, h.partition_leader_epoch) == (100, 104, 6)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (42, 3, 17, o.last_sequence)
    assert (h.compression, h.is_transactional, h.is_control, h.records_count) == (codec, True, False, 2)
    assert h.max_timestamp == 5_010
    assert bool(h.attributes & DELETE_HORIZON_MASK) is (horizon >= 0)
    assert h.base_timestamp == (horizon if horizon >= 0 else 5_003)
    batch, records = _kafka_python(buf)
    assert records == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in kept]
    assert batch.last_offset_delta == 4


def test_an_empty_retained_batch_keeps_its_span_and_producer_fields():
    original = decode_batch(_original(Compression.LZ4))
    buf = encode_retained_batch(original.header, [])
    header = validate_batch(buf)
    assert (header.base_offset, header.last_offset, header.records_count) == (100, 104, 0)
    assert (header.producer_id, header.base_sequence, header.last_sequence) == (42, 17, original.header.last_sequence)
    assert header.max_timestamp == original.header.max_timestamp
    assert decode_batch(buf).records == []
    _, records = _kafka_python(buf)
    assert records == []


def test_a_clean_batch_stamped_twice_keeps_the_new_horizon_only():
    original = decode_batch(_original(Compression.NONE))
    once = decode_batch(encode_retained_batch(original.header, original.records, delete_horizon_ms=7))
    twice = decode_batch(encode_retained_batch(once.header, once.records[:1]))
    assert not twice.header.attributes & DELETE_HORIZON_MASK
    assert twice.records == original.records[:1]


# -- the fast path: kept records' bytes copied as they are ------------------------------------------

@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("keep", [[True, False, True, True], [False, True, False, False], [False] * 4, [True] * 4])
def test_retain_records_equals_the_reference_rewrite(codec, keep):
    import numpy as np

    from broker.records.retain import retain_records

    buf = _original(codec)
    original = decode_batch(buf)
    kept = [r for r, k in zip(original.records, keep) if k]
    max_ts = max((r.timestamp for r in kept), default=original.header.max_timestamp)
    fast = retain_records(buf, original.header, np.array(keep), max_ts)
    reference = encode_retained_batch(original.header, kept)
    assert decode_batch(fast).records == kept
    assert decode_batch(fast).header._replace(crc=0, batch_length=0, base_timestamp=0) == \
        decode_batch(reference).header._replace(crc=0, batch_length=0, base_timestamp=0)
    if codec == Compression.NONE:
        # Same base timestamp when the first record is kept: then the bytes are identical.
        assert (fast == reference) is (not kept or kept[0] == original.records[0])


def test_record_spans_refuse_a_length_past_the_end():
    import numpy as np

    from broker.records.errors import CorruptRecordError
    from broker.records.retain import record_spans

    with pytest.raises(CorruptRecordError):
        record_spans(np.frombuffer(b"\x10abc", np.uint8), 1)  # length 8, 3 bytes left
    with pytest.raises(CorruptRecordError):
        record_spans(np.frombuffer(b"\x02a\x02b", np.uint8), 1)  # bytes left over
