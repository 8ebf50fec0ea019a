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

__all__ = ["forward", "ask_coordinator", "add_to_transaction", "ADD_PARTITIONS_TO_TXN_RETRY_BACKOFF_MS",
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
    =false it accepts everything), or with ``add`` the implicit add of transaction version 2
    (``add_to_transaction``). ``start_guard()`` takes the partition's verification guard
    before each verification (a marker in between drops it). CONCURRENT_TRANSACTIONS -- the
    previous transaction's markers still being written -- is asked again with a fresh guard for
    up to ADD_PARTITIONS_TO_TXN_RETRY_BACKOFF_MAX_MS, as Kafka's ReplicaManager does. A
    coordinator that cannot be asked raises (the caller answers a retriable error)."""
    if add:
        return (await add_to_transaction(ctx, transactional_id, producer_id, producer_epoch,
                                         {(topic, partition): start_guard}))[(topic, partition)]
    if ctx.txn_verifier is None:
        return ErrorCode.INVALID_TXN_STATE, None
    loop = asyncio.get_running_loop()
    give_up = loop.time() + ADD_PARTITIONS_TO_TXN_RETRY_BACKOFF_MAX_MS / 1000
    while True:
        guard = start_guard()
        error = await ctx.txn_verifier.verify(transactional_id, producer_id, producer_epoch, topic, partition)
        if error != ErrorCode.CONCURRENT_TRANSACTIONS or loop.time() >= give_up:
            return error, guard
        await asyncio.sleep(ADD_PARTITIONS_TO_TXN_RETRY_BACKOFF_MS / 1000)


async def add_to_transaction(ctx: BrokerContext, transactional_id: str, producer_id: int, producer_epoch: int,
                             guards: dict) -> dict:
    """{(topic, partition): (error, guard)}: transaction version 2's implicit add (Produce v12,
    TxnOffsetCommit v5) of every partition in ``guards`` ({tp: start_guard}) at once -- one
    coordinator write for all the partitions of a request, not one each -- through ``ctx.txn``,
    which no config turns off (without it the coordinator would never write their markers).
    The coordinator waits for the previous transaction to complete (``handle_settled``);
    CONCURRENT_TRANSACTIONS that still comes back is asked again as in ``ask_coordinator``.
    A partition's guard is taken once its add succeeded: the coordinator adds only after every
    marker of the previous transaction is written, and a marker of a later end carries a higher
    epoch, which the append refuses anyway; taken before, the previous transaction's marker
    landing meanwhile would drop it."""
    if ctx.txn is None:
        return {tp: (ErrorCode.INVALID_TXN_STATE, None) for tp in guards}
    loop = asyncio.get_running_loop()
    give_up = loop.time() + ADD_PARTITIONS_TO_TXN_RETRY_BACKOFF_MAX_MS / 1000
    answers, asking = {}, list(guards)
    while asking:
        codes = await ctx.txn.add_partitions(transactional_id, producer_id, producer_epoch, asking)
        retry = [tp for tp in asking if codes[tp] == ErrorCode.CONCURRENT_TRANSACTIONS]
        if loop.time() >= give_up:
            retry = []
        for tp in asking:
            if tp not in retry:
                answers[tp] = (codes[tp], guards[tp]() if codes[tp] == ErrorCode.NONE else None)
        asking = retry
        if asking:
            await asyncio.sleep(ADD_PARTITIONS_TO_TXN_RETRY_BACKOFF_MS / 1000)
    return answers
