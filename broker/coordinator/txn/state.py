"""The state of one transactional id and its legal transitions (Kafka's ``TransactionMetadata``).

A change is prepared as a ``Transit`` (the full next state, which is what gets written to
``__transaction_state``), parked on the metadata as ``pending`` while its write is in flight, and
applied only when the write succeeds — so a failed write leaves the state as it was, and any
other request meanwhile sees ``pending`` and answers CONCURRENT_TRANSACTIONS. The one exception is
Kafka's: fencing an ongoing transaction bumps the epoch in memory before its PrepareAbort is
written (``fence_now``), so the fenced producer is refused at once; if that write fails the next
fence does not bump again (``has_failed_epoch_fence``), since the bumped epoch was never handed out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

__all__ = ["TxnState", "Transit", "TxnMetadata", "EPOCH_EXHAUSTED", "NO_PRODUCER_ID",
           "NO_PRODUCER_EPOCH", "is_epoch_exhausted"]

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
INT16_MAX = 32_767
EPOCH_EXHAUSTED = INT16_MAX - 1  # epochs >= this are never handed out: the fence needs one more


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= EPOCH_EXHAUSTED


class TxnState(enum.IntEnum):
    """The states and their ``transaction_status`` byte (Kafka's ids)."""

    Empty = 0
    Ongoing = 1
    PrepareCommit = 2
    PrepareAbort = 3
    CompleteCommit = 4
    CompleteAbort = 5
    Dead = 6
    PrepareEpochFence = 7

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PrepareCommit, TxnState.PrepareAbort)

    @property
    def expiration_allowed(self) -> bool:
        return self in (TxnState.Empty, TxnState.CompleteCommit, TxnState.CompleteAbort)


S = TxnState
# to-state -> the states it may be entered from (Kafka's validPreviousStates)
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.Empty: frozenset({S.Empty, S.CompleteCommit, S.CompleteAbort}),
    S.Ongoing: frozenset({S.Ongoing, S.Empty, S.CompleteCommit, S.CompleteAbort}),
    S.PrepareCommit: frozenset({S.Ongoing}),
    S.PrepareAbort: frozenset({S.Ongoing, S.PrepareEpochFence}),
    S.CompleteCommit: frozenset({S.PrepareCommit}),
    S.CompleteAbort: frozenset({S.PrepareAbort}),
    S.Dead: frozenset({S.Empty, S.CompleteCommit, S.CompleteAbort}),
    S.PrepareEpochFence: frozenset({S.Ongoing}),
}

STATE_NAMES = {s.name: s for s in TxnState}


class IllegalTransition(AssertionError):
    """A transition the table forbids: a bug in the core, never a client error."""


@dataclass(frozen=True)
class Transit:
    """The whole next state of a transactional id (what one ``__transaction_state`` record says)."""

    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset  # frozenset[tuple[str, int]]
    start_ms: int
    last_update_ms: int
    # 2: the transition of an EndTxn v5+ (transaction version 2, KIP-890 part 2), which bumped
    # the epoch; retries of it are then recognized by the epoch one lower (``end_epoch_valid``).
    client_transaction_version: int = 0
    # the producer id a transaction version 2 decision at an exhausted epoch rotates to: its
    # markers carry the old id at the last epoch, Complete* hands out this one at epoch 0
    next_producer_id: int = NO_PRODUCER_ID


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    previous_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: set = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending: TxnState | None = None
    has_failed_epoch_fence: bool = False
    client_transaction_version: int = 0
    next_producer_id: int = NO_PRODUCER_ID

    def current(self) -> Transit:
        return Transit(self.producer_id, self.previous_producer_id, self.producer_epoch,
                       self.last_producer_epoch, self.timeout_ms, self.state,
                       frozenset(self.partitions), self.start_ms, self.last_update_ms,
                       self.client_transaction_version, self.next_producer_id)

    def _prepare(self, **changes) -> Transit:
        transit = replace(self.current(), **changes)
        if self.state not in VALID_PREVIOUS[transit.state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.name} -> {transit.state.name}")
        self.pending = transit.state
        return transit

    # -- the prepared transitions (Kafka's prepare* methods, transaction version 0) -----------
    def prepare_epoch_bump(self, timeout_ms: int, epoch: int, last_epoch: int, now_ms: int) -> Transit:
        return self._prepare(producer_epoch=epoch, last_producer_epoch=last_epoch, timeout_ms=timeout_ms,
                             state=S.Empty, partitions=frozenset(), start_ms=-1, last_update_ms=now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> Transit:
        return self._prepare(producer_id=new_producer_id, previous_producer_id=self.producer_id,
                             producer_epoch=0,
                             last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             timeout_ms=timeout_ms, state=S.Empty, partitions=frozenset(), start_ms=-1,
                             last_update_ms=now_ms)

    def prepare_add_partitions(self, added, now_ms: int, client_transaction_version: int | None = None) -> Transit:
        """``client_transaction_version``: 2 for an add of transaction version 2 (a partition
        leader's implicit add for a Produce v12 / TxnOffsetCommit v5), as Kafka records it."""
        start = now_ms if self.state in (S.Empty, S.CompleteCommit, S.CompleteAbort) else self.start_ms
        tv = self.client_transaction_version if client_transaction_version is None else client_transaction_version
        return self._prepare(state=S.Ongoing, partitions=frozenset(self.partitions) | frozenset(added),
                             start_ms=start, last_update_ms=now_ms, client_transaction_version=tv)

    def fence_now(self) -> None:
        """Ongoing -> PrepareEpochFence: bump the epoch in memory now (see the module docstring)."""
        if self.state not in VALID_PREVIOUS[S.PrepareEpochFence]:
            raise IllegalTransition(f"{self.transactional_id}: fence from {self.state.name}")
        if not self.has_failed_epoch_fence:
            self.producer_epoch += 1
        self.last_producer_epoch = NO_PRODUCER_EPOCH
        self.pending = S.PrepareEpochFence

    def prepare_end(self, commit: bool, now_ms: int, bump_epoch: bool = False,
                    next_producer_id: int = NO_PRODUCER_ID, fence_version: int = 2) -> Transit:
        """Ongoing -> Prepare*. ``bump_epoch`` (an EndTxn v5+, transaction version 2): the
        decision is written at the next epoch, which its markers carry and the answer hands to
        the producer, so any request of the ended transaction that arrives late (an EndTxn, a
        Produce) is fenced instead of acting on the next transaction (Kafka's
        ``prepareAbortOrCommit``). At an exhausted epoch that bump is the last one (Short.MAX):
        ``next_producer_id`` is the new id that Complete* rotates to.
        A fence (``PrepareEpochFence``) has bumped already; it is written at
        ``fence_version``: the timeout abort at the broker's transaction version (2), an
        InitProducerId's fence at the transaction's own (Kafka 4.1). At 2 a late EndTxn of
        the fenced producer reads as a retry of that abort (NONE for an abort,
        INVALID_TXN_STATE for a commit), at 0 it is PRODUCER_FENCED -- both seen on Kafka 4.1."""
        state = S.PrepareCommit if commit else S.PrepareAbort
        if self.pending is S.PrepareEpochFence:
            self.pending = None  # the fence continues as this abort (from Ongoing)
            return self._prepare(state=state, last_update_ms=now_ms, client_transaction_version=fence_version,
                                 next_producer_id=NO_PRODUCER_ID)
        if bump_epoch:
            return self._prepare(state=state, last_update_ms=now_ms, producer_epoch=self.producer_epoch + 1,
                                 last_producer_epoch=self.producer_epoch, client_transaction_version=2,
                                 next_producer_id=next_producer_id)
        return self._prepare(state=state, last_update_ms=now_ms, client_transaction_version=0,
                             next_producer_id=NO_PRODUCER_ID)

    def end_retry_on_overflow(self, producer_id: int, producer_epoch: int) -> bool:
        """A retry of the EndTxn v5 whose decision rotated the producer id (Kafka's
        retryOnOverflow): the old id at the exhausted epoch, the new one stored at epoch 0."""
        return (self.client_transaction_version >= 2 and self.pending is not S.PrepareEpochFence
                and self.state in (S.CompleteCommit, S.CompleteAbort)
                and producer_id == self.previous_producer_id and producer_id != self.producer_id
                and producer_epoch == EPOCH_EXHAUSTED and self.producer_epoch == 0)

    def end_epoch_valid(self, producer_epoch: int, from_client: bool, version_2: bool = False) -> bool:
        """May an EndTxn at ``producer_epoch`` act on this state (else PRODUCER_FENCED)?
        ``version_2``: an EndTxn v5+ (Kafka 4.1 picks the rules by the request's version:
        ``endTransaction`` vs ``endTransactionWithTV1``). After a decision that bumped the epoch
        the stored epoch is one higher than the one the ended transaction used: only a retry
        (epoch + 1 == stored) may see Prepare*/Complete*, and the next transaction (Ongoing,
        Empty) needs the stored epoch itself, so a delayed EndTxn of the previous transaction
        never ends the next one. Versions 0-4: the stored epoch exactly (higher too when not
        from a client: a fence already bumped)."""
        if version_2 and from_client and self.pending is not S.PrepareEpochFence:
            if self.state in (S.Ongoing, S.Empty, S.Dead):
                return producer_epoch == self.producer_epoch
            return producer_epoch + 1 == self.producer_epoch
        return ((not from_client or producer_epoch == self.producer_epoch)
                and producer_epoch >= self.producer_epoch)

    def prepare_complete(self, now_ms: int) -> Transit:
        """Prepare* -> Complete*; after a decision that rotated the producer id (Kafka's
        ``prepareComplete``) the new id at epoch 0 takes over, the old one is remembered."""
        done = S.CompleteCommit if self.state is S.PrepareCommit else S.CompleteAbort
        if self.client_transaction_version >= 2 and self.next_producer_id != NO_PRODUCER_ID:
            return self._prepare(state=done, partitions=frozenset(), last_update_ms=now_ms,
                                 producer_id=self.next_producer_id, previous_producer_id=self.producer_id,
                                 producer_epoch=0, last_producer_epoch=self.producer_epoch,
                                 next_producer_id=NO_PRODUCER_ID)
        return self._prepare(state=done, partitions=frozenset(), last_update_ms=now_ms)

    def prepare_dead(self) -> Transit:
        return self._prepare(state=S.Dead, partitions=frozenset())

    def complete(self, transit: Transit) -> None:
        """The write of ``transit`` succeeded: it becomes the state."""
        assert self.pending is transit.state, (self.pending, transit.state)
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.timeout_ms = transit.timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.start_ms = transit.start_ms
        self.last_update_ms = transit.last_update_ms
        self.client_transaction_version = transit.client_transaction_version
        self.next_producer_id = transit.next_producer_id
        self.pending = None
        if transit.state in (S.CompleteCommit, S.CompleteAbort):
            self.has_failed_epoch_fence = False
