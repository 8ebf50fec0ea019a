"""``KafkaZkClient``: Kafka 2.x's ZooKeeper operations over kazoo, blocking.

The names follow ``kafka.zk.KafkaZkClient`` and ``AdminZkClient`` so a Kafka engineer finds each
operation where they expect it; the znode formats are ``broker.cluster.layout``.

Retry policy: *reads* retry on connection loss until ``connection_timeout_ms`` has passed (kazoo's
``KazooRetry``). *Writes* are sent once, because a create or a conditional set that succeeded
just before the connection dropped would fail on retry with a misleading NodeExists/BadVersion;
the exceptions are the two ephemeral creates (broker registration, controller), where a
NodeExists owned by our own session is recognised as our earlier success, as Kafka's
``CheckedEphemeral`` does.

Thread safety: every method may be called from any thread (kazoo serialises requests). Watch
callbacks run on kazoo's event thread; they must return quickly.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from random import Random

from kazoo import exceptions as zke
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry

from broker.cluster import paths
from broker.cluster.assignment import validate_new_assignment
from broker.cluster.errors import (
    BadVersionError,
    BrokerIdAlreadyRegisteredError,
    ClusterError,
    ControllerMovedError,
    InvalidTopicError,
    MalformedZnodeError,
    PartitionStateExistsError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
    ZooKeeperUnavailableError,
)
from broker.cluster.layout import (
    PRODUCER_ID_BLOCK_SIZE,
    BrokerRegistration,
    PartitionState,
    ProducerIdBlock,
    TopicAssignment,
    decode_cluster_id,
    decode_controller,
    decode_controller_epoch,
    decode_config_change,
    decode_entity_config,
    decode_offset,
    encode_cluster_id,
    encode_config_change,
    encode_controller,
    encode_controller_epoch,
    decode_isr_change,
    encode_entity_config,
    encode_isr_change,
    encode_offset,
    generate_cluster_id,
    next_producer_id_block,
)
from broker.cluster.names import colliding_topics, validate_topic_name

__all__ = ["KafkaZkClient"]

log = logging.getLogger(__name__)

PRODUCER_ID_BLOCK_ATTEMPTS_MAX = 100  # conditional-write retries before giving up on contention
_CREATE_TOPIC_ATTEMPTS_MAX = 3  # retries only when a stale /config/topics/{t} changes under us
_CONTROLLER_REGISTRATION_ATTEMPTS_MAX = 10  # retries only when /controller_epoch moves under us


def _parse(path: str, parse: Callable, *args):
    """Run a layout parser; on failure, name the znode in the error."""
    try:
        return parse(*args)
    except MalformedZnodeError as exc:
        raise MalformedZnodeError(f"{path}: {exc}") from None


def _multi_failure(results: Sequence) -> tuple[int, Exception] | None:
    """The failing operation of a ZooKeeper multi: its index and error. The others report
    RolledBack (before it) or RuntimeInconsistency (after it)."""
    for index, result in enumerate(results):
        if isinstance(result, Exception) and not isinstance(
            result, (zke.RolledBackError, zke.RuntimeInconsistency)
        ):
            return index, result
    return None


class KafkaZkClient:
    """One ZooKeeper session, with the operations a broker, the controller and the admin tools
    need. ``start()`` before use, ``close()`` after (or use it as a context manager)."""

    def __init__(self, hosts: str, session_timeout_ms: int, connection_timeout_ms: int) -> None:
        """``hosts``: ZooKeeper's connect string, ``"h1:2181,h2:2181/optional/chroot"``."""
        if session_timeout_ms <= 0 or connection_timeout_ms <= 0:
            raise ValueError("session_timeout_ms and connection_timeout_ms must be positive")
        self.hosts = hosts
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        read_retry = KazooRetry(max_tries=-1, deadline=connection_timeout_ms / 1000, max_delay=1.0)
        self._zk = KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000, command_retry=read_retry)
        self._closed = False

    # -- session -----------------------------------------------------------------------------

    def start(self) -> None:
        try:
            self._zk.start(timeout=self.connection_timeout_ms / 1000)
        except KazooTimeoutError:
            self.close()
            raise ZooKeeperUnavailableError(
                f"could not connect to ZooKeeper at {self.hosts} within {self.connection_timeout_ms} ms"
            ) from None

    def close(self) -> None:
        """End the session: ZooKeeper deletes its ephemeral znodes at once. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._zk.stop()
        self._zk.close()

    def __enter__(self) -> "KafkaZkClient":
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    @property
    def session_id(self) -> int:
        return self._zk.client_id[0] if self._zk.client_id else 0

    def add_state_listener(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(state)`` on kazoo's thread whenever the session changes state:
        ``"CONNECTED"``, ``"SUSPENDED"`` (connection lost, session may survive) or ``"LOST"``
        (session expired: every ephemeral znode and watch of it is gone; kazoo then opens a new
        session by itself). The callback must return quickly."""
        names = {KazooState.CONNECTED: "CONNECTED", KazooState.SUSPENDED: "SUSPENDED",
                 KazooState.LOST: "LOST"}
        self._zk.add_listener(lambda state: callback(names.get(state, str(state))))

    def _read(self, method: Callable, *args, **kwargs):
        return self._zk.retry(method, *args, **kwargs)

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self._read(self._zk.get_children, path))
        except zke.NoNodeError:
            return []

    def ensure_persistent_paths(self) -> None:
        """Create ``ZkData.PersistentZkPaths`` (empty) if missing, as every Kafka broker does at
        start-up, so later creates of children never race on their parents."""
        for path in paths.PERSISTENT_PATHS:
            self._zk.ensure_path(path)

    def get_or_create_cluster_id(self, rng: Random) -> str:
        """The cluster id every broker reports in Metadata; the first broker up chooses it."""
        try:
            data, _ = self._read(self._zk.get, paths.CLUSTER_ID)
            return _parse(paths.CLUSTER_ID, decode_cluster_id, data)
        except zke.NoNodeError:
            pass
        candidate = generate_cluster_id(rng)
        try:
            self._zk.create(paths.CLUSTER_ID, encode_cluster_id(candidate), makepath=True)
            return candidate
        except zke.NodeExistsError:  # another broker won the race: use its id
            data, _ = self._read(self._zk.get, paths.CLUSTER_ID)
            return _parse(paths.CLUSTER_ID, decode_cluster_id, data)

    # -- brokers -----------------------------------------------------------------------------

    def register_broker(self, registration: BrokerRegistration, wait_ms: int | None = None) -> int:
        """Create the ephemeral ``/brokers/ids/{id}``; return its czxid, the *broker epoch*
        (KIP-380) the controller uses to fence requests from a previous incarnation.

        A znode held by another session is usually this broker's own previous process, killed
        before its session expired: wait up to ``wait_ms`` (default: the session timeout) for
        ZooKeeper to expire it. If it is still there, another live broker has this id.
        """
        path = paths.broker_id_path(registration.broker_id)
        data = registration.to_json()
        wait_ms = self.session_timeout_ms if wait_ms is None else wait_ms
        deadline = time.monotonic() + wait_ms / 1000  # I/O edge: a real wait on a real session
        self._zk.ensure_path(paths.BROKER_IDS)
        while True:
            try:
                _, stat = self._zk.create(path, data, ephemeral=True, include_data=True)
                return stat.czxid
            except zke.NodeExistsError:
                pass
            changed = threading.Event()
            stat = self._zk.exists(path, watch=lambda event: changed.set())
            if stat is None:
                continue  # vanished between our create and exists: try again
            if stat.ephemeralOwner == self.session_id:
                return stat.czxid  # our own create, answered after a connection loss
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not changed.wait(remaining):
                raise BrokerIdAlreadyRegisteredError(
                    f"broker id {registration.broker_id} is already registered: {path} is held by "
                    f"ZooKeeper session 0x{stat.ephemeralOwner:x} and did not go away within "
                    f"{wait_ms} ms. Is another broker running with broker.id={registration.broker_id}?"
                )

    def get_broker_ids(self) -> list[int]:
        return [_broker_id(name) for name in self._children(paths.BROKER_IDS)]

    def get_brokers_and_epochs(self) -> dict[int, tuple[BrokerRegistration, int]]:
        """Every live broker with its epoch (czxid), as ``getAllBrokerAndEpochsInCluster``."""
        brokers = {}
        for broker_id in self.get_broker_ids():
            path = paths.broker_id_path(broker_id)
            try:
                data, stat = self._read(self._zk.get, path)
            except zke.NoNodeError:
                continue  # the broker went away while we listed
            brokers[broker_id] = (_parse(path, BrokerRegistration.from_json, broker_id, data), stat.czxid)
        return brokers

    def get_brokers(self) -> dict[int, BrokerRegistration]:
        return {b: reg for b, (reg, _) in self.get_brokers_and_epochs().items()}

    def watch_broker_ids(self, callback: Callable[[list[int]], bool | None]) -> ChildrenWatch:
        """Call ``callback(sorted broker ids)`` now and on every change of ``/brokers/ids``;
        returning ``False`` stops the watch. Children that are not broker ids are skipped."""
        self._zk.ensure_path(paths.BROKER_IDS)

        def on_children(children: list[str]) -> bool | None:
            ids = []
            for name in children:
                try:
                    ids.append(_broker_id(name))
                except MalformedZnodeError as exc:
                    log.warning("ignoring %s", exc)
            return callback(sorted(ids))

        return ChildrenWatch(self._zk, paths.BROKER_IDS, on_children)

    # -- topics ------------------------------------------------------------------------------

    def create_topic(self, name: str, assignment: Mapping[int, Sequence[int]], config: Mapping[str, str],
                     topic_id: str | None = None) -> None:
        """Write ``/config/topics/{t}`` and ``/brokers/topics/{t}`` (with ``topic_id``, Kafka 2.8+'s
        ``generate_topic_id``, when given) in one ZooKeeper multi.

        Kafka writes the config first and the assignment second, as two requests, so a crash in
        between leaves a config without a topic; the multi keeps Kafka's order and makes the
        pair atomic. A leftover config from such a crash is overwritten (Kafka's
        ``setOrCreateEntityConfigs``). Partition state znodes come later, from the controller.
        """
        validate_topic_name(name)
        validate_new_assignment(assignment)
        config_data = encode_entity_config(config)
        topic_data = TopicAssignment(assignment, topic_id=topic_id).to_json()
        self._check_topic_creatable(name)
        config_path, topic_path = paths.topic_config_path(name), paths.topic_path(name)
        self._zk.ensure_path(paths.CONFIG_TOPICS)
        self._zk.ensure_path(paths.BROKER_TOPICS)
        for _ in range(_CREATE_TOPIC_ATTEMPTS_MAX):
            txn = self._zk.transaction()
            stale_config = self._zk.exists(config_path)
            if stale_config is None:
                txn.create(config_path, config_data)
            else:
                txn.set_data(config_path, config_data, version=stale_config.version)
            txn.create(topic_path, topic_data)
            failure = _multi_failure(txn.commit())
            if failure is None:
                return
            index, error = failure
            if index == 1 and isinstance(error, zke.NodeExistsError):
                raise TopicExistsError(f"Topic '{name}' already exists.")
            if index == 1:
                raise ClusterError(f"creating {topic_path} failed: {type(error).__name__}")
            # The config znode appeared, changed or vanished since we looked: look again.
        if self._zk.exists(topic_path) is not None:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        raise ClusterError(f"{config_path} kept changing while creating topic '{name}'")

    def _check_topic_creatable(self, name: str) -> None:
        """``AdminZkClient.validateTopicCreate``: refuse a name in use, or one that collides
        with an existing topic once "." and "_" are read as one (metric names)."""
        existing = self.get_topics()
        if name in existing:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        colliding = colliding_topics(name, existing)
        if colliding:
            raise InvalidTopicError(f"Topic '{name}' collides with existing topics: {', '.join(colliding)}")

    def get_topics(self) -> list[str]:
        return self._children(paths.BROKER_TOPICS)

    def watch_topics(self, callback: Callable[[list[str]], bool | None]) -> ChildrenWatch:
        """Call ``callback(sorted topic names)`` now and on every change of ``/brokers/topics``;
        returning ``False`` stops the watch."""
        self._zk.ensure_path(paths.BROKER_TOPICS)
        return ChildrenWatch(self._zk, paths.BROKER_TOPICS, lambda children: callback(sorted(children)))

    def get_topic_assignment(self, name: str) -> TopicAssignment:
        path = paths.topic_path(name)
        try:
            data, _ = self._read(self._zk.get, path)
        except zke.NoNodeError:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist") from None
        return _parse(path, TopicAssignment.from_json, data, name)

    def add_partitions(self, name: str, new: Mapping[int, Sequence[int]]) -> None:
        """Add partitions ``new`` (partition -> replicas) to ``/brokers/topics/{t}``, keeping
        its topic id and any reassignment in progress (``AdminZkClient.addPartitions``); the
        write is conditional on the version read, so a concurrent change fails it."""
        path = paths.topic_path(name)
        try:
            data, stat = self._read(self._zk.get, path)
        except zke.NoNodeError:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist") from None
        current = _parse(path, TopicAssignment.from_json, data, name)
        clash = sorted(set(new) & set(current.partitions))
        if clash:
            raise ClusterError(f"{name} already has partitions {clash}")
        partitions = {**current.partitions, **{p: list(r) for p, r in new.items()}}
        validate_new_assignment(partitions)
        extended = TopicAssignment(partitions, current.adding_replicas, current.removing_replicas, current.topic_id)
        try:
            self._zk.set(path, extended.to_json(), version=stat.version)
        except zke.BadVersionError:
            raise ClusterError(f"{path} changed while adding partitions; try again") from None

    def set_partition_reassignment(self, name: str, partition: int, replicas: Sequence[int],
                                   adding: Sequence[int], removing: Sequence[int]) -> None:
        """One partition's replicas and its ``adding_replicas``/``removing_replicas`` (empty: no
        reassignment) in ``/brokers/topics/{t}``, conditional on the version read (KIP-455)."""
        path = paths.topic_path(name)
        for _ in range(_CREATE_TOPIC_ATTEMPTS_MAX):
            try:
                data, stat = self._read(self._zk.get, path)
            except zke.NoNodeError:
                raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist") from None
            current = _parse(path, TopicAssignment.from_json, data, name)
            partitions = {**current.partitions, partition: list(replicas)}
            adding_all = {p: r for p, r in current.adding_replicas.items() if p != partition}
            removing_all = {p: r for p, r in current.removing_replicas.items() if p != partition}
            if adding:
                adding_all[partition] = list(adding)
            if removing:
                removing_all[partition] = list(removing)
            updated = TopicAssignment(partitions, adding_all, removing_all, current.topic_id)
            try:
                self._zk.set(path, updated.to_json(), version=stat.version)
                return
            except zke.BadVersionError:
                continue
        raise ClusterError(f"{path} kept changing while reassigning partition {partition}")

    def get_topic_config(self, name: str) -> dict[str, str]:
        """The topic's config overrides; none (``{}``) when ``/config/topics/{t}`` is absent."""
        path = paths.topic_config_path(name)
        try:
            data, _ = self._read(self._zk.get, path)
        except zke.NoNodeError:
            return {}
        return _parse(path, decode_entity_config, data)

    def change_topic_config(self, name: str, config: Mapping[str, str]) -> None:
        """Replace the topic's overrides, then notify brokers through ``/config/changes``
        (``AdminZkClient.changeTopicConfig``; the notification is version 2)."""
        config_data = encode_entity_config(config)
        if self._zk.exists(paths.topic_path(name)) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist")
        path = paths.topic_config_path(name)
        try:
            self._zk.set(path, config_data)
        except zke.NoNodeError:
            self._zk.create(path, config_data, makepath=True)
        self._zk.create(
            paths.CONFIG_CHANGE_PREFIX, encode_config_change(f"topics/{name}"), sequence=True, makepath=True
        )

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        """``/config/<type>/<name>``'s overrides (``{}`` when absent): topics, brokers (an id
        or ``<default>``), users, clients."""
        path = paths.entity_config_path(entity_type, name)
        try:
            data, _ = self._read(self._zk.get, path)
        except zke.NoNodeError:
            return {}
        return _parse(path, decode_entity_config, data)

    def change_entity_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> None:
        """Replace an entity's overrides and notify every broker (``/config/changes``), as
        ``AdminZkClient.changeConfigs``; topics must exist."""
        if entity_type == "topics":
            self.change_topic_config(name, config)
            return
        path, config_data = paths.entity_config_path(entity_type, name), encode_entity_config(config)
        try:
            self._zk.set(path, config_data)
        except zke.NoNodeError:
            self._zk.create(path, config_data, makepath=True)
        self._zk.create(paths.CONFIG_CHANGE_PREFIX, encode_config_change(f"{entity_type}/{name}"),
                        sequence=True, makepath=True)

    def get_config_changes(self, after: int) -> list[tuple[int, str]]:
        """The notifications whose sequence number is above ``after``: (number, entity path),
        oldest first. A notification that vanished (purged) or is malformed is skipped."""
        found = []
        for child in self._children(paths.CONFIG_CHANGES):
            number = _sequence_number(child)
            if number is None or number <= after:
                continue
            path = f"{paths.CONFIG_CHANGES}/{child}"
            try:
                data, _ = self._read(self._zk.get, path)
                found.append((number, _parse(path, decode_config_change, data)))
            except zke.NoNodeError:
                continue
            except MalformedZnodeError as exc:
                log.warning("ignoring %s: %s", path, exc)
        return sorted(found)

    def purge_config_changes(self, older_than_ms: int, now_ms: int) -> int:
        """Delete notifications created more than ``older_than_ms`` ago (Kafka's
        ``ZkNodeChangeNotificationListener`` purge, 15 min); the number deleted. Several brokers
        may purge at once: a notification already gone is skipped."""
        deleted = 0
        for child in self._children(paths.CONFIG_CHANGES):
            if _sequence_number(child) is None:
                continue
            path = f"{paths.CONFIG_CHANGES}/{child}"
            try:
                stat = self._read(self._zk.exists, path)
                if stat is not None and now_ms - stat.ctime > older_than_ms:
                    self._zk.delete(path)
                    deleted += 1
            except zke.NoNodeError:
                continue
        return deleted

    def last_config_change(self) -> int:
        """The newest notification's sequence number (-1: none), from the names alone."""
        numbers = [n for n in map(_sequence_number, self._children(paths.CONFIG_CHANGES)) if n is not None]
        return max(numbers, default=-1)

    def watch_config_changes(self, callback: Callable[[], bool | None]) -> ChildrenWatch:
        """Call ``callback()`` now and whenever ``/config/changes`` gets a child."""
        self._zk.ensure_path(paths.CONFIG_CHANGES)
        return ChildrenWatch(self._zk, paths.CONFIG_CHANGES, lambda children: callback())

    # -- partition state ---------------------------------------------------------------------

    def create_partition_states(self, topic: str, states: Mapping[int, PartitionState]) -> dict[int, int]:
        """Create ``.../partitions/{p}/state`` for each partition, all or none; return each
        znode's version (0). Done by the controller when it first elects leaders."""
        if self._zk.exists(paths.topic_path(topic)) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist")
        for path in [paths.partitions_path(topic)] + [paths.partition_path(topic, p) for p in sorted(states)]:
            try:
                self._zk.create(path)  # empty, as Kafka leaves them; never makepath (see above)
            except zke.NodeExistsError:
                pass
            except zke.NoNodeError:
                raise UnknownTopicOrPartitionError(f"Topic '{topic}' was deleted meanwhile") from None
        ordered = sorted(states)
        txn = self._zk.transaction()
        for partition in ordered:
            txn.create(paths.partition_state_path(topic, partition), states[partition].to_json())
        failure = _multi_failure(txn.commit())
        if failure is not None:
            index, error = failure
            if isinstance(error, zke.NodeExistsError):
                raise PartitionStateExistsError(f"{topic}-{ordered[index]} already has a state znode")
            raise UnknownTopicOrPartitionError(f"{topic}-{ordered[index]}: {type(error).__name__}")
        return {partition: 0 for partition in ordered}

    def get_partition_state(self, topic: str, partition: int) -> tuple[PartitionState, int]:
        """The state and its znode version, the version a later conditional update names."""
        path = paths.partition_state_path(topic, partition)
        try:
            data, stat = self._read(self._zk.get, path)
        except zke.NoNodeError:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition} has no state znode") from None
        return _parse(path, PartitionState.from_json, data), stat.version

    def set_partition_state(self, topic: str, partition: int, state: PartitionState, expected_version: int) -> int:
        """Write ``state`` only if the znode is still at ``expected_version``; return the new
        version. Leader and controller both write here (ISR changes, elections); the version
        check is what keeps one from silently undoing the other."""
        path = paths.partition_state_path(topic, partition)
        try:
            return self._zk.set(path, state.to_json(), version=expected_version).version
        except zke.BadVersionError:
            raise BadVersionError(
                f"{path}: expected version {expected_version}, but it changed; re-read and retry"
            ) from None
        except zke.NoNodeError:
            raise UnknownTopicOrPartitionError(f"{topic}-{partition} has no state znode") from None

    def set_partition_state_as_controller(self, topic: str, partition: int, state: PartitionState,
                                          expected_version: int, controller_epoch_version: int) -> int:
        """The controller's conditional write (Kafka 2.2+ ``updateLeaderAndIsr`` with
        ``checkControllerEpoch``): one multi that checks ``/controller_epoch`` is still at the
        version this controller's election wrote, then sets the state at ``expected_version``.
        A controller that lost its role therefore cannot write (``ControllerMovedError``); a
        stale state version raises ``BadVersionError``. Returns the new state version."""
        path = paths.partition_state_path(topic, partition)
        txn = self._zk.transaction()
        txn.check(paths.CONTROLLER_EPOCH, controller_epoch_version)
        txn.set_data(path, state.to_json(), version=expected_version)
        results = txn.commit()
        failure = _multi_failure(results)
        if failure is None:
            return results[1].version
        index, error = failure
        if index == 0:
            raise ControllerMovedError(f"/controller_epoch moved past version {controller_epoch_version}")
        if isinstance(error, zke.BadVersionError):
            raise BadVersionError(f"{path}: expected version {expected_version}, but it changed")
        raise UnknownTopicOrPartitionError(f"{topic}-{partition}: {type(error).__name__}")

    def create_partition_states_as_controller(self, topic: str, states: Mapping[int, PartitionState],
                                              controller_epoch_version: int) -> dict[int, int]:
        """``create_partition_states`` fenced like ``set_partition_state_as_controller``."""
        if self._zk.exists(paths.topic_path(topic)) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{topic}' does not exist")
        for path in [paths.partitions_path(topic)] + [paths.partition_path(topic, p) for p in sorted(states)]:
            try:
                self._zk.create(path)
            except zke.NodeExistsError:
                pass
            except zke.NoNodeError:
                raise UnknownTopicOrPartitionError(f"Topic '{topic}' was deleted meanwhile") from None
        ordered = sorted(states)
        txn = self._zk.transaction()
        txn.check(paths.CONTROLLER_EPOCH, controller_epoch_version)
        for partition in ordered:
            txn.create(paths.partition_state_path(topic, partition), states[partition].to_json())
        failure = _multi_failure(txn.commit())
        if failure is not None:
            index, error = failure
            if index == 0:
                raise ControllerMovedError(f"/controller_epoch moved past version {controller_epoch_version}")
            if isinstance(error, zke.NodeExistsError):
                raise PartitionStateExistsError(f"{topic}-{ordered[index - 1]} already has a state znode")
            raise UnknownTopicOrPartitionError(f"{topic}-{ordered[index - 1]}: {type(error).__name__}")
        return {partition: 0 for partition in ordered}

    # -- ISR change notifications ------------------------------------------------------------

    def propagate_isr_changes(self, partitions: Sequence[tuple[str, int]]) -> None:
        """A leader that changed ISRs tells the controller (``propagateIsrChanges``): one
        PERSISTENT_SEQUENTIAL ``/isr_change_notification/isr_change_N``; the controller reads
        the states of the named partitions, pushes UpdateMetadata, and deletes the node."""
        self._zk.create(paths.ISR_CHANGE_PREFIX, encode_isr_change(partitions), sequence=True,
                        makepath=True)

    def get_isr_change_notifications(self) -> list[tuple[str, list[tuple[str, int]]]]:
        """``(child name, partitions)`` of every pending notification, oldest first. A node
        that does not parse is returned with no partitions (the caller deletes it)."""
        out = []
        for name in self._children(paths.ISR_CHANGE_NOTIFICATION):
            path = f"{paths.ISR_CHANGE_NOTIFICATION}/{name}"
            try:
                data, _ = self._read(self._zk.get, path)
            except zke.NoNodeError:
                continue
            try:
                out.append((name, decode_isr_change(data)))
            except MalformedZnodeError as exc:
                log.warning("ignoring %s: %s", path, exc)
                out.append((name, []))
        return out

    def delete_isr_change_notifications(self, names: Sequence[str]) -> None:
        for name in names:
            try:
                self._zk.delete(f"{paths.ISR_CHANGE_NOTIFICATION}/{name}")
            except zke.NoNodeError:
                pass

    def watch_isr_change_notifications(self, callback: Callable[[list[str]], bool | None]) -> ChildrenWatch:
        self._zk.ensure_path(paths.ISR_CHANGE_NOTIFICATION)
        return ChildrenWatch(self._zk, paths.ISR_CHANGE_NOTIFICATION,
                             lambda children: callback(sorted(children)))

    # -- topic deletion ----------------------------------------------------------------------

    def mark_topic_for_deletion(self, name: str) -> bool:
        """Create ``/admin/delete_topics/{t}`` for the controller to act on. False when it was
        already marked (Kafka's request handler treats that as success too)."""
        if self._zk.exists(paths.topic_path(name)) is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist")
        try:
            self._zk.create(paths.delete_topic_path(name), makepath=True)
            return True
        except zke.NodeExistsError:
            return False

    def get_topics_marked_for_deletion(self) -> list[str]:
        return self._children(paths.DELETE_TOPICS)

    def delete_topic_znodes(self, name: str) -> None:
        """The controller's last step of a deletion (``TopicDeletionManager.completeDeleteTopic``):
        assignment and partition states, then config, then the deletion marker last, so a crash
        midway leaves the marker and the controller finishes the job after a restart."""
        self._zk.delete(paths.topic_path(name), recursive=True)
        for path in (paths.topic_config_path(name), paths.delete_topic_path(name)):
            try:
                self._zk.delete(path)
            except zke.NoNodeError:
                pass

    # -- producer ids ------------------------------------------------------------------------

    def allocate_producer_id_block(
        self, broker_id: int, block_size: int = PRODUCER_ID_BLOCK_SIZE,
        attempts_max: int = PRODUCER_ID_BLOCK_ATTEMPTS_MAX,
    ) -> ProducerIdBlock:
        """Claim the next block of producer ids (``ProducerIdManager``): read the latest block
        with its version, write the following one conditionally, retry when another broker
        wrote first. Blocks never overlap and ids are never reused."""
        self._zk.ensure_path(paths.PRODUCER_ID_BLOCK)
        for _ in range(attempts_max):
            data, stat = self._read(self._zk.get, paths.PRODUCER_ID_BLOCK)
            latest = _parse(paths.PRODUCER_ID_BLOCK, ProducerIdBlock.from_json, data) if data else None
            block = next_producer_id_block(latest, broker_id, block_size)
            try:
                self._zk.set(paths.PRODUCER_ID_BLOCK, block.to_json(), version=stat.version)
                return block
            except zke.BadVersionError:
                continue
        raise ClusterError(f"no producer id block after {attempts_max} attempts: too much contention")

    # -- controller --------------------------------------------------------------------------

    def try_become_controller(self, broker_id: int, timestamp_ms: int) -> bool:
        """Create the ephemeral ``/controller``; True if this session holds it now."""
        try:
            self._zk.create(paths.CONTROLLER, encode_controller(broker_id, timestamp_ms), ephemeral=True)
            return True
        except zke.NodeExistsError:
            stat = self._zk.exists(paths.CONTROLLER)
            return stat is not None and stat.ephemeralOwner == self.session_id

    def get_controller_id(self) -> int:
        """The controller's broker id, -1 when there is none (an election is due)."""
        try:
            data, _ = self._read(self._zk.get, paths.CONTROLLER)
        except zke.NoNodeError:
            return -1
        return _parse(paths.CONTROLLER, decode_controller, data)

    def watch_controller(self, callback: Callable[[int], bool | None]) -> DataWatch:
        """Call ``callback(controller id)`` (-1 when ``/controller`` is absent) now and on every
        change of ``/controller``, on kazoo's thread; returning ``False`` stops the watch. A
        znode that does not parse reads as -1 (the next election replaces it)."""

        def on_data(data, stat) -> bool | None:
            controller_id = -1
            if data is not None and stat is not None:
                try:
                    controller_id = decode_controller(data)
                except MalformedZnodeError as exc:
                    log.warning("ignoring %s: %s", paths.CONTROLLER, exc)
            return callback(controller_id)

        return DataWatch(self._zk, paths.CONTROLLER, on_data)

    def owned_controller_epoch(self) -> tuple[int, int] | None:
        """``(epoch, zk version of /controller_epoch)`` if this session holds ``/controller``,
        else None: a controller that stepped down after an error but still holds the znode
        takes its role back with the epoch it registered (registration and epoch bump are one
        multi, so the current epoch is the one it wrote)."""
        stat = self._zk.exists(paths.CONTROLLER)
        if stat is None or stat.ephemeralOwner != self.session_id:
            return None
        return self.get_controller_epoch()

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """``(epoch, zk_version)`` of ``/controller_epoch``; None before the first election."""
        try:
            data, stat = self._read(self._zk.get, paths.CONTROLLER_EPOCH)
        except zke.NoNodeError:
            return None
        return _parse(paths.CONTROLLER_EPOCH, decode_controller_epoch, data), stat.version

    def _controller_epoch_or_initial(self) -> tuple[int, int]:
        """Read ``/controller_epoch``, creating it as ``0`` first (``maybeCreateControllerEpochZNode``)."""
        current = self.get_controller_epoch()
        if current is not None:
            return current
        try:
            self._zk.create(paths.CONTROLLER_EPOCH, encode_controller_epoch(0))
            return 0, 0
        except zke.NodeExistsError:
            current = self.get_controller_epoch()
            assert current is not None, "/controller_epoch is never deleted"
            return current

    def increment_controller_epoch(self) -> int:
        """Bump ``/controller_epoch`` conditionally and return the new epoch; the caller must
        hold ``/controller``. A lost race means another broker became controller meanwhile."""
        epoch, version = self._controller_epoch_or_initial()
        try:
            self._zk.set(paths.CONTROLLER_EPOCH, encode_controller_epoch(epoch + 1), version=version)
        except zke.BadVersionError:
            raise ControllerMovedError(f"/controller_epoch moved past {epoch}: another controller") from None
        return epoch + 1

    def register_controller_and_increment_epoch(self, broker_id: int, timestamp_ms: int) -> int | None:
        """Create ``/controller`` and bump ``/controller_epoch`` in one multi, as Kafka 2.2+ does
        (``registerControllerAndIncrementControllerEpoch``), so no broker can hold
        ``/controller`` with a stale epoch. The new epoch, or None if another broker won."""
        won = self.register_controller(broker_id, timestamp_ms)
        return None if won is None else won[0]

    def register_controller(self, broker_id: int, timestamp_ms: int) -> tuple[int, int] | None:
        """``register_controller_and_increment_epoch`` returning ``(epoch, zk version of
        /controller_epoch)``: the version every later controller write checks (fencing)."""
        for _ in range(_CONTROLLER_REGISTRATION_ATTEMPTS_MAX):
            epoch, version = self._controller_epoch_or_initial()
            txn = self._zk.transaction()
            txn.create(paths.CONTROLLER, encode_controller(broker_id, timestamp_ms), ephemeral=True)
            txn.set_data(paths.CONTROLLER_EPOCH, encode_controller_epoch(epoch + 1), version=version)
            results = txn.commit()
            failure = _multi_failure(results)
            if failure is None:
                return epoch + 1, results[1].version
            index, error = failure
            if index == 0 and isinstance(error, zke.NodeExistsError):
                return None
            # BadVersion: an epoch bump raced ours; the /controller create will settle it.
        raise ClusterError("could not register as controller: /controller_epoch kept changing")

    # -- old ZooKeeper consumer offsets ------------------------------------------------------

    def commit_consumer_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Write ``/consumers/{g}/offsets/{t}/{p}`` (``ZkUtils.updatePersistentPath``)."""
        path = paths.consumer_offset_path(group, topic, partition)
        data = encode_offset(offset)
        try:
            self._zk.set(path, data)
        except zke.NoNodeError:
            try:
                self._zk.create(path, data, makepath=True)
            except zke.NodeExistsError:  # a concurrent first commit: last writer wins
                self._zk.set(path, data)

    def get_consumer_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """Every committed offset of ``group``; ``{}`` for a group that never committed."""
        root = paths.consumer_offsets_path(group)
        offsets = {}
        for topic in self._children(root):
            for name in self._children(f"{root}/{topic}"):
                path = f"{root}/{topic}/{name}"
                if not name.isdigit() or not name.isascii():
                    raise MalformedZnodeError(f"{path}: partition {name!r} is not a number")
                try:
                    data, _ = self._read(self._zk.get, path)
                except zke.NoNodeError:
                    continue
                offsets[(topic, int(name))] = _parse(path, decode_offset, data)
        return offsets


def _broker_id(name: str) -> int:
    if not name.isdigit() or not name.isascii():
        raise MalformedZnodeError(f"{paths.BROKER_IDS}/{name}: not a broker id")
    return int(name)


def _sequence_number(child: str) -> int | None:
    """``config_change_0000000042`` -> 42; None for any other name."""
    prefix = paths.CONFIG_CHANGE_PREFIX.rsplit("/", 1)[1]
    digits = child[len(prefix):] if child.startswith(prefix) else ""
    return int(digits) if digits.isdigit() else None
