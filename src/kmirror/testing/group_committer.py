"""Consumer groups committing offsets at a mirror's source during a failure test, and the checks
of what the mirror's group offset sync (KIP-1279) made of them at the destination.

`GroupCommitter` is a thread of confluent-kafka consumers, one per group, each assigned every
partition of a topic (no membership, as a consumer that tracks its own partitions), committing
every `interval_s` the partitions' current high watermarks: a consumer that keeps up. Every
offset it tried to commit is kept, acknowledged or not (a commit whose answer a fault lost may
have been written), per group and partition."""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict

from confluent_kafka import Consumer, KafkaException, TopicPartition

from kmirror.client.admin import Admin
from kmirror.client.groups import OffsetAndMetadata
from kmirror.testing.mirror_clusters import wait_until
from kmirror.types import TopicPartition as TP


class GroupCommitter(threading.Thread):
    def __init__(self, bootstrap: str, tag: str, topic: str, partitions: int, groups: int = 8,
                 interval_s: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.groups = [f"{tag}-group-{i}" for i in range(groups)]
        self.interval_s = interval_s
        self.tried: dict[tuple[str, int], set[int]] = defaultdict(set)
        self.committed = 0
        self.errors: list[str] = []
        self.stop = threading.Event()

    def consumer(self, group: str) -> Consumer:
        return Consumer({"bootstrap.servers": self.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "socket.timeout.ms": 10000})

    def run(self) -> None:
        consumers = {g: self.consumer(g) for g in self.groups}
        watermarks = self.consumer(f"{self.groups[0]}-watermarks")
        try:
            while not self.stop.wait(self.interval_s):
                try:
                    ends = [watermarks.get_watermark_offsets(TopicPartition(self.topic, p), timeout=5,
                                                             cached=False)[1] for p in range(self.partitions)]
                except KafkaException as exc:
                    self.errors.append(f"watermarks: {exc.args[0]}")
                    continue
                for group, consumer in consumers.items():
                    self.commit(group, consumer, ends)
        finally:
            for consumer in (*consumers.values(), watermarks):
                consumer.close()

    def commit(self, group: str, consumer: Consumer, ends: list[int]) -> None:
        for p, end in enumerate(ends):
            self.tried[(group, p)].add(end)
        try:
            answered = consumer.commit(offsets=[TopicPartition(self.topic, p, end) for p, end in enumerate(ends)],
                                       asynchronous=False)
        except KafkaException as exc:
            self.errors.append(f"{group}: {exc.args[0]}")
            return
        failed = [tp for tp in answered or () if tp.error is not None]
        if failed:
            self.errors.append(f"{group}: {failed[0].error}")
        else:
            self.committed += 1

    def finish(self) -> None:
        self.stop.set()
        self.join(60)

    def offsets(self, bootstrap: str) -> dict[tuple[str, int], int]:
        """(group, partition) -> the committed offset of the topic's partition at `bootstrap`."""
        async def fetch() -> dict[str, dict[TP, OffsetAndMetadata] | Exception]:
            async with await Admin.connect(bootstrap) as admin:
                return dict(await admin.list_consumer_groups_offsets(self.groups))
        out: dict[tuple[str, int], int] = {}
        for group, offsets in asyncio.run(fetch()).items():
            if isinstance(offsets, Exception):
                raise offsets
            out.update({(group, tp.partition): om.offset for tp, om in offsets.items() if tp.topic == self.topic})
        return out


def assert_synced(committer: GroupCommitter, source: str, destination: str, timeout_s: float) -> dict[tuple[str, int], int]:
    """After the faults, with the committer finished: every group's offsets at the destination
    become the source's (the sync converged); returns them."""
    expected = wait_until(lambda: committer.offsets(source), "the groups' offsets at the source",
                          timeout_s=timeout_s, retry_on=(Exception,))
    assert len(expected) == len(committer.groups) * committer.partitions and committer.committed, (
        expected, committer.errors[-3:])
    wait_until(lambda: committer.offsets(destination) == expected, "every group's offsets synced to the destination",
               timeout_s=timeout_s, retry_on=(Exception,), seen=lambda: (expected, committer.offsets(destination)))
    return expected


def assert_only_committed_offsets(committer: GroupCommitter, destination: str) -> int:
    """After a disaster failover: each offset the destination holds for a group was one its
    consumer committed (or tried to) at the source: the sync copies, never invents, and a
    consumer resumes there. Returns how many offsets it holds."""
    held = wait_until(lambda: committer.offsets(destination), "the groups' offsets at the destination",
                      timeout_s=60, retry_on=(Exception,))
    strays = {key: offset for key, offset in held.items() if offset not in committer.tried[key]}
    assert not strays, f"offsets the source's consumers never committed: {strays}"
    return len(held)
