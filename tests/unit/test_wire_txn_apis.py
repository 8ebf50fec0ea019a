"""The transaction APIs (issue 15) in broker.wire: AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
WriteTxnMarkers, TxnOffsetCommit, DescribeProducers, DescribeTransactions, ListTransactions.

Every version of every one round-trips; every version kafka-python 3.0 generates from Kafka's JSON
has the same fields as our spec and the same bytes both ways (the machinery is
test_wire_kafka_python's, which also covers InitProducerId v0-6). kafka-python's JSON has
dropped WriteTxnMarkers v0 (Kafka 4.0 removed it), so that version is checked against bytes
built by hand from Kafka's layout.
"""

from __future__ import annotations

import random
import struct

import pytest
from kafka.protocol.admin import transactions as kp_admin
from kafka.protocol.producer import transaction as kp_txn
from test_wire_kafka_python import (
    CLIENT_IDS,
    VARIANTS,
    describe_kp,
    describe_ours,
    from_kp,
    sample_dict,
    sample_struct,
    to_kp,
)

from broker.wire import (
    SUPPORTED_API_VERSIONS,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    ApiKey,
    InitProducerIdRequest,
    InitProducerIdResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
    decode_request,
    decode_response,
    encode_request,
    encode_request_header,
    encode_response,
)
from broker.wire.apis import API_SPECS

TXN_APIS = {
    ApiKey.ADD_PARTITIONS_TO_TXN: ("AddPartitionsToTxn", "0-5", kp_txn.AddPartitionsToTxnRequest,
                                   kp_txn.AddPartitionsToTxnResponse),
    ApiKey.ADD_OFFSETS_TO_TXN: ("AddOffsetsToTxn", "0-4", kp_txn.AddOffsetsToTxnRequest,
                                kp_txn.AddOffsetsToTxnResponse),
    ApiKey.END_TXN: ("EndTxn", "0-5", kp_txn.EndTxnRequest, kp_txn.EndTxnResponse),
    ApiKey.WRITE_TXN_MARKERS: ("WriteTxnMarkers", "0-1", kp_txn.WriteTxnMarkersRequest,
                               kp_txn.WriteTxnMarkersResponse),
    ApiKey.TXN_OFFSET_COMMIT: ("TxnOffsetCommit", "0-5", kp_txn.TxnOffsetCommitRequest,
                               kp_txn.TxnOffsetCommitResponse),
    ApiKey.DESCRIBE_PRODUCERS: ("DescribeProducers", "0-0", kp_admin.DescribeProducersRequest,
                                kp_admin.DescribeProducersResponse),
    ApiKey.DESCRIBE_TRANSACTIONS: ("DescribeTransactions", "0-0", kp_admin.DescribeTransactionsRequest,
                                   kp_admin.DescribeTransactionsResponse),
    ApiKey.LIST_TRANSACTIONS: ("ListTransactions", "0-2", kp_admin.ListTransactionsRequest,
                               kp_admin.ListTransactionsResponse),
}


def test_keys_versions_and_names_are_kafkas():
    expected_keys = {24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
                     28: "TxnOffsetCommit", 61: "DescribeProducers", 65: "DescribeTransactions",
                     66: "ListTransactions"}
    assert {int(key): name for key, (name, _, _, _) in TXN_APIS.items()} == expected_keys
    for key, (name, versions, _, _) in TXN_APIS.items():
        spec = API_SPECS[key]
        assert spec.name == name and spec.key == key
        assert f"{spec.valid.low}-{spec.valid.high}" == versions


def test_init_producer_id_parses_kip_939s_v6():
    """Parsed to v6; what is advertised is the handlers' decision (reference section 7: not v6)."""
    spec = API_SPECS[ApiKey.INIT_PRODUCER_ID]
    assert (spec.valid.low, spec.valid.high) == (0, 6)
    assert SUPPORTED_API_VERSIONS[ApiKey.INIT_PRODUCER_ID][1] < 6


def all_versions():
    for key in TXN_APIS:
        spec = API_SPECS[key]
        for version in range(spec.valid.low, spec.valid.high + 1):
            yield key, spec, version


ROUND_TRIP_CASES = [
    pytest.param(key, version, kind, variant, id=f"{spec.name}-v{version}-{kind}-{variant}")
    for key, spec, version in all_versions()
    for kind in ("request", "response")
    for variant in VARIANTS
]


@pytest.mark.parametrize("key, version, kind, variant", ROUND_TRIP_CASES)
def test_every_version_round_trips(key, version, kind, variant):
    spec = API_SPECS[key]
    stype = spec.request if kind == "request" else spec.response
    rng = random.Random(f"txn-rt-{key}-{version}-{kind}-{variant}")
    ours = stype.message_class.from_dict(sample_struct(stype, version, spec.is_flexible(version), rng, variant))
    if kind == "request":
        frame = encode_request(key, version, 9, "c", ours)
        header, decoded = decode_request(frame)
        assert (header.api_key, header.api_version, header.correlation_id) == (key, version, 9)
        assert encode_request(key, version, 9, "c", decoded) == frame
    else:
        frame = encode_response(key, version, 9, ours)
        correlation_id, decoded = decode_response(key, version, frame)
        assert correlation_id == 9
        assert encode_response(key, version, 9, decoded) == frame
    assert decoded == ours


# --------------------------------------------------------------- kafka-python, JSON-generated


def kp_class(key, kind):
    _, _, request, response = TXN_APIS[key]
    return request if kind == "request" else response


def kp_versions():
    for key, spec, version in all_versions():
        low, high = kp_class(key, "request")._valid_versions
        if low <= version <= high:
            yield key, spec, version


KP_CASES = [
    pytest.param(key, version, kind, variant, id=f"{spec.name}-v{version}-{kind}-{variant}")
    for key, spec, version in kp_versions()
    for kind in ("request", "response")
    for variant in VARIANTS
]
KP_SCHEMA_CASES = sorted({(k, v, kind) for k, v, kind, _ in (c.values for c in KP_CASES)})


def test_kafka_python_covers_every_version_but_write_txn_markers_v0():
    """Guard: if kafka-python's coverage shrinks, the JSON oracle silently tests less."""
    missing = {(int(k), v) for k, _, v in all_versions()} - {(int(k), v) for k, _, v in kp_versions()}
    assert missing == {(27, 0)}


@pytest.mark.parametrize("key, version, kind", KP_SCHEMA_CASES)
def test_spec_fields_match_kafka_python(key, version, kind):
    spec = API_SPECS[key]
    stype = spec.request if kind == "request" else spec.response
    flexible = spec.is_flexible(version)
    klass = kp_class(key, kind)
    assert klass.flexible_version_q(version) == flexible
    assert describe_ours(stype, version, flexible) == describe_kp(klass._struct, stype.name, version, flexible)


@pytest.mark.parametrize("key, version, kind, variant", KP_CASES)
def test_bytes_match_kafka_python_both_ways(key, version, kind, variant):
    spec = API_SPECS[key]
    stype = spec.request if kind == "request" else spec.response
    rng = random.Random(f"txn-kp-{key}-{version}-{kind}-{variant}")
    ours = stype.message_class.from_dict(sample_struct(stype, version, spec.is_flexible(version), rng, variant))
    klass = kp_class(key, kind)
    theirs = to_kp(klass._struct.fields, klass, stype.name, sample_dict(ours, stype, version), version, top=True)
    correlation_id = rng.randint(-(2**31), 2**31 - 1)
    if kind == "request":
        client_id = rng.choice(CLIENT_IDS)
        theirs.with_header(correlation_id=correlation_id, client_id=client_id)
        our_bytes = encode_request(key, version, correlation_id, client_id, ours)
        their_bytes = theirs.encode(header=True)
        assert our_bytes == their_bytes
        _, decoded = decode_request(their_bytes)
    else:
        theirs.with_header(correlation_id=correlation_id)
        our_bytes = encode_response(key, version, correlation_id, ours)
        their_bytes = theirs.encode(header=True)
        assert our_bytes == their_bytes
        _, decoded = decode_response(key, version, their_bytes)
    their_decoded = klass.decode(our_bytes, version=version, header=True)
    assert decoded == ours
    assert from_kp(their_decoded, stype, version) == ours


# ------------------------------------------------------------- hand-built bytes, named fields


def _string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack(">h", len(raw)) + raw


def test_write_txn_markers_v0_is_kafkas_classic_layout():
    """v0 (gone from Kafka 4 and from kafka-python's JSON): the v1 layout without compact
    encodings or tagged fields."""
    request = WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=7, producer_epoch=3, transaction_result=True, coordinator_epoch=11,
        topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name="t", partition_indexes=[0, 2])])])
    body = (struct.pack(">i", 1) + struct.pack(">qh?", 7, 3, True)
            + struct.pack(">i", 1) + _string("t") + struct.pack(">iii", 2, 0, 2)
            + struct.pack(">i", 11))
    frame = encode_request(ApiKey.WRITE_TXN_MARKERS, 0, 5, "c", request)
    assert frame == encode_request_header(ApiKey.WRITE_TXN_MARKERS, 0, 5, "c") + body
    response_body = (struct.pack(">i", 1) + struct.pack(">q", 7) + struct.pack(">i", 1) + _string("t")
                     + struct.pack(">i", 1) + struct.pack(">ih", 0, 0))
    correlation_id, response = decode_response(ApiKey.WRITE_TXN_MARKERS, 0,
                                               struct.pack(">i", 5) + response_body)
    assert correlation_id == 5
    [marker] = response.markers
    assert (marker.producer_id, marker.topics[0].name, marker.topics[0].partitions[0].partition_index) == (7, "t", 0)
    assert isinstance(response, WriteTxnMarkersResponse)


def test_add_partitions_to_txn_v3_and_v4_are_different_layouts():
    """v0-3 carry one transaction in the V3AndBelow fields; v4+ a batch in ``transactions``;
    the fields of the other layout are not on the wire (and decode to their defaults)."""
    topic = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="t", partitions=[1])
    client = AddPartitionsToTxnRequest(v3_and_below_transactional_id="tx", v3_and_below_producer_id=5,
                                       v3_and_below_producer_epoch=0, v3_and_below_topics=[topic])
    _, decoded = decode_request(encode_request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, 1, "c", client))
    assert (decoded.v3_and_below_transactional_id, decoded.transactions) == ("tx", [])
    broker = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
        transactional_id="tx", producer_id=5, producer_epoch=0, verify_only=True, topics=[topic])])
    _, decoded = decode_request(encode_request(ApiKey.ADD_PARTITIONS_TO_TXN, 4, 1, "c", broker))
    assert decoded.v3_and_below_transactional_id == "" and decoded.transactions[0].verify_only is True
    assert decoded.transactions[0].topics == [topic]
    response = AddPartitionsToTxnResponse(error_code=0, results_by_transaction=[
        AddPartitionsToTxnResponse.AddPartitionsToTxnResult(transactional_id="tx", topic_results=[
            AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(name="t", results_by_partition=[
                AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
                    partition_index=1, partition_error_code=0)])])])
    _, back = decode_response(ApiKey.ADD_PARTITIONS_TO_TXN, 5,
                              encode_response(ApiKey.ADD_PARTITIONS_TO_TXN, 5, 1, response))
    assert back == response


def test_init_producer_id_v6_fields_default_to_no_ongoing_transaction():
    request = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000)
    assert (request.enable2_pc, request.keep_prepared_txn) == (False, False)
    response = InitProducerIdResponse(error_code=0, producer_id=9, producer_epoch=1)
    assert (response.ongoing_txn_producer_id, response.ongoing_txn_producer_epoch) == (-1, -1)
    two_pc = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000,
                                   enable2_pc=True, keep_prepared_txn=True)
    _, decoded = decode_request(encode_request(ApiKey.INIT_PRODUCER_ID, 6, 1, "c", two_pc))
    assert (decoded.enable2_pc, decoded.keep_prepared_txn) == (True, True)
    _, older = decode_request(encode_request(ApiKey.INIT_PRODUCER_ID, 5, 1, "c", two_pc))
    assert (older.enable2_pc, older.keep_prepared_txn) == (False, False)  # not on the v5 wire
