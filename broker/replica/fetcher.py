"""A follower's fetch session with one leader, sans-IO (Kafka's ``AbstractFetcherThread`` logic).

One ``FetchSession`` per leader broker holds the partitions this broker follows there. Each
partition is first TRUNCATING: the session asks the leader (OffsetForLeaderEpoch with our latest
epoch, ``epoch_requests``) where our history diverges, cuts the log there
(``truncation.truncation_offset``, several rounds if the leader never saw our epoch), then
FETCHING from its log end offset (``fetch_requests``), appending what comes back
(``Partition.append_as_follower``) and taking the leader's high watermark.

The I/O shell sends what the session asks for and hands the answers back; it is
``broker.server.replica_fetcher`` in a broker (asyncio, Fetch v11 / OffsetForLeaderEpoch v3 over
TCP) and ``broker.sim.node`` in the simulator. Every answer is checked against the partition's
role *now*: a partition whose leader or epoch changed during the round trip ignores it (the
replica manager re-registers it with the right session).

Errors (Kafka 2.x): OFFSET_OUT_OF_RANGE below the leader's log start offset restarts our log
there; any other out-of-range goes back to truncation. Epoch fencing errors, a leader that does
not lead (yet), a refused append, a connection failure: the partition waits ``backoff_ms`` and
tries again; a partition that keeps failing never holds up the others.

Replication throttle (KIP-73): with a ``quota`` (the broker's follower
``ReplicationQuota``), a partition that is throttled here and not in sync is left out of the
fetch while the follower rate is over ``follower.replication.throttled.rate`` (Kafka's
``shouldFollowerThrottle``); "in sync" is Kafka's fetcher view: the last fetch that brought data
left us at the leader's high watermark (``lag`` 0). The bytes appended for throttled partitions
are counted, in sync or not. ``throttled_until_ms`` tells the shell when the rate will be back
under: it waits that long (at most ``backoff_ms``) where Kafka's fetcher waits the whole
``replica.fetch.backoff.ms``, which keeps a throttled copy about 9 % under its rate.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import Enum
from typing import Callable, NamedTuple

from broker.log import LogError
from broker.records import RecordsError, iter_batches
from broker.replica.truncation import truncation_offset
from broker.wire import ErrorCode

__all__ = ["FetchSession", "FetcherSettings", "FetchedPartition", "EpochEndOffset", "FetchState",
           "PartitionFetch", "EpochQuery", "FetchQuery"]

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class FetchState(Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"


@dataclass(frozen=True)
class FetcherSettings:
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    partition_max_bytes: int = 1_048_576  # replica.fetch.max.bytes
    response_max_bytes: int = 10_485_760  # replica.fetch.response.max.bytes
    backoff_ms: int = 1_000  # replica.fetch.backoff.ms


@dataclass
class PartitionFetch:
    leader_epoch: int
    state: FetchState = FetchState.TRUNCATING
    fetch_offset: int = -1
    delayed_until_ms: int = 0
    lag: int | None = None  # leader's high watermark - our log end after the last fetch with data


class EpochQuery(NamedTuple):
    tp: TopicPartition
    current_leader_epoch: int
    leader_epoch: int  # our latest epoch


class FetchQuery(NamedTuple):
    tp: TopicPartition
    fetch_offset: int
    current_leader_epoch: int
    log_start_offset: int


class EpochEndOffset(NamedTuple):
    error_code: int
    leader_epoch: int = -1
    end_offset: int = -1


class FetchedPartition(NamedTuple):
    error_code: int
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview = b""


class FetchSession:
    """``get_partition(tp)`` returns the local ``Partition`` (or None)."""

    def __init__(self, local_broker_id: int, leader_id: int, get_partition: Callable,
                 settings: FetcherSettings, quota=None) -> None:
        self.local_broker_id = local_broker_id
        self.leader_id = leader_id
        self._get = get_partition
        self.settings = settings
        self.quota = quota  # broker.server.replication_quota.ReplicationQuota (follower); None: none
        self.throttled_until_ms: float | None = None  # set by fetch_requests when it held one back
        self.partitions: dict[TopicPartition, PartitionFetch] = {}

    # ------------------------------------------------------------------------ membership

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        """(Re)start following ``tp`` at ``leader_epoch``: truncation comes first."""
        self.partitions[tp] = PartitionFetch(leader_epoch)

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    def next_ready_ms(self) -> int:
        return min((p.delayed_until_ms for p in self.partitions.values()), default=0)

    # ------------------------------------------------------------------------ truncation

    def epoch_requests(self, now_ms: int) -> list[EpochQuery]:
        queries = []
        for tp, fetch in sorted(self.partitions.items()):
            if fetch.state != FetchState.TRUNCATING or fetch.delayed_until_ms > now_ms:
                continue
            partition = self._following(tp, fetch)
            if partition is None:
                continue
            latest = partition.leader_epochs.latest_epoch
            if latest < 0:  # no epoch history (an empty log): nothing can have diverged
                self._truncated(tp, fetch, partition, partition.high_watermark)
                continue
            queries.append(EpochQuery(tp, fetch.leader_epoch, latest))
        return queries

    def on_epoch_responses(self, answers: dict[TopicPartition, EpochEndOffset], now_ms: int) -> None:
        for tp, answer in sorted(answers.items()):
            fetch = self.partitions.get(tp)
            partition = self._following(tp, fetch) if fetch is not None else None
            if partition is None or fetch.state != FetchState.TRUNCATING:
                continue
            if answer.error_code != ErrorCode.NONE:
                logger.debug("%s-%d: OffsetForLeaderEpoch from %d: error %d", *tp, self.leader_id,
                             answer.error_code)
                fetch.delayed_until_ms = now_ms + self.settings.backoff_ms
                continue
            log = partition.log
            cut = truncation_offset(answer.leader_epoch, answer.end_offset, partition.leader_epochs,
                                    log.log_end_offset, partition.high_watermark)
            if cut.complete:
                self._truncated(tp, fetch, partition, cut.offset)
            else:
                partition.truncate_to(cut.offset)

    def _truncated(self, tp: TopicPartition, fetch: PartitionFetch, partition, offset: int) -> None:
        partition.truncate_to(offset)
        fetch.state = FetchState.FETCHING
        fetch.fetch_offset = partition.log.log_end_offset

    # ---------------------------------------------------------------------------- fetch

    def fetch_requests(self, now_ms: int) -> list[FetchQuery]:
        queries = []
        self.throttled_until_ms = None
        for tp, fetch in sorted(self.partitions.items()):
            if fetch.state != FetchState.FETCHING or fetch.delayed_until_ms > now_ms:
                continue
            partition = self._following(tp, fetch)
            if partition is None:
                continue
            if self.quota is not None and self.quota.should_throttle(*tp, fetch.lag == 0, now_ms):
                self.throttled_until_ms = now_ms + self.quota.ms_until_under(now_ms)
                continue
            fetch.fetch_offset = partition.log.log_end_offset
            queries.append(FetchQuery(tp, fetch.fetch_offset, fetch.leader_epoch,
                                      partition.log.log_start_offset))
        return queries

    def on_fetch_responses(self, answers: dict[TopicPartition, FetchedPartition], now_ms: int) -> int:
        """Apply a Fetch answer; returns the number of batches appended."""
        appended = 0
        for tp, answer in sorted(answers.items()):
            fetch = self.partitions.get(tp)
            partition = self._following(tp, fetch) if fetch is not None else None
            if partition is None or fetch.state != FetchState.FETCHING:
                continue
            if answer.error_code == ErrorCode.NONE:
                appended += self._append(tp, fetch, partition, answer, now_ms)
            elif answer.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                self._out_of_range(tp, fetch, partition, answer)
            else:
                logger.debug("%s-%d: fetch from %d: error %d", *tp, self.leader_id, answer.error_code)
                fetch.delayed_until_ms = now_ms + self.settings.backoff_ms
        return appended

    def _append(self, tp, fetch: PartitionFetch, partition, answer: FetchedPartition, now_ms: int) -> int:
        records = _from_offset(answer.records, partition.log.log_end_offset)
        if records is None:
            logger.warning("%s-%d: leader %d sent batches that do not line up with our log end %d; "
                           "truncating again", *tp, self.leader_id, partition.log.log_end_offset)
            fetch.state = FetchState.TRUNCATING
            return 0
        try:
            count = partition.append_as_follower(records, answer.high_watermark) if records else 0
        except (LogError, RecordsError) as exc:
            logger.warning("%s-%d: appending from leader %d failed: %s", *tp, self.leader_id, exc)
            fetch.state = FetchState.TRUNCATING
            fetch.delayed_until_ms = now_ms + self.settings.backoff_ms
            return 0
        if not records:
            partition.update_follower_high_watermark(answer.high_watermark)
        if records or fetch.lag is None:
            fetch.lag = max(0, answer.high_watermark - partition.log.log_end_offset)
        if records and self.quota is not None and self.quota.is_throttled(*tp):
            self.quota.record(len(records), now_ms)
        if answer.log_start_offset > partition.log.log_start_offset:  # DeleteRecords or retention on the leader
            partition.log.increment_log_start_offset(answer.log_start_offset)
            partition.on_log_start_offset_moved()
        fetch.fetch_offset = partition.log.log_end_offset
        return count

    def _out_of_range(self, tp, fetch: PartitionFetch, partition, answer: FetchedPartition) -> None:
        if 0 <= fetch.fetch_offset < answer.log_start_offset:
            partition.truncate_fully_and_start_at(answer.log_start_offset)
            fetch.fetch_offset = answer.log_start_offset
        else:
            fetch.state = FetchState.TRUNCATING

    def on_failure(self, now_ms: int) -> None:
        """The connection failed: every partition waits ``backoff_ms``."""
        for fetch in self.partitions.values():
            fetch.delayed_until_ms = now_ms + self.settings.backoff_ms

    def _following(self, tp: TopicPartition, fetch: PartitionFetch):
        """The local partition if it still follows this leader at this epoch."""
        partition = self._get(*tp)
        if (partition is None or partition.is_leader or partition.leader_id != self.leader_id
                or partition.leader_epoch != fetch.leader_epoch):
            return None
        return partition


def _from_offset(records, offset: int):
    """``records`` from the first batch at or after ``offset``; None if a batch straddles it
    (the leader's batch boundaries differ from ours: our tail diverged)."""
    view = memoryview(records)
    for position, header in iter_batches(view):
        if header.base_offset >= offset:
            return view[position:]
        if header.last_offset >= offset:
            return None
    return view[len(view):]
