"""128-bit keyed hashes of record keys, for the cleaner's offset map.

The map stores a hash of each key, not the key (as Kafka's ``SkimpyOffsetMap`` stores an MD5), so
its memory is fixed per entry whatever the keys' sizes. Two keys with the same hash would make the
cleaner drop the older one's latest value: the hash must make that practically impossible, also
for keys a user chose to collide. So it is keyed: SipHash-2-4 (the keyed PRF CPython uses for
``str``) run with two independent 128-bit keys gives two 64-bit halves. The keys come from the
caller's rng, once per cleaner; without them a collision cannot be crafted, and by chance one is
expected after about 2^64 distinct keys.

``hash_keys(offsets, data, k0, k1, k2, k3)`` hashes every value of an Arrow binary column (int32
``offsets`` of n+1 entries into the uint8 ``data`` buffer) and returns ``(hi, lo)`` uint64 arrays.
Null keys are the caller's business (they get the hash of b"", and a separate validity mask).
The loop is compiled (numba, ``cache=True``): a Python loop with ``hashlib`` costs ~0.5 us a key,
over the cleaner's whole budget per record.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["hash_keys", "new_hash_keys"]


@njit(inline="always")
def _rotl(x, b):
    return (x << np.uint64(b)) | (x >> np.uint64(64 - b))


@njit(inline="always")
def _round(v0, v1, v2, v3):
    v0 += v1
    v1 = _rotl(v1, 13)
    v1 ^= v0
    v0 = _rotl(v0, 32)
    v2 += v3
    v3 = _rotl(v3, 16)
    v3 ^= v2
    v0 += v3
    v3 = _rotl(v3, 21)
    v3 ^= v0
    v2 += v1
    v1 = _rotl(v1, 17)
    v1 ^= v2
    v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


@njit(cache=True)
def _siphash24(data, start, end, k0, k1):
    """SipHash-2-4 of data[start:end] (uint8) under the 128-bit key (k0, k1)."""
    v0 = k0 ^ np.uint64(0x736F6D6570736575)
    v1 = k1 ^ np.uint64(0x646F72616E646F6D)
    v2 = k0 ^ np.uint64(0x6C7967656E657261)
    v3 = k1 ^ np.uint64(0x7465646279746573)
    length = end - start
    blocks_end = start + (length // 8) * 8
    pos = start
    while pos < blocks_end:
        m = np.uint64(0)
        for i in range(8):
            m |= np.uint64(data[pos + i]) << np.uint64(8 * i)
        v3 ^= m
        v0, v1, v2, v3 = _round(v0, v1, v2, v3)
        v0, v1, v2, v3 = _round(v0, v1, v2, v3)
        v0 ^= m
        pos += 8
    b = np.uint64(length & 0xFF) << np.uint64(56)
    for i in range(end - blocks_end):
        b |= np.uint64(data[blocks_end + i]) << np.uint64(8 * i)
    v3 ^= b
    v0, v1, v2, v3 = _round(v0, v1, v2, v3)
    v0, v1, v2, v3 = _round(v0, v1, v2, v3)
    v0 ^= b
    v2 ^= np.uint64(0xFF)
    for _ in range(4):
        v0, v1, v2, v3 = _round(v0, v1, v2, v3)
    return v0 ^ v1 ^ v2 ^ v3


@njit(cache=True)
def _siphash24_pair(data, start, end, k0, k1, k2, k3):
    """``(_siphash24(.., k0, k1), _siphash24(.., k2, k3))`` of data[start:end], the two
    computed side by side: each round depends on the one before, so one hash leaves most of
    the CPU's arithmetic units idle, and two independent ones take little more time than one
    (the cleaner hashes every key once per phase: this was half of its record walk)."""
    v0 = k0 ^ np.uint64(0x736F6D6570736575)
    v1 = k1 ^ np.uint64(0x646F72616E646F6D)
    v2 = k0 ^ np.uint64(0x6C7967656E657261)
    v3 = k1 ^ np.uint64(0x7465646279746573)
    w0 = k2 ^ np.uint64(0x736F6D6570736575)
    w1 = k3 ^ np.uint64(0x646F72616E646F6D)
    w2 = k2 ^ np.uint64(0x6C7967656E657261)
    w3 = k3 ^ np.uint64(0x7465646279746573)
    length = end - start
    blocks_end = start + (length // 8) * 8
    pos = start
    while pos < blocks_end:
        m = np.uint64(0)
        for i in range(8):
            m |= np.uint64(data[pos + i]) << np.uint64(8 * i)
        v3 ^= m
        w3 ^= m
        v0, v1, v2, v3 = _round(v0, v1, v2, v3)
        w0, w1, w2, w3 = _round(w0, w1, w2, w3)
        v0, v1, v2, v3 = _round(v0, v1, v2, v3)
        w0, w1, w2, w3 = _round(w0, w1, w2, w3)
        v0 ^= m
        w0 ^= m
        pos += 8
    b = np.uint64(length & 0xFF) << np.uint64(56)
    for i in range(end - blocks_end):
        b |= np.uint64(data[blocks_end + i]) << np.uint64(8 * i)
    v3 ^= b
    w3 ^= b
    v0, v1, v2, v3 = _round(v0, v1, v2, v3)
    w0, w1, w2, w3 = _round(w0, w1, w2, w3)
    v0, v1, v2, v3 = _round(v0, v1, v2, v3)
    w0, w1, w2, w3 = _round(w0, w1, w2, w3)
    v0 ^= b
    w0 ^= b
    v2 ^= np.uint64(0xFF)
    w2 ^= np.uint64(0xFF)
    for _ in range(4):
        v0, v1, v2, v3 = _round(v0, v1, v2, v3)
        w0, w1, w2, w3 = _round(w0, w1, w2, w3)
    return v0 ^ v1 ^ v2 ^ v3, w0 ^ w1 ^ w2 ^ w3


@njit(cache=True, nogil=True)  # array work only: the broker's event loop runs meanwhile
def _hash_all(offsets, data, k0, k1, k2, k3, hi, lo):
    for row in range(offsets.shape[0] - 1):
        start = offsets[row]
        end = offsets[row + 1]
        hi[row], lo[row] = _siphash24_pair(data, start, end, k0, k1, k2, k3)


def new_hash_keys(rng) -> tuple[int, int, int, int]:
    """Four 64-bit key words from ``rng`` (a ``random.Random`` or ``numpy`` Generator)."""
    if hasattr(rng, "getrandbits"):
        return tuple(rng.getrandbits(64) for _ in range(4))  # type: ignore[return-value]
    return tuple(int(x) for x in rng.integers(0, 1 << 64, size=4, dtype=np.uint64))  # type: ignore[return-value]


def hash_keys(offsets: np.ndarray, data: np.ndarray, keys: tuple[int, int, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """``(hi, lo)`` hashes of every value of a binary column; see the module docstring."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    data = np.ascontiguousarray(data, dtype=np.uint8)
    n = offsets.shape[0] - 1
    if n > 0:
        assert offsets[0] >= 0 and offsets[-1] <= data.shape[0] and np.all(offsets[1:] >= offsets[:-1]), \
            "binary offsets do not fit their data"
    hi = np.empty(max(n, 0), dtype=np.uint64)
    lo = np.empty(max(n, 0), dtype=np.uint64)
    k0, k1, k2, k3 = (np.uint64(k) for k in keys)
    _hash_all(offsets, data, k0, k1, k2, k3, hi, lo)
    return hi, lo
