"""``pylog transactions list|describe|describe-producers|find-hanging|abort``: the transactional
state of producers, with the arguments, columns and behaviour of Kafka's ``kafka-transactions``
(through ``broker.client.txn_admin``)::

    pylog transactions --bootstrap-server HOST:PORT list [--duration-filter MS]
    pylog transactions --bootstrap-server HOST:PORT describe --transactional-id ID
    pylog transactions --bootstrap-server HOST:PORT describe-producers --topic T --partition P [--broker-id B]
    pylog transactions --bootstrap-server HOST:PORT find-hanging (--broker-id B | --topic T [--partition P])
                                                        [--max-transaction-timeout MINUTES]
    pylog transactions --bootstrap-server HOST:PORT abort --topic T --partition P
                                                        (--start-offset O | --producer-id I --producer-epoch E
                                                         --coordinator-epoch C)

Output is Kafka's table: a header and rows, every value padded to its column's width and
followed by a tab. A transaction is *hanging* on a partition when the partition holds it open
(DescribeProducers: a current transaction start offset) for longer than
``--max-transaction-timeout`` (15 minutes by default) since the producer's last write, and its
coordinator does not list that partition in the transaction (or does not know the producer id at
all): no marker will ever come, and the partition's LSO is stuck. ``abort`` writes an ABORT
marker to that partition (WriteTxnMarkers to its leader); with ``--start-offset`` it finds the
producer whose open transaction starts there (coordinator epoch: the one the partition saw, 0
when it saw none, as Kafka). Errors print one line to stderr and exit 1, as Kafka's tool.
"""

from __future__ import annotations

import argparse
import time
from typing import TextIO

from broker.client import AdminClient, KafkaError
from broker.client.txn_admin import TxnAdmin
from broker.wire import ErrorCode

__all__ = ["add_transactions_parser", "run_transactions", "pretty_table"]

_MS_PER_MINUTE = 60_000


def add_transactions_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("transactions", help="list, describe and abort transactions (kafka-transactions)")
    parser.add_argument("--bootstrap-server", required=True, metavar="host:port")
    actions = parser.add_subparsers(dest="transactions_command", required=True, metavar="COMMAND")
    listing = actions.add_parser("list", help="list transactions")
    listing.add_argument("--duration-filter", type=int, default=None,
                         help="only transactions running longer than this many ms (< 0: all)")
    listing.add_argument("--transactional-id-pattern", default=None,
                         help="only transactional ids matching this regular expression (the broker matches)")
    describe = actions.add_parser("describe", help="describe the state of an active transactional-id")
    describe.add_argument("--transactional-id", required=True)
    producers = actions.add_parser("describe-producers",
                                   help="describe the states of active producers for a topic partition")
    producers.add_argument("--broker-id", type=int, default=None)
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    abort = actions.add_parser("abort", help="abort a hanging transaction (requires administrative privileges)")
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--start-offset", type=int, default=None)
    abort.add_argument("--producer-id", type=int, default=None)
    abort.add_argument("--producer-epoch", type=int, default=None)
    abort.add_argument("--coordinator-epoch", type=int, default=None)
    hanging = actions.add_parser("find-hanging", help="find hanging transactions")
    hanging.add_argument("--broker-id", type=int, default=None)
    hanging.add_argument("--max-transaction-timeout", type=int, default=15, help="minutes (default 15)")
    hanging.add_argument("--topic", default=None)
    hanging.add_argument("--partition", type=int, default=None)
    return parser


class _Failed(Exception):
    """One line for stderr; the tool exits 1."""


def run_transactions(args, out: TextIO, err: TextIO) -> int:
    command = args.transactions_command
    try:
        with AdminClient(args.bootstrap_server) as admin:
            txn = TxnAdmin(admin.cluster)
            if command == "list":
                _list(txn, args, out)
            elif command == "describe":
                _describe(txn, args, out)
            elif command == "describe-producers":
                _describe_producers(txn, args, out)
            elif command == "abort":
                _abort(txn, args)
            else:
                _find_hanging(txn, admin, args, out)
    except _Failed as exc:
        print(str(exc), file=err)
        return 1
    except KafkaError as exc:
        print(f"pylog transactions {command}: {exc}", file=err)
        return 1
    return 0


def pretty_table(headers: list[str], rows: list[list[str]]) -> str:
    """Kafka's ``ToolsUtils.prettyPrintTable``: every value left-justified to its column's width,
    each followed by a tab."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return "".join("".join(v.ljust(w) + "\t" for v, w in zip(line, widths)) + "\n" for line in [headers, *rows])


def _failed(what: str, exc: KafkaError) -> _Failed:
    return _Failed(f"{what}: {exc.message.rstrip('.')}. Enable debug logging for additional detail.")


def _list(txn: TxnAdmin, args, out: TextIO) -> None:
    duration = -1 if args.duration_filter is None else args.duration_filter
    try:
        by_broker = txn.list_transactions(duration_filter_ms=duration,
                                          transactional_id_pattern=args.transactional_id_pattern)
    except KafkaError as exc:
        raise _failed("Failed to list transactions", exc) from None
    rows = [[t.transactional_id, str(node), str(t.producer_id), t.state]
            for node, listings in by_broker.items() for t in listings]
    out.write(pretty_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows))


def _describe(txn: TxnAdmin, args, out: TextIO) -> None:
    tid = args.transactional_id
    try:
        d = txn.describe_transaction(tid)
    except KafkaError as exc:
        raise _failed(f"Failed to describe transaction state of transactional-id `{tid}`", exc) from None
    start = "None" if d.transaction_start_time_ms is None else str(d.transaction_start_time_ms)
    duration = "None" if d.transaction_start_time_ms is None else str(_now_ms() - d.transaction_start_time_ms)
    row = [str(d.coordinator_id), tid, str(d.producer_id), str(d.producer_epoch), d.state,
           str(d.transaction_timeout_ms), start, duration, ",".join(f"{t}-{p}" for t, p in d.partitions)]
    out.write(pretty_table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                            "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                            "TopicPartitions"], [row]))


def _describe_producers(txn: TxnAdmin, args, out: TextIO) -> None:
    tp = (args.topic, args.partition)
    try:
        states = txn.describe_producers([tp], broker_id=args.broker_id)[tp]
    except KafkaError as exc:
        where = "leader" if args.broker_id is None else f"broker {args.broker_id}"
        raise _failed(f"Failed to describe producers for partition {tp[0]}-{tp[1]} on {where}", exc) from None
    rows = [[str(s.producer_id), str(s.producer_epoch), str(-1 if s.coordinator_epoch is None else s.coordinator_epoch),
             str(s.last_sequence), str(s.last_timestamp),
             "None" if s.current_txn_start_offset is None else str(s.current_txn_start_offset)] for s in states]
    out.write(pretty_table(["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                            "LastTimestamp", "CurrentTransactionStartOffset"], rows))


def _abort(txn: TxnAdmin, args) -> None:
    tp = (args.topic, args.partition)
    if args.start_offset is None:
        missing = [name for name in ("producer_id", "producer_epoch", "coordinator_epoch")
                   if getattr(args, name) is None]
        if missing:
            raise _Failed(f"Missing required argument --{missing[0].replace('_', '-')}")
        pid, epoch, coordinator_epoch = args.producer_id, args.producer_epoch, max(args.coordinator_epoch, 0)
    else:
        try:
            states = txn.describe_producers([tp])[tp]
        except KafkaError as exc:
            raise _failed(f"Failed to validate producer state for partition {tp[0]}-{tp[1]}", exc) from None
        found = [s for s in states if s.current_txn_start_offset == args.start_offset]
        if not found:
            raise _Failed(f"Could not find any open transactions starting at offset {args.start_offset} "
                          f"on partition {tp[0]}-{tp[1]}")
        pid, epoch = found[0].producer_id, found[0].producer_epoch
        coordinator_epoch = found[0].coordinator_epoch or 0  # none seen yet: 0, below any real one
    try:
        txn.abort_transaction(tp[0], tp[1], pid, epoch, coordinator_epoch)
    except KafkaError as exc:
        raise _failed(f"Failed to abort transaction (topicPartition={tp[0]}-{tp[1]}, producerId={pid}, "
                      f"producerEpoch={epoch}, coordinatorEpoch={coordinator_epoch})", exc) from None


def _find_hanging(txn: TxnAdmin, admin: AdminClient, args, out: TextIO) -> None:
    if args.topic is None and args.broker_id is None:
        raise _Failed("The `find-hanging` command requires either --topic or --broker-id to limit the scope "
                      "of the search")
    if args.partition is not None and args.topic is None:
        raise _Failed("The --partition argument requires --topic to be provided")
    max_timeout_ms = args.max_transaction_timeout * _MS_PER_MINUTE
    if args.topic is not None and args.partition is not None:
        tps = [(args.topic, args.partition)]
    else:
        topics = [args.topic] if args.topic is not None else admin.list_topics(include_internal=True)
        tps = [(d.name, p.partition) for d in admin.describe_topics(topics) for p in d.partitions
               if args.broker_id is None or args.broker_id in p.replicas]
    try:
        by_tp = txn.describe_producers(tps, broker_id=args.broker_id)
    except KafkaError as exc:
        raise _failed(f"Failed to describe producers for {len(tps)} partitions on broker {args.broker_id}",
                      exc) from None
    now = _now_ms()
    candidates = [(tp, s) for tp, states in by_tp.items() for s in states
                  if s.current_txn_start_offset is not None and now - s.last_timestamp > max_timeout_ms]
    hanging = _hanging(txn, candidates) if candidates else []
    rows = [[tp[0], str(tp[1]), str(s.producer_id), str(s.producer_epoch),
             str(-1 if s.coordinator_epoch is None else s.coordinator_epoch), str(s.current_txn_start_offset),
             str(s.last_timestamp), str((now - s.last_timestamp) // _MS_PER_MINUTE)] for tp, s in hanging]
    out.write(pretty_table(["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                            "LastTimestamp", "Duration(min)"], rows))


def _hanging(txn: TxnAdmin, candidates):
    """The candidates whose coordinator will never write their marker."""
    producer_ids = sorted({s.producer_id for _, s in candidates})
    ids = {t.producer_id: t.transactional_id for listings in txn.list_transactions(producer_ids=producer_ids).values()
           for t in listings if t.producer_id in producer_ids}
    descriptions = {}
    for tid in set(ids.values()):
        try:
            descriptions[tid] = txn.describe_transaction(tid)
        except KafkaError as exc:
            if exc.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:  # the coordinator forgot it
                raise
            descriptions[tid] = None
    out = []
    for tp, state in candidates:
        description = descriptions.get(ids.get(state.producer_id))
        if description is None or tp not in description.partitions:
            out.append((tp, state))
    return out


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
