"""The model transactional producer of the group simulation tier (``broker.sim.groups``): offsets
committed inside transactions (TxnOffsetCommit, KIP-98/KIP-447), as Kafka Streams or Spark's
exactly-once sink does for a read-process-write loop.

One producer id, one transaction at a time: each sends one TxnOffsetCommit for a random subset of
the topic's partitions (offsets that only grow), then ends the transaction. It commits when the
TxnOffsetCommit was acknowledged (and sometimes aborts anyway, as an application may); an error
makes the transaction abortable, so it aborts (Kafka's producer has no other way out). The end is
the transaction coordinator's COMMIT/ABORT marker landing in the offsets partition after a delay
(``sim.write_marker``), retried by the real marker sender until written, so it always lands.

``materialized`` is what the group's committed offsets must be once every marker so far is
applied: the offsets of committed transactions only, the latest per partition.
"""

from __future__ import annotations

from broker.sim.group_client import TOPIC
from broker.wire.apis.txn_offset_commit import TxnOffsetCommitRequest

__all__ = ["TxnCommitter", "TXN_GROUP", "TXN_OFFSET_COMMIT", "PRODUCER_ID", "PRODUCER_EPOCH"]

TXN_GROUP = "sim-txn-group"
TXN_OFFSET_COMMIT = 28
PRODUCER_ID, PRODUCER_EPOCH = 5_000, 0
ABORT_ANYWAY_PROBABILITY = 0.2
RETRIABLE_COORDINATOR = {14, 15, 16}


class TxnCommitter:
    """``sim`` provides ``send``, ``write_marker``, ``rng``, ``sched``, ``settings`` (``partitions``,
    ``duration_ms``, ``latency_ms``) and ``note``."""

    def __init__(self, sim) -> None:
        self.sim = sim
        self.name = "txn-producer"
        self.life = 0  # never restarts: a reply always finds it
        self.next_offset = 0
        self.open: dict | None = None  # {(topic, partition): offset} of the transaction in flight
        self.materialized: dict[tuple[str, int], int] = {}
        self.transactions = {True: 0, False: 0}  # markers written: committed, aborted

    def start(self) -> None:
        if self.sim.sched.now_ms < self.sim.settings.duration_ms:
            self.sim.sched.after(self.sim.rng.randint(500, 3_000), self.begin)

    def begin(self) -> None:
        rng = self.sim.rng
        partitions = sorted(rng.sample(range(self.sim.settings.partitions), rng.randint(1, 3)))
        self.next_offset += rng.randint(1, 50)
        self.open = {(TOPIC, p): self.next_offset + p for p in partitions}
        self.send()

    def send(self) -> None:
        tcls = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        pcls = TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
        by_topic: dict = {}
        for (topic, partition), offset in self.open.items():
            by_topic.setdefault(topic, []).append(pcls(partition_index=partition, committed_offset=offset,
                                                       committed_leader_epoch=-1, committed_metadata=""))
        request = TxnOffsetCommitRequest(transactional_id="sim-tx", group_id=TXN_GROUP, producer_id=PRODUCER_ID,
                                         producer_epoch=PRODUCER_EPOCH, generation_id=-1, member_id="",
                                         group_instance_id=None,
                                         topics=[tcls(name=t, partitions=ps) for t, ps in by_topic.items()])
        self.sim.send(self, TXN_OFFSET_COMMIT, 3, request)

    def receive(self, api_key: int, response, life: int, member_id: str) -> None:
        assert api_key == TXN_OFFSET_COMMIT and self.open is not None
        codes = {p.error_code for t in response.topics for p in t.partitions}
        if codes == {14}:  # COORDINATOR_LOAD_IN_PROGRESS: nothing was written, the client retries
            self.sim.sched.after(self.sim.rng.randint(20, 200), self.send)
            return
        committed = codes == {0} and self.sim.rng.random() >= ABORT_ANYWAY_PROBABILITY
        self.sim.note(f"{self.name}: TxnOffsetCommit {sorted(codes)}, {'commit' if committed else 'abort'}")
        self.sim.sched.after(self.sim.rng.randint(*self.sim.settings.latency_ms) * 3, self.end, committed)

    def end(self, committed: bool) -> None:
        """The marker lands in the offsets partition (and reaches its coordinator)."""
        if committed:
            self.materialized.update(self.open)
        self.transactions[committed] += 1
        self.open = None
        self.sim.write_marker(PRODUCER_ID, PRODUCER_EPOCH, committed)
        self.start()
