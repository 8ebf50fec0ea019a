"""Choosing a partition: Kafka's murmur2 for keyed records, sticky for records without a key.

Keyed records must land where the Java client puts them, or two producers (ours and a JVM
service) would split one key's records over two partitions and lose their order. Java's
``BuiltInPartitioner.partitionForKey`` is ``toPositive(murmur2(keyBytes)) % numPartitions``
where ``toPositive(n) = n & 0x7fffffff`` and ``murmur2`` is ``Utils.murmur2`` (seed
0x9747b28c, little-endian 4-byte blocks, signed int32 result). An empty key is a key: it hashes
like any other byte string; only a null key is "no key". (librdkafka's default partitioner is
``consistent_random`` over CRC32, so it does NOT agree with Java; we follow Java.)

Records without a key stick to one partition per topic until that partition needs a new batch,
then move to the next (KIP-480): batches fill up instead of one record per partition per send.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported lazily: only the Arrow path (send_arrow) needs it
    import numpy

__all__ = ["murmur2", "to_positive", "partition_for_key", "StickyPartitioner", "murmur2_array",
           "partitions_for_keys"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: the signed 32-bit MurmurHash2 of ``data``."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    blocks = length & ~3
    for i in range(0, blocks, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK32
        k ^= k >> 24
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length & 3
    # Java's switch falls through: 3 mixes bytes 2, 1 and 0; 2 mixes 1 and 0; 1 mixes 0.
    if tail == 3:
        h ^= data[blocks + 2] << 16
    if tail >= 2:
        h ^= data[blocks + 1] << 8
    if tail >= 1:
        h ^= data[blocks]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Java ``Utils.toPositive``: clear the sign bit (not ``abs``, which fails for INT_MIN)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    assert num_partitions > 0, "a topic has at least one partition"
    return to_positive(murmur2(key)) % num_partitions


class StickyPartitioner:
    """Per topic, the partition that keyless records currently stick to."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self.current: dict[str, int] = {}  # read by ``Producer.send``'s fast path

    def partition(self, topic: str, num_partitions: int) -> int:
        current = self.current.get(topic)
        if current is None or current >= num_partitions:
            current = self._rng.randrange(num_partitions)
            self.current[topic] = current
        return current

    def next_partition(self, topic: str, num_partitions: int) -> int:
        """Move on after the current partition's batch filled up (round-robin)."""
        current = self.partition(topic, num_partitions)
        nxt = (current + 1) % num_partitions
        self.current[topic] = nxt
        return nxt


# ------------------------------------------------------------------ vectorized (Arrow keys)

def murmur2_array(offsets, data) -> "numpy.ndarray":
    """``murmur2`` of every key of an Arrow binary array, as int32, computed with numpy.

    ``offsets`` (n + 1 entries) and ``data`` (uint8) are the array's buffers. Keys are grouped by
    length (one group when all keys have the same length, the usual case: then the keys are one
    contiguous (n, length) matrix, no gather); within a group the 4-byte blocks are read as
    little-endian uint32 columns and mixed column by column, so the Python cost is per distinct
    length and per block, not per key. Equal to ``murmur2`` for every key (tests compare)."""
    import numpy as np

    offsets = np.asarray(offsets, dtype=np.int64)
    data = np.asarray(data, dtype=np.uint8)
    n = len(offsets) - 1
    lengths = np.diff(offsets)
    out = np.empty(n, dtype=np.uint32)
    if n == 0:
        return out.view(np.int32)
    if lengths.min() == lengths.max():
        groups = [(int(lengths[0]), None)]
    else:
        groups = [(int(length), np.nonzero(lengths == length)[0]) for length in np.unique(lengths)]
    for length, rows in groups:
        if rows is None:  # every key has this length: one contiguous block of bytes
            cells = data[offsets[0]:offsets[0] + n * length].reshape(n, length)
        else:
            cells = data[offsets[:-1][rows][:, None] + np.arange(length)] if length else None
        h = _murmur2_matrix(cells, len(rows) if rows is not None else n, length)
        if rows is None:
            out[:] = h
        else:
            out[rows] = h
    return out.view(np.int32)


def _murmur2_matrix(cells, count: int, length: int):
    """murmur2 of ``count`` keys of one ``length``, given as a (count, length) uint8 matrix."""
    import numpy as np

    m = np.uint32(_M)
    h = np.full(count, (_SEED ^ length) & _MASK32, dtype=np.uint32)
    blocks = length & ~3
    with np.errstate(over="ignore"):
        if blocks:
            words = np.ascontiguousarray(cells[:, :blocks]).view("<u4")
            k = np.empty(count, dtype=np.uint32)
            shifted = np.empty(count, dtype=np.uint32)
            for j in range(blocks // 4):
                np.multiply(words[:, j], m, out=k)
                np.right_shift(k, 24, out=shifted)
                k ^= shifted
                k *= m
                h *= m
                h ^= k
        tail = length & 3
        if tail:
            rest = cells[:, blocks:].astype(np.uint32)
            if tail == 3:
                h ^= rest[:, 2] << 16
            if tail >= 2:
                h ^= rest[:, 1] << 8
            h ^= rest[:, 0]
            h *= m
        h ^= h >> 13
        h *= m
        h ^= h >> 15
    return h


def partitions_for_keys(offsets, data, num_partitions: int) -> "numpy.ndarray":
    """Java's ``toPositive(murmur2(key)) % numPartitions`` for every key (int32 array)."""
    import numpy as np

    assert num_partitions > 0, "a topic has at least one partition"
    hashes = murmur2_array(offsets, data).view(np.uint32) & np.uint32(0x7FFFFFFF)
    return (hashes % np.uint32(num_partitions)).astype(np.int32)
