"""CreatePartitions and DeleteRecords from the client side (``pylog topics alter --partitions``,
``pylog delete-records``): CreatePartitions to the controller, retried while it moves, as Kafka's
admin client sends it; DeleteRecords to each partition's leader."""

from __future__ import annotations

from typing import Mapping, Sequence

from broker.client.admin import AdminClient, _raise_first
from broker.wire import ApiKey, ErrorCode

__all__ = ["create_partitions", "delete_records", "elect_leaders", "alter_partition_reassignments",
           "list_partition_reassignments"]


def create_partitions(admin: AdminClient, topic: str, count: int,
                      assignments: Sequence[Sequence[int]] | None = None, validate_only: bool = False) -> None:
    """Grow ``topic`` to ``count`` partitions (``assignments``: replicas of each new one);
    KafkaError if refused. Returns once Metadata shows a leader for every partition."""
    body = {"topics": [{"name": topic, "count": count,
                        "assignments": None if assignments is None else
                        [{"broker_ids": list(replicas)} for replicas in assignments]}],
            "timeout_ms": admin.config.request_timeout_ms, "validate_only": validate_only}
    _raise_first(admin._to_controller(ApiKey.CREATE_PARTITIONS, body, 0, lambda r: [
        (t.name, t.error_code, t.error_message) for t in r.results]))
    admin.cluster.invalidate(topic)
    if not validate_only:
        admin._wait_for_leaders([topic], admin.config.request_timeout_ms)


def delete_records(admin: AdminClient, offsets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], tuple[int, int]]:
    """DeleteRecords to each partition's leader: (topic, partition) -> offset (-1: the high
    watermark). Returns (topic, partition) -> (low watermark, error code) as the leaders answer."""
    snapshot = admin.cluster.refresh(sorted({t for t, _ in offsets}))
    by_leader: dict[int, dict[str, list[tuple[int, int]]]] = {}
    answers: dict[tuple[str, int], tuple[int, int]] = {}
    for (topic, index), offset in sorted(offsets.items()):
        meta = snapshot.topics.get(topic)
        partition = meta.partitions.get(index) if meta is not None else None
        if partition is None or partition.leader < 0:
            answers[(topic, index)] = (-1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if partition is None
                                       else ErrorCode.LEADER_NOT_AVAILABLE)
            continue
        by_leader.setdefault(partition.leader, {}).setdefault(topic, []).append((index, offset))
    for leader, topics in sorted(by_leader.items()):
        conn = admin.cluster.connection(leader)
        response = conn.request(ApiKey.DELETE_RECORDS, {
            "topics": [{"name": t, "partitions": [{"partition_index": p, "offset": o} for p, o in parts]}
                       for t, parts in sorted(topics.items())],
            "timeout_ms": admin.config.request_timeout_ms}, conn.version_for(ApiKey.DELETE_RECORDS))
        for topic in response.topics:
            for p in topic.partitions:
                answers[(topic.name, p.partition_index)] = (p.low_watermark, p.error_code)
    return answers


def elect_leaders(admin: AdminClient, election_type: int,
                  partitions: Sequence[tuple[str, int]] | None) -> dict[tuple[str, int], tuple[int, str | None]]:
    """ElectLeaders on the controller (0 preferred, 1 unclean; None: every partition):
    (topic, partition) -> (error code, message)."""
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions or ():
        topics.setdefault(topic, []).append(partition)
    body = {"election_type": election_type, "timeout_ms": admin.config.request_timeout_ms,
            "topic_partitions": None if partitions is None else
            [{"topic": t, "partitions": ps} for t, ps in sorted(topics.items())]}
    answers: dict[tuple[str, int], tuple[int, str | None]] = {}

    def results(response):
        answers.clear()
        for topic in response.replica_election_results:
            for p in topic.partition_result:
                answers[(topic.topic, p.partition_id)] = (p.error_code, p.error_message)
        return [("", response.error_code, None)]

    _raise_first(admin._to_controller(ApiKey.ELECT_LEADERS, body, 1 if election_type else 0, results))
    return answers


def alter_partition_reassignments(admin: AdminClient, wanted: Mapping[tuple[str, int], Sequence[int] | None]
                                  ) -> dict[tuple[str, int], tuple[int, str | None]]:
    """AlterPartitionReassignments on the controller: target replicas per partition (None
    cancels); (topic, partition) -> (error code, message)."""
    topics: dict[str, list] = {}
    for (topic, partition), replicas in sorted(wanted.items()):
        topics.setdefault(topic, []).append({"partition_index": partition,
                                             "replicas": None if replicas is None else list(replicas)})
    body = {"timeout_ms": admin.config.request_timeout_ms,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
    answers: dict[tuple[str, int], tuple[int, str | None]] = {}

    def results(response):
        answers.clear()
        for topic in response.responses:
            for p in topic.partitions:
                answers[(topic.name, p.partition_index)] = (p.error_code, p.error_message)
        return [("", response.error_code, response.error_message)]

    _raise_first(admin._to_controller(ApiKey.ALTER_PARTITION_REASSIGNMENTS, body, 0, results))
    return answers


def list_partition_reassignments(admin: AdminClient) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
    """(topic, partition) -> (replicas, adding, removing) of every reassignment in progress."""
    found: dict[tuple[str, int], tuple[list[int], list[int], list[int]]] = {}

    def results(response):
        found.clear()
        for topic in response.topics:
            for p in topic.partitions:
                found[(topic.name, p.partition_index)] = (list(p.replicas), list(p.adding_replicas),
                                                          list(p.removing_replicas))
        return [("", response.error_code, response.error_message)]

    _raise_first(admin._to_controller(ApiKey.LIST_PARTITION_REASSIGNMENTS,
                                      {"timeout_ms": admin.config.request_timeout_ms, "topics": None}, 0, results))
    return found
