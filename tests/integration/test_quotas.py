"""Client quotas on a real broker (issue 18 item 3), measured with confluent-kafka (librdkafka).

Quotas are written to ZooKeeper as Kafka's ZooKeeper mode does (``/config/clients/<client-id>``
plus a ``/config/changes`` notification) while the broker runs; it applies them without a
restart. A producer (and a consumer) running flat out are held at the quota within 20 % over the
steady part of the run, and librdkafka's throttle callback reports the responses'
``throttle_time_ms``. The quota window is shortened (``quota.window.num=4``) to keep the module
short. AlterClientQuotas and DescribeClientQuotas (raw requests) write and read the same znodes,
with Kafka's validation; so does ``pylog configs --entity-type clients``. One broker for the module.
"""

from __future__ import annotations

import argparse
import io
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from broker.cluster.zk import KafkaZkClient
from broker.tools.configs import add_configs_parser, run_configs
from broker.wire import AlterClientQuotasRequest, ApiKey, DescribeClientQuotasRequest, ErrorCode, MetadataRequest
from integration_support import ClusterFactory
from raw_socket import Raw

pytestmark = [pytest.mark.integration]

DEADLINE_S = 30.0
KB = 1000
VALUE = b"v" * 1000
# Kafka's sampled rate lets the bytes of an expiring sample through again, so a first burst (the
# allowance of the whole window) recurs every quota.window.num x quota.window.size.seconds (4 s
# here): the rate is measured over whole cycles of that.
RUN_S = 9.0  # flat out for this long ...
STEADY_FROM_S = 1.0  # ... measured from here: 2 cycles


@pytest.fixture(scope="module")
def cluster(zookeeper, tmp_path_factory):
    factory = ClusterFactory(zookeeper.connect_string, tmp_path_factory.mktemp("quotas"))
    try:
        cluster = factory.make(1, overrides={"quota.window.num": "4", "quota.window.size.seconds": "1",
                                             "offsets.topic.replication.factor": "1",
                                             "offsets.topic.num.partitions": "1"})
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        for topic in ("pq", "fq"):
            admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
        yield cluster
    finally:
        factory.close()


@pytest.fixture(scope="module")
def zk(cluster):
    client = KafkaZkClient(cluster.zk_connect, 10_000, 10_000)
    client.start()
    yield client
    client.close()


def _produce_flat_out(bootstrap: str, client_id: str, topic: str, run_s: float) -> tuple[float, list[int]]:
    """Produce as fast as librdkafka takes records; the acknowledged value bytes per second over
    the steady part, and the throttle times librdkafka reported."""
    throttles, acked = [], []
    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                         "batch.size": 16384, "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    on_ack = lambda err, msg: acked.append((time.monotonic(), len(msg.value()))) if err is None else None  # noqa: E731
    started = time.monotonic()
    while time.monotonic() - started < run_s:
        try:
            producer.produce(topic, VALUE, on_delivery=on_ack)
        except BufferError:
            producer.poll(0.05)
            continue
        if len(producer) > 2000:
            producer.poll(0.01)
        else:
            producer.poll(0)
    producer.purge()
    producer.flush(DEADLINE_S)
    return _steady_rate(acked, started + STEADY_FROM_S, started + run_s), throttles


def _steady_rate(samples: list[tuple[float, int]], start: float, end: float) -> float:
    return sum(size for at, size in samples if start <= at < end) / (end - start)


def _wait(condition, what: str, deadline_s: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_produce_quota_holds_the_rate_and_a_change_applies_without_restart(cluster, zk):
    zk.change_entity_config("clients", "quota-producer", {"producer_byte_rate": str(100 * KB)})
    rate, throttles = _produce_flat_out(cluster.bootstrap, "quota-producer", "pq", RUN_S)
    print(f"produce at a 100 KB/s quota: {rate:.0f} B/s, {len(throttles)} throttled responses")
    assert 80 * KB <= rate <= 120 * KB, f"{rate:.0f} B/s against a quota of 100 KB/s"
    assert throttles and max(throttles) > 0, "librdkafka saw no throttle_time_ms"

    zk.change_entity_config("clients", "quota-producer", {"producer_byte_rate": str(250 * KB)})
    rate, _ = _produce_flat_out(cluster.bootstrap, "quota-producer", "pq", 5.0)  # one cycle
    print(f"produce at a 250 KB/s quota: {rate:.0f} B/s")
    assert 150 * KB <= rate <= 375 * KB, f"{rate:.0f} B/s against a quota raised to 250 KB/s"


def test_fetch_quota_holds_the_consume_rate(cluster, zk):
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "client.id": "loader", "linger.ms": 20,
                         "batch.size": 16384})
    for _ in range(1500):  # 1.5 MB: more than RUN_S at the quota
        producer.produce("fq", VALUE)
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0
    zk.change_entity_config("clients", "quota-consumer", {"consumer_byte_rate": str(100 * KB)})
    throttles, received = [], []
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "client.id": "quota-consumer",
                         "group.id": "quota-group", "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         # fetches well under the quota window's bytes (300 KB): one fetch of the whole
                         # window would wait for its sample to expire, (n-1)/n of the quota
                         "fetch.max.bytes": 32768, "max.partition.fetch.bytes": 32768, "message.max.bytes": 32768,
                         "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    try:
        consumer.subscribe(["fq"])
        _wait(lambda: consumer.poll(0.2) is not None or consumer.assignment(), "an assignment")
        started = time.monotonic()
        while time.monotonic() - started < RUN_S:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                received.append((time.monotonic(), len(message.value())))
    finally:
        consumer.close()
    rate = _steady_rate(received, started + STEADY_FROM_S, started + RUN_S)
    print(f"consume at a 100 KB/s quota: {rate:.0f} B/s, {len(throttles)} throttled responses")
    assert 80 * KB <= rate <= 120 * KB, f"{rate:.0f} B/s against a fetch quota of 100 KB/s"
    assert throttles and max(throttles) > 0, "librdkafka saw no throttle_time_ms"


def test_request_percentage_throttles_a_client_that_keeps_the_broker_busy(cluster, zk):
    """A client id allowed 1 % of the broker's handler time (10 ms per second) asking Metadata
    flat out: a response soon carries throttle_time_ms (at most one quota window, as Kafka bounds
    request throttles), and the connection's next request waits it out. Another client id is not
    throttled."""
    port = cluster.brokers[0].port
    zk.change_entity_config("clients", "busy-client", {"request_percentage": "1"})
    with Raw(port, client_id="busy-client") as raw:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            asked = time.monotonic()  # before the broker can have muted the connection for this one
            throttle_ms = raw.call(ApiKey.METADATA, 9, MetadataRequest(topics=None)).throttle_time_ms
            if throttle_ms > 0:
                break
            assert time.monotonic() < deadline, "never throttled"
        assert 0 < throttle_ms <= 1000, throttle_ms
        raw.call(ApiKey.METADATA, 9, MetadataRequest(topics=None))
        assert time.monotonic() - asked >= throttle_ms / 1000, "the muted connection answered before the throttle"
    with Raw(port, client_id="idle-client") as raw:
        assert raw.call(ApiKey.METADATA, 9, MetadataRequest(topics=None)).throttle_time_ms == 0


def _alter(port: int, entity: dict, ops: list[tuple[str, float, bool]], validate_only: bool = False):
    request = AlterClientQuotasRequest(validate_only=validate_only, entries=[AlterClientQuotasRequest.EntryData(
        entity=[AlterClientQuotasRequest.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
        ops=[AlterClientQuotasRequest.OpData(key=k, value=v, remove=r) for k, v, r in ops])])
    with Raw(port) as raw:
        return raw.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request).entries[0]


def _describe(port: int, components: list[tuple[str, int, str | None]], strict: bool = False) -> dict:
    request = DescribeClientQuotasRequest(strict=strict, components=[
        DescribeClientQuotasRequest.ComponentData(entity_type=t, match_type=m, match=n) for t, m, n in components])
    with Raw(port) as raw:
        response = raw.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, request)
    assert response.error_code == ErrorCode.NONE, response.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


def test_alter_and_describe_client_quotas_with_kafkas_validation(cluster, zk):
    port = cluster.brokers[0].port
    done = _alter(port, {"user": "alice@x", "client-id": None}, [("producer_byte_rate", 200_000.0, False),
                                                                 ("consumer_byte_rate", 300_000.0, False)])
    assert done.error_code == ErrorCode.NONE, done.error_message
    assert zk.get_entity_config("users", "alice%40x/clients/<default>") == {
        "producer_byte_rate": "200000", "consumer_byte_rate": "300000"}  # Kafka's ZooKeeper layout
    _wait(lambda: _describe(port, [("user", 0, "alice@x")]).get((("user", "alice@x"), ("client-id", None))) ==
          {"producer_byte_rate": 200_000.0, "consumer_byte_rate": 300_000.0}, "DescribeClientQuotas to show it")
    assert _describe(port, [("user", 0, "alice@x")], strict=True) == {}  # strict: only user-only entities
    for ops, message in (([("producer_byte_rat", 1.0, False)], "producer_byte_rat"),
                         ([("producer_byte_rate", -5.0, False)], "greater than 0"),
                         ([("consumer_byte_rate", 1.5, False)], "integer")):
        refused = _alter(port, {"user": "alice@x", "client-id": None}, ops + [("consumer_byte_rate", 7.0, False)])
        assert (refused.error_code, message in refused.error_message) == (ErrorCode.INVALID_REQUEST, True)
    refused = _alter(port, {"ip": "1.2.3.4"}, [("producer_byte_rate", 1.0, False)])
    assert refused.error_code == ErrorCode.INVALID_REQUEST
    assert _alter(port, {"client-id": "v"}, [("producer_byte_rate", 9.0, False)], validate_only=True).error_code == 0
    assert zk.get_entity_config("clients", "v") == {}  # validate_only writes nothing
    assert zk.get_entity_config("users", "alice%40x/clients/<default>")["consumer_byte_rate"] == "300000"
    removed = _alter(port, {"user": "alice@x", "client-id": None}, [("consumer_byte_rate", 0.0, True)])
    assert removed.error_code == ErrorCode.NONE
    assert zk.get_entity_config("users", "alice%40x/clients/<default>") == {"producer_byte_rate": "200000"}


def _pylog_configs(bootstrap: str, *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser()
    add_configs_parser(parser.add_subparsers())
    args = parser.parse_args(["configs", "--bootstrap-server", bootstrap, *argv])
    out, err = io.StringIO(), io.StringIO()
    return run_configs(args, out, err), out.getvalue(), err.getvalue()


def test_pylog_configs_alters_and_describes_client_quotas(cluster, zk):
    code, out, _ = _pylog_configs(cluster.bootstrap, "--alter", "--entity-type", "clients", "--entity-name", "tool",
                                  "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    assert (code, out) == (0, "Completed updating config for client tool.\n")
    assert zk.get_entity_config("clients", "tool") == {"producer_byte_rate": "1048576", "consumer_byte_rate": "2097152"}
    code, out, _ = _pylog_configs(cluster.bootstrap, "--describe", "--entity-type", "clients", "--entity-name", "tool")
    assert (code, out) == (0, "Quota configs for client-id 'tool' are consumer_byte_rate=2097152.0, "
                              "producer_byte_rate=1048576.0\n")
    code, _, err = _pylog_configs(cluster.bootstrap, "--alter", "--entity-type", "clients", "--entity-default",
                                  "--add-config", "producer_byte_rate=-1")
    assert code == 1 and "must be greater than 0" in err
    assert zk.get_entity_config("clients", "<default>") == {}
