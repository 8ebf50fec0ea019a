"""Building the group APIs' responses (``broker.wire`` classes) for a request's version.

One class covers every version; fields a version lacks are ignored by the encoder. The only
version rule here is nullability: a field that is not nullable in an old version (JoinGroup's
``protocol_name`` before v7) gets "" instead of None.
"""

from __future__ import annotations

from broker.wire.apis.heartbeat import HeartbeatResponse
from broker.wire.apis.join_group import JoinGroupResponse
from broker.wire.apis.leave_group import LeaveGroupResponse
from broker.wire.apis.sync_group import SyncGroupResponse

__all__ = ["join_error", "join_ok", "sync_response", "heartbeat_response", "leave_response",
           "JOIN_GROUP", "SYNC_GROUP", "HEARTBEAT", "LEAVE_GROUP", "OFFSET_COMMIT", "OFFSET_FETCH",
           "OFFSET_DELETE", "LIST_GROUPS", "DESCRIBE_GROUPS", "DELETE_GROUPS"]

OFFSET_COMMIT = 8
OFFSET_FETCH = 9
JOIN_GROUP = 11
HEARTBEAT = 12
LEAVE_GROUP = 13
SYNC_GROUP = 14
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
DELETE_GROUPS = 42
OFFSET_DELETE = 47

UNKNOWN_MEMBER_ID = ""


def join_error(api_version: int, error_code: int, member_id: str = UNKNOWN_MEMBER_ID):
    return JoinGroupResponse(
        error_code=error_code, generation_id=-1, member_id=member_id, leader="",
        protocol_type=None, protocol_name=None if api_version >= 7 else "", members=[])


def join_ok(api_version: int, group, member_id: str, members: list, skip_assignment: bool = False):
    """The answer of a completed join for ``member_id``: ``members`` is the full list for the
    leader, empty for followers."""
    name = group.protocol_name
    return JoinGroupResponse(
        error_code=0, generation_id=group.generation_id, member_id=member_id,
        leader=group.leader_id or "",
        protocol_type=group.protocol_type,
        protocol_name=name if name is not None or api_version >= 7 else "",
        skip_assignment=skip_assignment,
        members=members)


def join_members(group) -> list:
    cls = JoinGroupResponse.JoinGroupResponseMember
    return [cls(member_id=m.member_id, group_instance_id=m.group_instance_id,
                metadata=m.metadata_for(group.protocol_name)) for m in group.members.values()]


def sync_response(error_code: int, assignment: bytes = b"", protocol_type=None, protocol_name=None):
    return SyncGroupResponse(error_code=error_code, assignment=assignment,
                             protocol_type=protocol_type, protocol_name=protocol_name)


def heartbeat_response(error_code: int):
    return HeartbeatResponse(error_code=error_code)


def leave_response(api_version: int, error_code: int, member_results: list):
    """``member_results``: [(member id, group instance id, error code)]. Before v3 there is one
    member and its error is the top-level error (Kafka's LeaveGroupResponse does the same)."""
    if api_version < 3 and error_code == 0 and member_results:
        error_code = member_results[0][2]
    cls = LeaveGroupResponse.MemberResponse
    return LeaveGroupResponse(error_code=error_code, members=[
        cls(member_id=mid, group_instance_id=iid, error_code=code) for mid, iid, code in member_results])
