"""A model transactional producer for the transaction coordinator's simulation (``txns``).

One *instance* of a producer process for a transactional id: InitProducerId (retrying
CONCURRENT_TRANSACTIONS and the coordinator errors), then transactions in a loop — AddPartitionsToTxn
(and sometimes AddOffsetsToTxn), a data batch to each added partition (the partition checks it with
the coordinator, KIP-890 part 1), EndTxn commit or abort. It follows the Java client's error
handling: retriable errors are retried after a backoff, PRODUCER_FENCED / INVALID_PRODUCER_EPOCH
end the instance (fatal), INVALID_TXN_STATE or a refused data batch aborts the transaction.

Faults it can be given: ``crash`` (the process dies: no more requests, answers ignored),
``pause`` (a zombie: it stops for a while and then goes on with its old epoch), a stall mid
transaction longer than its timeout, and delayed requests (the network holds an EndTxn).
Each transaction carries a *tag* (transactional id, instance, number) that its data batches carry,
so the simulation can check what happened to every batch.
"""

from __future__ import annotations

from broker.wire.apis.add_offsets_to_txn import AddOffsetsToTxnRequest
from broker.wire.apis.add_partitions_to_txn import AddPartitionsToTxnRequest
from broker.wire.apis.end_txn import EndTxnRequest
from broker.wire.apis.init_producer_id import InitProducerIdRequest

__all__ = ["TxnProducer", "INIT", "ADD", "OFFSETS", "END"]

INIT, ADD, OFFSETS, END = 22, 24, 25, 26
RETRIABLE = {14, 15, 16, 51}    # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT
FATAL = {47, 49, 90}  # INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING (id expired), PRODUCER_FENCED
BACKOFF_MS = 100
_TOPIC_CLS = AddPartitionsToTxnRequest._nested["v3_and_below_topics"][0]


class TxnProducer:
    def __init__(self, sim, transactional_id: str, instance: int, timeout_ms: int) -> None:
        self.sim = sim
        self.tid = transactional_id
        self.instance = instance
        self.name = f"{transactional_id}#{instance}"
        self.timeout_ms = timeout_ms
        self.pid = -1
        self.epoch = -1
        self.state = "new"      # new, init, ready, adding, writing, ending, dead
        self.alive = True       # False: crashed (answers are dropped)
        self.paused_until = 0
        self.txn_number = 0
        self.tag = None
        self.partitions: list = []
        self.commit = True
        self.unwritten: list = []

    # -- sending --------------------------------------------------------------------------------
    def send(self, api_key: int, request, delay_ms: int = 0) -> None:
        self.sim.send(self, api_key, request, delay_ms)

    def start(self) -> None:
        self.state = "init"
        self.send(INIT, InitProducerIdRequest(transactional_id=self.tid, transaction_timeout_ms=self.timeout_ms,
                                              producer_id=-1, producer_epoch=-1))

    def begin(self) -> None:
        if not self._active():
            return
        if self.sim.sched.now_ms >= self.sim.settings.duration_ms:
            self.state = "done"  # quiet: no new transactions
            return
        rng = self.sim.rng
        self.txn_number += 1
        self.tag = (self.tid, self.instance, self.txn_number)
        self.partitions = sorted(rng.sample(self.sim.topic_partitions, rng.randint(1, 3)))
        self.commit = rng.random() < 0.8
        self.state = "adding"
        self._send_add()

    def _send_add(self) -> None:
        topics: dict[str, list[int]] = {}
        for t, p in self.partitions:
            topics.setdefault(t, []).append(p)
        self.send(ADD, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.tid, v3_and_below_producer_id=self.pid,
            v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=[_TOPIC_CLS(name=t, partitions=ps) for t, ps in topics.items()]))

    def _send_offsets(self) -> None:
        self.send(OFFSETS, AddOffsetsToTxnRequest(transactional_id=self.tid, producer_id=self.pid,
                                                  producer_epoch=self.epoch, group_id="g-" + self.tid))

    def _send_end(self, delay_ms: int = 0) -> None:
        self.state = "ending"
        self.send(END, EndTxnRequest(transactional_id=self.tid, producer_id=self.pid,
                                     producer_epoch=self.epoch, committed=self.commit), delay_ms)

    def _active(self) -> bool:
        return self.alive and self.state not in ("dead", "done")

    def _later(self, delay_ms: int, callback, *args) -> None:
        """Run when the instance is running again (a paused zombie resumes later)."""
        self.sim.sched.after(max(delay_ms, self.paused_until - self.sim.sched.now_ms), callback, *args)

    # -- answers --------------------------------------------------------------------------------
    def receive(self, api_key: int, request, response) -> None:
        if not self._active():
            return
        if self.sim.sched.now_ms < self.paused_until:
            self._later(0, self.receive, api_key, request, response)
            return
        code = response.error_code if api_key != ADD else _add_code(response)
        if code in FATAL:
            self.state = "dead"
            self.sim.producer_fenced(self)
            return
        if code in RETRIABLE:
            self._later(BACKOFF_MS, self._retry, api_key, request)
            return
        if api_key == INIT:
            self._on_init(code, response)
        elif api_key == ADD:
            self._on_added(code)
        elif api_key == OFFSETS:
            self._on_offsets(code)
        elif api_key == END:
            self._on_end(code, request, response)

    def _retry(self, api_key: int, request) -> None:
        if self._active():
            self.send(api_key, request)

    def _on_init(self, code: int, response) -> None:
        if code != 0:
            self.sim.violation(f"{self.name}: InitProducerId failed with {code}")
            self.state = "dead"
            return
        self.pid, self.epoch = response.producer_id, response.producer_epoch
        self.sim.producer_ready(self)
        self.state = "ready"
        self._later(self.sim.rng.randint(1, 200), self.begin)

    def _on_added(self, code: int) -> None:
        if code != 0:
            self.commit = False  # the transaction cannot go on: abort it
            self._send_end()
            return
        if self.sim.rng.random() < 0.3:
            self._send_offsets()
        else:
            self._write()

    def _on_offsets(self, code: int) -> None:
        if code != 0:
            self.commit = False
            self._send_end()
        else:
            self._write()

    def _write(self) -> None:
        self.state = "writing"
        self.unwritten = list(self.partitions)
        stall = self.sim.stall_ms(self)
        self._later(stall, self._write_next)

    def _write_next(self) -> None:
        if not self._active():
            return
        if not self.unwritten:
            self._send_end(self.sim.end_delay_ms(self))
            return
        topic_partition = self.unwritten[0]
        outcome = self.sim.produce(self, topic_partition)
        if outcome == 0:
            self.unwritten.pop(0)
            self._later(self.sim.rng.randint(1, 20), self._write_next)
        elif outcome in FATAL:
            self.state = "dead"
            self.sim.producer_fenced(self)
        elif outcome in RETRIABLE:
            self._later(BACKOFF_MS, self._write_next)
        else:
            self.commit = False  # not in the transaction (it was aborted meanwhile): abort
            self._send_end()

    def _on_end(self, code: int, request, response) -> None:
        if code == 0:
            if getattr(response, "producer_epoch", -1) >= 0:
                # EndTxn v5: the next transaction's epoch, and a new producer id when it rotated
                if response.producer_id != self.pid:
                    self.sim.rotations += 1
                self.pid, self.epoch = response.producer_id, response.producer_epoch
            self.sim.end_acknowledged(self, self.tag, request.committed)
        elif code != 48:  # INVALID_TXN_STATE: the transaction is gone (aborted); go on
            self.sim.violation(f"{self.name}: EndTxn answered {code}")
        self.state = "ready"
        self._later(self.sim.rng.randint(1, 300), self.begin)


def _add_code(response) -> int:
    codes = {p.partition_error_code for t in response.results_by_topic_v3_and_below
             for p in t.results_by_partition}
    return max(codes, key=lambda c: c != 0) if codes else 0
