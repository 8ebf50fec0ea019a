"""Find the records without a key (key length -1) in batches the decode kernel already checked.

A compacted topic refuses such records (Kafka ``LogValidator``: "Compacted topic cannot accept
message without key"). ``check_batches(..., keys_required=True)`` runs this after
``decode_records`` has walked the same buffer and table without error, so every length read
here is known to be in bounds; it only reads each record's length, skips attributes, timestamp
and offset deltas, and looks at the key length. Topics that are not compacted never call it.
"""

from __future__ import annotations

from numba import njit

from broker.records._arrow_kernels import B_COUNT, B_END, B_START, _read_varint

__all__ = ["keyless_records"]


@njit(cache=True, nogil=True)
def keyless_records(src, batches, out):
    """Write (batch row, record index in its batch) of every keyless record into ``out``
    (an int64 array of shape (records, 2)); return how many, or -1 if a varint does not read
    (impossible after ``decode_records`` accepted the same bytes)."""
    found = 0
    for b in range(batches.shape[0]):
        p = batches[b, B_START]
        end = batches[b, B_END]
        for i in range(batches[b, B_COUNT]):
            length, p, err = _read_varint(src, p, end, 5)
            if err:
                return -1
            record_end = p + length
            q = p + 1  # attributes
            _, q, err = _read_varint(src, q, record_end, 10)  # timestamp delta
            if err:
                return -1
            _, q, err = _read_varint(src, q, record_end, 5)  # offset delta
            if err:
                return -1
            key_length, q, err = _read_varint(src, q, record_end, 5)
            if err:
                return -1
            if key_length == -1:
                out[found, 0] = b
                out[found, 1] = i
                found += 1
            p = record_end
    return found
