"""Transaction markers (issue 15) read by an independent decoder: kafka-python's
``DefaultRecordBatch`` parses what ``encode_control_batch`` writes as a control batch holding one
``ControlRecord`` of the right type, with Kafka's EndTransactionMarker bytes (key: int16 version 0,
int16 type; value: int16 version 0, int32 coordinator epoch)."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import ControlRecord as KpControlRecord
from kafka.record.default_records import DefaultRecordBatch

from broker.records import ControlRecord, ControlType, encode_control_batch


@pytest.mark.parametrize("kind", [ControlType.ABORT, ControlType.COMMIT], ids=["abort", "commit"])
def test_kafka_python_reads_our_marker_batch(kind):
    raw = encode_control_batch(ControlRecord(kind, 17), offset=41, timestamp=1_700_000_000_123,
                               producer_id=9_000_000_001, producer_epoch=6, partition_leader_epoch=3)
    batch = DefaultRecordBatch(bytearray(raw))
    assert batch.validate_crc()
    assert (batch.is_control_batch, batch.is_transactional) == (True, True)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9_000_000_001, 6, -1)
    assert (batch.base_offset, batch.last_offset_delta) == (41, 0)
    [record] = list(batch)
    assert isinstance(record, KpControlRecord)
    assert (record.version, record.type, record.commit) == (0, kind, kind == ControlType.COMMIT)
    assert (record.offset, record.timestamp) == (41, 1_700_000_000_123)
    assert bytes(record.key) == struct.pack(">hh", 0, kind)
    assert bytes(record.value) == struct.pack(">hi", 0, 17)
