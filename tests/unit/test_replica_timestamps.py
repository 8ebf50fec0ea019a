"""The leader's CreateTime bounds (KIP-937), table-driven over one batch's records."""

from __future__ import annotations

import pytest

from broker.log import LogConfig
from broker.records import DEFAULT_LIMITS, Record, encode_batch, read_header
from broker.replica.timestamps import check_timestamps
from broker.wire import ErrorCode

NOW = 1_700_000_000_000
HOUR = 3_600_000


def check(timestamps: list[int], **config):
    batch = encode_batch([Record(i, ts, None, b"v") for i, ts in enumerate(timestamps)])
    return check_timestamps(memoryview(batch), read_header(batch), LogConfig(**config), NOW, DEFAULT_LIMITS)


@pytest.mark.parametrize("timestamps, config, bad", [
    ([NOW, NOW + HOUR, 0, -1], {}, None),  # Kafka 4's defaults: any age, up to an hour ahead
    ([NOW, NOW + HOUR + 1, NOW + 2 * HOUR], {}, [1, 2]),
    ([NOW - 1001, NOW - 1000, -1], {"message_timestamp_before_max_ms": 1000}, [0]),  # -1: no timestamp
    ([NOW + 6, NOW + 5], {"message_timestamp_after_max_ms": 5}, [0]),
    ([NOW + 2 * HOUR], {"message_timestamp_type": "LogAppendTime"}, None),  # the leader stamps it
])
def test_records_outside_the_bounds_are_invalid_timestamp_each(timestamps, config, bad):
    rejected = check(timestamps, **config)
    if bad is None:
        assert rejected is None
        return
    assert rejected.error_code == ErrorCode.INVALID_TIMESTAMP
    assert [index for index, _ in rejected.record_errors] == bad
    assert "is out of range" in rejected.record_errors[0][1]
