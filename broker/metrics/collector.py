"""Prometheus metric families from the latest ``broker_state`` snapshot.

``SnapshotCollector`` is registered on the broker's registry next to the request counters;
``collect`` only reads the snapshot dict it was last given (set from the event loop, read on the
renderer thread: the dict is replaced whole, never changed in place). Names follow Kafka's JMX
names the way the Prometheus JMX exporter's common rules map them (``kafka_<domain>_<type>_
<name>``, lower case, ``_total`` on counters, ``_bytes``/``_seconds`` units), and the consumer-lag
names follow kafka_exporter (``kafka_consumergroup_lag``); docs/metrics.md has the table.
"""

from __future__ import annotations

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

__all__ = ["SnapshotCollector"]

_LOCAL_GAUGES = (
    ("kafka_server_replicamanager_partitioncount", "partition_count", "Partitions with a replica on this broker"),
    ("kafka_server_replicamanager_leadercount", "leader_count", "Partitions led by this broker"),
    ("kafka_server_replicamanager_underreplicatedpartitions", "under_replicated",
     "Partitions led here whose ISR is smaller than their replica set"),
    ("kafka_server_replicamanager_underminisrpartitioncount", "under_min_isr",
     "Partitions led here whose ISR is below min.insync.replicas"),
    ("kafka_server_replicamanager_atminisrpartitioncount", "at_min_isr",
     "Partitions led here whose ISR is exactly min.insync.replicas"),
    ("kafka_controller_kafkacontroller_offlinepartitionscount", "offline",
     "Partitions without a leader (reported by the active controller only)"),
    ("kafka_controller_kafkacontroller_activecontrollercount", "active_controller",
     "1 on the active controller"),
)


class SnapshotCollector:
    def __init__(self) -> None:
        self.state: dict | None = None

    def describe(self):
        return []  # no description: collect() is only called at scrape time

    def collect(self):
        state = self.state
        if state is None:
            return
        local = state["local"]
        for name, key, help_text in _LOCAL_GAUGES:
            yield GaugeMetricFamily(name, help_text, value=local[key])
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks", "ISR shrinks of partitions led here",
                                  value=local["isr_shrinks"])
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands", "ISR expansions of partitions led here",
                                  value=local["isr_expands"])
        yield from _logs(state)
        yield from _cleaner(state["cleaner"])
        yield from _groups(state["groups"])
        yield from _transactions(state["transactions"], state.get("transactions_ended", {}))
        yield from _authentication(state.get("authentication", {}))


def _authentication(listeners: dict):
    """Kafka's socket-server-metrics of each SASL listener (``kafka.server:type=socket-server-
    metrics,listener=<l>``: successful-reauthentication-total and the rest)."""
    families = {}
    for listener, counts in listeners.items():
        for name, value in counts.items():
            metric = "kafka_server_socket_server_metrics_" + name.replace("-", "_").removesuffix("_total")
            family = families.get(metric)
            if family is None:
                family = families[metric] = CounterMetricFamily(metric, f"SASL {name} of the listener",
                                                                labels=["listener"])
            family.add_metric([listener], value)
    yield from families.values()


def _logs(state: dict):
    labels = ["topic", "partition"]
    size = GaugeMetricFamily("kafka_log_log_size_bytes", "Bytes of a partition's log on this broker", labels=labels)
    segments = GaugeMetricFamily("kafka_log_log_numlogsegments", "Segments of a partition's log", labels=labels)
    start = GaugeMetricFamily("kafka_log_log_logstartoffset", "A partition's log start offset", labels=labels)
    end = GaugeMetricFamily("kafka_log_log_logendoffset", "A partition's log end offset", labels=labels)
    for log in state["logs"]:
        key = [log["topic"], str(log["partition"])]
        size.add_metric(key, log["size_bytes"])
        segments.add_metric(key, log["segments"])
        start.add_metric(key, log["log_start_offset"])
        end.add_metric(key, log["log_end_offset"])
    yield from (size, segments, start, end)


def _cleaner(cleaner: dict):
    yield GaugeMetricFamily("kafka_log_logcleanermanager_max_dirty_percent",
                            "Highest dirty ratio of a compacted log here, in percent",
                            value=100.0 * cleaner["max_dirty_ratio"])
    yield GaugeMetricFamily("kafka_log_logcleanermanager_uncleanable_partitions_count",
                            "Compacted partitions the cleaner gave up on", value=cleaner["uncleanable"])
    ratio = GaugeMetricFamily("kafka_log_logcleanermanager_dirty_ratio",
                              "Dirty ratio of each compacted log (pylog: per partition)", labels=["topic", "partition"])
    for row in cleaner["dirty_ratio"]:
        ratio.add_metric([row["topic"], str(row["partition"])], row["ratio"])
    yield ratio


def _groups(groups: list):
    yield GaugeMetricFamily("kafka_coordinator_group_groupmetadatamanager_numgroups",
                            "Groups coordinated by this broker (with members or committed offsets)",
                            value=len(groups))
    states = GaugeMetricFamily("kafka_coordinator_group_groupmetadatamanager_numgroups_state",
                               "Groups coordinated here, by state", labels=["state"])
    counts: dict[str, int] = {}
    for g in groups:
        counts[g["state"]] = counts.get(g["state"], 0) + 1
    for state, count in sorted(counts.items()):
        states.add_metric([state.lower()], count)
    yield states
    members = GaugeMetricFamily("kafka_consumergroup_members", "Members of a group", labels=["consumergroup"])
    lag = GaugeMetricFamily("kafka_consumergroup_lag", "End offset minus committed offset",
                            labels=["consumergroup", "topic", "partition"])
    current = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset",
                                labels=["consumergroup", "topic", "partition"])
    lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "A group's lag over its partitions",
                                labels=["consumergroup"])
    for g in groups:
        members.add_metric([g["group"]], len(g["members"]))
        lag_sum.add_metric([g["group"]], g["total_lag"])
        for row in g["lag"]:
            key = [g["group"], row["topic"], str(row["partition"])]
            current.add_metric(key, row["committed"])
            if row["lag"] is not None:
                lag.add_metric(key, row["lag"])
    yield from (members, lag, current, lag_sum)


def _transactions(txns: list, ended: dict):
    yield GaugeMetricFamily("kafka_coordinator_transaction_open", "Transactions open (Ongoing or Prepare*) "
                            "on this coordinator", value=len(txns))
    yield GaugeMetricFamily("kafka_coordinator_transaction_oldest_open_age_seconds",
                            "Age of the oldest open transaction (0 when none)",
                            value=(txns[0]["age_ms"] / 1000.0) if txns else 0.0)
    ended_total = CounterMetricFamily("kafka_coordinator_transaction_ended",
                                      "Transactions ended by this coordinator, by result (counted when the "
                                      "Prepare* record is written); aborted includes its own aborts "
                                      "(transaction timeout, InitProducerId fencing)", labels=["result"])
    for result, count in sorted(ended.items()):
        ended_total.add_metric([result], count)
    yield ended_total
