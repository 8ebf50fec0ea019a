"""InitProducerId (key 22), v0-4: a producer id and epoch for an idempotent producer (KIP-98).

- Null transactional id, fresh producer (v0-2, or v3+ with producer id/epoch -1/-1): a new id
  from this broker's block (``ProducerIdManager``), epoch 0.
- Null transactional id with the producer's current id and epoch (v3+, KIP-360): the same id
  with the epoch bumped, so the producer can reset its sequences after an error without losing
  its identity (librdkafka does this when a later in-flight batch was refused). At the last
  epoch (32767) a new id with epoch 0, as Kafka does when epochs run out.
- Only one of producer id / epoch given: INVALID_REQUEST (42), as in Kafka.
- Non-null transactional id: COORDINATOR_NOT_AVAILABLE (15, retriable) until the transaction
  coordinator exists.
"""

from __future__ import annotations

import logging

from kazoo.exceptions import KazooException

from broker.cluster.errors import ClusterError
from broker.server.context import BrokerContext
from broker.wire import ApiKey, ErrorCode, InitProducerIdResponse

__all__ = ["API_KEY", "handle", "error_response"]

logger = logging.getLogger(__name__)

API_KEY = ApiKey.INIT_PRODUCER_ID
EPOCH_MAX = 32767


async def handle(ctx: BrokerContext, header, request) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        return error_response(header, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    producer_id, epoch = request.producer_id, request.producer_epoch
    if (producer_id < 0) != (epoch < 0):
        return error_response(header, request, ErrorCode.INVALID_REQUEST)
    if producer_id >= 0 and epoch < EPOCH_MAX:
        return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=producer_id,
                                      producer_epoch=epoch + 1)
    try:
        new_id = await ctx.producer_ids.next_id()
    except (ClusterError, KazooException) as exc:
        logger.warning("no producer id: %s", exc)
        return error_response(header, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=new_id, producer_epoch=0)


def error_response(header, request, error_code: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=error_code, producer_id=-1, producer_epoch=-1)
