"""The client side of the Kafka wire protocol, sans-IO.

`ClientProtocol` turns requests into frames and frames back into responses: it assigns
correlation ids, writes request header v1 (non-flexible request) or v2 (flexible), and
reads response header v0 or v1 (ApiVersions is always answered with header v0, KIP-511).
Several requests may be in flight; Kafka answers one connection in order, and a response
whose correlation id is not the oldest in flight is a protocol error.

Version choice: for each API the client uses the highest version that the broker
advertises, that the client has a schema for, and that the client caps (`CLIENT_MAX_VERSIONS`:
versions whose semantics this client implements). Schemas come from kio, except for the
KIP-1279 RPCs (keys 94-105), which kio does not know: their entities come from
`kmirror.protocol.mirror.registry` (`request_schema` / `response_schema`).
"""

from __future__ import annotations

import io
import sys
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.response_header.v1.header import ResponseHeader as ResponseHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32

from kmirror.client.errors import KafkaProtocolError
from kmirror.protocol import describe_transactions
from kmirror.protocol.fast_writer import fast_writer
from kmirror.protocol.framing import FrameDecoder, frame
from kmirror.protocol.length_guard import check_lengths
from kmirror.protocol.mirror import fetch as fetch_v19
from kmirror.protocol.mirror.derive import derive
from kmirror.protocol.mirror.registry import MIRROR_APIS, entity_types

API_VERSIONS_KEY = 18

# Highest version of each API whose semantics this client implements. Fetch stays at 12
# (topic names; v13+ addresses topics by id), ListOffsets and Metadata are safe at any
# version kio knows because `entities.build` drops fields a version lacks.
CLIENT_MAX_VERSIONS: dict[int, int] = {
    0: 9,  # Produce (v10+ adds fields we do not need; v9 is what kafka-python sends)
    1: 12,  # Fetch
    2: 7,  # ListOffsets
    3: 12,  # Metadata
    8: 9,  # OffsetCommit (v10+ names topics by id)
    9: 9,  # OffsetFetch (v10+ names topics by id)
    18: 3,  # ApiVersions
    19: 7,  # CreateTopics
    20: 6,  # DeleteTopics (v6 adds topic ids)
    21: 2,  # DeleteRecords
    22: 4,  # InitProducerId (v5+ is KIP-890 part 2)
    24: 3,  # AddPartitionsToTxn (v4+ is broker-to-broker, KIP-890)
    25: 3,  # AddOffsetsToTxn
    26: 3,  # EndTxn
    28: 3,  # TxnOffsetCommit
    32: 4,  # DescribeConfigs
    33: 2,  # AlterConfigs
    35: 4,  # DescribeLogDirs
    37: 3,  # CreatePartitions
    44: 1,  # IncrementalAlterConfigs
    60: 1,  # DescribeCluster
}


@cache
def kio_versions(api_key: int) -> tuple[int, ...]:
    """Versions of `api_key` the client has request and response schemas for, ascending:
    kio's, or the mirror registry's for the KIP-1279 RPCs."""
    mirror = MIRROR_APIS.get(api_key)
    if mirror is not None:
        _, low, high = mirror
        return tuple(range(low, high + 1))
    name = api_key_map.get(api_key)
    if name is None:
        return ()
    versions = schema_name_map.get(name, {})
    return tuple(
        sorted(v for v, kinds in versions.items() if EntityType.request in kinds and EntityType.response in kinds)
    )


def choose_version(
    api_key: int,
    broker_versions: Mapping[int, tuple[int, int]],
    client_max: Mapping[int, int] = CLIENT_MAX_VERSIONS,
) -> int | None:
    """The highest version of `api_key` both sides support, or None if there is none."""
    broker = broker_versions.get(api_key)
    if broker is None:
        return None
    low, high = broker
    cap = client_max.get(api_key)
    candidates = [v for v in kio_versions(api_key) if low <= v <= high and (cap is None or v <= cap)]
    return max(candidates) if candidates else None


def request_schema(api_key: int, version: int) -> type[Any]:
    """The request entity of `api_key` at `version` (kio's or a KIP-1279 entity)."""
    if api_key in MIRROR_APIS:
        if version not in kio_versions(api_key):
            raise KafkaProtocolError(f"{MIRROR_APIS[api_key][0]} has no version {version}")
        return entity_types(api_key)[0]
    if (api_key, version) == (fetch_v19.API_KEY, fetch_v19.VERSION):
        return fetch_v19.FetchRequest
    schema: type[Any] = load_request_schema(api_key, version)
    return schema


def response_schema(api_key: int, version: int) -> type[Any]:
    """The response entity of `api_key` at `version` (kio's or a KIP-1279 entity)."""
    if api_key in MIRROR_APIS:
        if version not in kio_versions(api_key):
            raise KafkaProtocolError(f"{MIRROR_APIS[api_key][0]} has no version {version}")
        return entity_types(api_key)[1]
    if (api_key, version) == (fetch_v19.API_KEY, fetch_v19.VERSION):
        return fetch_v19.FetchResponse
    if (api_key, version) == (describe_transactions.API_KEY, describe_transactions.VERSION):
        return describe_transactions.DescribeTransactionsResponse
    schema: type[Any] = load_response_schema(api_key, version)
    return schema


def response_header_type(api_key: int, response_type: type[Any]) -> type[Any]:
    if api_key == API_VERSIONS_KEY or not response_type.__flexible__:
        return ResponseHeaderV0
    return ResponseHeaderV1


@dataclass(frozen=True, slots=True)
class InFlight:
    correlation_id: int
    api_key: int
    api_version: int
    response_type: type[Any]


@dataclass(frozen=True, slots=True)
class Response:
    correlation_id: int
    api_key: int
    api_version: int
    body: Any


def encode_request(request: Any, correlation_id: int, client_id: str | None) -> bytes:
    """Header then body, without the size prefix."""
    request_type = type(request)
    header_type = request_type.__header_schema__
    header_fields: dict[str, Any] = {
        "request_api_key": i16(request_type.__api_key__),
        "request_api_version": i16(request_type.__version__),
        "correlation_id": i32(correlation_id),
    }
    if "client_id" in header_type.__dataclass_fields__:
        header_fields["client_id"] = client_id
    buf = io.BytesIO()
    entity_writer(header_type)(buf, header_type(**header_fields))
    out = bytearray(buf.getvalue())
    fast_writer(request_type)(out, request)  # kio's bytes (see kmirror.protocol.fast_writer)
    return bytes(out)


def _decode_body(frame: bytes, api_key: int, response_type: type[Any], *, exact: bool = True) -> Any:
    """The response body. `exact=False` ignores bytes after the body, as Kafka's clients do
    (they read the fields of the version and stop): some brokers append bytes a version does
    not define (librdkafka's mock cluster, one byte after Metadata v12)."""
    # kio readers return (entity, bytes consumed)
    _, header_size = entity_reader(response_header_type(api_key, response_type))(frame, 0)
    # a broker's absurd array length must not reach kio's native reader (it aborts the process)
    check_lengths(response_type, frame, header_size)
    body, body_size = entity_reader(response_type)(frame, header_size)
    if exact and header_size + body_size != len(frame):
        raise ValueError(f"{len(frame) - header_size - body_size} trailing bytes")
    return body


def decode_response(frame: bytes, request_type: type[Any]) -> Any:
    """The body of a response frame (header and body, no size prefix) to a request of
    `request_type` (an Envelope's embedded response)."""
    api_key = int(request_type.__api_key__)
    return _decode_body(frame, api_key, response_schema(api_key, int(request_type.__version__)))


_INT16_ERROR_CODES: dict[type[Any], type[Any]] = {}


def _int16_error_codes(response_type: type[Any]) -> type[Any]:
    """`response_type` with every error code read as a plain int16 (see `derive`)."""
    if response_type in _INT16_ERROR_CODES:
        return _INT16_ERROR_CODES[response_type]
    module = sys.modules[response_type.__module__]
    classes = derive([module], version=int(response_type.__version__),
                     module_name=f"{module.__name__}_int16_error_codes", int16_error_codes=True)
    return _INT16_ERROR_CODES.setdefault(response_type, classes[response_type.__name__])


def _unsupported_api_versions(frame: bytes) -> Any | None:
    """A v0 ApiVersions body with UNSUPPORTED_VERSION and no ranges when the frame's error
    code (the first body field in every version) says so, whatever follows it; else None.

    Some brokers answer an unknown ApiVersions version with a body that decodes in no
    version (librdkafka's mock cluster). Kafka's client reads only what it needs and retries
    with v0 when the answer names no ApiVersions range
    (`NetworkClient.handleApiVersionsResponse`); so does this one.
    """
    header_size = 4  # response header v0: correlation id only
    if len(frame) < header_size + 2:
        return None
    if int.from_bytes(frame[header_size:header_size + 2], "big", signed=True) != ErrorCode.unsupported_version:
        return None
    return response_schema(API_VERSIONS_KEY, 0)(error_code=ErrorCode.unsupported_version, api_keys=())


class ClientProtocol:
    """Frames out, responses in, for one connection. No I/O."""

    def __init__(self, client_id: str | None = "kmirror", max_frame_bytes: int = 256 * 1024 * 1024) -> None:
        self.client_id = client_id
        self._decoder = FrameDecoder(max_frame_bytes)
        self._in_flight: deque[InFlight] = deque()
        self._next_correlation_id = 0

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def send(self, request: Any, expect_response: bool = True) -> tuple[int, bytes]:
        """(correlation_id, size-prefixed frame) for `request`, a kio request entity of one version.

        `expect_response=False` is for Produce with acks=0, which the broker never answers.
        """
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        request_type = type(request)
        api_key = int(request_type.__api_key__)
        api_version = int(request_type.__version__)
        payload = encode_request(request, correlation_id, self.client_id)
        if expect_response:
            response_type = response_schema(api_key, api_version)
            self._in_flight.append(InFlight(correlation_id, api_key, api_version, response_type))
        return correlation_id, frame(payload)

    def receive(self, data: bytes | bytearray | memoryview) -> list[Response]:
        """Every response completed by `data`, in order. Raises `KafkaProtocolError`."""
        try:
            frames = self._decoder.feed(data)
        except Exception as exc:
            raise KafkaProtocolError(f"bad response frame: {exc}") from exc
        return [self._decode(f) for f in frames]

    def _decode(self, frame: bytes) -> Response:
        if len(frame) < 4:
            raise KafkaProtocolError(f"response of {len(frame)} bytes is shorter than a header")
        correlation_id = int.from_bytes(frame[:4], "big", signed=True)
        if not self._in_flight:
            raise KafkaProtocolError(f"unexpected response with correlation id {correlation_id}")
        expected = self._in_flight.popleft()
        if correlation_id != expected.correlation_id:
            raise KafkaProtocolError(
                f"correlation id {correlation_id} does not match the oldest request in flight "
                f"({expected.correlation_id})"
            )
        try:
            # ApiVersions must decode exactly: a broker that does not know the version answers
            # with a v0 body, which must not pass for the version asked.
            exact = expected.api_key == API_VERSIONS_KEY
            try:
                body = _decode_body(frame, expected.api_key, expected.response_type, exact=exact)
            except ValueError as exc:
                if "ErrorCode" not in str(exc):
                    raise
                body = _decode_body(frame, expected.api_key, _int16_error_codes(expected.response_type), exact=exact)
            version = expected.api_version
        except Exception as exc:
            if expected.api_key != API_VERSIONS_KEY or expected.api_version == 0:
                raise KafkaProtocolError(
                    f"cannot decode response to api_key={expected.api_key} v{expected.api_version}: {exc}"
                ) from exc
            # A broker that does not know our ApiVersions version answers with a v0 body
            # carrying UNSUPPORTED_VERSION and its ranges (KIP-511); the caller retries.
            try:
                body = _decode_body(frame, API_VERSIONS_KEY, response_schema(API_VERSIONS_KEY, 0))
            except Exception:
                body = _unsupported_api_versions(frame)
                if body is None:
                    raise KafkaProtocolError(f"cannot decode ApiVersions response: {exc}") from exc
            version = 0
        return Response(correlation_id, expected.api_key, version, body)

    def fail_all(self) -> list[int]:
        """Forget every request in flight (the connection is gone); their correlation ids."""
        ids = [f.correlation_id for f in self._in_flight]
        self._in_flight.clear()
        return ids
