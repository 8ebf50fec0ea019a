"""broker.metrics: the per-request accounting and the config, without a broker."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from broker.metrics.requests import RequestMetrics, api_name, count_records
from broker.records import encode_batch, Record
from broker.server.config import BrokerConfig, ConfigError
from broker.wire import ApiKey, ProduceRequest, ProduceResponse
from broker.wire.frame import RequestHeader


def _batch(n: int) -> bytes:
    return bytes(encode_batch([Record(i, 0, None, b"v%d" % i) for i in range(n)]))


def test_records_are_counted_from_batch_headers():
    assert count_records(b"") == 0
    assert count_records(_batch(3)) == 3
    assert count_records(_batch(3) + _batch(5)) == 8


def test_api_names_are_kafkas():
    assert api_name(ApiKey.PRODUCE) == "Produce"
    assert api_name(ApiKey.LIST_OFFSETS) == "ListOffsets"
    assert api_name(ApiKey.API_VERSIONS) == "ApiVersions"
    assert api_name(999) == "999"


def test_produce_counts_records_bytes_and_errors_per_topic():
    registry = CollectorRegistry()
    metrics = RequestMetrics(registry)
    ok, refused = _batch(4), _batch(2)
    request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=ok),
            ProduceRequest.PartitionProduceData(index=1, records=refused)])])
    response = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=[
        ProduceResponse.PartitionProduceResponse(index=0, error_code=0, base_offset=0),
        ProduceResponse.PartitionProduceResponse(index=1, error_code=6, base_offset=-1)])])
    header = RequestHeader(api_key=ApiKey.PRODUCE, api_version=9, correlation_id=1, client_id="c")
    metrics.observe(header, request, response, 0.002)
    value = registry.get_sample_value
    assert value("kafka_server_brokertopicmetrics_messages_in_total", {"topic": "t"}) == 4
    assert value("kafka_server_brokertopicmetrics_bytes_in_total", {"topic": "t"}) == len(ok)
    assert value("kafka_network_requestmetrics_requests_total", {"request": "Produce"}) == 1
    assert value("kafka_network_requestmetrics_errors_total",
                 {"request": "Produce", "error": "NOT_LEADER_OR_FOLLOWER"}) == 1
    assert value("kafka_network_requestmetrics_totaltime_seconds_bucket", {"request": "Produce", "le": "0.0025"}) == 1
    metrics.observe(header, None, None, 0.0)  # a malformed call never raises
    assert b"kafka_network_requestmetrics_requests_total" in generate_latest(registry)


def test_metrics_port_is_parsed_and_checked():
    base = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}
    assert not BrokerConfig.from_properties(base).metrics.enabled
    config = BrokerConfig.from_properties({**base, "metrics.port": "9404", "metrics.snapshot.interval.ms": "250"})
    assert (config.metrics.port, config.metrics.snapshot_interval_ms, config.metrics.host) == (9404, 250, "127.0.0.1")
    with pytest.raises(ConfigError):
        BrokerConfig.from_properties({**base, "metrics.port": "70000"})
