"""InitProducerId (key 22), v0-4: a producer id and epoch for an idempotent producer (KIP-98).

- Null transactional id: a new id from this broker's block (``ProducerIdManager``), epoch 0,
  whether or not the request carries the producer's current id and epoch (v3+, KIP-360). Kafka's
  coordinator does the same ("blindly accept the request and return a new producerId") and
  librdkafka's epoch bump after a refused in-flight batch works with either answer: it takes
  the id and epoch it is given and restarts its sequences at 0, which a new id accepts.
- Only one of producer id / epoch given: INVALID_REQUEST (42), as in Kafka.
- Non-null transactional id: the transaction coordinator's (``BrokerContext.txn``): NOT_COORDINATOR
  (16) when this broker does not lead the id's ``__transaction_state`` partition (the client asks
  FindCoordinator again), else the core decides (epoch bump, fencing, aborting the previous
  incarnation's open transaction first, CONCURRENT_TRANSACTIONS meanwhile). Without a
  coordinator (unit-test contexts): COORDINATOR_NOT_AVAILABLE (15, retriable).

Compared against Apache Kafka in tests/peer/test_peer_idempotence.py.
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


async def handle(ctx: BrokerContext, header, request) -> InitProducerIdResponse:
    if request.transactional_id is not None:
        if ctx.txn is None:
            return error_response(header, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not ctx.txn.coordinates(request.transactional_id):
            return error_response(header, request, ErrorCode.NOT_COORDINATOR)
        return await ctx.txn.handle(header.api_key, header.api_version, request)
    producer_id, epoch = request.producer_id, request.producer_epoch
    if (producer_id < 0) != (epoch < 0):
        return error_response(header, request, ErrorCode.INVALID_REQUEST)
    try:
        new_id = await ctx.producer_ids.next_id()
    except (ClusterError, KazooException) as exc:
        logger.warning("no producer id: %s", exc)
        return error_response(header, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return InitProducerIdResponse(error_code=ErrorCode.NONE, producer_id=new_id, producer_epoch=0)


def error_response(header, request, error_code: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=error_code, producer_id=-1, producer_epoch=-1)
