"""pylog's own client in consumer groups (``Consumer.subscribe``), on Apache Kafka (the reference
group coordinator) and on pylog: members split partitions and rebalance when one leaves, commits
survive a restart with no loss and no replay beyond the last commit, cooperative-sticky moves only
what must move (KIP-429), a static member's restart keeps its assignment without a rebalance
(KIP-345), and a member that stops polling loses its generation (CommitFailedError, on_lost).

Each member is polled by a thread of its own (a ``Consumer`` has one owner thread); the test
thread only reads what the members observed. Every wait is on a condition with a deadline. Each
scenario runs on both systems at once (``on_both_peers``): its waits overlap instead of adding up.
"""

from __future__ import annotations

import itertools
import re
import threading
import time

import pytest
from peer_support import on_both_peers, unique_topic

from broker.client import Consumer, Producer
from broker.client.group_state import CommitFailedError

PARTITIONS = 6
DEADLINE_S = 40.0
SESSION_TIMEOUT_MS = 6_000  # Kafka's group.min.session.timeout.ms
HEARTBEAT_INTERVAL_MS = 300
_numbers = itertools.count()


def unique_group(prefix: str) -> str:
    return f"client-{prefix}-{next(_numbers)}-{time.monotonic_ns() % 1_000_000}"


def wait_until(condition, what: str, timeout_s: float = DEADLINE_S):
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)
    return value


def produce(peer, topic: str, per_partition: int, start: int = 0) -> None:
    """Values ``p<partition>-<i>`` for i in [start, start + per_partition) to every partition."""
    with Producer(peer.bootstrap, linger_ms=5) as producer:
        for partition in range(PARTITIONS):
            for i in range(start, start + per_partition):
                producer.send(topic, b"p%d-%d" % (partition, i), partition=partition)
        producer.flush()


class Member:
    """One pylog ``Consumer`` in a group, polled by its own thread until ``stop``."""

    def __init__(self, peer, group: str, topics, commit_on_revoke: bool = False, **options) -> None:
        options = {"auto_offset_reset": "earliest", "session_timeout_ms": SESSION_TIMEOUT_MS,
                   "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS, **options}
        self.consumer = Consumer(peer.bootstrap, group_id=group, **options)
        self.records: list[tuple[int, int]] = []  # (partition, offset)
        self.events: list[tuple[str, tuple]] = []
        self.error: BaseException | None = None
        self.commit_every_poll = False
        self._stop = threading.Event()
        self._paused = threading.Event()
        def on_revoke(tps):
            self.events.append(("revoke", tuple(tps)))
            if commit_on_revoke:
                self.consumer.commit()  # the revoked partitions are still assigned here

        self.consumer.subscribe(topics, on_assign=lambda tps: self.events.append(("assign", tuple(tps))),
                                on_revoke=on_revoke,
                                on_lost=lambda tps: self.events.append(("lost", tuple(tps))))
        self.assignment: tuple = ()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if self._paused.is_set():
                    time.sleep(0.02)
                    continue
                for record in self.consumer.poll(100):
                    self.records.append((record.partition, record.offset))
                if self.commit_every_poll and self.consumer.assignment():
                    self.consumer.commit()
                self.assignment = tuple(sorted(p for _, p in self.consumer.assignment()))
        except BaseException as exc:  # surfaced by the test through ``error``
            self.error = exc

    def revoked(self) -> list[tuple]:
        return [tps for kind, tps in self.events if kind == "revoke"]

    def stop(self, close: bool = True) -> None:
        self._stop.set()
        self._thread.join(DEADLINE_S)
        assert not self._thread.is_alive(), "a member's poll thread did not stop"
        if close:
            self.consumer.close()
        assert self.error is None, f"member failed: {self.error!r}"


def split_of(members: list[Member]) -> list[tuple] | None:
    """Each member's partitions, once together they hold every partition exactly once."""
    held = [m.assignment for m in members]
    flat = sorted(p for h in held for p in h)
    return sorted(held) if all(held) and flat == list(range(PARTITIONS)) else None


def stop_all(members: list[Member]) -> None:
    for member in members:
        if member._thread.is_alive():
            member.stop()


@pytest.mark.parametrize("strategy, split_3, split_2", [
    ("range", [(0, 1), (2, 3), (4, 5)], [(0, 1, 2), (3, 4, 5)]),
    ("roundrobin", [(0, 3), (1, 4), (2, 5)], [(0, 2, 4), (1, 3, 5)]),
])
@on_both_peers()
def test_members_split_read_once_and_rebalance_when_one_leaves(peer, strategy, split_3, split_2):
    """Three members split 6 partitions two each (as the assignor deals them), read every record
    exactly once; one closes (LeaveGroup) and the other two take over its partitions, three
    each, resuming at the committed offsets (nothing read twice, nothing lost)."""
    topic, group = unique_topic("grp-split"), unique_group("split")
    peer.create_topic(topic, partitions=PARTITIONS)
    # auto-commit every 20 ms: rebalances happen with async commits in flight
    members = [Member(peer, group, [topic], partition_assignment_strategy=strategy, auto_commit_interval_ms=20)
               for _ in range(3)]
    try:
        split = wait_until(lambda: split_of(members), "a stable split over 3 members")
        assert split == split_3
        produce(peer, topic, 20)
        wait_until(lambda: sum(len(m.records) for m in members) >= PARTITIONS * 20, "every record read")
        read = sorted(r for m in members for r in m.records)
        assert read == [(p, o) for p in range(PARTITIONS) for o in range(20)]
        for member in members:
            member.commit_every_poll = True
        leaver, stayers = members[0], members[1:]
        leaver.stop()
        assert wait_until(lambda: split_of(stayers), "two members hold every partition") == split_2
        produce(peer, topic, 10, start=20)
        wait_until(lambda: sum(len(m.records) for m in members) >= PARTITIONS * 30, "the new records read")
        read = sorted(r for m in members for r in m.records)
        assert read == [(p, o) for p in range(PARTITIONS) for o in range(30)]  # none twice, none lost
    finally:
        stop_all(members)


@on_both_peers()
def test_commit_restart_resume_without_loss_or_replay(peer):
    """A member commits what it processed (explicit offsets, auto-commit off), closes; a new
    member of the group starts exactly at the committed offsets. Then auto-commit: close commits
    the positions, and the next member reads only what came after."""
    topic, group = unique_topic("grp-resume"), unique_group("resume")
    peer.create_topic(topic, partitions=PARTITIONS)
    produce(peer, topic, 10)
    with Consumer(peer.bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                  session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS) as first:
        first.subscribe([topic])
        seen: list = []
        wait_until(lambda: seen.extend(first.poll(200)) or len(seen) >= PARTITIONS * 10, "first read")
        first.commit({(topic, p): 4 for p in range(PARTITIONS)})  # processed 0..3 of each partition
        assert {tp: om.offset for tp, om in first.committed([(topic, p) for p in range(PARTITIONS)]).items()} \
            == {(topic, p): 4 for p in range(PARTITIONS)}
    with Consumer(peer.bootstrap, group_id=group, auto_offset_reset="earliest",
                  auto_commit_interval_ms=200, session_timeout_ms=SESSION_TIMEOUT_MS,
                  heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS) as second:
        second.subscribe([topic])
        again: list = []
        wait_until(lambda: again.extend(second.poll(200)) or len(again) >= PARTITIONS * 6, "resumed read")
        assert sorted((r.partition, r.offset) for r in again) == [(p, o) for p in range(PARTITIONS) for o in range(4, 10)]
        assert all(second.position((topic, p)) == 10 for p in range(PARTITIONS))
    produce(peer, topic, 5, start=10)
    with Consumer(peer.bootstrap, group_id=group, auto_offset_reset="earliest",
                  session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS) as third:
        third.subscribe([topic])
        last: list = []
        wait_until(lambda: last.extend(third.poll(200)) or len(last) >= PARTITIONS * 5, "read after restart")
        assert sorted((r.partition, r.offset) for r in last) == [(p, o) for p in range(PARTITIONS) for o in range(10, 15)]


@on_both_peers()
def test_cooperative_sticky_moves_only_what_must_move(peer):
    """A cooperative-sticky member owning all 6 partitions gives up exactly 3 when a second
    member joins (never revoking everything), keeps the other 3 throughout, and the newcomer gets
    the 3 after the follow-up rebalance (KIP-429)."""
    topic, group = unique_topic("grp-coop"), unique_group("coop")
    peer.create_topic(topic, partitions=PARTITIONS)
    first = Member(peer, group, [topic], partition_assignment_strategy="cooperative-sticky")
    members = [first]
    try:
        wait_until(lambda: first.assignment == tuple(range(PARTITIONS)), "the first member holds everything")
        second = Member(peer, group, [topic], partition_assignment_strategy="cooperative-sticky")
        members.append(second)
        split = wait_until(lambda: split_of(members), "a split over 2 members")
        assert [len(h) for h in split] == [3, 3]
        kept = set(first.assignment)
        revoked = first.revoked()
        assert len(revoked) == 1 and len(revoked[0]) == 3, first.events
        assert kept.isdisjoint(p for _, p in revoked[0])
        assert all(kind != "lost" for kind, _ in first.events)
        assigned_to_first = [tps for kind, tps in first.events if kind == "assign"]
        assert assigned_to_first[0] == tuple((topic, p) for p in range(PARTITIONS))
        assert all(tps == () for tps in assigned_to_first[1:])  # nothing new, nothing re-assigned
    finally:
        stop_all(members)


@on_both_peers()
def test_static_member_restart_keeps_its_assignment_without_rebalance(peer):
    """Two static members (group.instance.id); one closes (no LeaveGroup) and a new consumer
    with the same instance id takes its place within session.timeout.ms: it gets the same
    partitions, and the other member sees no revocation and no new generation."""
    topic, group = unique_topic("grp-static"), unique_group("static")
    peer.create_topic(topic, partitions=PARTITIONS)
    options = {"partition_assignment_strategy": "range", "session_timeout_ms": 20_000}
    a = Member(peer, group, [topic], group_instance_id="instance-a", **options)
    b = Member(peer, group, [topic], group_instance_id="instance-b", **options)
    members = [a, b]
    try:
        assert wait_until(lambda: split_of(members), "a stable split") == [(0, 1, 2), (3, 4, 5)]
        assert a.assignment == (0, 1, 2)  # static members are ordered by instance id
        generation = a.consumer.group_metadata()["generation_id"]
        events_before = list(a.events)
        b.stop()
        b2 = Member(peer, group, [topic], group_instance_id="instance-b", **options)
        members = [a, b2]
        wait_until(lambda: b2.assignment == (3, 4, 5), "the restarted static member's partitions")
        # a rebalance would reach member a through a heartbeat: let it make three more first
        beats = a.consumer.statistics()["heartbeats"]
        wait_until(lambda: a.consumer.statistics()["heartbeats"] >= beats + 3, "three more heartbeats of a")
        assert a.events == events_before
        assert a.assignment == (0, 1, 2)
        assert a.consumer.group_metadata()["generation_id"] == generation
        assert b2.consumer.group_metadata()["generation_id"] == generation
    finally:
        stop_all(members)


@on_both_peers()
def test_a_member_that_stops_polling_loses_its_generation(peer):
    """max.poll.interval.ms: a member that does not poll in time leaves the group; its commit
    then raises CommitFailedError, its partitions are reported lost, and the other member gets
    all of them. Its next poll rejoins."""
    topic, group = unique_topic("grp-slow"), unique_group("slow")
    peer.create_topic(topic, partitions=PARTITIONS)
    slow = Consumer(peer.bootstrap, group_id=group, auto_offset_reset="earliest", max_poll_interval_ms=1_500,
                    session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
                    partition_assignment_strategy="range", enable_auto_commit=False)
    lost: list = []
    slow.subscribe([topic], on_lost=lost.append)
    other = None
    try:
        wait_until(lambda: slow.poll(100) is not None and len(slow.assignment()) == PARTITIONS, "slow joined")
        other = Member(peer, group, [topic], partition_assignment_strategy="range")
        wait_until(lambda: (slow.poll(100) is not None and len(slow.assignment()) == 3
                            and len(other.assignment) == 3), "a split over 2 members")
        # the slow member stops polling; its heartbeat thread leaves after max.poll.interval.ms
        wait_until(lambda: other.assignment == tuple(range(PARTITIONS)), "the other member holds everything")
        with pytest.raises(CommitFailedError):
            slow.commit({(topic, p): 0 for p, in [(0,)]})
        slow.poll(100)  # rejoins: first its partitions are lost (not revoked)
        assert lost and len(lost[0]) == 3
        wait_until(lambda: slow.poll(100) is not None and len(slow.assignment()) == 3, "slow rejoined")
    finally:
        if other is not None:
            other.stop()
        slow.close()


@on_both_peers()
def test_console_consume_with_a_group_resumes_where_the_last_run_stopped(peer):
    """``pylog consume --group G``: the first run prints 5 records from the beginning and commits
    them on exit; the second run of the same group prints the rest, nothing twice."""
    import argparse
    import io

    from broker.tools.produce_consume import add_consume_parser, run_consume

    topic, group = unique_topic("grp-cli"), unique_group("cli")
    peer.create_topic(topic, partitions=1)
    with Producer(peer.bootstrap) as producer:
        for i in range(8):
            producer.send(topic, b"r%d" % i, partition=0)
        producer.flush()
    parser = argparse.ArgumentParser()
    add_consume_parser(parser.add_subparsers(dest="command"))

    def run(*argv: str) -> bytes:
        out = io.BytesIO()
        args = parser.parse_args(["consume", "--bootstrap-server", peer.bootstrap, "--topic", topic,
                                  "--group", group, "--from-beginning", *argv])
        assert run_consume(args, out, io.StringIO()) == 0
        return out.getvalue()

    assert run("--max-messages", "5") == b"r0\nr1\nr2\nr3\nr4\n"
    assert run("--max-messages", "3") == b"r5\nr6\nr7\n"


@on_both_peers()
def test_a_pattern_subscription_follows_matching_topics(peer):
    """``subscribe(pattern=...)`` takes every matching topic (whole-name match), not the others,
    and a matching topic created later joins the assignment at the next metadata refresh."""
    from broker.client import ClientConfig

    prefix = unique_topic("grp-pat")
    peer.create_topic(f"{prefix}-a", partitions=2)
    peer.create_topic(f"{prefix}-b", partitions=1)
    peer.create_topic(f"x-{prefix}-c", partitions=1)
    consumer = Consumer(peer.bootstrap, group_id=unique_group("pattern"), auto_offset_reset="earliest",
                        session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
                        config=ClientConfig(metadata_max_age_ms=300))
    try:
        consumer.subscribe(pattern=re.escape(prefix) + "-.*")
        expected = [(f"{prefix}-a", 0), (f"{prefix}-a", 1), (f"{prefix}-b", 0)]
        wait_until(lambda: consumer.poll(100) is not None and sorted(consumer.assignment()) == expected,
                   "the matching topics' partitions")
        peer.create_topic(f"{prefix}-d", partitions=1)
        wait_until(lambda: consumer.poll(100) is not None and (f"{prefix}-d", 0) in consumer.assignment(),
                   "the new matching topic")
        assert sorted(consumer.subscription()) == [f"{prefix}-a", f"{prefix}-b", f"{prefix}-d"]
    finally:
        consumer.close()


@on_both_peers()
def test_commit_in_on_revoke_hands_partitions_over_without_replay(peer):
    """Auto-commit off, the application commits in ``on_revoke`` (the revoked partitions are
    still assigned then, as in Java): when a second member joins, it starts where the first
    stopped, and every record is read exactly once between them."""
    topic, group = unique_topic("grp-revoke"), unique_group("revoke")
    peer.create_topic(topic, partitions=PARTITIONS)
    produce(peer, topic, 10)
    options = {"partition_assignment_strategy": "range", "enable_auto_commit": False, "commit_on_revoke": True}
    first = Member(peer, group, [topic], **options)
    members = [first]
    try:
        wait_until(lambda: len(first.records) >= PARTITIONS * 10, "the first member read everything")
        second = Member(peer, group, [topic], **options)
        members.append(second)
        wait_until(lambda: split_of(members), "a split over 2 members")
        produce(peer, topic, 5, start=10)
        wait_until(lambda: len(first.records) + len(second.records) >= PARTITIONS * 15, "the new records")
        read = sorted(first.records + second.records)
        assert read == [(p, o) for p in range(PARTITIONS) for o in range(15)]
        assert all(o >= 10 for _, o in second.records)
    finally:
        stop_all(members)


@pytest.mark.parametrize("first", ["pylog", "confluent"])
@on_both_peers()
def test_pylog_shares_a_group_with_librdkafka_and_kafka_python(peer, first):
    """pylog's client, confluent-kafka and kafka-python in one range group: whichever joined
    first leads (pylog encodes the assignment for the others, or decodes theirs), the three split
    6 partitions two each and read every record exactly once."""
    from group_clients import GroupMember

    topic, group = unique_topic("grp-mixed"), unique_group("mixed")
    peer.create_topic(topic, partitions=PARTITIONS)
    others: list = []
    members: list = []

    def pylog_member():
        member = Member(peer, group, [topic], partition_assignment_strategy="range")
        members.append(member)
        return member

    try:
        if first == "pylog":
            ours = pylog_member()
            wait_until(lambda: ours.assignment, "pylog's member joined first")
        others.append(GroupMember("confluent", peer.bootstrap, group, [topic]))
        if first != "pylog":
            wait_until(lambda: others[0].assignment, "confluent-kafka's member joined first")
        others.append(GroupMember("kafka-python", peer.bootstrap, group, [topic]))
        if first != "pylog":
            ours = pylog_member()

        def held() -> list[tuple] | None:
            sets = [ours.assignment, *(tuple(sorted(p for _, p in o.assignment)) for o in others)]
            flat = sorted(p for s in sets for p in s)
            return sorted(sets) if all(len(s) == 2 for s in sets) and flat == list(range(PARTITIONS)) else None

        assert wait_until(held, "a split over the three clients") == [(0, 1), (2, 3), (4, 5)]
        produce(peer, topic, 10)

        def read() -> list[tuple[int, int]]:
            return sorted([*ours.records, *((p, o) for o_member in others for _, p, o, _ in o_member.records)])

        wait_until(lambda: len(read()) >= PARTITIONS * 10, "every record read")
        assert read() == [(p, o) for p in range(PARTITIONS) for o in range(10)]
    finally:
        for other in others:
            other.stop_polling()
        stop_all(members)
        for other in others:
            other.stop()


@on_both_peers()
def test_an_assign_consumer_with_a_group_id_commits_and_resumes(peer):
    """``assign()`` with a ``group_id``: no membership, "simple" commits (generation -1), and the
    next consumer of that group starts each partition at its committed offset (Java's
    ``assign`` + ``commitSync``; how Spark-style readers keep offsets)."""
    topic, group = unique_topic("grp-assign"), unique_group("assign")
    peer.create_topic(topic, partitions=2)
    produce_to = [(p, i) for p in range(2) for i in range(6)]
    with Producer(peer.bootstrap) as producer:
        for p, i in produce_to:
            producer.send(topic, b"%d" % i, partition=p)
        producer.flush()
    tps = [(topic, 0), (topic, 1)]
    with Consumer(peer.bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False) as first:
        first.assign(tps)
        got: list = []
        wait_until(lambda: got.extend(first.poll(200)) or len(got) >= 12, "first read")
        first.commit({(topic, 0): 2, (topic, 1): 5})
        assert first.group_metadata()["generation_id"] == -1
    with Consumer(peer.bootstrap, group_id=group, auto_offset_reset="earliest") as second:
        second.assign(tps)
        assert [second.position(tp) for tp in tps] == [2, 5]
        rest: list = []
        wait_until(lambda: rest.extend(second.poll(200)) or len(rest) >= 5, "the rest")
        assert sorted((r.partition, r.offset) for r in rest) == [(0, 2), (0, 3), (0, 4), (0, 5), (1, 5)]


@on_both_peers()
def test_a_second_member_with_the_same_instance_id_fences_the_first(peer):
    """KIP-345: a new consumer with a ``group.instance.id`` already in the group takes its place;
    the old one learns it is fenced (FENCED_INSTANCE_ID on its heartbeat or commit) and its next
    poll raises ``FencedInstanceIdError``."""
    from broker.client import FencedInstanceIdError

    topic, group = unique_topic("grp-fence"), unique_group("fence")
    peer.create_topic(topic, partitions=2)
    old = Consumer(peer.bootstrap, group_id=group, group_instance_id="same", auto_offset_reset="earliest",
                   session_timeout_ms=SESSION_TIMEOUT_MS, heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS)
    new = None
    try:
        old.subscribe([topic])
        wait_until(lambda: old.poll(100) is not None and len(old.assignment()) == 2, "the first member")
        new = Member(peer, group, [topic], group_instance_id="same")
        wait_until(lambda: new.assignment == (0, 1), "the new member with the same instance id")

        def fenced() -> bool:
            try:
                old.poll(100)
                old.commit()
            except FencedInstanceIdError:
                return True
            return False

        wait_until(fenced, "the old member is fenced")
    finally:
        if new is not None:
            new.stop()
        old.close()
