"""Where a pylog broker's time goes under the side-by-side benchmark's load: the brokers run
under ``python -m cProfile`` while Kafka's ``kafka-producer-perf-test`` (or a consumer) works
against them; each broker's profile is written when it stops (SIGTERM: a clean exit).

    python bench/_sbs_profile.py [--brokers 1|3] [--workload produce|consume] [--acks 1|all]
        [--records 1000000] [--top 30] [--out DIR]

``--workload e2e`` runs ``pylog perf e2e --throughput 0`` (one record at a time) for ``--records``
records instead: the per-request path that end-to-end latency measures.

Prints each broker's top functions by own time and by cumulative time; the ``.prof`` files stay
in ``--out`` (``python -m pstats FILE`` to browse). cProfile slows Python code down (about
1.5-2x here), so read the shares, not the rates. Not run by ``make bench`` (leading underscore).
"""

from __future__ import annotations

import argparse
import io
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import _sbs_tools as tools  # noqa: E402
from broker.tools.broker_process import answers_api_versions  # noqa: E402
from broker.tools.zookeeper import DEFAULT_SETTINGS, ZooKeeperProcess, find_free_port  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def start_brokers(root: Path, out: Path, zk_connect: str, count: int) -> tuple[list[subprocess.Popen], str]:
    processes, ports = [], []
    for broker_id in range(1, count + 1):
        port = find_free_port()
        directory = root / f"broker-{broker_id}"
        directory.mkdir(parents=True)
        config = directory / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in {
            "broker.id": broker_id, "listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "log.dirs": directory / "data", "zookeeper.connect": f"{zk_connect}/profile",
            "zookeeper.session.timeout.ms": 6000, "min.insync.replicas": 1}.items()))
        with open(directory / "broker.log", "ab") as log:
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "cProfile", "-o", str(out / f"broker-{broker_id}.prof"), "-m", "broker.server",
                 "--config", str(config)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=REPO, start_new_session=True))
        ports.append(port)
        deadline = time.monotonic() + 60
        while not answers_api_versions("127.0.0.1", port):
            assert processes[-1].poll() is None and time.monotonic() < deadline, f"broker {broker_id} did not start"
            time.sleep(0.1)
    return processes, ",".join(f"127.0.0.1:{p}" for p in ports)


def workload(args, bootstrap: str) -> None:
    replication = 3 if args.brokers == 3 else 1
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("profile", 6, replication, config={"min.insync.replicas": "2"}
                                  if replication == 3 else {})])["profile"].result(60)
    tools._wait_for_leaders(bootstrap, "profile", 6)
    if args.workload == "e2e":  # one record at a time: the per-request path, not the per-byte one
        result = tools.pylog_perf("e2e", ["--bootstrap-server", bootstrap, "--topic", "profile", "--num-records",
                                          str(args.records), "--throughput", "0", "--acks", args.acks], 600)
        print(f"e2e under cProfile: {result['latency_ms']}", flush=True)
        return
    props = {"enable.idempotence": "false", "linger.ms": "5", "batch.size": "131072", "acks": args.acks}
    produced = tools.java_producer_perf(bootstrap, "profile", args.records, 100, props, 600)
    print(f"produce under cProfile: {produced['records_per_sec']:,.0f} records/s", flush=True)
    if args.workload == "consume":
        ends = tools.end_offsets(bootstrap, "profile", 6)
        start = time.monotonic()
        (result,) = tools.assign_consumers("confluent", bootstrap, "profile", [list(range(6))], [sum(ends)], 600)
        print(f"consume under cProfile: {result['records'] / result['elapsed_s']:,.0f} records/s "
              f"({time.monotonic() - start:.1f} s)", flush=True)


def show(path: Path, top: int) -> None:
    for key in ("tottime", "cumulative"):
        text = io.StringIO()
        stats = pstats.Stats(str(path), stream=text)
        stats.strip_dirs().sort_stats(key).print_stats(top)
        print(f"==== {path.name} by {key}")
        print("\n".join(line for line in text.getvalue().splitlines() if line.strip())[:12_000])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, choices=[1, 3], default=1)
    parser.add_argument("--workload", choices=["produce", "consume", "e2e"], default="produce")
    parser.add_argument("--acks", choices=["1", "all"], default="1")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="pylog-profile-out-"))
    out.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="pylog-profile-"))
    zookeeper = ZooKeeperProcess(root / "zk", find_free_port(), root / "zk-log",
                                 settings={**DEFAULT_SETTINGS, "tickTime": "500"})
    zookeeper.start(timeout_s=60)
    processes = []
    try:
        processes, bootstrap = start_brokers(root, out, zookeeper.connect_string, args.brokers)
        workload(args, bootstrap)
    finally:
        for popen in processes:
            popen.send_signal(signal.SIGTERM)
        for popen in processes:
            try:
                popen.wait(60)
            except subprocess.TimeoutExpired:
                popen.kill()
        zookeeper.stop()
        shutil.rmtree(root, ignore_errors=True)
    for broker_id in range(1, args.brokers + 1):
        path = out / f"broker-{broker_id}.prof"
        if path.exists():
            show(path, args.top)
    print(f"profiles in {out}")


if __name__ == "__main__":
    main()
