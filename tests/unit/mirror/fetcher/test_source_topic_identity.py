"""The mirror's source endpoint over the Kafka protocol against a source broker whose topic
`t` was deleted and re-created (another topic id): every answer about the name is refused
with UNKNOWN_TOPIC_ID when asked for the mirror's topic id, so no truncation path (divergence
through OffsetsForLeaderEpoch, OffsetOutOfRange through ListOffsets, log start following and
appends through Fetch, by id from v13 and by name before) acts on another topic."""

import asyncio
import dataclasses
from uuid import UUID

from kmirror.broker.api import build_registry, load_handlers
from kmirror.broker.services import BrokerServices
from kmirror.metadata.image import PartitionRegistration
from kmirror.mirror.fetcher.policy import mirror_fetch_policy
from kmirror.mirror.fetcher.source_endpoint import SourceClusterEndPoint
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import build_batch
from kmirror.replication.fetcher.engine import EpochQuery, FetchPartitionPlan, FetchPlan
from kmirror.replication.outcomes import EpochEndOffset
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.runtime.server import KafkaServer
from kmirror.testing.replication import image_with, memory_log_manager, server_config
from kmirror.types import TopicPartition

MIRRORED_ID = UUID(int=0xBEEF)  # the topic the mirror copies (deleted at the source)
NEW_ID = UUID(int=0xCAFE)  # the topic now named `t` at the source
TP = TopicPartition("t", 0)


class Metadata:
    forwarding = False
    controller_id = 1

    def __init__(self, img) -> None:
        self.image = img


def source_broker():
    clock = ManualClock()
    img = image_with({"t": (NEW_ID, {0: PartitionRegistration((1,), (1,), 1, 0, 0)})})
    rm = ReplicaManager(1, memory_log_manager(clock), clock, server_config(1))
    rm.apply_image(None, img)
    for _ in range(3):
        rm.append_records({TP: build_batch([(b"k", b"new topic", (), 1_700_000_000_000)] * 2)}, 1)
    return clock, rm, img


def answers(topic_id: UUID, max_fetch_version: int = 19,
            fetch_metadata: list[int] | None = None) -> tuple[object, object, object, set]:
    """(OffsetsForLeaderEpoch, ListOffsets, Fetch) answers for `t` asked with `topic_id`, and
    the partitions reported moved (metadata looked up again). `fetch_metadata` gets the
    number of Metadata requests the Fetch answer cost."""
    clock, rm, img = source_broker()
    metadata_requests: list[int] = []

    def counted(handler):
        def handle(services, ctx, request):
            metadata_requests.append(1)
            return handler(services, ctx, request)
        return handle

    defs = [dataclasses.replace(d, max_version=max_fetch_version) if d.api_key == 1
            else dataclasses.replace(d, handler=counted(d.handler)) if d.api_key == 3 else d
            for d in load_handlers()]
    services = BrokerServices(node_id=1, config=server_config(1), registry=build_registry(defs), clock=clock,
                              metadata=Metadata(img), replica_manager=rm)
    moved: set = set()

    async def run():
        server = KafkaServer(services.registry, services, 100 * 1024 * 1024)
        port = await server.start("127.0.0.1", 0)
        endpoint = SourceClusterEndPoint("127.0.0.1", port, client_id="mirror", on_leader_change=moved.update)
        try:
            epochs = await endpoint.fetch_epoch_end_offsets([EpochQuery(TP, topic_id, -1, 0)])
            offsets = await endpoint.fetch_log_offsets(EpochQuery(TP, topic_id, -1, -1))
            plan = FetchPlan((FetchPartitionPlan(TP, topic_id, 0, -1, -1, 0, 1 << 20),),
                             dataclasses.replace(mirror_fetch_policy(), max_wait_ms=0))
            before = len(metadata_requests)
            fetched = await endpoint.fetch(plan)
            if fetch_metadata is not None:
                fetch_metadata.append(len(metadata_requests) - before)
            return epochs[TP], offsets, fetched[TP]
        finally:
            await endpoint.close()
            await server.stop()

    epochs, offsets, fetched = asyncio.run(run())
    return epochs, offsets, fetched, moved


def test_answers_about_a_recreated_topic_are_refused_for_the_mirrored_topic_id():
    epochs, offsets, fetched, moved = answers(MIRRORED_ID)
    assert epochs == ErrorCode.unknown_topic_id  # no divergence truncation
    assert offsets == ErrorCode.unknown_topic_id  # no OffsetOutOfRange truncation / restart
    assert fetched.error == ErrorCode.unknown_topic_id and len(fetched.records) == 0  # Fetch v19 by id
    assert fetched.log_start_offset == -1  # no log start to follow
    assert moved == {TP}  # the manager looks the source topic up again


def test_a_source_fetching_by_name_is_checked_against_the_topic_id_too():
    # Fetch up to v12 (a Kafka 2.8-3.0 source): the name is fetched, the answer is dropped.
    epochs, offsets, fetched, moved = answers(MIRRORED_ID, max_fetch_version=12)
    assert fetched.error == ErrorCode.unknown_topic_id and len(fetched.records) == 0
    assert moved == {TP}


def test_a_source_without_kip_1279_is_fetched_by_topic_id():
    # Fetch up to v18 (a Kafka 3.x-4.x source): by id, refused for another topic, and no
    # Metadata request is needed to trust an answer.
    metadata: list[int] = []
    epochs, offsets, fetched, moved = answers(MIRRORED_ID, max_fetch_version=18, fetch_metadata=metadata)
    assert fetched.error == ErrorCode.unknown_topic_id and len(fetched.records) == 0
    assert moved == {TP}
    epochs, offsets, fetched, moved = answers(NEW_ID, max_fetch_version=18, fetch_metadata=metadata)
    assert fetched.error == ErrorCode.none and len(fetched.records) > 0
    assert metadata == [0, 0]


def test_the_same_topic_id_is_answered():
    for version in (12, 18, 19):
        metadata: list[int] = []
        epochs, offsets, fetched, moved = answers(NEW_ID, max_fetch_version=version, fetch_metadata=metadata)
        assert epochs == EpochEndOffset(0, 6)
        assert offsets == (0, 6)
        assert fetched.error == ErrorCode.none and len(fetched.records) > 0
        assert moved == set()
        assert metadata == [1 if version <= 12 else 0]  # a name-keyed answer is checked
