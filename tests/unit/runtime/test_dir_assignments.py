"""The broker's side of AssignReplicasToDirs (`runtime.dir_assignments.DirectoryAssigner`),
with its ports faked: a replica whose log does not exist yet when its image is published is
named once its log exists, at the next publish, even if its topic did not change."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.metadata import directories as dir_ids
from kmirror.metadata.controller.log_dirs import DirAssignment
from kmirror.metadata.records import PartitionRecord, TopicRecord
from kmirror.runtime.dir_assignments import DirectoryAssigner
from kmirror.testing.metadata import image_with_brokers
from kmirror.types import TopicPartition

DATA2 = uuid.UUID(int=0xD2)
TOPIC_ID = uuid.UUID(int=0x70)


class Logs:
    def __init__(self) -> None:
        self.dirs: dict[TopicPartition, str] = {}

    def log_dir_of(self, tp: TopicPartition) -> str | None:
        return self.dirs.get(tp)


class LogDirIds:
    def ids(self, cluster_id: str) -> dict[str, uuid.UUID]:
        return {"/data2": DATA2}


class Controller:
    def __init__(self) -> None:
        self.asked: list[list[DirAssignment]] = []

    async def assign_replicas_to_dirs(self, broker_epoch: int, wanted: list[DirAssignment]) -> dict[Any, ErrorCode]:
        self.asked.append(wanted)
        return dict.fromkeys(wanted, ErrorCode.none)


async def turns() -> None:
    """Enough loop turns for the assigner's task to send and settle (no timer involved)."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_a_replica_without_a_log_when_published_is_named_once_it_has_one() -> None:
    records = [TopicRecord("orders", TOPIC_ID),
               *(PartitionRecord(p, TOPIC_ID, (1, 2), (2,), 2, directories=(dir_ids.LOST, dir_ids.UNASSIGNED))
                 for p in range(2))]
    base = image_with_brokers(1, 2)
    image = base.apply(records, base.offset + len(records))
    logs, controller = Logs(), Controller()

    async def run() -> None:
        assigner = DirectoryAssigner(1, logs, LogDirIds(), controller, lambda: 10)  # type: ignore[arg-type]
        logs.dirs[TopicPartition("orders", 0)] = "/data2"  # orders-1's log is still being created
        assigner.on_published(image)
        await turns()
        logs.dirs[TopicPartition("orders", 1)] = "/data2"
        assigner.on_published(image)  # the same image: orders did not change
        await turns()

    asyncio.run(run())
    assert controller.asked == [[DirAssignment(DATA2, TOPIC_ID, 0)], [DirAssignment(DATA2, TOPIC_ID, 1)]]
