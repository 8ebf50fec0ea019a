"""pylog's blocking Kafka client, used by the ``pylog`` CLI, the tests and Spark tasks.

It speaks only the Kafka protocol (``broker.wire``) and RecordBatch v2 (``broker.records``), so
it works against pylog and against a real Kafka cluster alike. Standard-library sockets, no
threads, no asyncio; every object has one owner thread.

    from broker.client import AdminClient, Producer, Consumer
    with AdminClient("localhost:9092") as admin:
        admin.create_topics("orders", partitions=3, replication_factor=1)
    with Producer("localhost:9092") as producer:
        producer.send("orders", b"value", key=b"k")
    with Consumer("localhost:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([("orders", 0)])
        records = consumer.poll(timeout_ms=1000)
"""

from broker.client.admin import AdminClient, TopicDescription
from broker.client.config import SYSTEM_CLOCK, ClientConfig, Clock, SystemClock
from broker.client.connection import BrokerConnection
from broker.client.consumer import Consumer
from broker.client.errors import (
    DeliveryFailed,
    KafkaConnectionError,
    KafkaError,
    KafkaProtocolError,
    KafkaTimeoutError,
)
from broker.client.fetched import ConsumerRecord
from broker.client.metadata import BrokerInfo, Cluster, PartitionMetadata, TopicMetadata, parse_bootstrap_servers
from broker.client.partitioner import murmur2
from broker.client.producer import Delivery, Producer

__all__ = [
    "AdminClient", "TopicDescription",
    "ClientConfig", "Clock", "SystemClock", "SYSTEM_CLOCK",
    "BrokerConnection",
    "Consumer", "ConsumerRecord",
    "KafkaError", "KafkaConnectionError", "KafkaTimeoutError", "KafkaProtocolError", "DeliveryFailed",
    "Cluster", "BrokerInfo", "PartitionMetadata", "TopicMetadata", "parse_bootstrap_servers",
    "murmur2",
    "Producer", "Delivery",
]
