"""The peer tier's footing: both systems start and a topic created on each reads back the same."""

from __future__ import annotations

from peer_support import unique_topic

from broker.client.admin import AdminClient


def test_both_peers_create_and_describe_a_topic_alike(peers):
    described = {}
    for peer in peers:
        topic = peer.create_topic(unique_topic("smoke"), partitions=3)
        with AdminClient(peer.bootstrap) as admin:
            (description,) = admin.describe_topics([topic])
        described[peer.name] = (len(description.partitions), description.replication_factor,
                                description.is_internal)
    assert described["kafka"] == described["pylog"] == (3, 1, False)
