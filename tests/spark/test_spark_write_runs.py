"""The sink's executor path without Spark: Spark's Arrow batches joined into send runs, and the
value/key columns handed to the encoder without copies (issue 5's write throughput work)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from broker.client.arrow_send import binary_column
from spark_log._io import _runs


def _batch(start: int, rows: int, value_bytes: int = 10) -> pa.RecordBatch:
    values = [str(i).rjust(value_bytes, "0").encode() for i in range(start, start + rows)]
    return pa.record_batch({"value": pa.array(values, pa.binary())})


@pytest.mark.parametrize("sizes, run_bytes", [
    ([5, 5, 5, 5], 1),  # every batch is a run of its own
    ([5, 0, 5, 5, 0, 5], 100),  # empty batches are dropped
    ([50, 1, 1, 50, 3], 600),  # big and small batches mixed
    ([7] * 40, 10_000),  # everything in one run
    ([], 10),
    ([0, 0], 10),
])
def test_runs_keep_every_row_in_order_and_reach_the_run_size(sizes, run_bytes):
    batches, start = [], 0
    for rows in sizes:
        batches.append(_batch(start, rows))
        start += rows
    runs = list(_runs(iter(batches), run_bytes))
    got = [v for run in runs for v in run.column("value").to_pylist()]
    assert got == [v for b in batches for v in b.column("value").to_pylist()]
    assert all(run.num_rows for run in runs)
    for run in runs[:-1]:
        assert sum(batch.nbytes for batch in run.to_batches()) >= run_bytes


def test_runs_are_lazy():
    """A run is sent as soon as it is full, not after Spark's last batch (streaming tasks and
    the producer's buffer bound depend on it)."""
    pulled = []

    def batches():
        for i in range(10):
            pulled.append(i)
            yield _batch(i * 5, 5)

    runs = _runs(batches(), 1)
    next(runs)
    assert pulled == [0]


def _same_data(a: pa.Array, b: pa.Array) -> bool:
    return a.buffers()[2].address == b.buffers()[2].address


def test_binary_column_copies_nothing_for_one_chunk():
    values = pa.array([b"a", None, b"ccc"], pa.binary())
    table = pa.Table.from_batches([pa.record_batch({"value": values})])
    column = binary_column(table, "value", "value")
    assert column.type == pa.binary() and _same_data(column, values)
    assert column.to_pylist() == [b"a", None, b"ccc"]


def test_binary_column_views_strings_as_utf8_bytes():
    strings = pa.array(["é", None, "xy"]).slice(1)  # a slice: the view keeps the offset
    column = binary_column(pa.table({"value": strings}), "value", "value")
    assert column.type == pa.binary() and _same_data(column, strings)
    assert column.to_pylist() == [None, b"xy"]


@pytest.mark.parametrize("chunks, expected", [
    ([pa.array([b"a"]), pa.array([b"b", None])], [b"a", b"b", None]),
    ([pa.array(["é"], pa.large_string()), pa.array(["b"], pa.large_string())], ["é".encode(), b"b"]),
    ([pa.array([b"x"], pa.large_binary())], [b"x"]),
])
def test_binary_column_joins_chunks_and_narrows_large_types(chunks, expected):
    column = binary_column(pa.table({"value": pa.chunked_array(chunks)}), "value", "value")
    assert column.type == pa.binary() and column.to_pylist() == expected


def test_binary_column_rejects_other_types_by_name():
    with pytest.raises(TypeError, match="key column 'key' must be binary or string, not int32"):
        binary_column(pa.table({"key": pa.array([1], pa.int32())}), "key", "key")
    with pytest.raises(KeyError, match="no value column 'value'"):
        binary_column(pa.table({"v": pa.array([b"x"])}), "value", "value")
