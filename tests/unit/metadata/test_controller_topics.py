import uuid

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.topics import (
    CreatableTopic,
    CreatePartitionsTopic,
    create_partitions,
    create_topics,
    delete_topics,
    validate_topic_name,
)
from kmirror.metadata.records import ConfigRecord, PartitionRecord, RemoveTopicRecord, TopicRecord
from kmirror.testing.metadata import image_with_brokers, seeded_rng, server_config

CFG = server_config()


def _create(image, *topics, validate_only=False, cfg=CFG):
    result = create_topics(image, list(topics), cfg, seeded_rng(), validate_only=validate_only)
    return result, image.apply(result.records, image.offset + len(result.records))


def test_create_with_defaults_places_on_live_brokers() -> None:
    image = image_with_brokers(1, 2, 3)
    result, after = _create(image, CreatableTopic("orders", 6, 2, configs={"retention.ms": "1000"}))
    (res,) = result.response
    assert res.error.code == ErrorCode.none and res.num_partitions == 6 and res.replication_factor == 2
    assert isinstance(result.records[0], TopicRecord)
    assert ConfigRecord(2, "orders", "retention.ms", "1000") in result.records
    topic = after.topics["orders"]
    assert topic.topic_id == res.topic_id
    leaders = [p.leader for p in topic.partitions.values()]
    assert sorted(set(leaders)) == [1, 2, 3]  # round-robin spreads leaders
    for p in topic.partitions.values():
        assert len(set(p.replicas)) == 2 and p.isr == p.replicas and p.leader == p.replicas[0]
    assert after.topic_config("orders") == {"retention.ms": "1000"}


def test_defaults_from_server_config() -> None:
    cfg = server_config(num_partitions="3")
    result, after = _create(image_with_brokers(1), CreatableTopic("t"), cfg=cfg)
    assert len(after.topics["t"].partitions) == 3
    assert result.response[0].replication_factor == 1


def test_validate_only_writes_nothing() -> None:
    result, after = _create(image_with_brokers(1), CreatableTopic("t", 1, 1), validate_only=True)
    assert result.records == [] and result.response[0].error.code == ErrorCode.none


def test_errors() -> None:
    image = image_with_brokers(1, 2)
    _, image = _create(image, CreatableTopic("a.b", 1, 1))
    result, _ = _create(
        image,
        CreatableTopic("a.b", 1, 1),
        CreatableTopic("a_b", 1, 1),
        CreatableTopic("bad name", 1, 1),
        CreatableTopic("p0", 0, 1),
        CreatableTopic("rf3", 1, 3),
        CreatableTopic("rf0", 1, 0),
        CreatableTopic("cfg", 1, 1, configs={"retention.ms": "x"}),
        CreatableTopic("unknowncfg", 1, 1, configs={"nope": "1"}),
        CreatableTopic("dup", 1, 1),
        CreatableTopic("dup", 1, 1),
    )
    codes = [r.error.code for r in result.response]
    assert codes == [
        ErrorCode.topic_already_exists,
        ErrorCode.invalid_topic_exception,
        ErrorCode.invalid_topic_exception,
        ErrorCode.invalid_partitions,
        ErrorCode.invalid_replication_factor,
        ErrorCode.invalid_replication_factor,
        ErrorCode.invalid_config,
        ErrorCode.invalid_config,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
    ]
    assert result.records == []
    assert "collides with existing topic: a.b" in (result.response[1].error.message or "")


def test_collision_within_one_request() -> None:
    result, _ = _create(image_with_brokers(1), CreatableTopic("x.y", 1, 1), CreatableTopic("x_y", 1, 1))
    assert [r.error.code for r in result.response] == [ErrorCode.none, ErrorCode.invalid_topic_exception]


def test_topic_name_rules() -> None:
    assert validate_topic_name("ok.name_-1") is None
    for bad in ("", ".", "..", "x" * 250, "a/b", "ü"):
        err = validate_topic_name(bad)
        assert err is not None and err.code == ErrorCode.invalid_topic_exception
    assert validate_topic_name("x" * 249) is None


def test_manual_assignment() -> None:
    image = image_with_brokers(1, 2, 3)
    result, after = _create(image, CreatableTopic("m", assignments={0: [3, 1], 1: [2, 3]}))
    assert result.response[0].error.code == ErrorCode.none
    assert after.topics["m"].partitions[1].replicas == (2, 3)
    bad = [
        CreatableTopic("g", assignments={0: [1], 2: [2]}),
        CreatableTopic("d", assignments={0: [1, 1]}),
        CreatableTopic("u", assignments={0: [9]}),
        CreatableTopic("s", assignments={0: [1], 1: [1, 2]}),
        CreatableTopic("n", 1, -1, assignments={0: [1]}),
    ]
    result, _ = _create(image, *bad)
    assert [r.error.code for r in result.response] == [ErrorCode.invalid_replica_assignment] * 4 + [
        ErrorCode.invalid_request
    ]


def test_fenced_replicas_are_not_in_isr() -> None:
    image = image_with_brokers(1, 2, fenced=(2,))
    result, after = _create(image, CreatableTopic("m", assignments={0: [2, 1]}))
    p = after.topics["m"].partitions[0]
    assert p.isr == (1,) and p.leader == 1
    # automatic placement only uses live brokers
    result, _ = _create(image, CreatableTopic("r", 1, 2))
    assert result.response[0].error.code == ErrorCode.invalid_replication_factor


def test_delete_by_name_and_id() -> None:
    _, image = _create(image_with_brokers(1), CreatableTopic("a", 1, 1), CreatableTopic("b", 1, 1))
    b_id = image.topics["b"].topic_id
    result = delete_topics(image, ["a", "zz"], [b_id, uuid.UUID(int=77)], CFG)
    assert [(r.name, r.error.code) for r in result.response] == [
        ("a", ErrorCode.none),
        ("zz", ErrorCode.unknown_topic_or_partition),
        ("b", ErrorCode.none),
        (None, ErrorCode.unknown_topic_id),
    ]
    assert result.records == [RemoveTopicRecord(image.topics["a"].topic_id), RemoveTopicRecord(b_id)]
    after = image.apply(result.records, 99)
    assert after.topics == {}


def test_delete_disabled() -> None:
    _, image = _create(image_with_brokers(1), CreatableTopic("a", 1, 1))
    result = delete_topics(image, ["a"], [], server_config(delete_topic_enable="false"))
    assert result.records == [] and result.response[0].error.code == ErrorCode.topic_deletion_disabled


def test_create_partitions() -> None:
    _, image = _create(image_with_brokers(1, 2), CreatableTopic("a", 2, 2))
    result = create_partitions(
        image,
        [
            CreatePartitionsTopic("a", 4),
            CreatePartitionsTopic("missing", 3),
        ],
        CFG, seeded_rng(),
    )
    assert [r.error.code for r in result.response] == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    assert [r.partition_id for r in result.records if isinstance(r, PartitionRecord)] == [2, 3]
    after = image.apply(result.records, 50)
    assert len(after.topics["a"].partitions) == 4
    assert all(len(p.replicas) == 2 for p in after.topics["a"].partitions.values())

    result = create_partitions(
        after,
        [
            CreatePartitionsTopic("a", 4),
            CreatePartitionsTopic("a", 3),
        ],
        CFG, seeded_rng(),
    )
    assert [r.error.code for r in result.response] == [ErrorCode.invalid_request, ErrorCode.invalid_request]
    result = create_partitions(after, [CreatePartitionsTopic("a", 3)], CFG, seeded_rng())
    assert result.response[0].error.code == ErrorCode.invalid_partitions
    result = create_partitions(after, [CreatePartitionsTopic("a", 4)], CFG, seeded_rng())
    assert result.response[0].error.code == ErrorCode.invalid_partitions
    result = create_partitions(after, [CreatePartitionsTopic("a", 6, [[1, 2]])], CFG, seeded_rng())
    assert result.response[0].error.code == ErrorCode.invalid_replica_assignment
    result = create_partitions(after, [CreatePartitionsTopic("a", 5, [[2, 1]])], CFG, seeded_rng(), validate_only=True)
    assert result.response[0].error.code == ErrorCode.none and result.records == []
    result = create_partitions(after, [CreatePartitionsTopic("a", 5, [[2]])], CFG, seeded_rng())
    assert result.response[0].error.code == ErrorCode.invalid_replica_assignment


def test_excessive_partitions_per_request_fail_every_topic_before_placement() -> None:
    image = image_with_brokers(1)
    for validate_only in (False, True):
        result, _ = _create(image, CreatableTopic("huge", 2**31 - 1, 1), CreatableTopic("small", 1, 1),
                            validate_only=validate_only)
        assert result.records == []
        assert [r.error.code for r in result.response] == [ErrorCode.policy_violation] * 2
        assert result.response[0].error.message == "Excessively large number of partitions per request."
    # 10,000 in one request is allowed (Kafka's MAX_PARTITIONS_PER_BATCH), 10,001 is not
    result, _ = _create(image, CreatableTopic("a", 5000, 1), CreatableTopic("b", 5000, 1), validate_only=True)
    assert [r.error.code for r in result.response] == [ErrorCode.none] * 2
    result, _ = _create(image, CreatableTopic("a", 5000, 1), CreatableTopic("b", 5000, 1), CreatableTopic("c"),
                        validate_only=True)
    assert {r.error.code for r in result.response} == {ErrorCode.policy_violation}


def test_cluster_partition_cap() -> None:
    cfg = server_config(max_partitions="10")
    result, image = _create(image_with_brokers(1), CreatableTopic("a", 6, 1), CreatableTopic("b", 5, 1),
                            CreatableTopic("c", 4, 1), cfg=cfg)
    assert [r.error.code for r in result.response] == [ErrorCode.none, ErrorCode.policy_violation, ErrorCode.none]
    assert "max.partitions=10" in result.response[1].error.message
    result = create_partitions(image, [CreatePartitionsTopic("a", 7)], cfg, seeded_rng(), validate_only=True)
    assert result.response[0].error.code == ErrorCode.policy_violation and result.records == []


def test_create_partitions_excessive_batch() -> None:
    _, image = _create(image_with_brokers(1), CreatableTopic("a", 1, 1))
    for validate_only in (False, True):
        result = create_partitions(image, [CreatePartitionsTopic("a", 2**31 - 1)], CFG, seeded_rng(),
                                   validate_only=validate_only)
        assert result.records == [] and result.response[0].error.code == ErrorCode.policy_violation
