"""The transaction APIs on the core's state (Kafka's ``TransactionCoordinator``).

When the producer epoch is bumped: always by InitProducerId (a new producer id instead once the
epoch is exhausted) and by fencing (a timed-out transaction's abort, an InitProducerId that
finds one ongoing). Per transaction only at
transaction version 2: an EndTxn v5+ from the client writes its commit or abort at the next
epoch, which the markers carry and the answer hands to the producer (``end_transaction``,
``TxnMetadata.prepare_end``); from an exhausted epoch that bump reaches the last one and, once
the markers are written, the producer continues under a new producer id at epoch 0. An EndTxn
v0-4 (transaction versions 0 and 1) ends the transaction at its own epoch: no bump.

Every handler checks in Kafka's order and answers with Kafka's error codes; a change is prepared
on the metadata (``pending``), written, and answered from the write's outcome (see ``state``).
"""

from __future__ import annotations

import re

from broker.coordinator.group.core import partition_for
from broker.coordinator.txn import responses as rsp
from broker.coordinator.txn.effects import Reply
from broker.coordinator.txn.state import (NO_PRODUCER_EPOCH, NO_PRODUCER_ID, STATE_NAMES,
                                          TxnMetadata, TxnState, is_epoch_exhausted)

S = TxnState
OFFSETS_TOPIC = "__consumer_offsets"
TOMBSTONES_PER_APPEND_MAX = 1_000  # records per batch of expired ids (Kafka: up to max.message.bytes)


def handle(core, token, api_key: int, api_version: int, request, now_ms: int) -> list:
    if api_key == rsp.INIT_PRODUCER_ID:
        return init_producer_id(core, token, api_version, request, now_ms)
    if api_key == rsp.ADD_PARTITIONS_TO_TXN:
        if api_version < 4:
            return _add_partitions_v3(core, token, api_version, request, now_ms)
        return _add_partitions_v4(core, token, request, now_ms)
    if api_key == rsp.ADD_OFFSETS_TO_TXN:
        return _add_offsets(core, token, api_version, request, now_ms)
    if api_key == rsp.END_TXN:
        return _end_txn(core, token, api_version, request, now_ms)
    if api_key == rsp.DESCRIBE_TRANSACTIONS:
        return [Reply(token, rsp.describe([_describe_one(core, tid) for tid in request.transactional_ids]))]
    if api_key == rsp.LIST_TRANSACTIONS:
        return [Reply(token, _list(core, api_version, request, now_ms))]
    raise AssertionError(f"api key {api_key} is not a transaction coordinator API")


# -- InitProducerId ---------------------------------------------------------------------------------
def init_producer_id(core, token, api_version: int, request, now_ms: int,
                     new_producer_id: int | None = None) -> list:
    """Kafka's handleInitProducerId for a transactional id. ``new_producer_id``: the id just
    allocated for this request (it is re-run from the top when the allocation arrives)."""
    def reply(code, pid=-1, epoch=-1):
        return [Reply(token, rsp.init_producer_id(api_version, code, pid, epoch))]

    tid, timeout_ms = request.transactional_id, request.transaction_timeout_ms
    assert tid is not None, "the shell answers non-transactional InitProducerId itself"
    if tid == "":
        return reply(rsp.INVALID_REQUEST)
    if not 0 < timeout_ms <= core.settings.max_timeout_ms:
        return reply(rsp.INVALID_TRANSACTION_TIMEOUT)
    expected = None
    if api_version >= 3:
        pid, epoch = request.producer_id, request.producer_epoch
        if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
            return reply(rsp.INVALID_REQUEST)
        if pid != NO_PRODUCER_ID:
            expected = (pid, epoch)
    shard, code = core.route(tid)
    if shard is None:
        return reply(code)
    meta = shard.txns.get(tid)
    if meta is None:
        if new_producer_id is None:
            return [core.allocate(shard, token, api_version, request)]
        meta = TxnMetadata(tid, new_producer_id, NO_PRODUCER_EPOCH, timeout_ms, S.Empty,
                           last_update_ms=now_ms)
        shard.txns[tid] = meta  # Kafka's putTransactionStateIfNotExists: cached before the write
        new_producer_id = None

    if meta.pending is not None:
        return reply(rsp.CONCURRENT_TRANSACTIONS)
    if expected is not None and not _valid_expected_id(meta, expected):
        return reply(rsp.PRODUCER_FENCED)
    if meta.state.is_prepare:
        return reply(rsp.CONCURRENT_TRANSACTIONS)
    if meta.state is S.Ongoing:
        # fence the previous incarnation: abort its transaction with a bumped epoch that is never
        # handed out; the client retries (CONCURRENT_TRANSACTIONS) and gets the next one
        meta.fence_now()  # (written at the transaction's own version, as Kafka 4.1: see prepare_end)
        return end_transaction(core, shard, meta, meta.producer_id, meta.producer_epoch, False, False,
                               now_ms, lambda c, _n: reply(rsp.CONCURRENT_TRANSACTIONS if c == 0 else c),
                               fence_version=meta.client_transaction_version)
    assert meta.state in (S.Empty, S.CompleteCommit, S.CompleteAbort), meta
    if is_epoch_exhausted(meta.producer_epoch) and (expected is None or expected[1] == meta.producer_epoch):
        if new_producer_id is None:
            return [core.allocate(shard, token, api_version, request)]
        transit = meta.prepare_producer_id_rotation(new_producer_id, timeout_ms, now_ms, expected is not None)
    else:
        bump = _epoch_bump(meta, expected)
        if bump is None:
            return reply(rsp.PRODUCER_FENCED)
        transit = meta.prepare_epoch_bump(timeout_ms, bump[0], bump[1], now_ms)

    def done(code, _now):
        return reply(code, meta.producer_id, meta.producer_epoch) if code == 0 else reply(code)
    return [core.write(shard, meta, transit, done)]


def _valid_expected_id(meta: TxnMetadata, expected) -> bool:
    """KIP-360: the producer id a recovering client names must be this id's (or the previous one
    with an exhausted epoch: a retry of a rotation it never heard the answer of)."""
    pid, epoch = expected
    return (meta.producer_epoch == NO_PRODUCER_EPOCH or pid == meta.producer_id
            or (pid == meta.previous_producer_id and is_epoch_exhausted(epoch)))


def _epoch_bump(meta: TxnMetadata, expected):
    """(new epoch, last epoch) of an InitProducerId, or None: fenced (prepareIncrementProducerEpoch)."""
    if is_epoch_exhausted(meta.producer_epoch):
        return None  # only reachable with a stale expected epoch
    bumped = meta.producer_epoch + 1
    if expected is None:
        return bumped, NO_PRODUCER_EPOCH
    if meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch:
        return bumped, meta.producer_epoch
    if expected[1] == meta.last_producer_epoch:
        return meta.producer_epoch, meta.last_producer_epoch  # a retry of a bump that succeeded
    return None


# -- EndTxn -----------------------------------------------------------------------------------------
def _end_txn(core, token, api_version: int, request, now_ms: int) -> list:
    meta = None

    def reply(code, _now=None):
        if code == rsp.NONE:  # v5+ carries the producer id and epoch to go on with
            pid, epoch = meta.producer_id, meta.producer_epoch
            if meta.next_producer_id >= 0:  # a rotation: the new id once the markers are written
                pid, epoch = meta.next_producer_id, 0
            return [Reply(token, rsp.error_only(rsp.END_TXN, api_version, code,
                                                producer_id=pid, producer_epoch=epoch))]
        return [Reply(token, rsp.error_only(rsp.END_TXN, api_version, code))]

    tid = request.transactional_id
    if not tid:
        return reply(rsp.INVALID_REQUEST)
    shard, code = core.route(tid)
    if shard is None:
        return reply(code)
    meta = shard.txns.get(tid)
    if meta is None:
        return reply(rsp.INVALID_PRODUCER_ID_MAPPING)
    return end_transaction(core, shard, meta, request.producer_id, request.producer_epoch,
                           request.committed, True, now_ms, reply, bump_epoch=api_version >= 5)


def end_transaction(core, shard, meta: TxnMetadata, producer_id: int, producer_epoch: int,
                    commit: bool, from_client: bool, now_ms: int, done, bump_epoch: bool = False,
                    next_producer_id: int | None = None, fence_version: int = 2) -> list:
    """Kafka's endTransaction: Ongoing -> Prepare* written, answered, then markers; a retry of
    a finished decision answers NONE, the opposite one INVALID_TXN_STATE. ``bump_epoch``: an
    EndTxn v5+ (transaction version 2, ``TxnMetadata.prepare_end``); at an exhausted epoch it
    first gets a new producer id (``next_producer_id``, the request re-run when it arrives) that
    the transaction rotates to once its markers are written. Not from a client: the fence of a
    timed-out or re-initialized producer (already bumped)."""
    retry_on_overflow = from_client and bump_epoch and meta.end_retry_on_overflow(producer_id, producer_epoch)
    if meta.producer_id != producer_id and not retry_on_overflow:
        return done(rsp.INVALID_PRODUCER_ID_MAPPING, now_ms)
    if not retry_on_overflow and not meta.end_epoch_valid(producer_epoch, from_client, version_2=bump_epoch):
        return done(rsp.PRODUCER_FENCED, now_ms)
    fencing = meta.pending is S.PrepareEpochFence
    if meta.pending is not None and not fencing:
        return done(rsp.CONCURRENT_TRANSACTIONS, now_ms)
    state = meta.state
    if state is S.Ongoing:
        bump = bump_epoch and from_client and not fencing
        rotate = bump and is_epoch_exhausted(meta.producer_epoch)
        if rotate and next_producer_id is None:
            def resume(new_id, now):
                if shard.txns.get(meta.transactional_id) is not meta:
                    return done(rsp.INVALID_PRODUCER_ID_MAPPING, now)
                return end_transaction(core, shard, meta, producer_id, producer_epoch, commit, from_client,
                                       now, done, bump_epoch, next_producer_id=new_id)
            return [core.allocate_then(shard, resume, done)]
        transit = meta.prepare_end(commit, now_ms, bump_epoch=bump,
                                   next_producer_id=next_producer_id if rotate else NO_PRODUCER_ID,
                                   fence_version=fence_version)

        def written(code, now):
            if code != 0:
                if fencing:
                    meta.has_failed_epoch_fence = True
                return done(code, now)
            core.ended["committed" if commit else "aborted"] += 1
            return done(rsp.NONE, now) + core.send_markers(shard, meta, now)
        return [core.write(shard, meta, transit, written)]
    same = {S.CompleteCommit: commit, S.CompleteAbort: not commit,
            S.PrepareCommit: commit, S.PrepareAbort: not commit}
    if state in (S.CompleteCommit, S.CompleteAbort) and same[state]:
        return done(rsp.NONE, now_ms)  # a retry of the decision already carried out
    if state.is_prepare and same[state]:
        return done(rsp.CONCURRENT_TRANSACTIONS, now_ms)
    return done(rsp.INVALID_TXN_STATE, now_ms)  # Empty, or the opposite decision


# -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------------------
def add_partitions(core, tid: str, producer_id: int, producer_epoch: int, partitions, now_ms: int,
                   done, client_transaction_version: int | None = None) -> list:
    """Kafka's handleAddPartitionsToTransaction; ``done(code, now)`` answers.
    ``client_transaction_version`` 2: the implicit add of transaction version 2 (a partition
    leader's AddPartitionsToTxn v4+ that is not verify-only), recorded on the transaction."""
    if not tid:
        return done(rsp.INVALID_REQUEST, now_ms)
    shard, code = core.route(tid)
    if shard is None:
        return done(code, now_ms)
    meta = shard.txns.get(tid)
    if meta is None or meta.producer_id != producer_id:
        return done(rsp.INVALID_PRODUCER_ID_MAPPING, now_ms)
    if meta.producer_epoch != producer_epoch:
        return done(rsp.PRODUCER_FENCED, now_ms)
    if meta.pending is not None or meta.state.is_prepare:
        return done(rsp.CONCURRENT_TRANSACTIONS, now_ms)
    partitions = set(partitions)
    if meta.state is S.Ongoing and partitions <= meta.partitions:
        return done(rsp.NONE, now_ms)
    return [core.write(shard, meta, meta.prepare_add_partitions(partitions, now_ms, client_transaction_version),
                       done)]


def _topic_partitions(topics) -> list:
    return [(t.name, p) for t in topics for p in t.partitions]


def _add_partitions_v3(core, token, api_version: int, request, now_ms: int) -> list:
    partitions = _topic_partitions(request.v3_and_below_topics)

    def done(code, _now):
        return [Reply(token, rsp.add_partitions_v3(api_version, {tp: code for tp in partitions}))]
    return add_partitions(core, request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                          request.v3_and_below_producer_epoch, partitions, now_ms, done)


def _add_partitions_v4(core, token, request, now_ms: int) -> list:
    """The broker's batched form: one result per transaction, answered when all are known."""
    results: list = [None] * len(request.transactions)
    out: list = []

    def finish() -> list:
        if any(r is None for r in results):
            return []
        return [Reply(token, rsp.add_partitions_v4(results))]

    for i, txn in enumerate(request.transactions):
        partitions = _topic_partitions(txn.topics)
        if txn.verify_only:
            results[i] = (txn.transactional_id, verify_errors(
                core, txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions))
            continue

        def done(code, _now, i=i, tid=txn.transactional_id, partitions=partitions):
            results[i] = (tid, {tp: code for tp in partitions})
            return finish() if started else []
        started = False
        out += add_partitions(core, txn.transactional_id, txn.producer_id, txn.producer_epoch,
                              partitions, now_ms, done, client_transaction_version=2)
    started = True
    return out + finish()


def verify_errors(core, tid: str, producer_id: int, producer_epoch: int, partitions) -> dict:
    """KIP-890 part 1, read-only (Kafka's handleVerifyPartitionsInTransaction): for each
    partition NONE if it is in the ongoing transaction, else TRANSACTION_ABORTABLE."""
    def every(code):
        return {tp: code for tp in partitions}
    if not tid:
        return every(rsp.INVALID_REQUEST)
    shard, code = core.route(tid)
    if shard is None:
        return every(code)
    meta = shard.txns.get(tid)
    if meta is None or meta.producer_id != producer_id:
        return every(rsp.INVALID_PRODUCER_ID_MAPPING)
    if meta.producer_epoch != producer_epoch:
        return every(rsp.PRODUCER_FENCED)
    if meta.state.is_prepare:
        return every(rsp.CONCURRENT_TRANSACTIONS)
    return {tp: rsp.NONE if tp in meta.partitions else rsp.TRANSACTION_ABORTABLE for tp in partitions}


def _add_offsets(core, token, api_version: int, request, now_ms: int) -> list:
    """The group's ``__consumer_offsets`` partition joins the transaction (KafkaApis)."""
    partition = (OFFSETS_TOPIC, partition_for(request.group_id, core.settings.offsets_num_partitions))

    def done(code, _now):
        return [Reply(token, rsp.error_only(rsp.ADD_OFFSETS_TO_TXN, api_version, code))]
    return add_partitions(core, request.transactional_id, request.producer_id, request.producer_epoch,
                          [partition], now_ms, done)


# -- admin ------------------------------------------------------------------------------------------
def _describe_one(core, tid: str):
    if tid == "":
        return rsp.describe_state(tid, rsp.INVALID_REQUEST)
    shard, code = core.route(tid)
    if shard is None:
        return rsp.describe_state(tid, code)
    meta = shard.txns.get(tid)
    if meta is None or meta.state is S.Dead:
        return rsp.describe_state(tid, rsp.TRANSACTIONAL_ID_NOT_FOUND)
    return rsp.describe_state(tid, rsp.NONE, meta)


def _list(core, api_version: int, request, now_ms: int):
    if core.any_loading():
        return rsp.list_transactions(rsp.COORDINATOR_LOAD_IN_PROGRESS, [], [])
    names = list(request.state_filters)
    states = {STATE_NAMES[n] for n in names if n in STATE_NAMES}
    unknown = [n for n in names if n not in STATE_NAMES]
    pids = set(request.producer_id_filters)
    duration = request.duration_filter if api_version >= 1 else -1
    pattern = request.transactional_id_pattern if api_version >= 2 else None
    try:  # v2 (KIP-1152): a regular expression the whole id must match; null or "" = every id
        matcher = re.compile(pattern).fullmatch if pattern else None
    except re.error:
        return rsp.list_transactions(rsp.INVALID_REQUEST, [], [])
    found = []
    for shard in core.shards():
        for meta in shard.txns.values():
            if meta.state is S.Dead or (pids and meta.producer_id not in pids):
                continue
            if names and meta.state not in states:
                continue
            if duration >= 0 and now_ms - meta.start_ms <= duration:
                continue
            if matcher is not None and matcher(meta.transactional_id) is None:
                continue
            found.append((meta.transactional_id, meta.producer_id, meta.state.name))
    return rsp.list_transactions(rsp.NONE, unknown, found)


# -- timers -----------------------------------------------------------------------------------------
def abort_timed_out(core, now_ms: int) -> list:
    """Abort every transaction open longer than its timeout, fencing its producer
    (abortTimedOutTransactions: prepareFenceProducerEpoch, then an abort not from a client)."""
    out: list = []
    for shard in list(core.shards()):
        for meta in list(shard.txns.values()):
            if meta.pending is None and meta.state is S.Ongoing and meta.start_ms + meta.timeout_ms < now_ms:
                meta.fence_now()
                out += end_transaction(core, shard, meta, meta.producer_id, meta.producer_epoch,
                                       False, False, now_ms, lambda c, n: [])
    return out


def expire_ids(core, now_ms: int) -> list:
    """transactional.id.expiration.ms: idle ids (Empty or Complete*, nothing pending) get
    tombstones, written together per partition (removeExpiredTransactionalIds)."""
    out: list = []
    horizon = now_ms - core.settings.id_expiration_ms
    for shard in list(core.shards()):
        expired = [m for m in shard.txns.values()
                   if m.pending is None and m.state.expiration_allowed and m.last_update_ms <= horizon]
        for start in range(0, len(expired), TOMBSTONES_PER_APPEND_MAX):
            chunk = expired[start:start + TOMBSTONES_PER_APPEND_MAX]
            for meta in chunk:
                meta.prepare_dead()
            out.append(core.write_tombstones(shard, chunk))
    return out
