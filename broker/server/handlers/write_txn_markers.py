"""WriteTxnMarkers (key 27), v1 served (Kafka 4.1 advertises v1 only; v0 parses and is refused
UNSUPPORTED_VERSION by the dispatcher): the transaction coordinator has partition leaders append
a transaction's COMMIT or ABORT marker (Kafka ``KafkaApis.handleWriteTxnMarkersRequest``).

Per marker and partition: UNKNOWN_TOPIC_OR_PARTITION (3) / NOT_LEADER_OR_FOLLOWER (6) when this
broker does not lead it; else ``Partition.append_txn_marker`` appends one control batch
(transactional|control, the marker's producer id and epoch, one record with the marker type and
the coordinator epoch) with Kafka's checks: NOT_ENOUGH_REPLICAS (19) below
``min.insync.replicas``, INVALID_PRODUCER_EPOCH (47) for an epoch older than the producer's
stored one, TRANSACTION_COORDINATOR_FENCED (52) for a coordinator epoch older than the one of the
producer's last marker. Internal topics take markers too (``__consumer_offsets`` holds
transactional offset commits). As Kafka appends markers with requiredAcks=-1, the answer waits
until the high watermark passes every marker written (``produce._wait_for_replication``: a lost
leadership is NOT_LEADER_OR_FOLLOWER, a shrunk ISR NOT_ENOUGH_REPLICAS_AFTER_APPEND (20), after
``MARKER_REPLICATION_TIMEOUT_MS`` REQUEST_TIMED_OUT (7)); the coordinator retries any error.

The marker sender of this broker's transaction coordinator calls ``handle`` in-process for
partitions led here (``broker.server.txn_markers``); ``header`` is not used.

Markers written to ``__consumer_offsets`` end transactional offset commits (TxnOffsetCommit,
KIP-98/447): once replicated, the group coordinator is told through
``ctx.groups.on_transaction_completed(topic, partition, producer_id, producer_epoch, committed)``
when it has that method (Kafka's ``GroupCoordinator.onTransactionCompleted``), so its pending
offsets become visible or are dropped.
"""

from __future__ import annotations

import asyncio

from broker.cluster.internal_topics import GROUP_METADATA_TOPIC_NAME
from broker.replica.partition import AppendResult
from broker.server.context import BrokerContext
from broker.server.handlers.common import local_leader
from broker.server.handlers.produce import _wait_for_replication
from broker.wire import ApiKey, ErrorCode, WriteTxnMarkersResponse

__all__ = ["API_KEY", "handle", "error_response", "MARKER_REPLICATION_TIMEOUT_MS"]

API_KEY = ApiKey.WRITE_TXN_MARKERS
MARKER_REPLICATION_TIMEOUT_MS = 30_000  # Kafka waits request.timeout.ms (30 s) for the markers' acks
_Marker = WriteTxnMarkersResponse.WritableTxnMarkerResult
_Topic = WriteTxnMarkersResponse.WritableTxnMarkerTopicResult
_Partition = WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult


async def handle(ctx: BrokerContext, header, request) -> WriteTxnMarkersResponse:
    results: list[dict[tuple[str, int], AppendResult]] = []
    for marker in request.markers:
        written: dict[tuple[str, int], AppendResult] = {}
        for topic in marker.topics:
            for index in topic.partition_indexes:
                written[(topic.name, index)] = _append_marker(ctx, marker, topic.name, index)
        results.append(written)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + MARKER_REPLICATION_TIMEOUT_MS / 1000
    for written in results:  # one replication wait covers them all: the markers are appended
        await _wait_for_replication(ctx, written, max(0, int((deadline - loop.time()) * 1000)))
    _complete_group_transactions(ctx, request, results)
    return _response(request, results)


def _complete_group_transactions(ctx: BrokerContext, request, results: list[dict]) -> None:
    complete = getattr(ctx.groups, "on_transaction_completed", None)
    if complete is None:
        return
    for marker, written in zip(request.markers, results):
        for (topic, index), result in written.items():
            if topic == GROUP_METADATA_TOPIC_NAME and result.error_code == ErrorCode.NONE:
                complete(topic, index, marker.producer_id, marker.producer_epoch,
                         bool(marker.transaction_result))


def _append_marker(ctx: BrokerContext, marker, topic: str, index: int) -> AppendResult:
    partition, error = local_leader(ctx, topic, index)
    if partition is None:
        return AppendResult(error)
    return partition.append_txn_marker(marker.producer_id, marker.producer_epoch,
                                       marker.coordinator_epoch, bool(marker.transaction_result))


def _response(request, results: list[dict]) -> WriteTxnMarkersResponse:
    markers = []
    for i, marker in enumerate(request.markers):
        topics = [_Topic(name=topic.name, partitions=[
            _Partition(partition_index=index, error_code=results[i][(topic.name, index)].error_code)
            for index in topic.partition_indexes]) for topic in marker.topics]
        markers.append(_Marker(producer_id=marker.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=markers)


def error_response(header, request, error_code: int) -> WriteTxnMarkersResponse:
    markers = [_Marker(producer_id=m.producer_id, topics=[
        _Topic(name=t.name, partitions=[_Partition(partition_index=p, error_code=error_code)
                                        for p in t.partition_indexes]) for t in m.topics])
        for m in request.markers]
    return WriteTxnMarkersResponse(markers=markers)
