"""``pylog perf produce|consume|e2e`` end to end against a real broker, output parsed.

The commands run as ``python -m broker.tools.perf MODE ...`` (the same code ``pylog perf``
dispatches to), in a subprocess as a user would run them. One broker for the module (each test
has its own topics): a broker start per test was a third of the module's time.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from integration_support import REPO_ROOT, ClusterFactory

pytestmark = pytest.mark.integration


def perf(*args: str, timeout_s: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.tools.perf", *args], capture_output=True,
                          text=True, cwd=REPO_ROOT, timeout=timeout_s)


@pytest.fixture(scope="module")
def bootstrap(zookeeper, tmp_path_factory) -> str:
    factory = ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("perf"))
    try:
        yield factory.make(1).bootstrap
    finally:
        factory.close()


def check_latency(latency: dict) -> None:
    assert set(latency) >= {"avg", "p50", "p95", "p99", "p99_9", "max"}
    assert 0 <= latency["p50"] <= latency["p95"] <= latency["p99"] <= latency["p99_9"] <= latency["max"]


def test_produce_then_consume_json_runs_and_plots(bootstrap, tmp_path):
    plot = tmp_path / "produce.png"
    done = perf("produce", "--bootstrap-server", bootstrap, "--topic", "perf", "--partitions", "2",
                "--num-records", "20000", "--record-size", "100", "--throughput", "-1",
                "--producer-props", "acks=1", "linger.ms=5", "batch.size=65536",
                "--runs", "2", "--json", "--plot", str(plot))
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()  # one JSON line, nothing else on stdout
    result = json.loads(line)
    assert result["mode"] == "produce" and result["records"] == 20000 and result["runs"] == 2
    assert result["records_per_sec"] > 0 and result["mb_per_sec"] > 0
    check_latency(result["latency_ms"])
    spread = result["records_per_sec_runs"]
    assert spread["min"] <= spread["median"] <= spread["max"]
    assert [run["records"] for run in result["each_run"]] == [20000, 20000]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert done.stderr == ""  # no progress bar: stderr is not a terminal

    done = perf("consume", "--bootstrap-server", bootstrap, "--topic", "perf", "--messages", "40000",
                "--json", "--timeout", "20000")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["mode"] == "consume" and result["records"] == 40000
    assert result["each_run"][0]["bytes"] == 40000 * 100
    assert result["records_per_sec"] > 0
    check_latency(result["latency_ms"])


def test_record_api_progress_and_human_output(bootstrap):
    done = perf("produce", "--bootstrap-server", bootstrap, "--topic", "human", "--partitions", "1",
                "--num-records", "3000", "--record-size", "50", "--throughput", "20000", "--api", "record",
                "--acks", "all", "--compression-type", "lz4", "--progress")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("3000 records sent, ") and "99.9th" in done.stdout
    assert "100.0%" in done.stderr  # --progress draws even without a terminal
    done = perf("consume", "--bootstrap-server", bootstrap, "--topic", "human", "--messages", "3000",
                "--api", "record")
    assert done.returncode == 0, done.stderr
    assert "data.consumed.in.nMsg=3000" in done.stdout


def test_e2e_latency_json(bootstrap):
    done = perf("e2e", "--bootstrap-server", bootstrap, "--topic", "lat", "--partitions", "1",
                "--num-records", "3000", "--throughput", "2000", "--record-size", "64", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["mode"] == "e2e" and result["records"] == 3000
    run = result["each_run"][0]
    assert run["sent"] == run["received"] == 3000 and not run["timed_out"]
    check_latency(result["latency_ms"])
    assert result["latency_ms"]["p50"] < 1000  # sanity: received within a second of being sent
    assert 500 < run["send_rate"] < 2100  # the sender kept (about) the rate asked for, not more


def test_e2e_one_record_at_a_time_like_kafkas_tool(bootstrap):
    done = perf("e2e", "--bootstrap-server", bootstrap, "--topic", "lat1", "--partitions", "1",
                "--num-records", "200", "--throughput", "-1", "--record-size", "100", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    run = result["each_run"][0]
    assert result["records"] == 200 and run["mode"] == "one_at_a_time" and run["received"] == 200
    check_latency(result["latency_ms"])
    assert 0 < result["latency_ms"]["p50"] < 1000


def test_mistakes_are_one_line_errors(bootstrap):
    done = perf("produce", "--bootstrap-server", bootstrap, "--topic", "x", "--num-records", "10",
                "--record-size", "10", "--producer-props", "lingr.ms=5")
    assert done.returncode == 2 and "unknown producer properties: lingr.ms" in done.stderr
    done = perf("consume", "--bootstrap-server", bootstrap, "--topic", "missing", "--messages", "1")
    assert done.returncode == 2 and "UNKNOWN_TOPIC_OR_PARTITION" in done.stderr
