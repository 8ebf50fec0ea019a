"""TxnOffsetCommit (key 28), v0-5 served: a transactional producer commits a consumer group's
offsets inside its transaction (KIP-98; v3+ carry the member's generation, KIP-447). v5 is
transaction version 2 (KIP-890 part 2): the client sent no AddOffsetsToTxn, so the group's
offsets partition is added to the transaction here (the same implicit add as Produce v12).

As Kafka's ``KafkaApis.handleTxnOffsetCommitRequest``: a partition the cluster does not have is
answered UNKNOWN_TOPIC_OR_PARTITION (3) here. Then, as Kafka's coordinator runtime does for a
transactional write, the group's ``__consumer_offsets`` partition is verified with the
transaction coordinator (KIP-890 part 1) when the producer has no transaction open there yet:
a commit before AddOffsetsToTxn is refused INVALID_TXN_STATE, a fenced producer
INVALID_PRODUCER_EPOCH / PRODUCER_FENCED, any other verification answer becomes
COORDINATOR_NOT_AVAILABLE (retried by clients, Kafka's normalization of NOT_ENOUGH_REPLICAS).
The group coordinator core then checks the group (generation, member) and appends the offsets
as one transactional batch of the producer; they stay pending until the transaction's marker.
"""

from __future__ import annotations

from broker.cluster.internal_topics import GROUP_METADATA_TOPIC_NAME
from broker.coordinator.group.core import partition_for
from broker.replica.transactions import produce_error_for_verification
from broker.server.append_order import connection_order
from broker.server.context import BrokerContext
from broker.server.handlers.common import local_leader
from broker.server.handlers.txn_common import ask_coordinator
from broker.server.handlers.group_common import (
    merge_partition_errors,
    per_partition_response,
    split_unknown_partitions,
)
from broker.server.network import client_host
from broker.wire import ApiKey, ErrorCode, TxnOffsetCommitResponse

__all__ = ["API_KEY", "handle", "error_response"]

API_KEY = ApiKey.TXN_OFFSET_COMMIT
_Topic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_Partition = TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition
_CLIENT_ERRORS = frozenset({ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_PRODUCER_EPOCH,
                            ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                            ErrorCode.TRANSACTION_ABORTABLE})


async def handle(ctx: BrokerContext, header, request) -> TxnOffsetCommitResponse:
    if ctx.groups is None or not hasattr(ctx.groups, "handle_txn_offset_commit"):
        return error_response(header, request, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    answered, forwarded = split_unknown_partitions(ctx, request)
    if forwarded is not None:
        # Pipelined commits on one connection reach the group coordinator in request order,
        # although verification may answer a later one first (as Produce: ``append_order``).
        order = connection_order("txn_offset_commit")
        ticket = order.take()  # before the first await: tickets follow request order
        try:
            error, guard = await _verify(ctx, request, header.api_version)
            await order.wait_turn(ticket)
            if error != ErrorCode.NONE:
                response = error_response(header, forwarded, error)
            else:
                response = await ctx.groups.handle_txn_offset_commit(
                    header.api_version, forwarded, header.client_id, "/" + client_host(), guard)
        finally:
            order.release(ticket)
        merge_partition_errors(answered, response)
    return _response(request, answered)


async def _verify(ctx: BrokerContext, request, api_version: int) -> tuple[int, object | None]:
    """(error, guard): the KIP-890 verification of the group's offsets partition, when this
    broker leads it and the producer has no transaction open there at its epoch (a later commit
    of the same transaction needs none); v5 (transaction version 2): its implicit add instead.
    Not led here: the core answers NOT_COORDINATOR."""
    index = partition_for(request.group_id, ctx.groups.core.settings.num_partitions)
    partition, _ = local_leader(ctx, GROUP_METADATA_TOPIC_NAME, index)
    if partition is None:
        return ErrorCode.NONE, None
    entry = partition.producer_state.get(request.producer_id)
    if (entry is not None and entry.producer_epoch == request.producer_epoch
            and entry.current_txn_first_offset >= 0):
        return ErrorCode.NONE, None
    try:
        error, guard = await ask_coordinator(
            ctx, request.transactional_id, request.producer_id, request.producer_epoch,
            GROUP_METADATA_TOPIC_NAME, index, add=api_version >= 5,
            start_guard=lambda: partition.start_txn_verification(request.producer_id))
    except Exception:  # the coordinator could not be asked: retriable (as produce's verification)
        error, guard = ErrorCode.NOT_ENOUGH_REPLICAS, None
    error = produce_error_for_verification(error, abortable=api_version >= 4)
    if error == ErrorCode.NONE:
        return error, guard
    return (error if error in _CLIENT_ERRORS else ErrorCode.COORDINATOR_NOT_AVAILABLE), None


def _response(request, errors: dict[tuple[str, int], int]) -> TxnOffsetCommitResponse:
    return per_partition_response(TxnOffsetCommitResponse, _Topic, _Partition, request, errors)


def error_response(header, request, error_code: int) -> TxnOffsetCommitResponse:
    return _response(request, {(t.name, p.partition_index): error_code
                               for t in request.topics for p in t.partitions})
