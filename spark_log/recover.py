"""Recovery of exactly-once batch jobs (``df.write`` with ``deliveryGuarantee=exactly-once``) whose
driver died in the middle of its commit.

Spark never restarts a batch job, so the roll-forward a streaming query does on restart
(``Committer.recover``) has no natural place. A batch job's driver writes its commit intent to
the commit log like a stream's (marked ``"job": "batch"``) and a tombstone once every EndTxn is
answered. An intent still there with open transactions means the driver decided to commit and
died before finishing: ``recover_batch_jobs`` completes those transactions (EndTxn(commit) with
the stored producer id/epoch: the decision was taken, so no reader may see only part of it), then
writes the tombstone. It runs on the driver whenever an exactly-once batch writer is built (the
next batch job to the same cluster), and by hand::

    python -m spark_log.recover --bootstrap-servers host:9092 [--commit-log-topic T] [--abort-uncommitted]
        [--command-config client.properties]

``--command-config`` names a properties file with the job's ``security.protocol``, ``ssl.*``,
``sasl.*`` (the sink's ``kafka.``-prefixed options without the prefix; the file ``pylog cluster up
--security`` writes works as is), as Kafka's tools take it.

A batch job that died *before* its intent left open transactions that no one will commit; they
hold the LSO until the coordinator aborts them at ``transactionTimeoutMs``. They cannot be
aborted automatically: from outside, an open transaction of a dead job looks like one of a job
whose tasks are still writing. ``--abort-uncommitted`` fences and aborts them at once: run it
only when no exactly-once batch job with that prefix is writing.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from broker.client import PreparedTransaction
from broker.client.properties import parse_properties
from spark_log.transactions import (
    DEFAULT_COMMIT_LOG_TOPIC,
    ONGOING,
    Committer,
    TxnSettings,
    _clients_for,
    _drop_clients,
    read_commit_log,
)

__all__ = ["BATCH_PREFIX_ROOT", "recover_batch_jobs", "main"]

log = logging.getLogger(__name__)

BATCH_PREFIX_ROOT = "pylog-spark-write-"  # spark_log.transactions.batch_prefix: one prefix per job


def _open_ids(committer: Committer) -> set[str]:
    clients = _clients_for(committer.settings)
    listed = clients.admin.list_transactions(states=[ONGOING], refresh_brokers=True)
    return {t.transactional_id for ts in listed.values() for t in ts if t.state == ONGOING}


def recover_batch_jobs(settings: TxnSettings, *, abort_uncommitted: bool = False,
                       uncommitted_prefix: str = BATCH_PREFIX_ROOT) -> dict[str, int]:
    """Roll forward every batch job's unfinished intent; with ``abort_uncommitted``, fence and
    abort the open transactions of ids starting with ``uncommitted_prefix`` that no intent lists.
    ``settings.prefix`` is not used (every batch job's key is scanned). Cheap in the common case:
    ListTransactions on every broker, and the commit log is read only when something is open."""
    committer = Committer(settings)
    try:
        open_ids = _open_ids(committer)
        if not open_ids:
            return {"committed": 0, "aborted": 0, "jobs": 0}
        clients = _clients_for(settings)
        committed = jobs = 0
        listed: set[str] = set()
        for key, record in read_commit_log(settings).items():
            if not record or record.get("job") != "batch" or record.get("state") != "intent":
                continue
            jobs += 1
            for d in record.get("transactions", ()):
                listed.add(d["transactional_id"])
                if d["transactional_id"] in open_ids:
                    committer._end(clients, PreparedTransaction.from_dict(d), commit=True)
                    committed += 1
            committer._log(clients, None, key=key)  # the job is finished now
        aborted = 0
        if abort_uncommitted:
            aborted = committer._fence(clients, sorted(t for t in open_ids - listed
                                                       if t.startswith(uncommitted_prefix)))
        if committed or aborted:
            log.warning("exactly-once batch recovery: %d transactions of %d jobs rolled forward, %d aborted",
                        committed, jobs, aborted)
        return {"committed": committed, "aborted": aborted, "jobs": jobs}
    except Exception:
        _drop_clients(settings)
        raise


def _command_security(path: str | None):
    """The ``ClientSecurity`` of a ``--command-config`` file (None: PLAINTEXT)."""
    if path is None:
        return None
    from broker.client.security import client_security
    return client_security(parse_properties(Path(path).read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_log.recover", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--commit-log-topic", default=DEFAULT_COMMIT_LOG_TOPIC)
    parser.add_argument("--abort-uncommitted", action="store_true",
                        help="also abort open transactions no intent lists (no batch job may be writing)")
    parser.add_argument("--prefix", default=BATCH_PREFIX_ROOT,
                        help="with --abort-uncommitted: only ids starting with this (default: %(default)s)")
    parser.add_argument("--transaction-timeout-ms", type=int, default=60_000)
    parser.add_argument("--command-config", default=None, metavar="FILE",
                        help="client properties (security.protocol, ssl.*, sasl.*) for every connection")
    args = parser.parse_args(argv)
    settings = TxnSettings("pylog-spark-recover", args.transaction_timeout_ms, args.commit_log_topic,
                           args.bootstrap_servers, security=_command_security(args.command_config))
    result = recover_batch_jobs(settings, abort_uncommitted=args.abort_uncommitted, uncommitted_prefix=args.prefix)
    print(f"batch jobs rolled forward: {result['jobs']}, transactions committed: {result['committed']}, "
          f"aborted: {result['aborted']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
