import asyncio
import uuid

import pytest
from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.acls import AclCreation, AclFilter
from kmirror.metadata.controller.configs import AlterableConfig, AlterConfigOp
from kmirror.metadata.controller.topics import CreatableTopic, CreatePartitionsTopic
from kmirror.metadata.controller_service import MetadataOperationError, MetadataService
from kmirror.metadata.image import ConfigResource
from kmirror.ports import ManualClock
from kmirror.testing.metadata import InMemoryMetadataLogStore, seeded_rng, server_config


def _service(store: InMemoryMetadataLogStore | None = None, **cfg: str) -> MetadataService:
    return MetadataService(server_config(**cfg), store or InMemoryMetadataLogStore(), ManualClock(), seeded_rng())


def run(coro):
    return asyncio.run(coro)


def test_start_formats_and_registers_this_node() -> None:
    store = InMemoryMetadataLogStore()
    svc = _service(store, cluster_id="abc")
    run(svc.start())
    image = svc.image
    assert image.cluster_id == "abc"
    assert image.features["metadata.version"] == 27
    assert [b.broker_id for b in image.live_brokers()] == [1]
    assert image.brokers[1].endpoints[0][1:3] == ("127.0.0.1", 9092)
    assert store.bound == ("abc", 1)
    assert image.offset == len(store.entries) - 1
    assert svc.broker_epoch == image.brokers[1].broker_epoch


def test_restart_replays_the_log_and_keeps_cluster_id() -> None:
    store = InMemoryMetadataLogStore()
    svc = _service(store)
    run(svc.start())
    run(svc.create_topics([CreatableTopic("t", 3, 1, configs={"retention.ms": "5"})]))
    cluster_id = svc.image.cluster_id
    again = _service(store)
    run(again.start())
    assert again.image.cluster_id == cluster_id and len(cluster_id or "") == 22
    assert again.image.topics["t"].topic_id == svc.image.topics["t"].topic_id
    assert again.image.topic_config("t") == {"retention.ms": "5"}
    assert len(again.image.topics["t"].partitions) == 3


def test_mismatched_cluster_id_refuses_to_start() -> None:
    store = InMemoryMetadataLogStore()
    run(_service(store, cluster_id="one").start())
    with pytest.raises(MetadataOperationError):
        run(_service(store, cluster_id="two").start())


def test_subscribers_see_old_and_new_images() -> None:
    svc = _service()
    run(svc.start())
    seen = []
    unsubscribe = svc.subscribe(lambda old, new: seen.append((old.offset, new.offset, set(new.topics))))
    run(svc.create_topics([CreatableTopic("t", 1, 1)]))
    assert len(seen) == 1 and seen[0][2] == {"t"} and seen[0][1] > seen[0][0]
    unsubscribe()
    run(svc.delete_topics(["t"]))
    assert len(seen) == 1
    # a validate-only call writes nothing and notifies nobody
    svc.subscribe(lambda old, new: seen.append(None))
    run(svc.create_topics([CreatableTopic("v", 1, 1)], validate_only=True))
    assert len(seen) == 1 and "v" not in svc.image.topics


def test_failed_append_leaves_image_unchanged() -> None:
    store = InMemoryMetadataLogStore()
    svc = _service(store)
    run(svc.start())
    before = svc.image
    store.fail_next_append = True
    with pytest.raises(OSError):
        run(svc.create_topics([CreatableTopic("t", 1, 1)]))
    assert svc.image is before


def test_internal_topic_and_producer_ids() -> None:
    svc = _service()
    run(svc.start())
    topic = run(svc.ensure_internal_topic("__consumer_offsets", 50, 1, {"cleanup.policy": "compact"}))
    assert len(topic.partitions) == 50
    assert run(svc.ensure_internal_topic("__consumer_offsets", 50, 1)) is topic
    with pytest.raises(MetadataOperationError) as info:
        run(svc.ensure_internal_topic("__transaction_state", 1, 3))
    assert info.value.error.code == ErrorCode.invalid_replication_factor
    assert run(svc.allocate_producer_ids(1)) == (0, 1000)
    assert run(svc.allocate_producer_ids(1)) == (1000, 1000)
    with pytest.raises(MetadataOperationError):
        run(svc.allocate_producer_ids(7))


def test_configs_partitions_acls_through_service() -> None:
    svc = _service()
    run(svc.start())
    run(svc.create_topics([CreatableTopic("t", 1, 1)]))
    res = ConfigResource(2, "t")
    (r,) = run(svc.incremental_alter_configs([(res, [AlterableConfig("retention.ms", AlterConfigOp.SET, "9")])]))
    assert r.error.code == ErrorCode.none and svc.image.topic_config("t") == {"retention.ms": "9"}
    described = svc.describe_configs(res, ["retention.ms"])
    assert described.configs[0].value == "9"
    (p,) = run(svc.create_partitions([CreatePartitionsTopic("t", 2)]))
    assert p.error.code == ErrorCode.none and len(svc.image.topics["t"].partitions) == 2
    errors = run(svc.create_acls([AclCreation(2, "t", 3, "User:alice", "*", 3, 3)]))
    assert [e.code for e in errors] == [ErrorCode.none]
    assert len(svc.describe_acls(AclFilter())) == 1
    (d,) = run(svc.delete_acls([AclFilter(principal="User:alice")]))
    assert len(d.deleted) == 1 and svc.image.acls == {}
    assert isinstance(next(iter(svc.image.topics_by_id)), uuid.UUID)
