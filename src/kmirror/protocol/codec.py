"""Request decoding and response encoding on top of kio (sans-IO).

Request header v1 (non-flexible requests) or v2 (flexible); response header v0 or v1.
A request whose API key or version the registry does not serve is reported as
`UnsupportedRequest`; the caller answers ApiVersions with a v0 body carrying error 35
(UNSUPPORTED_VERSION) and closes the connection for anything else, as Kafka does.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from kmirror.protocol import item_cache
from kmirror.protocol.fast_writer import fast_writer
from kmirror.protocol.length_guard import check_lengths
from kmirror.protocol.registry import ApiRegistry, ApiSpec
from kmirror.protocol.request_validation import null_field

_PEEK = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")
_HEADER_V0 = struct.Struct(">ii")  # size prefix, correlation id
_HEADER_V1 = struct.Struct(">iiB")  # ... and no tagged fields


@dataclass(frozen=True, slots=True)
class RequestHeaderView:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    header: RequestHeaderView
    spec: ApiSpec
    body: Any


@dataclass(frozen=True, slots=True)
class UnsupportedRequest:
    api_key: int
    api_version: int
    correlation_id: int
    known_api: bool


class MalformedRequest(Exception):
    """The frame cannot be parsed as the request it claims to be (Kafka: InvalidRequestException)."""


def peek(frame: bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) from the fixed prefix of every request header."""
    if len(frame) < _PEEK.size:
        raise MalformedRequest(f"request of {len(frame)} bytes is shorter than a header")
    api_key, api_version, correlation_id = _PEEK.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def decode_request(registry: ApiRegistry, frame: bytes) -> DecodedRequest | UnsupportedRequest:
    api_key, api_version, correlation_id = peek(frame)
    spec = registry.get(api_key)
    if spec is None or not spec.supports(api_version):
        return UnsupportedRequest(api_key, api_version, correlation_id, spec is not None)
    request_type = spec.request_type(api_version)
    header_type = request_type.__header_schema__
    try:
        # kio readers return (entity, bytes consumed)
        header, header_size = entity_reader(header_type)(frame, 0)
        check_lengths(request_type, frame, header_size)  # before kio can reserve absurd arrays
        body, _ = entity_reader(request_type)(frame, header_size)
    except Exception as exc:  # kio raises a variety of decode errors on garbage
        raise MalformedRequest(f"cannot decode api_key={api_key} v{api_version}: {exc}") from exc
    null = null_field(body)
    if null is not None:
        raise MalformedRequest(f"api_key={api_key} v{api_version}: non-nullable field {null} was serialized as null")
    # Bytes after the body are ignored, as Kafka's request parsing does: librdkafka 2.16 sends
    # Metadata v13 requests with trailing bytes that Apache Kafka accepts.
    return DecodedRequest(
        RequestHeaderView(api_key, api_version, correlation_id, getattr(header, "client_id", None)),
        spec,
        body,
    )


def encode_response(spec: ApiSpec, api_version: int, correlation_id: int, response: Any) -> memoryview:
    """The whole response frame: size prefix, response header, body.

    Written into one buffer whose size prefix is patched in place, so a large Fetch response
    is copied once (into the buffer) on its way to the socket. The body is written by
    `fast_writer` (kio's bytes, fewer Python calls), or by the Metadata topic cache.
    """
    response_type = type(response)
    header_v0 = spec.response_header_v0 or not response_type.__flexible__
    cached = item_cache.writer_for(response_type)
    if cached is not None:
        buf = io.BytesIO()
        buf.write(b"\x00\x00\x00\x00")
        if header_v0:
            entity_writer(ResponseHeaderV0)(buf, ResponseHeaderV0(correlation_id=i32(correlation_id)))
        else:
            entity_writer(ResponseHeaderV1)(buf, ResponseHeaderV1(correlation_id=i32(correlation_id)))
        cached(buf, response)
        view = buf.getbuffer()
        _SIZE.pack_into(view, 0, len(view) - 4)
        return view
    # Response header v0 is the correlation id; v1 adds an empty tagged-fields section.
    out = bytearray(_HEADER_V0.pack(0, correlation_id) if header_v0 else _HEADER_V1.pack(0, correlation_id, 0))
    fast_writer(response_type)(out, response)
    _SIZE.pack_into(out, 0, len(out) - 4)
    return memoryview(out)
