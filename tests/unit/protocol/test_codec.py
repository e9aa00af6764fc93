import io

import pytest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from kmirror.broker.api import HandlerDef, build_registry
from kmirror.protocol.codec import (
    DecodedRequest,
    MalformedRequest,
    UnsupportedRequest,
    decode_request,
    encode_response,
)


def _registry():
    return build_registry([HandlerDef(3, "Metadata", 0, 12, lambda *a: None, None, False, True)])


def _metadata_request(correlation_id=5) -> bytes:
    buf = io.BytesIO()
    entity_writer(RequestHeader)(
        buf,
        RequestHeader(request_api_key=i16(3), request_api_version=i16(12), correlation_id=i32(correlation_id), client_id="c"),
    )
    entity_writer(MetadataRequest)(
        buf,
        MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name="t"),),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        ),
    )
    return buf.getvalue()


def test_decodes_header_and_body():
    req = decode_request(_registry(), _metadata_request())
    assert isinstance(req, DecodedRequest)
    assert (req.header.api_key, req.header.api_version, req.header.correlation_id) == (3, 12, 5)
    assert req.header.client_id == "c"
    assert req.body.topics[0].name == "t"


def test_unknown_key_and_version_are_reported_not_raised():
    frame = bytearray(_metadata_request())
    frame[3] = 13  # version 13 is not registered here
    out = decode_request(_registry(), bytes(frame))
    assert out == UnsupportedRequest(3, 13, 5, True)
    frame[1] = 77
    assert decode_request(_registry(), bytes(frame)).known_api is False


@pytest.mark.parametrize("cut", [3, 9, 20])
def test_truncated_request_is_malformed(cut):
    with pytest.raises(MalformedRequest):
        decode_request(_registry(), _metadata_request()[:cut])


def test_trailing_bytes_are_ignored_like_kafka():
    req = decode_request(_registry(), _metadata_request() + b"\x01\x00\x00")
    assert isinstance(req, DecodedRequest)
    assert req.body.topics[0].name == "t"


def test_response_header_v1_for_flexible_versions():
    from kio.schema.metadata.v12.response import MetadataResponse

    registry = _registry()
    spec = registry.get(3)
    resp = MetadataResponse(
        throttle_time=__import__("datetime").timedelta(0),
        brokers=(),
        cluster_id=None,
        controller_id=i32(1),
        topics=(),
    )
    out = bytes(encode_response(spec, 12, 99, resp))
    assert int.from_bytes(out[:4], "big") == len(out) - 4  # size prefix
    assert out[4:8] == (99).to_bytes(4, "big")
    assert out[8] == 0  # empty tagged fields of response header v1


@pytest.mark.parametrize("version,header_v0", [(9, False), (7, True)])
def test_a_response_frame_is_the_size_kios_header_and_kios_body(version, header_v0):
    import datetime

    from kio.index import load_response_schema
    from kio.schema.response_header.v0.header import ResponseHeader as V0
    from kio.schema.response_header.v1.header import ResponseHeader as V1

    from kmirror.protocol.entities import build, nested

    rt = load_response_schema(0, version)
    part = build(nested(rt, "PartitionProduceResponse"), index=i32(3), error_code=__import__(
        "kio.schema.errors", fromlist=["ErrorCode"]).ErrorCode.none, base_offset=7, log_append_time=None,
                 log_start_offset=0, record_errors=(), error_message=None)
    resp = build(rt, responses=(build(nested(rt, "TopicProduceResponse"), name="t", partition_responses=(part,)),),
                 throttle_time=datetime.timedelta(milliseconds=5))
    spec = build_registry([HandlerDef(0, "Produce", 3, 13, lambda *a: None, None, False, True)]).get(0)
    buf = io.BytesIO()
    entity_writer(V0 if header_v0 else V1)(buf, (V0 if header_v0 else V1)(correlation_id=i32(-2)))
    entity_writer(rt)(buf, resp)
    assert bytes(encode_response(spec, version, -2, resp)) == len(buf.getvalue()).to_bytes(4, "big") + buf.getvalue()


@pytest.mark.parametrize("plane", ["broker", "controller"])
def test_every_version_a_node_serves_has_its_schemas(plane: str) -> None:
    for spec in build_registry(plane=plane):
        for version in range(spec.min_version, spec.max_version + 1):
            assert spec.request_type(version) is not None and spec.response_type(version) is not None, (spec.name,
                                                                                                         version)
