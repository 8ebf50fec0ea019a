"""Creating an internal topic on first use (Kafka's ``AutoTopicCreationManager`` for
``__consumer_offsets`` and ``__transaction_state``).

FindCoordinator (and Metadata auto-creation, as in Kafka) calls ``ensure_internal_topic``:
when the topic is not in this broker's metadata it plans the replicas (``plan_internal_topic``,
pure) and writes the topic through ``ControllerApi.create_topic``, the ZooKeeper path every topic
takes, so the controller elects its leaders like any other topic's. The caller answers
COORDINATOR_NOT_AVAILABLE meanwhile and the client asks again; nothing waits for the leaders.

No task is started and no state is kept: two brokers (or two requests) that race to create the
topic both try, ZooKeeper's multi lets exactly one win, and the other gets
TOPIC_ALREADY_EXISTS, which is success here. The rule for too few live brokers is in
``broker.cluster.internal_topics``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from random import Random
from typing import Mapping, Sequence

from broker.cluster.internal_topics import (
    InternalTopicSpec,
    internal_topic_spec,
    replication_factor_setting,
)
from broker.server.context import BrokerContext
from broker.server.replica_assignment import assign_replicas
from broker.wire import ErrorCode

__all__ = ["InternalTopicPlan", "plan_internal_topic", "ensure_internal_topic"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class InternalTopicPlan:
    """Either an ``assignment`` to write, or ``refusal``: why nothing is written now."""

    spec: InternalTopicSpec
    assignment: Mapping[int, Sequence[int]] | None
    refusal: str | None = None


def plan_internal_topic(spec: InternalTopicSpec, live_brokers: Sequence[int],
                        rng: Random) -> InternalTopicPlan:
    """Replica assignment for ``spec`` over the live brokers (round-robin, leaders spread), or a
    refusal when fewer brokers are live than its replication factor: Kafka's rule, never
    RF = min(configured, live) (why: ``broker.cluster.internal_topics``)."""
    live = sorted(live_brokers)
    if len(live) < spec.replication_factor:
        return InternalTopicPlan(spec, None, (
            f"Number of alive brokers '{len(live)}' does not meet the required replication factor "
            f"'{spec.replication_factor}' for the internal topic {spec.name} (configured via "
            f"'{replication_factor_setting(spec.name)}'). This error can be ignored if the cluster "
            f"is starting up and not all brokers are up yet."))
    return InternalTopicPlan(spec, assign_replicas(live, spec.partitions, spec.replication_factor, rng))


async def ensure_internal_topic(ctx: BrokerContext, name: str) -> int:
    """Create internal topic ``name`` unless this broker's metadata has it. Returns NONE when the
    topic exists or was just written, else the error (INVALID_REPLICATION_FACTOR while too few
    brokers are live, or what the ZooKeeper write returned); failures are logged, never raised."""
    snapshot = ctx.metadata.snapshot
    if name in snapshot.topics:
        return ErrorCode.NONE
    plan = plan_internal_topic(internal_topic_spec(name, ctx.config.internal_topics),
                               list(snapshot.brokers), ctx.controller.rng)
    if plan.assignment is None:
        logger.warning("not creating %s: %s", name, plan.refusal)
        return ErrorCode.INVALID_REPLICATION_FACTOR
    error, message = await ctx.controller.create_topic(name, plan.assignment, dict(plan.spec.configs))
    if error == ErrorCode.TOPIC_ALREADY_EXISTS:
        return ErrorCode.NONE
    if error != ErrorCode.NONE:
        logger.warning("creating internal topic %s failed: %s", name, message)
        return error
    logger.info("created internal topic %s: %d partitions, replication factor %d",
                name, plan.spec.partitions, plan.spec.replication_factor)
    return ErrorCode.NONE
