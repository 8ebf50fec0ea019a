"""The Apache Kafka launcher's cluster ids and ports are ones kafka-storage accepts."""

from __future__ import annotations

import base64
import uuid
from unittest import mock

from broker.tools import kafka_peer


def test_a_cluster_id_never_starts_with_a_dash():
    # Bytes 0xf8.. encode to "-" first in URL-safe base64; the launcher must draw again.
    dash, plain = uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(bytes=b"\x01" * 16)
    with mock.patch.object(kafka_peer.uuid, "uuid4", side_effect=[dash, dash, plain]):
        cluster_id = kafka_peer._random_cluster_id()
    assert cluster_id == base64.urlsafe_b64encode(plain.bytes).decode().rstrip("=")
    assert len(cluster_id) == 22 and not cluster_id.startswith("-")


def test_planned_ports_are_distinct():
    probes = iter([5000, 5000, 5001, 5000, 5002, 5003])
    assert kafka_peer._distinct_free_ports(4, find=lambda: next(probes)) == [5000, 5001, 5002, 5003]
