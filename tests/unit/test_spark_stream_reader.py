"""The streaming reader's driver-side decisions, as PySpark 4.3 calls them (reference T4), over a
fake cluster view and a fake clock. No JVM, no broker."""

from __future__ import annotations

import json

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, ReadMinRows

from spark_log.options import STREAM, parse_source_options
from spark_log.planner import DataLossError
from spark_log.stream import PylogStreamReader


class FakeView:
    """Topics with earliest/latest offsets that a test changes between calls."""

    def __init__(self, topics: dict[str, dict[int, tuple[int, int]]]) -> None:
        self.topics = topics  # topic -> partition -> (earliest, latest)
        self.closed = False

    def topic_partitions(self):
        return {t: sorted(parts) for t, parts in self.topics.items()}

    def earliest(self, tps):
        return {tp: self.topics[tp[0]][tp[1]][0] for tp in tps}

    def latest(self, tps):
        return {tp: self.topics[tp[0]][tp[1]][1] for tp in tps}

    def offsets_for_times(self, queries):
        return {(tp, ts): -1 for tp, ts in queries}

    def close(self):
        self.closed = True


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def reader(view: FakeView, clock=None, **options) -> PylogStreamReader:
    opts = parse_source_options({"kafka.bootstrap.servers": "h:1", "subscribePattern": "t.*", **options}, STREAM)
    r = PylogStreamReader(opts, clock or Clock())
    r._view = view
    return r


def spark_json(offset: dict) -> dict:
    """What Spark hands back: the JSON text of what we returned, parsed again."""
    return json.loads(json.dumps(offset))


def test_initial_offset_latest_by_default_and_canonical():
    view = FakeView({"tb": {1: (0, 7), 0: (0, 5)}, "ta": {0: (2, 3)}})
    initial = reader(view).initialOffset()
    assert json.dumps(initial) == '{"ta": {"0": 3}, "tb": {"0": 5, "1": 7}}'
    assert reader(view, startingOffsets="earliest").initialOffset() == {"ta": {"0": 2}, "tb": {"0": 0, "1": 0}}


def test_default_read_limit():
    view = FakeView({"t": {0: (0, 0)}})
    assert isinstance(reader(view).getDefaultReadLimit(), ReadAllAvailable)
    assert reader(view, maxOffsetsPerTrigger="10").getDefaultReadLimit() == ReadMaxRows(10)
    assert reader(view, minOffsetsPerTrigger="10").getDefaultReadLimit() == ReadMinRows(10)
    both = reader(view, minOffsetsPerTrigger="10", maxOffsetsPerTrigger="20").getDefaultReadLimit()
    assert both == ReadMaxRows(20)


def test_latest_offset_rate_limited_and_all_available_wins():
    view = FakeView({"t": {0: (0, 100), 1: (0, 10)}})
    r = reader(view, maxOffsetsPerTrigger="10")
    start = spark_json({"t": {"0": 0, "1": 0}})
    assert r.latestOffset(start, ReadMaxRows(10)) == {"t": {"0": 9, "1": 1}}
    assert r.latestOffset(start, ReadAllAvailable()) == {"t": {"0": 100, "1": 10}}
    assert r.reportLatestOffset() == {"t": {"0": 100, "1": 10}}


def test_unchanged_source_returns_identical_json():
    view = FakeView({"t": {1: (0, 4), 0: (0, 4)}})
    r = reader(view)
    start = spark_json(r.initialOffset())
    assert json.dumps(r.latestOffset(start, ReadAllAvailable())) == json.dumps(start)


def test_available_now_freezes_the_target():
    view = FakeView({"t": {0: (0, 30)}})
    r = reader(view, maxOffsetsPerTrigger="20")
    r.prepareForTriggerAvailableNow()
    view.topics["t"][0] = (0, 1000)  # arrives after the run started: not part of it
    first = r.latestOffset({"t": {"0": 0}}, ReadMaxRows(20))
    assert first == {"t": {"0": 20}}
    second = r.latestOffset(spark_json(first), ReadMaxRows(20))
    assert second == {"t": {"0": 30}}
    assert r.latestOffset(spark_json(second), ReadMaxRows(20)) == second  # done: start == end


def test_min_offsets_skip_until_enough_or_delay():
    view = FakeView({"t": {0: (0, 5)}})
    clock = Clock(1_000_000)
    r = reader(view, clock, minOffsetsPerTrigger="10", maxTriggerDelay="1s")
    start = {"t": {"0": 0}}
    assert r.latestOffset(start, ReadMinRows(10)) == {"t": {"0": 5}}  # first trigger never waits
    start = {"t": {"0": 5}}
    view.topics["t"][0] = (0, 9)
    clock.now += 100
    assert r.latestOffset(start, ReadMinRows(10)) == start  # 4 new < 10: skip
    view.topics["t"][0] = (0, 15)
    clock.now += 100
    assert r.latestOffset(start, ReadMinRows(10)) == {"t": {"0": 15}}  # 10 new: fire
    view.topics["t"][0] = (0, 16)
    clock.now += 500
    assert r.latestOffset({"t": {"0": 15}}, ReadMinRows(10)) == {"t": {"0": 15}}
    clock.now += 600  # 1.1 s since the last batch: fire with what there is
    assert r.latestOffset({"t": {"0": 15}}, ReadMinRows(10)) == {"t": {"0": 16}}


def test_min_offsets_ignored_under_available_now():
    view = FakeView({"t": {0: (0, 5)}})
    r = reader(view, Clock(10), minOffsetsPerTrigger="10", maxTriggerDelay="1h")
    r._last_trigger_ms = 10  # as if a batch just ran
    r.prepareForTriggerAvailableNow()
    assert r.latestOffset({"t": {"0": 0}}, ReadMinRows(10)) == {"t": {"0": 5}}


def test_new_partitions_start_at_earliest_and_are_rate_limited_from_there():
    view = FakeView({"t": {0: (0, 10)}, "t2": {0: (40, 60)}})
    r = reader(view, maxOffsetsPerTrigger="20")
    # backlogs 10 and 20 (t2 from its earliest, 40): 20 * 10/30 -> 6 and 20 * 20/30 -> 13
    assert r.latestOffset({"t": {"0": 0}}, ReadMaxRows(20)) == {"t": {"0": 6}, "t2": {"0": 53}}


def test_partitions_apply_the_driver_checks():
    view = FakeView({"t": {0: (0, 10)}, "t2": {0: (40, 60)}})
    strict = reader(view)
    with pytest.raises(DataLossError, match="Added partition t2-0 starts from 40 instead of 0"):
        strict.partitions({"t": {"0": 0}}, {"t": {"0": 10}, "t2": {"0": 60}})
    lenient = reader(view, failOnDataLoss="false")
    ranges = [p.range for p in lenient.partitions({"t": {"0": 0}}, {"t": {"0": 10}, "t2": {"0": 60}})]
    assert [(r.topic, r.from_offset, r.until_offset) for r in ranges] == [("t", 0, 10), ("t2", 40, 60)]
    assert lenient.partitions({"t": {"0": 4}}, {"t": {"0": 4}}) == []
    with pytest.raises(DataLossError, match="gone"):
        strict.partitions({"t": {"0": 0}, "tx": {"0": 3}}, {"t": {"0": 10}})


def test_partitions_split_like_batch():
    view = FakeView({"t": {0: (0, 100)}})
    r = reader(view, minPartitions="4")
    ranges = [p.range for p in r.partitions({"t": {"0": 0}}, {"t": {"0": 100}})]
    assert [(x.from_offset, x.until_offset) for x in ranges] == [(0, 25), (25, 50), (50, 75), (75, 100)]


def test_reader_pickles_without_its_connections():
    import pickle

    view = FakeView({"t": {0: (0, 1)}})
    r = reader(view)
    copy = pickle.loads(pickle.dumps(r))
    assert copy._view is None
    r.stop()
    assert view.closed and r._view is None


class FakeStore:
    """An offsets store that fails its first ``failures`` commits with a retriable error."""

    def __init__(self, failures: int = 0) -> None:
        self.committed: dict[str, dict] = {}
        self.failures = failures
        self.opened: list[tuple] = []
        self.closed = 0

    def commit(self, group, offsets):
        if self.failures:
            self.failures -= 1
            from broker.client import KafkaError
            from broker.wire import ErrorCode

            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "coordinator moving")
        self.committed.setdefault(group, {}).update(offsets)

    def fetch(self, group, topics=None):
        return {tp: o for tp, o in self.committed.get(group, {}).items() if topics is None or tp[0] in topics}

    def close(self):
        self.closed += 1

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


@pytest.fixture
def store(monkeypatch):
    from spark_log import _io

    fake = FakeStore()

    def open_store(kind, **kwargs):
        fake.opened.append((kind, kwargs["bootstrap_servers"], kwargs["zookeeper_connect"]))
        return fake

    monkeypatch.setattr(_io, "open_offset_store", open_store)
    return fake


@pytest.mark.parametrize("kind, extra, expected_zk", [
    ("kafka", {}, None),
    ("zookeeper", {"zookeeper.connect": "zk:2181/c"}, "zk:2181/c"),
])
def test_commit_publishes_end_to_the_chosen_store(store, kind, extra, expected_zk):
    view = FakeView({"ta": {0: (0, 9), 1: (0, 4)}})
    r = reader(view, **{"kafka.group.id": "g", "offsets.store": kind, **extra, "fetchOffset.retryIntervalMs": "0"})
    r.commit(spark_json({"ta": {"0": 9, "1": 4}}))
    assert store.opened == [(kind, "h:1", expected_zk)]
    assert store.committed == {"g": {("ta", 0): 9, ("ta", 1): 4}} and store.closed == 1
    # A new query of the group starts where the store says (startingOffsets=group).
    view.topics["ta"][0] = (0, 12)
    again = reader(view, **{"kafka.group.id": "g", "offsets.store": kind, **extra, "startingOffsets": "group"})
    assert again.initialOffset() == {"ta": {"0": 9, "1": 4}}


def test_commit_retries_then_fails_loudly(store):
    view = FakeView({"ta": {0: (0, 9)}})
    r = reader(view, **{"kafka.group.id": "g", "offsets.store": "kafka", "fetchOffset.numRetries": "2",
                        "fetchOffset.retryIntervalMs": "0"})
    store.failures = 2
    r.commit({"ta": {"0": 9}})  # two retriable failures, the third attempt lands
    assert store.committed == {"g": {("ta", 0): 9}}
    store.failures = 3
    from spark_log.driver import GroupCommitError

    with pytest.raises(GroupCommitError, match="Committing the offsets of group 'g' to the kafka offsets "
                                               "store failed: COORDINATOR_NOT_AVAILABLE .*coordinator moving"):
        r.commit({"ta": {"0": 10}})
    assert store.committed == {"g": {("ta", 0): 9}}


def test_commit_refused_for_a_group_with_members_says_why(store, monkeypatch):
    from broker.client import KafkaError
    from broker.wire import ErrorCode
    from spark_log.driver import GroupCommitError

    def refuse(group, offsets):
        raise KafkaError(ErrorCode.UNKNOWN_MEMBER_ID)

    monkeypatch.setattr(store, "commit", refuse)
    r = reader(FakeView({"ta": {0: (0, 9)}}), **{"kafka.group.id": "app", "offsets.store": "kafka",
                                                 "fetchOffset.retryIntervalMs": "0"})
    with pytest.raises(GroupCommitError, match="UNKNOWN_MEMBER_ID.*give it another 'kafka.group.id'"):
        r.commit({"ta": {"0": 9}})
    assert len(store.opened) == 1  # not retried: retrying cannot help


def test_no_store_commits_nothing(store):
    r = reader(FakeView({"ta": {0: (0, 9)}}))
    r.commit({"ta": {"0": 9}})
    assert store.opened == [] and store.committed == {}
