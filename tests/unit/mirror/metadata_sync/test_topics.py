"""The topic sync runner against fake ports: only on the mirror's metadata coordinator, only
ACTIVE topics, halted while the source cluster id differs, failures counted."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Sequence

import pytest

from kmirror.config.mirror import MIRROR_STATE_TOPIC, MirrorConfig
from kmirror.metadata.controller.config_ops import AlterableConfig, AlterConfigOp
from kmirror.metadata.controller.result import NONE, ApiError
from kmirror.metadata.image import ConfigResource, PartitionRegistration
from kmirror.metadata.mirror_records import MIRROR_CONFIG_RESOURCE_TYPE
from kmirror.mirror.coordinator.partitioner import metadata_partition_for
from kmirror.mirror.metadata_sync import MetadataSync
from kmirror.mirror.metadata_sync.topics import TopicMetadataSync, coordinates_metadata
from kmirror.mirror.source_lookup import SourceDescription, SourceTopic
from kmirror.mirror.sync_errors import MirrorSyncErrors
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.replication import image_with

TID = uuid.UUID(int=5)
STATE_PARTITIONS = 3


def reg(leader: int) -> PartitionRegistration:
    return PartitionRegistration((leader,), (leader,), leader, 0, 0)


def image(coordinator: int = 1, mirror_name_config: str = "m", cluster_id: str = "src-id"):
    state = {p: reg(2) for p in range(STATE_PARTITIONS)}
    state[metadata_partition_for("m", STATE_PARTITIONS)] = reg(coordinator)
    img = image_with({"t": (TID, {0: reg(2), 1: reg(2)}), MIRROR_STATE_TOPIC: (uuid.UUID(int=9), state)},
                     configs={"t": {"mirror.name": mirror_name_config, "retention.ms": "1"}})
    configs = dict(img.configs)
    configs[ConfigResource(MIRROR_CONFIG_RESOURCE_TYPE, "m")] = {"bootstrap.servers": "src:9092",
                                                                 "mirror.source.cluster.id": cluster_id}
    return dataclasses.replace(img, configs=configs)


class FakeSource:
    def __init__(self) -> None:
        self.cluster_id = "src-id"
        self.partitions = 4
        self.fail = False
        self.asked: list[list[str]] = []

    async def __call__(self, mirror_name: str, config: MirrorConfig, names: Sequence[str]) -> SourceDescription:
        self.asked.append(list(names))
        if self.fail:
            raise ConnectionError("source down")
        return SourceDescription(self.cluster_id, {"t": SourceTopic("t", TID, self.partitions, {"retention.ms": "2"})})


class FakeWriter:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.error = NONE

    async def create_partitions(self, topic: str, count: int) -> ApiError:
        self.calls.append(("create_partitions", (topic, count)))
        return self.error

    async def alter_configs(self, topic: str, ops: Sequence[AlterableConfig]) -> ApiError:
        self.calls.append(("alter_configs", (topic, tuple(ops))))
        return self.error


def runner(img):
    source, writer, errors = FakeSource(), FakeWriter(), MirrorSyncErrors()
    current = {"image": img}
    return TopicMetadataSync(1, lambda: current["image"], source, writer, errors), source, writer, errors, current


EXPECTED = [("create_partitions", ("t", 4)),
            ("alter_configs", ("t", (AlterableConfig("retention.ms", AlterConfigOp.SET, "2"),)))]


def test_coordinator_is_the_leader_of_the_mirrors_metadata_partition() -> None:
    assert coordinates_metadata(image(coordinator=1), 1, "m")
    assert not coordinates_metadata(image(coordinator=2), 1, "m")
    no_state_topic = image()
    no_state_topic = dataclasses.replace(no_state_topic, topics={"t": no_state_topic.topics["t"]})
    assert not coordinates_metadata(no_state_topic, 1, "m")


def test_the_coordinator_expands_partitions_and_aligns_configs() -> None:
    sync, source, writer, errors, _ = runner(image())
    asyncio.run(sync.run_once())
    assert source.asked == [["t"]]
    assert writer.calls == EXPECTED
    assert errors == MirrorSyncErrors()


def test_another_broker_does_nothing() -> None:
    sync, source, writer, _, _ = runner(image(coordinator=2))
    asyncio.run(sync.run_once())
    assert source.asked == [] and writer.calls == []


@pytest.mark.parametrize("membership", ["m.paused", "m.removed"])
def test_paused_and_removed_topics_are_not_synced(membership: str) -> None:
    sync, source, writer, _, current = runner(image(mirror_name_config=membership))
    asyncio.run(sync.run_once())
    assert source.asked == [] and writer.calls == []
    current["image"] = image()  # resumed
    asyncio.run(sync.run_once())
    assert writer.calls == EXPECTED


def test_cluster_id_mismatch_halts_with_one_error_and_resumes(caplog: pytest.LogCaptureFixture) -> None:
    sync, source, writer, errors, _ = runner(image())
    source.cluster_id = "another-cluster"
    with caplog.at_level(logging.INFO, logger="kmirror.mirror.metadata_sync.topics"):
        asyncio.run(sync.run_once())
        asyncio.run(sync.run_once())
        assert writer.calls == []
        assert errors.metadata_refresh == 2
        assert [r.levelname for r in caplog.records] == ["ERROR"]
        assert "another-cluster" in caplog.records[0].getMessage()
        assert set(sync.halted) == {"m"}
        source.cluster_id = "src-id"
        asyncio.run(sync.run_once())
    assert writer.calls == EXPECTED
    assert sync.halted == {}
    assert "resumed" in caplog.records[1].getMessage()


def test_unreachable_source_counts_a_metadata_refresh_error() -> None:
    sync, source, writer, errors, _ = runner(image())
    source.fail = True
    asyncio.run(sync.run_once())
    assert errors.metadata_refresh == 1 and errors.topic_config == 0 and writer.calls == []


def test_refused_writes_count_topic_config_errors_and_are_retried() -> None:
    sync, _, writer, errors, _ = runner(image())
    writer.error = ApiError(ErrorCode.invalid_config, "no")
    asyncio.run(sync.run_once())
    asyncio.run(sync.run_once())
    assert errors.topic_config == 4
    assert writer.calls == EXPECTED * 2


def test_metadata_sync_runs_every_syncer_even_after_a_failure() -> None:
    ran: list[str] = []

    class Broken:
        async def run_once(self) -> None:
            ran.append("broken")
            raise RuntimeError("boom")

    class Fine:
        async def run_once(self) -> None:
            ran.append("fine")

    asyncio.run(MetadataSync([Broken(), Fine()]).run_once())
    assert ran == ["broken", "fine"]
