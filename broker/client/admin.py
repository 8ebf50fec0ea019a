"""``AdminClient``: create, delete, list and describe topics; list offsets; describe configs.

Topic creation and deletion go to the controller named by Metadata (reference 1.2 (d)); a
NOT_CONTROLLER answer (the controller moved) refreshes metadata and retries until
``request_timeout_ms``. Every broker error comes back as a ``KafkaError`` carrying the code, its
name and the broker's message, e.g. ``TOPIC_ALREADY_EXISTS (36): topic 'orders': ...``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from broker.client.config import SYSTEM_CLOCK, ClientConfig, Clock
from broker.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from broker.client.metadata import Cluster, PartitionMetadata, describe_topic_error
from broker.client.offsets import isolation_level_code, list_offsets, offset_spec_timestamp
from broker.wire import ApiKey, ErrorCode

__all__ = ["AdminClient", "ConfigValue", "TopicDescription"]

_RESOURCE_TYPE_TOPIC = 2
_RESOURCE_TYPE_BROKER = 4
_SOURCE_DEFAULT = 5  # DescribeConfigs v1+ ConfigSource.DEFAULT_CONFIG


@dataclass(frozen=True)
class ConfigValue:
    """One config as DescribeConfigs reports it; ``is_default``: nobody set it (Kafka's
    ``ConfigEntry.isDefault``, which ``kafka-topics --describe`` leaves out of ``Configs:``)."""

    name: str
    value: str | None
    is_default: bool


@dataclass(frozen=True)
class TopicDescription:
    name: str
    topic_id: object
    is_internal: bool
    partitions: tuple[PartitionMetadata, ...]

    @property
    def replication_factor(self) -> int:
        return max((len(p.replicas) for p in self.partitions), default=0)


class AdminClient:
    """Blocking admin operations against one cluster. Not thread-safe; close() when done."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        config: ClientConfig | None = None,
        clock: Clock = SYSTEM_CLOCK,
        cluster: Cluster | None = None,
    ) -> None:
        self.cluster = cluster or Cluster(bootstrap_servers, config, clock)
        self.config = self.cluster.config
        self.clock = self.cluster.clock

    def close(self) -> None:
        self.cluster.close()

    def __enter__(self) -> "AdminClient":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ------------------------------------------------------------------ topics

    def create_topics(
        self,
        name: str | Sequence[str],
        partitions: int = -1,
        replication_factor: int = -1,
        config: Mapping[str, str] | None = None,
        *,
        timeout_ms: int | None = None,
        validate_only: bool = False,
        wait_for_leaders: bool = True,
    ) -> None:
        """Create one topic (or several with the same settings). -1 partitions or replication
        factor means the broker's default (CreateTopics v4+, KIP-464). With
        ``wait_for_leaders`` return only once Metadata shows a leader for every partition, so
        a produce right after works."""
        names = [name] if isinstance(name, str) else list(name)
        timeout = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        topic_configs = [{"name": k, "value": None if v is None else str(v)}
                         for k, v in (config or {}).items()]
        body = {
            "topics": [{
                "name": n,
                "num_partitions": partitions,
                "replication_factor": replication_factor,
                "assignments": [],
                "configs": topic_configs,
            } for n in names],
            "timeout_ms": timeout,
            "validate_only": validate_only,
        }
        min_version = 4 if partitions == -1 or replication_factor == -1 else 0
        response = self._to_controller(ApiKey.CREATE_TOPICS, body, min_version, lambda r: [
            (t.name, t.error_code, t.error_message) for t in r.topics
        ])
        _raise_first(response)
        for n in names:
            self.cluster.invalidate(n)
        if wait_for_leaders and not validate_only:
            self._wait_for_leaders(names, timeout)

    def delete_topics(self, names: str | Iterable[str], *, timeout_ms: int | None = None) -> None:
        names = [names] if isinstance(names, str) else list(names)
        timeout = self.config.request_timeout_ms if timeout_ms is None else timeout_ms

        def body_for(version: int) -> dict:
            if version >= 6:
                return {"topics": [{"name": n} for n in names], "timeout_ms": timeout}
            return {"topic_names": names, "timeout_ms": timeout}

        response = self._to_controller(ApiKey.DELETE_TOPICS, body_for, 0, lambda r: [
            (t.name, t.error_code, getattr(t, "error_message", None)) for t in r.responses
        ])
        _raise_first(response)
        for n in names:
            self.cluster.invalidate(n)

    def list_topics(self, include_internal: bool = True) -> list[str]:
        snapshot = self.cluster.refresh(None)
        return sorted(
            t.name for t in snapshot.topics.values()
            if t.error_code == ErrorCode.NONE and (include_internal or not t.is_internal)
        )

    def describe_topics(self, topics: Iterable[str] | None = None) -> list[TopicDescription]:
        """Partitions with leader, replicas and ISR, sorted by topic name. Unknown topics raise."""
        wanted = None if topics is None else list(topics)
        snapshot = self.cluster.refresh(wanted)
        out = []
        for name in sorted(snapshot.topics if wanted is None else set(wanted)):
            meta = snapshot.topics.get(name)
            if meta is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")
            if meta.error_code not in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE):
                raise KafkaError(meta.error_code, f"topic {name!r}: {describe_topic_error(meta.error_code)}")
            partitions = tuple(meta.partitions[p] for p in sorted(meta.partitions))
            out.append(TopicDescription(name, meta.topic_id, meta.is_internal, partitions))
        return out

    # ------------------------------------------------------------------ offsets and configs

    def list_offsets(
        self,
        topic: str,
        partitions: Iterable[int] | None = None,
        spec: str | int = "latest",
        isolation_level: str = "read_uncommitted",
    ) -> dict[int, int]:
        """``{partition: offset}`` for ``spec`` "earliest", "latest" or a timestamp in ms (the
        first offset with a timestamp >= it, -1 when there is none)."""
        timestamp = offset_spec_timestamp(spec)
        level = isolation_level_code(isolation_level)
        ids = self.cluster.partitions_for(topic) if partitions is None else list(partitions)
        answers = list_offsets(self.cluster, {(topic, p): timestamp for p in ids}, level)
        return {p: answers[(topic, p)][0] for p in sorted(ids)}

    def describe_configs(self, topic: str) -> dict[str, str | None]:
        """The topic's configuration as the broker reports it (DescribeConfigs)."""
        return self._describe_configs(_RESOURCE_TYPE_TOPIC, topic, None)

    def describe_topic_configs(self, topics: Sequence[str]) -> dict[str, list[ConfigValue]]:
        """Every config of each topic in one DescribeConfigs request, in the broker's order."""
        if not topics:
            return {}
        conn = self.cluster.any_connection()
        version = conn.version_for(ApiKey.DESCRIBE_CONFIGS)
        response = conn.request(ApiKey.DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": _RESOURCE_TYPE_TOPIC, "resource_name": name,
                           "configuration_keys": None} for name in topics],
        }, version)
        described = {}
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise KafkaError(result.error_code,
                                 f"{result.resource_name!r}: {result.error_message or ''}".rstrip(": "))
            described[result.resource_name] = [
                ConfigValue(c.name, c.value, c.config_source == _SOURCE_DEFAULT if version >= 1 else c.is_default)
                for c in result.configs]
        return described

    def describe_broker_configs(self, broker_id: int) -> dict[str, str | None]:
        return self._describe_configs(_RESOURCE_TYPE_BROKER, str(broker_id), broker_id)

    def _describe_configs(self, resource_type: int, name: str, node_id: int | None) -> dict:
        conn = self.cluster.any_connection() if node_id is None else self.cluster.connection(node_id)
        version = conn.version_for(ApiKey.DESCRIBE_CONFIGS)
        response = conn.request(ApiKey.DESCRIBE_CONFIGS, {
            "resources": [{"resource_type": resource_type, "resource_name": name,
                           "configuration_keys": None}],
        }, version)
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise KafkaError(result.error_code, f"{name!r}: {result.error_message or ''}".rstrip(": "))
            return {c.name: c.value for c in result.configs}
        raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"DescribeConfigs returned nothing for {name!r}")

    # ------------------------------------------------------------------ internals

    def _to_controller(self, api_key: int, body, min_version: int, results) -> list[tuple]:
        """Send to the controller, retrying NOT_CONTROLLER and connection failures until the
        request timeout. ``body`` is a dict or a function of the version; ``results`` maps a
        response to ``[(name, error_code, error_message)]``."""
        deadline = self.clock.monotonic_ms() + self.config.request_timeout_ms
        while True:
            try:
                conn = self.cluster.controller_connection()
                version = conn.version_for(api_key, min_version=min_version)
                payload = body(version) if callable(body) else body
                answers = results(conn.request(api_key, payload, version))
                if not any(code == ErrorCode.NOT_CONTROLLER for _, code, _ in answers):
                    return answers
                error: KafkaError = KafkaError(ErrorCode.NOT_CONTROLLER, "the controller moved")
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                error = exc
            self.cluster.invalidate()
            if self.clock.monotonic_ms() >= deadline:
                raise error
            self.clock.sleep_ms(self.config.retry_backoff_ms)

    def _wait_for_leaders(self, names: list[str], timeout_ms: float) -> None:
        deadline = self.clock.monotonic_ms() + timeout_ms
        waiting = list(names)
        while waiting:
            snapshot = self.cluster.refresh(waiting)
            waiting = [n for n in waiting
                       if n not in snapshot.topics
                       or snapshot.topics[n].error_code != ErrorCode.NONE
                       or not snapshot.topics[n].has_all_leaders]
            if not waiting:
                return
            if self.clock.monotonic_ms() >= deadline:
                raise KafkaTimeoutError(
                    f"created {', '.join(names)}, but after {timeout_ms:.0f} ms "
                    f"{', '.join(waiting)} still has partitions without a leader"
                )
            self.clock.sleep_ms(self.config.retry_backoff_ms)


def _raise_first(answers: list[tuple]) -> None:
    for name, code, message in answers:
        if code != ErrorCode.NONE:
            text = message or KafkaError(code).message
            raise KafkaError(code, f"topic {name!r}: {text}")
