"""``pylog cluster up/down/status``, ``pylog broker start`` and the topic/produce/consume commands,
run as real subprocesses (``python -m broker.cli``) on free loopback ports in temporary
directories: what an operator types, checked by what it prints and which processes exist."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.tools.zookeeper import find_free_port

pytestmark = pytest.mark.integration

COMMAND_TIMEOUT_S = 90


def pylog(*args: str, stdin: str | None = None, env: dict | None = None,
          timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "broker.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout, env=env)


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert "Traceback" not in result.stderr
    return result


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def status(directory: Path) -> dict:
    return json.loads(ok(pylog("cluster", "status", "--dir", str(directory), "--json")).stdout)


def accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def free_ports(n: int) -> list[int]:
    """``n`` consecutive free ports (broker i listens on port + i)."""
    for _ in range(50):
        base = find_free_port()
        if base + n <= 65535 and all(_bindable(base + i) for i in range(n)):
            return [base + i for i in range(n)]
    raise AssertionError("no run of free ports")


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Cluster:
    def __init__(self, directory: Path, *extra: str) -> None:
        self.dir = directory
        self.port = free_ports(1)[0]
        self.zookeeper_port = find_free_port()
        self.extra = extra
        self.bootstrap = f"127.0.0.1:{self.port}"

    def up(self, *more: str) -> subprocess.CompletedProcess:
        return pylog("cluster", "up", "--dir", str(self.dir), "--brokers", "1", "--port", str(self.port),
                     "--zookeeper-port", str(self.zookeeper_port), *self.extra, *more)

    def down(self) -> subprocess.CompletedProcess:
        return pylog("cluster", "down", "--dir", str(self.dir))

    def produce(self, lines: list[str], *options: str) -> subprocess.CompletedProcess:
        return ok(pylog("produce", "--bootstrap-server", self.bootstrap, *options,
                        stdin="".join(f"{line}\n" for line in lines)))

    def consume(self, topic: str, count: int) -> list[str]:
        result = ok(pylog("consume", "--bootstrap-server", self.bootstrap, "--topic", topic,
                          "--from-beginning", "--max-messages", str(count), "--timeout-ms", "20000"))
        return result.stdout.splitlines()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """One broker and its ZooKeeper, started by `pylog cluster up`; `down` at the end."""
    c = Cluster(tmp_path_factory.mktemp("cluster") / "c")
    c.started = ok(c.up())
    try:
        yield c
    finally:
        c.down()


def test_up_prints_the_bootstrap_line_and_where_the_logs_are(cluster):
    assert cluster.started.stdout == f"bootstrap.servers=127.0.0.1:{cluster.port}\n"
    assert f"started broker 0 on 127.0.0.1:{cluster.port}" in cluster.started.stderr
    assert str(cluster.dir / "logs" / "broker-0.log") in cluster.started.stderr
    config = (cluster.dir / "config" / "server-0.properties").read_text()
    assert f"listeners=PLAINTEXT://127.0.0.1:{cluster.port}\n" in config
    assert f"zookeeper.connect=127.0.0.1:{cluster.zookeeper_port}\n" in config
    assert f"log.dirs={(cluster.dir / 'data' / 'broker-0').resolve()}\n" in config
    assert "auto.create.topics.enable=false" in config  # the rest comes from conf/server-0.properties


def test_status_json_shows_the_broker_zookeeper_and_controller(cluster):
    s = status(cluster.dir)
    [broker] = s["brokers"]
    assert broker["id"] == 0 and broker["port"] == cluster.port
    assert broker["alive"] and broker["serving"]
    assert broker["pid"] == int((cluster.dir / "run" / "broker-0.pid").read_text())
    assert "broker.server" in cmdline(broker["pid"])
    zk = s["zookeeper"]
    assert zk["alive"] and zk["port"] == cluster.zookeeper_port
    assert zk["pid"] == int((cluster.dir / "run" / "zookeeper.pid").read_text()) and alive(zk["pid"])
    assert s["controller_id"] == 0
    assert s["bootstrap_servers"] == cluster.bootstrap
    human = ok(pylog("cluster", "status", "--dir", str(cluster.dir))).stdout
    assert f"broker 0   127.0.0.1:{cluster.port}" in human and "serving  controller" in human


def test_up_on_a_running_cluster_starts_nothing_new(cluster):
    before = status(cluster.dir)
    again = ok(cluster.up())
    assert again.stdout == f"bootstrap.servers={cluster.bootstrap}\n"
    assert "started" not in again.stderr
    after = status(cluster.dir)
    assert after["brokers"][0]["pid"] == before["brokers"][0]["pid"]
    assert after["zookeeper"]["pid"] == before["zookeeper"]["pid"]


def test_topics_create_describe_list(cluster):
    created = ok(pylog("topics", "create", "--bootstrap-server", cluster.bootstrap, "--topic", "orders",
                       "--partitions", "3"))
    assert created.stdout == "Created topic orders.\n"
    described = ok(pylog("topics", "describe", "--bootstrap-server", cluster.bootstrap, "--topic", "orders"))
    lines = described.stdout.splitlines()
    assert lines[0].startswith("Topic: orders\t") and "PartitionCount: 3" in lines[0]
    assert [line.split("\t")[2] for line in lines[1:]] == ["Partition: 0", "Partition: 1", "Partition: 2"]
    assert all("Leader: 0" in line and "Isr: 0" in line for line in lines[1:])
    listed = ok(pylog("topics", "list", "--bootstrap-server", cluster.bootstrap))
    assert "orders" in listed.stdout.splitlines()
    again = pylog("topics", "create", "--bootstrap-server", cluster.bootstrap, "--topic", "orders")
    assert again.returncode != 0 and "TOPIC_ALREADY_EXISTS" in again.stderr


@pytest.mark.parametrize("acks", ["1", "all"])
def test_produce_lines_from_stdin_and_consume_them_back(cluster, acks):
    topic = f"lines-acks-{acks}"
    ok(pylog("topics", "create", "--bootstrap-server", cluster.bootstrap, "--topic", topic, "--partitions", "1"))
    lines = [f"line {i} acks={acks}" for i in range(200)]
    produced = cluster.produce(lines, "--topic", topic, "--acks", acks)
    assert "Produced 200 records" in produced.stderr
    assert cluster.consume(topic, 200) == lines


def test_down_stops_everything_and_up_restarts_with_the_data(tmp_path):
    c = Cluster(tmp_path / "c", "--set", "zookeeper.session.timeout.ms=6000")
    try:
        _down_and_up_again(c)
    finally:
        c.down()


def _down_and_up_again(c: Cluster) -> None:
    ok(c.up())
    assert "zookeeper.session.timeout.ms=6000" in (c.dir / "config" / "server-0.properties").read_text()
    ok(pylog("topics", "create", "--bootstrap-server", c.bootstrap, "--topic", "kept", "--partitions", "2"))
    first = [f"before restart {i}" for i in range(50)]
    c.produce(first, "--topic", "kept", "--acks", "all")
    pids = {"broker": status(c.dir)["brokers"][0]["pid"], "zookeeper": status(c.dir)["zookeeper"]["pid"]}

    down = ok(c.down())
    assert f"broker 0 (pid {pids['broker']}): stopped" in down.stderr
    assert not any(alive(pid) for pid in pids.values())
    assert not list((c.dir / "run").glob("*.pid"))
    assert not accepts(c.port) and not accepts(c.zookeeper_port)
    s = status(c.dir)
    assert not s["brokers"][0]["alive"] and not s["zookeeper"]["alive"] and s["controller_id"] is None

    # Stale pid files: one names a pid that no longer exists, the other a live unrelated program.
    stranger = subprocess.Popen(["sleep", "120"])
    try:
        (c.dir / "run" / "broker-0.pid").write_text(f"{stranger.pid}\n")
        (c.dir / "run" / "zookeeper.pid").write_text(f"{pids['zookeeper']}\n")
        assert not status(c.dir)["brokers"][0]["alive"]
        restarted = ok(c.up())
        assert restarted.stdout == f"bootstrap.servers={c.bootstrap}\n"
        assert alive(stranger.pid), "up must not touch a process that merely reused a pid"
    finally:
        stranger.kill()
        stranger.wait()
    assert sorted(c.consume("kept", 50)) == sorted(first)

    # A broker killed outright: status sees it gone, `up` restarts only the broker (its old
    # ZooKeeper session has to expire first: 6 s here), and nothing acknowledged is lost.
    s = status(c.dir)
    zookeeper_pid = s["zookeeper"]["pid"]
    os.kill(s["brokers"][0]["pid"], signal.SIGKILL)
    _wait_for(lambda: not status(c.dir)["brokers"][0]["alive"])
    assert status(c.dir)["zookeeper"]["alive"]
    too_short = c.up("--timeout-s", "0.1")
    assert too_short.returncode != 0 and "Traceback" not in too_short.stderr
    assert too_short.stderr.strip().splitlines()[-1] == (
        f"pylog cluster: broker 0 did not answer ApiVersions on 127.0.0.1:{c.port} within 0.1 s; "
        f"see {c.dir / 'logs' / 'broker-0.log'}")
    assert not status(c.dir)["brokers"][0]["alive"], "a failed up stops the brokers it started"
    assert status(c.dir)["zookeeper"]["pid"] == zookeeper_pid, "ZooKeeper was running before: kept"
    ok(c.up())
    assert status(c.dir)["zookeeper"]["pid"] == zookeeper_pid
    second = [f"after restart {i}" for i in range(10)]
    c.produce(second, "--topic", "kept", "--acks", "all")
    assert sorted(c.consume("kept", 60)) == sorted(first + second)


def _wait_for(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.1)


def _one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize("args, message", [
    (["up", "--set", "num.partitions"], "--set 'num.partitions': expected key=value"),
    (["up", "--set", "broker.id=7"], "--set broker.id: pylog cluster sets it"),
    (["up", "--set", "num.partitions=many"], "invalid configuration for broker 0: num.partitions='many'"),
    (["up", "--brokers", "0"], "--brokers must be at least 1"),
    (["up", "--port", "70000"], "--port 70000 is outside 1-65535"),
    (["status"], "no pylog cluster in"),
    (["down"], "no pylog cluster in"),
])
def test_bad_usage_is_one_line_and_starts_nothing(tmp_path, args, message):
    directory = tmp_path / "c"
    line = _one_line_error(pylog("cluster", *args, "--dir", str(directory)))
    assert line.startswith("pylog cluster: ") and message in line
    assert not (directory / "cluster.json").exists()


def test_port_in_use_is_one_line_and_starts_nothing(tmp_path):
    [port] = free_ports(1)
    zookeeper_port = find_free_port()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        result = pylog("cluster", "up", "--dir", str(tmp_path / "c"), "--port", str(port),
                       "--zookeeper-port", str(zookeeper_port))
    line = _one_line_error(result)
    assert f"port {port} on 127.0.0.1 (for broker 0) is already in use" in line
    assert not (tmp_path / "c" / "cluster.json").exists()
    assert not accepts(zookeeper_port), "no ZooKeeper may be left running"


def test_missing_zookeeper_install_is_one_line(tmp_path):
    env = {**os.environ, "ZOOKEEPER_HOME": str(tmp_path / "no-zookeeper")}
    result = pylog("cluster", "up", "--dir", str(tmp_path / "c"), "--port", str(free_ports(1)[0]),
                   "--zookeeper-port", str(find_free_port()), env=env)
    line = _one_line_error(result)
    assert "holds no zookeeper jar" in line and "make setup" in line
    assert not (tmp_path / "c" / "cluster.json").exists()


def test_up_with_other_ports_on_an_existing_cluster_is_refused(cluster):
    line = _one_line_error(pylog("cluster", "up", "--dir", str(cluster.dir), "--port", str(cluster.port + 1)))
    assert f"holds a cluster with --port {cluster.port}" in line


def test_broker_start_runs_in_the_foreground_until_sigterm(zk_connect, tmp_path):
    """`pylog broker start` on the session ZooKeeper (a private chroot): serves, then SIGTERM
    stops it cleanly with exit status 0."""
    port = free_ports(1)[0]
    bootstrap = f"127.0.0.1:{port}"
    config = tmp_path / "server.properties"
    config.write_text(f"broker.id=4\nlisteners=PLAINTEXT://{bootstrap}\nzookeeper.connect={zk_connect}\n")
    process = subprocess.Popen([sys.executable, "-m", "broker.cli", "broker", "start", "--config", str(config),
                                "--set", f"log.dirs={tmp_path / 'data'}"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: accepts(port) or process.poll() is not None, timeout_s=30)
        assert process.poll() is None, process.communicate()[1]
        ok(pylog("topics", "create", "--bootstrap-server", bootstrap, "--topic", "fg", "--partitions", "1"))
        described = ok(pylog("topics", "describe", "--bootstrap-server", bootstrap, "--topic", "fg"))
        assert "Leader: 4" in described.stdout
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, stderr
    assert f"broker 4 serving on PLAINTEXT://{bootstrap}" in stderr and "broker 4 stopped" in stderr
    assert (tmp_path / "data" / "fg-0").is_dir()


def test_broker_start_with_a_missing_config_is_one_line(tmp_path):
    line = _one_line_error(pylog("broker", "start", "--config", str(tmp_path / "missing.properties")))
    assert line.startswith("pylog broker: cannot read") and "missing.properties" in line


def test_up_security_prints_settings_a_client_logs_in_with(tmp_path):
    """``pylog cluster up --security`` (one broker): the printed client settings - SASL_SSL,
    SCRAM-SHA-256 as the generated admin, the generated CA - produce and read back with pylog's
    client; the same settings with another password are refused with SASL_AUTHENTICATION_FAILED,
    and a plaintext client gets no answer on the TLS port."""
    from broker.client import AdminClient, ClientConfig, KafkaError
    from broker.client.consumer import Consumer
    from broker.client.producer import Producer
    from broker.client.properties import (consumer_options_from_properties, parse_properties,
                                          producer_options_from_properties)
    from broker.client.security import client_security
    from broker.tools.broker_process import answers_api_versions
    from broker.tools.cluster_security import probe_context

    c = Cluster(tmp_path / "secure", "--security")
    try:
        up = ok(c.up())
        printed = parse_properties(up.stdout)
        assert printed["bootstrap.servers"] == c.bootstrap
        assert (printed["security.protocol"], printed["sasl.mechanism"]) == ("SASL_SSL", "SCRAM-SHA-256")
        assert printed["ssl.truststore.location"] == str((c.dir / "security" / "ca.pem").resolve())
        settings = {k: v for k, v in printed.items() if k != "bootstrap.servers"}
        with AdminClient(c.bootstrap, config=ClientConfig(security=client_security(settings))) as admin:
            admin.create_topics("secured", 1, 1)
        with Producer(c.bootstrap, **producer_options_from_properties({**settings, "acks": "all"})) as producer:
            producer.send("secured", b"over-sasl-ssl").get(timeout_ms=30_000)
        options = consumer_options_from_properties({**settings, "auto.offset.reset": "earliest"})
        with Consumer(c.bootstrap, **options) as consumer:
            consumer.assign([("secured", 0)])
            seen = []
            _wait_for(lambda: seen.extend(r.value for r in consumer.poll(500)) or seen, timeout_s=30)
        assert seen == [b"over-sasl-ssl"]

        password = (c.dir / "security" / "admin.password").read_text().strip()
        wrong = {**settings, "sasl.jaas.config": settings["sasl.jaas.config"].replace(password, "not-the-password")}
        with pytest.raises(KafkaError) as refused:
            with AdminClient(c.bootstrap, config=ClientConfig(security=client_security(wrong))) as admin:
                admin.list_topics()
        assert refused.value.code == 58  # SASL_AUTHENTICATION_FAILED
        assert answers_api_versions("127.0.0.1", c.port, 5.0, ssl_context=probe_context(c.dir))
        assert not answers_api_versions("127.0.0.1", c.port, timeout_s=2.0)  # plaintext on the TLS port
    finally:
        ok(c.down())
