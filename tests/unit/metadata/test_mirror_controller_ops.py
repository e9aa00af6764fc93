import uuid

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.mirrors import EpochBump, bump_leader_epochs
from kmirror.metadata.controller.topics import CreatableTopic, create_topics
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
