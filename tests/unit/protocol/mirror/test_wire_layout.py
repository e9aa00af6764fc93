"""Hand-computed byte layouts of KIP-1279 requests/responses, through kmirror's codec."""

import datetime
import io
import uuid

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from kmirror.protocol.codec import DecodedRequest, decode_request, encode_response
from kmirror.protocol.mirror import (
    add_topics_to_mirror,
    bump_leader_epochs,
    create_mirror,
    create_topics,
    fetch,
    list_mirrors,
)
from kmirror.protocol.mirror.registry import MIRROR_APIS, schemas
from kmirror.protocol.registry import ApiRegistry, ApiSpec


def _registry() -> ApiRegistry:
    registry = ApiRegistry()
    for key, (name, low, high) in MIRROR_APIS.items():
        registry.register(ApiSpec(key, name, low, high, handler=lambda *a: None, schemas=schemas(key)))
    return registry


def _write(value: object) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(value))(buf, value)
    return buf.getvalue()


def test_create_mirror_request_frame_layout() -> None:
    body = (
        b"\x03m1"                       # MirrorName, compact string (length + 1)
        b"\x02"                         # Config, compact array of 1
        b"\x12bootstrap.servers"        # Name
        b"\x04h:9"                      # Value (nullable compact string)
        b"\x00"                         # MirrorConfig tagged fields
        b"\x00"                         # request tagged fields
    )
    header = (
        b"\x00\x5e"                     # api key 94
        b"\x00\x00"                     # version 0
        b"\x00\x00\x00\x07"             # correlation id
        b"\x00\x01c"                    # client id: always a legacy nullable string
        b"\x00"                         # header v2 tagged fields
    )
    decoded = decode_request(_registry(), header + body)
    assert isinstance(decoded, DecodedRequest)
    assert decoded.header.api_key == 94 and decoded.header.client_id == "c"
    expected = create_mirror.CreateMirrorRequest(
        mirror_name="m1", config=(create_mirror.MirrorConfig(name="bootstrap.servers", value="h:9"),))
    assert decoded.body == expected
    assert _write(expected) == body


def test_add_topics_to_mirror_response_frame_layout() -> None:
    response = add_topics_to_mirror.AddTopicsToMirrorResponse(
        throttle_time=datetime.timedelta(0), error_code=0, mirror_name="m",
        topics=(add_topics_to_mirror.TopicResult(name="t", error_code=138),))
    spec = _registry().get(95)
    assert spec is not None
    frame = bytes(encode_response(spec, 0, 9, response))
    body = (
        b"\x00\x00\x00\x00"             # ThrottleTimeMs
        b"\x00\x00"                     # ErrorCode
        b"\x00"                         # ErrorMessage null (compact nullable string)
        b"\x02m"                        # MirrorName
        b"\x02"                         # Topics, 1 element
        b"\x02t\x00\x8a\x00"            # Name "t", ErrorCode 138 TOPIC_ALREADY_IN_MIRROR, tags
        b"\x00"                         # response tagged fields
    )
    header = b"\x00\x00\x00\x09\x00"    # correlation id, header v1 tagged fields
    assert frame == (len(header) + len(body)).to_bytes(4, "big") + header + body
    decoded, _ = entity_reader(add_topics_to_mirror.AddTopicsToMirrorResponse)(body, 0)
    assert decoded == response


def test_list_mirrors_request_is_only_tagged_fields() -> None:
    assert _write(list_mirrors.ListMirrorsRequest()) == b"\x00"


def test_bump_leader_epochs_request_layout() -> None:
    topic_id = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    request = bump_leader_epochs.BumpLeaderEpochsRequest(topics=(bump_leader_epochs.TopicState(
        topic_id=topic_id, partitions=(bump_leader_epochs.LeaderEpochState(partition_index=2, min_leader_epoch=11),)),))
    assert _write(request) == (
        b"\x02" + topic_id.bytes + b"\x02" + b"\x00\x00\x00\x02" + b"\x00\x00\x00\x0b" + b"\x00" + b"\x00" + b"\x00")


def test_fetch_v19_mirror_leader_epoch_is_tag_2_and_omitted_at_default() -> None:
    def partition(**kw: int) -> object:
        return fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1, **kw)

    plain = _write(partition())
    tagged = _write(partition(mirror_leader_epoch=5))
    assert plain.endswith(b"\x00")  # no tagged fields
    # one tagged field: tag 2, size 4, int32 5
    assert tagged == plain[:-1] + b"\x01\x02\x04\x00\x00\x00\x05"
    assert fetch.FetchRequest.__version__ == 19 and fetch.FetchRequest.__api_key__ == 1
    assert fetch.schemas(18)[0].__module__.startswith("kio.schema.fetch.v18")


def test_fetch_v19_response_mirror_leader_epoch_is_tag_3() -> None:
    data = fetch.PartitionData(partition_index=0, error_code=ErrorCode.none, high_watermark=0, aborted_transactions=None, records=None, mirror_leader_epoch=4)
    encoded = _write(data)
    assert encoded.endswith(b"\x01\x03\x04\x00\x00\x00\x04")
    assert entity_reader(fetch.PartitionData)(encoded, 0)[0] == data


def test_create_topics_v8_mirror_info_is_a_nullable_struct_after_configs() -> None:
    topic_id = uuid.UUID(int=1)
    base = dict(name="t", num_partitions=1, replication_factor=3, assignments=(), configs=())
    without = _write(create_topics.CreatableTopic(**base))
    with_info = _write(create_topics.CreatableTopic(**base, mirror_info=create_topics.MirrorInfo(topic_id=topic_id)))
    prefix = b"\x02t\x00\x00\x00\x01\x00\x03\x01\x01"  # name, partitions, RF, assignments [], configs []
    assert without == prefix + b"\xff" + b"\x00"  # null struct marker (-1), tagged fields
    assert with_info == prefix + b"\x01" + topic_id.bytes + b"\x00" + b"\x00"
    assert create_topics.schemas(7)[0].__version__ == 7
    assert create_topics.schemas(8) == (create_topics.CreateTopicsRequest, create_topics.CreateTopicsResponse)


def test_add_topics_to_mirror_replication_factor_is_a_tagged_field() -> None:
    topic = add_topics_to_mirror.TopicData(topic_id=None, topic_name="t")
    plain = add_topics_to_mirror.AddTopicsToMirrorRequest(mirror_name="m", topics=(topic,))
    kip_body = (
        b"\x02m"                        # MirrorName
        b"\x02"                         # Topics, 1 element
        + b"\x00" * 16 +                # TopicId (zero UUID)
        b"\x02t\x00"                    # TopicName "t", TopicData tagged fields
        b"\x00"                         # request tagged fields: none, ReplicationFactor at -1
    )
    assert _write(plain) == kip_body
    with_rf = add_topics_to_mirror.AddTopicsToMirrorRequest(mirror_name="m", topics=(topic,), replication_factor=2)
    tagged_body = kip_body[:-1] + (
        b"\x01"                         # one tagged field
        b"\x00\x02\x00\x02"             # tag 0, size 2, int16 2
    )
    assert _write(with_rf) == tagged_body
    assert entity_reader(add_topics_to_mirror.AddTopicsToMirrorRequest)(tagged_body, 0)[0] == with_rf
    assert entity_reader(add_topics_to_mirror.AddTopicsToMirrorRequest)(kip_body, 0)[0].replication_factor == -1
