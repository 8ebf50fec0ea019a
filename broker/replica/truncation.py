"""Where a follower must cut its log before fetching from a new leader: KIP-101 and KIP-279.

Pure. The follower asks the leader (OffsetForLeaderEpoch) where its own latest epoch ends in the
leader's log, and compares with where that epoch ends locally (Kafka 2.x
``AbstractFetcherThread.getOffsetTruncationState``):

- the leader knows no epoch at or below ours (``end_offset`` undefined): truncate to our high
  watermark (the pre-KIP-101 rule; only possible when the leader has no epochs at all);
- the leader answers with the epoch we asked for: both logs agree up to where that epoch ends
  on either side; cut at the smaller end (never above our own log end);
- the leader answers with an older epoch E (it never saw ours): cut at where E ends locally and
  ask again with our new latest epoch; the answer is not final (KIP-279's extra round trips),
  unless we do not know E either, in which case the leader's end offset is the bound.

Returns ``(offset, complete)``; ``complete`` False means "truncate, then ask again".
"""

from __future__ import annotations

from typing import NamedTuple

from broker.replica.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache

__all__ = ["Truncation", "truncation_offset"]


class Truncation(NamedTuple):
    offset: int
    complete: bool


def truncation_offset(leader_epoch: int, leader_end_offset: int, local: LeaderEpochCache,
                      log_end_offset: int, high_watermark: int) -> Truncation:
    if leader_end_offset == UNDEFINED_OFFSET:
        return Truncation(min(high_watermark, log_end_offset), True)
    if leader_epoch == UNDEFINED_EPOCH:
        return Truncation(min(leader_end_offset, log_end_offset), True)
    local_epoch, local_end = local.end_offset_for(leader_epoch, log_end_offset)
    if local_epoch == UNDEFINED_EPOCH:
        return Truncation(min(leader_end_offset, log_end_offset), True)
    if local_epoch != leader_epoch:
        return Truncation(min(local_end, log_end_offset), False)
    return Truncation(min(leader_end_offset, local_end, log_end_offset), True)
