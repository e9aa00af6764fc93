"""Record batch compression codecs, byte-compatible with Kafka's Java client and librdkafka.

The broker only *decompresses* (to validate compressed batches on produce, as Kafka's
LogValidator does) and never recompresses a stored batch; `compress` exists for building
batches (producers, the metadata log, tests).

Framing per codec (attribute bits 0-2 of a v2 batch):
- gzip (1): a standard gzip stream.
- snappy (2): the Java producer writes xerial-snappy framing (`\\x82SNAPPY\\x00`, version,
  compat, then `[int32 length][raw snappy block]`...); librdkafka may send one raw snappy
  block. Both are accepted, as xerial's SnappyInputStream does; we write xerial framing.
- lz4 (3): the LZ4 frame format with independent 64 KiB blocks (Kafka's
  `Lz4BlockOutputStream` writes no content size and no content checksum).
- zstd (4): zstd frames, possibly without a declared content size.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from enum import IntEnum
from typing import Final

import cramjam
import lz4.frame
import zstandard

from kmirror.records.batch import Buffer, CorruptRecordError


class CompressionType(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """Kafka's `compression.type` names: none, gzip, snappy, lz4, zstd."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown compression type '{name}'") from None

    @property
    def kafka_name(self) -> str:
        return self.name.lower()


class UnsupportedCompressionError(CorruptRecordError):
    """A batch declares a codec id Kafka does not define (5-7)."""


XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER: Final = struct.Struct(">8sii")
_XERIAL_VERSION: Final = 1
_XERIAL_COMPAT_VERSION: Final = 1
_XERIAL_BLOCK_SIZE: Final = 32 * 1024  # the Java producer's SnappyOutputStream block size
_INT32: Final = struct.Struct(">i")
_GZIP_LEVEL: Final = 6  # Kafka's default compression.gzip.level (-1 = zlib default 6)
_ZSTD_LEVEL: Final = 3  # Kafka's default compression.zstd.level
_zstd_compressor: Final = zstandard.ZstdCompressor(level=_ZSTD_LEVEL)
_zstd_decompressor: Final = zstandard.ZstdDecompressor()


def compress(codec: int, data: Buffer) -> bytes:
    """Compress `data` as a batch's records section for `codec`."""
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.GZIP:
        return gzip.compress(data, compresslevel=_GZIP_LEVEL, mtime=0)
    if codec == CompressionType.SNAPPY:
        return _xerial_compress(data)
    if codec == CompressionType.LZ4:
        return bytes(lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX64KB, block_linked=False,
                                        content_checksum=False, store_size=False))
    if codec == CompressionType.ZSTD:
        return bytes(_zstd_compressor.compress(data))
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")


def decompress(codec: int, data: Buffer) -> bytes:
    """Decompress a batch's records section; malformed input raises `CorruptRecordError`."""
    try:
        if codec == CompressionType.NONE:
            return bytes(data)
        if codec == CompressionType.GZIP:
            return gzip.decompress(data)
        if codec == CompressionType.SNAPPY:
            return _snappy_decompress(data)
        if codec == CompressionType.LZ4:
            return bytes(lz4.frame.decompress(data))
        if codec == CompressionType.ZSTD:
            return _zstd_decompress(data)
    except CorruptRecordError:
        raise
    except (OSError, EOFError, ValueError, RuntimeError, zlib.error, zstandard.ZstdError,
            cramjam.DecompressionError) as error:
        raise CorruptRecordError(f"cannot decompress {_codec_name(codec)} records: {error}") from error
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")


def _codec_name(codec: int) -> str:
    try:
        return CompressionType(codec).kafka_name
    except ValueError:
        return f"codec {codec}"


def _xerial_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_COMPAT_VERSION)]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + _XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: Buffer) -> bytes:
    view = memoryview(data)
    if len(view) < _XERIAL_HEADER.size or bytes(view[:len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    out = []
    pos = _XERIAL_HEADER.size
    while pos < len(view):
        if pos + 4 > len(view):
            raise CorruptRecordError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > len(view):
            raise CorruptRecordError("truncated xerial snappy block")
        out.append(bytes(cramjam.snappy.decompress_raw(view[pos:pos + length])))
        pos += length
    return b"".join(out)


def _zstd_decompress(data: Buffer) -> bytes:
    """Decompress consecutive zstd frames; a frame that does not end is corrupt."""
    out = []
    remaining: Buffer = data
    while len(remaining):
        frame = _zstd_decompressor.decompressobj()
        out.append(frame.decompress(remaining))
        if not frame.eof:
            raise CorruptRecordError("truncated zstd frame")
        remaining = frame.unused_data
    return b"".join(out)
