"""Authorization of every request, Kafka's per-API rules (``KafkaApis``), in front of the handlers.

The dispatcher calls ``authorize_and_handle`` instead of the handler when an authorizer is
configured. Each API has a rule saying which resource and operation it needs and how a denial is
answered, so the handlers stay unaware of ACLs:

- cluster-wide APIs (inter-broker requests need CLUSTER_ACTION; ACL admin ALTER/DESCRIBE;
  reassignments DESCRIBE): denied -> the handler's ``error_response`` with
  CLUSTER_AUTHORIZATION_FAILED in every slot;
- one group / transactional id (JoinGroup, Heartbeat, EndTxn, ...): GROUP_AUTHORIZATION_FAILED /
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED the same way;
- per-topic APIs (Produce, Fetch, ListOffsets, OffsetCommit, ...): the request is split; the
  handler sees only the permitted topics, the others are answered TOPIC_AUTHORIZATION_FAILED per
  partition and merged into its answer. A denied part never reaches a handler, so it changes
  nothing;
- lists (Metadata for all topics, ListGroups, ListTransactions): what the principal may not
  DESCRIBE is left out, so its existence is not disclosed.

Requests from a follower (Fetch, OffsetForLeaderEpoch with a replica id) need CLUSTER_ACTION, as
in Kafka; a broker's principal therefore belongs in ``super.users`` or has CLUSTER_ACTION.
An API without a rule here needs ALTER on the cluster (fail closed: a new API must say its rule).
"""

from __future__ import annotations

from typing import Awaitable, Callable

from broker.auth.acl import CLUSTER_NAME, AclOperation as Op, ResourceType as Rt
from broker.server.context import BrokerContext
from broker.server.network import CloseConnection, client_host, principal
from broker.wire import ApiKey, ErrorCode

__all__ = ["authorize_and_handle", "RULES"]

_TOPIC_DENIED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
_GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
_CLUSTER_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
_TXN_DENIED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


class Check:
    """``check(op, type, name)`` for the calling connection's principal and host."""

    __slots__ = ("_authorize", "_principal", "_host", "authorizer")

    def __init__(self, authorizer) -> None:
        self.authorizer = authorizer
        self._authorize = authorizer.authorize
        self._principal = principal()
        self._host = client_host()

    def __call__(self, operation: Op, resource_type: Rt, name: str) -> bool:
        return self._authorize(self._principal, self._host, operation, resource_type, name)

    def cluster(self, operation: Op) -> bool:
        return self._authorize(self._principal, self._host, operation, Rt.CLUSTER, CLUSTER_NAME)

    def any_of_type(self, operation: Op, resource_type: Rt) -> bool:
        return self.authorizer.authorize_by_resource_type(self._principal, self._host, operation, resource_type)


Rule = Callable[[BrokerContext, object, object, object, Check], Awaitable[object]]


async def authorize_and_handle(ctx: BrokerContext, module, header, request):
    rule = RULES.get(int(header.api_key), _cluster(Op.ALTER))
    return await rule(ctx, module, header, request, Check(ctx.authorizer))


# ---------------------------------------------------------------------------- building blocks


def _copy(message, **changes):
    fields = {name: getattr(message, name) for name, _, _ in message._init_plan}
    fields.update(changes)
    return type(message)(**fields)


def _open(ctx, module, header, request, check):
    return module.handle(ctx, header, request)


def _cluster(operation: Op) -> Rule:
    async def rule(ctx, module, header, request, check):
        if not check.cluster(operation):
            return module.error_response(header, request, _CLUSTER_DENIED)
        return await module.handle(ctx, header, request)
    return rule


def _one(resource_type: Rt, operation: Op, name_of: Callable, error: int) -> Rule:
    async def rule(ctx, module, header, request, check):
        name = name_of(request)
        if name is not None and not check(operation, resource_type, name):
            return module.error_response(header, request, error)
        return await module.handle(ctx, header, request)
    return rule


async def _split(ctx, module, header, request, allowed: Callable[[object], bool], *, field: str,
                 answers: str, error: int, clear_top_error: bool = False):
    """Run the handler on the permitted entries of ``request.<field>`` only; answer the rest with
    ``error`` in the handler's own error shape (``module.error_response``) and merge the two
    answers' ``<answers>`` lists. The one mechanism behind every per-topic, per-group and
    per-transactional-id refusal: nothing denied reaches a handler."""
    entries = getattr(request, field) or []
    flags = [allowed(e) for e in entries]
    if all(flags):
        return await module.handle(ctx, header, request)
    permitted = [e for e, ok in zip(entries, flags) if ok]
    denied = [e for e, ok in zip(entries, flags) if not ok]
    refused = module.error_response(header, _copy(request, **{field: denied}), error)
    if clear_top_error and hasattr(refused, "error_code"):
        refused.error_code = ErrorCode.NONE
    if not permitted:
        return refused
    response = await module.handle(ctx, header, _copy(request, **{field: permitted}))
    if response is not None:
        getattr(response, answers).extend(getattr(refused, answers))
    return response


def _split_topics(ctx, module, header, request, allowed: Callable[[str], bool], *, topics: str,
                  name: str, answers: str, clear_top_error: bool = False):
    """``_split`` over topic entries named by their ``name`` field: TOPIC_AUTHORIZATION_FAILED."""
    return _split(ctx, module, header, request, lambda t: allowed(getattr(t, name)), field=topics,
                  answers=answers, error=_TOPIC_DENIED, clear_top_error=clear_top_error)


def _topics(operation: Op, *, topics: str = "topics", name: str = "name", answers: str = "topics",
            clear_top_error: bool = False, cluster_override: Op | None = None) -> Rule:
    async def rule(ctx, module, header, request, check):
        if cluster_override is not None and check.cluster(cluster_override):
            return await module.handle(ctx, header, request)
        return await _split_topics(ctx, module, header, request, lambda t: check(operation, Rt.TOPIC, t),
                                   topics=topics, name=name, answers=answers, clear_top_error=clear_top_error)
    return rule


# ---------------------------------------------------------------------------------- the rules


async def _produce(ctx, module, header, request, check):
    if request.transactional_id is not None and not check(Op.WRITE, Rt.TRANSACTIONAL_ID, request.transactional_id):
        if request.acks == 0:
            raise CloseConnection("acks=0 Produce: transactional id not authorized")
        return module.error_response(header, request, _TXN_DENIED)
    allowed = lambda t: check(Op.WRITE, Rt.TOPIC, t)  # noqa: E731
    if request.acks == 0 and not all(allowed(t.name) for t in request.topic_data):
        raise CloseConnection("acks=0 Produce to a topic not authorized")  # Kafka closes: no answer to carry it
    return await _split_topics(ctx, module, header, request, allowed, topics="topic_data", name="name",
                               answers="responses")


async def _fetch(ctx, module, header, request, check):
    if request.replica_id >= 0:  # a follower
        if not check.cluster(Op.CLUSTER_ACTION):
            return module.error_response(header, request, _TOPIC_DENIED)
        return await module.handle(ctx, header, request)
    return await _split_topics(ctx, module, header, request, lambda t: check(Op.READ, Rt.TOPIC, t),
                               topics="topics", name="topic", answers="responses", clear_top_error=True)


async def _metadata(ctx, module, header, request, check):
    """Kafka's ``handleTopicMetadataRequest``: named topics the principal may not DESCRIBE are
    answered TOPIC_AUTHORIZATION_FAILED (without looking whether they exist); a missing topic it
    would auto-create needs CREATE (cluster or topic), else TOPIC_AUTHORIZATION_FAILED; an
    all-topics answer leaves out what it may not DESCRIBE."""
    wanted = request.topics
    if wanted is None or (header.api_version == 0 and not wanted):  # all topics
        response = await module.handle(ctx, header, request)
        response.topics = [t for t in response.topics if check(Op.DESCRIBE, Rt.TOPIC, t.name)]
    else:
        known = ctx.metadata.snapshot.topics
        auto_create = ctx.config.auto_create_topics_enable and (
            header.api_version < 4 or request.allow_auto_topic_creation)
        may_create_any = auto_create and check.cluster(Op.CREATE)
        permitted, denied = [], []
        for entry in wanted:
            if entry.name is None:  # by id (v12): checked once the handler names it
                permitted.append(entry)
            elif not check(Op.DESCRIBE, Rt.TOPIC, entry.name):
                denied.append(entry)
            elif (auto_create and not may_create_any and entry.name not in known
                  and not check(Op.CREATE, Rt.TOPIC, entry.name)):
                denied.append(entry)
            else:
                permitted.append(entry)
        response = await module.handle(ctx, header, _copy(request, topics=permitted))
        if not permitted:
            response.topics = []  # (v0 reads an empty list as "all topics")
        topic_class = type(response).MetadataResponseTopic
        response.topics = [
            t if t.name is None or check(Op.DESCRIBE, Rt.TOPIC, t.name)
            else topic_class(error_code=_TOPIC_DENIED, name=None, topic_id=t.topic_id)
            for t in response.topics]
        response.topics.extend(topic_class(error_code=_TOPIC_DENIED, name=e.name) for e in denied)
    if request.include_topic_authorized_operations:
        for topic in response.topics:
            if topic.name is not None and topic.error_code != _TOPIC_DENIED:
                topic.topic_authorized_operations = _operations(check, Rt.TOPIC, topic.name, _TOPIC_OPS)
    if request.include_cluster_authorized_operations:
        response.cluster_authorized_operations = _operations(check, Rt.CLUSTER, CLUSTER_NAME, _CLUSTER_OPS)
    return response


_TOPIC_OPS = (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS,
              Op.ALTER_CONFIGS)
_CLUSTER_OPS = (Op.CREATE, Op.ALTER, Op.DESCRIBE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS,
                Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE)
_GROUP_OPS = (Op.READ, Op.DESCRIBE, Op.DELETE)


def _operations(check, resource_type, name, operations) -> int:
    """KIP-430's bit set: bit ``code`` for each operation allowed on the resource."""
    return sum(1 << int(op) for op in operations if check(op, resource_type, name))


async def _find_coordinator(ctx, module, header, request, check):
    resource_type, error = ((Rt.TRANSACTIONAL_ID, _TXN_DENIED) if request.key_type == 1
                            else (Rt.GROUP, _GROUP_DENIED))
    if header.api_version < 4:
        if not check(Op.DESCRIBE, resource_type, request.key):
            return module.error_response(header, request, error)
        return await module.handle(ctx, header, request)
    return await _split(ctx, module, header, request, lambda k: check(Op.DESCRIBE, resource_type, k),
                        field="coordinator_keys", answers="coordinators", error=error)


async def _init_producer_id(ctx, module, header, request, check):
    if request.transactional_id is not None:
        if not check(Op.WRITE, Rt.TRANSACTIONAL_ID, request.transactional_id):
            return module.error_response(header, request, _TXN_DENIED)
    elif not check.cluster(Op.IDEMPOTENT_WRITE) and not check.any_of_type(Op.WRITE, Rt.TOPIC):
        return module.error_response(header, request, _CLUSTER_DENIED)  # KIP-679
    return await module.handle(ctx, header, request)


async def _offset_commit(ctx, module, header, request, check):
    if not check(Op.READ, Rt.GROUP, request.group_id):
        return module.error_response(header, request, _GROUP_DENIED)
    return await _split_topics(ctx, module, header, request, lambda t: check(Op.READ, Rt.TOPIC, t),
                               topics="topics", name="name", answers="topics")


async def _txn_offset_commit(ctx, module, header, request, check):
    if not check(Op.WRITE, Rt.TRANSACTIONAL_ID, request.transactional_id):
        return module.error_response(header, request, _TXN_DENIED)
    return await _offset_commit(ctx, module, header, request, check)


async def _offset_fetch(ctx, module, header, request, check):
    """One group (v0-7) or several (v8+): GROUP_AUTHORIZATION_FAILED for a group it may not
    DESCRIBE; offsets of topics it may not DESCRIBE are left out (all topics) or answered
    TOPIC_AUTHORIZATION_FAILED (named topics)."""
    if header.api_version < 8:
        if not check(Op.DESCRIBE, Rt.GROUP, request.group_id):
            return module.error_response(header, request, _GROUP_DENIED)
        response = await _split_topics(ctx, module, header, request, lambda t: check(Op.DESCRIBE, Rt.TOPIC, t),
                                       topics="topics", name="name", answers="topics", clear_top_error=True)
        if request.topics is None:
            response.topics = [t for t in response.topics if check(Op.DESCRIBE, Rt.TOPIC, t.name)]
        return response
    denied = [g for g in request.groups if not check(Op.DESCRIBE, Rt.GROUP, g.group_id)]
    permitted = [g for g in request.groups if g not in denied]
    refused = module.error_response(header, _copy(request, groups=denied), _GROUP_DENIED)
    if not permitted:
        return refused
    response = await module.handle(ctx, header, _copy(request, groups=permitted))
    asked = {g.group_id: g.topics for g in permitted}
    for group in response.groups:
        if asked.get(group.group_id) is None:  # all topics: leave out what it may not describe
            group.topics = [t for t in group.topics if check(Op.DESCRIBE, Rt.TOPIC, t.name)]
            continue
        for topic in group.topics:  # named topics: TOPIC_AUTHORIZATION_FAILED, no offsets
            if not check(Op.DESCRIBE, Rt.TOPIC, topic.name):
                for partition in topic.partitions:
                    partition.error_code, partition.committed_offset = _TOPIC_DENIED, -1
                    partition.committed_leader_epoch, partition.metadata = -1, None
    response.groups.extend(refused.groups)
    return response


def _group_read(name_of=lambda r: r.group_id) -> Rule:
    return _one(Rt.GROUP, Op.READ, name_of, _GROUP_DENIED)


async def _describe_groups(ctx, module, header, request, check):
    denied = [g for g in request.groups if not check(Op.DESCRIBE, Rt.GROUP, g)]
    permitted = [g for g in request.groups if g not in denied]
    refused = module.error_response(header, _copy(request, groups=denied), _GROUP_DENIED)
    if not permitted:
        return refused
    response = await module.handle(ctx, header, _copy(request, groups=permitted))
    if request.include_authorized_operations:
        for group in response.groups:
            group.authorized_operations = _operations(check, Rt.GROUP, group.group_id, _GROUP_OPS)
    response.groups.extend(refused.groups)
    return response


async def _list_groups(ctx, module, header, request, check):
    response = await module.handle(ctx, header, request)
    if not check.cluster(Op.DESCRIBE):
        response.groups = [g for g in response.groups if check(Op.DESCRIBE, Rt.GROUP, g.group_id)]
    return response


async def _delete_groups(ctx, module, header, request, check):
    return await _split(ctx, module, header, request, lambda g: check(Op.DELETE, Rt.GROUP, g),
                        field="groups_names", answers="results", error=_GROUP_DENIED)


async def _offset_delete(ctx, module, header, request, check):
    if not check(Op.DELETE, Rt.GROUP, request.group_id):
        return module.error_response(header, request, _GROUP_DENIED)
    return await _split_topics(ctx, module, header, request, lambda t: check(Op.READ, Rt.TOPIC, t),
                               topics="topics", name="name", answers="topics", clear_top_error=True)


async def _create_topics(ctx, module, header, request, check):
    if check.cluster(Op.CREATE):
        return await module.handle(ctx, header, request)
    return await _split_topics(ctx, module, header, request, lambda t: check(Op.CREATE, Rt.TOPIC, t),
                               topics="topics", name="name", answers="topics")


async def _delete_topics(ctx, module, header, request, check):
    if header.api_version >= 6:  # by name or id: names only are checked here; ids are refused
        entries = request.topics or []
        if any(t.name is None for t in entries):
            return module.error_response(header, request, _TOPIC_DENIED)
        return await _split_topics(ctx, module, header, request, lambda t: check(Op.DELETE, Rt.TOPIC, t),
                                   topics="topics", name="name", answers="responses")
    return await _split(ctx, module, header, request, lambda n: check(Op.DELETE, Rt.TOPIC, n),
                        field="topic_names", answers="responses", error=_TOPIC_DENIED)


_CONFIG_RESOURCE_TOPIC, _CONFIG_RESOURCE_BROKER = 2, 4


def _configs(operation: Op) -> Rule:
    """DescribeConfigs / AlterConfigs / IncrementalAlterConfigs: a topic needs ``operation`` on
    it (TOPIC_AUTHORIZATION_FAILED), a broker (or broker logger) on the cluster
    (CLUSTER_AUTHORIZATION_FAILED), per resource."""
    async def rule(ctx, module, header, request, check):
        def allowed(resource) -> bool:
            if resource.resource_type == _CONFIG_RESOURCE_TOPIC:
                return check(operation, Rt.TOPIC, resource.resource_name)
            return check.cluster(operation)
        resources = request.resources
        denied = [r for r in resources if not allowed(r)]
        if not denied:
            return await module.handle(ctx, header, request)
        permitted = [r for r in resources if allowed(r)]
        refused = module.error_response(header, _copy(request, resources=denied), _CLUSTER_DENIED)
        answers = "results" if hasattr(refused, "results") else "responses"
        for answer in getattr(refused, answers):
            if answer.resource_type == _CONFIG_RESOURCE_TOPIC:
                answer.error_code = _TOPIC_DENIED
            answer.error_message = None
        if not permitted:
            return refused
        response = await module.handle(ctx, header, _copy(request, resources=permitted))
        getattr(response, answers).extend(getattr(refused, answers))
        return response
    return rule


async def _add_partitions_to_txn(ctx, module, header, request, check):
    if header.api_version >= 4:  # from a partition leader verifying a transaction (KIP-890)
        return await _cluster(Op.CLUSTER_ACTION)(ctx, module, header, request, check)
    if not check(Op.WRITE, Rt.TRANSACTIONAL_ID, request.v3_and_below_transactional_id):
        return module.error_response(header, request, _TXN_DENIED)
    denied = [t for t in request.v3_and_below_topics if not check(Op.WRITE, Rt.TOPIC, t.name)]
    if not denied:
        return await module.handle(ctx, header, request)
    # Kafka: the refused topics TOPIC_AUTHORIZATION_FAILED, the rest OPERATION_NOT_ATTEMPTED
    response = module.error_response(header, request, ErrorCode.OPERATION_NOT_ATTEMPTED)
    refused = {t.name for t in denied}
    for topic in response.results_by_topic_v3_and_below:
        if topic.name in refused:
            for partition in topic.results_by_partition:
                partition.partition_error_code = _TOPIC_DENIED
    return response


async def _add_offsets_to_txn(ctx, module, header, request, check):
    if not check(Op.WRITE, Rt.TRANSACTIONAL_ID, request.transactional_id):
        return module.error_response(header, request, _TXN_DENIED)
    if not check(Op.READ, Rt.GROUP, request.group_id):
        return module.error_response(header, request, _GROUP_DENIED)
    return await module.handle(ctx, header, request)


async def _describe_transactions(ctx, module, header, request, check):
    return await _split(ctx, module, header, request, lambda t: check(Op.DESCRIBE, Rt.TRANSACTIONAL_ID, t),
                        field="transactional_ids", answers="transaction_states", error=_TXN_DENIED)


async def _describe_cluster(ctx, module, header, request, check):
    """Kafka checks nothing here; the cluster's authorized operations, when asked, are this
    principal's (KIP-430), not every operation."""
    response = await module.handle(ctx, header, request)
    if request.include_cluster_authorized_operations:
        response.cluster_authorized_operations = _operations(check, Rt.CLUSTER, CLUSTER_NAME, _CLUSTER_OPS)
    return response


def _describe_topic_partitions_ops(response, check) -> None:
    for topic in response.topics:
        if topic.name is not None and topic.error_code == ErrorCode.NONE:
            topic.topic_authorized_operations = _operations(check, Rt.TOPIC, topic.name, _TOPIC_OPS)


async def _list_transactions(ctx, module, header, request, check):
    response = await module.handle(ctx, header, request)
    response.transaction_states = [t for t in response.transaction_states
                                   if check(Op.DESCRIBE, Rt.TRANSACTIONAL_ID, t.transactional_id)]
    return response


async def _offset_for_leader_epoch(ctx, module, header, request, check):
    if check.cluster(Op.CLUSTER_ACTION):
        return await module.handle(ctx, header, request)
    return await _split_topics(ctx, module, header, request, lambda t: check(Op.DESCRIBE, Rt.TOPIC, t),
                               topics="topics", name="topic", answers="topics")


async def _describe_topic_partitions(ctx, module, header, request, check):
    response = await _split_topics(ctx, module, header, request, lambda t: check(Op.DESCRIBE, Rt.TOPIC, t),
                                   topics="topics", name="name", answers="topics")
    if not request.topics:  # all topics: leave out what it may not describe
        response.topics = [t for t in response.topics if check(Op.DESCRIBE, Rt.TOPIC, t.name)]
    _describe_topic_partitions_ops(response, check)
    return response


RULES: dict[int, Rule] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _topics(Op.DESCRIBE),
    ApiKey.METADATA: _metadata,
    ApiKey.LEADER_AND_ISR: _cluster(Op.CLUSTER_ACTION),
    ApiKey.STOP_REPLICA: _cluster(Op.CLUSTER_ACTION),
    ApiKey.UPDATE_METADATA: _cluster(Op.CLUSTER_ACTION),
    ApiKey.CONTROLLED_SHUTDOWN: _cluster(Op.CLUSTER_ACTION),
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
    ApiKey.JOIN_GROUP: _group_read(),
    ApiKey.HEARTBEAT: _group_read(),
    ApiKey.LEAVE_GROUP: _group_read(),
    ApiKey.SYNC_GROUP: _group_read(),
    ApiKey.DESCRIBE_GROUPS: _describe_groups,
    ApiKey.LIST_GROUPS: _list_groups,
    ApiKey.API_VERSIONS: _open,
    ApiKey.CREATE_TOPICS: _create_topics,
    ApiKey.DELETE_TOPICS: _delete_topics,
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _offset_for_leader_epoch,
    ApiKey.ADD_PARTITIONS_TO_TXN: _add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: _add_offsets_to_txn,
    ApiKey.END_TXN: _one(Rt.TRANSACTIONAL_ID, Op.WRITE, lambda r: r.transactional_id, _TXN_DENIED),
    ApiKey.WRITE_TXN_MARKERS: _cluster(Op.CLUSTER_ACTION),
    ApiKey.TXN_OFFSET_COMMIT: _txn_offset_commit,
    ApiKey.DESCRIBE_CONFIGS: _configs(Op.DESCRIBE_CONFIGS),
    33: _configs(Op.ALTER_CONFIGS),  # AlterConfigs
    44: _configs(Op.ALTER_CONFIGS),  # IncrementalAlterConfigs
    29: _cluster(Op.DESCRIBE),  # DescribeAcls
    30: _cluster(Op.ALTER),  # CreateAcls
    31: _cluster(Op.ALTER),  # DeleteAcls
    ApiKey.DELETE_GROUPS: _delete_groups,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _cluster(Op.DESCRIBE),
    ApiKey.OFFSET_DELETE: _offset_delete,
    ApiKey.DESCRIBE_CLUSTER: _describe_cluster,
    ApiKey.DESCRIBE_PRODUCERS: _topics(Op.READ),
    ApiKey.DESCRIBE_TRANSACTIONS: _describe_transactions,
    ApiKey.LIST_TRANSACTIONS: _list_transactions,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions,
    17: _open,  # SaslHandshake: before authentication, as Kafka
    36: _open,  # SaslAuthenticate
    21: _topics(Op.DELETE),  # DeleteRecords
    37: _topics(Op.ALTER, answers="results"),  # CreatePartitions
    35: _cluster(Op.DESCRIBE),  # DescribeLogDirs
    43: _cluster(Op.ALTER),  # ElectLeaders
    45: _cluster(Op.ALTER),  # AlterPartitionReassignments
    50: _cluster(Op.DESCRIBE),  # DescribeUserScramCredentials
    51: _cluster(Op.ALTER),  # AlterUserScramCredentials
    48: _cluster(Op.DESCRIBE_CONFIGS),  # DescribeClientQuotas
    49: _cluster(Op.ALTER_CONFIGS),  # AlterClientQuotas
}
