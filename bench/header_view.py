"""Cost of the batch header view per batch: it sets the ceiling of the broker's produce/fetch path.

Measures, in one run on the same bytes:
- ``read_header``: unpack the 61-byte header (no checks), the floor of any header work.
- ``validate_batch``: lengths, magic, codec, counts and CRC-32C over the batch, what the leader
  does before every append.
- peer: kafka-python's ``DefaultRecordBatch(...)`` header parse plus ``validate_crc()``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from kafka.record.default_records import DefaultRecordBatch  # noqa: E402

from _report import best_of, report  # noqa: E402
from broker.records import Record, encode_batch, read_header, validate_batch  # noqa: E402
from broker.records.header import BatchLimits  # noqa: E402


def batch_of(records: int, value_bytes: int) -> bytes:
    value = bytes(range(256)) * (value_bytes // 256 + 1)
    return encode_batch([Record(i, 1_700_000_000_000 + i, b"key%08d" % i, value[:value_bytes])
                         for i in range(records)])


def measure(label: str, buf: bytes, loops: int) -> None:
    limits = BatchLimits(batch_bytes_max=len(buf))
    records = read_header(buf).records_count

    def ours_header():
        for _ in range(loops):
            read_header(buf, 0)

    def ours_validate():
        for _ in range(loops):
            validate_batch(buf, 0, limits)

    def peer():
        for _ in range(loops):
            DefaultRecordBatch(buf).validate_crc()

    t_header, t_validate, t_peer = best_of(ours_header), best_of(ours_validate), best_of(peer)
    us = lambda t: t / loops * 1e6  # noqa: E731
    report(f"header_view.{label}", batch_bytes=len(buf), records_per_batch=records,
           read_header_us=us(t_header), validate_us=us(t_validate),
           kafka_python_validate_us=us(t_peer), ratio_vs_peer=t_peer / t_validate,
           validate_batches_per_s=loops / t_validate,
           validate_records_per_s_ceiling=loops * records / t_validate,
           validate_gb_per_s=loops * len(buf) / t_validate / 1e9)


def main() -> None:
    measure("small_16x100B", batch_of(16, 100), 20_000)
    measure("16KiB_150x100B", batch_of(150, 100), 10_000)
    measure("1MiB_9000x100B", batch_of(9_000, 100), 300)


if __name__ == "__main__":
    main()
