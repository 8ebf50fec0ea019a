"""Compile the cleaner's numba loops once into their on-disk cache (``make setup`` calls this),
so a broker's first cleaning pass does not spend seconds compiling them."""

from __future__ import annotations

import numpy as np

from broker.log.cleaner.key_hash import hash_keys
from broker.log.cleaner.offset_map import OffsetMapBuilder
from broker.records import Record, encode_batch, read_header
from broker.records.retain import retain_records


def compile_kernels() -> None:
    hi, lo = hash_keys(np.array([0, 1], np.int64), np.zeros(1, np.uint8), (1, 2, 3, 4))
    builder = OffsetMapBuilder(4, 0)
    builder.add(np.zeros(1, np.int64), hi, lo, np.ones(1, bool))
    builder.build(1).latest_offsets(hi, lo)
    batch = encode_batch([Record(0, 0, b"k", b"v")])
    retain_records(batch, read_header(batch), np.ones(1, bool), 0)


if __name__ == "__main__":
    compile_kernels()
