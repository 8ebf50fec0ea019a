"""Exactly-once writes: two-phase commit of Kafka transactions on Spark's writer contract.

Phase one (executor, ``write_transaction`` in ``spark_log._io``): each task attempt writes its
rows inside its own transaction and *prepares* it (KIP-939 style: flushed, left open); the
``PreparedTransaction`` (id, producer id, epoch, partitions) travels to the driver in the task's
commit message. Phase two (driver, ``Committer.commit``): write the batch's *commit intent* (every
prepared transaction of the batch) to the commit log, complete each transaction with EndTxn
(any client may send it with the stored producer id/epoch), then mark the batch done.

Transactional ids (``transactional_id``): ``<prefix>-b<batch>-p<partition>-a<attempt>-t<task
attempt id>``. The task attempt id is unique within the Spark application, so a retried or
speculative attempt (and a task of a re-submitted stage, whose attempt numbers restart at 0)
never shares an id with a sibling: its InitProducerId can neither fence nor abort a sibling's
prepared transaction that the driver will commit. The price: ids are not enumerable, so
lingering transactions are not found by probing ids one by one (Flink's TransactionAborter) but
by ListTransactions (one request per broker) filtered by the prefix; each lingering one is fenced
and aborted with an InitProducerId on its id.

The commit log is a compacted topic (``commitLogTopic``, default ``pylog-spark-commits``) on the
sink's cluster, keyed by the prefix: the latest record of a prefix is ``{"batch": n, "state":
"intent", "transactions": [...]}`` or ``{"batch": n, "state": "done"}``. Not the checkpoint
directory: a Python DataSource sees the ``checkpointLocation`` only as a path string (when given
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
batch (id <= the last done; SPARK-28908) is written again by Spark and aborted by ``commit``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass

from broker.client import ClientConfig, Cluster, Consumer, KafkaError, Producer, PreparedTransaction
from broker.client.txn_admin import TxnAdmin
from broker.client.txn_requests import TxnCoordinatorClient
from broker.wire import ErrorCode

__all__ = ["TxnSettings", "Committer", "transactional_id", "default_prefix", "test_kill_point",
           "test_task_fault", "TEST_KILL_ENV", "TEST_KILL_PGID_ENV", "TEST_TASK_FAULT_ENV", "ONGOING"]

log = logging.getLogger(__name__)

ONGOING = "Ongoing"  # ListTransactions' state name for an open transaction
DEFAULT_COMMIT_LOG_TOPIC = "pylog-spark-commits"
# Test-only: "<point>[:<batch>]" makes the driver SIGKILL its whole process group at that point
# of commit (points: before-intent, after-intent, after-first-commit). Read from the environment
# of the process running the driver-side commit; never set it outside the fault tests.
TEST_KILL_ENV = "PYLOG_SPARK_TEST_KILL_AT"
TEST_KILL_PGID_ENV = "PYLOG_SPARK_TEST_KILL_PGID"  # the process group to kill (test-only)
# Test-only: "<kill|raise>:<batch>:<partition>:<marker file>" makes the first task attempt of that
# batch and partition that finds no marker file create it and then die (SIGKILL of its Python
# worker) or raise, after its rows are sent and before it prepares: a worker lost mid-write.
TEST_TASK_FAULT_ENV = "PYLOG_SPARK_TEST_TASK_FAULT"


@dataclass(frozen=True)
class TxnSettings:
    """What tasks and the driver need for exactly-once writes; plain data, pickled into tasks."""

    prefix: str
    transaction_timeout_ms: int
    commit_log_topic: str
    bootstrap_servers: str
    request_timeout_ms: int = 30_000


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


def test_kill_point(point: str, batch_id: int) -> None:
    """Test-only fault injection (``TEST_KILL_ENV``): SIGKILL this process group, so the Spark
    driver (the JVM and its Python processes, started in their own session by the test) dies
    exactly here."""
    wanted = os.environ.get(TEST_KILL_ENV)
    if not wanted:
        return
    name, _, batch = wanted.partition(":")
    if name == point and (not batch or int(batch) == batch_id):
        log.warning("test hook %s: killing the driver's process group at %s of batch %d",
                    TEST_KILL_ENV, point, batch_id)
        # Spark runs the commit in a Python process outside the driver's process group: the
        # test names that group (its driver's session); this process goes down with it.
        group = os.environ.get(TEST_KILL_PGID_ENV)
        if group:
            os.killpg(int(group), signal.SIGKILL)
        os.killpg(os.getpgid(0), signal.SIGKILL)


def test_task_fault(batch_id: int, partition_id: int, producer) -> None:
    """Test-only fault injection in a task (``TEST_TASK_FAULT_ENV``)."""
    wanted = os.environ.get(TEST_TASK_FAULT_ENV)
    if not wanted:
        return
    kind, batch, partition, marker = wanted.split(":", 3)
    if int(batch) != batch_id or int(partition) != partition_id:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return  # an earlier attempt took the fault
    os.close(fd)
    producer.flush()  # the transaction is open at the coordinator and on the partitions
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise RuntimeError(f"test hook {TEST_TASK_FAULT_ENV}: injected task failure")


# Driver-side clients per (bootstrap, commit topic), kept across commits in a reused Python
# process: a fresh Cluster costs a bootstrap and a Metadata round trip per commit.
_clients: dict[tuple[str, str], "_DriverClients"] = {}
_last_done: dict[str, int] = {}  # prefix -> last batch committed (Committer.last_done)
_clients_lock = threading.Lock()


class _DriverClients:
    def __init__(self, settings: TxnSettings) -> None:
        config = ClientConfig(client_id="pylog-spark-committer", request_timeout_ms=settings.request_timeout_ms)
        self.cluster = Cluster(settings.bootstrap_servers, config)
        self.admin = TxnAdmin(self.cluster)
        self.producer = Producer(settings.bootstrap_servers, acks=-1, linger_ms=0,
                                 client_id="pylog-spark-commit-log", request_timeout_ms=settings.request_timeout_ms)
        self.topic_ready = False

    def close(self) -> None:
        for close in (self.producer.close, self.cluster.close):
            try:
                close()
            except Exception:  # closing after a failure: nothing more to do
                pass


def _clients_for(settings: TxnSettings) -> _DriverClients:
    key = (settings.bootstrap_servers, settings.commit_log_topic)
    with _clients_lock:
        clients = _clients.get(key)
        if clients is None:
            clients = _clients[key] = _DriverClients(settings)
        return clients


def _drop_clients(settings: TxnSettings) -> None:
    with _clients_lock:
        clients = _clients.pop((settings.bootstrap_servers, settings.commit_log_topic), None)
    if clients is not None:
        clients.close()


class Committer:
    """The driver's side of the two-phase commit for one prefix."""

    def __init__(self, settings: TxnSettings) -> None:
        self.settings = settings

    # ------------------------------------------------------------------ commit and abort

    def commit(self, prepared: list[PreparedTransaction], batch_id: int, *, durable: bool = True) -> None:
        """Intent, then EndTxn(commit) for each prepared transaction, then done. ``durable``
        False (batch jobs, never restarted) skips the commit log."""
        try:
            self._commit(prepared, batch_id, durable)
        except Exception:
            _drop_clients(self.settings)  # a broken connection must not outlive this commit
            raise

    def _commit(self, prepared: list[PreparedTransaction], batch_id: int, durable: bool) -> None:
        clients = _clients_for(self.settings)
        if durable and batch_id <= self.last_done():
            # Spark replays a batch whose commit finished but whose checkpoint commit entry was
            # not written (SPARK-28908): its rows are in the log already, so this run's are not.
            log.warning("batch %d of %s was committed before: aborting its replay", batch_id, self.settings.prefix)
            for p in prepared:
                self._end(clients, p, commit=False)
            return
        test_kill_point("before-intent", batch_id)
        if durable:
            self._log(clients, {"batch": batch_id, "state": "intent",
                                "transactions": [p.to_dict() for p in prepared]})
        test_kill_point("after-intent", batch_id)
        for i, p in enumerate(prepared):
            self._end(clients, p, commit=True)
            if i == 0:
                test_kill_point("after-first-commit", batch_id)
        if durable:
            self._log(clients, {"batch": batch_id, "state": "done"})
            _last_done[self.settings.prefix] = batch_id

    def last_done(self) -> int:
        """The last batch whose transactions were all committed (-1: none); read from the commit
        log once per process, then kept (this process is the one committing)."""
        done = _last_done.get(self.settings.prefix)
        if done is None:
            last = self.last_record()
            # A not-done intent is rolled forward by recover() before any new batch writes.
            done = _last_done[self.settings.prefix] = -1 if last is None else int(last["batch"])
        return done

    def abort(self, prepared: list[PreparedTransaction]) -> None:
        """EndTxn(abort) for each prepared transaction, then every other open one of the prefix
        (attempts that failed or were killed after they began)."""
        try:
            clients = _clients_for(self.settings)
            for p in prepared:
                self._end(clients, p, commit=False)
            self.abort_lingering(keep=())
        except Exception:
            _drop_clients(self.settings)
            raise

    def _end(self, clients: _DriverClients, p: PreparedTransaction, commit: bool) -> None:
        if not p.partitions:
            return  # nothing was added: the transaction never opened at the coordinator
        deadline = time.monotonic() * 1000 + self.settings.request_timeout_ms
        client = TxnCoordinatorClient(clients.cluster, p.transactional_id)
        try:
            client.end_txn(p.producer_id, p.producer_epoch, commit, deadline)
        except KafkaError as exc:
            # Committing one that the coordinator already committed answers NONE; an abort of
            # one that is already gone (fenced, timed out) is what we wanted anyway.
            if commit or exc.code not in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH,
                                          ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_PRODUCER_ID_MAPPING):
                raise

    # ------------------------------------------------------------------ recovery

    def open_transactions(self) -> list[str]:
        """Transactional ids of the prefix with an open transaction (ListTransactions, every broker)."""
        clients = _clients_for(self.settings)
        clients.cluster.refresh_brokers()
        listed = clients.admin.list_transactions(states=[ONGOING])
        prefix = self.settings.prefix + "-b"
        return sorted({t.transactional_id for ts in listed.values() for t in ts
                       if t.transactional_id.startswith(prefix) and t.state == ONGOING})

    def recover(self) -> dict[str, int]:
        """Roll forward a not-done intent's open transactions and fence and abort the open ones of
        batches already done. Spark builds a stream's writer several times per micro-batch, also
        while its tasks write, so this must not touch a transaction that may still be committed:
        open ones of later batches are left to ``commit``'s sweep (after its own transactions
        are committed, anything else open of the prefix is a dead or losing attempt)."""
        try:
            open_ids = self.open_transactions()
            if not open_ids:
                return {"committed": 0, "aborted": 0}
            last = self.last_record()
            clients = _clients_for(self.settings)
            committed = 0
            done = -1 if last is None else int(last["batch"])
            if last is not None and last.get("state") == "intent":
                for d in last.get("transactions", ()):
                    p = PreparedTransaction.from_dict(d)
                    if p.transactional_id in open_ids:
                        self._end(clients, p, commit=True)
                        committed += 1
                self._log(clients, {"batch": done, "state": "done"})
                _last_done[self.settings.prefix] = done
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
        """Fence and abort the prefix's open transactions except ``keep``."""
        clients = _clients_for(self.settings)
        return self._fence(clients, [t for t in self.open_transactions() if t not in set(keep)])

    def _fence(self, clients: _DriverClients, ids: list[str]) -> int:
        """InitProducerId on each id: bumps its epoch (fencing a zombie task still holding it)
        and aborts its open transaction; answered once the abort is done."""
        for tid in ids:
            deadline = time.monotonic() * 1000 + self.settings.request_timeout_ms
            TxnCoordinatorClient(clients.cluster, tid).init_producer_id(
                self.settings.transaction_timeout_ms, deadline)
        return len(ids)

    # ------------------------------------------------------------------ the commit log

    def _log(self, clients: _DriverClients, record: dict) -> None:
        if not clients.topic_ready:
            self._ensure_topic()
            clients.topic_ready = True
        clients.producer.send(self.settings.commit_log_topic, json.dumps(record).encode(),
                              key=self.settings.prefix.encode())
        clients.producer.flush()

    def _ensure_topic(self) -> None:
        from broker.client import AdminClient

        with AdminClient(self.settings.bootstrap_servers) as admin:
            if self.settings.commit_log_topic in admin.list_topics():
                return
            replicas = min(3, len(admin.cluster.refresh(None).brokers))
            try:
                admin.create_topics(self.settings.commit_log_topic, 1, replicas,
                                    {"cleanup.policy": "compact", "min.insync.replicas": str(min(2, replicas))})
            except KafkaError as exc:
                if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    raise

    def last_record(self) -> dict | None:
        """The prefix's latest commit-log record (read from the start of the one partition:
        compaction keeps it short), None when the prefix never committed."""
        tp = (self.settings.commit_log_topic, 0)
        last = None
        with Consumer(self.settings.bootstrap_servers, auto_offset_reset="earliest",
                      client_id="pylog-spark-commit-log-reader") as consumer:
            try:
                end = consumer.end_offsets([tp])[tp]
            except KafkaError as exc:
                if exc.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                    return None
                raise
            consumer.assign([tp])
            consumer.seek_to_beginning([tp])
            key = self.settings.prefix.encode()
            while consumer.position(tp) < end:
                for record in consumer.poll(timeout_ms=1000):
                    if record.key == key and record.value is not None:
                        last = json.loads(record.value)
        return last
