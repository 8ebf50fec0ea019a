"""TxnOffsetCommit in the pure group coordinator (KIP-98, KIP-447): offsets written as one
transactional batch stay pending per producer until the marker, COMMIT materializes them unless a
later commit of the key superseded them, ABORT drops them, OffsetFetch with require_stable answers
UNSTABLE_OFFSET_COMMIT meanwhile, a reload resolves pending offsets with the markers in the log, and
v3+ fence a zombie of an old generation."""

from broker.coordinator.group.core import partition_for
from broker.coordinator.group.shard import TxnMarker, TxnRecord
from broker.wire.apis.offset_fetch import OffsetFetchRequest
from broker.wire.apis.txn_offset_commit import TxnOffsetCommitRequest
from group_helpers import FETCH, GROUP, Harness, commit_codes, fetched
from test_group_membership import form_group

TXN_COMMIT = 28
UNSTABLE_OFFSET_COMMIT = 88
PID, OTHER_PID = 1000, 2000


class TxnHarness(Harness):
    """Logs a transactional Append's records as ``(None, TxnRecord)`` and markers as
    ``(None, TxnMarker)``, the way the shell hands them to ``load_partition``."""

    def flush(self, error_code=None):
        while self.pending:
            append = self.pending.pop(0)
            code = self.fail_code if error_code is None else error_code
            if code == 0:
                if append.transactional:
                    assert append.producer_id >= 0
                    self.appended_txn = (append.producer_id, append.producer_epoch)
                    self.log[append.partition].extend(
                        (None, TxnRecord(append.producer_id, k, v)) for k, v in append.records)
                else:
                    self.log[append.partition].extend(append.records)
            self.run(self.core.write_done(append.write_id, code, self.now))

    def txn_commit(self, offsets, producer_id=PID, version=3, generation=-1, member_id="",
                   instance_id=None, group_id=GROUP):
        tcls = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
        pcls = TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
        by_topic: dict = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append(pcls(partition_index=p, committed_offset=o,
                                                   committed_leader_epoch=2, committed_metadata="m"))
        req = TxnOffsetCommitRequest(transactional_id="tx", group_id=group_id, producer_id=producer_id,
                                     producer_epoch=4, generation_id=generation, member_id=member_id,
                                     group_instance_id=instance_id,
                                     topics=[tcls(name=t, partitions=ps) for t, ps in by_topic.items()])
        return commit_codes(self.answer(self.request(TXN_COMMIT, version, req)))

    def marker(self, producer_id, committed):
        partition = partition_for(GROUP, self.settings.num_partitions)
        self.log[partition].append((None, TxnMarker(producer_id, committed)))
        self.run(self.core.transaction_completed(partition, producer_id, 4, committed, self.now))

    def stable(self, partitions, version=8):
        """{(topic, partition): (offset, error)} from OffsetFetch with require_stable."""
        if version >= 8:
            cls = OffsetFetchRequest.OffsetFetchRequestGroup
            tcls = OffsetFetchRequest.OffsetFetchRequestTopics
            req = OffsetFetchRequest(require_stable=True, groups=[cls(group_id=GROUP, topics=None if partitions is None else [
                tcls(name=t, partition_indexes=[p]) for t, p in partitions])])
            topics = self.answer(self.request(FETCH, version, req)).groups[0].topics
        else:
            tcls = OffsetFetchRequest.OffsetFetchRequestTopic
            req = OffsetFetchRequest(group_id=GROUP, require_stable=True, topics=[
                tcls(name=t, partition_indexes=[p]) for t, p in partitions])
            topics = self.answer(self.request(FETCH, version, req)).topics
        return {(t.name, p.partition_index): (p.committed_offset, p.error_code)
                for t in topics for p in t.partitions}


def visible(h, partitions):
    topics: dict = {}
    for t, p in partitions:
        topics.setdefault(t, []).append(p)
    return fetched(h.answer(h.fetch(topics)))


def test_pending_until_commit_marker_then_visible():
    h = TxnHarness()
    assert h.txn_commit({("t", 0): 5, ("t", 1): 6}) == {("t", 0): 0, ("t", 1): 0}
    assert h.appended_txn == (PID, 4)  # one transactional batch of the request's producer
    assert visible(h, [("t", 0)]) == {("t", 0): -1}
    assert h.stable([("t", 0), ("t", 2)]) == {("t", 0): (-1, UNSTABLE_OFFSET_COMMIT), ("t", 2): (-1, 0)}
    assert h.stable([("t", 1)], version=7) == {("t", 1): (-1, UNSTABLE_OFFSET_COMMIT)}
    h.marker(PID, True)
    assert visible(h, [("t", 0)]) == {("t", 0): 5}
    assert h.stable([("t", 0), ("t", 1)]) == {("t", 0): (5, 0), ("t", 1): (6, 0)}


def test_abort_marker_drops_pending_offsets():
    h = TxnHarness()
    h.commit({("t", 0): 3})
    h.txn_commit({("t", 0): 5})
    h.marker(PID, False)
    assert h.stable([("t", 0)]) == {("t", 0): (3, 0)}
    assert h.core.statistics()["pending_txn_offsets"] == 0


def test_require_stable_fetch_all_marks_committed_partitions_with_pending():
    h = TxnHarness()
    h.commit({("t", 0): 3, ("t", 1): 4})
    h.txn_commit({("t", 0): 5})
    assert h.stable(None) == {("t", 0): (-1, UNSTABLE_OFFSET_COMMIT), ("t", 1): (4, 0)}


def test_a_later_plain_commit_wins_over_the_transactional_one():
    """Kafka keeps the commit whose record is later in the log."""
    h = TxnHarness()
    h.txn_commit({("t", 0): 5, ("t", 1): 6})
    h.commit({("t", 0): 9})
    h.marker(PID, True)
    assert visible(h, [("t", 0), ("t", 1)]) == {("t", 0): 9, ("t", 1): 6}


def test_two_transactions_the_later_record_wins_whatever_the_marker_order():
    h = TxnHarness()
    h.txn_commit({("t", 0): 5}, producer_id=PID)
    h.txn_commit({("t", 0): 7}, producer_id=OTHER_PID)
    h.marker(OTHER_PID, True)
    h.marker(PID, True)
    assert visible(h, [("t", 0)]) == {("t", 0): 7}


def test_reload_resolves_pending_offsets_with_the_markers_in_the_log():
    h = TxnHarness()
    h.commit({("t", 0): 1, ("t", 1): 1, ("t", 2): 1})
    h.txn_commit({("t", 0): 5}, producer_id=PID)
    h.txn_commit({("t", 1): 6}, producer_id=OTHER_PID)
    h.marker(PID, True)
    h.marker(OTHER_PID, False)
    h.txn_commit({("t", 2): 7}, producer_id=3000)  # still open at the end of the log
    h.reload()
    assert h.stable([("t", 0), ("t", 1), ("t", 2)]) == {
        ("t", 0): (5, 0), ("t", 1): (1, 0), ("t", 2): (-1, UNSTABLE_OFFSET_COMMIT)}
    h.marker(3000, True)  # the open transaction's marker comes after the load
    assert visible(h, [("t", 2)]) == {("t", 2): 7}


def test_reload_of_only_transactional_offsets_makes_the_group():
    h = TxnHarness()
    h.txn_commit({("t", 0): 5})
    h.reload()
    assert h.group() is not None
    h.marker(PID, True)
    assert visible(h, [("t", 0)]) == {("t", 0): 5}


def test_kip447_fences_a_zombie_of_an_old_generation():
    h = TxnHarness()
    a, b = form_group(h, 2)
    generation = h.group().generation_id
    assert h.txn_commit({("t", 0): 5}, generation=generation, member_id=a) == {("t", 0): 0}
    assert h.txn_commit({("t", 0): 6}, generation=generation - 1, member_id=a) == {("t", 0): 22}
    assert h.txn_commit({("t", 0): 6}, generation=generation, member_id="gone") == {("t", 0): 25}
    # v0-2 carry no member: accepted in a group with members (unlike a plain simple commit)
    assert h.txn_commit({("t", 0): 6}, version=2) == {("t", 0): 0}


def test_unknown_group_with_a_generation_is_illegal_generation():
    h = TxnHarness()
    assert h.txn_commit({("t", 0): 5}, generation=3, member_id="m", group_id="nobody") == {("t", 0): 22}


def test_failed_append_answers_the_mapped_error_and_leaves_nothing_pending():
    h = TxnHarness()
    h.fail_code = 19  # NOT_ENOUGH_REPLICAS -> COORDINATOR_NOT_AVAILABLE
    assert h.txn_commit({("t", 0): 5}) == {("t", 0): 15}
    h.fail_code = 0
    assert h.stable([("t", 0)]) == {("t", 0): (-1, 0)}


def test_retention_keeps_offsets_with_pending_transactional_offsets():
    h = TxnHarness()
    h.commit({("t", 0): 3})
    h.txn_commit({("t", 0): 5})
    h.advance(h.settings.offsets_retention_ms + h.settings.offsets_retention_check_interval_ms)
    h.marker(PID, True)
    assert visible(h, [("t", 0)]) == {("t", 0): 5}


def test_two_transactions_the_later_record_wins_when_its_marker_comes_last():
    h = TxnHarness()
    h.txn_commit({("t", 0): 5}, producer_id=PID)
    h.txn_commit({("t", 0): 7}, producer_id=OTHER_PID)
    h.marker(PID, True)
    assert visible(h, [("t", 0)]) == {("t", 0): 5}
    assert h.stable([("t", 0)]) == {("t", 0): (-1, UNSTABLE_OFFSET_COMMIT)}  # OTHER_PID's is pending
    h.marker(OTHER_PID, True)
    assert visible(h, [("t", 0)]) == {("t", 0): 7}


def test_offset_delete_tombstone_removes_pending_offsets_of_its_key():
    h = TxnHarness()
    h.commit({("t", 0): 3})
    h.txn_commit({("t", 0): 5})
    from broker.wire.apis.offset_delete import OffsetDeleteRequest
    from group_helpers import OFFSET_DELETE
    tcls = OffsetDeleteRequest.OffsetDeleteRequestTopic
    pcls = OffsetDeleteRequest.OffsetDeleteRequestPartition
    h.request(OFFSET_DELETE, 0, OffsetDeleteRequest(group_id=GROUP, topics=[
        tcls(name="t", partitions=[pcls(partition_index=0)])]))
    assert h.stable([("t", 0)]) == {("t", 0): (-1, 0)}
    h.marker(PID, True)
    assert visible(h, [("t", 0)]) == {("t", 0): -1}


def test_a_partition_with_transactional_batches_is_not_scanned_column_wise():
    """bulk_load replays plain batches only: the shell sends such a partition record by record."""
    from broker.records import ControlRecord, ControlType, Record, encode_batch, encode_control_batch
    from broker.server.group_coordinator import _has_transactional_batches, _scan_chunks
    plain = encode_batch([Record(0, 1, b"k", b"v")])
    txn = encode_batch([Record(1, 1, b"k", b"v")], base_offset=1, producer_id=3, producer_epoch=0, transactional=True)
    marker = encode_control_batch(ControlRecord(ControlType.COMMIT, 0), offset=2, timestamp=1, producer_id=3,
                                  producer_epoch=0)
    assert not _has_transactional_batches(plain + plain, 2 * len(plain))
    assert _has_transactional_batches(plain + txn, len(plain) + len(txn))
    assert _has_transactional_batches(plain + marker, len(plain) + len(marker))
    assert _scan_chunks([(0, plain + txn)], 0) is None


def test_a_marker_replicated_while_the_partition_loads_is_applied_after_the_load():
    h = TxnHarness()
    h.txn_commit({("t", 0): 5})
    partition = partition_for(GROUP, h.settings.num_partitions)
    records = list(h.log[partition])  # the load reads up to here: the marker comes after
    h.core.begin_load(partition)
    h.run(h.core.transaction_completed(partition, PID, 4, True, h.now))
    h.run(h.core.load_partition(partition, records, h.now))
    assert visible(h, [("t", 0)]) == {("t", 0): 5}


def test_random_mixes_match_kafkas_rule_by_record_position_live_and_after_reloads():
    """A model of Kafka's replay (OffsetMetadataManager): each record has its log position; a
    COMMIT materializes a pending offset only if it is later in the log than the cached one's.
    Random plain commits, transactional commits of three producers, markers and reloads: the
    visible offsets and the unstable partitions always match the model."""
    import random
    for seed in range(30):
        rng = random.Random(seed)
        h = TxnHarness()
        position = 0
        model: dict = {}  # partition -> (offset, position)
        pending: dict = {}  # producer -> {partition: (offset, position)}
        for step in range(60):
            action = rng.random()
            partition, offset = rng.randrange(3), rng.randrange(1_000)
            producer = rng.choice((PID, OTHER_PID, 3000))
            position += 1
            if action < 0.3:
                h.commit({("t", partition): offset})
                model[partition] = (offset, position)
            elif action < 0.65:
                h.txn_commit({("t", partition): offset}, producer_id=producer)
                pending.setdefault(producer, {})[partition] = (offset, position)
            elif action < 0.9:
                committed = rng.random() < 0.6
                h.marker(producer, committed)
                for p, (o, pos) in pending.pop(producer, {}).items():
                    if committed and (p not in model or model[p][1] < pos):
                        model[p] = (o, pos)
            else:
                h.reload()
            expected = {("t", p): (model[p][0] if p in model else -1) for p in range(3)}
            assert visible(h, [("t", p) for p in range(3)]) == expected, (seed, step)
            unstable = {p for entries in pending.values() for p in entries}
            assert {p for (_, p), (_, e) in h.stable([("t", p) for p in range(3)]).items()
                    if e == UNSTABLE_OFFSET_COMMIT} == unstable, (seed, step)


def test_deleting_the_group_drops_its_pending_offsets_with_tombstones():
    """Kafka's deleteAllOffsets: a tombstone for every pending-only key too, so neither the
    marker nor a reload brings the offset back."""
    from broker.wire.apis.delete_groups import DeleteGroupsRequest
    from group_helpers import DELETE
    h = TxnHarness()
    h.commit({("t", 0): 3})
    h.txn_commit({("t", 0): 5, ("t", 1): 6})
    assert h.answer(h.request(DELETE, 2, DeleteGroupsRequest(groups_names=[GROUP]))).results[0].error_code == 0
    assert h.stable([("t", 0), ("t", 1)]) == {("t", 0): (-1, 0), ("t", 1): (-1, 0)}
    h.marker(PID, True)
    assert visible(h, [("t", 0), ("t", 1)]) == {("t", 0): -1, ("t", 1): -1}
    h.reload()
    assert visible(h, [("t", 0), ("t", 1)]) == {("t", 0): -1, ("t", 1): -1}


def test_offset_delete_of_a_pending_only_key_writes_its_tombstone():
    from broker.wire.apis.offset_delete import OffsetDeleteRequest
    from group_helpers import OFFSET_DELETE
    h = TxnHarness()
    h.txn_commit({("t", 0): 5})
    tcls = OffsetDeleteRequest.OffsetDeleteRequestTopic
    pcls = OffsetDeleteRequest.OffsetDeleteRequestPartition
    h.request(OFFSET_DELETE, 0, OffsetDeleteRequest(group_id=GROUP, topics=[
        tcls(name="t", partitions=[pcls(partition_index=0)])]))
    h.marker(PID, True)
    h.reload()
    assert visible(h, [("t", 0)]) == {("t", 0): -1}
