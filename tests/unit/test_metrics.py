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


def test_cluster_tool_gives_each_broker_its_metrics_port_and_prints_a_scrape_config(tmp_path):
    from broker.tools.cluster import ClusterDir, ClusterSpec, render_broker_config, run_cluster
    import argparse
    import io
    from broker.server.config import parse_properties

    cluster = ClusterDir(tmp_path)
    spec = ClusterSpec(brokers=3, port=19092, zookeeper_port=12181, overrides={"metrics.port": "19404"})
    ports = [parse_properties(render_broker_config(cluster, spec, i))["metrics.port"] for i in range(3)]
    assert ports == ["19404", "19405", "19406"]
    cluster.write_spec(spec)
    out = io.StringIO()
    run_cluster(argparse.Namespace(dir=str(tmp_path), cluster_command="scrape-config"), out, io.StringIO())
    text = out.getvalue()
    assert "job_name: pylog" in text and "metrics_path: /metrics" in text
    assert [line.strip() for line in text.splitlines() if "targets" in line] == [
        f"- targets: ['127.0.0.1:{p}']" for p in (19404, 19405, 19406)]
    cluster.write_spec(ClusterSpec(brokers=1, port=19092, zookeeper_port=12181))
    with pytest.raises(ValueError, match="metrics.port"):
        run_cluster(argparse.Namespace(dir=str(tmp_path), cluster_command="scrape-config"), out, io.StringIO())


def test_spark_progress_lag_is_latest_minus_end_per_partition():
    from spark_log.lag import progress_lag
    progress = {"sources": [{"endOffset": '{"t":{"0":10,"1":7}}', "latestOffset": {"t": {"0": 25, "1": 7}}}]}
    lag = progress_lag(progress)
    assert lag["partitions"] == {("t", 0): 15, ("t", 1): 0}
    assert (lag["minOffsetsBehindLatest"], lag["maxOffsetsBehindLatest"], lag["avgOffsetsBehindLatest"]) == (0, 15, 7.5)
    assert progress_lag({"sources": [{"endOffset": None, "latestOffset": None}]})["maxOffsetsBehindLatest"] is None


def test_snapshot_gauges_are_exposed_with_kafka_names():
    from broker.metrics.collector import SnapshotCollector
    registry = CollectorRegistry()
    collector = SnapshotCollector()
    registry.register(collector)
    collector.state = {
        "local": {"partition_count": 3, "leader_count": 2, "under_replicated": 1, "under_min_isr": 0,
                  "at_min_isr": 1, "offline": 0, "active_controller": 1, "isr_shrinks": 4, "isr_expands": 3},
        "logs": [{"topic": "t", "partition": 0, "size_bytes": 100, "segments": 2, "log_start_offset": 0,
                  "log_end_offset": 9, "high_watermark": 9, "is_leader": True}],
        "cleaner": {"enabled": True, "dirty_ratio": [{"topic": "c", "partition": 0, "ratio": 0.25}],
                    "uncleanable": 1, "max_dirty_ratio": 0.25},
        "groups": [{"group": "g", "state": "STABLE", "generation": 2, "protocol": "range", "members": [{}],
                    "lag": [{"topic": "t", "partition": 0, "committed": 4, "end": 9, "lag": 5}],
                    "total_lag": 5, "lag_truncated": False}],
        "transactions": [{"age_ms": 2500}],
        "authentication": {"SASL_SSL": {"successful-reauthentication-total": 3,
                                        "expired-connections-killed-count": 1}},
    }
    value = registry.get_sample_value
    assert value("kafka_server_replicamanager_underreplicatedpartitions") == 1
    assert value("kafka_server_replicamanager_isrshrinks_total") == 4
    assert value("kafka_log_log_size_bytes", {"topic": "t", "partition": "0"}) == 100
    assert value("kafka_log_log_numlogsegments", {"topic": "t", "partition": "0"}) == 2
    assert value("kafka_log_logcleanermanager_max_dirty_percent") == 25.0
    assert value("kafka_log_logcleanermanager_uncleanable_partitions_count") == 1
    assert value("kafka_consumergroup_lag", {"consumergroup": "g", "topic": "t", "partition": "0"}) == 5
    assert value("kafka_coordinator_group_groupmetadatamanager_numgroups_state", {"state": "stable"}) == 1
    assert value("kafka_coordinator_transaction_oldest_open_age_seconds") == 2.5
    assert value("kafka_server_socket_server_metrics_successful_reauthentication_total", {"listener": "SASL_SSL"}) == 3
    assert value("kafka_server_socket_server_metrics_expired_connections_killed_count_total",
                 {"listener": "SASL_SSL"}) == 1


def test_lag_rows_past_the_budget_are_truncated_not_computed():
    from types import SimpleNamespace
    from broker.metrics import state
    committed = SimpleNamespace(offset=1)
    big = {("t", p): committed for p in range(state.LAG_ROWS_MAX + 1)}
    shard = SimpleNamespace(groups={}, offsets={"a-small": {("t", 0): committed}, "b-big": big})
    groups = state._groups(SimpleNamespace(_shards={0: shard}), {("t", 0): 3})
    assert [(g["group"], g["lag_truncated"], len(g["lag"])) for g in groups] == [("a-small", False, 1),
                                                                             ("b-big", True, 0)]
    assert groups[0]["total_lag"] == 2


def test_metrics_port_in_use_fails_the_start_and_the_child_serves_read_only(tmp_path):
    import asyncio
    import socket
    import urllib.error
    import urllib.request
    from broker.metrics.config import MetricsConfig
    from broker.metrics.service import MetricsService

    async def scenario():
        taken = socket.socket()
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = MetricsService(MetricsConfig(port=taken.getsockname()[1]), dict, lambda: 0)
        with pytest.raises(OSError, match="metrics.port"):
            await busy.start()
        taken.close()
        service = MetricsService(MetricsConfig(port=_free_port()), dict, lambda: 0)
        await service.start()
        try:
            def get(path):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{service.port}{path}", timeout=5) as answer:
                        return answer.status, answer.read()
                except urllib.error.HTTPError as exc:
                    return exc.code, b""
            assert (await asyncio.to_thread(get, "/status.json")) == (200, b"{}")
            assert (await asyncio.to_thread(get, "/secret"))[0] == 404
            assert b"<script" in (await asyncio.to_thread(get, "/"))[1]
        finally:
            await service.close()

    asyncio.run(scenario())


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
