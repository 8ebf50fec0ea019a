"""A hand driver for ``TxnCoordinatorCore`` in unit tests: keeps each ``__transaction_state``
partition's records, completes writes / allocations / markers when told (or at once with
``auto``), and records every reply by token."""

from __future__ import annotations

import itertools

from broker.coordinator.txn.core import (Append, AllocateProducerId, Reply, TxnCoordinatorCore,
                                         TxnSettings, WriteMarkers, partition_for)
from broker.wire.apis.add_offsets_to_txn import AddOffsetsToTxnRequest
from broker.wire.apis.add_partitions_to_txn import AddPartitionsToTxnRequest
from broker.wire.apis.describe_transactions import DescribeTransactionsRequest
from broker.wire.apis.end_txn import EndTxnRequest
from broker.wire.apis.init_producer_id import InitProducerIdRequest
from broker.wire.apis.list_transactions import ListTransactionsRequest

TID = "txn-a"
TIMEOUT_MS = 60_000


class Driver:
    def __init__(self, settings: TxnSettings | None = None, auto: bool = True, num_partitions: int = 1):
        self.settings = settings or TxnSettings(num_partitions=num_partitions)
        self.core = TxnCoordinatorCore(self.settings)
        self.auto = auto
        self.now = 1_000
        self.log: dict[int, list] = {}
        self.replies: dict = {}
        self.appends: dict[int, Append] = {}
        self.allocs: list[int] = []
        self.markers: dict[int, WriteMarkers] = {}
        self.markers_sent: list[WriteMarkers] = []
        self.next_pid = 1000
        self._tokens = itertools.count(1)
        for p in range(self.settings.num_partitions):
            self.load(p, epoch=1)

    def load(self, partition: int, epoch: int):
        self.core.begin_load(partition, epoch)
        self.run(self.core.load_partition(partition, list(self.log.get(partition, [])), self.now))

    def run(self, effects):
        for e in effects:
            if isinstance(e, Reply):
                assert e.token not in self.replies, f"second reply for {e.token}"
                self.replies[e.token] = e.response
            elif isinstance(e, Append):
                self.appends[e.write_id] = e
                if self.auto:
                    self.complete_write(e.write_id)
            elif isinstance(e, AllocateProducerId):
                self.allocs.append(e.request_id)
                if self.auto:
                    self.allocate(e.request_id)
            elif isinstance(e, WriteMarkers):
                self.markers[e.marker_id] = e
                self.markers_sent.append(e)
                if self.auto:
                    self.complete_markers(e.marker_id)

    def complete_write(self, write_id, error=0):
        a = self.appends.pop(write_id)
        if error == 0:
            self.log.setdefault(a.partition, []).extend(a.records)
        self.run(self.core.write_done(write_id, error, self.now))

    def allocate(self, request_id, pid=None):
        self.allocs.remove(request_id)
        if pid is None:
            pid, self.next_pid = self.next_pid, self.next_pid + 1
        self.run(self.core.producer_id_allocated(request_id, pid, self.now))

    def complete_markers(self, marker_id):
        self.markers.pop(marker_id)
        self.run(self.core.markers_written(marker_id, self.now))

    def request(self, api_key, version, req):
        token = next(self._tokens)
        self.run(self.core.handle(token, api_key, version, req, self.now))
        return token

    def answer(self, token):
        return self.replies.get(token)

    # -- the APIs -------------------------------------------------------------------------------
    def init(self, tid=TID, timeout_ms=TIMEOUT_MS, version=4, pid=-1, epoch=-1):
        return self.request(22, version, InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=timeout_ms, producer_id=pid, producer_epoch=epoch))

    def add(self, pid, epoch, partitions, tid=TID, version=3):
        topics = {}
        for t, p in partitions:
            topics.setdefault(t, []).append(p)
        cls = AddPartitionsToTxnRequest._nested["v3_and_below_topics"][0]
        return self.request(24, version, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[cls(name=t, partitions=ps) for t, ps in topics.items()]))

    def add_v4(self, transactions):
        """``transactions``: [(tid, pid, epoch, verify_only, [(topic, partition)])]."""
        txn_cls = AddPartitionsToTxnRequest._nested["transactions"][0]
        topic_cls = txn_cls._nested["topics"][0]
        txns = []
        for tid, pid, epoch, verify_only, partitions in transactions:
            topics = {}
            for t, p in partitions:
                topics.setdefault(t, []).append(p)
            txns.append(txn_cls(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                verify_only=verify_only,
                                topics=[topic_cls(name=t, partitions=ps) for t, ps in topics.items()]))
        return self.request(24, 4, AddPartitionsToTxnRequest(transactions=txns))

    def add_offsets(self, pid, epoch, group, tid=TID, version=3):
        return self.request(25, version, AddOffsetsToTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group))

    def end(self, pid, epoch, committed, tid=TID, version=3):
        return self.request(26, version, EndTxnRequest(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=committed))

    def describe(self, *tids):
        return self.request(65, 0, DescribeTransactionsRequest(transactional_ids=list(tids)))

    def list(self, states=(), pids=(), duration=-1, version=1, pattern=None):
        return self.request(66, version, ListTransactionsRequest(
            state_filters=list(states), producer_id_filters=list(pids), duration_filter=duration,
            transactional_id_pattern=pattern))

    # -- shortcuts ------------------------------------------------------------------------------
    def ready(self, tid=TID, timeout_ms=TIMEOUT_MS):
        r = self.answer(self.init(tid, timeout_ms))
        assert r.error_code == 0, r
        return r.producer_id, r.producer_epoch

    def state(self, tid=TID):
        shard = self.core._shards[partition_for(tid, self.settings.num_partitions)]
        return shard.txns.get(tid)

    def tick(self, advance_ms):
        self.now += advance_ms
        self.run(self.core.tick(self.now))
