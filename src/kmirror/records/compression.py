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

`decompress(codec, data, max_bytes)` bounds the output: it stream-decompresses and raises
`DecompressedTooLarge` as soon as more than `max_bytes` would come out, so a decompression
bomb (a few KB expanding to GBs) costs at most `max_bytes` of memory and the time to produce
them. The leader's produce validation passes the topic's `max.message.bytes`.
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


class DecompressedTooLarge(CorruptRecordError):
    """The records would decompress to more than the allowed bytes."""

    def __init__(self, codec: int, max_bytes: int) -> None:
        super().__init__(f"{_codec_name(codec)} records decompress to more than {max_bytes} bytes")
        self.max_bytes = max_bytes


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
_ZSTD_CHUNK: Final = 256 * 1024
_ZSTD_ONE_SHOT_MAX: Final = 64 * 1024 * 1024  # a declared size above this is streamed, not trusted


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


def decompress(codec: int, data: Buffer, max_bytes: int | None = None) -> bytes:
    """Decompress a batch's records section; malformed input raises `CorruptRecordError`,
    output past `max_bytes` (None: unbounded) `DecompressedTooLarge`."""
    try:
        if codec == CompressionType.NONE:
            return bytes(data)
        if max_bytes is not None:
            return _decompress_bounded(codec, data, max_bytes)
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


def _decompress_bounded(codec: int, data: Buffer, max_bytes: int) -> bytes:
    if codec == CompressionType.GZIP:
        return _gzip_bounded(data, max_bytes)
    if codec == CompressionType.SNAPPY:
        return _snappy_decompress(data, max_bytes)
    if codec == CompressionType.LZ4:
        return _lz4_bounded(data, max_bytes)
    if codec == CompressionType.ZSTD:
        _zstd_check_size(data, max_bytes)
        return _zstd_decompress(data)
    raise UnsupportedCompressionError(f"unknown compression codec id {codec}")


def _gzip_bounded(data: Buffer, max_bytes: int) -> bytes:
    """Concatenated gzip members, as `gzip.decompress` reads them; a member that does not
    end is corrupt."""
    out: list[bytes] = []
    total = 0
    remaining = bytes(data)
    while remaining:
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = remaining
        while True:
            chunk = member.decompress(pending, max_bytes - total + 1)
            total += len(chunk)
            if total > max_bytes:
                raise DecompressedTooLarge(CompressionType.GZIP, max_bytes)
            out.append(chunk)
            pending = member.unconsumed_tail
            if member.eof or not pending:
                break
        if not member.eof:
            raise CorruptRecordError("truncated gzip member")
        remaining = member.unused_data
    return b"".join(out)


def _lz4_bounded(data: Buffer, max_bytes: int) -> bytes:
    out: list[bytes] = []
    total = 0
    remaining = bytes(data)
    while remaining:
        frame = lz4.frame.LZ4FrameDecompressor()
        pending = remaining
        while True:
            chunk = frame.decompress(pending, max_length=max_bytes - total + 1)
            total += len(chunk)
            if total > max_bytes:
                raise DecompressedTooLarge(CompressionType.LZ4, max_bytes)
            out.append(chunk)
            pending = b""
            if frame.eof or frame.needs_input:
                break
        if not frame.eof:
            raise CorruptRecordError("truncated lz4 frame")
        remaining = frame.unused_data
    return b"".join(out)


def _zstd_check_size(data: Buffer, max_bytes: int) -> None:
    """Count the output of every frame in bounded chunks, stopping past `max_bytes`
    (a frame's declared content size is not trusted: frames may omit it)."""
    reader = _zstd_decompressor.stream_reader(bytes(data), read_across_frames=True)
    total = 0
    while True:
        chunk = reader.read(_ZSTD_CHUNK)
        if not chunk:
            return
        total += len(chunk)
        if total > max_bytes:
            raise DecompressedTooLarge(CompressionType.ZSTD, max_bytes)


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


def _snappy_decompress(data: Buffer, max_bytes: int | None = None) -> bytes:
    view = memoryview(data)
    if len(view) < _XERIAL_HEADER.size or bytes(view[:len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        _snappy_check_size(view, max_bytes)
        return bytes(cramjam.snappy.decompress_raw(view))
    out = []
    total = 0
    pos = _XERIAL_HEADER.size
    while pos < len(view):
        if pos + 4 > len(view):
            raise CorruptRecordError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(view, pos)
        pos += 4
        if length < 0 or pos + length > len(view):
            raise CorruptRecordError("truncated xerial snappy block")
        block = view[pos:pos + length]
        if max_bytes is not None:
            total += _snappy_check_size(block, max_bytes - total)
        out.append(bytes(cramjam.snappy.decompress_raw(block)))
        pos += length
    return b"".join(out)


def _snappy_check_size(block: memoryview, max_bytes: int | None) -> int:
    """A raw snappy block starts with its uncompressed length (a varint): checked before
    anything is allocated."""
    if max_bytes is None:
        return 0
    length = 0
    for i in range(min(5, len(block))):
        byte = block[i]
        length |= (byte & 0x7F) << (7 * i)
        if byte < 0x80:
            break
    if length > max_bytes:
        raise DecompressedTooLarge(CompressionType.SNAPPY, max_bytes)
    return length


def _zstd_decompress(data: Buffer) -> bytes:
    """Decompress consecutive zstd frames; a frame that does not end is corrupt.

    The common case, one frame whose header declares its size (librdkafka's producers write
    it), is decompressed in one call into a buffer of that size: 1.7x faster than streaming,
    which grows its output in chunks and joins them. Several frames, a frame without its size
    (a streaming compressor's), a size above `_ZSTD_ONE_SHOT_MAX` or corrupt input take the
    streaming path, which also names the error."""
    try:
        size = zstandard.frame_content_size(data)
    except zstandard.ZstdError:
        size = -1
    if 0 <= size <= _ZSTD_ONE_SHOT_MAX:
        try:
            # The module's decompression context: callers decompress from one thread (the event
            # loop's, a Spark task's); a fresh context per call would cost ~15 us.
            return bytes(_zstd_decompressor.decompress(data, allow_extra_data=False))
        except zstandard.ZstdError:
            pass
    out = []
    remaining: Buffer = data
    while len(remaining):
        frame = _zstd_decompressor.decompressobj()
        out.append(frame.decompress(remaining))
        if not frame.eof:
            raise CorruptRecordError("truncated zstd frame")
        remaining = frame.unused_data
    return b"".join(out)
