"""The group options reach a Spark user as errors that name the option and the fix, when the
query is defined (``load()``), before anything connects to a cluster. The committing itself, on
Apache Kafka and on pylog: ``tests/peer/test_peer_spark_offsets.py``."""

from __future__ import annotations

import pytest
from pyspark.errors import AnalysisException

NOWHERE = "127.0.0.1:9"  # nothing listens; the checks must not need a cluster


@pytest.mark.parametrize("options, message", [
    ({"offsets.store": "kafka"},
     "Option 'offsets.store' = 'kafka' needs 'kafka.group.id' (the group whose offsets are committed)"),
    ({"offsets.store": "kafka", "groupIdPrefix": "job"}, "set 'kafka.group.id' to a stable name"),
    ({"offsets.store": "s3", "kafka.group.id": "g"}, "Option 'offsets.store' must be one of none, zookeeper, kafka"),
    ({"startingOffsets": "group", "kafka.group.id": "g"},
     "Option 'startingOffsets' = 'group' needs 'kafka.group.id' and 'offsets.store' = 'kafka'"),
    ({"offsets.store": "zookeeper", "kafka.group.id": "team/app", "zookeeper.connect": "h:2181"},
     "use 'offsets.store' = 'kafka'"),
])
@pytest.mark.parametrize("stream", [False, True])
def test_group_option_errors_at_load(spark, options, message, stream):
    reader = (spark.readStream if stream else spark.read).format("pylog")
    reader = reader.option("kafka.bootstrap.servers", NOWHERE).option("subscribe", "t").options(**options)
    with pytest.raises(AnalysisException) as info:
        reader.load()
    assert message in str(info.value)
