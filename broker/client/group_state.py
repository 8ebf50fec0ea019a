"""The pure part of classic group membership: the member's state and generation, what each
coordinator error means for it, and the three timers of Java's ``Heartbeat`` (session, heartbeat,
poll). No I/O and no clock of its own: ``group_membership`` feeds it answers and times.

Member states (Java ``AbstractCoordinator.MemberState``)::

    UNJOINED --JoinGroup sent--> PREPARING_REBALANCE --JoinGroup answered--> COMPLETING_REBALANCE
        ^                                                                         |
        +----- error / leave / poll timeout ------ STABLE <--- SyncGroup answered +

Heartbeats go out only in STABLE. A member id survives ILLEGAL_GENERATION and
REBALANCE_IN_PROGRESS (the member rejoins as itself) but not UNKNOWN_MEMBER_ID (it joins as a new
member, KIP-394's handshake gives it a fresh id).

What an answer's error code asks of the member (Java's Join/Sync/HeartbeatResponseHandler):

=========================================  ================================================
NONE                                       go on
MEMBER_ID_REQUIRED                         take the id from the answer, join again at once
REBALANCE_IN_PROGRESS                      rejoin, same member id and generation
ILLEGAL_GENERATION                         forget the generation, rejoin as the same member
UNKNOWN_MEMBER_ID                          forget member id and generation, rejoin
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE look the coordinator up again, then retry
COORDINATOR_LOAD_IN_PROGRESS, timeouts     retry after ``retry.backoff.ms``
FENCED_INSTANCE_ID and everything else     fatal: raised to the application
=========================================  ================================================
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from broker.client.errors import KafkaError
from broker.wire import ErrorCode

__all__ = [
    "MemberState",
    "Generation",
    "NO_GENERATION",
    "Action",
    "action_for",
    "Timers",
    "CommitFailedError",
    "RebalanceInProgressError",
    "FencedInstanceIdError",
    "commit_error",
]


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    PREPARING_REBALANCE = "preparing_rebalance"
    COMPLETING_REBALANCE = "completing_rebalance"
    STABLE = "stable"


@dataclass(frozen=True)
class Generation:
    """What the coordinator said in the last JoinGroup answer; sent with every group request."""

    generation_id: int = -1
    member_id: str = ""
    protocol_name: str | None = None

    def without_generation(self) -> "Generation":
        """After ILLEGAL_GENERATION: the member keeps its id (Java ``resetGenerationOnResponseError``)."""
        return Generation(-1, self.member_id, None)


NO_GENERATION = Generation()


class Action(enum.Enum):
    OK = "ok"
    RETRY = "retry"  # same request again after retry.backoff.ms
    JOIN_NOW = "join_now"  # MEMBER_ID_REQUIRED: join again at once with the given id
    REJOIN = "rejoin"  # keep member id and generation
    RESET_GENERATION = "reset_generation"  # keep the member id
    RESET_MEMBER = "reset_member"  # forget member id and generation
    FIND_COORDINATOR = "find_coordinator"
    FATAL = "fatal"


_ACTIONS = {
    ErrorCode.NONE: Action.OK,
    ErrorCode.MEMBER_ID_REQUIRED: Action.JOIN_NOW,
    ErrorCode.REBALANCE_IN_PROGRESS: Action.REJOIN,
    ErrorCode.ILLEGAL_GENERATION: Action.RESET_GENERATION,
    ErrorCode.UNKNOWN_MEMBER_ID: Action.RESET_MEMBER,
    ErrorCode.NOT_COORDINATOR: Action.FIND_COORDINATOR,
    ErrorCode.COORDINATOR_NOT_AVAILABLE: Action.FIND_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS: Action.RETRY,
    ErrorCode.REQUEST_TIMED_OUT: Action.RETRY,
    ErrorCode.NETWORK_EXCEPTION: Action.FIND_COORDINATOR,
}


def action_for(code: int) -> Action:
    """What a JoinGroup, SyncGroup or Heartbeat error code asks of the member (table above)."""
    return _ACTIONS.get(code, Action.FATAL)


class Timers:
    """Java ``Heartbeat``: when the next heartbeat is due, whether the session is lost (no
    successful heartbeat for ``session_timeout_ms``) and whether the application stopped calling
    ``poll`` for ``max_poll_interval_ms`` (then the member must leave, KIP-62)."""

    def __init__(self, *, session_timeout_ms: int, heartbeat_interval_ms: int,
                 max_poll_interval_ms: int, retry_backoff_ms: int, now_ms: float) -> None:
        if heartbeat_interval_ms >= session_timeout_ms:
            raise ValueError(f"heartbeat.interval.ms ({heartbeat_interval_ms}) must be lower than "
                             f"session.timeout.ms ({session_timeout_ms})")
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.max_poll_interval_ms = max_poll_interval_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._heartbeat_due_ms = now_ms + heartbeat_interval_ms
        self._session_deadline_ms = now_ms + session_timeout_ms
        self._poll_deadline_ms = now_ms + max_poll_interval_ms
        self.heartbeat_in_flight = False

    def polled(self, now_ms: float) -> None:
        self._poll_deadline_ms = now_ms + self.max_poll_interval_ms

    def reset_session(self, now_ms: float) -> None:
        """A new generation (or a rejoin): the session and heartbeat clocks start over."""
        self._session_deadline_ms = now_ms + self.session_timeout_ms
        self._heartbeat_due_ms = now_ms + self.heartbeat_interval_ms
        self.heartbeat_in_flight = False

    def sent_heartbeat(self, now_ms: float) -> None:
        self.heartbeat_in_flight = True
        self._heartbeat_due_ms = now_ms + self.heartbeat_interval_ms

    def heartbeat_succeeded(self, now_ms: float) -> None:
        self.heartbeat_in_flight = False
        self._session_deadline_ms = now_ms + self.session_timeout_ms

    def heartbeat_failed(self, now_ms: float) -> None:
        """Retry sooner than the interval (Java: after retry.backoff.ms)."""
        self.heartbeat_in_flight = False
        self._heartbeat_due_ms = min(self._heartbeat_due_ms, now_ms + self.retry_backoff_ms)

    def heartbeat_due(self, now_ms: float) -> bool:
        return not self.heartbeat_in_flight and now_ms >= self._heartbeat_due_ms

    def session_expired(self, now_ms: float) -> bool:
        return now_ms >= self._session_deadline_ms

    def poll_expired(self, now_ms: float) -> bool:
        return now_ms >= self._poll_deadline_ms

    def ms_to_next(self, now_ms: float) -> float:
        """How long the heartbeat thread may sleep before something is due."""
        return max(0.0, min(self._heartbeat_due_ms, self._session_deadline_ms, self._poll_deadline_ms) - now_ms)


# ---------------------------------------------------------------------- commit errors

class CommitFailedError(KafkaError):
    """The commit cannot succeed: this member's generation is gone (it was removed from the
    group, or the group rebalanced without it), so its partitions may already belong to another
    member. Java ``CommitFailedException``; rejoin (the next poll does) before committing again."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(code, message or (
            "Commit cannot be completed since the group has already rebalanced and assigned the "
            "partitions to another member: the time between polls may have exceeded "
            "max.poll.interval.ms, or the member was removed after session.timeout.ms"))

    def __reduce__(self):
        return (type(self), (self.code, self.message))


class RebalanceInProgressError(KafkaError):
    """The group is rebalancing: poll (which rejoins), then commit again."""

    def __reduce__(self):
        return (type(self), (self.code, self.message))


class FencedInstanceIdError(KafkaError):
    """Another member with this ``group.instance.id`` joined: this one is fenced for good."""

    def __reduce__(self):
        return (type(self), (self.code, self.message))


_COMMIT_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT,
                           ErrorCode.UNKNOWN_TOPIC_OR_PARTITION})
_COMMIT_FIND_COORDINATOR = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                      ErrorCode.NETWORK_EXCEPTION})


def commit_error(code: int, context: str) -> tuple[Action, KafkaError]:
    """An OffsetCommit partition error -> what to do and the error to raise if it stays
    (Java ``OffsetCommitResponseHandler``)."""
    if code in _COMMIT_FIND_COORDINATOR:
        return Action.FIND_COORDINATOR, KafkaError(code, context)
    if code in _COMMIT_RETRY:
        return Action.RETRY, KafkaError(code, context)
    if code == ErrorCode.REBALANCE_IN_PROGRESS:
        return Action.REJOIN, RebalanceInProgressError(code, f"{context}: the group is rebalancing; "
                                                       "poll to rejoin, then commit again")
    if code == ErrorCode.ILLEGAL_GENERATION:
        return Action.RESET_GENERATION, CommitFailedError(code)
    if code == ErrorCode.UNKNOWN_MEMBER_ID:
        return Action.RESET_MEMBER, CommitFailedError(code)
    if code == ErrorCode.FENCED_INSTANCE_ID:
        return Action.FATAL, FencedInstanceIdError(code, f"{context}: {KafkaError(code).message}")
    return Action.FATAL, KafkaError(code, f"{context}: {KafkaError(code).message}")
