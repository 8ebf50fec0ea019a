"""``GroupCoordinatorService`` (the asyncio shell of the group coordinator) against a fake core
and a real ``ReplicaManager`` with logs in a temporary directory: leadership changes load and
unload ``__consumer_offsets`` partitions, ``Append`` effects become replicated batches whose
``write_done`` comes in append order (or with the produce error), requests park until the core
replies, and the timer ticks at the core's deadlines."""

from __future__ import annotations

import asyncio

import crc32c
import pytest

from broker.cluster.layout import PartitionState
from broker.coordinator.group.core import Append, Reply
from broker.coordinator.group.shard import TxnMarker, TxnRecord
from broker.log import LogConfig, LogError, LogManager
from broker.records import (
    Compression, ControlRecord, ControlType, CorruptRecordError, Record, encode_batch, encode_control_batch,
)
from broker.replica.manager import ReplicaManager, ReplicaSettings
from broker.replica.purgatory import Purgatory
from broker.server.coordinator_runtime import LoadRetry
from broker.server.group_coordinator import GroupCoordinatorService, GroupServiceSettings, decode_records
from broker.wire import ErrorCode

OFFSETS = "__consumer_offsets"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class FakeCore:
    """Records every input. ``handle`` answers at once unless the request is "park"; "write"
    appends its request's records and answers after ``write_done``."""

    def __init__(self) -> None:
        self.calls: list = []
        self.parked: list = []
        self.writes: dict[int, object] = {}  # write id -> token
        self.deadline: int | None = None
        self.stuck = False  # tick leaves the deadline due (a core bug the shell must survive)
        self._write_ids = iter(range(1, 1_000_000))

    def handle(self, token, api_key, api_version, request, client_id, client_host, now_ms):
        self.calls.append(("handle", api_key, request, client_id, client_host))
        if request == "park":
            self.parked.append(token)
            return []
        if isinstance(request, tuple) and request[0] == "write":
            write_id = next(self._write_ids)
            self.writes[write_id] = token
            return [Append(write_id, request[1], request[2])]
        return [Reply(token, ("answer", request))]

    def begin_load(self, partition):
        self.calls.append(("begin_load", partition))

    def load_partition(self, partition, records, now_ms):
        self.calls.append(("load", partition, list(records)))
        return []

    def unload_partition(self, partition):
        self.calls.append(("unload", partition))
        parked, self.parked = self.parked, []
        return [Reply(token, "NOT_COORDINATOR") for token in parked]

    def write_done(self, write_id, error_code, now_ms, partition=None):
        self.calls.append(("write_done", write_id, error_code))
        token = self.writes.pop(write_id, None)
        return [] if token is None else [Reply(token, ("written", error_code))]

    def tick(self, now_ms):
        self.calls.append(("tick", now_ms))
        if not self.stuck:
            self.deadline = None
        return []

    def next_deadline(self):
        return self.deadline

    def added_deadline(self):
        return self.deadline  # the tests move ``deadline`` by hand: every call may have added it

    def of(self, kind: str) -> list:
        return [c[1:] for c in self.calls if c[0] == kind]


class World:
    def __init__(self, tmp_path, broker_id: int = 1, timeout_ms: int = 5_000) -> None:
        self.clock = Clock()
        self.replicas = ReplicaManager(broker_id, LogManager([tmp_path], LogConfig(), self.clock), Purgatory(100),
                                       self.clock, ReplicaSettings())
        self.core = FakeCore()
        self.service = GroupCoordinatorService(self.core, self.replicas,
                                               GroupServiceSettings(commit_timeout_ms=timeout_ms,
                                                                    load_buffer_bytes=300,
                                                                    load_retry=LoadRetry(5, 20)), self.clock)
        self.replicas.add_leadership_listener(self.service.on_leadership_change)
        self.controller_epoch = 1

    def lead(self, partition: int, leader: int, epoch: int, replicas=(1,), isr=None) -> None:
        state = PartitionState(leader, epoch, tuple(isr or replicas), self.controller_epoch)
        self.replicas.become_leader_or_follower(self.controller_epoch, [((OFFSETS, partition), replicas, state, epoch)],
                                                {OFFSETS: {"cleanup.policy": "compact"}})


async def until(condition, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


def run(test):
    async def main():
        runner = asyncio.create_task(test.service.run())
        try:
            await test.body()
        finally:
            runner.cancel()
            await asyncio.gather(runner, return_exceptions=True)
            test.world.replicas.close()
    asyncio.run(asyncio.wait_for(main(), 20))


def kv(i: int) -> tuple[bytes, bytes | None]:
    return (b"key-%d" % i, None if i % 5 == 4 else b"value-%d" % i)


def test_a_led_partition_is_loaded_from_its_log_and_requests_are_answered(tmp_path):
    world = World(tmp_path)

    class Test:
        service = world.service

        @staticmethod
        async def body():
            world.lead(3, 1, 0)
            await until(lambda: world.core.of("load"))
            assert world.core.of("begin_load") == [(3,)] and world.core.of("load") == [(3, [])]
            # Requests: answered at once, with client id and host passed through.
            assert await world.service.handle(12, 4, "ping", None, "10.0.0.1") == ("answer", "ping")
            assert world.core.of("handle")[-1] == (12, "ping", "", "10.0.0.1")
            # Writes through Append: each write is one batch, replicated at once (ISR = us).
            for n in range(10):
                records = [kv(3 * n + i) for i in range(3)]
                assert await world.service.handle(8, 8, ("write", 3, records), "c", "h") == ("written", 0)
            log = world.replicas.get(OFFSETS, 3).log
            assert log.log_end_offset == 30 and world.replicas.get(OFFSETS, 3).high_watermark == 30
            # A COMMIT marker in the partition is loaded as (None, TxnMarker).
            partition = world.replicas.get(OFFSETS, 3)
            marker = encode_control_batch(ControlRecord(ControlType.COMMIT, 0), offset=0,
                                          timestamp=world.clock.now, producer_id=7, producer_epoch=0)
            log.append_as_leader(memoryview(bytearray(marker)), partition.leader_epoch)
            # Leadership lost, then gained again: unloaded, then loaded with every record in order.
            world.lead(3, 2, 1, replicas=(1, 2))
            assert world.core.of("unload") == [(3,)]
            world.lead(3, 1, 2, replicas=(1, 2), isr=(1,))
            await until(lambda: len(world.core.of("load")) == 2)
            # (the marker comes last, as (None, TxnMarker): it ends producer 7's pending offsets)
            assert world.core.of("load")[1] == (3, [kv(i) for i in range(30)] + [(None, TxnMarker(7, True))])
            assert world.service.statistics().loaded == {3}

    Test.world = world
    run(Test)


def test_a_failed_load_read_is_retried_until_it_succeeds(tmp_path):
    """A read that fails while loading (a segment swapped or an I/O error: LogError; a batch
    that does not decode: RecordsError) is retried with a backoff; the partition is not left
    loading forever, and the core gets every record once."""
    world = World(tmp_path)

    class Test:
        service = world.service

        @staticmethod
        async def body():
            world.lead(0, 1, 0)
            await until(lambda: world.core.of("load"))
            for n in range(3):
                assert await world.service.handle(8, 8, ("write", 0, [kv(n)]), "c", "h") == ("written", 0)
            log = world.replicas.get(OFFSETS, 0).log
            reads, failures = log.read, []

            def failing_read(*args, **kwargs):
                if len(failures) < 3:  # the first three reads fail, two kinds of failure
                    failures.append(args[0])
                    raise (LogError if len(failures) % 2 else CorruptRecordError)("injected")
                return reads(*args, **kwargs)

            log.read = failing_read
            world.lead(0, 2, 1, replicas=(1, 2))
            world.lead(0, 1, 2, replicas=(1, 2), isr=(1,))
            await until(lambda: len(world.core.of("load")) == 2)
            assert len(failures) == 3 and world.core.of("load")[1] == (0, [kv(n) for n in range(3)])
            assert world.service.statistics().loaded == {0} and not world.service.statistics().loading

    Test.world = world
    run(Test)


def test_other_topics_and_epoch_bumps_do_not_reload(tmp_path):
    world = World(tmp_path)

    class Test:
        service = world.service

        @staticmethod
        async def body():
            world.replicas.become_leader_or_follower(1, [(("events", 0), (1,), PartitionState(1, 0, (1,), 1), 0)], {})
            world.lead(0, 1, 0)
            await until(lambda: world.core.of("load"))
            world.lead(0, 1, 1)  # the same leader at a new epoch
            await asyncio.sleep(0.05)
            assert world.core.of("begin_load") == [(0,)] and len(world.core.of("load")) == 1

    Test.world = world
    run(Test)


def test_parked_requests_are_answered_when_the_partition_is_unloaded_or_the_service_closes(tmp_path):
    world = World(tmp_path)

    class Test:
        service = world.service

        @staticmethod
        async def body():
            world.lead(0, 1, 0)
            world.lead(1, 1, 0)
            await until(lambda: len(world.core.of("load")) == 2)
            first = asyncio.create_task(world.service.handle(11, 5, "park", "c", "h"))
            await until(lambda: world.core.parked)
            world.lead(0, 2, 1, replicas=(1, 2))  # leadership moves away
            assert await first == "NOT_COORDINATOR"
            second = asyncio.create_task(world.service.handle(11, 5, "park", "c", "h"))
            await until(lambda: world.core.parked)
            world.service.close()
            assert await second == "NOT_COORDINATOR"
            assert world.core.of("unload") == [(0,), (1,)]

    Test.world = world
    run(Test)


def test_writes_wait_for_the_followers_and_complete_in_append_order(tmp_path):
    world = World(tmp_path, timeout_ms=60_000)

    class Test:
        service = world.service

        @staticmethod
        async def body():
            world.lead(0, 1, 0, replicas=(1, 2))
            await until(lambda: world.core.of("load"))
            writes = [asyncio.create_task(world.service.handle(8, 8, ("write", 0, [kv(i)]), "c", "h"))
                      for i in range(3)]
            await until(lambda: world.replicas.get(OFFSETS, 0).log.log_end_offset == 3)
            await asyncio.sleep(0.02)
            assert not any(w.done() for w in writes) and world.core.of("write_done") == []
            stats = world.service.statistics()
            assert (stats.requests_waiting, stats.writes_waiting) == (3, 3)
            partition = world.replicas.get(OFFSETS, 0)
            partition.record_follower_fetch(2, 2)  # the follower has the first two
            await until(lambda: len(world.core.of("write_done")) == 2)
            partition.record_follower_fetch(2, 3)
            assert [await w for w in writes] == [("written", 0)] * 3
            assert world.core.of("write_done") == [(1, 0), (2, 0), (3, 0)]

    Test.world = world
    run(Test)


def test_a_write_that_is_not_replicated_in_time_fails_and_a_lost_leader_fails_at_once(tmp_path):
    world = World(tmp_path, timeout_ms=50)

    class Test:
        service = world.service

        @staticmethod
        async def body():
            world.lead(0, 1, 0, replicas=(1, 2))
            await until(lambda: world.core.of("load"))
            write = asyncio.create_task(world.service.handle(8, 8, ("write", 0, [kv(0)]), "c", "h"))
            await until(lambda: world.replicas.get(OFFSETS, 0).log.log_end_offset == 1)
            world.clock.now += 50  # the shell's deadline is on the injected clock
            world.replicas.purgatory.notify((OFFSETS, 0))
            assert await write == ("written", ErrorCode.REQUEST_TIMED_OUT)
            # An ISR below min.insync.replicas: refused before anything is appended.
            partition = world.replicas.get(OFFSETS, 0)
            partition.min_insync_replicas = 2
            world.lead(0, 1, 1, replicas=(1, 2), isr=(1,))
            assert await world.service.handle(8, 8, ("write", 0, [kv(2)]), "c", "h") == (
                "written", ErrorCode.NOT_ENOUGH_REPLICAS)
            assert partition.log.log_end_offset == 1
            # To a partition led elsewhere: NOT_LEADER_OR_FOLLOWER at once, nothing appended.
            assert await world.service.handle(8, 8, ("write", 7, [kv(1)]), "c", "h") == (
                "written", ErrorCode.NOT_LEADER_OR_FOLLOWER)

    Test.world = world
    run(Test)


def test_the_timer_ticks_at_the_cores_deadline(tmp_path):
    world = World(tmp_path)

    class Test:
        service = world.service

        @staticmethod
        async def body():
            await asyncio.sleep(0.02)
            assert world.core.of("tick") == []
            world.core.deadline = world.clock.now + 10
            await world.service.handle(12, 4, "ping", "c", "h")  # a core call: the new deadline is seen
            await asyncio.sleep(0.05)
            assert world.core.of("tick") == []  # not due on the injected clock
            world.clock.now += 10
            world.core.deadline = world.clock.now  # due now
            await world.service.handle(12, 4, "ping", "c", "h")
            await until(lambda: world.core.of("tick"))
            assert world.core.of("tick") == [(world.clock.now,)]

    Test.world = world
    run(Test)


def test_a_deadline_that_stays_due_does_not_starve_the_event_loop(tmp_path):
    world = World(tmp_path)

    class Test:
        service = world.service

        @staticmethod
        async def body():
            world.core.stuck = True
            world.core.deadline = world.clock.now
            await world.service.handle(12, 4, "ping", "c", "h")
            await until(lambda: len(world.core.of("tick")) > 10)
            assert await world.service.handle(12, 4, "pong", "c", "h") == ("answer", "pong")

    Test.world = world
    run(Test)


def test_decode_records_gives_markers_and_skips_records_below_the_offset():
    big = bytes(range(256)) * 2  # multi-byte varints for lengths
    data = (encode_batch([Record(0, 1, b"a", b"1"), Record(1, 1, b"b", None), Record(2, 10**6, big, big,
                                                                                   (("h", b"x"),))])
            + encode_control_batch(ControlRecord(ControlType.ABORT, 0), offset=3, timestamp=1, producer_id=5,
                                   producer_epoch=0)
            + encode_batch([Record(4, 1, b"c", b"3"), Record(5, 1, None, b"keyless")], compression=Compression.GZIP)
            + encode_batch([Record(300, 1, b"d", b"")]))
    expected = [(b"a", b"1"), (b"b", None), (big, big), (None, TxnMarker(5, False)), (b"c", b"3"), (b"d", b"")]
    assert decode_records(data) == expected
    assert decode_records(data, 1) == expected[1:]
    assert decode_records(data, 4) == expected[4:]  # the marker at offset 3 is below
    assert decode_records(data + data[:70]) == expected  # a cut batch at the end of a read is left


def test_decode_records_gives_a_transactional_batchs_records_with_its_producer():
    data = (encode_batch([Record(0, 1, b"a", b"1"), Record(1, 1, b"b", None)], producer_id=9,
                         producer_epoch=2, transactional=True)
            + encode_batch([Record(2, 1, b"c", b"2")]))
    assert decode_records(data) == [(None, TxnRecord(9, b"a", b"1")), (None, TxnRecord(9, b"b", None)),
                                    (b"c", b"2")]


@pytest.mark.parametrize("damage", ["crc", "record length", "cut record"])
def test_decode_records_refuses_a_damaged_batch(damage):
    data = bytearray(encode_batch([Record(0, 1, b"key", b"value")]))
    if damage == "crc":
        data[-1] ^= 0xFF
    elif damage == "record length":
        data[61] = 0x7E  # the record claims 63 bytes
    else:
        data[-7] = 0x7E  # the value claims more than the record holds
    if damage != "crc":  # keep the CRC right so the record walk is what refuses
        data[17:21] = crc32c.crc32c(bytes(data[21:])).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(data))


def test_commits_read_together_are_one_batch_and_any_other_request_comes_after_them(tmp_path):
    """OffsetCommits handled in one event-loop iteration (a client pipelines several) are
    appended as one batch, each still completed and answered on its own, in order; a request of
    another kind in the same iteration reaches the core only after their writes completed."""
    world = World(tmp_path)

    class Test:
        service = world.service

        @staticmethod
        async def body():
            world.lead(0, 1, 0)
            await until(lambda: world.core.of("load"))
            tasks = [asyncio.create_task(world.service.handle(8, 8, ("write", 0, [kv(2 * i), kv(2 * i + 1)]), "c", "h"))
                     for i in range(3)]
            tasks.append(asyncio.create_task(world.service.handle(12, 4, "ping", None, "h")))
            assert await asyncio.gather(*tasks) == [("written", 0)] * 3 + [("answer", "ping")]
            kinds = [c[0] for c in world.core.calls if c[0] in ("handle", "write_done")]
            assert kinds == ["handle"] * 3 + ["write_done"] * 3 + ["handle"]
            assert world.core.of("write_done") == [(1, 0), (2, 0), (3, 0)]
            log = world.replicas.get(OFFSETS, 0).log
            assert log.log_end_offset == 6 and log.read(0, 1 << 20, 6, True).batches == 1
            # Alone in its iteration, a commit is its own batch.
            assert await world.service.handle(8, 8, ("write", 0, [kv(6)]), "c", "h") == ("written", 0)
            assert log.read(0, 1 << 20, 7, True).batches == 2

    Test.world = world
    run(Test)
