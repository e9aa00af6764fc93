import asyncio
import dataclasses
import io
import uuid

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from kmirror.broker.api import RequestContext, load_handlers
from kmirror.broker.authorization import ALLOW_ALL
from kmirror.kip1279.errors import MirrorError
from kmirror.metadata.controller.mirrors import FeatureUpdate
from kmirror.metadata.controller.topics import CreatableTopic
from kmirror.mirror.coordinator.coordinator import MirrorCoordinator
from kmirror.mirror.service import MirrorCoordinatorService
from kmirror.mirror.source_lookup import SourceDescription, SourceTopic
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.mirror import (
    add_topics_to_mirror,
    create_mirror,
    delete_mirror,
    list_mirrors,
    pause_mirror_topics,
    remove_topics_from_mirror,
    resume_mirror_topics,
)
from kmirror.testing.metadata import call, metadata_services

SOURCE_ID = uuid.UUID("11111111-2222-4333-8444-555555555555")


def mirror_call(services, api_key, request, response_type):
    handler = {d.api_key: d for d in load_handlers()}[api_key].handler
    ctx = RequestContext(RequestHeaderView(api_key, 0, 1, "test"), response_type, "127.0.0.1", 1)

    async def run():
        result = handler(services, ctx, request)
        return await result if asyncio.iscoroutine(result) else result

    result = asyncio.run(run())
    buf = io.BytesIO()
    entity_writer(response_type)(buf, result)
    decoded, _ = entity_reader(response_type)(buf.getvalue(), 0)
    return decoded


def enabled_services(source_topics=None):
    services = metadata_services()
    asyncio.run(services.metadata.update_features([FeatureUpdate("mirror.version", 1)], {"mirror.version": (0, 1)}))
    topics = source_topics if source_topics is not None else {
        "orders": SourceTopic("orders", SOURCE_ID, 3, {"retention.ms": "1000", "min.insync.replicas": "2"})}
    services.mirror_coordinator = MirrorCoordinatorService(MirrorCoordinator(4), source_lookup(topics))
    return services


def source_lookup(topics):
    async def lookup(mirror_name, config, names):
        return SourceDescription("source-cluster", {n: topics.get(n, int(ErrorCode.unknown_topic_or_partition))
                                                    for n in names})
    return lookup


def create(services, name="m1", configs=None):
    configs = configs if configs is not None else {"bootstrap.servers": "source:9092"}
    req = create_mirror.CreateMirrorRequest(
        mirror_name=name, config=tuple(create_mirror.MirrorConfig(name=k, value=v) for k, v in configs.items()))
    return mirror_call(services, 94, req, create_mirror.CreateMirrorResponse)


def topics_request(module, request_cls, name, *topics):
    return request_cls(mirror_name=name, topics=tuple(module.TopicData(topic_id=None, topic_name=t) for t in topics))


def add(services, name, *topics, replication_factor=-1):
    req = topics_request(add_topics_to_mirror, add_topics_to_mirror.AddTopicsToMirrorRequest, name, *topics)
    req = dataclasses.replace(req, replication_factor=replication_factor)
    return mirror_call(services, 95, req, add_topics_to_mirror.AddTopicsToMirrorResponse)


def remove(services, name, *topics):
    req = topics_request(remove_topics_from_mirror, remove_topics_from_mirror.RemoveTopicsFromMirrorRequest, name,
                         *topics)
    return mirror_call(services, 96, req, remove_topics_from_mirror.RemoveTopicsFromMirrorResponse)


def list_all(services):
    return mirror_call(services, 98, list_mirrors.ListMirrorsRequest(), list_mirrors.ListMirrorsResponse)


def test_every_mirror_rpc_answers_unsupported_version_while_the_feature_is_off() -> None:
    services = metadata_services()
    assert create(services).error_code == ErrorCode.unsupported_version
    assert list_all(services).error_code == ErrorCode.unsupported_version
    resp = add(services, "m1", "orders")
    assert resp.error_code == ErrorCode.unsupported_version
    assert [t.error_code for t in resp.topics] == [ErrorCode.unsupported_version]
    assert remove(services, "m1", "orders").error_code == ErrorCode.unsupported_version
    resp = mirror_call(services, 104, delete_mirror.DeleteMirrorRequest(mirror_name="m1"),
                       delete_mirror.DeleteMirrorResponse)
    assert resp.error_code == ErrorCode.unsupported_version
    assert services.metadata.image.configs == {} or all(r.type != 64 for r in services.metadata.image.configs)


def test_update_features_enables_mirroring_and_validates_levels() -> None:
    services = metadata_services()

    def update(feature, level, upgrade_type=1, *more, version=1):
        from kmirror.testing.metadata import request_entity
        keys = tuple(request_entity(57, version, "FeatureUpdateKey", feature=f, max_version_level=v,
                                    upgrade_type=t) for f, v, t in ((feature, level, upgrade_type), *more))
        return call(services, 57, version, {"timeout": 1000, "feature_updates": keys, "validate_only": False})

    assert update("mirror.version", 2).error_code == ErrorCode.invalid_update_version
    assert update("nope.version", 1).error_code == ErrorCode.invalid_update_version
    refused = update("mirror.version", 1, 1, ("nope.version", 1, 1))  # all or nothing, as Kafka
    assert (refused.error_code, refused.results) == (ErrorCode.invalid_update_version, ())
    assert "nope.version" in refused.error_message and "mirror.version" not in services.metadata.image.features
    done = update("mirror.version", 1)
    assert (done.error_code, [(r.feature, r.error_code) for r in done.results]) == (
        ErrorCode.none, [("mirror.version", ErrorCode.none)])
    assert services.metadata.image.features["mirror.version"] == 1
    assert update("mirror.version", 0).error_code == ErrorCode.invalid_update_version  # needs downgrade
    assert update("mirror.version", 0, 2, version=2).error_code == ErrorCode.none  # v2: the top-level error alone
    assert "mirror.version" not in services.metadata.image.features


def test_create_and_list_mirrors() -> None:
    services = enabled_services()
    assert create(services).error_code == 0
    assert create(services).error_code == ErrorCode.invalid_request  # exists
    assert create(services, "bad.removed").error_code == MirrorError.INVALID_MIRROR_NAME
    assert create(services, "x.paused").error_code == MirrorError.INVALID_MIRROR_NAME
    assert create(services, "b@d").error_code == MirrorError.INVALID_MIRROR_NAME
    assert create(services, "m2", {}).error_code == ErrorCode.invalid_config
    assert create(services, "m3", {"bootstrap.servers": "h:1", "bogus": "x"}).error_code == ErrorCode.invalid_config
    listed = list_all(services)
    assert [(m.mirror_name, m.source_bootstrap, m.source_cluster_id, m.topic_count) for m in listed.mirrors] == [
        ("m1", "source:9092", "", 0)]


def test_add_creates_the_topic_with_the_source_topic_id_partitions_and_copied_configs() -> None:
    services = enabled_services()
    create(services)
    resp = add(services, "m1", "orders", "missing")
    assert {t.name: t.error_code for t in resp.topics} == {
        "orders": 0, "missing": ErrorCode.unknown_topic_or_partition}
    image = services.metadata.image
    topic = image.topics["orders"]
    assert topic.topic_id == SOURCE_ID
    assert len(topic.partitions) == 3
    assert dict(image.topic_config("orders")) == {"retention.ms": "1000", "mirror.name": "m1"}  # min.isr excluded
    listed = list_all(services).mirrors[0]
    assert (listed.source_cluster_id, listed.topic_count) == ("source-cluster", 1)
    again = add(services, "m1", "orders")
    assert again.topics[0].error_code == MirrorError.TOPIC_ALREADY_IN_MIRROR
    unknown = add(services, "nope", "orders")
    assert unknown.error_code == MirrorError.UNKNOWN_MIRROR


def test_add_honours_the_replication_factor_as_create_topics_validates_it() -> None:
    services = enabled_services({"one": SourceTopic("one", SOURCE_ID, 2),
                                 "two": SourceTopic("two", uuid.UUID(int=98), 1),
                                 "zero": SourceTopic("zero", uuid.UUID(int=97), 1)})
    create(services)
    assert len(services.metadata.image.brokers) == 1
    resp = add(services, "m1", "one", replication_factor=1)
    assert resp.topics[0].error_code == 0
    assert [len(p.replicas) for p in services.metadata.image.topics["one"].partitions.values()] == [1, 1]
    for topic, factor in (("two", 2), ("zero", 0)):
        resp = add(services, "m1", topic, replication_factor=factor)
        assert resp.topics[0].error_code == ErrorCode.invalid_replication_factor
        assert topic not in services.metadata.image.topics


def test_add_existing_topic_with_the_source_id_only_sets_membership_and_another_id_is_refused() -> None:
    services = enabled_services({"same": SourceTopic("same", SOURCE_ID, 2),
                                 "other": SourceTopic("other", uuid.UUID(int=99), 1)})
    create(services)
    asyncio.run(services.metadata.create_topics([CreatableTopic("same", 2, 1, topic_id=SOURCE_ID),
                                                 CreatableTopic("other", 1, 1)]))
    resp = add(services, "m1", "same", "other")
    assert {t.name: t.error_code for t in resp.topics} == {"same": 0, "other": ErrorCode.invalid_request}
    assert services.metadata.image.topic_config("same")["mirror.name"] == "m1"
    assert "mirror.name" not in services.metadata.image.topic_config("other")


def test_mirror_topic_is_read_only_for_produce_and_delete_records() -> None:
    from kmirror.metadata.mirrors import topic_partition_write_refusal
    services = enabled_services()
    create(services)
    add(services, "m1", "orders")
    asyncio.run(services.metadata.create_topics([CreatableTopic("plain", 1, 1)]))
    image = services.metadata.image
    assert topic_partition_write_refusal(image, "orders", 0, services.mirror_coordinator) is not None
    assert topic_partition_write_refusal(image, "plain", 0, services.mirror_coordinator) is None


def test_write_guard_codes_read_only_mirror_topics_and_retriable_failing_over_ones() -> None:
    """The codes clients see: READ_ONLY_TOPIC (135, not retried) while the topic is a mirror
    topic; NOT_LEADER_OR_FOLLOWER (retried) once it was removed from its mirror and until its
    partition is known STOPPED here (its failover, or its state unknown after a restart); a
    write once STOPPED. A permanent error in the second case failed an idempotent producer's
    records after a restart of a failed-over cluster."""
    from kmirror.kip1279.state import MirrorPartitionState as S
    from kmirror.mirror.read_only import MirrorWriteGuard
    from kmirror.types import TopicPartition
    services = mirrored_orders()
    guard = MirrorWriteGuard(lambda: services.metadata.image, services.mirror_coordinator, None)
    unknown = MirrorWriteGuard(lambda: services.metadata.image, None, None)  # a restarted leader, state not loaded
    tp = TopicPartition("orders", 0)

    def write(*states: S) -> None:
        for state in states:
            write_states(services.mirror_coordinator, state)

    def code(g: MirrorWriteGuard) -> int | None:
        refusal = g.write_refusal(tp)
        return None if refusal is None else int(refusal.code)

    write(S.PREPARING, S.MIRRORING)
    assert code(guard) == code(unknown) == MirrorError.READ_ONLY_TOPIC == 135
    assert remove(services, "m1", "orders").topics[0].error_code == 0
    assert code(guard) == code(unknown) == ErrorCode.not_leader_or_follower == 6
    write(S.STOPPING)
    assert code(guard) == 6
    write(S.STOPPED)
    assert code(guard) is None
    assert code(unknown) == 6  # until the state is known here


def test_remove_pause_resume_and_delete_follow_the_membership_workflows() -> None:
    from kmirror.kip1279.state import MirrorPartitionState as S
    from kmirror.mirror.coordinator.coordinator import StateWrite
    from kmirror.mirror.coordinator.records import MirrorPartitionKey
    services = enabled_services()
    create(services)
    add(services, "m1", "orders")
    # UNKNOWN partitions (leader not started) cannot be removed (membership.REMOVE_FROM_STATES)
    assert remove(services, "m1", "orders").topics[0].error_code == ErrorCode.invalid_request
    coord = services.mirror_coordinator.coordinator
    for p in range(coord.num_partitions):
        coord.begin_load(p)
        coord.complete_load(p, [])
    for state in (S.PREPARING, S.MIRRORING):
        asyncio.run(services.mirror_coordinator.write_states(
            [StateWrite(MirrorPartitionKey("m1", SOURCE_ID, p), "orders", state) for p in range(3)]))

    def pr(module, key, req_cls, resp_cls):
        return mirror_call(services, key, topics_request(module, req_cls, "m1", "orders"), resp_cls).topics[0].error_code

    pause = (pause_mirror_topics, 102, pause_mirror_topics.PauseMirrorTopicsRequest,
             pause_mirror_topics.PauseMirrorTopicsResponse)
    resume = (resume_mirror_topics, 103, resume_mirror_topics.ResumeMirrorTopicsRequest,
              resume_mirror_topics.ResumeMirrorTopicsResponse)
    assert pr(*resume) == MirrorError.MIRROR_TOPIC_NOT_PAUSED
    assert pr(*pause) == 0
    assert services.metadata.image.topic_config("orders")["mirror.name"] == "m1.paused"
    assert pr(*pause) == MirrorError.MIRROR_TOPIC_ALREADY_PAUSED
    assert pr(*resume) == 0
    assert services.metadata.image.topic_config("orders")["mirror.name"] == "m1"
    delete = delete_mirror.DeleteMirrorRequest(mirror_name="m1")
    assert mirror_call(services, 104, delete, delete_mirror.DeleteMirrorResponse).error_code == \
        MirrorError.MIRROR_NOT_EMPTY
    assert remove(services, "m1", "orders").topics[0].error_code == 0
    assert services.metadata.image.topic_config("orders")["mirror.name"] == "m1.removed"
    assert remove(services, "other", "orders").error_code == MirrorError.UNKNOWN_MIRROR
    assert services.mirror_coordinator.cached_state("m1", SOURCE_ID, 0) is S.MIRRORING
    from kmirror.metadata.mirrors import topic_partition_write_refusal
    assert topic_partition_write_refusal(services.metadata.image, "orders", 0, services.mirror_coordinator) is not None
    for state in (S.STOPPING, S.STOPPED):
        asyncio.run(services.mirror_coordinator.write_states(
            [StateWrite(MirrorPartitionKey("m1", SOURCE_ID, p), "orders", state) for p in range(3)]))
    assert topic_partition_write_refusal(services.metadata.image, "orders", 0, services.mirror_coordinator) is None
    assert mirror_call(services, 104, delete, delete_mirror.DeleteMirrorResponse).error_code == 0
    assert list_all(services).mirrors == ()
    assert "mirror.name" not in services.metadata.image.topic_config("orders")


def test_bump_leader_epochs_handler() -> None:
    from kmirror.protocol.mirror import bump_leader_epochs as b
    services = enabled_services()
    asyncio.run(services.metadata.create_topics([CreatableTopic("t", 1, 1, topic_id=SOURCE_ID)]))
    req = b.BumpLeaderEpochsRequest(topics=(b.TopicState(topic_id=SOURCE_ID, partitions=(
        b.LeaderEpochState(partition_index=0, min_leader_epoch=4), b.LeaderEpochState(partition_index=3))),))
    resp = mirror_call(services, 105, req, b.BumpLeaderEpochsResponse)
    assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in resp.topics] == [
        ("t", [(0, 0), (3, ErrorCode.unknown_topic_or_partition)])]
    assert services.metadata.image.topics["t"].partitions[0].leader_epoch == 4


class ControllerForwarding:
    """A broker-only node's metadata: the image is the controller's, writes are forwarded to
    the controller's handlers (a dedicated controller: no mirror coordinator)."""

    forwarding = True

    def __init__(self, controller, response_types) -> None:
        self.controller = controller
        self.response_types = response_types
        self.forwarded: list = []

    @property
    def image(self):
        return self.controller.metadata.image

    async def forward(self, request):
        self.forwarded.append(request)
        handler = {d.api_key: d for d in load_handlers()}[request.__api_key__].handler
        ctx = RequestContext(RequestHeaderView(int(request.__api_key__), 0, 1, "fwd"),
                             self.response_types[int(request.__api_key__)], "127.0.0.1", 1)
        return await handler(self.controller, ctx, request)


def test_a_broker_validates_partition_states_before_forwarding_add_to_the_controller() -> None:
    import copy

    from kmirror.kip1279.state import MirrorPartitionState as S
    fresh_id = uuid.UUID(int=77)
    source = {"orders": SourceTopic("orders", SOURCE_ID, 3), "fresh": SourceTopic("fresh", fresh_id, 2)}
    services = mirrored_orders(source)
    for state in (S.PREPARING, S.MIRRORING):
        write_states(services.mirror_coordinator, state)
    assert remove(services, "m1", "orders").topics[0].error_code == 0  # .removed, still MIRRORING
    # The controller has no coordinator of its own: it answers UNKNOWN and trusts the broker.
    controller = copy.copy(services)
    controller.mirror_coordinator = MirrorCoordinatorService(MirrorCoordinator(4), source_lookup(source))
    broker = copy.copy(services)
    broker.metadata = ControllerForwarding(controller, {95: add_topics_to_mirror.AddTopicsToMirrorResponse})

    req = topics_request(add_topics_to_mirror, add_topics_to_mirror.AddTopicsToMirrorRequest, "m1", "orders", "fresh")
    req = dataclasses.replace(req, replication_factor=1)
    resp = mirror_call(broker, 95, req, add_topics_to_mirror.AddTopicsToMirrorResponse)
    assert {t.name: t.error_code for t in resp.topics} == {"orders": ErrorCode.invalid_request, "fresh": 0}
    assert [[t.topic_name for t in r.topics] for r in broker.metadata.forwarded] == [["fresh"]]
    assert broker.metadata.forwarded[0].replication_factor == 1
    image = services.metadata.image
    assert image.topic_config("orders")["mirror.name"] == "m1.removed"
    assert image.topics["fresh"].topic_id == fresh_id


def broker_and_dedicated_controller():
    """A mirror m1 with topic `orders` (3 partitions); the broker's coordinator holds the
    states, the controller has none."""
    from types import SimpleNamespace

    controller = enabled_services()
    create(controller)
    add(controller, "m1", "orders")
    broker_coordinator = controller.mirror_coordinator
    for p in range(broker_coordinator.coordinator.num_partitions):
        broker_coordinator.coordinator.begin_load(p)
        broker_coordinator.coordinator.complete_load(p, [])
    controller.mirror_coordinator = None
    metadata = ControllerForwarding(controller, {96: remove_topics_from_mirror.RemoveTopicsFromMirrorResponse,
                                               104: delete_mirror.DeleteMirrorResponse})
    return SimpleNamespace(metadata=metadata, broker_metadata=metadata, mirror_coordinator=broker_coordinator,
                           authorization=ALLOW_ALL), controller


def mirrored_orders(source_topics=None):
    """Services with mirror m1, topic orders added, and every `__mirror_state` partition loaded."""
    services = enabled_services(source_topics)
    create(services)
    add(services, "m1", "orders")
    coord = services.mirror_coordinator.coordinator
    for p in range(coord.num_partitions):
        coord.begin_load(p)
        coord.complete_load(p, [])
    return services


def write_states(coordinator_service, state) -> None:
    from kmirror.mirror.coordinator.coordinator import StateWrite
    from kmirror.mirror.coordinator.records import MirrorPartitionKey
    asyncio.run(coordinator_service.write_states(
        [StateWrite(MirrorPartitionKey("m1", SOURCE_ID, p), "orders", state) for p in range(3)]))


def test_a_broker_checks_partition_states_before_forwarding_to_a_dedicated_controller() -> None:
    from kmirror.kip1279.state import MirrorPartitionState as S
    broker, controller = broker_and_dedicated_controller()
    # UNKNOWN partitions at the broker's coordinator: refused there, nothing forwarded.
    assert remove(broker, "m1", "orders").topics[0].error_code == ErrorCode.invalid_request
    assert broker.metadata.forwarded == []
    assert controller.metadata.image.topic_config("orders")["mirror.name"] == "m1"
    # MIRRORING at the broker: forwarded; the controller, which cannot read states, applies it.
    write_states(broker.mirror_coordinator, S.PREPARING)
    write_states(broker.mirror_coordinator, S.MIRRORING)
    resp = remove(broker, "m1", "orders", "missing")
    assert {t.name: t.error_code for t in resp.topics} == {"orders": 0, "missing": ErrorCode.unknown_topic_or_partition}
    assert [t.topic_name for t in broker.metadata.forwarded[0].topics] == ["orders", "missing"]
    assert controller.metadata.image.topic_config("orders")["mirror.name"] == "m1.removed"


def test_delete_mirror_is_refused_at_the_broker_while_a_removed_partition_is_not_stopped() -> None:
    from kmirror.kip1279.state import MirrorPartitionState as S
    broker, controller = broker_and_dedicated_controller()
    write_states(broker.mirror_coordinator, S.PREPARING)
    write_states(broker.mirror_coordinator, S.MIRRORING)
    assert remove(broker, "m1", "orders").topics[0].error_code == 0
    delete = delete_mirror.DeleteMirrorRequest(mirror_name="m1")
    write_states(broker.mirror_coordinator, S.STOPPING)
    assert mirror_call(broker, 104, delete, delete_mirror.DeleteMirrorResponse).error_code == \
        MirrorError.MIRROR_NOT_EMPTY
    assert len(broker.metadata.forwarded) == 1  # only the removal
    write_states(broker.mirror_coordinator, S.STOPPED)
    assert mirror_call(broker, 104, delete, delete_mirror.DeleteMirrorResponse).error_code == 0
    assert list_all(controller).mirrors == ()


def test_a_removed_topic_is_writable_on_a_leader_that_does_not_coordinate_its_mirror_state() -> None:
    """On a 3-broker cluster the key's `__mirror_state` coordinator is often another broker:
    the partition leader's own persisted state decides then."""
    from kmirror.kip1279.membership import WriteRefusal
    from kmirror.kip1279.state import MirrorPartitionState as S
    from kmirror.metadata.mirrors import topic_partition_write_refusal

    class StateView:
        def __init__(self, states) -> None:
            self.states = states

        def cached_state(self, mirror_name, topic_id, partition):
            return self.states.get((mirror_name, topic_id, partition))

        def source_topic_deleted(self, mirror_name, topic_id, partition):
            return False

    services = mirrored_orders()
    write_states(services.mirror_coordinator, S.PREPARING)
    write_states(services.mirror_coordinator, S.MIRRORING)
    assert remove(services, "m1", "orders").topics[0].error_code == 0
    image = services.metadata.image
    not_coordinator = StateView({})
    leader = StateView({("m1", SOURCE_ID, 0): S.STOPPED, ("m1", SOURCE_ID, 1): S.STOPPING})
    # Failed over: refused with a retriable error until STOPPED is known here.
    not_yet = WriteRefusal.NOT_YET_WRITABLE
    assert topic_partition_write_refusal(image, "orders", 0, not_coordinator) is not_yet  # unknown: the safe side
    assert topic_partition_write_refusal(image, "orders", 0, not_coordinator, leader) is None
    assert topic_partition_write_refusal(image, "orders", 1, not_coordinator, leader) is not_yet  # still detaching
    assert topic_partition_write_refusal(image, "orders", 2, not_coordinator, leader) is not_yet  # not led here
