"""DescribeLogDirs (key 35), v1-4: this broker's log directories, the partitions in each (all,
or those asked) with their size in bytes, and each directory's total and usable bytes (v4). An
offline directory answers KAFKA_STORAGE_ERROR and no partitions, as Kafka's. ``offset_lag`` is
how far a follower's log end is behind its high watermark (0 on leaders); pylog has no future
(intra-broker moving) replicas."""

from __future__ import annotations

import shutil
from collections import defaultdict

from broker.server.context import BrokerContext
from broker.wire import ApiKey, DescribeLogDirsResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.DESCRIBE_LOG_DIRS
_Result = DescribeLogDirsResponse.DescribeLogDirsResult
_Topic = DescribeLogDirsResponse.DescribeLogDirsTopic
_Partition = DescribeLogDirsResponse.DescribeLogDirsPartition


async def handle(ctx: BrokerContext, header, request) -> DescribeLogDirsResponse:
    manager = ctx.replicas.log_manager
    wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
    offline = manager.offline_log_dirs
    by_dir: dict = defaultdict(lambda: defaultdict(list))
    for (topic, index), log in sorted(manager.all_logs().items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        partition = ctx.replicas.get(topic, index)
        lag = 0 if partition is None or partition.is_leader else max(0, partition.high_watermark - log.log_end_offset)
        by_dir[manager.log_dir_of(topic, index)][topic].append(_Partition(
            partition_index=index, partition_size=log.size_in_bytes, offset_lag=lag, is_future_key=False))
    results = []
    for log_dir in manager.log_dirs:
        if log_dir in offline:
            results.append(_Result(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=str(log_dir), topics=[]))
            continue
        try:
            usage = shutil.disk_usage(log_dir)
            total, usable = usage.total, usage.free
        except OSError:
            total = usable = -1
        topics = [_Topic(name=name, partitions=parts) for name, parts in sorted(by_dir[log_dir].items())]
        results.append(_Result(error_code=ErrorCode.NONE, log_dir=str(log_dir), topics=topics,
                               total_bytes=total, usable_bytes=usable))
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)


def error_response(header, request, error_code: int) -> DescribeLogDirsResponse:
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=error_code, results=[])
