"""ListOffsets (key 2), v0-7: the offset for a timestamp, or for one of the special ones.

- -1 latest: the last stable offset for read_committed (isolation 1), else the high watermark
  (reference 1.4: "latest" must be the LSO for read_committed readers).
- -2 earliest: the log start offset.
- -3 max timestamp (v7, KIP-734): the first record carrying the largest timestamp.
- a timestamp >= 0: the first record at or after it (``Log.offset_for_timestamp``).
Lookups only answer offsets a consumer of that isolation level may fetch (below the HW or the
LSO), as Kafka's ``Partition.fetchOffsetForTimestamp`` does; none found is offset -1 with
timestamp -1 and no error. A partition named twice in one request is answered once, with
INVALID_REQUEST (as Kafka does). v4+ carries the leader epoch: the request's current epoch is
fenced (FENCED_LEADER_EPOCH 74 / UNKNOWN_LEADER_EPOCH 75), the answer names the epoch of the
offset.

v0 (removed from Kafka 4.0 by KIP-896, served here because Debian's Burrow 1.2.1 -- sarama of
2018 -- asks for end offsets with it whatever its kafka-version says) answers a list of offsets
(``old_style_offsets``), as Kafka 0.10-3.x's ``legacyFetchOffsetsBefore`` did: see
``old_style_offsets``.
"""

from __future__ import annotations

from broker.log import LogError
from broker.replica.partition import ISOLATION_READ_COMMITTED, Partition
from broker.server.context import BrokerContext
from broker.server.handlers.common import local_leader
from broker.wire import ApiKey, ErrorCode, ListOffsetsResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.LIST_OFFSETS
_Topic = ListOffsetsResponse.ListOffsetsTopicResponse
_Partition = ListOffsetsResponse.ListOffsetsPartitionResponse
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


async def handle(ctx: BrokerContext, header, request) -> ListOffsetsResponse:
    duplicates = _duplicate_partitions(request)
    answered: set[tuple[str, int]] = set()
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            key = (topic.name, wanted.partition_index)
            if key in duplicates:
                # Kafka answers a partition named twice once, INVALID_REQUEST (v1+ allows one
                # entry per partition; ReplicaManager.fetchOffset keys its answers by partition).
                if key not in answered:
                    answered.add(key)
                    partitions.append(_Partition(partition_index=wanted.partition_index,
                                                 error_code=ErrorCode.INVALID_REQUEST))
                continue
            answer = _partition_v0 if header.api_version == 0 else _partition
            partitions.append(answer(ctx, request, topic.name, wanted))
        topics.append(_Topic(name=topic.name, partitions=partitions))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


def _duplicate_partitions(request) -> set[tuple[str, int]]:
    seen: set[tuple[str, int]] = set()
    duplicates: set[tuple[str, int]] = set()
    for topic in request.topics:
        for wanted in topic.partitions:
            key = (topic.name, wanted.partition_index)
            (duplicates if key in seen else seen).add(key)
    return duplicates


def _partition(ctx: BrokerContext, request, topic: str, wanted):
    partition, error = local_leader(ctx, topic, wanted.partition_index)
    if partition is None:
        return _Partition(partition_index=wanted.partition_index, error_code=error)
    error = partition.leader_epoch_error(wanted.current_leader_epoch)
    if error != ErrorCode.NONE:
        return _Partition(partition_index=wanted.partition_index, error_code=error)
    try:
        offset, timestamp = _lookup(partition, wanted.timestamp, request.isolation_level)
    except LogError as exc:
        return _Partition(partition_index=wanted.partition_index, error_code=exc.kafka_error_code)
    except ValueError:  # a negative timestamp that is not a special value
        return _Partition(partition_index=wanted.partition_index, error_code=ErrorCode.INVALID_REQUEST)
    epoch = partition.leader_epochs.epoch_for_offset(offset) if offset >= 0 else -1
    if wanted.timestamp == LATEST:
        epoch = partition.leader_epoch
    return _Partition(partition_index=wanted.partition_index, error_code=ErrorCode.NONE,
                      timestamp=timestamp, offset=offset, leader_epoch=epoch)


def _partition_v0(ctx: BrokerContext, request, topic: str, wanted):
    partition, error = local_leader(ctx, topic, wanted.partition_index)
    if partition is None:
        return _Partition(partition_index=wanted.partition_index, error_code=error)
    log = partition.log
    try:
        segments = [(max(s.base_offset, log.log_start_offset), s.last_modified_ms)
                    for s in log.segments if s.next_offset > log.log_start_offset]
        if log.active_segment.size > 0:
            segments.append((log.log_end_offset, log.now_ms()))
        offsets = old_style_offsets(segments or [(log.log_start_offset, log.now_ms())],
                                    wanted.timestamp, wanted.max_num_offsets, partition.high_watermark)
    except LogError as exc:
        return _Partition(partition_index=wanted.partition_index, error_code=exc.kafka_error_code)
    except ValueError:
        return _Partition(partition_index=wanted.partition_index, error_code=ErrorCode.INVALID_REQUEST)
    return _Partition(partition_index=wanted.partition_index, error_code=ErrorCode.NONE,
                      old_style_offsets=offsets)


def old_style_offsets(points: list[tuple[int, int]], timestamp: int, max_num_offsets: int,
                      high_watermark: int) -> list[int]:
    """ListOffsets v0's answer, newest first: ``points`` are (offset, last modified ms) of each
    live segment's base (and the log end with "now" when the active segment holds data), oldest
    first. Latest (-1) starts from the last point, earliest (-2) from the first, a timestamp from
    the last point modified at or before it (none: an empty list); at most ``max_num_offsets``
    offsets. A consumer may not see past the high watermark, so offsets above it give way to it
    (Kafka's ``fetchOffsets`` for a non-replica)."""
    if timestamp == LATEST:
        start = len(points) - 1
    elif timestamp == EARLIEST:
        start = 0
    elif timestamp >= 0:
        start = max((i for i, (_, modified) in enumerate(points) if modified <= timestamp), default=-1)
    else:
        raise ValueError(f"timestamp {timestamp} is neither >= 0 nor -1/-2 (v0)")
    offsets = [offset for offset, _ in reversed(points[:start + 1])]
    if offsets and offsets[0] > high_watermark:
        offsets = [high_watermark] + [o for o in offsets if o < high_watermark]
    return offsets[:max(max_num_offsets, 0)]


def _lookup(partition: Partition, timestamp: int, isolation_level: int) -> tuple[int, int]:
    fetchable = (partition.last_stable_offset if isolation_level == ISOLATION_READ_COMMITTED
                 else partition.high_watermark)
    if timestamp == LATEST:
        return fetchable, -1
    if timestamp == EARLIEST:
        return partition.log.log_start_offset, -1
    found = partition.log.offset_for_timestamp(timestamp)
    if found is None or found[0] >= fetchable:
        return -1, -1
    return found


def error_response(header, request, error_code: int) -> ListOffsetsResponse:
    return ListOffsetsResponse(topics=[
        _Topic(name=t.name, partitions=[_Partition(partition_index=p.partition_index,
                                                   error_code=error_code) for p in t.partitions])
        for t in request.topics
    ])
