"""Codec round-trips and Kafka framing details (xerial snappy, raw snappy, multi-frame zstd)."""

from __future__ import annotations

import gzip
import struct

import cramjam
import lz4.frame
import pytest
import zstandard

from kmirror.records.batch import CorruptRecordError
from kmirror.records.compression import (
    XERIAL_MAGIC,
    CompressionType,
    UnsupportedCompressionError,
    compress,
    decompress,
)

DATA = b"".join(b"line %d of some json-ish payload {\"a\": 1}\n" % i for i in range(5000))


@pytest.mark.parametrize("codec", list(CompressionType))
def test_round_trip(codec: CompressionType) -> None:
    assert decompress(codec, compress(codec, DATA)) == DATA
    assert decompress(codec, compress(codec, b"")) == b""


@pytest.mark.parametrize("codec", [c for c in CompressionType if c != CompressionType.NONE])
def test_garbage_and_truncation_are_corrupt(codec: CompressionType) -> None:
    compressed = compress(codec, DATA)
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"definitely not a compressed stream")
    with pytest.raises(CorruptRecordError):
        decompress(codec, compressed[:-7])


def test_snappy_is_written_with_xerial_framing_in_32k_blocks() -> None:
    compressed = compress(CompressionType.SNAPPY, DATA)
    magic, version, compat = struct.unpack_from(">8sii", compressed)
    assert (magic, version, compat) == (XERIAL_MAGIC, 1, 1)
    (first_block_len,) = struct.unpack_from(">i", compressed, 16)
    first = bytes(cramjam.snappy.decompress_raw(compressed[20:20 + first_block_len]))
    assert first == DATA[:32 * 1024]


def test_raw_snappy_from_librdkafka_is_accepted() -> None:
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    assert decompress(CompressionType.SNAPPY, raw) == DATA


def test_foreign_gzip_lz4_zstd_streams_are_accepted() -> None:
    assert decompress(CompressionType.GZIP, gzip.compress(DATA, 9)) == DATA
    assert decompress(CompressionType.LZ4, lz4.frame.compress(DATA, content_checksum=True)) == DATA
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(DATA)
    assert decompress(CompressionType.ZSTD, no_size) == DATA
    assert decompress(CompressionType.ZSTD, no_size + no_size) == DATA + DATA


def test_lz4_frame_has_no_content_size_like_kafka() -> None:
    info = lz4.frame.get_frame_info(compress(CompressionType.LZ4, DATA))
    assert info["content_size"] == 0
    assert info["block_linked"] is False


def test_unknown_codec() -> None:
    with pytest.raises(UnsupportedCompressionError):
        decompress(5, b"x")
    with pytest.raises(UnsupportedCompressionError):
        compress(7, b"x")


def test_names() -> None:
    assert CompressionType.from_name("zstd") is CompressionType.ZSTD
    assert CompressionType.from_name(" GZIP") is CompressionType.GZIP
    assert CompressionType.LZ4.kafka_name == "lz4"
    with pytest.raises(ValueError):
        CompressionType.from_name("producer")


BOMB = b"\x00" * (64 * 1024 * 1024)


@pytest.mark.parametrize("codec", [c for c in CompressionType if c != CompressionType.NONE])
def test_bounded_decompression_refuses_past_the_cap(codec: CompressionType) -> None:
    from kmirror.records.compression import DecompressedTooLarge

    bomb = compress(codec, BOMB)
    assert len(bomb) < len(BOMB) // 20
    with pytest.raises(DecompressedTooLarge):
        decompress(codec, bomb, max_bytes=1_048_588)
    assert decompress(codec, compress(codec, DATA), max_bytes=len(DATA)) == DATA
    with pytest.raises(DecompressedTooLarge):
        decompress(codec, compress(codec, DATA), max_bytes=len(DATA) - 1)


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD])
def test_bounded_decompression_still_detects_truncation(codec: CompressionType) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, compress(codec, DATA)[:-7], max_bytes=len(DATA))


def test_bounded_decompression_reads_every_member_or_frame() -> None:
    two = [b"first" * 100, b"second" * 100]
    assert decompress(CompressionType.GZIP, b"".join(gzip.compress(p) for p in two), max_bytes=2000) == b"".join(two)
    assert decompress(CompressionType.ZSTD, b"".join(zstandard.ZstdCompressor().compress(p) for p in two),
                      max_bytes=2000) == b"".join(two)
    assert decompress(CompressionType.LZ4, b"".join(lz4.frame.compress(p) for p in two),
                      max_bytes=2000) == b"".join(two)


def test_zstd_frames_with_and_without_a_declared_size_and_a_size_that_lies() -> None:
    sized = zstandard.ZstdCompressor().compress(DATA)  # one call: the header declares the size
    unsized = zstandard.ZstdCompressor(write_content_size=False).compress(DATA)
    assert zstandard.frame_content_size(sized) == len(DATA) and zstandard.frame_content_size(unsized) == -1
    assert decompress(CompressionType.ZSTD, sized) == DATA
    assert decompress(CompressionType.ZSTD, memoryview(sized)) == DATA
    for two in (sized + unsized, unsized + sized, sized + sized):
        assert decompress(CompressionType.ZSTD, two) == DATA + DATA
    lying = bytearray(sized)
    lying[5] ^= 0x01  # the declared content size (after the magic, descriptor and window bytes) off by 1
    assert zstandard.frame_content_size(bytes(lying)) != len(DATA)
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.ZSTD, bytes(lying))
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.ZSTD, sized + b"\x00")
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.ZSTD, sized[:-3])
