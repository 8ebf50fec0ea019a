"""A scripted classic-group coordinator for the client's membership tests: a ``FakeBroker``
that answers ApiVersions, Metadata (itself, no topics), FindCoordinator (itself), and JoinGroup / SyncGroup / Heartbeat /
LeaveGroup / OffsetCommit / OffsetFetch from per-API queues of scripted answers, falling back to
a one-member group's ordinary answers. It checks nothing a real coordinator checks: tests assert
on what the client sent (``requests_for``) and how it reacted to each scripted answer."""

from __future__ import annotations

import threading
from collections import defaultdict, deque

from fake_kafka import FakeBroker, api_versions_response

from broker.wire import (
    ApiKey,
    ErrorCode,
    FindCoordinatorResponse,
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    MetadataResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)
from broker.wire.consumer_protocol import encode_assignment

__all__ = ["ScriptedCoordinator", "assignment_bytes"]


def assignment_bytes(partitions: dict[str, list[int]]) -> bytes:
    return encode_assignment({"assigned_partitions": [{"topic": t, "partitions": ps} for t, ps in partitions.items()],
                              "user_data": None}, 3)


class ScriptedCoordinator:
    """``script(api_key, answer)`` queues an answer (a response message, or a callable taking
    the request). Unscripted: JoinGroup makes the caller the leader of generation ``generation``
    with member id ``member_id``; SyncGroup answers ``assignment``."""

    def __init__(self, member_id: str = "member-1", generation: int = 1,
                 assignment: bytes = b"") -> None:
        self.member_id = member_id
        self.generation = generation
        self.assignment = assignment
        self._scripts: dict[int, deque] = defaultdict(deque)
        self._lock = threading.Lock()
        self.broker = FakeBroker(self._handle)

    @property
    def bootstrap(self) -> str:
        return self.broker.address

    def script(self, api_key: int, *answers) -> None:
        with self._lock:
            self._scripts[api_key].extend(answers)

    def requests(self, api_key: int) -> list:
        return [r for _, r in self.broker.requests_for(api_key)]

    def close(self) -> None:
        self.broker.close()

    def __enter__(self) -> "ScriptedCoordinator":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _handle(self, header, request):
        if header.api_key == ApiKey.API_VERSIONS:
            return api_versions_response()
        if header.api_key == ApiKey.FIND_COORDINATOR:
            return self._find_coordinator(header)
        if header.api_key == ApiKey.METADATA:  # this broker only, no topics: nothing to assign
            return MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(
                node_id=0, host="127.0.0.1", port=self.broker.port)], cluster_id="scripted", controller_id=0,
                topics=[MetadataResponse.MetadataResponseTopic(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=t.name, partitions=[])
                    for t in (request.topics or [])])
        with self._lock:
            queue = self._scripts.get(header.api_key)
            scripted = queue.popleft() if queue else None
        if scripted is not None:
            return scripted(request) if callable(scripted) else scripted
        return self._default(header.api_key, request)

    def _find_coordinator(self, header):
        if header.api_version >= 4:
            return FindCoordinatorResponse(coordinators=[FindCoordinatorResponse.Coordinator(
                key="g", node_id=0, host="127.0.0.1", port=self.broker.port, error_code=0, error_message=None)])
        return FindCoordinatorResponse(error_code=0, node_id=0, host="127.0.0.1", port=self.broker.port)

    def _default(self, api_key: int, request):
        if api_key == ApiKey.JOIN_GROUP:
            members = [JoinGroupResponse.JoinGroupResponseMember(
                member_id=self.member_id, group_instance_id=request.group_instance_id,
                metadata=request.protocols[0].metadata)]
            return JoinGroupResponse(error_code=0, generation_id=self.generation,
                                     protocol_type="consumer", protocol_name=request.protocols[0].name,
                                     leader=self.member_id, member_id=self.member_id, members=members)
        if api_key == ApiKey.SYNC_GROUP:
            return SyncGroupResponse(error_code=0, protocol_type="consumer", protocol_name=request.protocol_name,
                                     assignment=self.assignment)
        if api_key == ApiKey.HEARTBEAT:
            return HeartbeatResponse(error_code=0)
        if api_key == ApiKey.LEAVE_GROUP:
            return LeaveGroupResponse(error_code=0, members=[])
        if api_key == ApiKey.OFFSET_COMMIT:
            return OffsetCommitResponse(topics=[OffsetCommitResponse.OffsetCommitResponseTopic(
                name=t.name, partitions=[OffsetCommitResponse.OffsetCommitResponsePartition(
                    partition_index=p.partition_index, error_code=ErrorCode.NONE) for p in t.partitions])
                for t in request.topics])
        if api_key == ApiKey.OFFSET_FETCH:
            return OffsetFetchResponse(groups=[OffsetFetchResponse.OffsetFetchResponseGroup(
                group_id=g.group_id, error_code=0, topics=[]) for g in request.groups])
        raise AssertionError(f"unscripted api key {api_key}")
