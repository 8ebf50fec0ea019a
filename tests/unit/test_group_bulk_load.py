"""``bulk_load``: a large partition replayed column-wise must give exactly the groups and offsets
of the record-at-a-time replay (``Shard.load`` of (key, value) pairs), which stays the reference.

The log here mixes everything the column path hands back or must get right: tombstones (last,
and followed by a new commit), value versions 0-3 (v1 with an expire timestamp), v4 (flexible:
the checked decoder's), malformed keys and values, group metadata, non-empty metadata, records
before ``from_offset``, and keys whose bytes differ only in the key version.
"""

import random
import struct

import numpy as np
import pytest

from broker.coordinator.group import bulk_load
from broker.coordinator.group import records as r
from broker.coordinator.group.core import GroupSettings
from broker.coordinator.group.shard import Shard
from broker.records import Record, encode_batch
from broker.server.group_coordinator import _scan_chunks, decode_records


def _shard() -> Shard:
    return Shard(0, GroupSettings(), random.Random(0), iter(range(1, 10**6)).__next__, 0)


def _value(version: int, offset: int, metadata: str = "", expire: int = -1) -> bytes:
    value = r.OffsetCommitValue(offset=offset, leader_epoch=5 if version >= 3 else -1, metadata=metadata,
                                commit_timestamp=1_000 + offset, expire_timestamp=expire)
    return r.encode_offset_commit_value(value, version)


def _log(seed: int) -> list[list[tuple[bytes, bytes | None]]]:
    """Batches of (key, value): random commits to a few keys plus every irregular case."""
    rng = random.Random(seed)
    batches = []
    for b in range(60):
        batch = []
        for _ in range(rng.randint(1, 30)):
            group, topic, part = f"g{rng.randint(0, 6)}", rng.choice(["t", "tópico"]), rng.randint(0, 9)
            key = r.encode_offset_commit_key(group, topic, part)
            roll = rng.random()
            if roll < 0.08:
                value = None
            elif roll < 0.12:
                value = _value(4, rng.randint(0, 99))  # flexible: not the column path's
            elif roll < 0.14:
                value = _value(3, 1)[:-3]  # malformed: skipped, the earlier value stays
            elif roll < 0.18:
                value = _value(1, rng.randint(0, 99), expire=rng.choice([-1, 77]))
            else:
                value = _value(rng.choice([0, 2, 3, 3, 3]), rng.randint(0, 99), rng.choice(["", "", "m€ta"]))
            if roll > 0.97:
                key = struct.pack(">h", 0) + key[2:]  # key v0: other bytes, the same offset key
            batch.append((key, value))
        if b % 7 == 0:
            value = r.GroupMetadataValue(protocol_type="consumer", generation=b, protocol="range", leader="",
                                         current_state_timestamp=-1, members=[])
            batch.append((r.encode_group_metadata_key(f"g{b % 3}"), r.encode_group_metadata_value(value)))
        if b % 11 == 0:
            batch.append((struct.pack(">h", 1) + b"\x00\x05ab", _value(3, 1)))  # a cut key
            batch.append((struct.pack(">h", 9) + b"?", b"?"))  # an unknown key version
        batches.append(batch)
    return batches


def _bytes(batches, base: int = 0) -> bytes:
    out, offset = [], base
    for i, batch in enumerate(batches):
        out.append(encode_batch([Record(offset + j, 0, k, v) for j, (k, v) in enumerate(batch)],
                                base_offset=offset))
        offset += len(batch)
    return b"".join(out)


def _state(shard: Shard):
    return shard.offsets, sorted(shard.groups), {g: v.generation_id for g, v in shard.groups.items()}, \
        shard.skipped_records


@pytest.mark.parametrize("seed", range(5))
def test_column_replay_equals_record_replay(seed):
    data = _bytes(_log(seed), base=100)
    from_offset = 150  # the first batches are below it, as a read from the log start may return
    reference, columns = _shard(), _shard()
    reference.load(decode_records(data, from_offset), 0)
    scanned = _scan_chunks([(100, data[:len(data) // 2]), (0, data[len(data) // 2:])], from_offset)
    assert scanned is None  # a read cut mid-batch: not whole batches when joined
    walked = bulk_load.whole_batches(data[:len(data) // 2])
    scanned = _scan_chunks([(100, data[:walked]), (0, data[walked:])], from_offset)
    assert isinstance(scanned, bulk_load.ScannedRecords)
    assert len(scanned) == len(decode_records(data, from_offset))
    columns.load(scanned, 0)
    assert reference.offsets, "the log commits something"
    assert _state(columns) == _state(reference)


def test_not_utf8_metadata_falls_back_to_the_record_replay():
    key = r.encode_offset_commit_key("g", "t", 0)
    bad = _value(3, 5, "x")[:-9] + b"\xff" + _value(3, 5, "x")[-8:]
    data = _bytes([[(key, _value(3, 4)), (key, bad)]])
    reference, columns = _shard(), _shard()
    reference.load(decode_records(data), 0)
    columns.load(bulk_load.scan(data), 0)
    assert _state(columns) == _state(reference)
    assert columns.offsets["g"][("t", 0)].offset == 4 and columns.skipped_records == 1


def test_corrupt_or_compressed_batches_are_left_to_decode_records():
    good = encode_batch([Record(0, 0, r.encode_offset_commit_key("g", "t", 0), _value(3, 1))], base_offset=0)
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    assert bulk_load.whole_batches(good) == len(good)
    assert bulk_load.whole_batches(bytes(corrupt)) is None
    compressed = encode_batch([Record(0, 0, b"k", b"v")], base_offset=0, compression=1)  # gzip
    assert bulk_load.whole_batches(compressed) is None
    # Transactional offset commits and their markers: the record-at-a-time path's (pending
    # until the marker), so a partition holding any is replayed that way.
    key, value = r.encode_offset_commit_key("g", "t", 0), _value(3, 1)
    transactional = encode_batch([Record(0, 0, key, value)], base_offset=0, transactional=True,
                                 producer_id=7, producer_epoch=0, base_sequence=0)
    marker = encode_batch([Record(1, 0, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")], base_offset=1,
                          control=True, transactional=True, producer_id=7, producer_epoch=0)
    assert bulk_load.whole_batches(good + transactional) is None
    assert bulk_load.whole_batches(good + marker) is None
    assert bulk_load.scan(good + transactional) is None
    assert bulk_load.scan(np.zeros(3, np.uint8).tobytes()) is None
