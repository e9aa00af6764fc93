"""Size-prefixed frames (int32 length, then the payload), decoded incrementally.

Contract: `FrameDecoder.feed(data)` returns every complete frame, in order; bytes of an
incomplete frame stay buffered. A length prefix that is negative or larger than
`max_frame_bytes` raises `FrameTooLarge`: the connection must then be closed, as Kafka's
`NetworkReceive` does for `socket.request.max.bytes`.
"""

from __future__ import annotations

import struct

_LEN = struct.Struct(">i")


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame size {size} outside [0, {limit}]")
        self.size = size
        self.limit = limit


class FrameDecoder:
    __slots__ = ("_buf", "_max")

    def __init__(self, max_frame_bytes: int) -> None:
        self._buf = bytearray()
        self._max = max_frame_bytes

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        self._buf += data
        frames: list[bytes] = []
        buf = self._buf
        pos = 0
        end = len(buf)
        while end - pos >= 4:
            (size,) = _LEN.unpack_from(buf, pos)
            if size < 0 or size > self._max:
                raise FrameTooLarge(size, self._max)
            if end - pos - 4 < size:
                break
            with memoryview(buf) as view:  # one copy, and the export ends before `del`
                frames.append(bytes(view[pos + 4 : pos + 4 + size]))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buf)


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """One frame: the int32 size prefix, then `payload`."""
    return _LEN.pack(len(payload)) + payload
