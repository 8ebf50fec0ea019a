"""``TxnCoordinatorService`` (the asyncio shell of the transaction coordinator) against a fake
core and a real ``ReplicaManager``, and its ``MarkerSender`` against fake leaders: loads with the
leader epoch as coordinator epoch, reloads on a new epoch, appends replicated before
``write_done``, producer ids from the broker's source, markers grouped per destination broker,
retried until written, deleted topics counted as written, fenced jobs dropped, verification
in-process or remote."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from broker.cluster.layout import BrokerRegistration, EndPoint, PartitionState
from broker.coordinator.txn.core import Append, AllocateProducerId, Reply, WriteMarkers, partition_for
from broker.log import LogConfig, LogManager
from broker.replica.manager import ReplicaManager, ReplicaSettings
from broker.replica.purgatory import Purgatory
from broker.server.metadata import ClusterSnapshot, topic_metadata
from broker.server.txn_coordinator import TxnCoordinatorService, TxnServiceSettings
from broker.server.txn_markers import MarkerJob, MarkerSender
from broker.wire import ErrorCode

TXN = "__transaction_state"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class FakeCore:
    """Records every input. Requests: ("write", partition, records) appends; ("pid",) allocates;
    ("markers", partitions) writes markers; "park" waits; anything else is answered at once."""

    def __init__(self) -> None:
        self.calls: list = []
        self.parked: list = []
        self.waiting: dict = {}  # write / request / marker id -> token
        self.deadline = None
        self._ids = iter(range(1, 1_000_000))
        self.verdict = ErrorCode.NONE
        self.markers: dict = {}  # marker id -> __transaction_state partition

    def handle(self, token, api_key, api_version, request, now_ms):
        self.calls.append(("handle", api_key, request))
        if request == "park":
            self.parked.append(token)
            return []
        kind = request[0] if isinstance(request, tuple) else None
        ident = next(self._ids)
        if kind == "write":
            self.waiting[ident] = token
            return [Append(ident, request[1], request[2])]
        if kind == "pid":
            self.waiting[ident] = token
            return [AllocateProducerId(ident)]
        if kind == "markers":
            self.waiting[ident] = token
            self.markers[ident] = request[2] if len(request) > 2 else 0  # its txn partition
            return [WriteMarkers(ident, 7, 3, True, 5, tuple(request[1]))]
        return [Reply(token, ("answer", request))]

    def begin_load(self, partition, coordinator_epoch):
        self.calls.append(("begin_load", partition, coordinator_epoch))

    def load_partition(self, partition, records, now_ms):
        self.calls.append(("load", partition, list(records)))
        return []

    def marker_ids(self, partition):
        return [i for i, p in self.markers.items() if p == partition]

    def unload_partition(self, partition):
        self.calls.append(("unload", partition))
        self.markers = {i: p for i, p in self.markers.items() if p != partition}
        parked, self.parked = self.parked, []
        return [Reply(token, "NOT_COORDINATOR") for token in parked]

    def _answer(self, ident, answer):
        token = self.waiting.pop(ident, None)
        return [] if token is None else [Reply(token, answer)]

    def write_done(self, write_id, error_code, now_ms):
        self.calls.append(("write_done", write_id, error_code))
        return self._answer(write_id, ("written", error_code))

    def producer_id_allocated(self, request_id, producer_id, now_ms):
        return self._answer(request_id, ("pid", producer_id))

    def markers_written(self, marker_id, now_ms):
        self.calls.append(("markers_written", marker_id))
        return self._answer(marker_id, "markers written")

    def tick(self, now_ms):
        self.calls.append(("tick", now_ms))
        self.deadline = None
        return []

    def next_deadline(self):
        return self.deadline

    def verify(self, transactional_id, producer_id, producer_epoch, topic, partition):
        self.calls.append(("verify", transactional_id, topic, partition))
        return self.verdict

    def of(self, kind):
        return [c[1:] for c in self.calls if c[0] == kind]


class World:
    def __init__(self, tmp_path, pids=None, markers=None, remote_verify=None, core=None) -> None:
        self.clock = Clock()
        self.replicas = ReplicaManager(1, LogManager([tmp_path], LogConfig(), self.clock), Purgatory(100),
                                       self.clock, ReplicaSettings())
        self.core = core or FakeCore()
        self.next_pid = iter(range(1000, 2000))

        async def next_producer_id():
            if pids == "fail":
                raise RuntimeError("zookeeper down")
            return next(self.next_pid)

        self.service = TxnCoordinatorService(self.core, self.replicas, TxnServiceSettings(num_partitions=4),
                                             self.clock, next_producer_id, markers, remote_verify)
        self.replicas.add_leadership_listener(self.service.on_leadership_change)

    def lead(self, partition, leader, epoch, replicas=(1,), isr=None, min_isr=1):
        state = PartitionState(leader, epoch, tuple(isr or replicas), 1)
        self.replicas.become_leader_or_follower(1, [((TXN, partition), replicas, state, epoch)],
                                                {TXN: {"cleanup.policy": "compact",
                                                       "min.insync.replicas": str(min_isr)}})


async def until(condition, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def run(world, body):
    async def main():
        runner = asyncio.create_task(world.service.run())
        try:
            await body()
        finally:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            world.replicas.close()
    asyncio.run(asyncio.wait_for(main(), 20))


def test_load_with_the_leader_epoch_appends_and_reload_on_a_new_epoch(tmp_path):
    world = World(tmp_path)

    async def body():
        world.lead(2, 1, 4)
        await until(lambda: world.core.of("load"))
        assert world.core.of("begin_load") == [(2, 4)]
        assert await world.service.handle(24, 3, "ping") == ("answer", "ping")
        records = [(b"k1", b"v1"), (b"k2", None)]
        assert await world.service.handle(26, 4, ("write", 2, records)) == ("written", 0)
        assert world.replicas.get(TXN, 2).high_watermark == 2
        # An append to a partition not led here fails at once, without touching a log.
        assert await world.service.handle(26, 4, ("write", 3, records)) == ("written", 6)
        # The same leader at a new epoch is a new coordinator epoch: unloaded and loaded again,
        # the load reading what was written (a tombstone kept as None).
        parked = asyncio.create_task(world.service.handle(22, 4, "park"))
        await until(lambda: world.core.parked)
        world.lead(2, 1, 5)
        assert await parked == "NOT_COORDINATOR"
        await until(lambda: len(world.core.of("load")) == 2)
        assert world.core.of("begin_load") == [(2, 4), (2, 5)]
        assert world.core.of("load")[1] == (2, records)
        assert world.service.statistics().loaded == {2: 5}
        # Leadership lost: unloaded; the same epoch announced twice changes nothing.
        world.lead(2, 1, 5)
        world.lead(2, 2, 6, replicas=(1, 2))
        assert world.core.of("unload") == [(2,), (2,)]

    run(world, body)


def test_append_waits_for_the_isr_and_fails_below_min_isr(tmp_path):
    world = World(tmp_path)

    async def body():
        world.lead(0, 1, 0, replicas=(1, 2), isr=(1, 2))
        await until(lambda: world.core.of("load"))
        pending = asyncio.create_task(world.service.handle(26, 4, ("write", 0, [(b"k", b"v")])))
        await asyncio.sleep(0.05)
        assert not pending.done(), "acks=all: the follower has not fetched"
        world.lead(0, 2, 1, replicas=(1, 2))  # leadership lost: the write fails
        assert await pending == ("written", ErrorCode.NOT_LEADER_OR_FOLLOWER)
        # transaction.state.log.min.isr: below it, nothing is appended.
        world.lead(1, 1, 0, replicas=(1, 2), isr=(1,), min_isr=2)
        await until(lambda: len(world.core.of("load")) == 2)
        assert await world.service.handle(26, 4, ("write", 1, [(b"k", b"v")])) == \
            ("written", ErrorCode.NOT_ENOUGH_REPLICAS)
        assert world.replicas.get(TXN, 1).log.log_end_offset == 0

    run(world, body)


def test_producer_ids_and_their_failure(tmp_path):
    world = World(tmp_path)

    async def body():
        assert await world.service.handle(22, 4, ("pid",)) == ("pid", 1000)
        assert await world.service.handle(22, 4, ("pid",)) == ("pid", 1001)

    run(world, body)
    failing = World(tmp_path / "f", pids="fail")

    async def body2():
        assert await failing.service.handle(22, 4, ("pid",)) == ("pid", -1)

    run(failing, body2)


def test_timer_ticks_at_the_core_deadline(tmp_path):
    world = World(tmp_path)

    async def body():
        world.core.deadline = world.clock.now + 30
        await world.service.handle(24, 3, "nudge")  # a core call: the shell re-reads the deadline
        world.clock.now += 30
        await until(lambda: world.core.of("tick"))
        assert world.core.of("tick") == [(world.clock.now,)]

    run(world, body)


def test_verify_is_in_process_for_coordinated_ids_and_remote_otherwise(tmp_path):
    asked = []

    async def remote(*args):
        asked.append(args)
        return ErrorCode.INVALID_TXN_STATE

    world = World(tmp_path, remote_verify=remote)
    ours = next(t for t in (f"t{i}" for i in range(100)) if partition_for(t, 4) == 1)
    theirs = next(t for t in (f"t{i}" for i in range(100)) if partition_for(t, 4) != 1)

    async def body():
        world.lead(1, 1, 0)
        await until(lambda: world.core.of("begin_load"))
        assert await world.service.verify(ours, 7, 0, "events", 3) == ErrorCode.NONE
        assert world.core.of("verify") == [(ours, "events", 3)]
        assert await world.service.verify(theirs, 7, 0, "events", 3) == ErrorCode.INVALID_TXN_STATE
        assert asked == [(theirs, 7, 0, "events", 3)] and len(world.core.of("verify")) == 1

    run(world, body)


# ------------------------------------------------------------------------------ marker sender

@dataclass
class Request:
    entries: list


def _snapshot(leaders: dict, brokers=(1, 2, 3)):
    """``leaders``: topic -> [leader per partition]."""
    topics = {}
    for name, per_partition in leaders.items():
        topics[name] = topic_metadata(name, {i: (1, 2, 3) for i in range(len(per_partition))},
                                      {i: (PartitionState(leader, 0, (1, 2, 3), 1), 0)
                                       for i, leader in enumerate(per_partition)}, {})
    registrations = {b: BrokerRegistration(b, (EndPoint("PLAINTEXT", "127.0.0.1", 9000 + b, "PLAINTEXT"),), 0)
                     for b in brokers}
    return ClusterSnapshot(brokers=registrations, topics=topics)


class Leaders:
    """Fake partition leaders: local writes and connections to brokers, each answering per
    partition with ``answers[(broker, topic, partition)]`` (a list consumed per request; NONE
    once empty)."""

    def __init__(self) -> None:
        self.requests: list = []  # (broker, [(producer id, topic, partition)])
        self.answers: dict = {}

    def answer(self, broker, request):
        keys = [(e.job.producer_id, *k) for e in request.entries for k in e.partitions]
        self.requests.append((broker, keys))
        errors = {}
        for pid, topic, partition in keys:
            queue = self.answers.get((broker, topic, partition), [])
            errors[(pid, topic, partition)] = queue.pop(0) if queue else ErrorCode.NONE
        return errors

    async def local(self, request):
        return self.answer(1, request)

    def connect(self, host, port):
        leaders = self

        class Connection:
            def __init__(self):
                self.host, self.port = host, port

            async def request(self, api_key, version, body):
                assert (api_key, version) == (27, 1)
                if leaders.answers.get((port - 9000, "down")):
                    leaders.answers[(port - 9000, "down")].pop()
                    raise ConnectionError("refused")
                return leaders.answer(port - 9000, body)

            async def close(self):
                pass

        return Connection()


def sender_world(snapshot_box, leaders, written):
    sender = MarkerSender(1, lambda: snapshot_box[0], "PLAINTEXT", leaders.local, leaders.connect,
                          backoff_ms=5, backoff_max_ms=20, build_request=Request,
                          parse_response=lambda errors: errors)
    sender.written = written  # what run_sender hands to run() as on_written
    return sender


def run_sender(sender, body):
    async def main():
        runner = asyncio.create_task(sender.run(sender.written.append))
        try:
            await body()
        finally:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
    asyncio.run(asyncio.wait_for(main(), 20))


def test_markers_are_grouped_per_leader_local_ones_in_process():
    box = [_snapshot({"a": [1, 2, 3], "b": [2, 1, 3]})]
    leaders, written = Leaders(), []
    sender = sender_world(box, leaders, written)

    async def body():
        sender.submit(MarkerJob(1, 7, 0, True, 0), [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2)])
        await until(lambda: written)
        assert written == [1]
        by_broker = {b: sorted(k) for b, k in leaders.requests}
        assert by_broker == {1: [(7, "a", 0), (7, "b", 1)], 2: [(7, "a", 1), (7, "b", 0)],
                             3: [(7, "a", 2), (7, "b", 2)]}
        assert len(leaders.requests) == 3

    run_sender(sender, body)


def test_markers_retry_until_written_following_a_new_leader_and_skip_deleted_topics():
    box = [_snapshot({"a": [2, 2], "gone": [3]})]
    leaders, written = Leaders(), []
    leaders.answers[(2, "a", 1)] = [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 100  # broker 2 lost a-1
    leaders.answers[(3, "down")] = [True]
    sender = sender_world(box, leaders, written)

    async def body():
        sender.submit(MarkerJob(4, 9, 1, False, 2), [("a", 0), ("a", 1), ("gone", 0)])
        await until(lambda: sum(1 for b, k in leaders.requests if (9, "a", 1) in k) >= 3)
        assert not written, "a-1 is not written yet"
        box[0] = _snapshot({"a": [2, 3]})  # metadata: a-1 now led by 3, topic "gone" deleted
        await until(lambda: written)
        assert written == [4]
        assert leaders.requests[-1] == (3, [(9, "a", 1)])
        assert sender.pending() == 0 and sender.retries >= 3

    run_sender(sender, body)


@pytest.mark.parametrize("refusal", [ErrorCode.TRANSACTION_COORDINATOR_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH])
def test_a_fenced_marker_job_is_dropped_and_never_reported_written(refusal):
    box = [_snapshot({"a": [1, 2]})]
    leaders, written = Leaders(), []
    leaders.answers[(2, "a", 1)] = [refusal]
    sender = sender_world(box, leaders, written)

    async def body():
        sender.submit(MarkerJob(5, 9, 1, True, 2), [("a", 0), ("a", 1)])
        sender.submit(MarkerJob(6, 10, 1, True, 2), [("a", 0)])
        await until(lambda: written == [6] and sender.pending() == 0)
        await asyncio.sleep(0.05)
        assert written == [6]
        assert sum(1 for _, keys in leaders.requests if (9, "a", 1) in keys) == 1, "not retried"

    run_sender(sender, body)


def test_a_leader_that_cannot_hold_markers_counts_as_written():
    box = [_snapshot({"a": [2, 2]})]
    leaders, written = Leaders(), []
    leaders.answers[(2, "a", 0)] = [ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT]
    leaders.answers[(2, "a", 1)] = [ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NONE]
    sender = sender_world(box, leaders, written)

    async def body():
        sender.submit(MarkerJob(8, 9, 1, True, 2), [("a", 0), ("a", 1)])
        await until(lambda: written)
        assert written == [8]
        assert leaders.requests == [(2, [(9, "a", 0), (9, "a", 1)]), (2, [(9, "a", 1)])]

    run_sender(sender, body)


def test_the_service_reports_markers_written_to_the_core(tmp_path):
    box = [_snapshot({"a": [1, 2]})]
    leaders = Leaders()
    world = World(tmp_path)
    sender = MarkerSender(1, lambda: box[0], "PLAINTEXT", leaders.local, leaders.connect,
                          backoff_ms=5, build_request=Request,
                          parse_response=lambda errors: errors)
    world.service.markers = sender

    async def body():
        assert await world.service.handle(26, 4, ("markers", [("a", 0), ("a", 1)])) == "markers written"
        assert len(world.core.of("markers_written")) == 1

    run(world, body)


def test_close_answers_parked_requests_and_forgets_marker_jobs(tmp_path):
    box = [_snapshot({"a": [2]})]
    leaders = Leaders()
    leaders.answers[(2, "a", 0)] = [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 1000
    world = World(tmp_path)
    sender = MarkerSender(1, lambda: box[0], "PLAINTEXT", leaders.local, leaders.connect,
                          backoff_ms=5, build_request=Request,
                          parse_response=lambda errors: errors)
    world.service.markers = sender

    async def body():
        world.lead(0, 1, 0)
        world.lead(1, 1, 0)
        await until(lambda: len(world.core.of("load")) == 2)
        parked = asyncio.create_task(world.service.handle(22, 4, "park"))
        markers = asyncio.create_task(world.service.handle(26, 4, ("markers", [("a", 0)])))
        await until(lambda: world.core.parked and len(leaders.requests) >= 2)
        world.service.close()
        assert await parked == "NOT_COORDINATOR"
        assert world.core.of("unload") == [(0,), (1,)] and sender.pending() == 0
        sent = len(leaders.requests)
        await asyncio.sleep(0.1)
        assert len(leaders.requests) <= sent + 1, "the cleared job stopped retrying"
        world.lead(2, 1, 0)  # after close, leadership changes are ignored
        assert world.core.of("begin_load") == [(0, 0), (1, 0)]
        markers.cancel()

    run(world, body)


def test_marker_jobs_of_an_unloaded_partition_stop_retrying(tmp_path):
    """A job whose leader keeps refusing retries until its ``__transaction_state`` partition
    leaves this broker; then it stops (the new coordinator resends) while another partition's
    job goes on."""
    box = [_snapshot({"a": [2]})]
    leaders = Leaders()
    leaders.answers[(2, "a", 0)] = [ErrorCode.NOT_LEADER_OR_FOLLOWER] * 10_000
    world = World(tmp_path)
    sender = MarkerSender(1, lambda: box[0], "PLAINTEXT", leaders.local, leaders.connect,
                          backoff_ms=5, backoff_max_ms=5, build_request=Request,
                          parse_response=lambda errors: errors)
    world.service.markers = sender

    async def body():
        world.lead(0, 1, 0)
        world.lead(1, 1, 0)
        await until(lambda: len(world.core.of("load")) == 2)
        asyncio.create_task(world.service.handle(26, 4, ("markers", [("a", 0)], 0)))
        asyncio.create_task(world.service.handle(26, 4, ("markers", [("a", 0)], 1)))
        await until(lambda: sender.pending() == 2 and len(leaders.requests) >= 4)
        world.lead(0, 2, 1)  # partition 0 now led by broker 2: unloaded here
        await until(lambda: world.core.of("unload") == [(0,)])
        assert sender.pending() == 1 and sender.queued() <= 1
        sent = sum(1 for _, keys in leaders.requests for _ in keys)
        await until(lambda: sum(1 for _, keys in leaders.requests for _ in keys) >= sent + 5)
        # every request since carries only the job of partition 1 (one marker), never both
        assert all(len(keys) == 1 for _, keys in leaders.requests[-5:])

    run(world, body)


def test_implicit_adds_waiting_together_are_one_state_write(tmp_path):
    """Three partition leaders' implicit adds (transaction version 2) of the next transaction
    arrive while the previous one's markers are out. When it completes they are asked together:
    one Ongoing write for the union (was one write each, one after the other), and each leader
    gets NONE for its own partitions. The real core behind the shell."""
    from broker.coordinator.txn.core import TxnCoordinatorCore, TxnSettings
    from broker.coordinator.txn.state import TxnState
    from broker.wire.apis.end_txn import EndTxnRequest
    from broker.wire.apis.init_producer_id import InitProducerIdRequest

    tid = "coalesced"
    world = World(tmp_path, core=TxnCoordinatorCore(TxnSettings(num_partitions=4)))
    service, core = world.service, world.core
    index = partition_for(tid, 4)
    leaders = [[("t", 0), ("t", 1)], [("t", 2), ("t", 3)], [("u", 0), ("u", 1)]]

    async def body():
        world.lead(index, 1, 0)
        await until(lambda: index in service.stats.loaded)
        init = await service.handle(22, 4, InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1))
        pid, epoch = init.producer_id, init.producer_epoch
        assert await service.add_partitions(tid, pid, epoch, [("t", 0)]) == {("t", 0): ErrorCode.NONE}
        end = await service.handle(26, 5, EndTxnRequest(transactional_id=tid, producer_id=pid,
                                                        producer_epoch=epoch, committed=True))
        assert end.error_code == ErrorCode.NONE
        (marker_id,) = core.marker_ids(index)  # PrepareCommit written, its markers out
        adds = [asyncio.create_task(service.add_partitions(tid, pid, end.producer_epoch, partitions))
                for partitions in leaders]
        await until(lambda: sum(map(len, service._adds_waiting.values())) == 3)
        appends = service.stats.appends
        service.markers_written(marker_id)
        answers = await asyncio.gather(*adds)
        assert answers == [{tp: ErrorCode.NONE for tp in partitions} for partitions in leaders]
        assert service.stats.appends - appends == 2, "CompleteCommit, then one Ongoing for all three"
        shard, _ = core.route(tid)
        meta = shard.txns[tid]
        assert meta.state is TxnState.Ongoing and meta.partitions == {tp for ps in leaders for tp in ps}

    run(world, body)
