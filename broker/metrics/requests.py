"""Per-request metrics: what the dispatcher tells after each request it answered.

``RequestMetrics.observe(header, request, response, seconds)`` runs once per request on the event
loop. It costs a few dictionary look-ups and lock-protected increments per request, plus one walk
over the request's or response's record *batch headers* for Produce and consumer Fetch (records
are counted from each batch header's count field, never by decoding records), so the per-request
cost does not grow with the records in a batch. The values are read by the scrape renderer on
another thread; prometheus_client's counters and histograms are thread-safe.

Kafka's JMX names and their Prometheus forms are in docs/metrics.md.
"""

from __future__ import annotations

import struct

from prometheus_client import CollectorRegistry, Counter, Histogram

from broker.wire import ApiKey, ErrorCode

__all__ = ["RequestMetrics", "api_name", "LATENCY_BUCKETS_S", "count_records"]

# Request latency buckets, seconds: 0.5 ms (an in-memory answer) to 30 s (a long-polling Fetch or
# an acks=all Produce waiting out request.timeout.ms).
LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                     5.0, 10.0, 30.0)
_INT32 = struct.Struct(">i")
_BATCH_LENGTH_AT = 8  # RecordBatch v2: base offset (8), then the batch length (4)
_RECORDS_COUNT_AT = 57  # ... and the records count is the header's last field
_BATCH_HEADER_BYTES = 61
_LOG_OVERHEAD = 12  # base offset + length: the bytes not counted in the batch length


def api_name(api_key: int) -> str:
    """Kafka's request name (``ApiKeys.name``): PRODUCE -> Produce, LIST_OFFSETS -> ListOffsets."""
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


def count_records(records) -> int:
    """Records in a record-batch byte string, summed from the batch headers (v2 batches)."""
    if not records:
        return 0
    total, pos, end = 0, 0, len(records)
    while pos + _BATCH_HEADER_BYTES <= end:
        total += _INT32.unpack_from(records, pos + _RECORDS_COUNT_AT)[0]
        pos += _LOG_OVERHEAD + _INT32.unpack_from(records, pos + _BATCH_LENGTH_AT)[0]
    return total


class RequestMetrics:
    """Counters and histograms fed by the dispatcher, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter("kafka_network_requestmetrics_requests", "Requests answered, by API",
                                ["request"], registry=registry)
        self.latency = Histogram("kafka_network_requestmetrics_totaltime_seconds",
                                 "Time from a request's decoding to its response, by API",
                                 ["request"], buckets=LATENCY_BUCKETS_S, registry=registry)
        self.errors = Counter("kafka_network_requestmetrics_errors",
                              "Error codes other than NONE in responses, by API and error",
                              ["request", "error"], registry=registry)
        self.bytes_in = Counter("kafka_server_brokertopicmetrics_bytes_in",
                                "Record bytes appended by Produce, by topic", ["topic"], registry=registry)
        self.messages_in = Counter("kafka_server_brokertopicmetrics_messages_in",
                                   "Records appended by Produce, by topic", ["topic"], registry=registry)
        self.bytes_out = Counter("kafka_server_brokertopicmetrics_bytes_out",
                                 "Record bytes sent to consumers by Fetch, by topic", ["topic"],
                                 registry=registry)
        self.messages_out = Counter("kafka_server_brokertopicmetrics_messages_out",
                                    "Records sent to consumers by Fetch, by topic (batch header counts)",
                                    ["topic"], registry=registry)
        self.replication_bytes_out = Counter("kafka_server_brokertopicmetrics_replication_bytes_out",
                                             "Record bytes sent to followers by Fetch", registry=registry)
        self.offset_commits = Counter("kafka_server_group_coordinator_metrics_offset_commit",
                                      "Offsets committed (OffsetCommit and TxnOffsetCommit partitions "
                                      "answered NONE)", registry=registry)
        self.rebalances = Counter("kafka_server_group_coordinator_metrics_group_completed_rebalance",
                                  "Rebalances whose join phase completed (the leader's JoinGroup answered NONE)",
                                  registry=registry)
        self._per_api: dict[int, tuple] = {}
        self._per_topic: dict[str, tuple] = {}
        self._per_error: dict[tuple[int, int], object] = {}
        self._walkers = {
            ApiKey.PRODUCE: self._produce,
            ApiKey.FETCH: self._fetch,
            ApiKey.OFFSET_COMMIT: self._offset_commit,
            ApiKey.TXN_OFFSET_COMMIT: self._offset_commit,
            ApiKey.JOIN_GROUP: self._join_group,
        }

    def observe(self, header, request, response, seconds: float) -> None:
        """One answered request (``response`` None: acks=0 Produce). Never raises: a metrics
        bug must not fail a request."""
        try:
            api_key = header.api_key
            children = self._per_api.get(api_key)
            if children is None:
                name = api_name(api_key)
                children = self._per_api[api_key] = (self.requests.labels(name), self.latency.labels(name))
            children[0].inc()
            children[1].observe(seconds)
            walker = self._walkers.get(api_key)
            if walker is not None:
                walker(request, response)
            if response is not None:
                for code in _error_codes(response):
                    self._error(api_key, code).inc()
        except Exception:  # noqa: BLE001 - see the docstring
            pass

    def _error(self, api_key: int, code: int):
        child = self._per_error.get((api_key, code))
        if child is None:
            try:
                error = ErrorCode(code).name
            except ValueError:
                error = str(code)
            child = self._per_error[(api_key, code)] = self.errors.labels(api_name(api_key), error)
        return child

    def _topic(self, topic: str) -> tuple:
        children = self._per_topic.get(topic)
        if children is None:
            children = self._per_topic[topic] = (self.bytes_in.labels(topic), self.messages_in.labels(topic),
                                                 self.bytes_out.labels(topic), self.messages_out.labels(topic))
        return children

    def _produce(self, request, response) -> None:
        answers = response.responses if response is not None else None
        for i, topic in enumerate(request.topic_data):
            codes = ([p.error_code for p in answers[i].partition_responses] if answers is not None
                     else [0] * len(topic.partition_data))
            size = records = 0
            for data, code in zip(topic.partition_data, codes):
                if code == 0 and data.records is not None:
                    size += len(data.records)
                    records += count_records(data.records)
            if size:
                children = self._topic(topic.name)
                children[0].inc(size)
                children[1].inc(records)

    def _fetch(self, request, response) -> None:
        if response is None:
            return
        follower = request.replica_id >= 0
        for topic in response.responses:
            size = records = 0
            for data in topic.partitions:
                if data.records:
                    size += len(data.records)
                    if not follower:
                        records += count_records(data.records)
            if not size:
                continue
            if follower:
                self.replication_bytes_out.inc(size)
            else:
                children = self._topic(topic.topic)
                children[2].inc(size)
                children[3].inc(records)

    def _offset_commit(self, request, response) -> None:
        if response is not None:
            self.offset_commits.inc(sum(p.error_code == 0 for t in response.topics for p in t.partitions))

    def _join_group(self, request, response) -> None:
        """One count per rebalance: only the leader's answer names itself as leader."""
        if response is not None and response.error_code == 0 and response.leader == response.member_id:
            self.rebalances.inc()


_PLANS: dict[type, tuple] = {}


def _error_codes(message, depth: int = 0) -> list[int]:
    """Every non-zero ``error_code`` in a response, down to partition level (three levels)."""
    plan = _PLANS.get(type(message))
    if plan is None:
        names = [name for name, _, _ in type(message)._init_plan]
        nested = getattr(type(message), "_nested", {})
        plan = _PLANS[type(message)] = ("error_code" in names, tuple(
            n for n, (element, is_array) in nested.items() if element is not None and is_array))
    has_code, lists = plan
    codes = [message.error_code] if has_code and message.error_code else []
    if depth < 2:
        for name in lists:
            for item in getattr(message, name) or ():
                codes.extend(_error_codes(item, depth + 1))
    return codes
