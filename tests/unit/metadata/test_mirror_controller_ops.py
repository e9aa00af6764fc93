import uuid

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.configs import (
    AlterableConfig,
    AlterConfigOp,
    alter_configs,
    incremental_alter_configs,
)
from kmirror.metadata.controller.mirrors import EpochBump, bump_leader_epochs
from kmirror.metadata.controller.topics import CreatableTopic, create_topics
from kmirror.metadata.image import ConfigResource, ConfigResourceType
from kmirror.testing.metadata import image_with_brokers, seeded_rng, server_config

TID = uuid.UUID("11111111-2222-4333-8444-555555555555")


def _image_with_topic():
    image = image_with_brokers(1)
    result = create_topics(image, [CreatableTopic("t", 2, 1, topic_id=TID)], server_config(), seeded_rng())
    return image.apply(result.records, image.offset + len(result.records)), result


def test_topic_created_with_the_given_topic_id() -> None:
    image, result = _image_with_topic()
    assert result.response[0].topic_id == TID
    assert image.topics["t"].topic_id == TID
    again = create_topics(image, [CreatableTopic("u", 1, 1, topic_id=TID)], server_config(), seeded_rng())
    assert again.response[0].error.code == ErrorCode.topic_already_exists and not again.records
    zero = create_topics(image, [CreatableTopic("v", 1, 1, topic_id=uuid.UUID(int=0))], server_config(), seeded_rng())
    assert zero.response[0].error.code == ErrorCode.invalid_request


def test_bump_leader_epochs_reaches_at_least_the_minimum_and_always_bumps() -> None:
    image, _ = _image_with_topic()
    result = bump_leader_epochs(image, [EpochBump(TID, 0, 5), EpochBump(TID, 1, -1), EpochBump(TID, 9, 1),
                                        EpochBump(uuid.UUID(int=7), 0, 1)])
    codes = [r.error.code for r in result.response]
    assert codes == [ErrorCode.none, ErrorCode.none, ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id]
    after = image.apply(result.records, image.offset + len(result.records))
    parts = after.topics["t"].partitions
    assert (parts[0].leader_epoch, parts[1].leader_epoch) == (5, 1)
    assert parts[0].leader == image.topics["t"].partitions[0].leader
    assert parts[0].isr == image.topics["t"].partitions[0].isr


def test_bump_with_min_producer_id_fences_producer_ids_in_the_same_records() -> None:
    from kmirror.metadata.controller.producer_ids import PRODUCER_ID_BLOCK_SIZE, allocate_producer_ids

    image, _ = _image_with_topic()
    block = allocate_producer_ids(image, 1)
    image = image.apply(block.records, image.offset + 1)
    assert (block.response, image.next_producer_id, image.producer_id_floor) == (
        (0, PRODUCER_ID_BLOCK_SIZE), PRODUCER_ID_BLOCK_SIZE, 0)

    plain = bump_leader_epochs(image, [EpochBump(TID, 0, 1)])
    assert image.apply(plain.records, image.offset + 9).producer_id_floor == 0

    # A mirrored producer id inside the block already given out: the floor moves, the next
    # block stays where it was.
    inside = bump_leader_epochs(image, [EpochBump(TID, 0, 1)], min_producer_id=42)
    after = image.apply(inside.records, image.offset + 9)
    assert (after.producer_id_floor, after.next_producer_id) == (PRODUCER_ID_BLOCK_SIZE, PRODUCER_ID_BLOCK_SIZE)
    # Above every block: the next block starts at the fence.
    above = bump_leader_epochs(after, [EpochBump(TID, 1, 1)], min_producer_id=123_456)
    after = after.apply(above.records, after.offset + 9)
    assert (after.producer_id_floor, after.next_producer_id) == (123_456, 123_456)
    assert allocate_producer_ids(after, 1).response == (123_456, PRODUCER_ID_BLOCK_SIZE)
    # Already fenced: nothing more to write.
    again = bump_leader_epochs(after, [EpochBump(TID, 1, 1)], min_producer_id=100)
    assert len(again.records) == len(bump_leader_epochs(after, [EpochBump(TID, 1, 1)]).records)


def test_the_first_mirror_creates_the_compacted_mirror_state_topic() -> None:
    from kmirror.metadata.controller.mirrors import create_mirror

    config = server_config(**{"mirror.topic.num.partitions": "7", "mirror.topic.replication.factor": "3"})
    image = image_with_brokers(1, 2)
    first = create_mirror(image, "m1", {"bootstrap.servers": "src:9092"}, config, seeded_rng())
    assert first.response.code == ErrorCode.none
    image = image.apply(first.records, image.offset + len(first.records))
    state = image.topics["__mirror_state"]
    assert len(state.partitions) == 7
    assert {len(p.replicas) for p in state.partitions.values()} == {2}  # min(3, live brokers)
    assert image.topic_config("__mirror_state")["cleanup.policy"] == "compact"

    second = create_mirror(image, "m2", {"bootstrap.servers": "src:9092"}, config, seeded_rng())
    assert second.response.code == ErrorCode.none
    assert all(getattr(r, "name", None) != "__mirror_state" for r in second.records)  # exists already
    refused = create_mirror(image, "m1", {"bootstrap.servers": "src:9092"}, config, seeded_rng())
    assert refused.response.code == ErrorCode.invalid_request and not refused.records


def test_mirror_name_is_changed_only_by_the_mirror_apis() -> None:
    image = image_with_brokers(1)
    created = create_topics(image, [CreatableTopic("mirrored", 1, 1, configs={"retention.ms": "1000"}, mirror_name="m"),
                                    CreatableTopic("sneaky", 1, 1, configs={"mirror.name": "m"})],
                            server_config(), seeded_rng())
    ok, refused = (r.error for r in created.response)
    assert ok.code == ErrorCode.none
    assert refused.code == ErrorCode.invalid_config and "mirror APIs" in (refused.message or "")
    image = image.apply(created.records, image.offset + len(created.records))
    assert dict(image.topic_config("mirrored")) == {"retention.ms": "1000", "mirror.name": "m"}
    assert "sneaky" not in image.topics
    topic = ConfigResource(ConfigResourceType.TOPIC, "mirrored")

    # The legacy AlterConfigs replaces the configs a client can see, and keeps mirror.name.
    legacy = alter_configs(image, [(topic, {"segment.bytes": "1048576"})])
    assert legacy.response[0].error.code == ErrorCode.none
    after = image.apply(legacy.records, image.offset + len(legacy.records))
    assert dict(after.topic_config("mirrored")) == {"segment.bytes": "1048576", "mirror.name": "m"}
    named = alter_configs(image, [(topic, {"mirror.name": "other"})])
    assert named.response[0].error.code == ErrorCode.invalid_config and not named.records

    for op in (AlterableConfig("mirror.name", AlterConfigOp.DELETE, None),
               AlterableConfig("mirror.name", AlterConfigOp.SET, "m.removed")):
        incremental = incremental_alter_configs(image, [(topic, [AlterableConfig("retention.ms", AlterConfigOp.SET, "5"),
                                                                 op])])
        assert incremental.response[0].error.code == ErrorCode.invalid_config and not incremental.records
