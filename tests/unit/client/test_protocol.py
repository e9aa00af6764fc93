import datetime
import io

import pytest
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v0.request import MetadataRequest as MetadataRequestV0
from kio.schema.metadata.v0.response import MetadataResponse as MetadataResponseV0
from kio.schema.metadata.v12.request import MetadataRequest as MetadataRequestV12
from kio.schema.metadata.v12.response import MetadataResponse as MetadataResponseV12
from kio.schema.response_header.v0.header import ResponseHeader as H0
from kio.schema.response_header.v1.header import ResponseHeader as H1
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from kmirror.broker.api import build_registry
from kmirror.client.errors import KafkaProtocolError
from kmirror.client.protocol import ClientProtocol, choose_version, kio_versions
from kmirror.protocol.codec import decode_request


def response_frame(correlation_id: int, body: object, header_type: type = H0) -> bytes:
    buf = io.BytesIO()
    entity_writer(header_type)(buf, header_type(correlation_id=i32(correlation_id)))
    entity_writer(type(body))(buf, body)
    payload = buf.getvalue()
    return len(payload).to_bytes(4, "big") + payload


def test_request_frames_decode_on_the_server_side_with_header_v1_and_v2() -> None:
    proto = ClientProtocol(client_id="cli")
    registry = build_registry()
    _, frame = proto.send(ApiVersionsRequestV3(client_software_name="a", client_software_version="1"))
    decoded = decode_request(registry, frame[4:])
    assert decoded.header.api_version == 3  # type: ignore[union-attr]
    assert decoded.header.client_id == "cli"  # type: ignore[union-attr]
    assert decoded.body.client_software_name == "a"  # type: ignore[union-attr]


def test_correlation_ids_increase_and_responses_match_in_order() -> None:
    proto = ClientProtocol()
    c0, _ = proto.send(MetadataRequestV0(topics=()))
    c1, _ = proto.send(MetadataRequestV0(topics=()))
    assert (c0, c1) == (0, 1)
    assert proto.in_flight == 2
    v0 = MetadataResponseV0(brokers=(), topics=())
    data = response_frame(c0, v0) + response_frame(c1, v0)
    # feed byte by byte: frames are reassembled across reads
    out = []
    for i in range(len(data)):
        out += proto.receive(data[i : i + 1])
    assert [r.correlation_id for r in out] == [0, 1]
    assert proto.in_flight == 0


def test_flexible_response_uses_header_v1() -> None:
    proto = ClientProtocol()
    cid, _ = proto.send(MetadataRequestV12(topics=None, include_topic_authorized_operations=False))
    body = MetadataResponseV12(throttle_time=datetime.timedelta(0), brokers=(), cluster_id="abc",
                               controller_id=i32(1), topics=())
    [resp] = proto.receive(response_frame(cid, body, H1))
    assert resp.body.cluster_id == "abc"
    assert resp.api_version == 12


def test_mismatched_correlation_id_is_a_protocol_error() -> None:
    proto = ClientProtocol()
    proto.send(MetadataRequestV0(topics=()))
    with pytest.raises(KafkaProtocolError, match="correlation id 7"):
        proto.receive(response_frame(7, MetadataResponseV0(brokers=(), topics=())))


def test_unsolicited_response_is_a_protocol_error() -> None:
    with pytest.raises(KafkaProtocolError, match="unexpected response"):
        ClientProtocol().receive(response_frame(0, MetadataResponseV0(brokers=(), topics=())))


# A broker's answer to an ApiVersions version it does not know: UNSUPPORTED_VERSION in a v0 body.
UNSUPPORTED_VERSION_V0_ANSWER = ApiVersionsResponseV0(
    error_code=ErrorCode.unsupported_version,
    api_keys=(ApiVersionV0(api_key=i16(18), min_version=i16(0), max_version=i16(2)),),
)


def test_api_versions_unsupported_version_answer_in_v0_body_is_decoded() -> None:
    proto = ClientProtocol()
    cid, _ = proto.send(ApiVersionsRequestV3(client_software_name="a", client_software_version="1"))
    v0 = UNSUPPORTED_VERSION_V0_ANSWER
    [resp] = proto.receive(response_frame(cid, v0))
    assert resp.api_version == 0
    assert resp.body.error_code == ErrorCode.unsupported_version


def test_requests_without_response_are_not_tracked() -> None:
    proto = ClientProtocol()
    proto.send(MetadataRequestV0(topics=()), expect_response=False)
    assert proto.in_flight == 0


def test_garbage_response_is_a_protocol_error() -> None:
    proto = ClientProtocol()
    proto.send(MetadataRequestV12(topics=None, include_topic_authorized_operations=False))
    with pytest.raises(KafkaProtocolError, match="cannot decode"):
        proto.receive(b"\x00\x00\x00\x06\x00\x00\x00\x00\xff\xff")


def test_choose_version_takes_highest_common_version() -> None:
    assert choose_version(3, {3: (0, 9)}) == 9
    assert choose_version(3, {3: (0, 20)}) == 12  # client cap
    assert choose_version(3, {3: (0, 20)}, client_max={}) == max(kio_versions(3))


def test_group_offsets_are_asked_by_topic_name_of_a_broker_that_serves_topic_ids() -> None:
    """Kafka 4.2 (and kmirror) serve OffsetCommit and OffsetFetch v10, which name topics by id
    only: the client, which names them, stays at v9 (a v10 answer has no topic names)."""
    assert choose_version(8, {8: (2, 10)}) == 9
    assert choose_version(9, {9: (1, 10)}) == 9
    assert choose_version(3, {3: (14, 20)}) is None
    assert choose_version(3, {}) is None
    assert kio_versions(1)[0] == 4  # kio has Fetch from v4


# librdkafka's mock cluster (ApiVersions v0-v2) answers a v3 ApiVersions request with this
# frame (captured): correlation id 0, UNSUPPORTED_VERSION, then bytes that are neither a v3
# body (5 bytes left over) nor a v0 one (an array count of 16 M entries).
MOCK_CLUSTER_API_VERSIONS_V3_ANSWER = bytes.fromhex("00000011" "00000000" "0023" "01" "0012" "0000" "0002" "00000000")


def test_api_versions_answer_decodable_in_no_version_still_says_unsupported_version() -> None:
    proto = ClientProtocol()
    proto.send(ApiVersionsRequestV3(client_software_name="a", client_software_version="1"))
    [resp] = proto.receive(MOCK_CLUSTER_API_VERSIONS_V3_ANSWER)
    assert resp.api_version == 0
    assert resp.body.error_code == ErrorCode.unsupported_version
    assert resp.body.api_keys == ()  # no range: the connection retries with v0


def test_undecodable_api_versions_answer_with_another_error_is_a_protocol_error() -> None:
    proto = ClientProtocol()
    proto.send(ApiVersionsRequestV3(client_software_name="a", client_software_version="1"))
    frame = bytearray(MOCK_CLUSTER_API_VERSIONS_V3_ANSWER)
    frame[8:10] = (0).to_bytes(2, "big")  # error NONE: nothing to fall back on
    with pytest.raises(KafkaProtocolError, match="cannot decode ApiVersions response"):
        proto.receive(bytes(frame))


def test_bytes_after_a_response_body_are_ignored_as_by_kafka_clients() -> None:
    proto = ClientProtocol()
    cid, _ = proto.send(MetadataRequestV12(topics=None, include_topic_authorized_operations=False))
    body = MetadataResponseV12(throttle_time=datetime.timedelta(0), brokers=(), cluster_id="abc",
                               controller_id=i32(1), topics=())
    frame = response_frame(cid, body, H1)
    padded = (int.from_bytes(frame[:4], "big") + 1).to_bytes(4, "big") + frame[4:] + b"\x00"
    [resp] = proto.receive(padded)  # librdkafka's mock cluster appends one byte to Metadata v12
    assert resp.body == body


def test_api_versions_with_trailing_bytes_is_not_taken_for_the_version_asked() -> None:
    proto = ClientProtocol()
    cid, _ = proto.send(ApiVersionsRequestV3(client_software_name="a", client_software_version="1"))
    v0 = UNSUPPORTED_VERSION_V0_ANSWER
    [resp] = proto.receive(response_frame(cid, v0))
    assert resp.api_version == 0 and resp.body == v0


def test_an_error_code_unknown_to_kio_is_read_as_an_int16() -> None:
    """A broker may answer any int16 error code (READ_ONLY_TOPIC 135 of KIP-1279, or a code
    newer than kio): the response decodes and the code reaches the caller."""
    proto = ClientProtocol()
    cid, _ = proto.send(MetadataRequestV0(topics=()))
    name = b"orders"
    payload = (cid.to_bytes(4, "big") + (0).to_bytes(4, "big") + (1).to_bytes(4, "big")
               + (135).to_bytes(2, "big") + len(name).to_bytes(2, "big") + name + (0).to_bytes(4, "big"))
    (response,) = proto.receive(len(payload).to_bytes(4, "big") + payload)
    (topic,) = response.body.topics
    assert (topic.name, topic.error_code) == ("orders", 135)
