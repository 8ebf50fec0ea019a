"""Idempotent producer sequence rules, Apache Kafka against pylog at the wire level.

One script of InitProducerId and Produce requests, with hand-set producer ids, epochs and
sequences, runs against each broker on its own topic; every answer is reduced to what a producer
acts on (error code, base offset, log start offset, record errors, log append time) and the two
lists are compared step by step. Deliberate differences are named where they are asserted.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import pytest
from peer_support import unique_topic
from wire_probe import batch_of, connect, highest_common_version, produce_partition, produce_request

from broker.wire import ApiKey, ErrorCode, InitProducerIdRequest

INT32_MAX = (1 << 31) - 1
UNKNOWN_PRODUCER = 7_000_000_000  # never allocated by either broker in a test session
OLDER_PRODUCE_VERSION = 7  # librdkafka 2.16's
# Recent: the brokers run time retention every 500 ms (COMMON_BROKER_SETTINGS), and Kafka rolls
# and deletes even the active segment once all its records are past retention.ms.
BASE_TIMESTAMP_MS = int(time.time()) * 1000


class Send(NamedTuple):
    """Produce one batch of ``count`` records. ``producer`` "own" is the id InitProducerId gave;
    "unknown" is an id no broker allocated. ``epoch`` is relative to the epoch last given."""

    label: str
    base_sequence: int
    count: int = 1
    epoch: int = 0
    producer: str = "own"


class Bump(NamedTuple):
    """InitProducerId with ``producer_id``/``epoch`` as given ("own": the current ones; anything
    else: -1)."""

    label: str
    producer_id: str = "own"
    epoch: str = "own"


@pytest.fixture(scope="module")
def versions(peers) -> dict[str, int]:
    return {"produce": highest_common_version(peers, ApiKey.PRODUCE),
            "init": highest_common_version(peers, ApiKey.INIT_PRODUCER_ID)}


def init_producer_id(raw, version: int, producer_id: int = -1, epoch: int = -1) -> tuple[str, int, int]:
    """InitProducerId, retried while the answer is retriable (Kafka answers
    COORDINATOR_LOAD_IN_PROGRESS until its producer id manager has its first block)."""
    deadline = time.monotonic() + 30
    while True:
        response = raw.call(ApiKey.INIT_PRODUCER_ID, version, InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60_000, producer_id=producer_id,
            producer_epoch=epoch))
        error = ErrorCode(response.error_code)
        if not error.retriable or time.monotonic() > deadline:
            return error.name, response.producer_id, response.producer_epoch
        time.sleep(0.1)  # polling a condition with a deadline: the broker gives no notice


def run_script(peer, topic: str, steps, versions: dict[str, int], produce_version: int) -> list[tuple]:
    """The reduced answer to every step, in order."""
    seen = []
    with connect(peer) as raw:
        error, producer_id, epoch = init_producer_id(raw, versions["init"])
        seen.append(("init", error, epoch))
        for step in steps:
            if isinstance(step, Bump):
                answer = init_producer_id(raw, versions["init"],
                                          producer_id if step.producer_id == "own" else -1,
                                          epoch if step.epoch == "own" else -1)
                seen.append((step.label, answer[0], answer[1] == producer_id, answer[2]))
                continue
            pid = producer_id if step.producer == "own" else UNKNOWN_PRODUCER
            # The timestamp follows the sequence, so a retry carries the original's timestamp.
            batch = batch_of([b"%s %d" % (step.label.encode(), i) for i in range(step.count)],
                             producer_id=pid, producer_epoch=epoch + step.epoch,
                             base_sequence=step.base_sequence,
                             timestamp_ms=BASE_TIMESTAMP_MS + step.base_sequence % 1000)
            answer = produce_partition(raw, produce_version, produce_request(topic, batch))
            seen.append((step.label, ErrorCode(answer.error_code).name, answer.base_offset,
                         answer.log_start_offset, [e.batch_index for e in answer.record_errors],
                         answer.log_append_time_ms))
    return seen


def compare_scripts(peers, steps, versions, produce_version=None) -> dict[str, list[tuple]]:
    version = produce_version or versions["produce"]
    return {peer.name: run_script(peer, peer.create_topic(unique_topic("idempotence")), steps, versions, version)
            for peer in peers}


# Epochs are sent as the producer would after bumps: the broker does not ask the coordinator.
SEQUENCES = [
    Send("first batch", 0, count=3),
    Send("next batch", 3, count=2),
    Send("retry of the last batch", 3, count=2),
    Send("retry of an older cached batch", 0, count=3),
    Send("gap", 9),
    Send("in sequence after the gap was refused", 5),
    Send("retry with a different record count", 5, count=2),
    Send("new epoch from sequence 0", 0, count=2, epoch=1),
    Send("old epoch", 6),
    Send("retry of an old epoch's cached batch", 3, count=2),
    Send("newer epoch not from 0", 5, epoch=2),
    Send("negative sequence", -5, epoch=1),
    Send("unknown producer from 0", 0, producer="unknown"),
    Send("unknown producer's next", 1, count=2, producer="unknown"),
    Bump("init again with the current id and epoch (KIP-360)"),
    Bump("init with an id but no epoch", epoch="none"),
]


@pytest.mark.parametrize("produce_version", [None, OLDER_PRODUCE_VERSION], ids=["highest", "v7"])
def test_sequence_rules_answer_alike(peers, versions, produce_version):
    seen = compare_scripts(peers, SEQUENCES, versions, produce_version)
    assert seen["kafka"] == seen["pylog"]
    by_label = {step[0]: step[1:] for step in seen["pylog"]}
    assert by_label["retry of the last batch"][:2] == ("NONE", 3), "a duplicate gets its original offset"
    assert by_label["retry of the last batch"][-1] == BASE_TIMESTAMP_MS + 3, "and its max timestamp"
    assert by_label["first batch"][-1] == -1, "CreateTime: no log append time for a new batch"
    assert by_label["retry of an older cached batch"][:2] == ("NONE", 0)
    assert by_label["gap"][0] == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert by_label["old epoch"][0] == "INVALID_PRODUCER_EPOCH"
    assert by_label["retry of an old epoch's cached batch"][0] == "INVALID_PRODUCER_EPOCH"
    assert by_label["newer epoch not from 0"][0] == "OUT_OF_ORDER_SEQUENCE_NUMBER"
    assert by_label["init again with the current id and epoch (KIP-360)"] == ("NONE", False, 0), "a new id"
    assert by_label["init with an id but no epoch"][0] == "INVALID_REQUEST"


def test_a_producer_without_state_may_start_at_any_sequence(peers, versions):
    """Modern Kafka accepts any first sequence from a producer it has no state for (retention or
    expiry may have removed it), instead of UNKNOWN_PRODUCER_ID."""
    steps = [
        Send("own id, first batch at 42", 42, count=2),
        Send("own id, next", 44),
        Send("unknown id, first batch at 1000", 1000, producer="unknown"),
        Send("unknown id, next", 1001, producer="unknown"),
    ]
    seen = compare_scripts(peers, steps, versions)
    assert seen["kafka"] == seen["pylog"]
    assert [step[1] for step in seen["pylog"][1:]] == ["NONE"] * 4


# Intended difference: a batch wholly behind the last sequence but no longer among the 5 cached
# gets DUPLICATE_SEQUENCE_NUMBER (46, success to both clients) from pylog where Kafka says
# OUT_OF_ORDER_SEQUENCE_NUMBER (45), which librdkafka treats as fatal for a head-of-line retry
# (reference pitfall 8.6; broker/replica/producer_state.py rule 4).
ALREADY_WRITTEN = {"kafka": "OUT_OF_ORDER_SEQUENCE_NUMBER", "pylog": "DUPLICATE_SEQUENCE_NUMBER"}


def test_a_retry_older_than_the_cached_batches(peers, versions):
    steps = [*(Send(f"batch {i}", i) for i in range(7)),
             Send("retry of batch 2, the oldest cached", 2), Send("retry of batch 1, no longer cached", 1)]
    seen = compare_scripts(peers, steps, versions)
    assert seen["kafka"][:-1] == seen["pylog"][:-1]
    assert seen["pylog"][-2][1:3] == ("NONE", 2)
    for name, script in seen.items():
        assert script[-1][1:] == (ALREADY_WRITTEN[name], -1, 0, [], -1), name


def test_sequences_wrap_after_int32_max(peers, versions):
    steps = [
        Send("up to INT32_MAX - 1", INT32_MAX - 2, count=2),
        Send("across the wrap", INT32_MAX, count=3),  # sequences INT32_MAX, 0, 1
        Send("retry across the wrap", INT32_MAX, count=3),
        Send("after the wrap", 2),
        Send("0 again, behind and no longer cached", 0),
    ]
    seen = compare_scripts(peers, steps, versions)
    assert seen["kafka"][:-1] == seen["pylog"][:-1]
    by_label = {step[0]: step[1:] for step in seen["pylog"]}
    assert by_label["across the wrap"][:2] == ("NONE", 2)
    assert by_label["retry across the wrap"][:2] == ("NONE", 2)
    assert by_label["after the wrap"][:2] == ("NONE", 5)
    for name, script in seen.items():
        assert script[-1][1] == ALREADY_WRITTEN[name], name
