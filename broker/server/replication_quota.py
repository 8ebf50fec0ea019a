"""Replication throttles (KIP-73): the pure core. Kafka's ``ReplicationQuotaManager``, one for
each direction of a broker's replication traffic.

Two broker configs set the rates, in bytes/s (dynamic, ``/config/brokers/<id>`` or
``<default>``; unset means unthrottled): ``leader.replication.throttled.rate`` bounds what this
broker sends to followers, ``follower.replication.throttled.rate`` what it fetches as a follower.
Two topic configs say *which* replicas are throttled: ``leader.replication.throttled.replicas``
and ``follower.replication.throttled.replicas``, each ``*`` (every replica of the topic) or a list
``partition:broker,...``; a broker takes the partitions whose entries name its own id (Kafka's
``TopicConfigHandler.parseThrottledPartitions``). ``pylog reassign --throttle`` writes the
leader list with the partitions' current replicas and the follower list with the replicas being
added, as ``kafka-reassign-partitions.sh`` does.

Enforcement, as Kafka's (``ReplicaManager.shouldLeaderThrottle``,
``RemoteLeaderEndPoint.shouldFollowerThrottle``): a replica is held back only when its
partition is throttled here, it is *not in sync*, and the direction's measured rate is over the
quota. The leader then answers that partition empty; the follower leaves it out of its fetch.
In-sync replicas are never held back (acks=all producers do not slow down), but their bytes
count: the leader records the bytes of every throttled partition it sends, in sync or not
(``KafkaApis.sizeOfThrottledPartitions``), the follower what it appends for throttled
partitions, so the total replication traffic of throttled partitions stays near the rate.

The rate is Kafka's ``SimpleRate``: ``replication.quota.window.num`` samples of
``replication.quota.window.size.seconds`` each, the total divided by the time since the oldest
sample but at least one window (unlike client quotas' ``Rate``, which pads to ``num - 1``
windows). Per fetch: one dict lookup per partition and, when throttled, one measure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from broker.server.quota import Rate

__all__ = [
    "LEADER_THROTTLED_RATE", "FOLLOWER_THROTTLED_RATE", "LEADER_THROTTLED_REPLICAS",
    "FOLLOWER_THROTTLED_REPLICAS", "ALL_REPLICAS", "ReplicationQuotaSettings", "SimpleRate",
    "ReplicationQuota", "ReplicationQuotas", "parse_throttled_replicas", "throttled_replicas_problem",
]

LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
ALL_REPLICAS = None  # the partitions of a topic throttled with "*"
_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


@dataclass(frozen=True)
class ReplicationQuotaSettings:
    """Kafka's ``replication.quota.window.num`` and ``replication.quota.window.size.seconds``."""
    window_num: int = 11
    window_size_ms: int = 1000


def throttled_replicas_problem(name: str, value: str) -> str | None:
    """Kafka's ``ThrottledReplicaListValidator``: its message for a bad list, None if valid."""
    items = [item.strip() for item in value.split(",")]
    if all(_REPLICA.fullmatch(item) for item in items) or "".join(items) == "*":
        return None
    shown = "[" + ", ".join(items) + "]"  # Kafka checks the parsed list and prints it
    return (f"Invalid value {shown} for configuration {name}: {name} must be the literal '*' or a list of "
            "replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")


def parse_throttled_replicas(value: str, broker_id: int) -> frozenset[int] | None:
    """The partitions a topic's throttled-replicas list throttles on ``broker_id``:
    ``ALL_REPLICAS`` (None) for ``*``, else the partitions of the entries naming this broker
    (an invalid list throttles nothing: it was written by another tool)."""
    text = value.strip()
    if text == "*":
        return ALL_REPLICAS
    if throttled_replicas_problem("", text) is not None:
        return frozenset()
    partitions = set()
    for item in text.split(","):
        if item.strip():
            partition, broker = item.strip().split(":")
            if int(broker) == broker_id:
                partitions.add(int(partition))
    return frozenset(partitions)


class SimpleRate(Rate):
    """Kafka's ``SimpleRate``: elapsed time since the oldest sample, at least one window."""

    __slots__ = ()

    def window_ms(self, now_ms: float) -> float:
        oldest = min((s for s in self._starts if s is not None), default=now_ms)
        return max(now_ms - oldest, self._window_ms)

    def ms_until_at_most(self, limit: float, now_ms: float) -> float:
        """How long until the rate is down to ``limit`` units/s with nothing more recorded
        (samples expiring on the way only bring it sooner)."""
        if limit <= 0:
            return float("inf")
        self._purge(now_ms)
        oldest = min((s for s in self._starts if s is not None), default=now_ms)
        return max(0.0, oldest + max(sum(self._values) * 1000 / limit, self._window_ms) - now_ms)


@dataclass
class ReplicationQuota:
    """One direction's throttle on this broker: its rate (bytes/s, None = unthrottled) and the
    partitions throttled (``topic -> frozenset of partitions`` or ``ALL_REPLICAS``)."""
    settings: ReplicationQuotaSettings = field(default_factory=ReplicationQuotaSettings)
    rate_bytes_per_s: int | None = None
    throttled: dict = field(default_factory=dict)
    _rate: SimpleRate | None = None

    def update_rate(self, rate_bytes_per_s: int | None) -> None:
        """A new quota keeps the measured rate (Kafka reconfigures the sensor's metric)."""
        self.rate_bytes_per_s = rate_bytes_per_s

    def set_throttled(self, topic: str, partitions: frozenset[int] | None) -> None:
        self.throttled[topic] = partitions

    def remove_throttle(self, topic: str) -> None:
        self.throttled.pop(topic, None)

    def is_throttled(self, topic: str, partition: int) -> bool:
        if topic not in self.throttled:
            return False
        partitions = self.throttled[topic]
        return partitions is ALL_REPLICAS or partition in partitions

    def is_quota_exceeded(self, now_ms: float) -> bool:
        limit = self.rate_bytes_per_s
        if limit is None or self._rate is None:
            return False
        return self._rate.measure(now_ms) > limit

    def ms_until_under(self, now_ms: float) -> float:
        """How long until ``is_quota_exceeded`` turns false (0 when it is false)."""
        if not self.is_quota_exceeded(now_ms):
            return 0.0
        return self._rate.ms_until_at_most(self.rate_bytes_per_s, now_ms)

    def should_throttle(self, topic: str, partition: int, in_sync: bool, now_ms: float) -> bool:
        """Kafka's ``shouldLeaderThrottle`` / ``shouldFollowerThrottle``."""
        return not in_sync and self.is_throttled(topic, partition) and self.is_quota_exceeded(now_ms)

    def record(self, size_bytes: int, now_ms: float) -> None:
        """Count replication bytes of throttled partitions (whether or not a rate is set, as
        Kafka's sensor does, so a rate set mid-transfer sees the traffic so far)."""
        if self._rate is None:
            self._rate = SimpleRate(self.settings.window_num, self.settings.window_size_ms, now_ms)
        self._rate.record(size_bytes, now_ms)

    def measured_bytes_per_s(self, now_ms: float) -> float:
        return 0.0 if self._rate is None else self._rate.measure(now_ms)

    def statistics(self, now_ms: float) -> dict:
        return {"rate_bytes_per_s": self.rate_bytes_per_s, "topics_throttled": len(self.throttled),
                "measured_bytes_per_s": round(self.measured_bytes_per_s(now_ms))}


@dataclass
class ReplicationQuotas:
    """This broker's two throttles, kept in step with its configs (the broker's shell calls
    ``on_topic_configs`` on every metadata snapshot and ``update_rates`` on dynamic broker
    configs)."""
    broker_id: int
    settings: ReplicationQuotaSettings = field(default_factory=ReplicationQuotaSettings)
    leader: ReplicationQuota = None  # type: ignore[assignment]
    follower: ReplicationQuota = None  # type: ignore[assignment]
    _seen: dict = field(default_factory=dict)  # (topic, key) -> the raw value last parsed

    def __post_init__(self) -> None:
        self.leader = self.leader or ReplicationQuota(self.settings)
        self.follower = self.follower or ReplicationQuota(self.settings)

    def update_rates(self, leader_bytes_per_s: int | None, follower_bytes_per_s: int | None) -> None:
        self.leader.update_rate(leader_bytes_per_s)
        self.follower.update_rate(follower_bytes_per_s)

    def on_topic_configs(self, configs: dict[str, dict[str, str]]) -> None:
        """Every topic's config overrides (``topic -> {key: value}``): mark or clear each
        topic's throttled partitions; a value parses again only when it changed."""
        for key, quota in ((LEADER_THROTTLED_REPLICAS, self.leader), (FOLLOWER_THROTTLED_REPLICAS, self.follower)):
            for topic in [t for (t, k) in self._seen if k == key and key not in configs.get(t, {})]:
                del self._seen[(topic, key)]
                quota.remove_throttle(topic)
            for topic, config in configs.items():
                raw = config.get(key)
                if raw is None or self._seen.get((topic, key)) == raw:
                    continue
                self._seen[(topic, key)] = raw
                partitions = parse_throttled_replicas(raw, self.broker_id)
                if partitions is ALL_REPLICAS or partitions:
                    quota.set_throttled(topic, partitions)
                else:
                    quota.remove_throttle(topic)
