"""Cluster metadata: bootstrap, the Metadata request, and a cache of brokers, topics and leaders.

``Cluster`` owns one ``BrokerConnection`` per broker address and the metadata cache; producer,
consumer and admin each hold one. Metadata comes from any reachable broker: an open connection
first, then the brokers the cache knows, then the ``bootstrap.servers`` list, so the client keeps
working when the bootstrap broker dies after start-up (Java's ``leastLoadedNode``).

Cache rules (Java ``Metadata``): a topic's entry is refreshed when it is older than
``metadata_max_age_ms``, when a caller reports an error that means "your metadata is wrong"
(``REFRESH_CODES``: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE and
the leader-epoch errors), and when a connection to a broker fails. The snapshot classes are pure
and built from a ``MetadataResponse`` alone, so they are tested without a socket.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping

from broker.client.config import SYSTEM_CLOCK, ClientConfig, Clock
from broker.client.connection import BrokerConnection
from broker.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from broker.wire import ApiKey, ErrorCode

__all__ = [
    "parse_bootstrap_servers",
    "BrokerInfo",
    "PartitionMetadata",
    "TopicMetadata",
    "ClusterSnapshot",
    "Cluster",
    "REFRESH_CODES",
    "describe_topic_error",
]

REFRESH_CODES = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.REPLICA_NOT_AVAILABLE,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.NOT_CONTROLLER,
    ErrorCode.UNKNOWN_TOPIC_ID,
})


def parse_bootstrap_servers(text: str) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` (or ``"[::1]:9092"``) to ``[(host, port), ...]``; ValueError names
    the first bad entry. A port is required, as in Kafka's ``ClientUtils.parseAndValidateAddresses``."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("bootstrap servers must be a non-empty 'host:port[,host:port...]' list")
    out = []
    for entry in text.split(","):
        entry = entry.strip()
        if not entry:
            continue
        if entry.startswith("["):
            host, sep, port_text = entry[1:].partition("]:")
        else:
            host, sep, port_text = entry.rpartition(":")
        if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError(f"invalid bootstrap server {entry!r}: expected host:port")
        out.append((host, int(port_text)))
    if not out:
        raise ValueError("bootstrap servers must be a non-empty 'host:port[,host:port...]' list")
    return out


# SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM: Kafka's AuthenticationException (not retriable)
_AUTHENTICATION_ERRORS = frozenset({58, 33})


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int  # -1: no leader right now
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    error_code: int
    is_internal: bool
    partitions: Mapping[int, PartitionMetadata]
    topic_id: object = None  # uuid.UUID from Metadata v10+, else None
    fetched_at_ms: float = 0.0

    def partition_ids(self) -> list[int]:
        return sorted(self.partitions)

    @property
    def has_all_leaders(self) -> bool:
        return bool(self.partitions) and all(p.leader >= 0 for p in self.partitions.values())


@dataclass(frozen=True)
class ClusterSnapshot:
    """One Metadata answer, as plain immutable data."""

    cluster_id: str | None
    controller_id: int
    brokers: Mapping[int, BrokerInfo]
    topics: Mapping[str, TopicMetadata]

    @classmethod
    def from_response(cls, response, now_ms: float = 0.0) -> "ClusterSnapshot":
        brokers = {
            b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers
        }
        topics = {}
        for t in response.topics:
            if t.name is None:  # v12 lookups by id only; we never ask for those
                continue
            partitions = {
                p.partition_index: PartitionMetadata(
                    topic=t.name,
                    partition=p.partition_index,
                    leader=p.leader_id,
                    leader_epoch=p.leader_epoch,
                    replicas=tuple(p.replica_nodes),
                    isr=tuple(p.isr_nodes),
                    offline_replicas=tuple(p.offline_replicas),
                    error_code=p.error_code,
                )
                for p in t.partitions
            }
            topics[t.name] = TopicMetadata(
                name=t.name,
                error_code=t.error_code,
                is_internal=t.is_internal,
                partitions=MappingProxyType(partitions),
                topic_id=_topic_id(t),
                fetched_at_ms=now_ms,
            )
        return cls(
            cluster_id=response.cluster_id,
            controller_id=response.controller_id,
            brokers=MappingProxyType(brokers),
            topics=MappingProxyType(topics),
        )


@dataclass
class _Cache:
    cluster_id: str | None = None
    controller_id: int = -1
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    stale: set[str] = field(default_factory=set)
    brokers_fetched_at_ms: float | None = None


class Cluster:
    """Connections to one cluster's brokers and its metadata cache. Not thread-safe."""

    def __init__(
        self,
        bootstrap_servers: str,
        config: ClientConfig | None = None,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap_servers(bootstrap_servers)
        self.config = config or ClientConfig()
        self.clock = clock
        self._rng = rng or random.Random()
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self._spares: dict[tuple[str, int], BrokerConnection] = {}  # see _spare_connection_to
        self._cache = _Cache()
        self._closed = False

    # ------------------------------------------------------------------ connections

    def connection(self, node_id: int) -> BrokerConnection:
        """A connected connection to broker ``node_id``. A failure marks the cache stale."""
        broker = self._cache.brokers.get(node_id)
        if broker is None:
            self.refresh_brokers()
            broker = self._cache.brokers.get(node_id)
        if broker is None:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE,
                             f"broker {node_id} is not in the cluster metadata")
        conn = self._connection_to(broker.host, broker.port, node_id)
        try:
            conn.connect()
        except KafkaError:
            self.invalidate()
            raise
        return conn

    def request_connection(self, node_id: int) -> BrokerConnection:
        """A connected connection to broker ``node_id`` for one blocking ``request``: the spare
        one while the main one carries pipelined requests (a producer's Produce requests, when
        its transaction coordinator is also a partition leader)."""
        conn = self.connection(node_id)
        if not conn.in_flight_count:
            return conn
        spare = self._spare_connection_to(conn.host, conn.port, node_id)
        try:
            spare.connect()
        except KafkaError:
            self.invalidate()
            raise
        return spare

    def any_connection(self) -> BrokerConnection:
        """A connected connection to any reachable broker (open ones first, then known brokers,
        then bootstrap servers), or ``KafkaConnectionError`` listing what was tried."""
        assert not self._closed, "Cluster is closed"
        for conn in self._connections.values():
            if conn.connected and conn.in_flight_count == 0:
                return conn
        known = [(b.host, b.port, b.node_id) for b in self._cache.brokers.values()]
        self._rng.shuffle(known)
        candidates = known + [(h, p, -1) for h, p in self.bootstrap]
        failures = []
        seen = set()
        for host, port, node_id in candidates:
            if (host, port) in seen:
                continue
            seen.add((host, port))
            conn = self._connection_to(host, port, node_id)
            if conn.in_flight_count:
                # Its owner awaits pipelined answers (a request here would jump the queue):
                # use this broker's spare connection, which only carries these requests.
                conn = self._spare_connection_to(host, port, node_id)
            try:
                conn.connect()
                return conn
            except KafkaError as exc:
                if exc.code in _AUTHENTICATION_ERRORS:
                    raise  # a wrong password is wrong on every broker: fatal, as in Kafka's clients
                failures.append(f"{conn.address} ({exc.message})")
        tried = "; ".join(failures) or "no broker address is known"
        raise KafkaConnectionError(f"no broker is reachable: {tried}")

    def controller_connection(self) -> BrokerConnection:
        """Connection to the controller; waits (up to ``request_timeout_ms``) while the
        cluster reports no controller (-1), as during an election (reference pitfall 12)."""
        deadline = self.clock.monotonic_ms() + self.config.request_timeout_ms
        while True:
            if self._cache.controller_id < 0 or self._brokers_stale():
                self.refresh_brokers()
            if self._cache.controller_id >= 0:
                return self.connection(self._cache.controller_id)
            if self.clock.monotonic_ms() >= deadline:
                raise KafkaTimeoutError("the cluster reports no controller")
            self.clock.sleep_ms(self.config.retry_backoff_ms)
            self._cache.controller_id = -1

    def _connection_to(self, host: str, port: int, node_id: int) -> BrokerConnection:
        conn = self._connections.get((host, port))
        if conn is None:
            conn = BrokerConnection(host, port, config=self.config, node_id=node_id, clock=self.clock)
            self._connections[(host, port)] = conn
        elif node_id >= 0:
            conn.node_id = node_id
        return conn

    def _spare_connection_to(self, host: str, port: int, node_id: int) -> BrokerConnection:
        """A second connection to a broker, for metadata-type requests while the first one
        has pipelined requests in flight (a producer's or a consumer's)."""
        conn = self._spares.get((host, port))
        if conn is None:
            conn = BrokerConnection(host, port, config=self.config, node_id=node_id, clock=self.clock)
            self._spares[(host, port)] = conn
        return conn

    def close(self) -> None:
        self._closed = True
        for conn in [*self._connections.values(), *self._spares.values()]:
            conn.close()
        self._connections.clear()
        self._spares.clear()

    # ------------------------------------------------------------------ metadata

    @property
    def controller_id(self) -> int:
        return self._cache.controller_id

    @property
    def cluster_id(self) -> str | None:
        return self._cache.cluster_id

    @property
    def brokers(self) -> Mapping[int, BrokerInfo]:
        if self._brokers_stale():
            self.refresh_brokers()
        return MappingProxyType(dict(self._cache.brokers))

    def refresh(self, topics: Iterable[str] | None = None) -> ClusterSnapshot:
        """Ask any broker for metadata of ``topics`` (None: all topics) and merge it into the
        cache. Retries other brokers on connection failures, up to ``request_timeout_ms``."""
        wanted = None if topics is None else sorted(set(topics))
        snapshot = self._request_metadata(wanted)
        now = self.clock.monotonic_ms()
        cache = self._cache
        cache.cluster_id = snapshot.cluster_id
        cache.controller_id = snapshot.controller_id
        cache.brokers = dict(snapshot.brokers)
        cache.brokers_fetched_at_ms = now
        for name in (snapshot.topics if wanted is None else wanted):
            topic = snapshot.topics.get(name)
            if topic is None:  # a broker may omit a topic it does not know
                topic = TopicMetadata(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False,
                                      MappingProxyType({}), None, now)
            cache.topics[name] = topic
            cache.stale.discard(name)
        if wanted is None:  # a full listing also tells us which topics are gone
            for name in [n for n in cache.topics if n not in snapshot.topics]:
                del cache.topics[name]
        return snapshot

    def refresh_brokers(self) -> None:
        """Refresh brokers and controller only (a Metadata request for no topics)."""
        self.refresh(())

    def invalidate(self, topic: str | None = None) -> None:
        """Mark one topic (or everything) stale: the next lookup asks a broker again."""
        if topic is None:
            self._cache.stale.update(self._cache.topics)
            self._cache.brokers_fetched_at_ms = None
        else:
            self._cache.stale.add(topic)

    def on_partition_error(self, topic: str, code: int) -> bool:
        """Note an error a broker returned for ``topic``; True if it means stale metadata."""
        if code in REFRESH_CODES:
            self.invalidate(topic)
            return True
        return False

    def topic(self, name: str, *, wait_ms: float = 0, allow_unknown_wait: bool = False) -> TopicMetadata:
        """Metadata of ``name``, refreshed when missing, stale or too old. While the topic has
        a partition without a leader (LEADER_NOT_AVAILABLE: just created, or an election),
        keep asking for up to ``wait_ms``; an unknown topic is waited for only with
        ``allow_unknown_wait`` (auto-creation). Raises ``KafkaError`` with the topic's error."""
        deadline = self.clock.monotonic_ms() + wait_ms
        while True:
            topic = self._cache.topics.get(name)
            if topic is None or name in self._cache.stale or self._too_old(topic):
                self.refresh([name])
                topic = self._cache.topics[name]
            if topic.error_code == ErrorCode.NONE and topic.has_all_leaders:
                return topic
            waitable = topic.error_code in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE) or (
                allow_unknown_wait and topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            if not waitable or self.clock.monotonic_ms() >= deadline:
                if topic.error_code != ErrorCode.NONE:
                    raise KafkaError(topic.error_code, f"topic {name!r}: {describe_topic_error(topic.error_code)}")
                return topic  # exists, but some partition has no leader: callers retry per partition
            self.clock.sleep_ms(self.config.retry_backoff_ms)
            self.invalidate(name)

    def partitions_for(self, topic: str, *, wait_ms: float = 0) -> list[int]:
        return self.topic(topic, wait_ms=wait_ms).partition_ids()

    def leader_for(self, topic: str, partition: int) -> int:
        """The leader's node id, or -1 if unknown (refreshes once if the topic is stale)."""
        meta = self.topic(topic)
        info = meta.partitions.get(partition)
        if info is None:
            raise KafkaError(
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"topic {topic!r} has no partition {partition} ({len(meta.partitions)} partitions)",
            )
        return info.leader

    def _too_old(self, topic: TopicMetadata) -> bool:
        return self.clock.monotonic_ms() - topic.fetched_at_ms > self.config.metadata_max_age_ms

    def _brokers_stale(self) -> bool:
        at = self._cache.brokers_fetched_at_ms
        return at is None or self.clock.monotonic_ms() - at > self.config.metadata_max_age_ms

    def _request_metadata(self, topics: list[str] | None) -> ClusterSnapshot:
        deadline = self.clock.monotonic_ms() + self.config.request_timeout_ms
        last_error: KafkaError | None = None
        while True:
            try:
                conn = self.any_connection()
                version = conn.version_for(ApiKey.METADATA)
                body = {
                    "topics": None if topics is None else [{"name": t} for t in topics],
                    "allow_auto_topic_creation": self.config.allow_auto_topic_creation,
                }
                response = conn.request(ApiKey.METADATA, body, version)
                return ClusterSnapshot.from_response(response, self.clock.monotonic_ms())
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                last_error = exc
            if self.clock.monotonic_ms() >= deadline:
                assert last_error is not None
                raise last_error
            self.clock.sleep_ms(self.config.retry_backoff_ms)


def _topic_id(topic):
    """The topic's UUID, or None when the broker sent none (before v10, or the all-zero id)."""
    topic_id = getattr(topic, "topic_id", None)
    return topic_id if topic_id is not None and topic_id.int != 0 else None


def describe_topic_error(code: int) -> str:
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        return "the topic does not exist"
    try:
        return ErrorCode(code).message or ErrorCode(code).name
    except ValueError:
        return f"error {code}"
