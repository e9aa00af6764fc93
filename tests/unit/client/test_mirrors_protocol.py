"""The client's path for APIs kio does not know (KIP-1279 keys 94-105)."""

import datetime
import io
import struct

import pytest
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer

from kmirror.client.errors import KafkaError, KafkaProtocolError, error_name, is_retriable
from kmirror.client.protocol import (
    ClientProtocol,
    choose_version,
    kio_versions,
    request_schema,
    response_schema,
)
from kmirror.protocol.mirror import create_mirror, describe_mirrors
from kmirror.protocol.mirror.registry import MIRROR_APIS


def _write(entity: object) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def test_mirror_keys_have_v0_schemas_from_the_registry() -> None:
    for key in MIRROR_APIS:
        assert kio_versions(key) == (0,)
    assert request_schema(94, 0) is create_mirror.CreateMirrorRequest
    assert response_schema(99, 0) is describe_mirrors.DescribeMirrorsResponse
    with pytest.raises(KafkaProtocolError, match="CreateMirror has no version 1"):
        request_schema(94, 1)


def test_version_choice_for_a_mirror_key_follows_the_broker() -> None:
    assert choose_version(94, {94: (0, 0)}) == 0
    assert choose_version(94, {94: (1, 3)}) is None
    assert choose_version(94, {}) is None
    # kio keys are unaffected
    assert choose_version(18, {18: (0, 4)}) == 3


def test_create_mirror_request_frame_and_response_decoding() -> None:
    protocol = ClientProtocol(client_id="cli")
    request = create_mirror.CreateMirrorRequest(
        mirror_name="my-mirror",
        config=(create_mirror.MirrorConfig(name="bootstrap.servers", value="localhost:9092"),),
    )
    correlation_id, frame = protocol.send(request)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    header, header_size = entity_reader(RequestHeader)(frame[4:], 0)
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (94, 0, correlation_id)
    assert header.client_id == "cli"
    body, body_size = entity_reader(create_mirror.CreateMirrorRequest)(frame[4:], header_size)
    assert body == request and 4 + header_size + body_size == len(frame)

    # response header v1: correlation id + empty tagged fields; the body carries a KIP code
    response = create_mirror.CreateMirrorResponse(
        throttle_time=datetime.timedelta(0), error_code=136, error_message="bad name"  # type: ignore[arg-type]
    )
    payload = struct.pack(">i", correlation_id) + b"\x00" + _write(response)
    (decoded,) = protocol.receive(struct.pack(">i", len(payload)) + payload)
    assert decoded.api_key == 94 and decoded.body == response
    assert error_name(int(decoded.body.error_code)) == "INVALID_MIRROR_NAME"


def test_kip_error_codes_have_their_names_and_are_not_retriable() -> None:
    err = KafkaError(138, None, "t")
    assert str(err) == "t: TOPIC_ALREADY_IN_MIRROR"
    assert error_name(143) == "MIRROR_NOT_EMPTY"
    assert not is_retriable(135)
    assert error_name(6) == "NOT_LEADER_OR_FOLLOWER" and is_retriable(6)
