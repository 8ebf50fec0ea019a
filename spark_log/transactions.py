"""Exactly-once writes: two-phase commit of Kafka transactions on Spark's writer contract.

Phase one (executor, ``write_transaction`` in ``spark_log._io``): each task attempt writes its
rows inside its own transaction and *prepares* it (KIP-939 style: flushed, left open); the
``PreparedTransaction`` (id, producer id, epoch, partitions) travels to the driver in the task's
commit message. Phase two (driver, ``Committer.commit``): write the batch's *commit intent* (every
prepared transaction of the batch) to the commit log, then complete every transaction with EndTxn
(any client may send it with the stored producer id/epoch; in parallel, with the sweep of this
batch's other open transactions alongside). No "done" record: the next intent supersedes it, and
an intent found on restart is rolled forward (committing a committed transaction succeeds).

Transactional ids (``transactional_id``): ``<prefix>-b<batch>-p<partition>-a<attempt>-t<task
attempt id>``. The task attempt id is unique within the Spark application, so a retried or
speculative attempt (and a task of a re-submitted stage, whose attempt numbers restart at 0)
never shares an id with a sibling: its InitProducerId can neither fence nor abort a sibling's
prepared transaction that the driver will commit. The price: ids are not enumerable, so
lingering transactions are not found by probing ids one by one (Flink's TransactionAborter) but
by ListTransactions (to every broker at once) filtered by the prefix; each lingering one is fenced
and aborted with an InitProducerId on its id.

The commit log (``spark_log.commit_log``) is a compacted topic (``commitLogTopic``, default ``pylog-spark-commits``) on the
sink's cluster, keyed by the prefix: the latest record of a prefix is ``{"batch": n, "state":
"intent", "transactions": [...], "query": id}`` (``{"batch": n, "state": "done"}`` after a
roll-forward; a tombstone once a batch job finished). Not the checkpoint directory: a Python DataSource sees the ``checkpointLocation`` only as a path string (when given
as an option), may run where that file system is not mounted, and HDFS/S3 would need clients
in every Python worker. The sink's own cluster is reachable by construction, replicated, and
written with acks=all.

Recovery (``Committer.recover``, run on the driver each time Spark builds a stream's writer:
before the first task of a restarted query writes, and again during batches): ListTransactions
for open transactions of the prefix; none (the common case, one request per broker) -> nothing
to do. Otherwise read the prefix's last commit-log record: an open transaction listed in a
not-done intent is rolled forward (EndTxn commit with the intent's producer id/epoch); open ones
of batches already done are fenced and aborted. Open ones of the batch being (re)written are
left alone (they may be running tasks); ``commit`` sweeps them after committing its own: at that
point anything else open of the prefix is an attempt the driver will never commit. A replayed
batch (id == the last done; SPARK-28908) is written again by Spark and aborted by ``commit``.

Query ids: a checkpoint deleted and a new query started at the same path keeps the prefix, and
Spark numbers its batches from 0 again. Each intent carries the query id (``"query"``, from the
local checkpoint's ``metadata``, ``spark_log.sink.read_query_id``); a latest record of another
query means that query's history has ended: the new query's batches are not replays. Without an id (non-local
checkpoint, records from before ids) a batch below the last done cannot be a replay (Spark only
replays the last planned batch): ``commit`` refuses it rather than drop its rows.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from broker.client import ClientConfig, Cluster, KafkaError, Producer, PreparedTransaction
from broker.client.coordinator import KEY_TYPE_TRANSACTION
from broker.client.offsets import LATEST_TIMESTAMP, list_offsets
from broker.client.txn_admin import TxnAdmin
from broker.client.txn_requests import TxnCoordinatorClient
from broker.wire import ErrorCode
from spark_log.commit_log import DEFAULT_COMMIT_LOG_TOPIC, ensure_topic, read_commit_log, read_commit_log_from
from spark_log.eos_faults import (TEST_KILL_ENV, TEST_KILL_PGID_ENV, TEST_TASK_FAULT_ENV, test_kill_point,
                                  test_task_fault)

# The commit log's reader and the test hooks live in spark_log.commit_log / spark_log.eos_faults;
# named here too, where the sink, recovery and the tests have always imported them from.
__all__ = ["TxnSettings", "Committer", "transactional_id", "default_prefix", "test_kill_point",
           "test_task_fault", "read_commit_log", "DEFAULT_COMMIT_LOG_TOPIC", "TEST_KILL_ENV", "TEST_KILL_PGID_ENV",
           "TEST_TASK_FAULT_ENV", "ONGOING"]

log = logging.getLogger(__name__)

ONGOING = "Ongoing"  # ListTransactions' state name for an open transaction
COMMIT_THREADS = 8  # EndTxns (one per task) and the sweep of one commit in flight at once


@dataclass(frozen=True)
class TxnSettings:
    """What tasks and the driver need for exactly-once writes; plain data, pickled into tasks."""

    prefix: str
    transaction_timeout_ms: int
    commit_log_topic: str
    bootstrap_servers: str
    request_timeout_ms: int = 30_000
    # The sink's kafka.security.protocol / kafka.sasl.* / kafka.ssl.* (a ClientSecurity: pickles,
    # its SSL context is built per process); None: PLAINTEXT. Every driver-side client uses it.
    security: object | None = None
    # The streaming query's id (``<checkpointLocation>/metadata``: ``sink.read_query_id``) and the
    # checkpoint path; None when unknown (a non-local checkpoint, a batch job). Recorded in each
    # intent: a new query reusing a checkpoint path (deleted and started over) shares the prefix,
    # and only its query id tells its batch 0, 1, ... from replays of the old query's.
    query_id: str | None = None
    checkpoint_location: str | None = None

    def client_config(self, client_id: str) -> ClientConfig:
        """The config of every client the driver's side makes (commit, sweep, recovery, the
        commit log's producer, reader and admin): the tasks' security settings, so a secured
        cluster that lets the tasks in lets the driver in too."""
        return ClientConfig(client_id=client_id, request_timeout_ms=self.request_timeout_ms,
                            security=self.security)


def default_prefix(checkpoint_location: str | None) -> str | None:
    """``pylog-spark-<12 hex of sha1(checkpoint path)>``: stable across restarts of a query from
    the same checkpoint, distinct between queries; None without a checkpoint location."""
    if not checkpoint_location:
        return None
    digest = hashlib.sha1(checkpoint_location.rstrip("/").encode()).hexdigest()[:12]
    return f"pylog-spark-{digest}"


def batch_prefix() -> str:
    """A batch job (``df.write``) is never restarted: a fresh prefix per job."""
    return f"pylog-spark-write-{uuid.uuid4().hex[:12]}"


def transactional_id(prefix: str, batch_id: int, partition_id: int, attempt: int, task_attempt_id: int) -> str:
    return f"{prefix}-b{batch_id}-p{partition_id}-a{attempt}-t{task_attempt_id}"


def batch_of(prefix: str, tid: str) -> int | None:
    """The batch id inside one of ``prefix``'s transactional ids; None for another prefix's."""
    head = prefix + "-b"
    if not tid.startswith(head):
        return None
    number = tid[len(head):].split("-", 1)[0]
    return int(number) if number.isdigit() else None


# Driver-side clients per (bootstrap, commit topic, security), kept across commits in a reused Python
# process: a fresh Cluster costs a bootstrap and a Metadata round trip per commit.
_clients: dict[tuple, "_DriverClients"] = {}
# (prefix, query id) -> (last batch committed, commit-log offset up to which that is known): Committer.last_done.
# Spark runs the driver-side commits in a pool of reused Python workers, so a later batch of the
# same query may have been committed by another process: the value holds only while the commit
# log has no record past that offset (one ListOffsets to check; the records past it read if not).
_last_done: dict[tuple, tuple[int, int, bool]] = {}  # ..., and whether this process ended that batch
_clients_lock = threading.Lock()


class _DriverClients:
    """The driver's connections, kept across commits. EndTxns of one batch and the sweep run in
    parallel (``pool``), each on a ``Cluster`` of its own (a ``Cluster`` and its connections are
    not thread-safe): a commit costs the intent plus the slowest of them, not their sum."""

    def __init__(self, settings: TxnSettings) -> None:
        self.settings = settings
        self.config = settings.client_config("pylog-spark-committer")
        self.cluster = Cluster(settings.bootstrap_servers, self.config)
        self.admin = TxnAdmin(self.cluster)
        self.producer = Producer(settings.bootstrap_servers, acks=-1, linger_ms=0,
                                 config=settings.client_config("pylog-spark-commit-log"))
        self.topic_ready = False
        self.pool = ThreadPoolExecutor(max_workers=COMMIT_THREADS, thread_name_prefix="pylog-spark-commit")
        self._spare: queue.SimpleQueue[Cluster] = queue.SimpleQueue()
        self._all: list[Cluster] = []

    def borrow(self) -> Cluster:
        try:
            return self._spare.get_nowait()
        except queue.Empty:
            cluster = Cluster(self.settings.bootstrap_servers, self.config)
            self._all.append(cluster)
            return cluster

    def give_back(self, cluster: Cluster) -> None:
        self._spare.put(cluster)

    def close(self) -> None:
        self.pool.shutdown(wait=False)
        for close in (self.producer.close, self.cluster.close, *(c.close for c in self._all)):
            try:
                close()
            except Exception:  # closing after a failure: nothing more to do
                pass


def _clients_for(settings: TxnSettings) -> _DriverClients:
    key = (settings.bootstrap_servers, settings.commit_log_topic, settings.security)
    with _clients_lock:
        clients = _clients.get(key)
        if clients is None:
            clients = _clients[key] = _DriverClients(settings)
        return clients


def _drop_clients(settings: TxnSettings) -> None:
    with _clients_lock:
        clients = _clients.pop((settings.bootstrap_servers, settings.commit_log_topic, settings.security), None)
    if clients is not None:
        clients.close()


class _Gate:
    """Opened once, with a verdict: the EndTxn jobs of ``commit`` wait here for the intent."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._go = False

    def open(self, go: bool) -> None:
        self._go = go
        self._event.set()

    def wait(self) -> bool:
        self._event.wait()
        return self._go


class Committer:
    """The driver's side of the two-phase commit for one prefix."""

    def __init__(self, settings: TxnSettings) -> None:
        self.settings = settings
        self.phases: dict[str, float] = {}  # ms since the commit began, per step (the bench prints them)
        self._key = (settings.prefix, settings.query_id)  # the _last_done entry: one per query
        self._coordinators: dict[str, int] = {}  # commit()'s and abort()'s hints: id -> node

    def _done_of(self, record: dict | None) -> int:
        """The last batch of *this* query that ``record`` (the prefix's latest) says is done or
        to be rolled forward; -1 when it is another query's (known ids that differ: a new query
        reusing the checkpoint path, whose batches restart at 0 and are not replays)."""
        if record is None:
            return -1
        theirs, ours = record.get("query"), self.settings.query_id
        if theirs is not None and ours is not None and theirs != ours:
            return -1
        return int(record["batch"])

    def _mark(self, started: float, name: str) -> None:
        self.phases[name] = (time.perf_counter() - started) * 1000

    # ------------------------------------------------------------------ commit and abort

    def commit(self, prepared: list[PreparedTransaction], batch_id: int, *, batch_job: bool = False,
               coordinators: dict[str, int] | None = None) -> None:
        """Intent, then EndTxn(commit) for every prepared transaction and the sweep. ``coordinators``:
        transactional id -> the coordinator node its task found (EndTxn goes straight there; a
        stale one costs a FindCoordinator, as without it). A batch job
        (``batch_job``: ``df.write``, never restarted by Spark) writes its intent too, marked
        ``"job": "batch"`` so that ``spark_log.recover`` (run by the next batch job's driver, or
        by hand) can roll it forward after a driver death; its done record is a tombstone: a
        finished batch job needs nothing kept, and compaction drops its key."""
        self._coordinators = dict(coordinators or {})
        try:
            self._commit(prepared, batch_id, batch_job)
        except Exception:
            _drop_clients(self.settings)  # a broken connection must not outlive this commit
            raise

    def _commit(self, prepared: list[PreparedTransaction], batch_id: int, batch_job: bool) -> None:
        started = time.perf_counter()
        clients = _clients_for(self.settings)
        opened = [p for p in prepared if p.partitions]  # the others never reached a coordinator
        rest = opened
        if opened and os.environ.get(TEST_KILL_ENV):  # the fault tests' point between two EndTxns
            rest = opened[1:]
        # Started first, so their round trips overlap the replay check's and the intent's: the
        # sweep (failed, killed or losing speculative attempts of this batch: never part of the
        # intent, so it need not wait for it) keeps this batch's own prepared transactions; the
        # EndTxn jobs connect to their coordinators and wait for the intent at the gate.
        sweep = clients.pool.submit(self.abort_lingering, [p.transactional_id for p in prepared])
        intent_end = None
        gate = _Gate()
        ends = self._start_ends(clients, rest, True, gate)
        try:
            done = -1 if batch_job else self.last_done()
            self._mark(started, "checked")
            if not batch_job and batch_id <= done:
                gate.open(False)
                self._refuse_or_drop_replay(clients, prepared, batch_id, done)
                sweep.result()
                return
            test_kill_point("before-intent", batch_id)
            intent = {"batch": batch_id, "state": "intent", "transactions": [p.to_dict() for p in prepared]}
            if self.settings.query_id is not None:
                intent["query"] = self.settings.query_id
            if batch_job:
                intent["job"] = "batch"
            if opened:  # nothing to roll forward otherwise
                intent_end = self._log(clients, intent) + 1
            self._mark(started, "intent")
            test_kill_point("after-intent", batch_id)
            if rest is not opened:
                self._end(clients, opened[0], commit=True)
                test_kill_point("after-first-commit", batch_id)
        except BaseException:
            gate.open(False)  # the waiting EndTxn jobs end without sending anything
            raise
        gate.open(True)
        for future in ends:
            future.result()
        self._mark(started, "ended")
        sweep.result()
        self._mark(started, "swept")
        if batch_job:
            if opened:
                self._log(clients, None)
            return
        # No "done" record: the intent of batch n says n is done or is to be rolled forward
        # (recover() does, before any later batch writes), which is all last_done() needs.
        known = _last_done.get(self._key)
        if intent_end is not None or known is not None:
            _last_done[self._key] = (batch_id, intent_end if intent_end is not None else known[1], True)

    def _refuse_or_drop_replay(self, clients: _DriverClients, prepared: list[PreparedTransaction],
                               batch_id: int, done: int) -> None:
        """A batch at or below the last done one: its transactions aborted; below, an error."""
        self._end_all(clients, prepared, commit=False)  # nothing of it left open
        if batch_id < done:
            # Spark replays only the last planned batch: a lower one is a new query's (the
            # checkpoint was deleted or is used by another query) whose id could not be told.
            raise RuntimeError(
                f"the commit log shows batch {done} committed for transactional id prefix "
                f"{self.settings.prefix}, this query is at batch {batch_id}: the checkpoint at "
                f"{self.settings.checkpoint_location or '(unknown)'} was deleted or reused by another query; "
                "set a new 'transactionalIdPrefix' or use a new checkpointLocation")
        # Spark replays a batch whose commit finished but whose checkpoint commit entry was not
        # written (SPARK-28908): its rows are in the log already, so this run's are not.
        log.warning("batch %d of %s was committed before: aborting its replay", batch_id, self.settings.prefix)

    def last_done(self) -> int:
        """The last batch whose transactions were all committed (-1: none): read from the commit
        log once per process, then kept up to date with the records written since (only a
        ListOffsets when there are none). Not simply kept: another of Spark's reused Python
        workers may have committed later batches of this query, and a stale value would let a
        replayed batch (SPARK-28908) be committed a second time."""
        cached = self._cached(_clients_for(self.settings))
        if cached is not None:
            return cached[0]
        # A not-done intent is rolled forward by recover() before any new batch writes.
        latest, end = read_commit_log_from(self.settings, self.settings.prefix)
        done = self._done_of(latest.get(self.settings.prefix))
        if end is not None:  # the commit log exists
            _last_done[self._key] = (done, end, False)
        return done

    def _cached(self, clients: "_DriverClients") -> tuple[int, int, bool] | None:
        """The kept (last batch, commit-log end, ended by this process), brought up to date with
        the prefix's commit-log records past that end; None when nothing is kept."""
        cached = _last_done.get(self._key)
        if cached is None:
            return None
        done, known_end, ended_here = cached
        tp = (self.settings.commit_log_topic, 0)
        if list_offsets(clients.cluster, {tp: LATEST_TIMESTAMP})[tp][0] != known_end:
            latest, end = read_commit_log_from(self.settings, self.settings.prefix, start=known_end)
            if self.settings.prefix in latest:  # another process committed (or began to)
                last = latest[self.settings.prefix]
                done, ended_here = self._done_of(last), False
            cached = _last_done[self._key] = (done, known_end if end is None else end, ended_here)
        return cached

    def abort(self, prepared: list[PreparedTransaction], coordinators: dict[str, int] | None = None) -> None:
        """EndTxn(abort) for each prepared transaction, then every other open one of the prefix
        (attempts that failed or were killed after they began)."""
        self._coordinators = dict(coordinators or {})
        try:
            clients = _clients_for(self.settings)
            self._end_all(clients, prepared, commit=False)
            self.abort_lingering(keep=())
        except Exception:
            _drop_clients(self.settings)
            raise

    def _end_all(self, clients: _DriverClients, prepared: list[PreparedTransaction], commit: bool) -> None:
        """EndTxn for each, in parallel (each on a borrowed Cluster); the first error raises."""
        gate = _Gate()
        futures = self._start_ends(clients, prepared, commit, gate)
        gate.open(True)
        for future in futures:
            future.result()

    def _start_ends(self, clients: _DriverClients, prepared: list[PreparedTransaction], commit: bool,
                    gate: "_Gate") -> list:
        """One pool job per transaction: connect to its coordinator right away (the task's, else
        FindCoordinator; ``commit`` starts these before its intent write, so they are off the
        critical path), then EndTxn once ``gate`` opens; nothing if it opens closed."""
        def end(p: PreparedTransaction) -> None:
            cluster = clients.borrow()
            try:
                client = TxnCoordinatorClient(cluster, p.transactional_id, self._coordinators.get(p.transactional_id))
                try:
                    client._coordinator((KEY_TYPE_TRANSACTION, p.transactional_id),
                                        time.monotonic() * 1000 + self.settings.request_timeout_ms)
                except KafkaError:  # end_txn looks the coordinator up again, with its retries
                    client = TxnCoordinatorClient(cluster, p.transactional_id)
                if gate.wait():
                    self._end(clients, p, commit, cluster, client)
            finally:
                clients.give_back(cluster)

        return [clients.pool.submit(end, p) for p in prepared if p.partitions]

    def _end(self, clients: _DriverClients, p: PreparedTransaction, commit: bool, cluster: Cluster | None = None,
             client: TxnCoordinatorClient | None = None) -> None:
        if not p.partitions:
            return  # nothing was added: the transaction never opened at the coordinator
        deadline = time.monotonic() * 1000 + self.settings.request_timeout_ms
        client = client or TxnCoordinatorClient(cluster or clients.cluster, p.transactional_id,
                                                self._coordinators.get(p.transactional_id))
        try:
            client.end_txn(p.producer_id, p.producer_epoch, commit, deadline)
        except KafkaError as exc:
            # Committing one that the coordinator already committed answers NONE; an abort of
            # one that is already gone (fenced, timed out) is what we wanted anyway.
            if commit or exc.code not in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH,
                                          ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_PRODUCER_ID_MAPPING):
                raise

    # ------------------------------------------------------------------ recovery

    def open_transactions(self, cluster: Cluster | None = None) -> list[str]:
        """Transactional ids of the prefix with an open transaction (ListTransactions to every
        broker at once, the broker list refreshed meanwhile: one round trip, the slowest broker's)."""
        cluster = cluster or _clients_for(self.settings).cluster
        listed = TxnAdmin(cluster).list_transactions(states=[ONGOING], refresh_brokers=True)
        prefix = self.settings.prefix + "-b"
        return sorted({t.transactional_id for ts in listed.values() for t in ts
                       if t.transactional_id.startswith(prefix) and t.state == ONGOING})

    def recover(self) -> dict[str, int]:
        """Roll forward a not-done intent's open transactions and fence and abort the open ones of
        batches already done. Spark builds a stream's writer several times per micro-batch, also
        while its tasks write, so this must not touch a transaction that may still be committed:
        open ones of later batches are left to ``commit``'s sweep (after its own transactions
        are committed, anything else open of the prefix is a dead or losing attempt).

        Retriable errors (a broker down or restarting: ListTransactions asks every broker) are
        retried on fresh connections for up to ``request_timeout_ms``: a query restarted right
        after a broker died must not fail at once while that broker comes back. Every step is
        idempotent (a repeated commit answers NONE, a repeated fence finds nothing open)."""
        deadline = time.monotonic() + self.settings.request_timeout_ms / 1000
        backoff_s = 0.2
        while True:
            try:
                return self._recover_once()
            except KafkaError as exc:
                if not exc.retriable or time.monotonic() + backoff_s > deadline:
                    raise
                log.warning("exactly-once recovery of %s: %s; retrying in %.1f s",
                            self.settings.prefix, exc, backoff_s)
                time.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, 2.0)

    def _recover_once(self) -> dict[str, int]:
        try:
            open_ids = self.open_transactions()
            if not open_ids:
                return {"committed": 0, "aborted": 0}
            clients = _clients_for(self.settings)
            committed = 0
            cached = self._cached(clients)
            # This process finished every EndTxn of batches up to ``known`` (and no other process
            # wrote an intent since): no intent to read.
            known = cached[0] if cached is not None and cached[2] else None
            last, end = None, None
            if known is None:
                latest, end = read_commit_log_from(self.settings, self.settings.prefix)
                last = latest.get(self.settings.prefix)
            # ``done``: this query's last batch (-1 when the record is another query's: its open
            # ones are then left to commit's sweep, as they may be this new query's tasks).
            done = known if known is not None else self._done_of(last)
            if last is not None and last.get("state") == "intent":
                for d in last.get("transactions", ()):
                    p = PreparedTransaction.from_dict(d)
                    if p.transactional_id in open_ids:
                        self._end(clients, p, commit=True)
                        committed += 1
                if committed:  # the intent's own query and batch (maybe an earlier query's)
                    record = {"batch": int(last["batch"]), "state": "done"}
                    if last.get("query") is not None:
                        record["query"] = last["query"]
                    end = self._log(clients, record) + 1
                if end is not None:  # every transaction of the intent is committed now
                    _last_done[self._key] = (done, end, True)
            last = last or {}
            stale = [t for t in open_ids if (batch_of(self.settings.prefix, t) or 0) <= done and not (
                last.get("state") == "intent" and t in {d["transactional_id"] for d in last["transactions"]})]
            aborted = self._fence(clients, stale)
            if committed or aborted:
                log.warning("exactly-once recovery of %s: %d transactions rolled forward, %d aborted",
                            self.settings.prefix, committed, aborted)
            return {"committed": committed, "aborted": aborted}
        except Exception:
            _drop_clients(self.settings)
            raise

    def abort_lingering(self, keep=()) -> int:
        """Fence and abort the prefix's open transactions except ``keep`` (on a borrowed Cluster:
        ``commit`` runs this alongside its EndTxns)."""
        clients = _clients_for(self.settings)
        cluster = clients.borrow()
        try:
            kept = set(keep)
            return self._fence(clients, [t for t in self.open_transactions(cluster) if t not in kept], cluster)
        finally:
            clients.give_back(cluster)

    def _fence(self, clients: _DriverClients, ids: list[str], cluster: Cluster | None = None) -> int:
        """InitProducerId on each id: bumps its epoch (fencing a zombie task still holding it)
        and aborts its open transaction; answered once the abort is done."""
        for tid in ids:
            deadline = time.monotonic() * 1000 + self.settings.request_timeout_ms
            TxnCoordinatorClient(cluster or clients.cluster, tid).init_producer_id(
                self.settings.transaction_timeout_ms, deadline)
        return len(ids)

    # ------------------------------------------------------------------ the commit log

    def _log(self, clients: _DriverClients, record: dict | None, key: str | None = None) -> int:
        """Write ``record`` (None: a tombstone) under ``key`` (default: this prefix), acks=all;
        its offset in the commit log."""
        if not clients.topic_ready:
            self._ensure_topic()
            clients.topic_ready = True
        value = None if record is None else json.dumps(record).encode()
        delivery = clients.producer.send(self.settings.commit_log_topic, value,
                                         key=(key or self.settings.prefix).encode())
        clients.producer.flush()
        return delivery.offset

    def _ensure_topic(self) -> None:
        ensure_topic(self.settings)

    def last_record(self) -> dict | None:
        """The prefix's latest commit-log record, None when the prefix never committed."""
        return read_commit_log(self.settings, self.settings.prefix).get(self.settings.prefix)
