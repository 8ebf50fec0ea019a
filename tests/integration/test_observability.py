"""Observability on a real 2-broker cluster (issue 19): /metrics values against known work,
consumer lag from the group coordinator, the read-only HTTP surface, and the status page in a
real headless Chromium (Debian's chromium + chromium-driver, driven by selenium).

One cluster for the module; the test that SIGSTOPs a follower runs last and resumes it.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from broker.tools.zookeeper import reserve_free_port
from integration_support import (BROKER_SESSION_TIMEOUT_MS, BrokerCluster, BrokerProcess, small_internal_topics,
                                 start_all)

pytestmark = [pytest.mark.integration]

DEADLINE_S = 30.0
LAG_TIME_MAX_MS = 1500  # replica.lag.time.max.ms: a stopped follower leaves the ISR within ~2 s
SETTINGS = {
    "metrics.snapshot.interval.ms": "100",
    "metrics.lag.interval.ms": "100",
    "replica.lag.time.max.ms": str(LAG_TIME_MAX_MS),
    **small_internal_topics(2),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "zookeeper.session.timeout.ms": str(BROKER_SESSION_TIMEOUT_MS),
    "controlled.shutdown.enable": "false",  # the last broker would retry moving leaders for 15 s
}


class Cluster(BrokerCluster):
    metrics_ports: dict[int, int]

    def url(self, broker_id: int, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.metrics_ports[broker_id]}{path}"


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    root = tmp_path_factory.mktemp("observability")
    c = Cluster(f"{zookeeper.connect_string}/pylog-observability-{os.getpid()}")
    c.metrics_ports = {}
    for broker_id in (1, 2):
        directory = root / f"broker-{broker_id}"
        directory.mkdir()
        port, metrics_port = reserve_free_port(), reserve_free_port()
        c.metrics_ports[broker_id] = metrics_port
        props = {"broker.id": broker_id, "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                 "log.dirs": directory / "data", "zookeeper.connect": c.zk_connect,
                 "metrics.port": metrics_port, **SETTINGS}
        (directory / "server.properties").write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        c.brokers.append(BrokerProcess(broker_id, port, directory / "server.properties",
                                       directory / "broker.log", directory / "data"))
    try:
        start_all(c.brokers)
        yield c
    finally:
        c.kill_all()  # (a SIGSTOPped broker too) nothing checks how they go


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(cluster: Cluster, broker_id: int) -> dict:
    """{(name, sorted label items): value} of one broker's /metrics."""
    status, text = get(cluster.url(broker_id, "/metrics"))
    assert status == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def total(cluster: Cluster, name: str, **labels) -> float:
    """``name`` summed over both brokers (and over labels not given)."""
    out = 0.0
    for broker_id in cluster.metrics_ports:
        for (sample, items), value in scrape(cluster, broker_id).items():
            if sample == name and all(dict(items).get(k) == v for k, v in labels.items()):
                out += value
    return out


def wait_until(condition, what: str, timeout_s: float = DEADLINE_S):
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def create_topic(cluster: Cluster, name: str, partitions: int = 1, replication: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication)])[name].result(DEADLINE_S)
    wait_until(lambda: all(topic_row(cluster, b, name) for b in cluster.metrics_ports), f"{name} in metadata")


def topic_row(cluster: Cluster, broker_id: int, topic: str, partition: int = 0) -> dict | None:
    import json
    status, text = get(cluster.url(broker_id, "/status.json"))
    for t in json.loads(text).get("topics", []):
        for p in t["partitions"]:
            if t["name"] == topic and p["partition"] == partition and p["leader"] >= 0:
                return p
    return None


def produce(cluster: Cluster, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "acks": "all"})
    for i in range(count):
        producer.produce(topic, value=b"v%06d" % i)
    assert producer.flush(DEADLINE_S) == 0


def commit(cluster: Cluster, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


# ------------------------------------------------------------------------------------- metrics


def test_produced_and_fetched_records_are_counted_exactly(cluster):
    create_topic(cluster, "counted")
    before = total(cluster, "kafka_network_requestmetrics_requests_total", request="Produce")
    produce(cluster, "counted", 250)
    wait_until(lambda: total(cluster, "kafka_server_brokertopicmetrics_messages_in_total", topic="counted") == 250,
               "messages_in == 250")
    assert total(cluster, "kafka_server_brokertopicmetrics_bytes_in_total", topic="counted") > 250 * 7
    assert total(cluster, "kafka_network_requestmetrics_requests_total", request="Produce") > before
    assert total(cluster, "kafka_network_requestmetrics_totaltime_seconds_count", request="Produce") > before

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "counted-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition("counted", 0, 0)])
    seen = 0
    deadline = time.monotonic() + DEADLINE_S
    while seen < 250 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and not message.error():
            seen += 1
    consumer.close()
    assert seen == 250
    wait_until(lambda: total(cluster, "kafka_server_brokertopicmetrics_messages_out_total", topic="counted") == 250,
               "messages_out == 250")
    # the leader is counted once, the follower's replication not as consumer traffic
    assert total(cluster, "kafka_server_replicamanager_leadercount") >= 1


def test_errors_are_counted_per_api_and_error(cluster):
    before = total(cluster, "kafka_network_requestmetrics_errors_total", request="Metadata",
                   error="UNKNOWN_TOPIC_OR_PARTITION")
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "x",
                         "allow.auto.create.topics": False})
    consumer.list_topics("no-such-topic", timeout=5)
    consumer.close()
    wait_until(lambda: total(cluster, "kafka_network_requestmetrics_errors_total", request="Metadata",
                             error="UNKNOWN_TOPIC_OR_PARTITION") > before, "a Metadata error counted")


def test_consumer_lag_follows_commits_and_produce(cluster):
    create_topic(cluster, "lagging")
    produce(cluster, "lagging", 40)
    commit(cluster, "lag-group", "lagging", 10)

    def lag() -> float | None:
        value = total(cluster, "kafka_consumergroup_lag", consumergroup="lag-group", topic="lagging")
        return value
    wait_until(lambda: lag() == 30, "lag 30")
    produce(cluster, "lagging", 5)
    wait_until(lambda: lag() == 35, "lag 35")
    # the writer of the Spark source's offsets.store=kafka (spark_log/_io.open_offset_store)
    from broker.client.offset_store import KafkaOffsetStore
    with KafkaOffsetStore(cluster.bootstrap) as store:
        store.commit("lag-group", {("lagging", 0): 45})
    wait_until(lambda: total(cluster, "kafka_consumergroup_current_offset", consumergroup="lag-group") == 45,
               "committed 45")
    wait_until(lambda: lag() == 0 and total(cluster, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1,
               "lag 0")


def test_open_transactions_and_their_end_are_reported(cluster):
    create_topic(cluster, "txn-topic")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "observed-txn"})
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    producer.produce("txn-topic", value=b"x")
    producer.flush(DEADLINE_S)
    wait_until(lambda: total(cluster, "kafka_coordinator_transaction_open") == 1
               and total(cluster, "kafka_coordinator_transaction_oldest_open_age_seconds") > 0,
               "one open transaction with an age")
    before = total(cluster, "kafka_coordinator_transaction_ended_total", result="committed")
    producer.commit_transaction(DEADLINE_S)
    wait_until(lambda: total(cluster, "kafka_coordinator_transaction_open") == 0
               and total(cluster, "kafka_coordinator_transaction_ended_total", result="committed") == before + 1,
               "the transaction committed and no longer open")


def test_a_transaction_aborted_by_its_timeout_is_counted(cluster):
    create_topic(cluster, "txn-timeout-topic")
    before = total(cluster, "kafka_coordinator_transaction_ended_total", result="aborted")
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "timed-out-txn",
                         "transaction.timeout.ms": 1000})  # librdkafka's minimum
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    producer.produce("txn-timeout-topic", value=b"x")
    producer.flush(DEADLINE_S)
    # No EndTxn: the coordinator aborts it once its timeout has run out (checked every 200 ms).
    wait_until(lambda: total(cluster, "kafka_coordinator_transaction_ended_total", result="aborted") == before + 1
               and total(cluster, "kafka_coordinator_transaction_open") == 0,
               "the timed-out transaction counted as aborted and no longer open")


def test_the_metrics_server_yields_the_cpu_to_the_broker(cluster):
    """The HTTP child runs 10 nice levels below its broker: a scrape storm on a machine short of
    CPU waits for the request path (bench/observability.py's storm), not the other way round."""
    from broker.metrics.http_process import HTTP_NICE_INCREMENT

    pid = cluster.brokers[0].popen.pid
    children = [int(c) for task in Path(f"/proc/{pid}/task").iterdir()
                for c in (task / "children").read_text().split()]
    (http,) = [c for c in children if b"broker.metrics.http_process" in Path(f"/proc/{c}/cmdline").read_bytes()]
    assert os.getpriority(os.PRIO_PROCESS, http) == min(19, os.getpriority(os.PRIO_PROCESS, pid) + HTTP_NICE_INCREMENT)


def test_http_surface_is_read_only(cluster):
    assert get(cluster.url(1, "/nope"))[0] == 404
    assert get(cluster.url(1, "/metrics/../etc/passwd"))[0] == 404
    request = urllib.request.Request(cluster.url(1, "/metrics"), data=b"x", method="POST")
    try:
        urllib.request.urlopen(request, timeout=5)
        raise AssertionError("POST accepted")
    except urllib.error.HTTPError as exc:
        assert exc.code == 405
    with socket.create_connection(("127.0.0.1", cluster.metrics_ports[1]), timeout=5) as sock:
        sock.sendall(b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\n\r\n")
        assert sock.recv(100).startswith(b"HTTP/1.1 400")
    status, page = get(cluster.url(1, "/"))
    assert status == 200 and "<script" in page and "http://" not in page and "https://" not in page
    status, body = get(cluster.url(1, "/status.json"))
    assert status == 200 and "zookeeper.connect" not in body and "password" not in body.lower()


# ---------------------------------------------------------------------------------- status page

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"  # Debian's (make setup)


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium through Debian's chromedriver: both paths given, so selenium never
    looks for (or downloads) a browser or driver of its own."""
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.fail("chromium and chromium-driver are not installed: run `make setup`")
    os.environ["SE_OFFLINE"] = "true"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1600"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


# The page redraws its tables every second (new elements), so every read is one script that
# returns plain values: no element reference can go stale between finding and reading it.
_READ_ROW = """
const row = document.querySelector(arguments[0]);
if (!row) return null;
const cell = row.querySelector(arguments[1] || "td");
return {cls: row.className, text: cell ? cell.textContent : null,
        background: cell ? getComputedStyle(cell).backgroundColor : null};
"""


def read_row(driver, selector: str, cell: str = "td") -> dict | None:
    return driver.execute_script(_READ_ROW, selector, cell)


def lag_on_page(driver, group: str, topic: str) -> int | None:
    row = read_row(driver, f'#groups tr[data-group="{group}"][data-topic="{topic}"]', "td.lag")
    return int(row["text"]) if row and row["text"] and row["text"].isdigit() else None


def coordinator_of(cluster: Cluster, group: str) -> int:
    import json
    def find():
        for broker_id in cluster.metrics_ports:
            groups = json.loads(get(cluster.url(broker_id, "/status.json"))[1])["groups"]
            if any(g["group"] == group for g in groups):
                return broker_id
        return None
    return wait_until(find, f"the coordinator of {group}")


def test_status_page_shows_topics_lag_and_under_replication(cluster, browser):
    create_topic(cluster, "page-topic")
    produce(cluster, "page-topic", 20)
    commit(cluster, "page-group", "page-topic", 5)

    # lag, on the page of the group's coordinator: shown, grows, falls
    browser.get(cluster.url(coordinator_of(cluster, "page-group")))
    wait_until(lambda: read_row(browser, '#topics tr[data-topic="page-topic"]'), "page-topic on the page")
    wait_until(lambda: lag_on_page(browser, "page-group", "page-topic") == 15, "lag 15 on the page")
    produce(cluster, "page-topic", 10)
    wait_until(lambda: lag_on_page(browser, "page-group", "page-topic") == 25, "lag grows to 25")
    commit(cluster, "page-group", "page-topic", 30)
    wait_until(lambda: lag_on_page(browser, "page-group", "page-topic") == 0, "lag falls to 0")

    # a live member is listed with its client id
    member = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "page-members",
                       "client.id": "page-member-client", "enable.auto.commit": False})
    try:
        member.subscribe(["page-topic"])
        wait_until(lambda: member.poll(0.2) is not None or member.assignment(), "the member's assignment")
        assert total(cluster, "kafka_server_group_coordinator_metrics_group_completed_rebalance_total") >= 1
        browser.get(cluster.url(coordinator_of(cluster, "page-members")))
        wait_until(lambda: "page-member-client@" in ((read_row(browser, '#groups tr[data-group="page-members"]',
                                                                "td:nth-child(3)") or {}).get("text") or ""),
                   "the member on the page")
    finally:
        member.close()

    # a stopped follower: its partition turns red on the leader's page, then recovers
    row = topic_row(cluster, 1, "page-topic")
    leader = row["leader"]
    follower = cluster.broker(next(r for r in row["replicas"] if r != leader))
    browser.get(cluster.url(leader))
    selector = '#topics tr[data-topic="page-topic"]'
    wait_until(lambda: read_row(browser, selector), "page-topic on the leader's page")
    assert read_row(browser, selector)["cls"] != "under-replicated"
    follower.popen.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: read_row(browser, selector)["cls"] == "under-replicated",
                   "the partition highlighted", timeout_s=DEADLINE_S)
        color = read_row(browser, selector)["background"]
        assert color.replace(" ", "") in ("rgba(255,170,170,1)", "rgb(255,170,170)"), color
        browser.save_screenshot(str(Path(os.environ.get("PYLOG_SCREENSHOT_DIR", "/tmp")) / "pylog-status-page.png"))
        metrics = scrape(cluster, leader)
        assert metrics[("kafka_server_replicamanager_underreplicatedpartitions", ())] >= 1
        assert metrics[("kafka_server_replicamanager_isrshrinks_total", ())] >= 1
    finally:
        follower.popen.send_signal(signal.SIGCONT)
    wait_until(lambda: read_row(browser, selector)["cls"] == "",
               "the partition back in sync", timeout_s=DEADLINE_S)
    assert scrape(cluster, leader)[("kafka_server_replicamanager_isrexpands_total", ())] >= 1
