"""``pylog transactions``: Kafka's table layout (checked against kafka-transactions 4.1's output)
and the argument checks that need no cluster."""

from __future__ import annotations

import io

import pytest

from broker.cli import _build_parser
from broker.tools.transactions import pretty_table, run_transactions


def test_pretty_table_is_kafkas_layout():
    # kafka-transactions 4.1 `list`, as printed (values padded to the column, each followed by a tab)
    expected = ("TransactionalId    \tCoordinator\tProducerId\tTransactionState\t\n"
                "tx-smoke-txs-97938 \t1          \t0         \tCompleteCommit  \t\n"
                "tx-f-txf-69764-prep\t1          \t2         \tCompleteCommit  \t\n")
    rows = [["tx-smoke-txs-97938", "1", "0", "CompleteCommit"], ["tx-f-txf-69764-prep", "1", "2", "CompleteCommit"]]
    assert pretty_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows) == expected
    assert pretty_table(["Topic", "Partition"], []) == "Topic\tPartition\t\n"


@pytest.mark.parametrize("args,message", [
    (["find-hanging"],
     "The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search"),
    (["find-hanging", "--broker-id", "1", "--partition", "0"],
     "The --partition argument requires --topic to be provided"),
])
def test_find_hanging_scope_is_required(args, message):
    parsed = _build_parser().parse_args(["transactions", "--bootstrap-server", "127.0.0.1:1", *args])
    out, err = io.StringIO(), io.StringIO()
    assert run_transactions(parsed, out, err) == 1
    assert err.getvalue().strip() == message and out.getvalue() == ""


def test_abort_needs_a_start_offset_or_the_producer():
    parsed = _build_parser().parse_args(["transactions", "--bootstrap-server", "127.0.0.1:1", "abort", "--topic", "t",
                                         "--partition", "0", "--producer-id", "5", "--producer-epoch", "1"])
    err = io.StringIO()
    assert run_transactions(parsed, io.StringIO(), err) == 1
    assert err.getvalue().strip() == "Missing required argument --coordinator-epoch"
