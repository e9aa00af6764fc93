from hypothesis import given
from hypothesis import strategies as st

from kmirror.protocol.framing import FrameDecoder, frame


@given(st.lists(st.binary(max_size=300), max_size=20), st.lists(st.integers(1, 97), min_size=1, max_size=50))
def test_any_chunking_yields_the_same_frames(payloads, chunk_sizes):
    data = b"".join(frame(x) for x in payloads)
    dec = FrameDecoder(1000)
    out: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(data):
        n = chunk_sizes[i % len(chunk_sizes)]
        out += dec.feed(data[pos : pos + n])
        pos += n
        i += 1
    assert out == payloads
    assert dec.buffered == 0
