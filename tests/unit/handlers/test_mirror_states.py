"""ReadMirrorStates / WriteMirrorStates / DescribeMirrors / FindCoordinator MIRROR (3) on a
single broker, and DescribeConfigs hiding the mirror membership config."""

import asyncio
import io

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

import kmirror.broker.handlers.describe_mirrors as describe_mirrors_handler
from kmirror.broker.api import RequestContext, load_handlers
from kmirror.config.broker_keys import BROKER_CONFIG_DEFS
from kmirror.config.mirror import MIRROR_BROKER_CONFIG_DEFS, MIRROR_TOPIC_CONFIG_DEFS
from kmirror.config.topic import TOPIC_CONFIG_DEFS, validate_topic_config
from kmirror.kip1279.errors import MirrorError
from kmirror.kip1279.state import MirrorPartitionState as S
from kmirror.metadata.controller.mirrors import FeatureUpdate
from kmirror.metadata.controller.topics import CreatableTopic
from kmirror.mirror.coordinator.coordinator import MirrorCoordinator
from kmirror.mirror.service import MirrorCoordinatorService
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.mirror import create_mirror, describe_mirrors
from kmirror.protocol.mirror import read_mirror_states as rms
from kmirror.protocol.mirror import write_mirror_states as wms
from kmirror.protocol.mirror.find_coordinator import MirrorCoordinatorKey
from kmirror.protocol.mirror.registry import entity_types
from kmirror.testing.metadata import call, metadata_services, request_entity, server_config

HANDLERS = {d.api_key: d for d in load_handlers()}


class MemoryLog:
    def __init__(self) -> None:
        self.partitions: dict[int, list] = {}

    async def append(self, partition, records):
        self.partitions.setdefault(partition, []).extend(records)
        return 0

    def read_all(self, partition):
        return list(self.partitions.get(partition, []))


async def mirror_call(services, api_key, request):
    response_type = entity_types(api_key)[1]
    ctx = RequestContext(RequestHeaderView(api_key, 0, 1, "test"), response_type, "127.0.0.1", 1)
    result = HANDLERS[api_key].handler(services, ctx, request)
    result = await result if asyncio.iscoroutine(result) else result
    buf = io.BytesIO()
    entity_writer(response_type)(buf, result)  # the answer encodes on the wire
    return entity_reader(response_type)(buf.getvalue(), 0)[0]


def mirror_services(enabled=True):
    services = metadata_services(server_config(**{"mirror.topic.num.partitions": "4"}))
    if enabled:
        asyncio.run(services.metadata.update_features([FeatureUpdate("mirror.version", 1)],
                                                      {"mirror.version": (0, 1)}))
    services.mirror_coordinator = MirrorCoordinatorService(
        MirrorCoordinator(4), log=MemoryLog(), node_id=services.node_id, metadata=services.metadata, send=None,
        replication_factor=3)
    return services


async def with_topic_in_mirror(services, partitions=2):
    await mirror_call(services, 94, create_mirror.CreateMirrorRequest(mirror_name="m1", config=(
        create_mirror.MirrorConfig(name="bootstrap.servers", value="source:9092"),)))
    await services.metadata.create_topics([CreatableTopic("orders", partitions, 1, mirror_name="m1")])
    assert await services.mirror_coordinator.ensure_state_topic() is ErrorCode.none
    services.mirror_coordinator.on_partitions_led(range(4))
    await services.mirror_coordinator.wait_loaded()
    return services.metadata.image.topics["orders"].topic_id


def write_request(*partitions, removed=()):
    return wms.WriteMirrorStatesRequest(mirror_name="m1", removed_topics=removed, topics=(wms.TopicData(
        name="orders", partitions=tuple(wms.PartitionData(partition_index=p, state=s, last_mirror_epoch=lme)
                                        for p, s, lme in partitions)),))


def read_request(*partitions, topic="orders"):
    return rms.ReadMirrorStatesRequest(mirror_name="m1", topics=(rms.TopicData(
        name=topic, partitions=tuple(rms.PartitionData(partition_index=p) for p in partitions)),))


def test_write_then_read_mirror_states_through_the_rpcs() -> None:
    services = mirror_services()

    async def run():
        await with_topic_in_mirror(services)
        state_topic = services.metadata.image.topics["__mirror_state"]
        assert len(state_topic.partitions) == 4
        assert services.metadata.image.topic_config("__mirror_state")["cleanup.policy"] == "compact"
        written = await mirror_call(services, 101, write_request((0, int(S.PREPARING), 7), (1, int(S.STOPPED), -1)))
        assert [(p.partition_index, p.error_code) for p in written.topics[0].partitions] == [
            (0, ErrorCode.none), (1, ErrorCode.invalid_request)]
        read = await mirror_call(services, 100, read_request(0, 1))
        assert [(p.partition_index, p.state, p.last_mirror_epoch, p.error_code) for p in read.topics[0].partitions] == [
            (0, int(S.PREPARING), 7, ErrorCode.none), (1, int(S.UNKNOWN), -1, ErrorCode.none)]
        missing = await mirror_call(services, 100, read_request(0, topic="nope"))
        assert missing.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
        await mirror_call(services, 101, write_request(removed=("orders",)))
        read = await mirror_call(services, 100, read_request(0))
        assert read.topics[0].partitions[0].state == int(S.UNKNOWN)

    asyncio.run(run())


def test_state_rpcs_answer_unsupported_version_while_mirroring_is_disabled() -> None:
    services = mirror_services(enabled=False)

    async def run():
        assert (await mirror_call(services, 100, read_request(0))).error_code == ErrorCode.unsupported_version
        assert (await mirror_call(services, 101, write_request())).error_code == ErrorCode.unsupported_version
        resp = await mirror_call(services, 99, describe_mirrors.DescribeMirrorsRequest())
        assert resp.error_code == ErrorCode.unsupported_version

    asyncio.run(run())


def test_describe_mirrors_reports_led_partitions_with_their_coordinator_state() -> None:
    services = mirror_services()

    async def run():
        await with_topic_in_mirror(services)
        await mirror_call(services, 101, write_request((0, int(S.PREPARING), 2)))
        resp = await mirror_call(services, 99, describe_mirrors.DescribeMirrorsRequest(mirror_names=("m1", "zz")))
        m1, zz = resp.mirrors
        assert zz.error_code == MirrorError.UNKNOWN_MIRROR
        assert m1.error_code == 0 and [t.topic_name for t in m1.topics] == ["orders"]
        assert [(p.partition_index, p.state, p.last_mirror_epoch, p.source_offset, p.lag)
                for p in m1.topics[0].partitions] == [(0, "PREPARING", 2, -1, -1), (1, "UNKNOWN", -1, -1, -1)]
        everything = await mirror_call(services, 99, describe_mirrors.DescribeMirrorsRequest())
        assert [m.mirror_name for m in everything.mirrors] == ["m1"]

    asyncio.run(run())


def test_a_wide_describe_lists_every_partition_in_order_and_lets_other_work_run_between_chunks() -> None:
    services = mirror_services()
    partitions = 2 * describe_mirrors_handler.PARTITIONS_PER_STEP + 500

    async def run():
        await with_topic_in_mirror(services, partitions=partitions)
        await mirror_call(services, 101, write_request((0, int(S.PREPARING), 2), (partitions - 1, int(S.PREPARING), 5)))
        turns = 0
        done = asyncio.Event()

        async def other_work():
            nonlocal turns
            while not done.is_set():
                turns += 1
                await asyncio.sleep(0)

        other = asyncio.create_task(other_work())
        await asyncio.sleep(0)
        started = turns
        resp = await mirror_call(services, 99, describe_mirrors.DescribeMirrorsRequest(mirror_names=("m1",)))
        during = turns - started
        done.set()
        await other
        rows = [(p.partition_index, p.state, p.last_mirror_epoch) for p in resp.mirrors[0].topics[0].partitions]
        assert [r[0] for r in rows] == list(range(partitions))
        assert rows[0] == (0, "PREPARING", 2) and rows[-1] == (partitions - 1, "PREPARING", 5)
        assert {r[1] for r in rows[1:-1]} == {"UNKNOWN"}
        assert during >= 2  # the loop ran other work between the three chunks

    asyncio.run(run())


def test_find_coordinator_mirror_key_answers_the_state_partition_leader() -> None:
    services = mirror_services()

    async def run():
        topic_id = await with_topic_in_mirror(services)
        return topic_id

    topic_id = asyncio.run(run())
    good = str(MirrorCoordinatorKey("m1", topic_id, 0))
    resp = call(services, 10, 4, {"key_type": 3, "coordinator_keys": (good, "not-a-key")})
    ok, bad = resp.coordinators
    assert (ok.error_code, ok.node_id) == (ErrorCode.none, services.node_id)
    assert bad.error_code == ErrorCode.invalid_request
    disabled = mirror_services(enabled=False)
    resp = call(disabled, 10, 4, {"key_type": 3, "coordinator_keys": (good,)})
    assert resp.coordinators[0].error_code == ErrorCode.unsupported_version


def test_describe_configs_hides_mirror_membership() -> None:
    services = mirror_services()

    async def run():
        await with_topic_in_mirror(services)

    asyncio.run(run())
    res = (request_entity(32, 4, "DescribeConfigsResource", resource_type=2, resource_name="orders",
                          configuration_keys=None),)
    resp = call(services, 32, 4, {"resources": res, "include_synonyms": False, "include_documentation": False})
    names = {c.name for c in resp.results[0].configs}
    assert "mirror.name" not in names and "retention.ms" in names
    assert services.metadata.image.topic_config("orders")["mirror.name"] == "m1"


def test_mirror_broker_and_topic_configs_are_registered() -> None:
    for d in MIRROR_BROKER_CONFIG_DEFS:
        assert BROKER_CONFIG_DEFS[d.name].default == d.default and BROKER_CONFIG_DEFS[d.name].type == d.type
    for d in MIRROR_TOPIC_CONFIG_DEFS:
        assert TOPIC_CONFIG_DEFS[d.name].definition.default == d.default
    assert validate_topic_config("mirror.name", "m1.paused") is None
    assert validate_topic_config("mirror.support.unclean.leader.election", "maybe") is not None


def test_server_properties_accept_mirror_broker_configs() -> None:
    from kmirror.config.server import ServerConfig

    cfg = ServerConfig.from_properties({"node.id": "1", "listeners": "PLAINTEXT://127.0.0.1:9092",
                                        "mirror.topic.num.partitions": "7", "mirror.num.replica.fetchers": "2"})
    assert cfg.values["mirror.topic.num.partitions"] in (7, "7")
