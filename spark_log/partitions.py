"""The ``InputPartition`` a read task gets: one offset range and how to read it. Plain data;
Spark pickles it into the task."""

from __future__ import annotations

from pyspark.sql.datasource import InputPartition

from spark_log._io import ReadSettings, read_range
from spark_log.options import SourceOptions
from spark_log.planner import OffsetRange

__all__ = ["RangePartition", "read_settings", "read_partition"]


class RangePartition(InputPartition):
    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)
        self.range = offset_range

    def __repr__(self) -> str:
        r = self.range
        return f"RangePartition({r.topic}-{r.partition} [{r.from_offset}, {r.until_offset}))"


def read_settings(options: SourceOptions) -> ReadSettings:
    return ReadSettings(
        bootstrap_servers=options.bootstrap_servers,
        consumer=dict(options.consumer),
        include_headers=options.include_headers,
        fail_on_data_loss=options.fail_on_data_loss,
        poll_timeout_ms=options.poll_timeout_ms,
    )


def read_partition(settings: ReadSettings, partition: InputPartition):
    """Arrow batches of the partition's range; nothing for Spark's placeholder partition (Spark
    plans one partition with value None when a batch read has no ranges)."""
    if not isinstance(partition, RangePartition):
        return iter(())
    return read_range(settings, partition.range)
