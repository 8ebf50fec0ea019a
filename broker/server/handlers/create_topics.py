"""CreateTopics (key 19), v0-7, answered by the controller only (NOT_CONTROLLER 41 elsewhere).

Per topic, in Kafka's order (``ZkAdminManager.createTopics``): a name given twice in one request
is INVALID_REQUEST (42), answered once; an illegal name INVALID_TOPIC_EXCEPTION (17); an existing topic
TOPIC_ALREADY_EXISTS (36); partitions / replication factor of -1 mean ``num.partitions`` /
``default.replication.factor`` (KIP-464, kafka-python relies on it), other values below 1 are
INVALID_PARTITIONS (37) / INVALID_REPLICATION_FACTOR (38); a replication factor above the live
brokers is 38; a manual assignment must name live brokers, each once per partition (39), and
excludes counts (42); configs must be ones pylog honours, with valid values, also together over
the broker's log settings (INVALID_CONFIG 40 with a message naming the key and what is valid).
``validate_only`` stops there. Otherwise replicas are assigned round-robin over the live
brokers (leaders spread, ``replica_assignment``), the topic and its partition states are written
to ZooKeeper, and the answer waits until this broker's metadata has every partition (at most
``timeout_ms``; REQUEST_TIMED_OUT after that, the creation carries on). v5+ answers carry the
partition count, replication factor and configs; v7 the topic id (zero: see Metadata).
"""

from __future__ import annotations

from collections import Counter

from broker.cluster.errors import InvalidTopicError
from broker.cluster.names import validate_topic_name
from broker.server.config_entries import describe_topic_configs, validate_topic_configs
from broker.server.context import BrokerContext
from broker.server.metadata import ClusterSnapshot
from broker.server.replica_assignment import assign_replicas
from broker.wire import ApiKey, CreateTopicsResponse, ErrorCode

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.CREATE_TOPICS
_Result = CreateTopicsResponse.CreatableTopicResult
_Config = CreateTopicsResponse.CreatableTopicConfigs


class _Refused(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


async def handle(ctx: BrokerContext, header, request) -> CreateTopicsResponse:
    if not ctx.controller.active:
        return error_response(header, request, ErrorCode.NOT_CONTROLLER)
    snapshot = ctx.metadata.snapshot
    counts = Counter(topic.name for topic in request.topics)
    results, created = [], []
    for topic in request.topics:
        if counts[topic.name] > 1 and any(r.name == topic.name for r in results):
            continue  # one answer per duplicated name, as Kafka gives
        try:
            if counts[topic.name] > 1:
                raise _Refused(ErrorCode.INVALID_REQUEST, f"Create topic request contains "
                                                          f"duplicate topic {topic.name}")
            assignment = _plan(ctx, snapshot, topic)
            configs = {c.name: c.value for c in topic.configs}
            if not request.validate_only:
                error, message = await ctx.controller.create_topic(topic.name, assignment, configs)
                if error != ErrorCode.NONE:
                    raise _Refused(error, message or ErrorCode(error).message)
                created.append(topic.name)
            results.append(_success(ctx, topic.name, assignment, configs))
        except _Refused as refused:
            results.append(_Result(name=topic.name, error_code=refused.error_code,
                                   error_message=refused.message))
    if created and request.timeout_ms > 0:
        await _wait_until_created(ctx, created, results, request.timeout_ms)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _plan(ctx: BrokerContext, snapshot: ClusterSnapshot, topic) -> dict[int, list[int]]:
    """Validate one topic and return its replica assignment; raise ``_Refused``."""
    try:
        validate_topic_name(topic.name)
    except InvalidTopicError as exc:
        raise _Refused(ErrorCode.INVALID_TOPIC_EXCEPTION, str(exc)) from None
    if topic.name in snapshot.topics:
        raise _Refused(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
    live = sorted(snapshot.brokers)
    if topic.assignments:
        assignment = _manual_assignment(topic, live)
    else:
        assignment = _automatic_assignment(ctx, topic, live)
    problem = validate_topic_configs({c.name: c.value for c in topic.configs}, ctx.config.log)
    if problem is not None:
        raise _Refused(ErrorCode.INVALID_CONFIG, problem)
    return assignment


def _automatic_assignment(ctx: BrokerContext, topic, live: list[int]) -> dict[int, list[int]]:
    partitions = ctx.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
    factor = (ctx.config.default_replication_factor if topic.replication_factor == -1
              else topic.replication_factor)
    if partitions < 1:
        raise _Refused(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if factor < 1:
        raise _Refused(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if factor > len(live):
        raise _Refused(ErrorCode.INVALID_REPLICATION_FACTOR,
                       f"Replication factor: {factor} larger than available brokers: {len(live)}.")
    return assign_replicas(live, partitions, factor, ctx.controller.rng)


def _manual_assignment(topic, live: list[int]) -> dict[int, list[int]]:
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        raise _Refused(ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor and "
                                                  "replicasAssignments were set. Both cannot be used at the same time.")
    assignment = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
    if sorted(assignment) != list(range(len(assignment))) or len(assignment) != len(topic.assignments):
        raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                       "Partitions should be a consecutive 0-based integer sequence")
    sizes = {len(replicas) for replicas in assignment.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise _Refused(ErrorCode.INVALID_REPLICATION_FACTOR,
                       "All partitions should have the same, non-zero number of replicas")
    for index, replicas in assignment.items():
        if len(set(replicas)) != len(replicas) or any(r not in live for r in replicas):
            raise _Refused(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                           f"partition {index}: replicas {replicas} must be distinct live brokers {live}")
    return assignment


def _success(ctx: BrokerContext, name: str, assignment: dict, configs: dict):
    entries = describe_topic_configs(configs, ctx.config)
    return _Result(
        name=name, error_code=ErrorCode.NONE, error_message=None,
        num_partitions=len(assignment), replication_factor=len(assignment[0]),
        configs=[_Config(name=e.name, value=e.value, read_only=False, config_source=e.source,
                         is_sensitive=False) for e in entries],
    )


async def _wait_until_created(ctx: BrokerContext, names: list[str], results: list,
                              timeout_ms: int) -> None:
    def all_ready(snapshot: ClusterSnapshot) -> bool:
        return all(_ready(ctx, snapshot, name) for name in names)

    if await ctx.metadata.wait_for(all_ready, timeout_ms / 1000):
        return
    snapshot = ctx.metadata.snapshot
    for result in results:
        if result.name in names and not _ready(ctx, snapshot, result.name):
            result.error_code = ErrorCode.REQUEST_TIMED_OUT
            result.error_message = "the topic is being created; it was not ready within timeout_ms"


def _ready(ctx: BrokerContext, snapshot: ClusterSnapshot, name: str) -> bool:
    """Every partition has its state, and this broker opened the ones it holds."""
    topic = snapshot.topics.get(name)
    if topic is None or not topic.complete:
        return False
    return all(ctx.replicas.get(name, index) is not None
               for index, view in topic.partitions.items() if ctx.broker_id in view.replicas)


def error_response(header, request, error_code: int) -> CreateTopicsResponse:
    return CreateTopicsResponse(topics=[
        _Result(name=t.name, error_code=error_code, error_message=ErrorCode(error_code).message)
        for t in request.topics
    ])
