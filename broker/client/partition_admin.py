"""CreatePartitions from the client side (``pylog topics alter --partitions``): to the
controller, as Kafka's admin client sends it, retried while the controller moves."""

from __future__ import annotations

from typing import Sequence

from broker.client.admin import AdminClient, _raise_first
from broker.wire import ApiKey

__all__ = ["create_partitions"]


def create_partitions(admin: AdminClient, topic: str, count: int,
                      assignments: Sequence[Sequence[int]] | None = None, validate_only: bool = False) -> None:
    """Grow ``topic`` to ``count`` partitions (``assignments``: replicas of each new one);
    KafkaError if refused. Returns once Metadata shows a leader for every partition."""
    body = {"topics": [{"name": topic, "count": count,
                        "assignments": None if assignments is None else
                        [{"broker_ids": list(replicas)} for replicas in assignments]}],
            "timeout_ms": admin.config.request_timeout_ms, "validate_only": validate_only}
    _raise_first(admin._to_controller(ApiKey.CREATE_PARTITIONS, body, 0, lambda r: [
        (t.name, t.error_code, t.error_message) for t in r.results]))
    admin.cluster.invalidate(topic)
    if not validate_only:
        admin._wait_for_leaders([topic], admin.config.request_timeout_ms)
