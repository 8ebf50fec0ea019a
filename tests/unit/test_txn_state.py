"""The transaction states' table (Kafka's TransactionState ids and validPreviousStates) and the
prepared transitions of ``TxnMetadata``: applied only by ``complete``, refused when illegal."""

from __future__ import annotations

import pytest

from broker.coordinator.txn.state import (VALID_PREVIOUS, IllegalTransition, TxnMetadata, TxnState,
                                          is_epoch_exhausted)

S = TxnState


def test_status_bytes_are_kafkas():
    assert [(s.name, int(s)) for s in S] == [
        ("Empty", 0), ("Ongoing", 1), ("PrepareCommit", 2), ("PrepareAbort", 3), ("CompleteCommit", 4),
        ("CompleteAbort", 5), ("Dead", 6), ("PrepareEpochFence", 7)]


def test_legal_transitions():
    edges = {(a.name, b.name) for b, previous in VALID_PREVIOUS.items() for a in previous}
    assert ("Ongoing", "PrepareCommit") in edges and ("PrepareEpochFence", "PrepareAbort") in edges
    assert ("Empty", "PrepareCommit") not in edges and ("PrepareCommit", "CompleteAbort") not in edges
    assert ("Ongoing", "Empty") not in edges and ("Ongoing", "Dead") not in edges
    assert len(edges) == 16


def _meta(state=S.Empty, epoch=3):
    return TxnMetadata("t", 7, epoch, 1000, state, partitions={("a", 0)} if state is S.Ongoing else set())


def test_a_prepared_transition_changes_nothing_until_complete():
    meta = _meta()
    transit = meta.prepare_add_partitions({("a", 1)}, now_ms=50)
    assert meta.state is S.Empty and meta.partitions == set() and meta.pending is S.Ongoing
    meta.complete(transit)
    assert meta.state is S.Ongoing and meta.partitions == {("a", 1)} and meta.start_ms == 50
    assert meta.pending is None


@pytest.mark.parametrize("state,prepare", [
    (S.Empty, lambda m: m.prepare_end(True, 0)),
    (S.Empty, lambda m: m.prepare_complete(0)),
    (S.Ongoing, lambda m: m.prepare_epoch_bump(1000, 4, 3, 0)),
    (S.Ongoing, lambda m: m.prepare_dead()),
    (S.CompleteCommit, lambda m: m.fence_now()),
])
def test_illegal_transitions_are_refused(state, prepare):
    with pytest.raises(IllegalTransition):
        prepare(_meta(state))


def test_fence_bumps_once_even_when_its_write_failed():
    meta = _meta(S.Ongoing, epoch=3)
    meta.fence_now()
    assert meta.producer_epoch == 4 and meta.pending is S.PrepareEpochFence
    transit = meta.prepare_end(False, 0)
    assert transit.state is S.PrepareAbort and transit.producer_epoch == 4
    meta.pending, meta.has_failed_epoch_fence = None, True  # the write failed
    meta.fence_now()
    assert meta.producer_epoch == 4


def test_epoch_exhaustion_keeps_one_epoch_for_the_fence():
    assert not is_epoch_exhausted(32_765) and is_epoch_exhausted(32_766) and is_epoch_exhausted(32_767)
