"""Compile the cleaner's numba loops once into their on-disk cache (``make setup`` calls this),
so a broker's first cleaning pass (in a fresh worker process, ``broker/server/cleaner_worker.py``)
does not spend seconds compiling them. The arguments have the types a pass gives them (read-only chunk bytes, int64 tables, int8
actions), or the cache would not be the one a pass looks up."""

from __future__ import annotations

import numpy as np

from broker.log.cleaner.chunk_kernels import ACT_REWRITE, HEADER_COLUMNS, rewrite_batches, walk_headers
from broker.log.cleaner.key_hash import hash_keys
from broker.log.cleaner.offset_map import OffsetMapBuilder
from broker.log.cleaner.segment_cleaner import decode_chunk
from broker.records import DEFAULT_LIMITS, Record, encode_batch, read_header
from broker.records.retain import retain_records


def compile_kernels() -> None:
    hi, lo = hash_keys(np.array([0, 1], np.int64), np.zeros(1, np.uint8), (1, 2, 3, 4))
    builder = OffsetMapBuilder(4, 0)
    builder.add(np.zeros(1, np.int64), hi, lo, np.ones(1, bool))
    builder.build(1).latest_offsets(hi, lo)
    batch = encode_batch([Record(0, 0, b"k", b"v"), Record(1, 0, b"k", None)])
    retain_records(batch, read_header(batch), np.ones(2, bool), 0)
    table = np.empty((2, HEADER_COLUMNS), np.int64)
    rows, _ = walk_headers(np.frombuffer(batch, np.uint8), 0, len(batch), table)
    chunk = decode_chunk(memoryview(batch), table[:rows].copy(), (1, 2, 3, 4), DEFAULT_LIMITS)
    sizes = np.zeros(rows, np.int64)
    rewrite_batches(np.frombuffer(chunk.data, np.uint8), chunk.table, 0, rows, np.full(rows, ACT_REWRITE, np.int8),
                    np.ones(2, bool), chunk.starts, chunk.ends, chunk.timestamps_ms, np.empty(len(batch), np.uint8),
                    0, sizes, sizes.copy())


if __name__ == "__main__":
    compile_kernels()
