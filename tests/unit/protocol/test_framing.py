import struct

import pytest

from kmirror.protocol.framing import FrameDecoder, FrameTooLarge, frame


def _framed(payload: bytes) -> bytes:
    return frame(payload)


def test_split_and_coalesced_frames():
    data = _framed(b"abc") + _framed(b"") + _framed(b"hello")
    dec = FrameDecoder(1024)
    out = []
    for i in range(len(data)):
        out += dec.feed(data[i : i + 1])
    assert out == [b"abc", b"", b"hello"]
    assert dec.buffered == 0
    assert FrameDecoder(1024).feed(data) == [b"abc", b"", b"hello"]


def test_partial_frame_stays_buffered():
    dec = FrameDecoder(1024)
    assert dec.feed(_framed(b"abcdef")[:7]) == []
    assert dec.buffered == 7


@pytest.mark.parametrize("size", [-1, 1025, 2**31 - 1])
def test_size_prefix_outside_limit_is_rejected(size):
    with pytest.raises(FrameTooLarge):
        FrameDecoder(1024).feed(struct.pack(">i", size))
