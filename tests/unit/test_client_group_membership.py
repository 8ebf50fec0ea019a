"""Classic group membership of pylog's client (``group_state``, ``group_membership``,
``group_commit``) against a scripted coordinator: the member-id handshake, what each error code
makes the member do (rejoin as itself, as a new member, look the coordinator up again, give up),
the heartbeat thread, max.poll.interval.ms, leaving, and commits' error mapping."""

from __future__ import annotations

import threading
import time

import pytest
from client_helpers import FAST
from fake_group_coordinator import ScriptedCoordinator

from broker.client.errors import KafkaError
from broker.client.group_commit import GroupOffsets, OffsetAndMetadata
from broker.client.group_membership import GroupMembership, GroupSettings
from broker.client.group_state import (
    NO_GENERATION,
    Action,
    CommitFailedError,
    FencedInstanceIdError,
    Generation,
    MemberState,
    RebalanceInProgressError,
    Timers,
    action_for,
    commit_error,
)
from broker.client.metadata import Cluster
from broker.wire import (
    ApiKey,
    ErrorCode,
    HeartbeatResponse,
    JoinGroupResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)

DEADLINE_S = 10.0


def wait_until(condition, what: str, timeout_s: float = DEADLINE_S):
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.01)
    return value


# ---------------------------------------------------------------------- pure parts

@pytest.mark.parametrize("code, action", [
    (ErrorCode.NONE, Action.OK),
    (ErrorCode.MEMBER_ID_REQUIRED, Action.JOIN_NOW),
    (ErrorCode.REBALANCE_IN_PROGRESS, Action.REJOIN),
    (ErrorCode.ILLEGAL_GENERATION, Action.RESET_GENERATION),
    (ErrorCode.UNKNOWN_MEMBER_ID, Action.RESET_MEMBER),
    (ErrorCode.NOT_COORDINATOR, Action.FIND_COORDINATOR),
    (ErrorCode.COORDINATOR_NOT_AVAILABLE, Action.FIND_COORDINATOR),
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, Action.RETRY),
    (ErrorCode.FENCED_INSTANCE_ID, Action.FATAL),
    (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, Action.FATAL),
    (ErrorCode.GROUP_AUTHORIZATION_FAILED, Action.FATAL),
])
def test_what_each_group_error_asks_of_the_member(code, action):
    assert action_for(code) == action


@pytest.mark.parametrize("code, action, error_type", [
    (ErrorCode.ILLEGAL_GENERATION, Action.RESET_GENERATION, CommitFailedError),
    (ErrorCode.UNKNOWN_MEMBER_ID, Action.RESET_MEMBER, CommitFailedError),
    (ErrorCode.REBALANCE_IN_PROGRESS, Action.REJOIN, RebalanceInProgressError),
    (ErrorCode.FENCED_INSTANCE_ID, Action.FATAL, FencedInstanceIdError),
    (ErrorCode.NOT_COORDINATOR, Action.FIND_COORDINATOR, KafkaError),
    (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, Action.RETRY, KafkaError),
    (ErrorCode.OFFSET_METADATA_TOO_LARGE, Action.FATAL, KafkaError),
])
def test_commit_errors_map_to_client_exceptions(code, action, error_type):
    got_action, error = commit_error(code, "ctx")
    assert got_action == action and type(error) is error_type and error.code == code


def test_timers_heartbeat_session_and_poll():
    timers = Timers(session_timeout_ms=1000, heartbeat_interval_ms=300, max_poll_interval_ms=2000,
                    retry_backoff_ms=50, now_ms=0)
    assert not timers.heartbeat_due(299) and timers.heartbeat_due(300)
    timers.sent_heartbeat(300)
    assert not timers.heartbeat_due(10_000)  # one in flight at a time
    timers.heartbeat_failed(310)
    assert timers.heartbeat_due(360) and not timers.heartbeat_due(359)  # retry after the backoff
    assert timers.session_expired(1000)
    timers.heartbeat_succeeded(900)
    assert not timers.session_expired(1899) and timers.session_expired(1900)
    assert timers.poll_expired(2000)
    timers.polled(1500)
    assert not timers.poll_expired(3499) and timers.poll_expired(3500)
    assert timers.ms_to_next(1000) == 0 or timers.ms_to_next(1000) <= 900
    with pytest.raises(ValueError):
        Timers(session_timeout_ms=100, heartbeat_interval_ms=100, max_poll_interval_ms=1,
               retry_backoff_ms=0, now_ms=0)


def test_group_settings_refuse_bad_values():
    with pytest.raises(ValueError):
        GroupSettings("")
    with pytest.raises(ValueError):
        GroupSettings("g", session_timeout_ms=1000, heartbeat_interval_ms=1000)
    with pytest.raises(ValueError):
        GroupSettings("g", group_instance_id="")


# ---------------------------------------------------------------------- membership

class StubProtocol:
    """Records what membership asks of the consumer side."""

    protocol_type = "consumer"

    def __init__(self) -> None:
        self.prepared: list[Generation] = []
        self.completed: list[tuple[Generation, bytes]] = []
        self.assigned_for: list[list[str]] = []
        self.left: list[Generation] = []

    def metadata(self):
        return [("range", b"subscription")]

    def on_join_prepare(self, generation):
        self.prepared.append(generation)

    def perform_assignment(self, protocol_name, members):
        self.assigned_for.append([m.member_id for m in members])
        return {m.member_id: b"assignment-of-" + m.member_id.encode() for m in members}

    def on_join_complete(self, generation, assignment):
        self.completed.append((generation, assignment))

    def on_leave_prepare(self, generation):
        self.left.append(generation)


@pytest.fixture
def coordinator():
    with ScriptedCoordinator(member_id="m-7") as fake:
        yield fake
        assert fake.broker.handler_errors == []


def member(coordinator, protocol=None, **settings):
    options = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 50, **settings}
    cluster = Cluster(coordinator.bootstrap, FAST)
    return GroupMembership(cluster, protocol or StubProtocol(), GroupSettings("g", **options))


def join(membership) -> None:
    assert membership.ensure_active_group(time.monotonic() * 1000 + DEADLINE_S * 1000)


def test_member_id_handshake_then_the_leader_assigns(coordinator):
    coordinator.script(ApiKey.JOIN_GROUP, JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED,
                                                            member_id="m-7", members=[]))
    membership = member(coordinator)
    try:
        join(membership)
        joins = coordinator.requests(ApiKey.JOIN_GROUP)
        assert [j.member_id for j in joins] == ["", "m-7"]
        assert joins[0].rebalance_timeout_ms == 300_000 and joins[0].session_timeout_ms == 2000
        sync = coordinator.requests(ApiKey.SYNC_GROUP)[0]
        assert [(a.member_id, a.assignment) for a in sync.assignments] == [("m-7", b"assignment-of-m-7")]
        assert membership.generation == Generation(1, "m-7", "range")
        assert membership.state == MemberState.STABLE and not membership.rejoin_needed()
        wait_until(lambda: len(coordinator.requests(ApiKey.HEARTBEAT)) >= 2, "heartbeats")
        beat = coordinator.requests(ApiKey.HEARTBEAT)[0]
        assert (beat.generation_id, beat.member_id) == (1, "m-7")
    finally:
        membership.close()


def test_a_follower_syncs_without_assignments_and_skip_assignment_is_honoured(coordinator):
    protocol = StubProtocol()
    coordinator.script(ApiKey.JOIN_GROUP, JoinGroupResponse(
        error_code=0, generation_id=3, protocol_name="range", leader="other", member_id="m-7", members=[]))
    coordinator.script(ApiKey.JOIN_GROUP, JoinGroupResponse(
        error_code=0, generation_id=4, protocol_name="range", leader="m-7", member_id="m-7",
        skip_assignment=True, members=[]))
    membership = member(coordinator, protocol)
    try:
        join(membership)
        membership.request_rejoin("test")
        join(membership)
        assert [s.assignments for s in coordinator.requests(ApiKey.SYNC_GROUP)] == [[], []]
        assert protocol.assigned_for == []
    finally:
        membership.close()


def test_heartbeat_rebalance_in_progress_rejoins_as_the_same_member(coordinator):
    protocol = StubProtocol()
    membership = member(coordinator, protocol)
    try:
        join(membership)
        coordinator.script(ApiKey.HEARTBEAT, HeartbeatResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
        wait_until(membership.rejoin_needed, "the heartbeat thread asks for a rejoin")
        assert membership.generation.generation_id == 1
        coordinator.generation = 2
        join(membership)
        assert coordinator.requests(ApiKey.JOIN_GROUP)[-1].member_id == "m-7"
        assert protocol.prepared[-1] == Generation(1, "m-7", "range")  # revoke, not lost
        assert membership.generation.generation_id == 2
    finally:
        membership.close()


@pytest.mark.parametrize("code, member_id_after", [(ErrorCode.UNKNOWN_MEMBER_ID, ""),
                                                    (ErrorCode.ILLEGAL_GENERATION, "m-7")])
def test_heartbeat_fencing_errors_end_the_generation(coordinator, code, member_id_after):
    protocol = StubProtocol()
    membership = member(coordinator, protocol)
    try:
        join(membership)
        coordinator.script(ApiKey.HEARTBEAT, HeartbeatResponse(error_code=code))
        wait_until(lambda: membership.generation.generation_id == -1, "the generation ends")
        assert membership.generation.member_id == member_id_after
        join(membership)
        assert coordinator.requests(ApiKey.JOIN_GROUP)[-1].member_id == member_id_after
        assert protocol.prepared[-1].generation_id == -1  # the consumer reports its partitions lost
    finally:
        membership.close()


def test_not_coordinator_looks_the_coordinator_up_again(coordinator):
    coordinator.script(ApiKey.JOIN_GROUP, JoinGroupResponse(error_code=ErrorCode.NOT_COORDINATOR, members=[]))
    coordinator.script(ApiKey.SYNC_GROUP, SyncGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE))
    membership = member(coordinator)
    try:
        join(membership)
        assert len(coordinator.broker.requests_for(ApiKey.FIND_COORDINATOR)) == 3
        assert len(coordinator.requests(ApiKey.JOIN_GROUP)) == 3
    finally:
        membership.close()


def test_sync_illegal_generation_rejoins_keeping_the_member_id(coordinator):
    coordinator.script(ApiKey.SYNC_GROUP, SyncGroupResponse(error_code=ErrorCode.ILLEGAL_GENERATION))
    membership = member(coordinator)
    try:
        join(membership)
        assert [j.member_id for j in coordinator.requests(ApiKey.JOIN_GROUP)] == ["", "m-7"]
    finally:
        membership.close()


@pytest.mark.parametrize("code, error_type", [(ErrorCode.FENCED_INSTANCE_ID, FencedInstanceIdError),
                                              (ErrorCode.INCONSISTENT_GROUP_PROTOCOL, KafkaError)])
def test_fatal_join_errors_raise(coordinator, code, error_type):
    coordinator.script(ApiKey.JOIN_GROUP, JoinGroupResponse(error_code=code, members=[]))
    membership = member(coordinator, group_instance_id="i-1")
    try:
        with pytest.raises(error_type) as caught:
            join(membership)
        assert caught.value.code == code
    finally:
        membership.close()


def test_a_dynamic_member_that_stops_polling_leaves_the_group(coordinator):
    membership = member(coordinator, max_poll_interval_ms=300)
    try:
        join(membership)
        # no polled() calls: the heartbeat thread leaves after max.poll.interval.ms
        wait_until(lambda: coordinator.requests(ApiKey.LEAVE_GROUP), "LeaveGroup")
        leave = coordinator.requests(ApiKey.LEAVE_GROUP)[0]
        assert [(m.member_id, m.group_instance_id) for m in leave.members] == [("m-7", None)]
        assert membership.generation == NO_GENERATION and membership.rejoin_needed()
        assert membership.stats["poll_timeouts"] == 1
    finally:
        membership.close()


def test_a_static_member_never_sends_leave_group(coordinator):
    protocol = StubProtocol()
    membership = member(coordinator, protocol, group_instance_id="i-1", max_poll_interval_ms=300)
    join(membership)
    assert coordinator.requests(ApiKey.JOIN_GROUP)[0].group_instance_id == "i-1"
    wait_until(membership.rejoin_needed, "the poll timeout ends the generation")
    assert membership.generation.member_id == "m-7"  # a static member keeps its id
    membership.close()
    assert coordinator.requests(ApiKey.LEAVE_GROUP) == []


def test_polling_keeps_the_member_and_close_leaves_and_stops_the_thread(coordinator):
    protocol = StubProtocol()
    membership = member(coordinator, protocol, max_poll_interval_ms=300)
    join(membership)
    stop = time.monotonic() + 0.8
    while time.monotonic() < stop:  # polling often: no poll timeout
        membership.polled()
        time.sleep(0.02)
    assert coordinator.requests(ApiKey.LEAVE_GROUP) == [] and not membership.rejoin_needed()
    thread = membership._thread
    membership.close()
    assert not thread.is_alive()
    assert protocol.left == [Generation(1, "m-7", "range")]
    assert [m.member_id for m in coordinator.requests(ApiKey.LEAVE_GROUP)[0].members] == ["m-7"]


# ---------------------------------------------------------------------- commits

def commit_answer(code: int):
    return lambda request: OffsetCommitResponse(topics=[OffsetCommitResponse.OffsetCommitResponseTopic(
        name=t.name, partitions=[OffsetCommitResponse.OffsetCommitResponsePartition(
            partition_index=p.partition_index, error_code=code) for p in t.partitions]) for t in request.topics])


@pytest.fixture
def joined(coordinator):
    membership = member(coordinator)
    join(membership)
    yield membership, GroupOffsets(membership, subscribed=lambda: True)
    membership.close()


def test_commit_carries_the_generation_and_retries_coordinator_moves(coordinator, joined):
    membership, offsets = joined
    coordinator.script(ApiKey.OFFSET_COMMIT, commit_answer(ErrorCode.NOT_COORDINATOR),
                       commit_answer(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
    offsets.commit({("t", 0): OffsetAndMetadata(5, "meta")}, timeout_ms=5000)
    commits = coordinator.requests(ApiKey.OFFSET_COMMIT)
    assert len(commits) == 3
    assert (commits[-1].generation_id_or_member_epoch, commits[-1].member_id) == (1, "m-7")
    p = commits[-1].topics[0].partitions[0]
    assert (p.partition_index, p.committed_offset, p.committed_metadata) == (0, 5, "meta")


@pytest.mark.parametrize("code, error_type, generation_after", [
    (ErrorCode.ILLEGAL_GENERATION, CommitFailedError, -1),
    (ErrorCode.UNKNOWN_MEMBER_ID, CommitFailedError, -1),
    (ErrorCode.REBALANCE_IN_PROGRESS, RebalanceInProgressError, 1),
    (ErrorCode.OFFSET_METADATA_TOO_LARGE, KafkaError, 1),
])
def test_commit_errors_raise_and_end_the_generation_where_it_is_gone(coordinator, joined, code, error_type,
                                                                     generation_after):
    membership, offsets = joined
    coordinator.script(ApiKey.OFFSET_COMMIT, commit_answer(code))
    with pytest.raises(error_type):
        offsets.commit({("t", 0): OffsetAndMetadata(5)}, timeout_ms=5000)
    assert len(coordinator.requests(ApiKey.OFFSET_COMMIT)) == 1  # not retried
    assert membership.generation.generation_id == generation_after
    assert membership.rejoin_needed() == (code != ErrorCode.OFFSET_METADATA_TOO_LARGE)


def test_a_member_without_a_generation_cannot_commit(coordinator, joined):
    membership, offsets = joined
    membership.reset_generation(Action.RESET_MEMBER, "test")
    with pytest.raises(CommitFailedError):
        offsets.commit({("t", 0): OffsetAndMetadata(1)}, timeout_ms=1000)
    assert coordinator.requests(ApiKey.OFFSET_COMMIT) == []


def test_simple_commits_of_an_assign_consumer(coordinator):
    membership = member(coordinator)
    try:
        GroupOffsets(membership, subscribed=lambda: False).commit({("t", 1): OffsetAndMetadata(9)}, 5000)
        commit = coordinator.requests(ApiKey.OFFSET_COMMIT)[0]
        assert (commit.generation_id_or_member_epoch, commit.member_id, commit.group_instance_id) == (-1, "", None)
    finally:
        membership.close()


def test_async_commit_callbacks_run_in_order(coordinator, joined):
    _, offsets = joined
    coordinator.script(ApiKey.OFFSET_COMMIT, commit_answer(ErrorCode.NONE), commit_answer(ErrorCode.ILLEGAL_GENERATION))
    seen = []
    offsets.commit_async({("t", 0): OffsetAndMetadata(1)}, lambda o, e: seen.append((o[("t", 0)].offset, e)))
    offsets.commit_async({("t", 0): OffsetAndMetadata(2)}, lambda o, e: seen.append((o[("t", 0)].offset, e)))
    offsets.drain(block=True)
    assert [offset for offset, _ in seen] == [1, 2]
    assert seen[0][1] is None and isinstance(seen[1][1], CommitFailedError)
    assert offsets.async_in_flight == 0


def test_offset_fetch_retries_while_the_coordinator_loads(coordinator, joined):
    _, offsets = joined
    loading = OffsetFetchResponse(groups=[OffsetFetchResponse.OffsetFetchResponseGroup(
        group_id="g", error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, topics=[])])
    answer = OffsetFetchResponse(groups=[OffsetFetchResponse.OffsetFetchResponseGroup(
        group_id="g", error_code=0, topics=[OffsetFetchResponse.OffsetFetchResponseTopics(
            name="t", partitions=[
                OffsetFetchResponse.OffsetFetchResponsePartitions(partition_index=0, committed_offset=7,
                                                                  committed_leader_epoch=-1, metadata="m",
                                                                  error_code=0),
                OffsetFetchResponse.OffsetFetchResponsePartitions(partition_index=1, committed_offset=-1,
                                                                  committed_leader_epoch=-1, metadata="",
                                                                  error_code=0)])])])
    coordinator.script(ApiKey.OFFSET_FETCH, loading, answer)
    got = offsets.fetch([("t", 0), ("t", 1)], timeout_ms=5000)
    assert got == {("t", 0): OffsetAndMetadata(7, "m"), ("t", 1): None}
    request = coordinator.requests(ApiKey.OFFSET_FETCH)[-1]
    assert request.require_stable and request.groups[0].topics[0].partition_indexes == [0, 1]


def test_heartbeat_thread_is_a_single_owned_thread(coordinator):
    before = {t.name for t in threading.enumerate()}
    membership = member(coordinator)
    join(membership)
    membership.request_rejoin("again")
    join(membership)
    heartbeat_threads = [t for t in threading.enumerate() if t.name.startswith("pylog-heartbeat-")
                         and t.name not in before]
    assert len(heartbeat_threads) == 1
    membership.close()
    assert not heartbeat_threads[0].is_alive()


def test_heartbeat_not_coordinator_drops_the_coordinator_until_the_owner_looks_it_up(coordinator):
    membership = member(coordinator)
    try:
        join(membership)
        lookups = len(coordinator.broker.requests_for(ApiKey.FIND_COORDINATOR))
        coordinator.script(ApiKey.HEARTBEAT, HeartbeatResponse(error_code=ErrorCode.NOT_COORDINATOR))
        wait_until(membership.coordinator_unknown, "the coordinator is dropped")
        assert not membership.rejoin_needed()  # still a member: only the coordinator moved
        beats = len(coordinator.requests(ApiKey.HEARTBEAT))
        membership.coordinator_connection(time.monotonic() * 1000 + 5000)
        assert len(coordinator.broker.requests_for(ApiKey.FIND_COORDINATOR)) == lookups + 1
        wait_until(lambda: len(coordinator.requests(ApiKey.HEARTBEAT)) > beats, "heartbeats resume")
    finally:
        membership.close()


def test_a_rejoin_waits_for_async_commits_in_flight_on_the_coordinator_connection(coordinator):
    """Auto-commit sends OffsetCommit without waiting; a rebalance right after must first take
    its answer (JoinGroup goes on the same connection, which is strict FIFO)."""
    from broker.client.consumer import Consumer

    consumer = Consumer(coordinator.bootstrap, config=FAST, group_id="g", session_timeout_ms=2000,
                        heartbeat_interval_ms=50)
    try:
        consumer.subscribe(["missing-topic"])
        assert consumer.poll(timeout_ms=0) == []
        group = consumer._group
        seen = []
        group.offsets.commit_async({("missing-topic", 0): OffsetAndMetadata(3)}, lambda o, e: seen.append(e))
        assert group.offsets.async_in_flight == 1
        group.membership.request_rejoin("test")
        consumer.poll(timeout_ms=0)
        assert seen == [None] and not group.membership.rejoin_needed()
        assert len(coordinator.requests(ApiKey.JOIN_GROUP)) == 2
    finally:
        consumer.close()


def test_an_unreachable_coordinator_fails_at_the_deadline():
    """FindCoordinator names a broker nobody listens on: the lookup is retried with backoff
    and gives up at the deadline with a retriable connection error, instead of spinning."""
    from broker.wire import FindCoordinatorResponse

    with ScriptedCoordinator() as fake:
        fake._find_coordinator = lambda header: FindCoordinatorResponse(coordinators=[
            FindCoordinatorResponse.Coordinator(key="g", node_id=9, host="127.0.0.1", port=1,
                                                error_code=0, error_message=None)])
        membership = member(fake)
        start = time.monotonic()
        with pytest.raises(KafkaError) as caught:
            membership.coordinator_connection(time.monotonic() * 1000 + 300)
        assert caught.value.retriable and time.monotonic() - start < 5
        assert not membership.ensure_active_group(time.monotonic() * 1000 + 300)  # poll: not joined yet
        membership.close()
