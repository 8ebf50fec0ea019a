"""Znode codecs against the JSON Kafka 2.x writes (reference: kafka-protocol.md section 6).

The "as Kafka writes it" strings keep Kafka's key order, which is a Java hash map's and differs
from ours: parsers must not depend on order. Our own output is compared byte for byte, so an
accidental format change (a space, an int where Kafka has a string) fails here.
"""

from __future__ import annotations

import base64
import json
import random
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.cluster import paths
from broker.cluster.errors import MalformedZnodeError, ProducerIdsExhaustedError
from broker.cluster.layout import (
    BrokerRegistration,
    EndPoint,
    PartitionState,
    ProducerIdBlock,
    TopicAssignment,
    decode_cluster_id,
    decode_config_change,
    decode_controller,
    decode_controller_epoch,
    decode_entity_config,
    decode_isr_change,
    decode_log_dir_event,
    decode_offset,
    encode_cluster_id,
    encode_config_change,
    encode_controller,
    encode_controller_epoch,
    encode_entity_config,
    encode_isr_change,
    encode_log_dir_event,
    encode_offset,
    generate_cluster_id,
    generate_topic_id,
    next_producer_id_block,
)

PLAINTEXT = EndPoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT")

# -- broker registration -------------------------------------------------------------------------

BROKER_AS_KAFKA_WRITES = [
    # (kafka version, raw JSON, expected endpoints, rack)
    (
        "2.x v4",
        '{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://localhost:9092"],'
        '"jmx_port":-1,"host":"localhost","timestamp":"1591234567890","port":9092,"version":4}',
        (PLAINTEXT,),
        None,
    ),
    (
        "2.x v4, two listeners and a rack",
        '{"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT","EXTERNAL":"SASL_SSL"},'
        '"endpoints":["INTERNAL://kafka-0.svc:19092","EXTERNAL://[::1]:9093"],"rack":"us-east-1a",'
        '"jmx_port":9999,"host":"kafka-0.svc","timestamp":"1591234567890","port":19092,"version":4}',
        (EndPoint("INTERNAL", "kafka-0.svc", 19092, "PLAINTEXT"), EndPoint("EXTERNAL", "::1", 9093, "SASL_SSL")),
        "us-east-1a",
    ),
    (
        "2.x v4 without a PLAINTEXT listener (host null, port -1)",
        '{"listener_security_protocol_map":{"SSL":"SSL"},"endpoints":["SSL://broker:9094"],'
        '"jmx_port":-1,"host":null,"timestamp":"1","port":-1,"version":4}',
        (EndPoint("SSL", "broker", 9094, "SSL"),),
        None,
    ),
    (
        "2.7+ v5 with features",
        '{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        '"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"host":"localhost",'
        '"timestamp":"1591234567890","port":9092,"version":5}',
        (PLAINTEXT,),
        None,
    ),
    (
        "0.10.0 v3 (protocol = listener name, rack)",
        '{"jmx_port":-1,"timestamp":"1591234567890","endpoints":["SSL://h:9093","PLAINTEXT://h:9092"],'
        '"host":"h","version":3,"port":9092,"rack":"r1"}',
        (EndPoint("SSL", "h", 9093, "SSL"), EndPoint("PLAINTEXT", "h", 9092, "PLAINTEXT")),
        "r1",
    ),
    (
        "0.8 v1 (host and port only)",
        '{"jmx_port":-1,"timestamp":"1591234567890","host":"old","version":1,"port":9092}',
        (EndPoint("PLAINTEXT", "old", 9092, "PLAINTEXT"),),
        None,
    ),
]


@pytest.mark.parametrize("label, raw, endpoints, rack", BROKER_AS_KAFKA_WRITES, ids=[b[0] for b in BROKER_AS_KAFKA_WRITES])
def test_broker_registration_parses_kafka_json(label, raw, endpoints, rack):
    registration = BrokerRegistration.from_json(3, raw.encode())
    assert registration.broker_id == 3
    assert registration.endpoints == endpoints
    assert registration.rack == rack
    assert registration.timestamp_ms == int(json.loads(raw)["timestamp"])


def test_broker_registration_writes_version_4_exactly():
    registration = BrokerRegistration(1, (PLAINTEXT,), timestamp_ms=1591234567890)
    assert registration.to_json() == (
        b'{"version":4,"host":"localhost","port":9092,"jmx_port":-1,"timestamp":"1591234567890",'
        b'"endpoints":["PLAINTEXT://localhost:9092"],"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"}}'
    )


def test_broker_registration_host_port_come_from_first_plaintext_listener():
    registration = BrokerRegistration(
        2,
        (EndPoint("SSL", "a", 1, "SSL"), EndPoint("INTERNAL", "b", 2, "PLAINTEXT"), EndPoint("P2", "c", 3, "PLAINTEXT")),
        timestamp_ms=5,
        rack="r",
    )
    obj = json.loads(registration.to_json())
    assert (obj["host"], obj["port"], obj["rack"]) == ("b", 2, "r")
    assert obj["endpoints"] == ["SSL://a:1", "INTERNAL://b:2", "P2://c:3"]
    assert obj["listener_security_protocol_map"] == {"SSL": "SSL", "INTERNAL": "PLAINTEXT", "P2": "PLAINTEXT"}
    assert BrokerRegistration.from_json(2, registration.to_json()) == registration


def test_broker_registration_without_plaintext_writes_null_host():
    obj = json.loads(BrokerRegistration(1, (EndPoint("SSL", "h", 1, "SSL"),), 0).to_json())
    assert obj["host"] is None and obj["port"] == -1


def test_endpoint_ipv6_round_trip():
    endpoint = EndPoint("PLAINTEXT", "fe80::1%eth0", 9092, "PLAINTEXT")
    assert endpoint.connection_string() == "PLAINTEXT://[fe80::1%eth0]:9092"
    assert EndPoint.parse(endpoint.connection_string(), {"PLAINTEXT": "PLAINTEXT"}) == endpoint


def test_endpoint_listener_name_is_normalised_to_upper_case():
    assert EndPoint.parse("plaintext://h:1", {"PLAINTEXT": "PLAINTEXT"}).listener_name == "PLAINTEXT"


BROKER_MALFORMED = [
    (b"not json", "not UTF-8 JSON"),
    (b"\xff\xfe", "not UTF-8 JSON"),
    (b"[1]", "expected a JSON object"),
    (b'{"version":6,"jmx_port":-1}', "unsupported version 6"),
    (b'{"version":"4"}', "'version' must be a JSON integer"),
    (b'{"version":4,"jmx_port":-1,"endpoints":"PLAINTEXT://h:1"}', "'endpoints' must be a JSON array"),
    (b'{"version":4,"jmx_port":-1,"endpoints":["h:1"]}', "is not LISTENER://host:port"),
    (b'{"version":4,"jmx_port":-1,"endpoints":["X://h:1"],"listener_security_protocol_map":{"Y":"SSL"}}',
     "no security protocol for X"),
    (b'{"version":4,"jmx_port":-1,"endpoints":["X://h:1"],"listener_security_protocol_map":{"X":"TLS"}}',
     "unknown security protocol"),
    (b'{"version":4,"jmx_port":-1,"endpoints":[],"timestamp":"1"}', "at least one endpoint"),
    (b'{"version":4,"jmx_port":-1,"endpoints":["PLAINTEXT://h:1"],"timestamp":1}', "'timestamp' must be a JSON string"),
    (b'{"version":4,"jmx_port":-1,"endpoints":["PLAINTEXT://h:1"],"timestamp":"soon"}', "not a decimal integer"),
    (b'{"version":4,"endpoints":["PLAINTEXT://h:1"],"timestamp":"1"}', "missing field 'jmx_port'"),
    (b'{"version":1,"jmx_port":-1,"host":"h"}', "missing field 'port'"),
]


@pytest.mark.parametrize("raw, fragment", BROKER_MALFORMED)
def test_broker_registration_rejects_malformed(raw, fragment):
    with pytest.raises(MalformedZnodeError, match="broker registration 7") as info:
        BrokerRegistration.from_json(7, raw)
    assert fragment in str(info.value)


# -- topic assignment ----------------------------------------------------------------------------

TOPIC_AS_KAFKA_WRITES = [
    ("2.0-2.3 v1", '{"version":1,"partitions":{"2":[1,0],"1":[0,1],"0":[1,0]}}', None, {}),
    (
        "2.4+ v2",
        '{"version":2,"partitions":{"2":[1,0],"1":[0,1],"0":[1,0]},"adding_replicas":{},"removing_replicas":{}}',
        None,
        {},
    ),
    (
        "2.4+ v2 mid-reassignment",
        '{"version":2,"partitions":{"2":[1,0],"1":[0,1],"0":[1,0,2]},"adding_replicas":{"0":[2]},'
        '"removing_replicas":{}}',
        None,
        {0: (2,)},
    ),
    (
        "2.8 v3 with topic id",
        '{"removing_replicas":{},"partitions":{"2":[1,0],"1":[0,1],"0":[1,0]},"topic_id":"aBcDeFgHiJkLmNoPqRsTuV",'
        '"adding_replicas":{},"version":3}',
        "aBcDeFgHiJkLmNoPqRsTuV",
        {},
    ),
]


@pytest.mark.parametrize("label, raw, topic_id, adding", TOPIC_AS_KAFKA_WRITES, ids=[t[0] for t in TOPIC_AS_KAFKA_WRITES])
def test_topic_assignment_parses_kafka_json(label, raw, topic_id, adding):
    assignment = TopicAssignment.from_json(raw.encode(), "t")
    assert dict(assignment.partitions) == {0: (1, 0, 2) if adding else (1, 0), 1: (0, 1), 2: (1, 0)}
    assert list(assignment.partitions) == [0, 1, 2]  # numeric order, whatever the JSON order
    assert assignment.topic_id == topic_id
    assert dict(assignment.adding_replicas) == adding
    assert dict(assignment.removing_replicas) == {}


def test_topic_assignment_writes_version_2_exactly():
    assignment = TopicAssignment({10: [3, 1], 2: [1, 3], 0: [2, 3], 1: [3, 2]} | {i: [1, 2] for i in range(3, 10)})
    raw = assignment.to_json()
    assert raw.startswith(b'{"version":2,"partitions":{"0":[2,3],"1":[3,2],"2":[1,3],"3":[1,2],')
    assert raw.endswith(b'"10":[3,1]},"adding_replicas":{},"removing_replicas":{}}')
    assert TopicAssignment.from_json(raw) == assignment


def test_topic_assignment_with_topic_id_writes_version_3():
    obj = json.loads(TopicAssignment({0: [1]}, topic_id="abc").to_json())
    assert obj["version"] == 3 and obj["topic_id"] == "abc"


def test_topic_assignment_is_read_only():
    assignment = TopicAssignment({0: [1]})
    with pytest.raises(TypeError):
        assignment.partitions[1] = (2,)


TOPIC_MALFORMED = [
    (b'{"version":4,"partitions":{}}', "unsupported version 4"),
    (b'{"version":2}', "missing field 'partitions'"),
    (b'{"version":2,"partitions":[]}', "expected a JSON object"),
    (b'{"version":2,"partitions":{"a":[1]}}', "partition key 'a'"),
    (b'{"version":2,"partitions":{"-1":[1]}}', "partition key '-1'"),
    (b'{"version":2,"partitions":{"0":[1,"2"]}}', "array of integers"),
    (b'{"version":2,"partitions":{"0":[1]},"adding_replicas":{"5":[2]}}', "adding_replicas names partitions [5]"),
]


@pytest.mark.parametrize("raw, fragment", TOPIC_MALFORMED)
def test_topic_assignment_rejects_malformed(raw, fragment):
    with pytest.raises(MalformedZnodeError, match="topic assignment orders") as info:
        TopicAssignment.from_json(raw, "orders")
    assert fragment in str(info.value)


@given(st.dictionaries(st.integers(0, 10_000), st.lists(st.integers(0, 2**31 - 1), max_size=5), min_size=1))
def test_topic_assignment_round_trips(partitions):
    assignment = TopicAssignment(partitions)
    assert TopicAssignment.from_json(assignment.to_json()) == assignment


# -- partition state -----------------------------------------------------------------------------

def test_partition_state_parses_kafka_json():
    raw = b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":4,"isr":[0,2]}'
    assert PartitionState.from_json(raw) == PartitionState(leader=0, leader_epoch=4, isr=(0, 2), controller_epoch=1)


def test_partition_state_writes_exactly():
    state = PartitionState(leader=1, leader_epoch=0, isr=[1, 2], controller_epoch=1)
    assert state.to_json() == b'{"version":1,"leader":1,"leader_epoch":0,"isr":[1,2],"controller_epoch":1}'
    assert state.isr == (1, 2)


def test_partition_state_without_leader():
    state = PartitionState.from_json(b'{"version":1,"leader":-1,"leader_epoch":7,"isr":[],"controller_epoch":3}')
    assert state.leader == -1 and state.isr == ()


PARTITION_STATE_MALFORMED = [
    (b'{"version":2,"leader":1,"leader_epoch":0,"isr":[1],"controller_epoch":1}', "unsupported version 2"),
    (b'{"version":1,"leader_epoch":0,"isr":[1],"controller_epoch":1}', "missing field 'leader'"),
    (b'{"version":1,"leader":"1","leader_epoch":0,"isr":[1],"controller_epoch":1}', "'leader' must be a JSON integer"),
    (b'{"version":1,"leader":true,"leader_epoch":0,"isr":[1],"controller_epoch":1}', "'leader' must be a JSON integer"),
    (b'{"version":1,"leader":1,"leader_epoch":0,"isr":1,"controller_epoch":1}', "array of integers"),
    (b'{"version":1,"leader":-2,"leader_epoch":0,"isr":[1],"controller_epoch":1}', "leader >= -1"),
    (b'{"version":1,"leader":1,"leader_epoch":-1,"isr":[1],"controller_epoch":1}', "leader_epoch >= 0"),
    (b'{"version":1,"leader":1,"leader_epoch":0,"isr":[1,1],"controller_epoch":1}', "distinct"),
]


@pytest.mark.parametrize("raw, fragment", PARTITION_STATE_MALFORMED)
def test_partition_state_rejects_malformed(raw, fragment):
    with pytest.raises(MalformedZnodeError, match="partition state") as info:
        PartitionState.from_json(raw)
    assert fragment in str(info.value)


@given(
    st.integers(-1, 2**31 - 1),
    st.integers(0, 2**31 - 1),
    st.lists(st.integers(0, 2**31 - 1), unique=True, max_size=6),
    st.integers(0, 2**31 - 1),
)
def test_partition_state_round_trips(leader, leader_epoch, isr, controller_epoch):
    state = PartitionState(leader, leader_epoch, isr, controller_epoch)
    assert PartitionState.from_json(state.to_json()) == state


# -- producer id blocks --------------------------------------------------------------------------

def test_producer_id_block_parses_and_writes_kafka_json():
    raw = b'{"version":1,"broker":1,"block_start":"0","block_end":"999"}'
    block = ProducerIdBlock.from_json(raw)
    assert block == ProducerIdBlock(broker_id=1, block_start=0, block_end=999)
    assert block.size == 1000
    assert block.to_json() == raw
    shuffled = b'{"block_end":"1999","broker":0,"version":1,"block_start":"1000"}'
    assert ProducerIdBlock.from_json(shuffled) == ProducerIdBlock(0, 1000, 1999)


@pytest.mark.parametrize(
    "raw, fragment",
    [
        (b'{"version":1,"broker":1,"block_start":0,"block_end":"999"}', "'block_start' must be a JSON string"),
        (b'{"version":1,"broker":1,"block_start":"0x0","block_end":"999"}', "not a decimal integer"),
        (b'{"version":1,"broker":1,"block_start":"1000","block_end":"999"}', "block_start <= block_end"),
        (b'{"version":1,"broker":1,"block_start":"-1","block_end":"999"}', "0 <= block_start"),
        (b'{"version":1,"broker":1,"block_start":"0","block_end":"9223372036854775808"}', "2**63-1"),
        (b'{"version":2,"broker":1,"block_start":"0","block_end":"999"}', "unsupported version 2"),
    ],
)
def test_producer_id_block_rejects_malformed(raw, fragment):
    with pytest.raises(MalformedZnodeError, match="producer id block") as info:
        ProducerIdBlock.from_json(raw)
    assert fragment in str(info.value)


def test_next_producer_id_block():
    first = next_producer_id_block(None, broker_id=2)
    assert first == ProducerIdBlock(2, 0, 999)
    second = next_producer_id_block(first, broker_id=5)
    assert second == ProducerIdBlock(5, 1000, 1999)
    assert next_producer_id_block(second, 1, block_size=10) == ProducerIdBlock(1, 2000, 2009)


def test_next_producer_id_block_refuses_to_pass_int64():
    last_fitting = ProducerIdBlock(0, 2**63 - 2000, 2**63 - 1001)
    assert next_producer_id_block(last_fitting, 0).block_end == 2**63 - 1
    with pytest.raises(ProducerIdsExhaustedError):
        next_producer_id_block(ProducerIdBlock(0, 2**63 - 1500, 2**63 - 501), 0)


@pytest.mark.parametrize("size", [0, -1, True])
def test_next_producer_id_block_needs_positive_size(size):
    with pytest.raises(ValueError):
        next_producer_id_block(None, 0, block_size=size)


# -- configs, controller, cluster id -------------------------------------------------------------

def test_entity_config():
    raw = b'{"version":1,"config":{"retention.ms":"1000","cleanup.policy":"compact"}}'
    assert decode_entity_config(raw) == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert encode_entity_config({"retention.ms": "1000", "cleanup.policy": "compact"}) == (
        b'{"version":1,"config":{"cleanup.policy":"compact","retention.ms":"1000"}}'
    )
    assert encode_entity_config({}) == b'{"version":1,"config":{}}'
    assert decode_entity_config(b"") == {}


@pytest.mark.parametrize(
    "raw, fragment",
    [(b'{"version":1}', "missing field 'config'"), (b'{"version":1,"config":{"a":1}}', "map names to strings")],
)
def test_entity_config_rejects_malformed(raw, fragment):
    with pytest.raises(MalformedZnodeError, match=fragment):
        decode_entity_config(raw)


def test_controller():
    assert encode_controller(3, 1591234567890) == b'{"version":1,"brokerid":3,"timestamp":"1591234567890"}'
    assert decode_controller(b'{"timestamp":"1591234567890","brokerid":0,"version":1}') == 0
    with pytest.raises(MalformedZnodeError, match="missing field 'brokerid'"):
        decode_controller(b'{"version":1}')
    with pytest.raises(MalformedZnodeError, match="expected a JSON object, got int"):
        decode_controller(b"3")  # a pre-0.9 bare integer is no longer written by 2.x


@pytest.mark.parametrize("raw, epoch", [(b"0", 0), (b"1", 1), (b"12345", 12345)])
def test_controller_epoch(raw, epoch):
    assert decode_controller_epoch(raw) == epoch
    assert encode_controller_epoch(epoch) == raw


@pytest.mark.parametrize("raw", [b"", b"one", b"1.0", b" 1", b"\xff"])
def test_controller_epoch_rejects_malformed(raw):
    with pytest.raises(MalformedZnodeError, match="controller epoch"):
        decode_controller_epoch(raw)


def test_cluster_id():
    assert encode_cluster_id("rjVx2-AuQY2bbhhDZWhuWQ") == b'{"version":"1","id":"rjVx2-AuQY2bbhhDZWhuWQ"}'
    assert decode_cluster_id(b'{"version":"1","id":"rjVx2-AuQY2bbhhDZWhuWQ"}') == "rjVx2-AuQY2bbhhDZWhuWQ"
    with pytest.raises(MalformedZnodeError, match="'id' is empty"):
        decode_cluster_id(b'{"version":"1","id":""}')


def test_generate_cluster_id_is_a_base64_uuid4_from_the_given_rng():
    first = generate_cluster_id(random.Random(7))
    assert first == generate_cluster_id(random.Random(7))
    assert first != generate_cluster_id(random.Random(8))
    assert len(first) == 22 and "=" not in first
    raw = base64.urlsafe_b64decode(first + "==")
    assert uuid.UUID(bytes=raw).version == 4


def test_generate_topic_id_is_a_base64_uuid4_never_read_as_an_option():
    ids = [generate_topic_id(random.Random(seed)) for seed in range(300)]
    assert ids[0] == generate_topic_id(random.Random(0)) and len(set(ids)) == len(ids)
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    assert {uuid.UUID(bytes=base64.urlsafe_b64decode(i + "==")).version for i in ids} == {4}
    assert TopicAssignment.from_json(TopicAssignment({0: [1]}, topic_id=ids[0]).to_json()).topic_id == ids[0]


# -- notifications and offsets -------------------------------------------------------------------

def test_config_change_notification():
    assert encode_config_change("topics/orders") == b'{"version":2,"entity_path":"topics/orders"}'
    assert decode_config_change(b'{"entity_path":"topics/orders","version":2}') == "topics/orders"
    assert decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"orders"}') == "topics/orders"


def test_isr_change_notification():
    raw = encode_isr_change([("a", 0), ("b", 3)])
    assert raw == b'{"version":1,"partitions":[{"topic":"a","partition":0},{"topic":"b","partition":3}]}'
    assert decode_isr_change(raw) == [("a", 0), ("b", 3)]
    with pytest.raises(MalformedZnodeError, match="array of objects"):
        decode_isr_change(b'{"version":1,"partitions":["a"]}')


def test_log_dir_event_notification():
    assert encode_log_dir_event(2) == b'{"version":1,"broker":2,"event":1}'
    assert decode_log_dir_event(b'{"event":1,"broker":2,"version":1}') == 2
    with pytest.raises(MalformedZnodeError, match="unknown event 2"):
        decode_log_dir_event(b'{"version":1,"broker":2,"event":2}')


@pytest.mark.parametrize("offset", [0, 1, 2**63 - 1])
def test_offset_text(offset):
    assert encode_offset(offset) == str(offset).encode()
    assert decode_offset(encode_offset(offset)) == offset


@pytest.mark.parametrize("raw", [b"-1", b"", b"12a", b"1e3"])
def test_offset_rejects_malformed(raw):
    with pytest.raises(MalformedZnodeError, match="consumer offset"):
        decode_offset(raw)


@pytest.mark.parametrize("offset", [-1, "5", 1.0, None])
def test_offset_refuses_to_write_a_non_offset(offset):
    with pytest.raises(ValueError):
        encode_offset(offset)


# -- paths ---------------------------------------------------------------------------------------

def test_persistent_paths_are_kafkas():
    assert paths.PERSISTENT_PATHS == (
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics",
        "/brokers/seqid", "/isr_change_notification", "/latest_producer_id_block",
        "/log_dir_event_notification", "/config/topics", "/config/clients", "/config/users", "/config/brokers",
    )


@pytest.mark.parametrize(
    "path, expected",
    [
        (paths.broker_id_path(3), "/brokers/ids/3"),
        (paths.topic_path("t"), "/brokers/topics/t"),
        (paths.partition_state_path("t", 2), "/brokers/topics/t/partitions/2/state"),
        (paths.topic_config_path("t"), "/config/topics/t"),
        (paths.delete_topic_path("t"), "/admin/delete_topics/t"),
        (paths.consumer_offset_path("g", "t", 0), "/consumers/g/offsets/t/0"),
    ],
)
def test_paths(path, expected):
    assert path == expected


@pytest.mark.parametrize(
    "build",
    [
        lambda: paths.topic_path("../x"),
        lambda: paths.consumer_offset_path("a/b", "t", 0),
        lambda: paths.consumer_offset_path("..", "t", 0),
        lambda: paths.consumer_offset_path("g", "t", -1),
        lambda: paths.broker_id_path(-1),
        lambda: paths.partition_path("t", True),
    ],
)
def test_paths_refuse_components_that_escape(build):
    with pytest.raises(ValueError):
        build()
