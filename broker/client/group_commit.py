"""Committed offsets of a group, through its coordinator: OffsetCommit (sync and async) and
OffsetFetch (Java ``ConsumerCoordinator.commitOffsetsSync/Async`` and ``fetchCommittedOffsets``).

Which generation a commit carries (Java ``sendOffsetCommitRequest``): a member of a group
(``subscribe``) commits with its generation and member id, and only while STABLE — during a
rebalance the commit fails with ``RebalanceInProgressError``, and without a generation with
``CommitFailedError``. A consumer with ``assign`` commits as a "simple" member (generation -1,
empty member id), which the coordinator accepts while the group has no active members.

Errors: NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE look the coordinator up again and the commit
is retried, as are COORDINATOR_LOAD_IN_PROGRESS and timeouts, until the deadline
(``default.api.timeout.ms``); ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID end the generation (the
next poll rejoins) and raise ``CommitFailedError``; everything else raises (``group_state.commit_error``).

Async commits are pipelined on the owner thread's coordinator connection (at most
``inflight_requests_max`` outstanding; one more waits for the oldest) and their callbacks run
from ``poll`` or before the next synchronous group request, in the order they were sent. They are
not retried (Java neither: a later commit supersedes them).
"""

from __future__ import annotations

import select
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Callable, Mapping

from broker.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from broker.client.group_membership import GroupMembership
from broker.client.group_state import (
    Action,
    CommitFailedError,
    Generation,
    MemberState,
    RebalanceInProgressError,
    commit_error,
)
from broker.wire import ApiKey, ErrorCode, OffsetCommitRequest

__all__ = ["OffsetAndMetadata", "GroupOffsets", "CommitCallback"]

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class OffsetAndMetadata:
    """A committed position: the next offset to consume, and free text (``offset.metadata``)."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


CommitCallback = Callable[[Mapping[TopicPartition, OffsetAndMetadata], "KafkaError | None"], None]

_SIMPLE = Generation(-1, "", None)
_CommitTopic = OffsetCommitRequest.OffsetCommitRequestTopic
_CommitPartition = OffsetCommitRequest.OffsetCommitRequestPartition
_FETCH_RETRY = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNSTABLE_OFFSET_COMMIT,
                          ErrorCode.REQUEST_TIMED_OUT})
_FETCH_FIND_COORDINATOR = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})


class GroupOffsets:
    """Commits and fetches for one group; owner thread only."""

    def __init__(self, membership: GroupMembership, *, subscribed: Callable[[], bool]) -> None:
        self._membership = membership
        self._subscribed = subscribed
        self._clock = membership._clock
        self._config = membership._config
        self._pending: deque[tuple[object, dict, CommitCallback | None, Generation]] = deque()
        self.stats = {"commits": 0, "async_commits": 0, "offset_fetches": 0}

    @property
    def group_id(self) -> str:
        return self._membership.settings.group_id

    # ------------------------------------------------------------------ commit

    def _generation_for_commit(self) -> Generation:
        if not self._subscribed():
            return _SIMPLE
        membership = self._membership
        generation = membership.generation
        if membership.state == MemberState.STABLE and generation.generation_id >= 0:
            return generation
        if membership.state in (MemberState.PREPARING_REBALANCE, MemberState.COMPLETING_REBALANCE) or \
                generation.member_id:
            raise RebalanceInProgressError(ErrorCode.REBALANCE_IN_PROGRESS,
                                           "the group is rebalancing: poll to rejoin, then commit again")
        raise CommitFailedError(ErrorCode.ILLEGAL_GENERATION)

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: float) -> None:
        """Commit and wait (retrying coordinator moves) until ``timeout_ms``."""
        self.drain(block=True)
        pending = dict(offsets)
        deadline = self._clock.monotonic_ms() + timeout_ms
        while pending:
            generation = self._generation_for_commit()
            conn = self._membership.coordinator_connection(deadline)
            try:
                response = conn.request(ApiKey.OFFSET_COMMIT, self._commit_body(pending, generation),
                                        conn.version_for(ApiKey.OFFSET_COMMIT, min_version=2))
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last, action = exc, Action.FIND_COORDINATOR
            else:
                self.stats["commits"] += 1
                last, action = self._take_commit_answer(response, pending)
            if last is None:
                return
            if action not in (Action.RETRY, Action.FIND_COORDINATOR) or self._clock.monotonic_ms() >= deadline:
                raise last
            if action == Action.FIND_COORDINATOR:
                self._membership.mark_coordinator_unknown()
            self._clock.sleep_ms(self._config.retry_backoff_ms)

    def _take_commit_answer(self, response, pending: dict) -> tuple[KafkaError | None, Action]:
        """Drop committed partitions from ``pending``; the most serious error and its action."""
        worst: tuple[KafkaError | None, Action] = (None, Action.OK)
        rank = [Action.OK, Action.RETRY, Action.FIND_COORDINATOR, Action.REJOIN,
                Action.RESET_GENERATION, Action.RESET_MEMBER, Action.FATAL]
        for topic in response.topics:
            for p in topic.partitions:
                tp = (topic.name, p.partition_index)
                if p.error_code == ErrorCode.NONE:
                    pending.pop(tp, None)
                    continue
                action, error = commit_error(p.error_code, f"OffsetCommit of {tp[0]}-{tp[1]} for group "
                                                           f"{self.group_id!r}")
                if rank.index(action) > rank.index(worst[1]):
                    worst = (error, action)
        error, action = worst
        if action in (Action.RESET_GENERATION, Action.RESET_MEMBER):
            self._membership.reset_generation(action, f"OffsetCommit: {error.name}")
        elif action == Action.REJOIN:
            self._membership.request_rejoin("OffsetCommit: the group is rebalancing")
        if error is None and pending:
            missing = ", ".join(f"{t}-{p}" for t, p in sorted(pending))
            return KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"OffsetCommit: no answer for {missing}"), Action.FATAL
        return error, action

    def _commit_body(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     generation: Generation) -> OffsetCommitRequest:
        """The request as wire objects, not a dict: coercing a dict's nested fields cost about
        a tenth of the client's CPU per commit_async (issue 14)."""
        topics: dict[str, list] = defaultdict(list)
        for (topic, partition), om in sorted(offsets.items()):
            topics[topic].append(_CommitPartition(partition_index=partition, committed_offset=om.offset,
                                                  committed_leader_epoch=om.leader_epoch,
                                                  committed_metadata=om.metadata))
        return OffsetCommitRequest(
            group_id=self.group_id, generation_id_or_member_epoch=generation.generation_id,
            member_id=generation.member_id,
            group_instance_id=self._membership.settings.group_instance_id if generation.member_id else None,
            topics=[_CommitTopic(name=name, partitions=parts) for name, parts in topics.items()])

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     callback: CommitCallback | None) -> None:
        """Send without waiting; ``callback(offsets, error)`` runs from a later ``drain``."""
        offsets = dict(offsets)
        try:
            generation = self._generation_for_commit()
            conn = self._membership.coordinator_connection(self._clock.monotonic_ms())
            if conn.in_flight_count >= self._config.inflight_requests_max:
                self._take_oldest()
                conn = self._membership.coordinator_connection(self._clock.monotonic_ms())
            conn.send(ApiKey.OFFSET_COMMIT, self._commit_body(offsets, generation),
                      conn.version_for(ApiKey.OFFSET_COMMIT, min_version=2))
        except KafkaError as exc:
            if exc.retriable:
                self._membership.mark_coordinator_unknown()
            if callback is not None:
                callback(offsets, exc)
            return
        self.stats["async_commits"] += 1
        self._pending.append((conn, offsets, callback, generation))

    def drain(self, block: bool) -> None:
        """Complete async commits whose answers are in (all of them with ``block``)."""
        while self._pending:
            conn = self._pending[0][0]
            if not block and conn.selectable is not None and not conn.buffered:
                readable, _, _ = select.select([conn.selectable], [], [], 0)
                if not readable:
                    return
            self._take_oldest()

    def _take_oldest(self) -> None:
        conn, offsets, callback, _ = self._pending.popleft()
        error: KafkaError | None
        try:
            if not conn.in_flight_count:
                raise KafkaConnectionError("the coordinator connection was closed before the answer")
            pending = dict(offsets)
            error, _ = self._take_commit_answer(conn.receive(), pending)
        except KafkaError as exc:
            error = exc
            self._membership.mark_coordinator_unknown()
        if callback is not None:
            callback(offsets, error)

    @property
    def async_in_flight(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------------ fetch

    def fetch(self, partitions: list[TopicPartition], timeout_ms: float) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """Committed offsets (None where the group has none), retried until ``timeout_ms``."""
        if not partitions:
            return {}
        self.drain(block=True)
        deadline = self._clock.monotonic_ms() + timeout_ms
        while True:
            conn = self._membership.coordinator_connection(deadline)
            try:
                version = conn.version_for(ApiKey.OFFSET_FETCH, min_version=1)
                response = conn.request(ApiKey.OFFSET_FETCH, self._fetch_body(partitions, version), version)
                self.stats["offset_fetches"] += 1
                result, code = self._take_fetch_answer(response, version, partitions)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                result, code, last = None, ErrorCode.NETWORK_EXCEPTION, exc
            else:
                last = KafkaError(code, f"OffsetFetch for group {self.group_id!r}")
            if result is not None:
                return result
            if code in _FETCH_FIND_COORDINATOR or code == ErrorCode.NETWORK_EXCEPTION:
                self._membership.mark_coordinator_unknown()
            elif code not in _FETCH_RETRY:
                raise last
            if self._clock.monotonic_ms() >= deadline:
                raise last
            self._clock.sleep_ms(self._config.retry_backoff_ms)

    def _fetch_body(self, partitions: list[TopicPartition], version: int) -> dict:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in sorted(set(partitions)):
            by_topic[topic].append(partition)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
        if version >= 8:
            return {"groups": [{"group_id": self.group_id, "member_id": None, "member_epoch": -1,
                                "topics": topics}], "require_stable": True}
        return {"group_id": self.group_id, "topics": topics, "require_stable": True}

    def _take_fetch_answer(self, response, version: int, partitions: list[TopicPartition]):
        """(result, NONE) or (None, the error code to act on)."""
        if version >= 8:
            group = response.groups[0]
            top_code, topics = group.error_code, group.topics
        else:
            top_code, topics = getattr(response, "error_code", 0), response.topics
        if top_code != ErrorCode.NONE:
            return None, top_code
        result: dict[TopicPartition, OffsetAndMetadata | None] = {tp: None for tp in partitions}
        for topic in topics:
            for p in topic.partitions:
                if p.error_code != ErrorCode.NONE:
                    return None, p.error_code
                tp = (topic.name, p.partition_index)
                if tp in result and p.committed_offset >= 0:
                    result[tp] = OffsetAndMetadata(p.committed_offset, p.metadata or "",
                                                   getattr(p, "committed_leader_epoch", -1))
        return result, ErrorCode.NONE
