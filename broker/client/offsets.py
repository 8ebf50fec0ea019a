"""ListOffsets: the offset for a timestamp, the earliest offset or the latest, per partition.

Used by the admin client (``list_offsets``) and the consumer (``seek_to_beginning/end``, the
``auto_offset_reset`` policy). Requests go to each partition's leader, grouped per leader; a
partition whose leader moved (NOT_LEADER_OR_FOLLOWER, ...) is retried after a metadata refresh
until ``request_timeout_ms``.

Special timestamps (ListOffsetsRequest.json): -1 latest (the high watermark, or the last stable
offset with read_committed), -2 earliest (log start offset), -3 the record with the largest
timestamp (v7+). For a real timestamp the broker answers the first offset whose timestamp is
>= it, or offset -1 when there is none.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Mapping

from broker.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from broker.client.metadata import Cluster
from broker.wire import ApiKey, ErrorCode

__all__ = [
    "LATEST_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "ISOLATION_LEVELS",
    "offset_spec_timestamp",
    "isolation_level_code",
    "list_offsets",
]

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}
_RETRY_CODES = frozenset({ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT})

TopicPartition = tuple[str, int]


def offset_spec_timestamp(spec: str | int) -> int:
    """``"earliest"`` -> -2, ``"latest"`` -> -1, ``"max_timestamp"`` -> -3, a timestamp in
    milliseconds (int >= 0, or its decimal text) -> itself."""
    if isinstance(spec, bool):
        raise ValueError(f"invalid offset spec {spec!r}")
    if isinstance(spec, int):
        if spec < 0:
            raise ValueError(f"a timestamp offset spec must be >= 0 ms, got {spec}")
        return spec
    text = str(spec).strip().lower()
    named = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "max_timestamp": MAX_TIMESTAMP}
    if text in named:
        return named[text]
    if text.isdigit():
        return int(text)
    raise ValueError(f"invalid offset spec {spec!r}: use earliest, latest or a timestamp in ms")


def isolation_level_code(level: str) -> int:
    try:
        return ISOLATION_LEVELS[level]
    except KeyError:
        raise ValueError(
            f"invalid isolation level {level!r}: use read_uncommitted or read_committed"
        ) from None


def list_offsets(
    cluster: Cluster,
    timestamps: Mapping[TopicPartition, int],
    isolation_level: int = 0,
) -> dict[TopicPartition, tuple[int, int]]:
    """``{(topic, partition): timestamp}`` to ``{(topic, partition): (offset, timestamp)}``."""
    clock, config = cluster.clock, cluster.config
    deadline = clock.monotonic_ms() + config.request_timeout_ms
    pending = dict(timestamps)
    result: dict[TopicPartition, tuple[int, int]] = {}
    while True:
        last_error = _list_offsets_round(cluster, pending, isolation_level, result)
        if not pending:
            return result
        if last_error is None:  # a leader's answer left some partitions out
            missing = ", ".join(f"{t}-{p}" for t, p in sorted(pending))
            last_error = KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"ListOffsets: no answer for {missing}")
        if clock.monotonic_ms() >= deadline:
            raise last_error
        clock.sleep_ms(config.retry_backoff_ms)


def _list_offsets_round(cluster, pending, isolation_level, result) -> KafkaError | None:
    """One request per leader; fills ``result`` and removes finished partitions from
    ``pending``. Returns the last retriable error (raises non-retriable ones)."""
    last_error: KafkaError | None = None
    by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
    for tp in pending:
        leader = cluster.leader_for(*tp)
        if leader < 0:
            cluster.invalidate(tp[0])
            last_error = KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"{tp[0]}-{tp[1]} has no leader")
            continue
        by_leader[leader].append(tp)
    for leader, tps in by_leader.items():
        try:
            conn = cluster.connection(leader)
            version = conn.version_for(ApiKey.LIST_OFFSETS, min_version=2 if isolation_level else 1)
            response = conn.request(ApiKey.LIST_OFFSETS, _request(tps, pending, isolation_level), version)
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            cluster.invalidate()
            last_error = exc
            continue
        for topic in response.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if tp not in pending:
                    continue
                if p.error_code == ErrorCode.NONE:
                    result[tp] = (p.offset, p.timestamp)
                    del pending[tp]
                elif cluster.on_partition_error(tp[0], p.error_code) or p.error_code in _RETRY_CODES:
                    last_error = KafkaError(p.error_code, f"ListOffsets for {tp[0]}-{tp[1]}")
                else:
                    raise KafkaError(p.error_code, f"ListOffsets for {tp[0]}-{tp[1]}: "
                                     f"{KafkaError(p.error_code).message}")
    return last_error


def _request(tps: list[TopicPartition], timestamps, isolation_level: int) -> dict:
    topics: dict[str, list[dict]] = defaultdict(list)
    for topic, partition in tps:
        topics[topic].append({"partition_index": partition, "timestamp": timestamps[(topic, partition)]})
    return {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [{"name": name, "partitions": parts} for name, parts in topics.items()],
    }
