"""What the transaction handlers share: handing a request to the transaction coordinator.

Every transaction API is decided by the pure core behind ``BrokerContext.txn``
(``broker.server.txn_coordinator``); a handler only forwards the decoded request. The core
answers NOT_COORDINATOR (16) for transactional ids whose ``__transaction_state`` partition this
broker does not lead, and COORDINATOR_LOAD_IN_PROGRESS (14) while it loads one. Without a
coordinator (a context built for unit tests) every request is answered
COORDINATOR_NOT_AVAILABLE (15), which clients retry.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from broker.server.context import BrokerContext
from broker.wire import ErrorCode

__all__ = ["forward", "ask_coordinator", "ADD_PARTITIONS_TO_TXN_RETRY_BACKOFF_MS",
           "ADD_PARTITIONS_TO_TXN_RETRY_BACKOFF_MAX_MS"]

# Kafka's add.partitions.to.txn.retry.backoff.ms / .max.ms (defaults): a partition leader asks
# the coordinator again while it answers CONCURRENT_TRANSACTIONS (the previous transaction's
# markers being written, milliseconds) instead of failing the produce at once.
ADD_PARTITIONS_TO_TXN_RETRY_BACKOFF_MS = 20
ADD_PARTITIONS_TO_TXN_RETRY_BACKOFF_MAX_MS = 100


async def forward(ctx: BrokerContext, header, request, error_response: Callable):
    if ctx.txn is None:
        return error_response(header, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return await ctx.txn.handle(header.api_key, header.api_version, request)


async def ask_coordinator(ctx: BrokerContext, transactional_id: str, producer_id: int, producer_epoch: int,
                          topic: str, partition: int, add: bool, start_guard: Callable[[], object]):
    """(error, guard): a partition leader's question to the transaction coordinator before a
    producer's first transactional batch of a transaction lands on (topic, partition): KIP-890
    part 1's verification (``ctx.txn_verifier``; with transaction.partition.verification.enable
    =false it accepts everything), or with ``add`` (transaction version 2: Produce v12,
    TxnOffsetCommit v5) the implicit add through ``ctx.txn``, which no config turns off: without
    it the coordinator would never write the partition's marker. ``start_guard()`` takes the
    partition's verification guard before each ask (a marker in between drops it).
    CONCURRENT_TRANSACTIONS -- the previous transaction's markers still being written, whose
    marker drops the guard -- is asked again with a fresh guard for up to
    ADD_PARTITIONS_TO_TXN_RETRY_BACKOFF_MAX_MS, as Kafka's ReplicaManager does. A coordinator
    that cannot be asked raises (the caller answers a retriable error)."""
    asker = ctx.txn if add else ctx.txn_verifier
    if asker is None:
        return ErrorCode.INVALID_TXN_STATE, None
    loop = asyncio.get_running_loop()
    give_up = loop.time() + ADD_PARTITIONS_TO_TXN_RETRY_BACKOFF_MAX_MS / 1000
    while True:
        guard = start_guard()
        if add:
            error = await asker.verify(transactional_id, producer_id, producer_epoch, topic, partition, add=True)
        else:
            error = await asker.verify(transactional_id, producer_id, producer_epoch, topic, partition)
        if error != ErrorCode.CONCURRENT_TRANSACTIONS or loop.time() >= give_up:
            return error, guard
        await asyncio.sleep(ADD_PARTITIONS_TO_TXN_RETRY_BACKOFF_MS / 1000)
