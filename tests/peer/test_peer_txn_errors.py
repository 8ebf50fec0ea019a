"""The transaction coordinator's answers on the raw wire, Apache Kafka and pylog: every
out-of-order call (EndTxn without a transaction, a wrong producer id, a fenced epoch, a zombie
after a new InitProducerId, a produce to a partition not in the transaction, the opposite
decision after EndTxn) gets the error Apache Kafka 4.1 answers, and changes nothing: the
transaction's state (DescribeTransactions) and the partition's log stay as they were.

Each test has its own transactional id and topic; a one-broker peer coordinates everything.
The expected outcomes are what Kafka 4.1 answered when this tier was written.
"""

from __future__ import annotations

import pytest
from group_wire import GroupWire
from peer_support import unique_topic
from txn_clients import (
    Batch,
    partition_state,
    settled,
    txn_peer,  # noqa: F401  (fixture)
    unique_txn_id,
    wait_for_leaders,
    wait_until,
)
from txn_wire import TxnWire

from broker.wire import ApiKey, ErrorCode

TRANSACTION_MAX_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms, both sides' default


@pytest.fixture
def topic(txn_peer) -> str:
    return wait_for_leaders(txn_peer, txn_peer.create_topic(unique_topic("txn-wire"), partitions=2), 2)


@pytest.fixture
def wire(txn_peer):
    with TxnWire(txn_peer) as connection:
        yield connection


def summary(wire: TxnWire) -> tuple:
    """What DescribeTransactions says of the id, ids and times left out: (error, state,
    producer epoch, {topic: partitions})."""
    [state] = wire.describe()
    return (state.error_code, state.transaction_state, state.producer_epoch,
            {t.topic: sorted(t.partitions) for t in state.topics})


def log_of(peer, topic: str, partition: int = 0) -> list[Batch]:
    return partition_state(peer, topic, partition).batches


# ------------------------------------------------------------------------ out-of-order calls


def test_end_txn_without_a_transaction(wire):
    """EndTxn of an id no InitProducerId has made (producer id -1): INVALID_PRODUCER_ID_MAPPING;
    after InitProducerId, with no partition added: INVALID_TXN_STATE for commit and abort, and
    the id stays Empty at epoch 0."""
    assert wire.end(True, retry=False) == "INVALID_PRODUCER_ID_MAPPING"
    assert wire.init() == "NONE" and wire.epoch == 0
    assert wire.end(True, retry=False) == "INVALID_TXN_STATE"
    assert wire.end(False, retry=False) == "INVALID_TXN_STATE"
    assert summary(wire) == (0, "Empty", 0, {})


def test_add_partitions_with_a_wrong_producer_id(wire, topic):
    assert wire.init() == "NONE"
    answer = wire.add_partitions([(topic, 0), (topic, 1)], producer_id=wire.producer_id + 1_000_000, retry=False)
    assert answer == {(topic, 0): "INVALID_PRODUCER_ID_MAPPING", (topic, 1): "INVALID_PRODUCER_ID_MAPPING"}
    assert summary(wire) == (0, "Empty", 0, {})


@pytest.mark.parametrize("call,version,expected", [
    ("add", 3, "PRODUCER_FENCED"), ("add", 1, "INVALID_PRODUCER_EPOCH"),
    ("end", 4, "PRODUCER_FENCED"), ("end", 1, "INVALID_PRODUCER_EPOCH"),
    ("init", 4, "PRODUCER_FENCED"), ("init", 3, "INVALID_PRODUCER_EPOCH"),
])
def test_a_zombie_is_fenced_by_version(wire, topic, call, version, expected):
    """After a second InitProducerId (epoch 0 -> 1) the first incarnation's epoch is fenced:
    PRODUCER_FENCED from the versions that know it (AddPartitionsToTxn v2+, EndTxn v2+,
    InitProducerId v4+), INVALID_PRODUCER_EPOCH below (KIP-588's down-conversion). A newer epoch
    than the coordinator's is fenced alike. The new incarnation's open transaction is untouched
    (the zombie's InitProducerId is sent with none open: see the next test for an open one)."""
    assert wire.init() == "NONE"
    old_id, old_epoch = wire.producer_id, wire.epoch
    assert wire.init() == "NONE" and (wire.producer_id, wire.epoch) == (old_id, 1)
    if call != "init":
        assert wire.add_partitions([(topic, 1)]) == {(topic, 1): "NONE"}
    for epoch in (old_epoch, wire.epoch + 1):
        if call == "add":
            assert wire.add_partitions([(topic, 0)], version, epoch=epoch, retry=False) == {(topic, 0): expected}
        elif call == "end":
            assert wire.end(True, version, epoch=epoch, retry=False) == expected
        else:  # InitProducerId v3+ naming the id and an epoch (KIP-360)
            assert wire.init(version=version, producer_id=old_id, epoch=epoch, retry=False) == expected
    assert summary(wire) == ((0, "Empty", 1, {}) if call == "init" else (0, "Ongoing", 1, {topic: [1]}))


@pytest.mark.parametrize("version,expected", [(4, "PRODUCER_FENCED"), (3, "INVALID_PRODUCER_EPOCH")])
def test_a_zombie_init_naming_the_producer_id_aborts_the_open_transaction(wire, topic, version, expected):
    """Kafka's InitProducerId accepts any epoch of the current producer id until it bumps the
    epoch (TransactionCoordinator.prepareInitProducerIdTransit: "the epoch will be checked when
    we try to increment it"): a zombie's InitProducerId naming (its producer id, its old epoch)
    while the new incarnation's transaction is open fences that transaction (PrepareAbort, epoch
    1 -> 2) and answers CONCURRENT_TRANSACTIONS; sent again once the abort is complete, it is
    fenced. The new incarnation's EndTxn then finds its epoch fenced too."""
    assert wire.init() == "NONE"
    old_id, old_epoch = wire.producer_id, wire.epoch
    assert wire.init() == "NONE" and wire.epoch == 1
    assert wire.add_partitions([(topic, 0)]) == {(topic, 0): "NONE"}
    assert wire.produce(topic, 0, [b"live-0", b"live-1"]) == ("NONE", 0)
    assert wire.init(version=version, producer_id=old_id, epoch=old_epoch, retry=False) == "CONCURRENT_TRANSACTIONS"
    wire.wait_for_state("CompleteAbort")
    assert wire.init(version=version, producer_id=old_id, epoch=old_epoch, retry=False) == expected
    assert summary(wire) == (0, "CompleteAbort", 2, {})
    assert wire.end(True, retry=False) == "PRODUCER_FENCED"
    state = partition_state(wire.peer, topic)
    assert state.batches == [Batch(0, 1, True, None), Batch(2, 2, True, "ABORT")]
    assert state.aborted_first_offsets == [0]


def test_a_zombie_produce_is_refused_and_appends_nothing(wire, topic):
    """The fenced incarnation's transactional produce: INVALID_PRODUCER_EPOCH, nothing appended;
    the new incarnation's produce to the same partition goes on at offset 0. (pylog answered
    PRODUCER_FENCED, the coordinator's error for the leader's verification, until b8ff66a.)"""
    assert wire.init() == "NONE"
    old_id, old_epoch = wire.producer_id, wire.epoch
    assert wire.init() == "NONE"
    assert wire.add_partitions([(topic, 0)]) == {(topic, 0): "NONE"}
    assert wire.produce(topic, 0, [b"zombie"], producer_id=old_id, epoch=old_epoch) == ("INVALID_PRODUCER_EPOCH", -1)
    assert log_of(wire.peer, topic) == []
    assert wire.produce(topic, 0, [b"new-0", b"new-1"]) == ("NONE", 0)
    assert wire.end(True) == "NONE"
    assert settled(wire.peer, topic, 0, 3).batches == [Batch(0, 1, True, None), Batch(2, 2, True, "COMMIT")]


@pytest.mark.parametrize("timeout_ms", [TRANSACTION_MAX_TIMEOUT_MS + 1, 0])
def test_transaction_timeout_out_of_bounds(wire, timeout_ms):
    """transaction.timeout.ms above transaction.max.timeout.ms (15 min, both defaults) or not
    positive: INVALID_TRANSACTION_TIMEOUT, no producer id given."""
    assert wire.init(timeout_ms, retry=False) == "INVALID_TRANSACTION_TIMEOUT"
    assert wire.producer_id == -1
    [state] = wire.describe()
    assert state.error_code == 105  # TRANSACTIONAL_ID_NOT_FOUND: nothing was written for the id


@pytest.mark.parametrize("committed", [True, False])
def test_end_txn_retried_is_idempotent_and_the_opposite_decision_is_refused(wire, topic, committed):
    """EndTxn sent again with the same decision answers NONE (a producer retrying after a lost
    answer; CONCURRENT_TRANSACTIONS until the markers are written) and writes no second marker;
    the opposite decision is INVALID_TXN_STATE and changes nothing. The log: the two records,
    then one marker of the first decision."""
    decision = "COMMIT" if committed else "ABORT"
    assert wire.init() == "NONE"
    assert wire.add_partitions([(topic, 0)]) == {(topic, 0): "NONE"}
    assert wire.produce(topic, 0, [b"r-0", b"r-1"]) == ("NONE", 0)
    assert wire.end(committed) == "NONE"
    assert wire.end(committed) == "NONE"  # CONCURRENT_TRANSACTIONS while its markers are written
    wire.wait_for_state(f"Complete{decision.title()}")
    assert wire.end(committed, retry=False) == "NONE"
    assert wire.end(not committed, retry=False) == "INVALID_TXN_STATE"
    assert summary(wire) == (0, f"Complete{decision.title()}", 0, {})
    state = partition_state(wire.peer, topic)
    assert state.batches == [Batch(0, 1, True, None), Batch(2, 2, True, decision)]
    assert (state.last_stable_offset, state.aborted_first_offsets) == (3, [] if committed else [0])


def test_end_txn_v5_delayed_past_the_next_transaction_is_fenced(wire, topic):
    """The fault "an EndTxn delayed past a new transaction of the same id" with transaction
    version 2 (EndTxn v5, KIP-890 part 2): the commit bumps the epoch and answers the new one;
    the next transaction runs at it; the first EndTxn arriving again then (held by the network,
    the producer's retry having been answered) is PRODUCER_FENCED and does not commit the open
    transaction, whose own abort hides its record. At v0-4 it would have committed it."""
    def end_v5(committed: bool, epoch: int):
        def request():
            answer = wire.call(ApiKey.END_TXN, {"transactional_id": wire.transactional_id,
                                                "producer_id": wire.producer_id, "producer_epoch": epoch,
                                                "committed": committed}, 5)
            return ErrorCode(answer.error_code).name, answer
        return wire.retried(request, "EndTxn v5")

    assert wire.init() == "NONE"
    first_epoch = wire.epoch
    assert wire.add_partitions([(topic, 0)]) == {(topic, 0): "NONE"}
    assert wire.produce(topic, 0, [b"first"]) == ("NONE", 0)
    error, answer = end_v5(True, first_epoch)
    assert (error, answer.producer_id, answer.producer_epoch) == ("NONE", wire.producer_id, first_epoch + 1)
    wire.wait_for_state("CompleteCommit")
    wire.epoch, wire.sequences = answer.producer_epoch, {}  # a new epoch starts at sequence 0
    assert wire.add_partitions([(topic, 0)]) == {(topic, 0): "NONE"}
    assert wire.produce(topic, 0, [b"second"]) == ("NONE", 2)
    assert wire.end(True, version=5, epoch=first_epoch, retry=False) == "PRODUCER_FENCED"  # the delayed one
    assert summary(wire) == (0, "Ongoing", first_epoch + 1, {topic: [0]})
    assert end_v5(False, wire.epoch)[0] == "NONE"
    wire.wait_for_state("CompleteAbort")
    state = partition_state(wire.peer, topic)
    assert [b.marker for b in state.batches] == [None, "COMMIT", None, "ABORT"]
    assert (state.last_stable_offset, state.aborted_first_offsets) == (4, [2])


def test_a_produce_to_a_partition_not_added_is_refused(wire, topic):
    """KIP-890 part 1 (transaction verification, on by default since Kafka 3.6): a transactional
    produce to a partition the transaction has not added is INVALID_TXN_STATE (Produce v11+:
    TRANSACTION_ABORTABLE) and appends nothing, before any AddPartitionsToTxn and while another
    partition is in the transaction; no transaction is left hanging on it (DescribeProducers: no
    open transaction)."""
    assert wire.init() == "NONE"
    assert wire.produce(topic, 0, [b"early"]) == ("INVALID_TXN_STATE", -1)
    assert wire.add_partitions([(topic, 1)]) == {(topic, 1): "NONE"}
    assert wire.produce(topic, 0, [b"stray"]) == ("INVALID_TXN_STATE", -1)
    assert wire.produce(topic, 0, [b"stray"], version=11) == ("TRANSACTION_ABORTABLE", -1)
    assert wire.produce(topic, 1, [b"added"]) == ("NONE", 0)
    assert log_of(wire.peer, topic, 0) == []
    error, producers = wire.producers(topic, 0)
    assert (error, [p.current_txn_start_offset for p in producers]) == ("NONE", [])
    assert summary(wire) == (0, "Ongoing", 0, {topic: [1]})


def test_init_during_an_open_transaction_aborts_it(wire, topic):
    """InitProducerId while the id's transaction is open: CONCURRENT_TRANSACTIONS while the
    coordinator fences it (epoch + 1, PrepareAbort, abort markers), then NONE with epoch + 2;
    the open records are aborted on the partition."""
    assert wire.init() == "NONE"
    assert wire.add_partitions([(topic, 0)]) == {(topic, 0): "NONE"}
    assert wire.produce(topic, 0, [b"open-0", b"open-1"]) == ("NONE", 0)
    assert wire.init(retry=False) == "CONCURRENT_TRANSACTIONS"
    assert wire.init() == "NONE" and wire.epoch == 2
    state = partition_state(wire.peer, topic)
    assert state.batches == [Batch(0, 1, True, None), Batch(2, 2, True, "ABORT")]
    assert (state.last_stable_offset, state.aborted_first_offsets) == (3, [0])
    assert summary(wire) == (0, "Empty", 2, {})  # the new incarnation's: no transaction yet


# ------------------------------------------------------------------------ offsets in a transaction


def offset_fetch_stable(group_wire: GroupWire, group: str, topic: str) -> tuple[int, str]:
    """OffsetFetch v8 with require_stable (KIP-447): (offset, error) of ``topic``-0."""
    answer = group_wire.call(ApiKey.OFFSET_FETCH, {"groups": [{"group_id": group, "topics": [
        {"name": topic, "partition_indexes": [0]}]}], "require_stable": True}, version=8)
    [partition] = answer.groups[0].topics[0].partitions
    return partition.committed_offset, ErrorCode(partition.error_code).name


def test_transactional_offsets_are_visible_only_on_commit(wire, topic):
    """TxnOffsetCommit before AddOffsetsToTxn: INVALID_TXN_STATE. After it the offset is pending:
    OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT (offset -1), without it the
    group has no offset (-1, NONE); once EndTxn commits, the offset is 3 on both."""
    group = unique_txn_id("txn-group")
    with GroupWire(wire.peer) as group_wire:
        group_wire.ready(group)
        assert wire.init() == "NONE"
        assert wire.txn_offset_commit(group, {(topic, 0): 3}) == {(topic, 0): "INVALID_TXN_STATE"}
        assert wire.add_offsets(group) == "NONE"
        assert summary(wire)[1] == "Ongoing"
        assert wire.txn_offset_commit(group, {(topic, 0): 3}) == {(topic, 0): "NONE"}
        assert offset_fetch_stable(group_wire, group, topic) == (-1, "UNSTABLE_OFFSET_COMMIT")
        assert group_wire.fetch_offsets(group, [(topic, 0)]) == ("NONE", {(topic, 0): (-1, "", "NONE")})
        assert wire.end(True) == "NONE"
        # visible once the COMMIT marker is on the group's __consumer_offsets partition (after EndTxn's answer)
        wait_until(lambda: offset_fetch_stable(group_wire, group, topic) == (3, "NONE"), f"{group}'s offset committed")
        assert group_wire.fetch_offsets(group, [(topic, 0)]) == ("NONE", {(topic, 0): (3, "", "NONE")})


# ---------------------------------------------------------------------------- admin requests


def test_describe_list_and_producers_of_an_open_transaction(wire, topic):
    """DescribeTransactions of an open transaction (state, timeout, producer, its partitions);
    of an unknown id TRANSACTIONAL_ID_NOT_FOUND; ListTransactions filtered by state and producer
    id finds it, an unknown state filter is echoed back; DescribeProducers on its partition shows
    the producer with the open transaction's first offset."""
    assert wire.init(45_000) == "NONE"
    assert wire.add_partitions([(topic, 0), (topic, 1)]) == {(topic, 0): "NONE", (topic, 1): "NONE"}
    assert wire.produce(topic, 0, [b"a", b"b", b"c"]) == ("NONE", 0)
    [state] = wire.describe()
    assert (state.error_code, state.transaction_state, state.transaction_timeout_ms, state.producer_id,
            state.producer_epoch, {t.topic: sorted(t.partitions) for t in state.topics}) == (
        0, "Ongoing", 45_000, wire.producer_id, 0, {topic: [0, 1]})
    assert state.transaction_start_time_ms > 0
    [unknown] = wire.describe(["no-such-transactional-id"])
    assert (unknown.error_code, unknown.transaction_state) == (105, "")  # TRANSACTIONAL_ID_NOT_FOUND
    assert wire.list(["Ongoing"], [wire.producer_id]) == {wire.transactional_id: (wire.producer_id, "Ongoing")}
    assert wire.list(["CompleteCommit"], [wire.producer_id]) == {}
    answer = wire.call(ApiKey.LIST_TRANSACTIONS, {"state_filters": ["NoSuchState"], "producer_id_filters": [],
                                                  "duration_filter": -1})
    assert (answer.error_code, answer.unknown_state_filters, answer.transaction_states) == (0, ["NoSuchState"], [])
    error, [producer] = wire.producers(topic, 0)
    assert (error, producer.producer_id, producer.producer_epoch, producer.last_sequence,
            producer.current_txn_start_offset) == ("NONE", wire.producer_id, 0, 2, 0)
    assert wire.producers(topic, 1) == ("NONE", [])  # added, nothing produced: no producer state there
    assert wire.producers("no-such-topic", 0)[0] == "UNKNOWN_TOPIC_OR_PARTITION"
    assert wire.end(False) == "NONE"
