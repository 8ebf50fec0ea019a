"""Metadata (key 3), v0-12: live brokers, the controller, the cluster id, topics and partitions.

- Brokers: every live broker's endpoint for this listener; the controller id from
  ``/controller`` (kafka-python's admin client loops while it is -1, reference pitfall 8.12).
- A topic list of null (v1+) or empty (v0) means all topics; v12 may name a topic by id only.
- Partition: leader, leader epoch (v7+), replicas, ISR, offline replicas (v5+: replicas that are
  not live). No state yet, or a leader that is not live: LEADER_NOT_AVAILABLE (5), leader -1.
- Topic ids come from the topic znode (Kafka 2.8+ writes them, and so does pylog's controller);
  topics without one get the zero id, which is fine while Fetch is capped at v12 (reference
  pitfall 8.5).
- Authorized operations (v8+) when asked: everything, as Kafka answers without an authorizer.
- A missing topic is created only when the request allows it (v4+ flag; implied before v4) and
  ``auto.create.topics.enable`` is true; the answer is then LEADER_NOT_AVAILABLE until it exists,
  as in Kafka. An illegal name is INVALID_TOPIC_EXCEPTION (17). An internal topic
  (``__consumer_offsets``, ``__transaction_state``) is created as FindCoordinator creates it,
  with its own partition count, replication factor and configs (Kafka's
  ``AutoTopicCreationManager.creatableTopic``), and is marked ``is_internal``.
"""

from __future__ import annotations

import logging

from broker.cluster.errors import InvalidTopicError
from broker.cluster.internal_topics import is_internal
from broker.cluster.names import validate_topic_name
from broker.server.context import BrokerContext
from broker.server.internal_topics import ensure_internal_topic
from broker.server.metadata import ClusterSnapshot, TopicMetadata, ZERO_TOPIC_ID
from broker.server.replica_assignment import assign_replicas
from broker.wire import ApiKey, ErrorCode, MetadataResponse
from broker.wire.apis.metadata import AUTHORIZED_OPERATIONS_UNKNOWN

__all__ = ["API_KEY", "handle", "error_response"]

logger = logging.getLogger(__name__)

API_KEY = ApiKey.METADATA
_Broker = MetadataResponse.MetadataResponseBroker
_Topic = MetadataResponse.MetadataResponseTopic
_Partition = MetadataResponse.MetadataResponsePartition


def _operations(*codes: int) -> int:
    return sum(1 << code for code in codes)


# Authorized operations when asked (v8+, KIP-430): a bit per AclOperation code (READ 3, WRITE 4,
# CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
# IDEMPOTENT_WRITE 12). pylog has no authorizer, so, as Kafka without one, every operation the
# resource type supports is allowed: for every named topic of the answer, known or not (3576),
# and for the cluster (8096).
TOPIC_OPERATIONS = _operations(3, 4, 5, 6, 7, 8, 10, 11)
CLUSTER_OPERATIONS = _operations(5, 7, 8, 9, 10, 11, 12)


async def handle(ctx: BrokerContext, header, request) -> MetadataResponse:
    snapshot = ctx.metadata.snapshot
    wanted = request.topics
    if wanted is None or (header.api_version == 0 and not wanted):
        topics = [_topic(snapshot, topic) for _, topic in sorted(snapshot.topics.items())]
    else:
        allow_create = ctx.config.auto_create_topics_enable and (
            header.api_version < 4 or request.allow_auto_topic_creation)
        topics = [await _requested(ctx, snapshot, entry, allow_create) for entry in _unique(wanted)]
    if request.include_topic_authorized_operations:
        for topic in topics:
            if topic.name is not None:  # Kafka leaves an unknown topic id's answer "not computed"
                topic.topic_authorized_operations = TOPIC_OPERATIONS
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=_brokers(snapshot, ctx.client_listener_name),
        cluster_id=snapshot.cluster_id,
        controller_id=snapshot.controller_id,
        topics=topics,
        cluster_authorized_operations=(CLUSTER_OPERATIONS if request.include_cluster_authorized_operations
                                       else AUTHORIZED_OPERATIONS_UNKNOWN),
    )


def error_response(header, request, error_code: int) -> MetadataResponse:
    return MetadataResponse(topics=[
        _Topic(error_code=error_code, name=t.name, topic_id=t.topic_id) for t in request.topics or []
    ])


def _unique(entries: list) -> list:
    seen, out = set(), []
    for entry in entries:
        key = entry.name if entry.name is not None else entry.topic_id
        if key not in seen:
            seen.add(key)
            out.append(entry)
    return out


def _brokers(snapshot: ClusterSnapshot, listener_name: str) -> list:
    out = []
    for broker_id, registration in sorted(snapshot.brokers.items()):
        endpoint = snapshot.endpoint(broker_id, listener_name)
        if endpoint is not None:
            out.append(_Broker(node_id=broker_id, host=endpoint.host, port=endpoint.port,
                               rack=registration.rack))
    return out


async def _requested(ctx: BrokerContext, snapshot: ClusterSnapshot, entry, allow_create: bool):
    if entry.name is None:  # v12: by topic id only
        topic = snapshot.topic_by_id(entry.topic_id)
        if topic is None:
            return _Topic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=entry.topic_id)
        return _topic(snapshot, topic)
    topic = snapshot.topics.get(entry.name)
    if topic is not None:
        return _topic(snapshot, topic)
    try:
        validate_topic_name(entry.name)
    except InvalidTopicError:
        return _Topic(error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=entry.name)
    if not allow_create:
        return _Topic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=entry.name)
    if is_internal(entry.name):
        error = await ensure_internal_topic(ctx, entry.name)
        error = ErrorCode.LEADER_NOT_AVAILABLE if error == ErrorCode.NONE else error
    else:
        error = await _auto_create(ctx, snapshot, entry.name)
    return _Topic(error_code=error, name=entry.name, is_internal=is_internal(entry.name))


async def _auto_create(ctx: BrokerContext, snapshot: ClusterSnapshot, name: str) -> int:
    """Kafka's ``AutoTopicCreationManager`` with the broker defaults. LEADER_NOT_AVAILABLE
    tells the client to ask again shortly; a replication factor above the live brokers is
    INVALID_REPLICATION_FACTOR, as for CreateTopics."""
    live = sorted(snapshot.brokers)
    factor = ctx.config.default_replication_factor
    if not live or factor > len(live):
        return ErrorCode.INVALID_REPLICATION_FACTOR
    assignment = assign_replicas(live, ctx.config.num_partitions, factor, ctx.controller.rng)
    error, message = await ctx.controller.create_topic(name, assignment, {})
    if error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
        logger.warning("auto-creating topic %s failed: %s", name, message)
        return error
    logger.info("auto-created topic %s with %d partitions", name, len(assignment))
    return ErrorCode.LEADER_NOT_AVAILABLE


def _topic(snapshot: ClusterSnapshot, topic: TopicMetadata):
    return _Topic(
        error_code=ErrorCode.NONE,
        name=topic.name,
        topic_id=topic.topic_id if topic.topic_id is not None else ZERO_TOPIC_ID,
        is_internal=is_internal(topic.name),
        partitions=[_partition(snapshot, index, view) for index, view in sorted(topic.partitions.items())],
    )


def _partition(snapshot: ClusterSnapshot, index: int, view):
    offline = [r for r in view.replicas if r not in snapshot.brokers]
    state = view.state
    if state is None or state.leader not in snapshot.brokers:
        return _Partition(
            error_code=ErrorCode.LEADER_NOT_AVAILABLE, partition_index=index, leader_id=-1,
            leader_epoch=state.leader_epoch if state is not None else -1,
            replica_nodes=list(view.replicas), isr_nodes=list(state.isr) if state else [],
            offline_replicas=offline,
        )
    return _Partition(
        error_code=ErrorCode.NONE, partition_index=index, leader_id=state.leader,
        leader_epoch=state.leader_epoch, replica_nodes=list(view.replicas),
        isr_nodes=list(state.isr), offline_replicas=offline,
    )
