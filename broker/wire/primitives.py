"""Bounded readers and writers for the Kafka protocol's primitive types.

Readers take ``(buf, pos, field, ...)`` and return ``(value, new_pos)``; ``buf`` is a memoryview
of one whole frame, ``field`` names what is being read for the error message. Every reader checks
the bytes left *before* it reads or allocates (STYLE.md: lengths from the wire are never
trusted), and raises ``MalformedMessage`` instead of letting ``IndexError`` or ``struct.error``
escape. Writers raise ``EncodeError`` for values that cannot be represented.

Encodings (docs/protocol.html "Protocol Primitive Types", KIP-482 for the compact ones):
  STRING / NULLABLE_STRING   int16 length, -1 = null; at most 32767 bytes of UTF-8
  BYTES / NULLABLE_BYTES     int32 length, -1 = null
  ARRAY                      int32 count, -1 = null
  COMPACT_*                  unsigned varint of (length + 1), 0 = null
  UNSIGNED_VARINT            7 bits per byte, little-endian groups, at most 5 bytes (32 bits)
  VARINT / VARLONG           ZigZag-encoded, at most 5 / 10 bytes
"""

from __future__ import annotations

import struct
import uuid

from broker.wire.errors import EncodeError, MalformedMessage

__all__ = [
    "INT8", "INT16", "INT32", "INT64", "UINT16", "FLOAT64", "BOOL",
    "STRING_BYTES_MAX",
    "read_uvarint", "read_uvarlong", "read_varint", "read_varlong",
    "encode_uvarint", "encode_uvarlong", "encode_varint", "encode_varlong",
    "read_string", "read_compact_string", "encode_string",
    "read_bytes", "read_compact_bytes", "write_bytes",
    "read_array_count", "encode_array_count",
    "read_uuid", "encode_uuid", "ZERO_UUID",
    "skip_tagged_fields",
    "truncated",
]

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
FLOAT64 = struct.Struct(">d")
BOOL = struct.Struct(">?")

# Kafka's generated code refuses longer strings in both directions, compact or not
# ("had invalid length" / "is too long to be serialized"), because the classic length is an int16.
STRING_BYTES_MAX = 0x7FFF
BYTES_MAX = 0x7FFFFFFF
ZERO_UUID = uuid.UUID(int=0)

_ONE_BYTE_UVARINTS = tuple(bytes((n,)) for n in range(0x80))


def truncated(field: str, need: int, pos: int, end: int) -> MalformedMessage:
    """The error for 'needed ``need`` bytes at ``pos`` but the frame ends at ``end``'."""
    return MalformedMessage(field, f"{need} bytes", f"{max(end - pos, 0)} bytes left", pos)


def _read_unsigned(buf, pos: int, field: str, max_bytes: int, max_value: int) -> tuple[int, int]:
    end = len(buf)
    start = pos
    value = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise truncated(field, 1, pos, end)
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            if value > max_value:
                raise MalformedMessage(field, f"a varint <= {max_value}", str(value), start)
            return value, pos
        shift += 7
    raise MalformedMessage(field, f"a varint of at most {max_bytes} bytes", "a longer one", start)


def read_uvarint(buf, pos: int, field: str) -> tuple[int, int]:
    """Unsigned 32-bit varint (lengths, counts, tags in flexible versions)."""
    if pos + 2 < len(buf):  # unrolled fast path for up to 3 bytes (values below 2 MiB)
        byte = buf[pos]
        if byte < 0x80:
            return byte, pos + 1
        value = byte & 0x7F
        byte = buf[pos + 1]
        if byte < 0x80:
            return value | (byte << 7), pos + 2
        byte2 = buf[pos + 2]
        if byte2 < 0x80:
            return value | ((byte & 0x7F) << 7) | (byte2 << 14), pos + 3
    elif pos < len(buf) and buf[pos] < 0x80:
        return buf[pos], pos + 1
    return _read_unsigned(buf, pos, field, 5, 0xFFFFFFFF)


def read_uvarlong(buf, pos: int, field: str) -> tuple[int, int]:
    """Unsigned 64-bit varint, at most 10 bytes."""
    return _read_unsigned(buf, pos, field, 10, 0xFFFFFFFFFFFFFFFF)


def read_varint(buf, pos: int, field: str) -> tuple[int, int]:
    """ZigZag signed 32-bit varint."""
    raw, pos = _read_unsigned(buf, pos, field, 5, 0xFFFFFFFF)
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf, pos: int, field: str) -> tuple[int, int]:
    """ZigZag signed 64-bit varint."""
    raw, pos = _read_unsigned(buf, pos, field, 10, 0xFFFFFFFFFFFFFFFF)
    return (raw >> 1) ^ -(raw & 1), pos


def _encode_unsigned(value: int, max_value: int, field: str) -> bytes:
    if not isinstance(value, int) or not 0 <= value <= max_value:
        raise EncodeError(field, f"{value!r} is not an integer in 0..{max_value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_uvarint(value: int, field: str = "uvarint") -> bytes:
    if 0 <= value < 0x80:
        return _ONE_BYTE_UVARINTS[value]
    if 0x80 <= value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    return _encode_unsigned(value, 0xFFFFFFFF, field)


def encode_uvarlong(value: int, field: str = "uvarlong") -> bytes:
    return _encode_unsigned(value, 0xFFFFFFFFFFFFFFFF, field)


def encode_varint(value: int, field: str = "varint") -> bytes:
    if not isinstance(value, int) or not -(1 << 31) <= value < (1 << 31):
        raise EncodeError(field, f"{value!r} is not a 32-bit signed integer")
    return _encode_unsigned((value << 1) ^ (value >> 31), 0xFFFFFFFF, field)


def encode_varlong(value: int, field: str = "varlong") -> bytes:
    if not isinstance(value, int) or not -(1 << 63) <= value < (1 << 63):
        raise EncodeError(field, f"{value!r} is not a 64-bit signed integer")
    return _encode_unsigned((value << 1) ^ (value >> 63), 0xFFFFFFFFFFFFFFFF, field)


def _null_or_negative(field: str, length: int, nullable: bool, pos: int) -> None:
    """Raise for a length the spec does not allow (null when not nullable, or < -1)."""
    if length == -1 and nullable:
        return
    allowed = ">= 0 or -1 (null)" if nullable else ">= 0 (field is not nullable)"
    raise MalformedMessage(field, f"a length {allowed}", str(length), pos)


def _utf8(buf, pos: int, length: int, field: str) -> str:
    try:
        return str(buf[pos:pos + length], "utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedMessage(field, "UTF-8 text", f"invalid UTF-8 ({exc.reason})", pos) from None


def read_string(buf, pos: int, field: str, nullable: bool) -> tuple[str | None, int]:
    """STRING / NULLABLE_STRING: int16 length then UTF-8 bytes."""
    end = len(buf)
    if end - pos < 2:
        raise truncated(field, 2, pos, end)
    length = INT16.unpack_from(buf, pos)[0]
    if length < 0:
        _null_or_negative(field, length, nullable, pos)
        return None, pos + 2
    pos += 2
    if length > end - pos:
        raise truncated(field, length, pos, end)
    return _utf8(buf, pos, length, field), pos + length


def read_compact_string(buf, pos: int, field: str, nullable: bool) -> tuple[str | None, int]:
    """COMPACT_STRING / COMPACT_NULLABLE_STRING: uvarint (length + 1), 0 = null."""
    start = pos
    raw, pos = read_uvarint(buf, pos, field)
    if raw == 0:
        _null_or_negative(field, -1, nullable, start)
        return None, pos
    length = raw - 1
    if length > STRING_BYTES_MAX:
        raise MalformedMessage(field, f"a string length <= {STRING_BYTES_MAX}", str(length), start)
    if length > len(buf) - pos:
        raise truncated(field, length, pos, len(buf))
    return _utf8(buf, pos, length, field), pos + length


def encode_string(value: str | None, field: str, nullable: bool, compact: bool) -> bytes:
    if value is None:
        if not nullable:
            raise EncodeError(field, "null in a non-nullable string")
        return b"\x00" if compact else b"\xff\xff"
    if not isinstance(value, str):
        raise EncodeError(field, f"expected str, got {type(value).__name__}")
    data = value.encode("utf-8")
    if len(data) > STRING_BYTES_MAX:
        raise EncodeError(field, f"{len(data)} bytes is longer than {STRING_BYTES_MAX}")
    prefix = encode_uvarint(len(data) + 1) if compact else INT16.pack(len(data))
    return prefix + data


def read_bytes(buf, pos: int, field: str, nullable: bool) -> tuple[memoryview | None, int]:
    """BYTES / NULLABLE_BYTES / RECORDS: int32 length, then a zero-copy slice of ``buf``."""
    end = len(buf)
    if end - pos < 4:
        raise truncated(field, 4, pos, end)
    length = INT32.unpack_from(buf, pos)[0]
    if length < 0:
        _null_or_negative(field, length, nullable, pos)
        return None, pos + 4
    pos += 4
    if length > end - pos:
        raise truncated(field, length, pos, end)
    return buf[pos:pos + length], pos + length


def read_compact_bytes(buf, pos: int, field: str, nullable: bool) -> tuple[memoryview | None, int]:
    """COMPACT_BYTES / COMPACT_RECORDS: uvarint (length + 1), 0 = null; zero-copy slice."""
    start = pos
    raw, pos = read_uvarint(buf, pos, field)
    if raw == 0:
        _null_or_negative(field, -1, nullable, start)
        return None, pos
    length = raw - 1
    if length > len(buf) - pos:
        raise truncated(field, length, pos, len(buf))
    return buf[pos:pos + length], pos + length


def write_bytes(out: list, value, field: str, nullable: bool, compact: bool) -> None:
    """Append the length prefix and then ``value`` itself (not a copy) to ``out``, so record
    batches travel from the log to the socket without being copied by the codec."""
    if value is None:
        if not nullable:
            raise EncodeError(field, "null in non-nullable bytes")
        out.append(b"\x00" if compact else b"\xff\xff\xff\xff")
        return
    if isinstance(value, memoryview):
        if value.format != "B" or value.ndim != 1:
            value = value.cast("B")  # so len() of every chunk is its size in bytes
    elif not isinstance(value, (bytes, bytearray)):
        raise EncodeError(field, f"expected bytes-like, got {type(value).__name__}")
    length = len(value)
    if length > BYTES_MAX:
        raise EncodeError(field, f"{length} bytes is longer than {BYTES_MAX}")
    out.append(encode_uvarint(length + 1) if compact else INT32.pack(length))
    if length:
        out.append(value)


def read_array_count(
    buf, pos: int, field: str, nullable: bool, compact: bool, item_size_min: int
) -> tuple[int | None, int]:
    """ARRAY count (int32, -1 = null) or COMPACT_ARRAY count (uvarint n+1, 0 = null).

    ``item_size_min`` is the fewest bytes one element can take; a count whose elements could
    not fit in the bytes left is rejected before any list is allocated (Kafka's generated readers
    do the same check against ``_readable.remaining()``)."""
    start = pos
    if compact:
        raw, pos = read_uvarint(buf, pos, field)
        count = raw - 1
    else:
        if len(buf) - pos < 4:
            raise truncated(field, 4, pos, len(buf))
        count = INT32.unpack_from(buf, pos)[0]
        pos += 4
    if count < 0:
        _null_or_negative(field, count, nullable, start)
        return None, pos
    left = len(buf) - pos
    if count * item_size_min > left:
        raise MalformedMessage(
            field, f"{count} items of >= {item_size_min} bytes", f"{left} bytes left", start
        )
    return count, pos


def encode_array_count(items, field: str, nullable: bool, compact: bool) -> bytes:
    if items is None:
        if not nullable:
            raise EncodeError(field, "null in a non-nullable array")
        return b"\x00" if compact else b"\xff\xff\xff\xff"
    count = len(items)
    return encode_uvarint(count + 1, field) if compact else INT32.pack(count)


def read_uuid(buf, pos: int, field: str) -> tuple[uuid.UUID, int]:
    if len(buf) - pos < 16:
        raise truncated(field, 16, pos, len(buf))
    return uuid.UUID(bytes=bytes(buf[pos:pos + 16])), pos + 16


def encode_uuid(value, field: str) -> bytes:
    if isinstance(value, uuid.UUID):
        return value.bytes
    raise EncodeError(field, f"expected uuid.UUID, got {type(value).__name__}")


def skip_tagged_fields(buf, pos: int, field: str) -> tuple[dict[int, bytes] | None, int]:
    """Read a tagged-field section whose tags are all unknown to us (the request header v2 has
    none defined): return ``{tag: raw bytes}`` (None if empty) and the position after it."""
    count, pos = read_uvarint(buf, pos, field)
    if count * 2 > len(buf) - pos:  # each tagged field takes >= 2 bytes (tag, size)
        raise MalformedMessage(field, f"{count} tagged fields", f"{len(buf) - pos} bytes left", pos)
    tags = None
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos, field)
        size, pos = read_uvarint(buf, pos, field)
        if size > len(buf) - pos:
            raise truncated(f"{field} tag {tag}", size, pos, len(buf))
        if tags is None:
            tags = {}
        tags[tag] = bytes(buf[pos:pos + size])
        pos += size
    return tags, pos
