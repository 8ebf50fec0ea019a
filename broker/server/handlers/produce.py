"""Produce (key 0), v3-12 served (v0-2 are answered UNSUPPORTED_VERSION by the dispatcher).

Per partition: UNKNOWN_TOPIC_OR_PARTITION (3) or NOT_LEADER_OR_FOLLOWER (6) when this broker
does not lead it; records that are not exactly one magic-2 batch get INVALID_RECORD (87) or
CORRUPT_MESSAGE (2) by Kafka's rules (``produce_shape``); otherwise
``Partition.append_as_leader`` validates through the header view and the log (the errors'
``kafka_error_code``: CORRUPT_MESSAGE 2, MESSAGE_TOO_LARGE 10, RECORD_LIST_TOO_LARGE 18,
INVALID_RECORD 87, UNSUPPORTED_COMPRESSION_TYPE 76, KAFKA_STORAGE_ERROR 56) and checks producer
sequences before it appends. v8+ responses carry the error message and, for a batch refused by
a record or sequence rule, a ``record_errors`` entry (KIP-467; ``batch_index`` is the failing
batch, 0 for a client's single batch: the whole batch was dropped). As in Kafka, CORRUPT_MESSAGE,
MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, KAFKA_STORAGE_ERROR and the shape errors carry
neither record errors nor the log start offset.

Internal topics (``__consumer_offsets``, ``__transaction_state``) belong to the coordinators:
a client's batch for an existing partition of one gets INVALID_TOPIC_EXCEPTION (17) without a
message, after the shape checks and before leadership, exactly where Kafka's
``ReplicaManager.appendToLocalLog`` refuses it ("Cannot append to internal topic"); a partition
that does not exist stays UNKNOWN_TOPIC_OR_PARTITION (3), as Kafka checks its metadata first.

Request-level rules: transactional batches without a transactional id fail every partition with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53), Kafka's answer. ``acks`` must be 0, 1 or -1, else
every partition gets INVALID_REQUIRED_ACKS (21). A ``transactional_id`` alone changes nothing
(Kafka appends non-transactional batches whatever it says). KIP-890 part 1: a transactional batch
that would open its producer's transaction on a partition is first verified with the transaction
coordinator (``ctx.txn_verifier``, ``broker.replica.transactions.TxnVerifier``; all partitions of
the request at once): INVALID_TXN_STATE (48) when the partition is not in the producer's ongoing
transaction, the fencing errors as they are, a coordinator that is loading, moving or busy as
NOT_ENOUGH_REPLICAS (19, retriable, as Kafka). Without a verifier every such batch gets 48:
librdkafka treats it as permanent for those messages (a transactional producer aborts) instead
of retrying forever. KIP-890 part 2 (transaction version 2, v12): the client sent no
AddPartitionsToTxn; the leader has the coordinator add the partition (``ask_coordinator`` with
``add``), which also starts the transaction; CONCURRENT_TRANSACTIONS (the previous one still
writing markers) is asked again for up to 100 ms before it becomes NOT_ENOUGH_REPLICAS.
acks=0 gets no response at all (a failure closes the connection instead). acks=-1 is refused
with NOT_ENOUGH_REPLICAS (19) when the ISR is smaller than ``min.insync.replicas`` (nothing is
appended), else waits in the purgatory until the high watermark passes the batch (at once while
the ISR is only this broker): NOT_ENOUGH_REPLICAS_AFTER_APPEND (20) if the ISR shrank below the
minimum meanwhile, NOT_LEADER_OR_FOLLOWER (6) if this broker stopped leading in between (even if
it leads again: the batch may have been truncated), REQUEST_TIMED_OUT (7) after ``timeout_ms``.
All three are retriable; an idempotent producer's retry is deduplicated wherever it lands.

Append order: the Produce requests of one connection run concurrently, but append in request
order (``append_order``: verification may answer a later request first; sequences must see the
producer's send order). Only the appends are ordered; verifications and acks=-1 waits overlap.
"""

from __future__ import annotations

import asyncio

from broker.cluster.internal_topics import is_internal
from broker.records import read_header
from broker.replica.partition import AppendResult
from broker.replica.transactions import produce_error_for_verification
from broker.server.append_order import produce_order
from broker.server.context import BrokerContext
from broker.server.handlers.common import local_leader
from broker.server.handlers.txn_common import add_to_transaction, ask_coordinator
from broker.server.handlers.produce_shape import is_transactional, records_shape_error
from broker.server.network import CloseConnection
from broker.wire import ApiKey, ErrorCode, ProduceResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.PRODUCE
_Topic = ProduceResponse.TopicProduceResponse
_Partition = ProduceResponse.PartitionProduceResponse
_RecordError = ProduceResponse.BatchIndexAndErrorMessage


async def handle(ctx: BrokerContext, header, request) -> ProduceResponse | None:
    if request.transactional_id is None and any(
            is_transactional(data.records) for topic in request.topic_data for data in topic.partition_data):
        return error_response(header, request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)  # as Kafka
    if request.acks not in (0, 1, -1):
        return error_response(header, request, ErrorCode.INVALID_REQUIRED_ACKS)
    order = produce_order()
    ticket = order.take()  # before the first await: tickets follow request order
    try:
        refused, verified = await _verify_transactions(ctx, request, header.api_version)
        await order.wait_turn(ticket)  # every earlier Produce on this connection has appended
        results: dict[tuple[str, int], AppendResult] = dict(refused)
        for topic in request.topic_data:
            for data in topic.partition_data:
                key = (topic.name, data.index)
                if key not in results:
                    results[key] = _append(ctx, topic.name, data, request.acks, verified.get(key))
    finally:
        order.release(ticket)
    if request.acks == 0:
        return _no_response(results)
    if request.acks == -1:
        await _wait_for_replication(ctx, results, request.timeout_ms)
    return _response(request, results)


def _no_response(results: dict) -> None:
    """acks=0: no answer. A failure closes the connection (Kafka does), the only signal such a
    client gets; it then refreshes its metadata and reconnects."""
    failed = {key: r.error_code for key, r in results.items() if r.error_code != ErrorCode.NONE}
    if failed:
        raise CloseConnection(f"acks=0 produce failed: {failed}")
    return None


async def _verify_transactions(ctx: BrokerContext, request, api_version: int) -> tuple[dict, dict]:
    """KIP-890 part 1: ask the coordinator about every partition where a transactional batch
    would open the producer's transaction (v12: have it added, part 2).
    Returns (refused partitions with their result, verified partitions with the verification
    guard the append must present)."""
    asks = {}
    for topic in request.topic_data:
        for data in topic.partition_data:
            if records_shape_error(data.records) is not None or not is_transactional(data.records):
                continue
            partition, _ = local_leader(ctx, topic.name, data.index)
            header = read_header(data.records)
            if partition is not None and partition.needs_txn_verification(header):
                asks[(topic.name, data.index)] = (header, partition)
    if not asks:
        return {}, {}
    add = api_version >= 12
    answers = dict(zip(asks, await asyncio.gather(*(
        ask_coordinator(ctx, request.transactional_id, h.producer_id, h.producer_epoch, *key, add=False,
                        start_guard=lambda p=p, pid=h.producer_id: p.start_txn_verification(pid))
        for key, (h, p) in asks.items() if not add), return_exceptions=True)))
    if add:  # one add per producer for all its partitions here (a request has one producer)
        answers = await _add_per_producer(ctx, request.transactional_id, asks)
    refused, verified = {}, {}
    for key, answer in answers.items():
        # the coordinator could not be asked: retriable
        error, guard = (ErrorCode.NOT_ENOUGH_REPLICAS, None) if isinstance(answer, BaseException) else answer
        answered, error = error, produce_error_for_verification(error, abortable=api_version >= 11)
        if error == ErrorCode.NONE:
            verified[key] = guard
        else:
            refused[key] = AppendResult(error, error_message=(
                f"transactional produce to {key[0]}-{key[1]} not {'added' if add else 'verified'} by the "
                f"transaction coordinator: {ErrorCode(answered).name}"))
    return refused, verified


async def _add_per_producer(ctx: BrokerContext, transactional_id: str, asks: dict) -> dict:
    """Transaction version 2: ``add_to_transaction`` per (producer id, epoch) of ``asks``."""
    producers: dict[tuple[int, int], dict] = {}
    for key, (header, partition) in asks.items():
        producers.setdefault((header.producer_id, header.producer_epoch), {})[key] = \
            lambda p=partition, pid=header.producer_id: p.start_txn_verification(pid)
    answers: dict = {}
    for (pid, epoch), guards in producers.items():
        try:
            answers.update(await add_to_transaction(ctx, transactional_id, pid, epoch, guards))
        except Exception as exc:  # the coordinator could not be asked
            answers.update({key: exc for key in guards})
    return answers


def _append(ctx: BrokerContext, topic: str, data, acks: int, txn_guard: object | None = None) -> AppendResult:
    partition, error = local_leader(ctx, topic, data.index)
    internal = is_internal(topic) and error != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if partition is None and not internal:
        return AppendResult(error)
    refused = records_shape_error(data.records)
    if refused is not None:
        return AppendResult(refused[0], error_message=refused[1])
    if internal:  # only the coordinators write here, not through Produce
        return AppendResult(ErrorCode.INVALID_TOPIC_EXCEPTION)
    return partition.append_as_leader(data.records, acks, ctx.replicas.settings.limits, txn_guard=txn_guard)


async def _wait_for_replication(ctx: BrokerContext, results: dict, timeout_ms: int) -> None:
    """Kafka's DelayedProduce: wait until every appended batch is below its partition's high
    watermark (``Partition.check_enough_replicas_reach_offset``). A partition that lost
    leadership meanwhile answers NOT_LEADER_OR_FOLLOWER; one whose ISR fell below
    ``min.insync.replicas`` after the append, NOT_ENOUGH_REPLICAS_AFTER_APPEND (20)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, timeout_ms) / 1000
    done_keys: set = set()  # acknowledged: a later leadership change does not undo that
    while True:
        pending = {}
        for key, result in results.items():
            if result.error_code != ErrorCode.NONE or result.last_offset < 0 or key in done_keys:
                continue
            partition = ctx.replicas.get(*key)
            if partition is None:
                results[key] = AppendResult(ErrorCode.NOT_LEADER_OR_FOLLOWER)
                continue
            done, error = partition.check_enough_replicas_reach_offset(result.last_offset + 1,
                                                                        result.leader_term)
            if not done:
                pending[key] = partition
            elif error != ErrorCode.NONE:
                results[key] = AppendResult(error, error_message=ErrorCode(error).message)
            else:
                done_keys.add(key)
        if not pending:
            return
        waiter = ctx.replicas.purgatory.watch(pending)
        if waiter is None or not await _wait(waiter, deadline - loop.time()):
            for key, partition in pending.items():
                done, error = partition.check_enough_replicas_reach_offset(
                    results[key].last_offset + 1, results[key].leader_term)
                if not done:
                    results[key] = AppendResult(ErrorCode.REQUEST_TIMED_OUT,
                                                error_message="timed out waiting for replication")
                elif error != ErrorCode.NONE:
                    results[key] = AppendResult(error, error_message=ErrorCode(error).message)
            return


async def _wait(waiter, timeout_s: float) -> bool:
    with waiter:
        return await waiter.wait(timeout_s)


def _response(request, results: dict) -> ProduceResponse:
    topics = []
    for topic in request.topic_data:
        partitions = [_partition(data.index, results[(topic.name, data.index)])
                      for data in topic.partition_data]
        topics.append(_Topic(name=topic.name, partition_responses=partitions))
    return ProduceResponse(responses=topics, throttle_time_ms=0)


def _partition(index: int, result: AppendResult):
    record_errors = [_RecordError(batch_index=index, batch_index_error_message=message)
                     for index, message in result.record_errors]
    if not record_errors and result.batch_index >= 0 and result.error_code != ErrorCode.NONE:
        record_errors = [_RecordError(batch_index=result.batch_index,
                                      batch_index_error_message=result.error_message)]
    return _Partition(
        index=index, error_code=result.error_code, base_offset=result.base_offset,
        log_append_time_ms=result.log_append_time_ms, log_start_offset=result.log_start_offset,
        record_errors=record_errors, error_message=result.error_message,
    )


def _every_partition(request, result: AppendResult) -> ProduceResponse:
    results = {(t.name, d.index): result for t in request.topic_data for d in t.partition_data}
    return _response(request, results)


def error_response(header, request, error_code: int) -> ProduceResponse:
    return _every_partition(request, AppendResult(error_code))
