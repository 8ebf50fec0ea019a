"""Membership of one classic group (Java ``AbstractCoordinator``): find the coordinator, join
(JoinGroup with KIP-394's member-id handshake), let the leader assign, SyncGroup, heartbeat, and
leave. What a member *is* (its protocols' metadata, how the leader assigns, what an assignment
means) belongs to the ``GroupProtocol`` it is given (``group_consumer.ConsumerGroupProtocol``).

Threads and connections. The owner thread (the consumer's ``poll``) does everything that changes
membership: lookup, join, sync, commits, leave. One small heartbeat thread per member (as
Java's ``HeartbeatThread``) keeps the session alive while the application processes records
between polls: in STABLE only, it sends a Heartbeat every ``heartbeat.interval.ms`` on a
connection of its own (connections are single-owner), and on an error only records what the
owner thread must do (rejoin, look the coordinator up again, raise). It also enforces
``max.poll.interval.ms`` (KIP-62): when ``poll`` was not called in time it leaves the group
(a dynamic member sends LeaveGroup; a static one just forgets its generation) so the group
rebalances without waiting for the session to expire. The thread is started on the first
successful join, woken by a condition, and joined by ``close`` (bounded by ``request.timeout.ms``).

All shared state (``_state``, ``_generation``, ``_rejoin_reason``, ``_coordinator``, timers,
``_fatal``) is read and written under ``_lock``; no request is ever sent while holding it.

The owner thread's JoinGroup may wait at the coordinator for the whole rebalance timeout (the
group waits for every member to rejoin), so that request's timeout is ``max.poll.interval.ms`` +
5 s (Java ``joinGroupTimeoutMs``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from broker.client.config import Clock
from broker.client.connection import BrokerConnection
from broker.client.coordinator import find_coordinator
from broker.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from broker.client.group_state import (
    NO_GENERATION,
    Action,
    FencedInstanceIdError,
    Generation,
    MemberState,
    Timers,
    action_for,
)
from broker.client.metadata import Cluster
from broker.wire import ApiKey, ErrorCode

__all__ = ["GroupProtocol", "GroupMembership", "GroupSettings", "JoinedMember"]

_JOIN_TIMEOUT_EXTRA_MS = 5_000  # Java: rebalance timeout + 5 s for the JoinGroup request


@dataclass(frozen=True)
class GroupSettings:
    """The membership half of the consumer config, with Kafka's names and defaults."""

    group_id: str
    group_instance_id: str | None = None  # [group.instance.id] static membership (KIP-345)
    session_timeout_ms: int = 45_000  # [session.timeout.ms] (Kafka 3.0+ default)
    heartbeat_interval_ms: int = 3_000  # [heartbeat.interval.ms]
    max_poll_interval_ms: int = 300_000  # [max.poll.interval.ms] also the rebalance timeout

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ValueError("group.id must not be empty for group membership")
        for name in ("session_timeout_ms", "heartbeat_interval_ms", "max_poll_interval_ms"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat.interval.ms must be lower than session.timeout.ms")
        if self.group_instance_id is not None and not self.group_instance_id:
            raise ValueError("group.instance.id must not be empty (leave it unset for a dynamic member)")


@dataclass(frozen=True)
class JoinedMember:
    """One member in the leader's JoinGroup answer."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


class GroupProtocol(Protocol):
    """What the member brings to the group (Java ``ConsumerCoordinator``'s overrides)."""

    protocol_type: str

    def metadata(self) -> list[tuple[str, bytes]]:
        """(protocol name, metadata) in preference order, for JoinGroup."""

    def on_join_prepare(self, generation: Generation) -> None:
        """Before a (re)join: eager protocols revoke everything; a generation of -1 means the
        membership was lost (partitions are lost, not revoked)."""

    def perform_assignment(self, protocol_name: str, members: list[JoinedMember]) -> dict[str, bytes]:
        """Leader only: each member id's assignment bytes."""

    def on_join_complete(self, generation: Generation, assignment: bytes) -> None:
        """After SyncGroup: apply the assignment (may call ``request_rejoin``)."""

    def on_leave_prepare(self, generation: Generation) -> None:
        """Before close leaves the group: revoke (or lose) what is owned."""


class GroupMembership:
    def __init__(self, cluster: Cluster, protocol: GroupProtocol, settings: GroupSettings) -> None:
        self._cluster = cluster
        self._config = cluster.config
        self._clock: Clock = cluster.clock
        self._protocol = protocol
        self.settings = settings
        self._lock = threading.Condition()
        self._state = MemberState.UNJOINED
        self._generation = NO_GENERATION
        self._rejoin_reason: str | None = "the member has not joined yet"
        self._join_prepared = False
        self._coordinator: tuple[int, str, int] | None = None  # node id, host, port
        self._conn: BrokerConnection | None = None  # owner thread's connection to the coordinator
        self._timers = Timers(session_timeout_ms=settings.session_timeout_ms,
                              heartbeat_interval_ms=settings.heartbeat_interval_ms,
                              max_poll_interval_ms=settings.max_poll_interval_ms,
                              retry_backoff_ms=self._config.retry_backoff_ms, now_ms=self._clock.monotonic_ms())
        self._fatal: KafkaError | None = None
        self._thread: threading.Thread | None = None
        self._closing = False
        self.stats = {"joins": 0, "syncs": 0, "heartbeats": 0, "coordinator_lookups": 0, "poll_timeouts": 0}

    # ------------------------------------------------------------------ read by the owner

    @property
    def generation(self) -> Generation:
        with self._lock:
            return self._generation

    @property
    def state(self) -> MemberState:
        with self._lock:
            return self._state

    def rejoin_needed(self) -> bool:
        with self._lock:
            return self._rejoin_reason is not None or self._state != MemberState.STABLE

    def polled(self) -> None:
        """The application called poll: restart the poll timer; raise what the heartbeat
        thread found fatal (a fenced static member)."""
        with self._lock:
            self._timers.polled(self._clock.monotonic_ms())
            if self._fatal is not None:
                raise self._fatal

    def request_rejoin(self, reason: str) -> None:
        with self._lock:
            self._rejoin_reason = self._rejoin_reason or reason
            self._lock.notify_all()

    def reset_generation(self, action: Action, reason: str) -> None:
        """After ILLEGAL_GENERATION (keep the member id) or UNKNOWN_MEMBER_ID (forget it)."""
        with self._lock:
            self._reset_locked(action, reason)

    def _reset_locked(self, action: Action, reason: str) -> None:
        keep_id = action == Action.RESET_GENERATION or self.settings.group_instance_id is not None
        self._generation = self._generation.without_generation() if keep_id else NO_GENERATION
        self._state = MemberState.UNJOINED
        self._rejoin_reason = self._rejoin_reason or reason
        self._lock.notify_all()

    # ------------------------------------------------------------------ coordinator

    def coordinator_connection(self, deadline_ms: float) -> BrokerConnection:
        """The owner thread's connection to the coordinator, looked up (FindCoordinator) when
        unknown, retried until ``deadline_ms``."""
        while True:
            with self._lock:
                coordinator = self._coordinator
            if coordinator is not None:
                try:
                    return self._connect(coordinator)
                except KafkaError:
                    self.mark_coordinator_unknown()
                    if self._clock.monotonic_ms() >= deadline_ms:
                        raise
                    # (a dead coordinator's broker may still be named until its leadership moves)
                    self._clock.sleep_ms(self._config.retry_backoff_ms)
            self.stats["coordinator_lookups"] += 1
            # retries COORDINATOR_NOT_AVAILABLE and lost connections itself, until the deadline
            found = find_coordinator(self._cluster, self.settings.group_id,
                                     timeout_ms=max(deadline_ms - self._clock.monotonic_ms(), 0))
            with self._lock:
                self._coordinator = tuple(found)

    def _connect(self, coordinator: tuple[int, str, int]) -> BrokerConnection:
        node_id, host, port = coordinator
        if self._conn is None or (self._conn.host, self._conn.port) != (host, port):
            if self._conn is not None:
                self._conn.close()
            self._conn = BrokerConnection(host, port, config=self._config, node_id=node_id, clock=self._clock)
        self._conn.connect()
        return self._conn

    def coordinator_unknown(self) -> bool:
        with self._lock:
            return self._coordinator is None

    def mark_coordinator_unknown(self) -> None:
        with self._lock:
            self._coordinator = None
        if self._conn is not None and threading.current_thread() is not self._thread:
            self._conn.close()

    # ------------------------------------------------------------------ join and sync

    def ensure_active_group(self, deadline_ms: float) -> bool:
        """Join (or rejoin) until STABLE; False when ``deadline_ms`` passed first. Raises on
        fatal errors (FENCED_INSTANCE_ID, INCONSISTENT_GROUP_PROTOCOL, ...)."""
        attempts = 0
        while self.rejoin_needed():
            if self._fatal is not None:
                raise self._fatal
            if attempts and self._clock.monotonic_ms() >= deadline_ms:
                return False  # (a poll(0) still makes one attempt: the join itself blocks)
            attempts += 1
            try:
                conn = self.coordinator_connection(deadline_ms)
            except KafkaError as exc:
                if exc.retriable:
                    return False
                raise
            if not self._join_prepared:
                self._protocol.on_join_prepare(self.generation)
                self._join_prepared = True
            try:
                action = self._join_and_sync(conn)
            except (KafkaConnectionError, KafkaTimeoutError):
                action = Action.FIND_COORDINATOR
            self._after(action)
        return True

    def _after(self, action: Action) -> None:
        if action == Action.FIND_COORDINATOR:
            self.mark_coordinator_unknown()
        elif action in (Action.RETRY, Action.REJOIN):
            self._clock.sleep_ms(self._config.retry_backoff_ms)

    def _join_and_sync(self, conn: BrokerConnection) -> Action:
        with self._lock:
            self._state = MemberState.PREPARING_REBALANCE
            generation = self._generation
            reason = self._rejoin_reason
        settings = self.settings
        body = {
            "group_id": settings.group_id, "session_timeout_ms": settings.session_timeout_ms,
            "rebalance_timeout_ms": settings.max_poll_interval_ms, "member_id": generation.member_id,
            "group_instance_id": settings.group_instance_id, "protocol_type": self._protocol.protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in self._protocol.metadata()],
            "reason": reason,
        }
        timeout = max(self._config.request_timeout_ms, settings.max_poll_interval_ms + _JOIN_TIMEOUT_EXTRA_MS)
        self.stats["joins"] += 1
        response = conn.request(ApiKey.JOIN_GROUP, body, conn.version_for(ApiKey.JOIN_GROUP), timeout_ms=timeout)
        action = action_for(response.error_code)
        if action == Action.JOIN_NOW:
            with self._lock:
                self._generation = Generation(-1, response.member_id, None)
            return action
        if action != Action.OK:
            return self._on_error(action, response.error_code, "JoinGroup")
        joined = Generation(response.generation_id, response.member_id, response.protocol_name)
        with self._lock:
            self._generation = joined
            self._state = MemberState.COMPLETING_REBALANCE
        assignments: dict[str, bytes] = {}
        if response.leader == response.member_id and not getattr(response, "skip_assignment", False):
            members = [JoinedMember(m.member_id, getattr(m, "group_instance_id", None), m.metadata)
                       for m in response.members]
            assignments = self._protocol.perform_assignment(response.protocol_name, members)
        return self._sync(conn, joined, assignments)

    def _sync(self, conn: BrokerConnection, joined: Generation, assignments: dict[str, bytes]) -> Action:
        body = {
            "group_id": self.settings.group_id, "generation_id": joined.generation_id,
            "member_id": joined.member_id, "group_instance_id": self.settings.group_instance_id,
            "protocol_type": self._protocol.protocol_type, "protocol_name": joined.protocol_name,
            "assignments": [{"member_id": m, "assignment": a} for m, a in assignments.items()],
        }
        self.stats["syncs"] += 1
        response = conn.request(ApiKey.SYNC_GROUP, body, conn.version_for(ApiKey.SYNC_GROUP))
        action = action_for(response.error_code)
        if action != Action.OK:
            return self._on_error(action, response.error_code, "SyncGroup")
        with self._lock:
            if self._generation != joined:  # the heartbeat thread saw the generation end meanwhile
                return Action.REJOIN
            self._state = MemberState.STABLE
            self._rejoin_reason = None
            now = self._clock.monotonic_ms()
            self._timers.reset_session(now)
            self._timers.polled(now)  # the join ran inside poll: it must not count as time away
        self._join_prepared = False
        self._protocol.on_join_complete(joined, response.assignment or b"")
        self._start_heartbeat_thread()
        return Action.OK

    def _on_error(self, action: Action, code: int, what: str) -> Action:
        with self._lock:
            self._state = MemberState.UNJOINED
            if action in (Action.RESET_GENERATION, Action.RESET_MEMBER):
                self._reset_locked(action, f"{what}: {KafkaError(code).name}")
            elif action == Action.FATAL:
                error_class = FencedInstanceIdError if code == ErrorCode.FENCED_INSTANCE_ID else KafkaError
                raise error_class(code, f"{what} for group {self.settings.group_id!r}: "
                                  f"{KafkaError(code).message}")
            self._rejoin_reason = self._rejoin_reason or f"{what}: {KafkaError(code).name}"
        return action

    # ------------------------------------------------------------------ heartbeat thread

    def _start_heartbeat_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                            name=f"pylog-heartbeat-{self.settings.group_id}")
            self._thread.start()

    def _heartbeat_loop(self) -> None:
        conn: BrokerConnection | None = None
        try:
            while True:
                job = self._next_heartbeat_job()
                if job is None:
                    return
                kind, generation, coordinator = job
                conn = self._heartbeat_connection(conn, coordinator)
                if kind == "leave":
                    self._send_leave(conn, generation, "consumer poll timeout has expired")
                else:
                    self._heartbeat_once(conn, generation)
        finally:
            if conn is not None:
                conn.close()

    def _next_heartbeat_job(self):
        """Wait until a heartbeat (or a poll-timeout leave) is due; None once closing."""
        with self._lock:
            while not self._closing:
                now = self._clock.monotonic_ms()
                if self._state != MemberState.STABLE or self._coordinator is None:
                    self._lock.wait(self.settings.heartbeat_interval_ms / 1000)
                    continue
                if self._timers.poll_expired(now):
                    generation = self._generation
                    self.stats["poll_timeouts"] += 1
                    self._reset_locked(Action.RESET_MEMBER, "consumer poll timeout has expired")
                    if self.settings.group_instance_id is None:
                        return "leave", generation, self._coordinator
                    continue
                if self._timers.session_expired(now):
                    self._coordinator = None  # the owner thread's next poll looks it up again
                    self._timers.reset_session(now)
                    continue
                if self._timers.heartbeat_due(now):
                    self._timers.sent_heartbeat(now)
                    return "heartbeat", self._generation, self._coordinator
                self._lock.wait(max(self._timers.ms_to_next(now), 1.0) / 1000)
            return None

    def _heartbeat_connection(self, conn, coordinator) -> BrokerConnection:
        node_id, host, port = coordinator
        if conn is None or (conn.host, conn.port) != (host, port):
            if conn is not None:
                conn.close()
            conn = BrokerConnection(host, port, config=self._config, node_id=node_id, clock=self._clock)
        return conn

    def _heartbeat_once(self, conn: BrokerConnection, generation: Generation) -> None:
        body = {"group_id": self.settings.group_id, "generation_id": generation.generation_id,
                "member_id": generation.member_id, "group_instance_id": self.settings.group_instance_id}
        try:
            response = conn.request(ApiKey.HEARTBEAT, body, conn.version_for(ApiKey.HEARTBEAT))
            code = response.error_code
        except KafkaError:
            conn.close()
            code = ErrorCode.NETWORK_EXCEPTION
        self.stats["heartbeats"] += 1
        now = self._clock.monotonic_ms()
        with self._lock:
            if self._generation != generation:
                self._timers.heartbeat_failed(now)
                return  # answered for a generation that is over
            action = action_for(code)
            if action in (Action.OK, Action.REJOIN):
                self._timers.heartbeat_succeeded(now)
                if action == Action.REJOIN:
                    self._rejoin_reason = self._rejoin_reason or "the group is rebalancing"
                return
            self._timers.heartbeat_failed(now)
            if action == Action.FIND_COORDINATOR:
                self._coordinator = None
            elif action in (Action.RESET_GENERATION, Action.RESET_MEMBER):
                self._reset_locked(action, f"Heartbeat: {KafkaError(code).name}")
            elif action == Action.FATAL:
                error_class = FencedInstanceIdError if code == ErrorCode.FENCED_INSTANCE_ID else KafkaError
                self._fatal = error_class(code, f"Heartbeat for group {self.settings.group_id!r}")

    # ------------------------------------------------------------------ leave and close

    def _send_leave(self, conn: BrokerConnection, generation: Generation, reason: str) -> None:
        """LeaveGroup, best effort: the session timeout removes the member anyway."""
        if not generation.member_id or self.settings.group_instance_id is not None:
            return
        version = conn.version_for(ApiKey.LEAVE_GROUP)
        body = ({"group_id": self.settings.group_id, "members": [
                    {"member_id": generation.member_id, "group_instance_id": None, "reason": reason}]}
                if version >= 3 else {"group_id": self.settings.group_id, "member_id": generation.member_id})
        try:
            conn.request(ApiKey.LEAVE_GROUP, body, version)
        except KafkaError:
            conn.close()

    def close(self, timeout_ms: float | None = None) -> None:
        """Revoke (listener), leave the group (dynamic members), stop the heartbeat thread."""
        timeout_ms = self._config.request_timeout_ms if timeout_ms is None else timeout_ms
        try:
            generation = self.generation
            if generation.member_id:
                self._protocol.on_leave_prepare(generation)
                if self.settings.group_instance_id is None:
                    try:
                        conn = self.coordinator_connection(self._clock.monotonic_ms() + timeout_ms)
                        self._send_leave(conn, generation, "the consumer is being closed")
                    except KafkaError:
                        pass  # best effort: the session timeout removes the member
        finally:
            with self._lock:
                self._closing = True
                self._generation = NO_GENERATION
                self._state = MemberState.UNJOINED
                self._lock.notify_all()
            if self._thread is not None:
                self._thread.join(timeout_ms / 1000)
            if self._conn is not None:
                self._conn.close()
