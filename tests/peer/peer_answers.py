"""What a broker answered, reduced to what a client acts on: error code names, offsets, record
errors; never free-text messages. The peer tier's error tests call these on each side with the
same request and compare the results (``compare``).
"""

from __future__ import annotations

from wire_probe import connect, highest_common_version, produce_partition, produce_request

from broker.wire import (
    ApiKey,
    CreateTopicsRequest,
    ErrorCode,
    FetchRequest,
    ListOffsetsRequest,
    MetadataRequest,
)

__all__ = ["OLDER_VERSIONS", "compared_versions", "compare", "produce_answer", "fetch_answer",
           "list_offsets_answer", "metadata_answer", "create_topics_answer", "create_answer"]

# Older versions still sent by the clients pylog targets (librdkafka 2.16: Produce 7, Fetch 11,
# ListOffsets 5 (its default), Metadata 9 or older; kafka-python: Metadata 8).
OLDER_VERSIONS = {ApiKey.PRODUCE: 7, ApiKey.FETCH: 11, ApiKey.LIST_OFFSETS: 5, ApiKey.METADATA: 8}
_COMPARED_APIS = (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS, ApiKey.METADATA, ApiKey.CREATE_TOPICS,
                  ApiKey.DELETE_TOPICS)


def compared_versions(peers) -> dict[int, list[int]]:
    """Per API, the versions both sides are compared at: the highest both advertise, and the
    older one of ``OLDER_VERSIONS``."""
    chosen = {}
    for key in _COMPARED_APIS:
        high = highest_common_version(peers, key)
        chosen[key] = sorted({high, OLDER_VERSIONS.get(key, high)})
    return chosen


def compare(peers, observe) -> dict[str, object]:
    """``observe(peer)`` on each side; returns {"kafka": ..., "pylog": ...}."""
    return {peer.name: observe(peer) for peer in peers}


def produce_answer(peer, version: int, topic: str, batch: bytes, acks: int = -1):
    with connect(peer) as raw:
        partition = produce_partition(raw, version, produce_request(topic, batch, acks=acks))
    return (ErrorCode(partition.error_code).name, partition.base_offset,
            partition.log_append_time_ms, partition.log_start_offset,
            [e.batch_index for e in partition.record_errors])


def fetch_answer(peer, version: int, topic: str, offset: int, partition: int = 0, leader_epoch: int = -1):
    request = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
            partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20,
            current_leader_epoch=leader_epoch)])],
        forgotten_topics_data=[])
    with connect(peer) as raw:
        response = raw.call(ApiKey.FETCH, version, request)
    [answer] = response.responses
    [partition] = answer.partitions
    return (ErrorCode(response.error_code).name, ErrorCode(partition.error_code).name,
            partition.high_watermark, partition.last_stable_offset, partition.log_start_offset,
            bytes(partition.records or b""))


def list_offsets_answer(peer, version: int, topic: str, timestamp: int, partition: int = 0,
                        leader_epoch: int = -1):
    request = ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(
            partition_index=partition, timestamp=timestamp, current_leader_epoch=leader_epoch)])])
    with connect(peer) as raw:
        response = raw.call(ApiKey.LIST_OFFSETS, version, request)
    [answer] = response.topics
    [partition] = answer.partitions
    return ErrorCode(partition.error_code).name, partition.timestamp, partition.offset, partition.leader_epoch


def metadata_answer(peer, version: int, topic: str):
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                              allow_auto_topic_creation=False)
    with connect(peer) as raw:
        response = raw.call(ApiKey.METADATA, version, request)
    [answer] = response.topics
    return (ErrorCode(answer.error_code).name, answer.name, getattr(answer, "topic_id", None),
            answer.is_internal, len(answer.partitions))


def create_topics_answer(peer, version: int, names: list[str]) -> dict[str, str]:
    topics = [CreateTopicsRequest.CreatableTopic(name=n, num_partitions=1, replication_factor=1,
                                                 assignments=[], configs=[]) for n in names]
    with connect(peer) as raw:
        response = raw.call(ApiKey.CREATE_TOPICS, version, CreateTopicsRequest(topics=topics, timeout_ms=10_000))
    return {t.name: ErrorCode(t.error_code).name for t in response.topics}


def create_answer(peer, version: int, topics: list[dict], validate_only: bool = False) -> list[tuple]:
    request = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic.from_dict(
        {"assignments": [], "configs": [], **t}) for t in topics], timeout_ms=10_000, validate_only=validate_only)
    with connect(peer) as raw:
        response = raw.call(ApiKey.CREATE_TOPICS, version, request)
    return [(t.name, ErrorCode(t.error_code).name) for t in response.topics]
