import uuid

import pytest

from kmirror.metadata import records as r
from kmirror.metadata.image import (
    EMPTY_IMAGE,
    ConfigResource,
    ConfigResourceType,
    MetadataInvariantError,
    PartitionRegistration,
)

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


def _topic(name: str, tid: uuid.UUID, n: int) -> list[r.Record]:
    out: list[r.Record] = [r.TopicRecord(name, tid)]
    out += [r.PartitionRecord(p, tid, (1,), (1,), 1) for p in range(n)]
    return out


def test_replay_topics_partitions_and_changes() -> None:
    image = EMPTY_IMAGE.apply([r.ClusterIdRecord("c1"), r.FeatureLevelRecord("metadata.version", 27)], 1)
    image2 = image.apply(_topic("a", T1, 2) + _topic("b", T2, 1), 5)
    assert image.topics == {} and image.offset == 1
    assert image2.offset == 5 and image2.cluster_id == "c1"
    assert set(image2.topics) == {"a", "b"}
    assert image2.topics_by_id[T1].name == "a"
    assert image2.topics["a"].partitions[1] == PartitionRegistration((1,), (1,), 1, 0, 0)

    image3 = image2.apply([r.PartitionChangeRecord(0, T1, isr=(1, 2), leader=2)], 6)
    p = image3.topics["a"].partitions[0]
    assert (p.leader, p.leader_epoch, p.partition_epoch, p.isr) == (2, 1, 1, (1, 2))
    image4 = image3.apply([r.PartitionChangeRecord(0, T1, isr=(2,))], 7)
    p = image4.topics["a"].partitions[0]
    assert (p.leader, p.leader_epoch, p.partition_epoch) == (2, 1, 2)
    # untouched topics are shared, not copied
    assert image4.topics["b"] is image2.topics["b"]
    assert image2.topics["a"].partitions[0].leader == 1


def test_remove_topic_drops_its_configs() -> None:
    res = ConfigResource(ConfigResourceType.TOPIC, "a")
    image = EMPTY_IMAGE.apply(_topic("a", T1, 1) + [r.ConfigRecord(2, "a", "retention.ms", "5")], 2)
    assert image.configs[res] == {"retention.ms": "5"}
    image = image.apply([r.RemoveTopicRecord(T1)], 3)
    assert image.topics == {} and image.topics_by_id == {} and res not in image.configs


def test_topics_deleted_since_an_image_include_one_recreated_under_its_name() -> None:
    image = EMPTY_IMAGE.apply(_topic("a", T1, 1) + _topic("b", T2, 1), 2)
    later = image.apply([r.RemoveTopicRecord(T1), *_topic("a", uuid.UUID(int=3), 1), r.RemoveTopicRecord(T2)], 4)
    assert later.topics_deleted_since(image) == {"a", "b"}
    assert later.topics_deleted_since(later) == set() and image.topics_deleted_since(None) == set()


def test_config_delete_removes_empty_resource() -> None:
    image = EMPTY_IMAGE.apply([r.ConfigRecord(4, "1", "message.max.bytes", "10")], 0)
    assert image.configs[ConfigResource(4, "1")] == {"message.max.bytes": "10"}
    image = image.apply([r.ConfigRecord(4, "1", "message.max.bytes", None)], 1)
    assert image.configs == {}


def test_brokers_acls_features_producer_ids() -> None:
    inc = uuid.UUID(int=9)
    acl = uuid.UUID(int=10)
    image = EMPTY_IMAGE.apply(
        [
            r.RegisterBrokerRecord(1, inc, 5, (r.BrokerEndpoint("PLAINTEXT", "h", 9092),), None, True),
            r.UnfenceBrokerRecord(1, 5),
            r.AccessControlEntryRecord(acl, 2, "t", 3, "User:a", "*", 3, 3),
            r.FeatureLevelRecord("x", 2),
            r.ProducerIdsRecord(1, 5, 1000),
        ],
        4,
    )
    assert [b.broker_id for b in image.live_brokers()] == [1]
    assert image.acls[acl].principal == "User:a"
    assert image.next_producer_id == 1000
    image = image.apply([r.FeatureLevelRecord("x", 0), r.RemoveAccessControlEntryRecord(acl), r.FenceBrokerRecord(1, 5)], 7)
    assert image.features == {} and image.acls == {} and image.live_brokers() == []


def test_broken_invariants_raise() -> None:
    with pytest.raises(MetadataInvariantError):
        EMPTY_IMAGE.apply([r.PartitionRecord(0, T1, (1,), (1,), 1)], 0)
    with pytest.raises(MetadataInvariantError):
        EMPTY_IMAGE.apply(_topic("a", T1, 0) + _topic("a", T2, 0), 0)
    with pytest.raises(MetadataInvariantError):
        EMPTY_IMAGE.apply([r.RemoveTopicRecord(T1)], 0)


def test_many_topics_replay_one_record_at_a_time_shares_untouched_topics() -> None:
    image = EMPTY_IMAGE
    for i in range(300):
        tid = uuid.UUID(int=100 + i)
        image = image.apply(_topic(f"t{i}", tid, 1), i)
    assert len(image.topics) == 300
    before = image
    image = image.apply([r.PartitionChangeRecord(0, uuid.UUID(int=100), leader=-1)], 301)
    assert image.topics["t1"] is before.topics["t1"]
    assert image.topics["t0"].partitions[0].leader == -1
