"""Arrow <-> numpy plumbing of the Arrow record codec: no per-record Python work.

``binary_parts``, ``timestamps_ms`` and ``header_parts`` turn the encoder's input columns into
flat numpy arrays (data bytes, int64 offsets, uint8 validity) that the compiled kernels read;
``binary_array`` wraps the decoder's numpy outputs into Arrow arrays without copying them.
Arrays read from Arrow buffers are read-only views; the kernels' signatures expect exactly that.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

__all__ = ["HEADERS_TYPE", "BinaryParts", "HeaderParts", "binary_parts", "null_parts", "timestamps_ms",
           "header_parts", "no_headers", "binary_array", "pool_array", "readonly",
           "trimmed"]

# Spark's headers column: array<struct<key: string, value: binary>>; "element" as Spark's ArrowUtils.
HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([
    pa.field("key", pa.string()), pa.field("value", pa.binary()),
])))

_EMPTY_BYTES = np.empty(0, np.uint8)
_EMPTY_BYTES.flags.writeable = False
_MS_PER_UNIT = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


class BinaryParts(NamedTuple):
    """A binary column as the kernels read it: row i is data[offsets[i]:offsets[i+1]] if valid[i]."""

    data: np.ndarray  # uint8
    offsets: np.ndarray  # int64, len n + 1, absolute positions in data
    valid: np.ndarray  # uint8, len n, 0 = null


class HeaderParts(NamedTuple):
    first: np.ndarray  # int64 per row: index of its first header
    count: np.ndarray  # int64 per row: number of headers (0 for a null list)
    keys: BinaryParts  # every header key (never null)
    values: BinaryParts


def pool_array(count: int, dtype) -> np.ndarray:
    """Uninitialised, writable numpy array over a buffer from Arrow's memory pool.

    The pool keeps and reuses freed memory; numpy's and Python's large allocations often come
    fresh from the OS, and each new 4 KiB page then costs a page fault (~2 us here): that alone
    doubled decode and encode times when measured (bench/codec.py).
    """
    return np.frombuffer(pa.allocate_buffer(count * np.dtype(dtype).itemsize), dtype)


def readonly(array: np.ndarray) -> np.ndarray:
    if array.flags.writeable:
        array = array.view()
        array.flags.writeable = False
    return array


def _as_arrow(column, name: str) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks()
    if isinstance(column, pa.Array):
        return column
    try:
        return pa.array(column)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise TypeError(f"{name}: cannot make an Arrow array of {type(column).__name__}: {exc}") from None


def _to_binary(array: pa.Array, name: str) -> pa.Array:
    kind = array.type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return array
    if pa.types.is_string(kind):
        return array.view(pa.binary())
    if pa.types.is_large_string(kind):
        return array.view(pa.large_binary())
    if pa.types.is_null(kind):
        return array.cast(pa.binary())
    if (pa.types.is_fixed_size_binary(kind) or pa.types.is_binary_view(kind)
            or pa.types.is_string_view(kind)):
        return array.cast(pa.binary())
    raise TypeError(f"{name} must be binary or string, not {kind}")


def binary_parts(column, name: str, rows: int | None = None) -> BinaryParts:
    """Flatten a binary/string column (Arrow, or anything ``pa.array`` accepts)."""
    array = _to_binary(_as_arrow(column, name), name)
    n = len(array)
    if rows is not None and n != rows:
        raise ValueError(f"{name} has {n} rows, values have {rows}")
    _, offsets_buf, data_buf = array.buffers()
    width = np.int64 if pa.types.is_large_binary(array.type) else np.int32
    if offsets_buf is None:  # a zero-length array may come without buffers
        offsets = np.zeros(n + 1, np.int64)
    else:
        given = np.frombuffer(offsets_buf, width)[array.offset : array.offset + n + 1]
        offsets = pool_array(n + 1, np.int64)
        np.copyto(offsets, given)
    data = _EMPTY_BYTES if data_buf is None else np.frombuffer(data_buf, np.uint8)
    if array.null_count:
        valid = array.is_valid().to_numpy(zero_copy_only=False).view(np.uint8)
    else:
        valid = pool_array(n, np.uint8)
        valid.fill(1)
    return BinaryParts(readonly(data), readonly(offsets), readonly(valid))


def null_parts(rows: int) -> BinaryParts:
    return BinaryParts(_EMPTY_BYTES, readonly(np.zeros(rows + 1, np.int64)),
                       readonly(np.zeros(rows, np.uint8)))


def no_headers(rows: int) -> HeaderParts:
    zeros = readonly(np.zeros(rows, np.int64))
    return HeaderParts(zeros, zeros, null_parts(0), null_parts(0))


def timestamps_ms(column, rows: int, now_ms: int | None) -> np.ndarray:
    """Epoch milliseconds per row: Arrow timestamps of any unit (floored), or integers in ms.

    Null timestamps, and ``column=None``, take ``now_ms`` (as a Kafka producer stamps the send time).
    """
    if column is None:
        if now_ms is None:
            raise ValueError("timestamps=None needs now_ms (the producer's clock, injected)")
        return readonly(np.full(rows, now_ms, np.int64))
    if isinstance(column, np.ndarray) and np.issubdtype(column.dtype, np.datetime64):
        column = column.astype("datetime64[ms]").view(np.int64)
    array = _as_arrow(column, "timestamps")
    if len(array) != rows:
        raise ValueError(f"timestamps has {len(array)} rows, values have {rows}")
    kind = array.type
    if pa.types.is_timestamp(kind):
        multiply, divide = _MS_PER_UNIT[kind.unit]
        ms = np.frombuffer(array.buffers()[1], np.int64)[array.offset : array.offset + rows]
        if multiply != 1:
            ms = ms * multiply
        elif divide != 1:
            ms = ms // divide  # floor, as Java's Instant.toEpochMilli
    elif pa.types.is_integer(kind):
        ms = array.cast(pa.int64()).fill_null(0).to_numpy()
    else:
        raise TypeError(f"timestamps must be an Arrow timestamp or integer milliseconds, not {kind}")
    if array.null_count:
        if now_ms is None:
            raise ValueError("null timestamps need now_ms (the producer's clock, injected)")
        ms = np.where(array.is_null().to_numpy(zero_copy_only=False), now_ms, ms)
    return readonly(np.ascontiguousarray(ms, np.int64))


def header_parts(column, rows: int) -> HeaderParts:
    """Flatten list<struct<key: string, value: binary>> (or Python lists of (key, value) pairs)."""
    if not isinstance(column, (pa.Array, pa.ChunkedArray)):
        column = pa.array(column, type=HEADERS_TYPE)
    array = _as_arrow(column, "headers")
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        raise TypeError(f"headers must be list<struct<key, value>>, not {array.type}")
    if len(array) != rows:
        raise ValueError(f"headers has {len(array)} rows, values have {rows}")
    offsets = array.offsets.to_numpy().astype(np.int64)  # relative to array.values, slice-aware
    count = np.diff(offsets)
    if array.null_count:
        count[array.is_null().to_numpy(zero_copy_only=False)] = 0
    entries = array.values
    if not pa.types.is_struct(entries.type) or entries.type.num_fields != 2:
        raise TypeError(f"headers must be list<struct<key, value>>, not {array.type}")
    key_column, value_column = entries.flatten()  # struct nulls become null keys and values
    keys = binary_parts(key_column, "header keys")
    if key_column.null_count and _any_used_null(keys.valid, offsets[:-1], count):
        raise ValueError("header keys must not be null (Kafka requires a key for every header)")
    values = binary_parts(value_column, "header values")
    return HeaderParts(readonly(offsets[:-1].copy()), readonly(count), keys, values)


def _any_used_null(valid: np.ndarray, first: np.ndarray, count: np.ndarray) -> bool:
    """True if a null entry lies inside some row's header range (unreferenced slots don't count)."""
    used = np.zeros(len(valid) + 1, np.int64)
    np.add.at(used, first[count > 0], 1)
    np.add.at(used, (first + count)[count > 0], -1)
    inside = np.cumsum(used[:-1]) > 0
    return bool(np.any(inside & (valid == 0)))


def trimmed(view: np.ndarray) -> pa.Buffer:
    """An Arrow buffer of ``view``, a leading slice of a larger array.

    The decoder sizes its outputs for the worst case; a result that uses under half of its array
    is copied out, so a long-lived RecordBatch does not pin the unused rest.
    """
    capacity = view.base.nbytes if isinstance(view.base, np.ndarray) else view.nbytes
    if 2 * view.nbytes < capacity:
        copy = pool_array(len(view), view.dtype)
        copy[:] = view
        view = copy
    return pa.py_buffer(view)


def binary_array(kind: pa.DataType, rows: int, offsets: np.ndarray, data: np.ndarray,
                 valid: np.ndarray, nulls: int) -> pa.Array:
    """Wrap decoder outputs (int32 offsets, bytes, uint8 validity) as an Arrow array."""
    validity = None
    if nulls:
        validity = pa.py_buffer(np.packbits(valid[:rows], bitorder="little"))
    buffers = [validity, trimmed(offsets[: rows + 1]), trimmed(data)]
    return pa.Array.from_buffers(kind, rows, buffers, null_count=nulls)
