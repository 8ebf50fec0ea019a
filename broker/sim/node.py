"""A simulated broker: the real replication and controller logic over the fake world.

What is real (the code a broker runs): ``ReplicaManager`` and ``Partition`` (roles, ISR
proposals, high watermark, follower appends, truncation, producer state), ``FetchSession``
(truncation by leader epoch, fetching), ``ControllerCore`` (elections, state machines, requests).
What is simulated: the I/O around them, mirroring the asyncio shells of ``broker.server``:

- ``_Rpc``: request/response over ``Network`` with timeouts (``InterBrokerConnection``);
- ``SimController`` (``controller.py``): the event queue and send queues of
  ``ControllerService``;
- follower fetch loops per leader (``ReplicaFetcherManager``), the ISR writer (``IsrWriter``),
  the request handlers for Produce, follower Fetch, OffsetForLeaderEpoch and the controller's
  requests, controlled shutdown, session loss and re-registration (``Broker``).

Process faults: ``crash`` (the in-memory state is gone, the ZooKeeper session lingers until it
expires, the disk keeps everything or, with ``lose_unflushed``, loses its unflushed tail),
``pause``/``resume`` (SIGSTOP: nothing runs, messages and timers wait), ``stop`` (SIGTERM:
controlled shutdown, then a clean exit that closes the session).

Every timer and callback is bound to the incarnation that created it: a crashed-and-restarted
broker never runs its predecessor's callbacks.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterable, Mapping

from broker.cluster.errors import (
    BadVersionError,
    BrokerIdAlreadyRegisteredError,
    UnknownTopicOrPartitionError,
)
from broker.cluster.layout import BrokerRegistration, EndPoint
from broker.controller.requests import LeaderAndIsr, StopReplica, UpdateMetadata
from broker.replica.fencing import fence_after_unclean_shutdown
from broker.replica.fetcher import EpochEndOffset, FetchedPartition, FetcherSettings, FetchSession
from broker.replica.manager import FetchTarget, PartitionView, ReplicaManager, ReplicaSettings, TopicView
from broker.replica.partition import IsrChange
from broker.sim import messages as m
from broker.sim.controller import SimController
from broker.sim.disk import MemoryDisk
from broker.sim.zookeeper import SimConnectionLoss, SimZkClient
from broker.wire import ErrorCode

__all__ = ["SimBroker", "NodeSettings"]

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class NodeSettings:
    session_timeout_ms = 3_000
    heartbeat_interval_ms = 200
    replica_lag_time_max_ms = 1_000
    fetch = FetcherSettings(max_wait_ms=100, min_bytes=1, partition_max_bytes=4_096,
                            response_max_bytes=16_384, backoff_ms=50)
    rpc_timeout_ms = 400
    controller_backoff_ms = 50
    produce_timeout_ms = 1_500
    flush_interval_ms = (20, 400)
    controlled_shutdown_attempts = 3
    controlled_shutdown_backoff_ms = 100


class _Rpc:
    """Request/response over the simulated network, with a timeout per request."""

    def __init__(self, node: "SimBroker") -> None:
        self._node = node
        # Correlation ids unique across incarnations: a restarted process has new connections,
        # so an answer to its predecessor's request must never match one of its own.
        self._next = node.incarnation << 32
        self._pending: dict[int, tuple[Callable, object]] = {}

    def call(self, dst, body, on_response: Callable[[object | None], None], timeout_ms: int) -> None:
        self._next += 1
        correlation_id = self._next
        timer = self._node.after(timeout_ms, self._timed_out, correlation_id)
        self._pending[correlation_id] = (on_response, timer)
        self._node.sim.network.send(self._node.id, dst, m.Request(correlation_id, body))

    def _timed_out(self, correlation_id: int) -> None:
        entry = self._pending.pop(correlation_id, None)
        if entry is not None:
            entry[0](None)

    def on_response(self, response: m.Response) -> None:
        entry = self._pending.pop(response.correlation_id, None)
        if entry is not None:
            entry[1].cancel()
            entry[0](response.body)


class SimBroker:
    def __init__(self, sim, broker_id: int, settings: NodeSettings | None = None) -> None:
        self.sim = sim
        self.id = broker_id
        self.settings = settings or NodeSettings()
        self.disk = MemoryDisk()
        self.incarnation = 0
        self.status = "down"  # down | starting | up | stopping
        self.clean_shutdown = True  # False after a crash: the next start fences itself out of ISRs
        self.paused = False
        self._deferred: list[tuple[Callable, tuple]] = []
        self.zk: SimZkClient | None = None
        self.broker_epoch = -1
        self.replicas: ReplicaManager | None = None
        self.controller: SimController | None = None
        self.rpc: _Rpc | None = None
        self.sessions: dict[int, FetchSession] = {}
        self._session_busy: set[int] = set()
        self._waiters: dict[object, list[Callable]] = {}
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.metadata: dict[TopicPartition, tuple[int, int, int]] = {}  # tp -> (epoch, version, leader)

    # ---------------------------------------------------------------------------- timers

    def after(self, delay_ms: int, callback: Callable, *args):
        return self.sim.scheduler.after(delay_ms, self._guarded, self.incarnation, callback, args)

    def _guarded(self, incarnation: int, callback: Callable, args: tuple) -> None:
        if incarnation != self.incarnation or self.status == "down":
            return
        if self.paused:
            self._deferred.append((callback, args))
            return
        callback(*args)

    @property
    def running(self) -> bool:
        return self.status in ("starting", "up", "stopping")

    # ------------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        assert self.status == "down"
        self.incarnation += 1
        self.status = "starting"
        self.broker_epoch = -1
        self.paused = False
        self._deferred = []
        self.sim.network.attach(self.id, self._receive)
        self.rpc = _Rpc(self)
        self.sessions, self._session_busy, self._waiters = {}, set(), {}
        self.metadata = {}
        settings = self.settings
        self.replicas = ReplicaManager(
            self.id, self.disk, _SimPurgatory(self), lambda: self.sim.scheduler.now_ms,
            ReplicaSettings(min_insync_replicas=1, replica_lag_time_max_ms=settings.replica_lag_time_max_ms),
            fetchers=self, isr_writer=self._submit_isr)
        self.controller = SimController(self)
        self._new_session()
        self._try_join()
        self.after(settings.heartbeat_interval_ms, self._tick)
        self.after(settings.replica_lag_time_max_ms // 2, self._isr_check)
        self.after(self.sim.rng.randint(*settings.flush_interval_ms), self._flush)

    def _new_session(self) -> None:
        self.zk = SimZkClient(self.sim.zookeeper, self.sim.network, self.id, self.settings.session_timeout_ms)

    def _try_join(self) -> None:
        """Fence after a crash, register (waiting out a previous incarnation's znode), watch,
        load, stand (``Broker._join_cluster``)."""
        if self.status not in ("starting", "up"):
            return
        try:
            if not self.clean_shutdown:
                fence_after_unclean_shutdown(self.zk, self.id)
                self.clean_shutdown = True
            self.broker_epoch = self.zk.register_broker(_registration(self.id))
            self.zk.watch("brokers", "topics", "controller", "isr")
            self._load_topics()
        except (BrokerIdAlreadyRegisteredError, SimConnectionLoss):
            self.after(100, self._try_join)
            return
        self.status = "up"
        self.controller.mark("elect")

    def _load_topics(self) -> None:
        """The broker's ZooKeeper view of topics (``MetadataSync``): open what it holds."""
        views = {}
        for topic in self.zk.get_topics():
            try:
                assignment = self.zk.get_topic_assignment(topic)
            except UnknownTopicOrPartitionError:
                continue
            config = self.zk.get_topic_config(topic)
            self.topic_configs[topic] = config
            partitions = {}
            for p, replicas in assignment.partitions.items():
                try:
                    state, version = self.zk.get_partition_state(topic, p)
                except UnknownTopicOrPartitionError:
                    state, version = None, -1
                partitions[p] = PartitionView(tuple(replicas), state, version)
            views[topic] = TopicView(partitions, config)
        self.replicas.apply(views, may_lead=False)

    def crash(self, lose_unflushed: bool = False, clean: bool = False) -> int:
        """SIGKILL (or a machine crash with ``lose_unflushed``); returns batches lost."""
        self.status = "down"
        self.clean_shutdown = clean
        self.paused = False
        self.sim.network.detach(self.id)
        self.replicas = self.controller = self.rpc = None
        self.sessions = {}
        return self.disk.crash(self.sim.rng, lose_unflushed)

    def stop(self) -> None:
        """SIGTERM: controlled shutdown, then a clean exit."""
        if self.status != "up":
            return
        self.status = "stopping"
        self._controlled_shutdown(self.settings.controlled_shutdown_attempts)

    def _controlled_shutdown(self, attempts_left: int) -> None:
        def answered(error: int, remaining) -> None:
            if (error == ErrorCode.NONE and not remaining) or attempts_left <= 1:
                self._exit_cleanly()
            else:
                self.after(self.settings.controlled_shutdown_backoff_ms, self._controlled_shutdown,
                           attempts_left - 1)

        if self.controller.core.active:
            result = self.controller.controlled_shutdown(self.id, self.broker_epoch)
            self.after(20, answered, result.error_code, result.remaining)  # let the sends leave
            return
        try:
            controller_id = self.zk.get_controller_id()
        except SimConnectionLoss:
            controller_id = -1
        if controller_id < 0:
            answered(ErrorCode.NOT_CONTROLLER, [None])
            return
        self.rpc.call(controller_id, m.ShutdownRequest(self.id, self.broker_epoch),
                      lambda r: answered(r.error_code, r.remaining) if r is not None
                      else answered(ErrorCode.NETWORK_EXCEPTION, [None]), self.settings.rpc_timeout_ms)

    def _exit_cleanly(self) -> None:
        self.disk.close()
        self.zk.close()
        self.crash(lose_unflushed=False, clean=True)

    def pause(self) -> None:
        if self.running and not self.paused:
            self.paused = True
            self.sim.network.pause(self.id)

    def resume(self) -> None:
        if not self.paused:
            return
        self.paused = False
        deferred, self._deferred = self._deferred, []
        self.sim.network.resume(self.id)
        for callback, args in deferred:
            if self.running and not self.paused:
                callback(*args)

    # ------------------------------------------------------------------------ periodic

    def _tick(self) -> None:
        if not self.zk.heartbeat() and self.zk.expired and self.zk.reachable():
            self._on_session_lost()
        self.after(self.settings.heartbeat_interval_ms, self._tick)

    def _on_session_lost(self) -> None:
        """kazoo's LOST then a new session: resign, register again, reload (``Broker``)."""
        self.controller.resign()
        self._new_session()
        self.status = "starting"
        self._try_join()

    def _isr_check(self) -> None:
        self.replicas.maybe_shrink_isr()
        self.after(self.settings.replica_lag_time_max_ms // 2, self._isr_check)

    def _flush(self) -> None:
        self.disk.flush_due()
        self.after(self.sim.rng.randint(*self.settings.flush_interval_ms), self._flush)

    # --------------------------------------------------------------------- ISR writes

    def _submit_isr(self, change: IsrChange) -> None:
        self.after(self.sim.rng.randint(1, 15), self._write_isr, change)

    def _write_isr(self, change: IsrChange) -> None:
        tp = (change.topic, change.partition)
        try:
            version = self.zk.set_partition_state(change.topic, change.partition, change.state,
                                                  change.expected_version)
        except BadVersionError:  # as IsrWriter: re-read, and carry on from ZooKeeper's version
            self.replicas.complete_isr_change(change, None)
            try:
                self.replicas.refresh_leader_state(tp, *self.zk.get_partition_state(*tp))
            except (UnknownTopicOrPartitionError, SimConnectionLoss):
                pass
            return
        except (UnknownTopicOrPartitionError, SimConnectionLoss):
            version = None
        self.replicas.complete_isr_change(change, version)
        if version is not None:
            try:
                self.zk.propagate_isr_changes([(change.topic, change.partition)])
            except SimConnectionLoss:
                pass

    # -------------------------------------------------------------- purgatory (waiters)

    def _wait_on(self, key, callback: Callable) -> None:
        self._waiters.setdefault(key, []).append(callback)

    def notify(self, key) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            self.after(0, self._wake, waiters)

    def _wake(self, waiters: list[Callable]) -> None:
        for waiter in waiters:
            waiter()

    # ------------------------------------------------------------------ receive / handlers

    def _receive(self, src, message) -> None:
        if not self.running or self.paused:
            return
        if isinstance(message, tuple) and message[0] == "zk-watch":
            if message[2] == self.zk.session_id:  # not a watch of a previous incarnation's session
                self._on_watch(message[1])
        elif isinstance(message, m.Response):
            self.rpc.on_response(message)
        elif isinstance(message, m.Request):
            self._on_request(src, message)

    def _on_watch(self, kind: str) -> None:
        if kind == "topics":
            try:
                self._load_topics()
            except SimConnectionLoss:
                pass
        if kind == "controller":
            self.controller.on_controller_changed()
        else:
            self.controller.mark(kind)

    def _on_request(self, src, request: m.Request) -> None:
        body = request.body

        def respond(answer) -> None:
            if self.running:
                self.sim.network.send(self.id, src, m.Response(request.correlation_id, answer))

        if self.status == "starting":  # a real broker serves only once registered and loaded
            return
        handler = {m.ProduceRequest: self._produce, m.FetchRequest: self._fetch,
                   m.EpochRequest: self._epochs, m.ControllerRequest: self._controller_request,
                   m.ShutdownRequest: self._shutdown_request, m.MetadataRequest: self._metadata}[type(body)]
        handler(body, respond)

    def _produce(self, body: m.ProduceRequest, respond) -> None:
        partition = self.replicas.get(*body.tp)
        if partition is None or not partition.is_leader:
            hint = partition.leader_id if partition is not None else self.metadata.get(body.tp, (0, 0, -1))[2]
            respond(m.ProduceResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_hint=hint))
            return
        result = partition.append_as_leader(memoryview(body.records), body.acks, self.replicas.settings.limits)
        if result.error_code != ErrorCode.NONE or body.acks != -1:
            respond(m.ProduceResponse(result.error_code, result.base_offset))
            return
        deadline = self.sim.scheduler.now_ms + body.timeout_ms
        state = {"done": False}

        def check() -> None:
            if state["done"]:
                return
            current = self.replicas.get(*body.tp)
            if current is not partition:
                done, error = True, ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                done, error = partition.check_enough_replicas_reach_offset(result.last_offset + 1,
                                                                          result.leader_term)
            if done:
                state["done"] = True
                if error == ErrorCode.NONE:  # the leader declares these offsets committed
                    self.sim.invariants.on_leader_ack(self, partition)
                respond(m.ProduceResponse(error, result.base_offset if error == ErrorCode.NONE else -1))
            elif self.sim.scheduler.now_ms >= deadline:
                state["done"] = True
                respond(m.ProduceResponse(ErrorCode.REQUEST_TIMED_OUT))
            else:
                self._wait_on(body.tp, check)

        check()
        self.after(body.timeout_ms, check)

    def _fetch(self, body: m.FetchRequest, respond) -> None:
        refused = {}
        for query in body.partitions:
            partition = self.replicas.get(*query.tp)
            error = ErrorCode.NONE
            if partition is None or not partition.is_leader:
                error = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                error = partition.leader_epoch_error(query.current_leader_epoch)
                if error == ErrorCode.NONE and body.replica_id not in partition.replicas:
                    error = ErrorCode.REPLICA_NOT_AVAILABLE
            if error != ErrorCode.NONE:
                refused[query.tp] = error
                continue
            self.replicas.submit_isr_change(partition.record_follower_fetch(body.replica_id, query.fetch_offset))
        deadline = self.sim.scheduler.now_ms + body.max_wait_ms
        state = {"done": False}

        def read() -> None:
            if state["done"]:
                return
            answers, size = {}, 0
            for query in body.partitions:
                if query.tp in refused:
                    answers[query.tp] = FetchedPartition(refused[query.tp])
                    continue
                partition = self.replicas.get(*query.tp)
                if partition is None or not partition.is_leader:
                    answers[query.tp] = FetchedPartition(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                    continue
                result = partition.read(query.fetch_offset, max(0, body.max_bytes - size), 0, size == 0,
                                        body.replica_id)
                size += len(result.records)
                answers[query.tp] = FetchedPartition(result.error_code, result.high_watermark,
                                                     result.log_start_offset, result.records)
            waiting = (size == 0 and not refused and self.sim.scheduler.now_ms < deadline
                       and all(a.error_code == ErrorCode.NONE for a in answers.values()))
            if waiting:
                for query in body.partitions:
                    self._wait_on((*query.tp, "log-end"), read)
                return
            state["done"] = True
            respond(m.FetchResponse(answers))

        read()
        self.after(body.max_wait_ms, read)

    def _epochs(self, body: m.EpochRequest, respond) -> None:
        answers = {}
        for query in body.queries:
            partition = self.replicas.get(*query.tp)
            if partition is None or not partition.is_leader:
                answers[query.tp] = EpochEndOffset(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                continue
            error = partition.leader_epoch_error(query.current_leader_epoch)
            if error != ErrorCode.NONE:
                answers[query.tp] = EpochEndOffset(error)
                continue
            epoch, end = partition.end_offset_for_epoch(query.leader_epoch)
            answers[query.tp] = EpochEndOffset(ErrorCode.NONE, epoch, end)
        respond(m.EpochResponse(answers))

    def _controller_request(self, body: m.ControllerRequest, respond) -> None:
        request = body.request
        if 0 <= request.broker_epoch < self.broker_epoch:
            respond(m.ControllerResponse(ErrorCode.STALE_BROKER_EPOCH))
            return
        if isinstance(request, LeaderAndIsr):
            states = [(tp, leadership.replicas, leadership.state, leadership.zk_version)
                      for tp, leadership, _ in request.partitions]
            error, _ = self.replicas.become_leader_or_follower(request.controller_epoch, states,
                                                               self.topic_configs)
            self._note_metadata((tp, leadership) for tp, leadership, _ in request.partitions)
        elif isinstance(request, UpdateMetadata):
            error = ErrorCode.NONE
            if request.controller_epoch < self.replicas.controller_epoch:
                error = ErrorCode.STALE_CONTROLLER_EPOCH
            else:
                self.replicas.controller_epoch = request.controller_epoch
                self._note_metadata((tp, leadership) for tp, leadership, _ in request.partitions)
        else:
            assert isinstance(request, StopReplica)
            error, _ = self.replicas.stop_replicas(request.controller_epoch,
                                                   [(tp, delete) for tp, _, delete in request.partitions])
        respond(m.ControllerResponse(error))

    def _note_metadata(self, entries) -> None:
        for tp, leadership in entries:
            current = self.metadata.get(tp)
            key = (leadership.state.leader_epoch, leadership.zk_version)
            if current is None or key > current[:2]:
                self.metadata[tp] = (*key, leadership.state.leader)

    def _shutdown_request(self, body: m.ShutdownRequest, respond) -> None:
        result = self.controller.controlled_shutdown(body.broker_id, body.broker_epoch)
        respond(m.ShutdownResponse(result.error_code, tuple(result.remaining)))

    def _metadata(self, body: m.MetadataRequest, respond) -> None:
        partition = self.replicas.get(*body.tp)
        if partition is not None and partition.leader_id >= 0:
            respond(m.MetadataResponse(partition.leader_id))
        else:
            respond(m.MetadataResponse(self.metadata.get(body.tp, (0, 0, -1))[2]))

    # ------------------------------------------------------------- follower fetchers

    def add_partitions(self, targets: Mapping[TopicPartition, FetchTarget]) -> None:
        for tp, target in targets.items():
            for leader, session in self.sessions.items():
                if leader != target.leader_id:
                    session.remove(tp)
            session = self.sessions.get(target.leader_id)
            if session is None:
                session = FetchSession(self.id, target.leader_id, self.replicas.get, self.settings.fetch)
                self.sessions[target.leader_id] = session
            session.add(tp, target.leader_epoch)
            self._run_session(target.leader_id)

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            for session in self.sessions.values():
                session.remove(tp)

    def _run_session(self, leader: int) -> None:
        """One round (truncation or fetch) if none is in flight; the answer starts the next."""
        session = self.sessions.get(leader)
        if session is None or not session.partitions or leader in self._session_busy:
            return
        now = self.sim.scheduler.now_ms
        settings = self.settings.fetch
        queries = session.epoch_requests(now)
        if queries:
            self._session_busy.add(leader)
            self.rpc.call(leader, m.EpochRequest(self.id, tuple(queries)),
                          lambda r: self._epochs_answered(leader, r), self.settings.rpc_timeout_ms)
            return
        fetches = session.fetch_requests(now)
        if fetches:
            self._session_busy.add(leader)
            self.rpc.call(leader, m.FetchRequest(self.id, tuple(fetches), settings.max_wait_ms,
                                                 settings.response_max_bytes),
                          lambda r: self._fetch_answered(leader, r),
                          settings.max_wait_ms + self.settings.rpc_timeout_ms)
            return
        self.after(max(settings.backoff_ms, session.next_ready_ms() - now), self._run_session, leader)

    def _epochs_answered(self, leader: int, response) -> None:
        self._session_answered(leader, response, "on_epoch_responses")

    def _fetch_answered(self, leader: int, response) -> None:
        self._session_answered(leader, response, "on_fetch_responses")

    def _session_answered(self, leader: int, response, handler: str) -> None:
        """A follower session's request came back (None: timed out or the leader is gone): feed
        the answer to the session, then let it decide what to send next."""
        self._session_busy.discard(leader)
        session = self.sessions.get(leader)
        if session is None:
            return
        if response is None:
            session.on_failure(self.sim.scheduler.now_ms)
        else:
            getattr(session, handler)(response.partitions, self.sim.scheduler.now_ms)
        self.after(0, self._run_session, leader)


class _SimPurgatory:
    """``Partition``'s ``on_high_watermark`` hook and the replica manager's purgatory."""

    def __init__(self, node: SimBroker) -> None:
        self._node = node

    def notify(self, key) -> int:
        self._node.notify(key)
        return 0

    def close(self) -> None:
        pass


def _registration(broker_id: int) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (EndPoint("PLAINTEXT", f"sim-{broker_id}", 9092, "PLAINTEXT"),), 0)
