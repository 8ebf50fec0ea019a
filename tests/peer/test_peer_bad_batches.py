"""Bad record batches sent to Apache Kafka and to pylog: the Produce answers compared (error code,
base offset, log append time, log start offset, record errors), at the same request versions.

Too large, a bad CRC, records of the wrong shape (Kafka's ``ProduceRequest.validateRecords``), a
valid CRC over bytes that are not a valid batch (Kafka's ``LogValidator``), and compressed sections
that do not decompress (an intended difference, named below).
"""

from __future__ import annotations

import struct
import time

import pytest
from peer_answers import compare, compared_versions, produce_answer
from peer_support import COMMON_BROKER_SETTINGS, unique_topic
from wire_probe import answer_or_close, batch_of, connect, produce_request, serves_after

from broker.records import Compression, Record, encode_batch
from broker.records.header import CRC_OFFSET, HEADER_SIZE, compute_crc
from broker.wire import ApiKey

MESSAGE_MAX_BYTES = int(COMMON_BROKER_SETTINGS["message.max.bytes"])


@pytest.fixture(scope="module")
def versions(peers) -> dict[int, list[int]]:
    return compared_versions(peers)


def test_batch_over_message_max_bytes_is_refused_alike(peers, versions):
    topics = {peer.name: peer.create_topic(unique_topic("too-large")) for peer in peers}
    batch = batch_of([b"x" * (MESSAGE_MAX_BYTES + 1024)])
    for version in versions[ApiKey.PRODUCE]:
        seen = compare(peers, lambda p: produce_answer(p, version, topics[p.name], batch))
        assert seen["kafka"] == seen["pylog"], f"Produce v{version}"
        assert seen["pylog"][0] == "MESSAGE_TOO_LARGE"
    ok = compare(peers, lambda p: produce_answer(p, versions[ApiKey.PRODUCE][-1], topics[p.name],
                                                 batch_of([b"x" * (MESSAGE_MAX_BYTES - 1024)])))
    assert ok["kafka"][:2] == ok["pylog"][:2] == ("NONE", 0), "just under the limit is accepted"


def test_batch_with_a_bad_crc_is_corrupt_message_alike(peers, versions):
    topics = {peer.name: peer.create_topic(unique_topic("bad-crc")) for peer in peers}
    tampered = bytearray(batch_of([b"tampered-%d" % i for i in range(5)]))
    tampered[-3] ^= 0xFF
    zeroed = bytearray(batch_of([b"crc-zeroed"]))
    zeroed[CRC_OFFSET:CRC_OFFSET + 4] = bytes(4)
    for batch in (bytes(tampered), bytes(zeroed)):
        for version in versions[ApiKey.PRODUCE]:
            seen = compare(peers, lambda p: produce_answer(p, version, topics[p.name], batch))
            assert seen["kafka"] == seen["pylog"], f"Produce v{version}"
            assert seen["pylog"][0] == "CORRUPT_MESSAGE"
    # Nothing was appended on either side: the next batch lands at offset 0.
    seen = compare(peers, lambda p: produce_answer(p, versions[ApiKey.PRODUCE][-1], topics[p.name],
                                                   batch_of([b"fine"])))
    assert seen["kafka"] == seen["pylog"]
    assert seen["pylog"][:2] == ("NONE", 0)


def _with_magic(magic: int) -> bytes:
    damaged = bytearray(batch_of([b"old format"]))
    damaged[16] = magic
    return bytes(damaged)


BAD_SHAPES = {
    "two batches": lambda: batch_of([b"first"]) + batch_of([b"second"]),
    "no batch": lambda: b"",
    "magic 1": lambda: _with_magic(1),
    "magic 7": lambda: _with_magic(7),
    "cut short": lambda: batch_of([b"cut short"])[:-5],
    "length 3": lambda: batch_of([b"tiny length"])[:8] + b"\x00\x00\x00\x03" + bytes(40),
}


@pytest.mark.parametrize("shape", BAD_SHAPES)
def test_records_of_the_wrong_shape_are_refused_alike(peers, versions, shape):
    topics = {peer.name: peer.create_topic(unique_topic("shape")) for peer in peers}
    records = BAD_SHAPES[shape]()
    for version in versions[ApiKey.PRODUCE]:
        seen = compare(peers, lambda p: produce_answer(p, version, topics[p.name], records))
        assert seen["kafka"] == seen["pylog"], f"Produce v{version}"
        assert seen["pylog"][0] != "NONE"


def recrc(batch: bytes) -> bytes:
    fixed = bytearray(batch)
    struct.pack_into(">I", fixed, CRC_OFFSET, compute_crc(fixed, 0, len(fixed)))
    return bytes(fixed)


def patched(batch: bytes, offset: int, fmt: str, value: int) -> bytes:
    """``batch`` with one header field changed and the CRC made right again."""
    changed = bytearray(batch)
    struct.pack_into(fmt, changed, offset, value)
    return recrc(bytes(changed))


def _record_length_overrun() -> bytes:
    batch = bytearray(batch_of([b"a", b"b", b"c"]))
    batch[HEADER_SIZE] = 0x7E  # the first record's length varint: 63, past the batch's end
    return recrc(bytes(batch))


THREE = batch_of([b"a", b"b", b"c"])


# A valid CRC over bytes that are not a valid batch: Kafka's LogValidator (INVALID_RECORD).
VALID_CRC_BAD_CONTENT = {
    "records count above the records": lambda: patched(THREE, 57, ">i", 5),
    "records count below the records": lambda: patched(THREE, 57, ">i", 2),
    "lastOffsetDelta above the count": lambda: patched(THREE, 23, ">i", 5),
    "lastOffsetDelta below the count": lambda: patched(THREE, 23, ">i", 1),
    "a record's length overruns the batch": _record_length_overrun,
    "a control batch from a client": lambda: patched(THREE, 21, ">h", 0x20),
    "idempotent with a negative epoch": lambda: patched(patched(THREE, 43, ">q", 5), 51, ">h", -1),
    "transactional without a transactional id": lambda: patched(THREE, 21, ">h", 0x10),
}


@pytest.mark.parametrize("case", VALID_CRC_BAD_CONTENT)
def test_well_checksummed_bad_batches_are_refused_alike(peers, versions, case):
    topics = {peer.name: peer.create_topic(unique_topic("valid-crc")) for peer in peers}
    batch = VALID_CRC_BAD_CONTENT[case]()
    for version in versions[ApiKey.PRODUCE]:
        seen = compare(peers, lambda p: produce_answer(p, version, topics[p.name], batch))
        assert seen["kafka"] == seen["pylog"], f"Produce v{version}"
        assert seen["pylog"][0] != "NONE"


# Intended difference: a compressed section that does not decompress (or an unknown codec id)
# is CORRUPT_MESSAGE from pylog, which says what is wrong; Kafka's LogValidator fails with an
# unmapped exception and answers UNKNOWN_SERVER_ERROR (-1).
UNDECOMPRESSABLE = {"kafka": ("UNKNOWN_SERVER_ERROR", -1, -1, 0, []),
                    "pylog": ("CORRUPT_MESSAGE", -1, -1, -1, [])}


def _garbled(compression: int) -> bytes:
    now = int(time.time() * 1000)
    batch = bytearray(encode_batch([Record(i, now, None, b"v" * 200) for i in range(50)],
                                   compression=compression))
    batch[HEADER_SIZE + 12:HEADER_SIZE + 40] = b"\xff" * 28
    return recrc(bytes(batch))


@pytest.mark.parametrize("case", ["lz4", "gzip", "codec id 5"])
def test_undecompressable_batches_are_refused_by_both(peers, versions, case):
    topics = {peer.name: peer.create_topic(unique_topic("garbled")) for peer in peers}
    batch = {"lz4": lambda: _garbled(Compression.LZ4), "gzip": lambda: _garbled(Compression.GZIP),
             "codec id 5": lambda: patched(THREE, 21, ">h", 5)}[case]()
    seen = compare(peers, lambda p: produce_answer(p, versions[ApiKey.PRODUCE][-1], topics[p.name], batch))
    assert seen == UNDECOMPRESSABLE


# Intended difference: a partition with null records. pylog answers INVALID_RECORD (no batch, as
# for empty records); Apache Kafka 4.1 never answers the request (its handler fails on the null
# records), so a client waits for its request timeout.
def test_null_records_are_invalid_record_on_pylog_and_unanswered_by_kafka(peers, versions):
    kafka, pylog = peers
    version = versions[ApiKey.PRODUCE][-1]
    with connect(kafka) as raw:
        raw.send(ApiKey.PRODUCE, version, produce_request(kafka.create_topic(unique_topic("null-records")), None))
        assert answer_or_close(raw, 1.0) == "silent"
    answer = produce_answer(pylog, version, pylog.create_topic(unique_topic("null-records")), None)
    assert answer == ("INVALID_RECORD", -1, -1, -1, [])
    assert serves_after(kafka) and serves_after(pylog)


def test_a_client_batch_whose_base_offset_is_not_zero_is_refused_alike(peers, versions):
    """The leader assigns every offset: Kafka's LogValidator refuses a client batch whose
    baseOffset is not 0 (pylog's Arrow producer once sent one per batch after the first)."""
    topics = {peer.name: peer.create_topic(unique_topic("base-offset")) for peer in peers}
    now = int(time.time() * 1000)
    batch = encode_batch([Record(5 + i, now, None, b"v%d" % i) for i in range(3)])  # baseOffset 5
    for version in versions[ApiKey.PRODUCE]:
        seen = compare(peers, lambda p: produce_answer(p, version, topics[p.name], batch))
        assert seen["kafka"] == seen["pylog"], f"Produce v{version}"
        assert seen["pylog"][0] == "INVALID_RECORD"
    seen = compare(peers, lambda p: produce_answer(p, versions[ApiKey.PRODUCE][-1], topics[p.name],
                                                   batch_of([b"fine"])))
    assert seen["kafka"][:2] == seen["pylog"][:2] == ("NONE", 0), "nothing was appended before"
