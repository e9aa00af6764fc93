"""Pieces of a scripted broker on loopback, for client tests: size-prefixed frames in and out,
and the ApiVersions v0 answer naming the API ranges a test's broker claims."""

from __future__ import annotations

import asyncio
import io

from kio.schema.api_versions.v0.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.static.primitive import i16

FRAME_SIZE_BYTES = 4


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    """The next request frame (header and body, without its size), None once the client closed."""
    try:
        size = int.from_bytes(await reader.readexactly(FRAME_SIZE_BYTES), "big")
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError:
        return None


def write_frame(writer: asyncio.StreamWriter, payload: bytes) -> None:
    writer.write(len(payload).to_bytes(FRAME_SIZE_BYTES, "big") + payload)


def api_versions_v0_answer(correlation_id: bytes, api_versions: dict[int, tuple[int, int]]) -> bytes:
    """A response frame's payload: the correlation id, then an ApiVersions v0 body without error
    listing {api key: (min version, max version)}."""
    buf = io.BytesIO()
    entity_writer(ApiVersionsResponse)(buf, ApiVersionsResponse(error_code=ErrorCode.none, api_keys=tuple(
        ApiVersion(api_key=i16(key), min_version=i16(low), max_version=i16(high))
        for key, (low, high) in api_versions.items())))
    return correlation_id + buf.getvalue()
