"""ZigZag varints as used *inside* record batches (Kafka ``ByteUtils.writeVarint``/``writeVarlong``).

These are signed: a value v is stored as (v << 1) ^ (v >> 63), then 7 bits per byte, low first.
They differ from the unsigned varints of the request framing (broker/wire). Decoders bound the
number of bytes (5 for int32, 10 for int64) so a run of 0x80 bytes cannot loop forever.
"""

from __future__ import annotations

from broker.records.errors import CorruptRecordError

__all__ = ["encode_varint", "decode_varint", "size_of_varint"]


def encode_varint(value: int, out: bytearray) -> None:
    """Append the ZigZag varint of ``value`` (an int64) to ``out``."""
    z = (value << 1) ^ (value >> 63)
    z &= 0xFFFFFFFFFFFFFFFF
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def decode_varint(buf: bytes | memoryview, pos: int, max_bytes: int = 10) -> tuple[int, int]:
    """Read a ZigZag varint at ``pos``; return (value, next position)."""
    result = 0
    shift = 0
    end = len(buf)
    limit = pos + max_bytes
    while True:
        if pos >= end:
            raise CorruptRecordError("varint runs past the end of the record data")
        if pos >= limit:
            raise CorruptRecordError(f"varint longer than {max_bytes} bytes")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
    value = (result >> 1) ^ -(result & 1)
    if max_bytes <= 5 and not -(1 << 31) <= value < (1 << 31):
        # Java's readVarint wraps such a value silently; we refuse it as malformed.
        raise CorruptRecordError(f"varint {value} does not fit in an int32")
    return value, pos


def size_of_varint(value: int) -> int:
    z = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size
