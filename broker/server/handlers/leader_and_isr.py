"""LeaderAndIsr (key 4), v0-4: the controller makes this broker lead or follow partitions.

Fencing (Kafka ``ReplicaManager.becomeLeaderOrFollower``): a request whose broker epoch (v2+)
is older than this broker's registration is STALE_BROKER_EPOCH (77: it was meant for a previous
incarnation); one from an older controller epoch than already seen is STALE_CONTROLLER_EPOCH
(11). Per partition, a state that is not newer than the one held (leader epoch, then znode
version) is answered STALE_CONTROLLER_EPOCH, as Kafka does, and changes nothing; a partition
that does not list this broker is UNKNOWN_TOPIC_OR_PARTITION; a state that breaks the znode's
rules (negative epoch, duplicate ISR members) is INVALID_REQUEST. Applying a state opens the
partition's log if needed (a topic this broker's metadata does not know yet with its overrides
read from ZooKeeper first) and starts or stops its follower fetcher.
"""

from __future__ import annotations

import logging

from broker.cluster.layout import PartitionState
from broker.server.context import BrokerContext
from broker.wire import ApiKey, ErrorCode, LeaderAndIsrResponse

__all__ = ["API_KEY", "handle", "error_response", "partition_states"]

API_KEY = ApiKey.LEADER_AND_ISR
logger = logging.getLogger(__name__)
_Error = LeaderAndIsrResponse.LeaderAndIsrPartitionError


def partition_states(request, api_version: int) -> list[tuple[str, object]]:
    """(topic, partition state message) for every partition, whatever the version's layout."""
    if api_version < 2:
        return [(p.topic_name, p) for p in request.ungrouped_partition_states]
    return [(t.topic_name, p) for t in request.topic_states for p in t.partition_states]


async def handle(ctx: BrokerContext, header, request) -> LeaderAndIsrResponse:
    entries = partition_states(request, header.api_version)
    if 0 <= ctx.broker_epoch and 0 <= request.broker_epoch < ctx.broker_epoch:
        return _every(entries, ErrorCode.STALE_BROKER_EPOCH)
    errors: dict[tuple[str, int], int] = {}
    states = []
    for topic, p in entries:
        try:
            state = PartitionState(p.leader, p.leader_epoch, tuple(p.isr), p.controller_epoch)
        except ValueError:
            errors[(topic, p.partition_index)] = ErrorCode.INVALID_REQUEST
            continue
        states.append(((topic, p.partition_index), tuple(p.replicas), state, p.zk_version))
    snapshot = ctx.metadata.snapshot
    configs = {name: topic.config for name, topic in snapshot.topics.items()}
    unknown = {topic for topic, _ in entries if topic not in snapshot.topics}
    if unknown:  # the controller knew of these topics before our ZooKeeper watch did
        configs.update(await _read_configs(ctx, unknown))
    error, applied = ctx.replicas.become_leader_or_follower(request.controller_epoch, states, configs)
    if error != ErrorCode.NONE:
        return _every(entries, error)
    errors.update(applied)
    if unknown:
        ctx.request_metadata_refresh(topics=unknown)
    return LeaderAndIsrResponse(error_code=ErrorCode.NONE, partition_errors=[
        _Error(topic_name=topic, partition_index=p.partition_index,
               error_code=errors.get((topic, p.partition_index), ErrorCode.NONE))
        for topic, p in entries])


async def _read_configs(ctx: BrokerContext, topics: set[str]) -> dict[str, dict[str, str]]:
    """A new topic's overrides from ``/config/topics/<t>`` before its log opens (Kafka reads
    them from ZooKeeper when it creates the log), so it never starts with the broker's defaults.
    A topic whose config cannot be read now opens with the defaults and picks its overrides up
    from the metadata refresh, as before."""
    store = ctx.config_store
    found = {}
    for topic in sorted(topics):
        if store is None:
            break
        try:
            found[topic] = dict(await store.read("topics", topic))
        except Exception as exc:  # noqa: BLE001 - ZooKeeper trouble: the refresh brings the config
            logger.warning("reading the config of new topic %s failed: %s", topic, exc)
    return found


def _every(entries, error_code: int) -> LeaderAndIsrResponse:
    return LeaderAndIsrResponse(error_code=error_code, partition_errors=[
        _Error(topic_name=topic, partition_index=p.partition_index, error_code=error_code)
        for topic, p in entries])


def error_response(header, request, error_code: int) -> LeaderAndIsrResponse:
    return _every(partition_states(request, header.api_version), error_code)
