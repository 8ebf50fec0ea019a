"""An in-memory ZooKeeper holding Kafka 2.x's znodes, with sessions, ephemerals and watches.

``FakeZooKeeper`` is the server: one linearizable store (every operation is atomic and
instantaneous in virtual time), sessions that expire when not heard from for their timeout
(their ephemeral znodes, ``/brokers/ids/N`` and ``/controller``, vanish and watchers are told),
and persistent watches per kind (``brokers``, ``topics``, ``controller``, ``isr``) delivered as
messages over the simulated network from the endpoint ``"zk"``, so a broker cut off ZooKeeper
hears nothing.

``SimZkClient`` is one broker's session, with the methods of ``broker.cluster.zk.KafkaZkClient``
that brokers and the controller use, same names, same errors (``BadVersionError``,
``ControllerMovedError``, ``UnknownTopicOrPartitionError``...). Every call first checks the
link to ``"zk"`` and the session: a broker cut off ZooKeeper, or whose session expired, gets
``SimConnectionLoss`` (a ``ClusterError``, as kazoo's errors are to the real code).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from broker.cluster.errors import (
    BadVersionError,
    BrokerIdAlreadyRegisteredError,
    ClusterError,
    ControllerMovedError,
    PartitionStateExistsError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)
from broker.cluster.layout import BrokerRegistration, PartitionState, TopicAssignment
from broker.sim.network import Network
from broker.sim.scheduler import Scheduler

__all__ = ["FakeZooKeeper", "SimZkClient", "SimConnectionLoss", "ZK"]

ZK = "zk"
TopicPartition = tuple[str, int]


class SimConnectionLoss(ClusterError):
    """ZooKeeper is unreachable from this broker, or its session expired."""


@dataclass
class _Session:
    session_id: int
    owner: object
    timeout_ms: int
    last_heard_ms: int
    expired: bool = False
    closed: bool = False
    pending_watches: set = None  # kinds changed while the client was cut off

    def __post_init__(self) -> None:
        self.pending_watches = set()


class FakeZooKeeper:
    def __init__(self, scheduler: Scheduler, network: Network) -> None:
        self._scheduler = scheduler
        self._network = network
        self._sessions: dict[int, _Session] = {}
        self._next_session = 1
        self.zxid = 0
        self.brokers: dict[int, tuple[BrokerRegistration, int, int]] = {}  # id -> (reg, czxid, session)
        self.controller: tuple[int, int] | None = None  # (broker id, session)
        self.controller_epoch: tuple[int, int] | None = None  # (epoch, version)
        self.topics: dict[str, TopicAssignment] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.states: dict[TopicPartition, tuple[PartitionState, int]] = {}
        self.isr_notifications: dict[str, list[TopicPartition]] = {}
        self._isr_sequence = 0
        self._watchers: dict[str, set[int]] = {"brokers": set(), "topics": set(), "controller": set(),
                                               "isr": set()}
        self.writes: list[tuple[int, str, object]] = []  # (time, what, value), for the invariants
        network.attach(ZK, lambda src, message: None)

    # --------------------------------------------------------------------------- sessions

    def open_session(self, owner, timeout_ms: int) -> int:
        session_id = self._next_session
        self._next_session += 1
        self._sessions[session_id] = _Session(session_id, owner, timeout_ms, self._scheduler.now_ms)
        return session_id

    def session(self, session_id: int) -> _Session:
        return self._sessions[session_id]

    def heartbeat(self, session_id: int) -> None:
        session = self._sessions[session_id]
        if not session.expired and not session.closed:
            session.last_heard_ms = self._scheduler.now_ms
            self._flush_watches(session)

    def close_session(self, session_id: int) -> None:
        session = self._sessions[session_id]
        if not session.expired and not session.closed:
            session.closed = True
            self._drop_ephemerals(session_id)

    def expire_sessions(self) -> None:
        now = self._scheduler.now_ms
        for session in self._sessions.values():
            if not session.expired and not session.closed and now - session.last_heard_ms > session.timeout_ms:
                session.expired = True
                self._drop_ephemerals(session.session_id)

    def _drop_ephemerals(self, session_id: int) -> None:
        for broker in [b for b, (_, _, s) in self.brokers.items() if s == session_id]:
            del self.brokers[broker]
            self._changed("brokers")
        if self.controller is not None and self.controller[1] == session_id:
            self.controller = None
            self._changed("controller")
        for watchers in self._watchers.values():
            watchers.discard(session_id)

    # ---------------------------------------------------------------------------- watches

    def watch(self, session_id: int, kind: str) -> None:
        self._watchers[kind].add(session_id)

    def _changed(self, kind: str) -> None:
        """A watched kind changed. A client cut off from ZooKeeper gets the event when it is
        back within its session (ZooKeeper re-arms watches on reconnect and fires those whose
        znodes changed meanwhile)."""
        self.zxid += 1
        for session_id in sorted(self._watchers[kind]):
            session = self._sessions[session_id]
            if not session.expired and not session.closed:
                session.pending_watches.add(kind)
                self._flush_watches(session)

    def _flush_watches(self, session: _Session) -> None:
        if not session.pending_watches or not self._network.connected(session.owner, ZK):
            return
        for kind in sorted(session.pending_watches):
            self._network.send(ZK, session.owner, ("zk-watch", kind, session.session_id))
        session.pending_watches.clear()

    def _next_zxid(self) -> int:
        self.zxid += 1
        return self.zxid


class SimZkClient:
    """One broker's ZooKeeper session: the ``KafkaZkClient`` methods the broker and the
    controller call."""

    def __init__(self, server: FakeZooKeeper, network: Network, endpoint, timeout_ms: int) -> None:
        self._server = server
        self._network = network
        self._endpoint = endpoint
        self.session_id = server.open_session(endpoint, timeout_ms)

    # ------------------------------------------------------------------------- plumbing

    @property
    def alive(self) -> bool:
        session = self._server.session(self.session_id)
        return not session.expired and not session.closed

    @property
    def expired(self) -> bool:
        return self._server.session(self.session_id).expired

    def reachable(self) -> bool:
        return self._network.connected(self._endpoint, ZK)

    def _check(self) -> FakeZooKeeper:
        if not self.reachable():
            raise SimConnectionLoss("ZooKeeper is unreachable")
        if not self.alive:
            raise SimConnectionLoss("the ZooKeeper session expired")
        self._server.heartbeat(self.session_id)
        return self._server

    def heartbeat(self) -> bool:
        """The client's ping; False when the session cannot be kept (unreachable or expired)."""
        try:
            self._check()
            return True
        except SimConnectionLoss:
            return False

    def close(self) -> None:
        if self.reachable():
            self._server.close_session(self.session_id)

    def watch(self, *kinds: str) -> None:
        server = self._check()
        for kind in kinds:
            server.watch(self.session_id, kind)

    # -------------------------------------------------------------------------- brokers

    def register_broker(self, registration: BrokerRegistration, wait_ms: int | None = None) -> int:
        server = self._check()
        held = server.brokers.get(registration.broker_id)
        if held is not None and held[2] != self.session_id:
            raise BrokerIdAlreadyRegisteredError(f"broker {registration.broker_id} is registered")
        if held is not None:
            return held[1]
        czxid = server._next_zxid()
        server.brokers[registration.broker_id] = (registration, czxid, self.session_id)
        server._changed("brokers")
        return czxid

    def get_brokers_and_epochs(self) -> dict[int, tuple[BrokerRegistration, int]]:
        server = self._check()
        return {b: (reg, czxid) for b, (reg, czxid, _) in sorted(server.brokers.items())}

    def get_broker_ids(self) -> list[int]:
        return sorted(self._check().brokers)

    # --------------------------------------------------------------------------- topics

    def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]], config: Mapping[str, str]) -> None:
        server = self._check()
        if name in server.topics:
            raise TopicExistsError(name)
        server.topics[name] = TopicAssignment({p: tuple(r) for p, r in assignment.items()})
        server.configs[name] = dict(config)
        server._changed("topics")

    def get_topics(self) -> list[str]:
        return sorted(self._check().topics)

    def get_topic_assignment(self, name: str) -> TopicAssignment:
        server = self._check()
        if name not in server.topics:
            raise UnknownTopicOrPartitionError(name)
        return server.topics[name]

    def get_topic_config(self, name: str) -> dict[str, str]:
        return dict(self._check().configs.get(name, {}))

    # ------------------------------------------------------------------ partition states

    def get_partition_state(self, topic: str, partition: int) -> tuple[PartitionState, int]:
        server = self._check()
        found = server.states.get((topic, partition))
        if found is None:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition}")
        return found

    def set_partition_state(self, topic: str, partition: int, state: PartitionState,
                            expected_version: int) -> int:
        """The leader's ISR write (not fenced by the controller epoch)."""
        return self._set_state(self._check(), topic, partition, state, expected_version, "leader")

    def set_partition_state_as_controller(self, topic: str, partition: int, state: PartitionState,
                                          expected_version: int, controller_epoch_version: int) -> int:
        server = self._check()
        self._check_controller_epoch(server, controller_epoch_version)
        return self._set_state(server, topic, partition, state, expected_version, "controller")

    def create_partition_states_as_controller(self, topic: str, states: Mapping[int, PartitionState],
                                              controller_epoch_version: int) -> dict[int, int]:
        server = self._check()
        self._check_controller_epoch(server, controller_epoch_version)
        if topic not in server.topics:
            raise UnknownTopicOrPartitionError(topic)
        if any((topic, p) in server.states for p in states):
            raise PartitionStateExistsError(topic)
        for p, state in sorted(states.items()):
            server.states[(topic, p)] = (state, 0)
            server.writes.append((server._scheduler.now_ms, "create", ((topic, p), state)))
        return {p: 0 for p in states}

    @staticmethod
    def _check_controller_epoch(server: FakeZooKeeper, version: int) -> None:
        if server.controller_epoch is None or server.controller_epoch[1] != version:
            raise ControllerMovedError(f"/controller_epoch is not at version {version}")

    @staticmethod
    def _set_state(server: FakeZooKeeper, topic: str, partition: int, state: PartitionState,
                   expected_version: int, writer: str) -> int:
        found = server.states.get((topic, partition))
        if found is None:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition}")
        if found[1] != expected_version:
            raise BadVersionError(f"{topic}-{partition}: version {found[1]}, expected {expected_version}")
        server.states[(topic, partition)] = (state, expected_version + 1)
        server.writes.append((server._scheduler.now_ms, writer, ((topic, partition), state)))
        return expected_version + 1

    # ---------------------------------------------------------------- ISR notifications

    def propagate_isr_changes(self, partitions: Sequence[TopicPartition]) -> None:
        server = self._check()
        server._isr_sequence += 1
        server.isr_notifications[f"isr_change_{server._isr_sequence:010d}"] = list(partitions)
        server._changed("isr")

    def get_isr_change_notifications(self) -> list[tuple[str, list[TopicPartition]]]:
        return sorted(self._check().isr_notifications.items())

    def delete_isr_change_notifications(self, names: Sequence[str]) -> None:
        server = self._check()
        for name in names:
            server.isr_notifications.pop(name, None)

    # ------------------------------------------------------------------------ controller

    def register_controller(self, broker_id: int, timestamp_ms: int) -> tuple[int, int] | None:
        server = self._check()
        if server.controller is not None:
            return None
        epoch, version = server.controller_epoch or (0, -1)
        server.controller_epoch = (epoch + 1, version + 1)
        server.controller = (broker_id, self.session_id)
        server._changed("controller")
        server.writes.append((server._scheduler.now_ms, "controller", (broker_id, epoch + 1)))
        return server.controller_epoch

    def owned_controller_epoch(self) -> tuple[int, int] | None:
        server = self._check()
        if server.controller is None or server.controller[1] != self.session_id:
            return None
        return server.controller_epoch

    def get_controller_id(self) -> int:
        server = self._check()
        return server.controller[0] if server.controller is not None else -1
