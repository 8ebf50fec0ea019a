"""``pylog perf`` helpers: Kafka-style percentiles (weighted, bounded sampling), run summaries,
the throughput throttle, property parsing, and the send-time stamps of the e2e mode."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pytest

from broker.client.properties import consumer_options_from_properties, producer_options_from_properties
from broker.tools.perf import parse_properties
from broker.tools.perf_plot import throughput_series
from broker.tools import perf_runs
from broker.tools.perf_runs import make_payload, send_times_ns
from broker.tools.perf_stats import LatencySamples, Progress, RunResult, Throttle, summarize_runs


def test_percentiles_follow_kafkas_index_rule():
    samples = LatencySamples()
    for value in range(1, 1001):
        samples.add(float(value))
    p = samples.percentiles()
    assert p["p50"] == 501 and p["p99"] == 991 and p["p99_9"] == 1000 and p["max"] == 1000
    assert p["avg"] == pytest.approx(500.5)


def test_weights_count_every_record_of_a_batch():
    samples = LatencySamples()
    samples.add(1.0, weight=99)
    samples.add(100.0, weight=1)
    p = samples.percentiles()
    assert p["p50"] == 1.0 and p["p99"] == 100.0 and samples.count == 100
    assert p["avg"] == pytest.approx((99 + 100) / 100)


def test_sampling_is_bounded_but_keeps_the_exact_count_and_max():
    samples = LatencySamples(samples_max=100)
    for value in range(10_000):
        samples.add(float(value))
    samples.add_many(np.arange(5000, dtype=np.float64))
    assert len(samples.values()) < 100
    assert samples.count == 15_000 and samples.max_ms == 9999.0
    assert 3200 <= samples.percentiles()["p50"] <= 4300  # true median of the 15000: 3750


def test_summary_reports_median_and_spread_of_runs():
    runs = [RunResult(1000, 100_000, s, {"p50": s, "p99": 2 * s, "p99_9": 3 * s, "avg": s, "max": 4 * s})
            for s in (1.0, 2.0, 4.0)]
    summary = summarize_runs(runs)
    assert summary["records_per_sec"] == 500.0  # the median run
    assert summary["records_per_sec_runs"] == {"min": 250.0, "median": 500.0, "max": 1000.0}
    assert summary["latency_ms_runs"]["p99"] == {"min": 2.0, "median": 4.0, "max": 8.0}
    single = summarize_runs(runs[:1])
    assert "records_per_sec_runs" not in single and single["mb_per_sec"] == pytest.approx(0.095, abs=1e-3)


def test_throttle_sleeps_just_enough():
    now = [0.0]
    slept = []

    def sleep(s):
        slept.append(s)
        now[0] += s

    throttle = Throttle(100.0, clock=lambda: now[0], sleep=sleep)
    throttle.wait(10)  # 10 records at 100/s: 0.1 s ahead of schedule
    assert slept == [pytest.approx(0.1)]
    now[0] += 1.0
    throttle.wait(20)  # behind schedule: no sleep
    assert len(slept) == 1
    Throttle(-1, clock=lambda: 0.0, sleep=sleep).wait(10**9)
    assert len(slept) == 1


def test_progress_draws_only_when_enabled():
    quiet, loud = io.StringIO(), io.StringIO()
    Progress(100, "x", quiet).update(50, force=True)  # StringIO is not a TTY
    bar = Progress(100, "produce", loud, enabled=True)
    bar.update(50, force=True)
    bar.close()
    assert quiet.getvalue() == "" and "50.0%" in loud.getvalue() and loud.getvalue().endswith("\n")


def test_properties_map_to_client_options_and_typos_are_errors():
    assert parse_properties(["acks=1", "linger.ms = 5"]) == {"acks": "1", "linger.ms": "5"}
    with pytest.raises(ValueError):
        parse_properties(["acks"])
    options = producer_options_from_properties({"acks": "1", "batch.size": "1048576", "linger.ms": "5",
                                                "enable.idempotence": "false", "compression.type": "lz4"})
    assert options == {"acks": "1", "batch_bytes_max": 1048576, "linger_ms": 5,
                       "enable_idempotence": False, "compression": "lz4"}
    with pytest.raises(ValueError, match="lingr.ms"):
        producer_options_from_properties({"lingr.ms": "5"})
    assert consumer_options_from_properties({"max.partition.fetch.bytes": "10"}) == {
        "max_partition_fetch_bytes": 10}
    with pytest.raises(ValueError, match="invalid value"):
        consumer_options_from_properties({"fetch.max.bytes": "lots"})


def test_send_times_are_read_from_the_start_of_each_value():
    stamps = [123, 2**40, 7]
    values = pa.array([stamp.to_bytes(8, "big") + b"x" * 5 for stamp in stamps], pa.binary())
    assert send_times_ns(values).tolist() == stamps
    assert send_times_ns(values.slice(1)).tolist() == stamps[1:]


def test_payload_is_uppercase_letters_of_the_size_asked():
    payload = make_payload(100)
    assert len(payload) == 100 and set(payload) <= set(range(65, 91))


def test_throughput_series_buckets_records_per_second():
    seconds, rates = throughput_series([(0.0, 10), (50.0, 10), (150.0, 5)], bucket_ms=100.0)
    assert seconds.tolist() == [0.0, 0.1] and rates.tolist() == [200.0, 50.0]


def test_throttle_sends_in_bursts_and_sleeps_only_when_a_tick_ahead():
    now = [0.0]
    slept = []

    def sleep(s):
        slept.append(s)
        now[0] += s

    throttle = Throttle(10_000.0, clock=lambda: now[0], sleep=sleep)  # a 2 ms tick = 20 records
    for sent in range(1, 20):
        throttle.wait(sent)  # under a tick ahead: no sleep per record
    assert slept == []
    throttle.wait(20)  # a whole tick ahead: one sleep for the burst
    assert slept == [pytest.approx(0.002)]
    for sent in range(21, 201):
        throttle.wait(sent)
    assert 9 <= len(slept) <= 10  # one sleep per tick, not per record
    assert now[0] == pytest.approx(0.020, abs=0.002)  # and the schedule is kept


class _CountingProducer:
    """Stands in for ``Producer`` in the record loop: counts calls, answers at once."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def send(self, topic, value, partition=None):
        self.calls.append("send")
        return type("Done", (), {"completed_ms": 1e18})()

    def produce(self, topic, value, partition=None):
        self.calls.append("produce")

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("num_records, rate", [(1, -1), (250_003, -1), (300_001, 1e12), (99_999, 1e12)])
def test_record_loop_sends_every_record_once_and_samples_one_per_stride(monkeypatch, num_records, rate):
    waits = []

    class RecordingThrottle(Throttle):
        def wait(self, sent: int) -> None:
            waits.append(sent)

    monkeypatch.setattr(perf_runs, "Throttle", RecordingThrottle)
    producer, samples = _CountingProducer(), LatencySamples()
    options = perf_runs.ProduceOptions("t", num_records, 10, throughput=rate, api="record")
    perf_runs._produce_records(producer, options, b"x" * 10, samples,
                               Progress(num_records, "produce", enabled=False), None)
    stride = max(1, num_records // perf_runs._LATENCY_SAMPLES)
    assert len(producer.calls) == num_records
    assert producer.calls[::stride] == ["send"] * -(-num_records // stride)  # one sampled per stride
    assert producer.calls.count("send") == -(-num_records // stride)
    assert samples.count == num_records  # each sample weighs the records of its stride
    assert waits == (list(range(1, num_records + 1)) if rate > 0 else [])
