"""Observability's cost on the produce path (issue 19): metrics on vs off, and a scrape storm.

    python bench/observability.py [--runs 3] [--records 20000] [--rate 2000] [--scrapers 100]
                                  [--scrape-interval-s 1.0] [--topics 50]

One ZooKeeper and two one-broker-each roles in one cluster on loopback: broker 1 without metrics
(``metrics.port`` 0), broker 2 with them (``metrics.snapshot.interval.ms`` 1000, so the snapshot
and rendering run 5x as often as the default). ``--topics`` extra topics of 2 partitions each
(default 50, led by broker 2) make the exposition realistic (~100 partitions' log gauges).

1. **Overhead**: ``pylog perf produce`` (acks=1, 100-byte records, as fast as possible) to a
   partition led by broker 1, then one led by broker 2, alternating, ``--runs`` times; medians of
   records/s and of p99 latency per side.
2. **Scrape storm**: ``pylog perf produce`` at a fixed ``--rate`` (records/s) to broker 2, alone
   and while ``--scrapers`` concurrent scrapers GET ``/metrics`` of broker 2 (each every
   ``--scrape-interval-s``; 0 = back to back), alternating, ``--runs`` times; medians of p99. The
   scrapers run in their own process (threads, bounded by the run's duration) and report how
   many scrapes they completed. A third arm aims the same scrapers at a dummy server (another
   process serving the same bytes, at the metrics child's nice level): the machine carries the
   scrapers' own CPU in both storm arms, so storm / storm-elsewhere is the broker's share of the
   storm's effect. The arms' order rotates from run to run. On a quiet machine, for the issue's
   10 % target: ``--storm-only --runs 9 --storm-records 40000`` (~12 min; 9 runs of every arm
   with twice the latency samples per run).
3. **Broker CPU per scrape** (printed last; ``--cost-only`` runs only this): the watched broker's
   CPU time during 10 s of the storm without produce, minus 10 s idle, over the scrapes done.

The machine is shared: the 1-minute load average is printed with every number.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from broker.tools.zookeeper import ZooKeeperProcess, reserve_free_port  # noqa: E402

PYLOG = [sys.executable, "-m", "broker.cli"]


def load() -> float:
    return os.getloadavg()[0]


def start_broker(root: Path, zk: str, broker_id: int, metrics_port: int) -> tuple[subprocess.Popen, int]:
    directory = root / f"broker-{broker_id}"
    directory.mkdir()
    port = reserve_free_port()
    props = {"broker.id": broker_id, "listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": directory / "data",
             "zookeeper.connect": zk, "metrics.port": metrics_port, "metrics.snapshot.interval.ms": 1000,
             "offsets.topic.replication.factor": 1, "controlled.shutdown.enable": "false"}
    (directory / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    log = open(directory / "broker.log", "ab")
    process = subprocess.Popen([sys.executable, "-m", "broker.server", "--config", str(directory / "server.properties")],
                               stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    return process, port


def wait_for_kafka(port: int, timeout_s: float = 60.0) -> None:
    from broker.tools.broker_process import answers_api_versions
    deadline = time.monotonic() + timeout_s
    while not answers_api_versions("127.0.0.1", port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no broker answers on {port}")
        time.sleep(0.2)


def wait_for_metrics(port: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as answer:
                if b"kafka_server_replicamanager_leadercount" in answer.read():
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the metrics endpoint did not come up")


def create_topic(bootstrap: str, name: str, partitions: int, leader: int) -> None:
    """A topic whose partitions are all on ``leader`` (replica assignment, RF 1)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replica_assignment=[[leader]] * partitions)])[name].result(60)


def perf(bootstrap: str, topic: str, records: int, rate: int) -> dict:
    command = [*PYLOG, "perf", "produce", "--bootstrap-server", bootstrap, "--topic", topic, "--json",
               "--num-records", str(records), "--record-size", "100", "--throughput", str(rate), "--acks", "1",
               "--partition", "0"]
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return {"records_per_sec": result["records_per_sec"], "p99_ms": result["latency_ms"]["p99"],
            "p50_ms": result["latency_ms"]["p50"], "load": load()}


SCRAPER = r"""
import sys, threading, time, urllib.request
url, count, interval, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
done, errors, end = [0], [0], time.monotonic() + seconds
def scrape():
    while time.monotonic() < end:
        started = time.monotonic()
        try:
            with urllib.request.urlopen(url, timeout=10) as a:
                a.read()
            done[0] += 1
        except OSError:
            errors[0] += 1
        pause = interval - (time.monotonic() - started)
        if pause > 0:
            time.sleep(min(pause, max(0.0, end - time.monotonic())))
threads = [threading.Thread(target=scrape) for _ in range(count)]
for t in threads: t.start()
for t in threads: t.join()
print(done[0], errors[0])
"""


DUMMY = r"""
import os, sys, http.server, socketserver
os.nice(int(sys.argv[3]))  # as the broker's metrics child (broker.metrics.http_process)
body = open(sys.argv[2], "rb").read()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def dummy_server(port: int, body_path: Path) -> subprocess.Popen:
    """The same /metrics bytes served by another process: scrapers aimed here load the machine as
    a storm does, without touching the broker (the storm's cost to the broker = storm - this)."""
    from broker.metrics.http_process import HTTP_NICE_INCREMENT
    return subprocess.Popen([sys.executable, "-c", DUMMY, str(port), str(body_path), str(HTTP_NICE_INCREMENT)])


def storm(url: str, scrapers: int, interval_s: float, seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SCRAPER, url, str(scrapers), str(interval_s), str(seconds)],
                            stdout=subprocess.PIPE, text=True)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape_cost(pid: int, url: str, scrapers: int, interval_s: float, seconds: float = 10.0) -> dict:
    """The broker's CPU per scrape: its CPU time during a storm (no produce) minus an idle
    period of the same length, over the scrapes done. Load-insensitive, unlike latency."""
    start = cpu_seconds(pid)
    time.sleep(seconds)
    idle = cpu_seconds(pid) - start
    start = cpu_seconds(pid)
    done, errors = map(int, storm(url, scrapers, interval_s, seconds).communicate(timeout=seconds + 60)[0].split())
    busy = cpu_seconds(pid) - start
    with urllib.request.urlopen(url, timeout=10) as answer:
        size = len(answer.read())
    return {"scrapes": done, "errors": errors, "broker_cpu_idle_s": idle, "broker_cpu_storm_s": busy,
            "broker_cpu_per_scrape_us": 1e6 * max(0.0, busy - idle) / max(1, done), "exposition_bytes": size,
            "load": load()}


def median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records", type=int, default=200_000, help="records per overhead run")
    parser.add_argument("--storm-records", type=int, default=20_000, help="records per storm run")
    parser.add_argument("--rate", type=int, default=2000, help="records/s in the storm runs")
    parser.add_argument("--scrapers", type=int, default=100)
    parser.add_argument("--scrape-interval-s", type=float, default=1.0)
    parser.add_argument("--topics", type=int, default=50)
    parser.add_argument("--cost-only", action="store_true", help="only the broker CPU per scrape")
    parser.add_argument("--storm-only", action="store_true", help="skip the metrics on/off throughput rows")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="pylog-bench-observability-") as tmp:
        root = Path(tmp)
        zookeeper = ZooKeeperProcess(root / "zk", reserve_free_port(), root / "zk-log")
        zookeeper.start(timeout_s=60)
        brokers = []
        try:
            metrics_port = reserve_free_port()
            plain, plain_port = start_broker(root, zookeeper.connect_string, 1, 0)
            watched, watched_port = start_broker(root, zookeeper.connect_string, 2, metrics_port)
            brokers = [plain, watched]
            try:
                wait_for_metrics(metrics_port)
            except RuntimeError:
                print((root / "broker-2" / "broker.log").read_text()[-3000:], file=sys.stderr)
                raise
            wait_for_kafka(plain_port)
            wait_for_kafka(watched_port)
            bootstrap = f"127.0.0.1:{plain_port},127.0.0.1:{watched_port}"
            create_topic(bootstrap, "off", 1, 1)
            create_topic(bootstrap, "on", 1, 2)
            for i in range(args.topics):
                create_topic(bootstrap, f"filler-{i}", 2, 2)
            if args.cost_only:
                print(json.dumps(scrape_cost(watched.pid, f"http://127.0.0.1:{metrics_port}/metrics",
                                             args.scrapers, args.scrape_interval_s), indent=2))
                return 0
            perf(bootstrap, "off", 2000, -1)  # warm-up: connections, numba caches
            perf(bootstrap, "on", 2000, -1)

            overhead = {"off": [], "on": []}
            for _ in range(0 if args.storm_only else args.runs):
                for side in ("off", "on"):
                    overhead[side].append(perf(bootstrap, side, args.records, -1))
            report = {}
            if not args.storm_only:
                report["overhead"] = {side: {"records_per_sec_median": median(rows, "records_per_sec"),
                                             "p99_ms_median": median(rows, "p99_ms"), "runs": rows}
                                      for side, rows in overhead.items()}
                report["overhead"]["throughput_on_over_off"] = (report["overhead"]["on"]["records_per_sec_median"]
                                                                / report["overhead"]["off"]["records_per_sec_median"])

            seconds = args.storm_records / args.rate
            body = root / "metrics.txt"
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as answer:
                body.write_bytes(answer.read())
            dummy_port = reserve_free_port()
            dummy = dummy_server(dummy_port, body)
            storms = {"unloaded": [], "storm": [], "storm_elsewhere": []}
            try:
                arms = [("unloaded", None), ("storm", f"http://127.0.0.1:{metrics_port}/metrics"),
                        ("storm_elsewhere", f"http://127.0.0.1:{dummy_port}/metrics")]
                for run in range(args.runs):
                    # The arms' order rotates from run to run: a drift of the machine's load
                    # during the bench hits every arm alike instead of always the last one.
                    for arm, url in arms[run % 3:] + arms[:run % 3]:
                        if url is None:
                            storms[arm].append(perf(bootstrap, "on", args.storm_records, args.rate))
                            continue
                        scrapers = storm(url, args.scrapers, args.scrape_interval_s, seconds + 2)
                        row = perf(bootstrap, "on", args.storm_records, args.rate)
                        done, errors = map(int, scrapers.communicate(timeout=120)[0].split())
                        storms[arm].append({**row, "scrapes": done, "scrape_errors": errors})
            finally:
                dummy.terminate()
            p99 = {k: median(rows, "p99_ms") for k, rows in storms.items()}
            report["storm"] = {"scrapers": args.scrapers, "scrape_interval_s": args.scrape_interval_s,
                               "rate": args.rate, "p99_ms_median": p99,
                               "p99_storm_over_unloaded": p99["storm"] / p99["unloaded"],
                               "p99_storm_over_storm_elsewhere": p99["storm"] / p99["storm_elsewhere"],
                               "runs": storms}
            report["scrape_cost"] = scrape_cost(watched.pid, f"http://127.0.0.1:{metrics_port}/metrics",
                                                args.scrapers, args.scrape_interval_s)
            print(json.dumps(report, indent=2))
        finally:
            for process in brokers:
                process.terminate()
            for process in brokers:
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()
            zookeeper.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
