"""Kafka's internal topics: ``__consumer_offsets`` and ``__transaction_state``. Pure.

The group and transaction coordinators keep their state in these two compacted topics
(``shared/reference/coordinators.md`` sections 2-4). Nobody creates them by hand: the first
FindCoordinator of the matching key type (0 group, 1 transaction) asks for the topic, and it is
created through the same ZooKeeper path as any topic (``ControllerService.create_topic``: topic
and config znodes, then the controller elects leaders). This module says *what* to create; the
asyncio side (``broker.server.internal_topics``) plans the replicas and does it.

What Kafka 4.1 writes, and pylog with it (``GroupCoordinatorService.groupMetadataTopicConfigs``,
``TransactionStateManager.transactionTopicConfigs``), so Kafka's tools read the same configs in
``/config/topics/<name>``:

- ``__consumer_offsets``: ``offsets.topic.num.partitions`` (50) partitions,
  ``offsets.topic.replication.factor`` (3) replicas, ``cleanup.policy=compact``,
  ``compression.type=producer``, ``segment.bytes=offsets.topic.segment.bytes`` (100 MiB).
- ``__transaction_state``: ``transaction.state.log.num.partitions`` (50),
  ``transaction.state.log.replication.factor`` (3), ``cleanup.policy=compact``,
  ``compression.type=uncompressed``, ``min.insync.replicas=transaction.state.log.min.isr`` (2),
  ``segment.bytes=transaction.state.log.segment.bytes`` (100 MiB),
  ``unclean.leader.election.enable=false`` (a transaction's state must never roll back).

**The replication factor rule** (``broker.server.internal_topics.plan_internal_topic``): the topic is created only when at
least the configured replication factor of brokers is live; otherwise nothing is written and the
coordinator stays unavailable (COORDINATOR_NOT_AVAILABLE), and the next FindCoordinator tries
again. This is what Kafka does since 0.11 (KIP-115; Kafka 2.x's ``KafkaApis.createInternalTopic``
refuses with a logged error, Kafka 4.1's controller refuses with INVALID_REPLICATION_FACTOR).
pylog offers no "RF = min(configured, live brokers)" fallback: a replication factor is fixed at
creation and never grows by itself, so the first broker to start in a 3-broker cluster would
create a topic that keeps every group's offsets on one disk for ever. A single-broker cluster
sets ``offsets.topic.replication.factor=1`` (as Kafka's own sample ``server.properties`` does).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

__all__ = [
    "GROUP_METADATA_TOPIC_NAME", "TRANSACTION_STATE_TOPIC_NAME", "INTERNAL_TOPICS",
    "KEY_TYPE_GROUP", "KEY_TYPE_TRANSACTION",
    "InternalTopicsConfig", "InternalTopicSpec",
    "is_internal", "topic_for_key_type", "internal_topic_spec", "replication_factor_setting",
]

GROUP_METADATA_TOPIC_NAME = "__consumer_offsets"
TRANSACTION_STATE_TOPIC_NAME = "__transaction_state"
INTERNAL_TOPICS = frozenset({GROUP_METADATA_TOPIC_NAME, TRANSACTION_STATE_TOPIC_NAME})
KEY_TYPE_GROUP = 0  # FindCoordinator key types (CoordinatorType)
KEY_TYPE_TRANSACTION = 1
_SEGMENT_BYTES_DEFAULT = 100 * 1024 * 1024


@dataclass(frozen=True)
class InternalTopicsConfig:
    """The broker settings behind the two topics, with Kafka's names and defaults."""

    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = _SEGMENT_BYTES_DEFAULT
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_state_log_segment_bytes: int = _SEGMENT_BYTES_DEFAULT


@dataclass(frozen=True)
class InternalTopicSpec:
    name: str
    partitions: int
    replication_factor: int
    configs: Mapping[str, str]


def is_internal(name: str | None) -> bool:
    """Kafka's ``Topic.isInternal``: Metadata marks these, Produce refuses them."""
    return name in INTERNAL_TOPICS


def topic_for_key_type(key_type: int) -> str | None:
    """The topic a FindCoordinator key type needs; None for a type pylog does not know."""
    return {KEY_TYPE_GROUP: GROUP_METADATA_TOPIC_NAME,
            KEY_TYPE_TRANSACTION: TRANSACTION_STATE_TOPIC_NAME}.get(key_type)


def internal_topic_spec(name: str, config: InternalTopicsConfig) -> InternalTopicSpec:
    """Partitions, replication factor and topic configs of internal topic ``name``."""
    if name == GROUP_METADATA_TOPIC_NAME:
        return InternalTopicSpec(name, config.offsets_topic_num_partitions,
                                 config.offsets_topic_replication_factor, MappingProxyType({
                                     "cleanup.policy": "compact",
                                     "compression.type": "producer",
                                     "segment.bytes": str(config.offsets_topic_segment_bytes),
                                 }))
    assert name == TRANSACTION_STATE_TOPIC_NAME, f"not an internal topic: {name!r}"
    return InternalTopicSpec(name, config.transaction_state_log_num_partitions,
                             config.transaction_state_log_replication_factor, MappingProxyType({
                                 "cleanup.policy": "compact",
                                 "compression.type": "uncompressed",
                                 "min.insync.replicas": str(config.transaction_state_log_min_isr),
                                 "segment.bytes": str(config.transaction_state_log_segment_bytes),
                                 "unclean.leader.election.enable": "false",
                             }))


def replication_factor_setting(name: str) -> str:
    """The broker setting that names ``name``'s replication factor, for messages."""
    return ("offsets.topic.replication.factor" if name == GROUP_METADATA_TOPIC_NAME
            else "transaction.state.log.replication.factor")
