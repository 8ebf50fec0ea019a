"""Compression codecs of RecordBatch v2: none, gzip and lz4; snappy and zstd are refused.

The codec id lives in bits 0-2 of the batch attributes. For magic 2 the lz4 codec is the standard
LZ4 *frame* format (the broken header-checksum variant existed only for magic 0), and gzip is a
plain gzip member. Decompression is always capped: a few KiB of gzip can expand to GiB (a
"decompression bomb"), so we never ask a decompressor for more than ``max_bytes + 1``.
"""

from __future__ import annotations

import enum
import zlib

import lz4.frame

from broker.records.errors import (
    CorruptRecordError,
    RecordBatchTooLargeError,
    UnsupportedCompressionError,
)

__all__ = ["Compression", "compress", "decompress"]


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> "Compression":
        """Parse a Kafka ``compression.type`` value ("none", "gzip", "lz4", ...)."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            valid = ", ".join(c.name.lower() for c in cls)
            raise ValueError(f"unknown compression type {name!r}; valid: {valid}") from None


SUPPORTED = frozenset({Compression.NONE, Compression.GZIP, Compression.LZ4})


def check_supported(codec: int) -> Compression:
    """Return the codec if pylog can read and write it, else raise the matching typed error."""
    if codec in SUPPORTED:
        return Compression(codec)
    if codec in (Compression.SNAPPY, Compression.ZSTD):
        raise UnsupportedCompressionError(
            f"unsupported compression {Compression(codec).name.lower()}: pylog accepts none, gzip and lz4"
        )
    raise CorruptRecordError(f"invalid compression codec id {codec} in batch attributes")


# Kafka's lz4 blocks are 64 KiB, independent, with content checksum off (KafkaLZ4BlockOutputStream).
# python-lz4's compress(data, compression_level, block_size, content_checksum, block_checksum,
# block_linked) gets them by position: as keywords they cost ~0.7 us a call to parse, 5% of a
# 16 KiB batch's encode (bench/codec.py). The assertion guards the order against a new python-lz4.
_LZ4 = int(Compression.LZ4)
_LZ4_FRAME = (lz4.frame.BLOCKSIZE_MAX64KB, False, False, False)
_LZ4_FRAME_INFO = lz4.frame.get_frame_info(lz4.frame.compress(b"kafka", 0, *_LZ4_FRAME))
assert (_LZ4_FRAME_INFO["block_size_id"], _LZ4_FRAME_INFO["content_checksum"],
        _LZ4_FRAME_INFO["block_checksum"], _LZ4_FRAME_INFO["block_linked"]) == _LZ4_FRAME


def compress(codec: int, data: bytes | memoryview, level: int | None = None) -> bytes:
    # lz4 before check_supported, on the plain int: Compression(codec) alone costs ~0.3 us.
    # python-lz4 reads any contiguous buffer: no bytes() copy of the input (1 MiB per batch).
    if codec == _LZ4:
        return lz4.frame.compress(data, 0 if level is None else level, *_LZ4_FRAME)
    codec = check_supported(codec)
    if codec == Compression.NONE:
        return bytes(data)
    # wbits=31 writes a gzip header and trailer, which is what Kafka's GZIPOutputStream emits.
    compressor = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


def decompress(codec: int, data: bytes | memoryview, max_bytes: int) -> bytes:
    """Decompress ``data``; raise ``RecordBatchTooLargeError`` past ``max_bytes`` of output."""
    codec = check_supported(codec)
    if codec == Compression.NONE:
        if len(data) > max_bytes:
            raise RecordBatchTooLargeError(f"records are {len(data)} bytes, limit {max_bytes}")
        return bytes(data)
    try:
        if codec == Compression.GZIP:
            decompressor = zlib.decompressobj(wbits=47)  # 32 + 15: accept gzip or zlib headers
            out = decompressor.decompress(data, max_bytes + 1)
            complete = decompressor.eof
        else:
            decompressor = lz4.frame.LZ4FrameDecompressor()
            out = decompressor.decompress(bytes(data), max_length=max_bytes + 1)
            complete = decompressor.eof
    except (zlib.error, RuntimeError) as exc:
        raise CorruptRecordError(f"{codec.name.lower()} data does not decompress: {exc}") from exc
    if len(out) > max_bytes:
        raise RecordBatchTooLargeError(
            f"decompressed records exceed the limit of {max_bytes} bytes (decompression bomb?)"
        )
    if not complete:
        raise CorruptRecordError(f"{codec.name.lower()} data is truncated")
    return out
