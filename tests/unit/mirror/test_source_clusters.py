"""The coalescing source (`CoalescingSourceCluster`): lookups that partitions of one pass make
together reach the source as one request of each kind, since across a WAN each request is a
round trip."""

import asyncio
from uuid import UUID

from kmirror.mirror.source_clusters import CoalescingSourceCluster
from kmirror.replication.fetcher.engine import EpochQuery
from kmirror.replication.outcomes import EpochEndOffset
from kmirror.types import TopicPartition

TOPIC_ID = UUID(int=0xBEEF)


def test_coalescing_source_answers_concurrent_topic_id_lookups_with_one_later_request():
    class Source:
        def __init__(self):
            self.asked = []
            self.closed = False

        async def topic_ids(self, topics):
            self.asked.append(list(dict.fromkeys(topics)))
            return {topic: TOPIC_ID if topic == "t" else None for topic in topics}

        async def close(self):
            self.closed = True

    inner = Source()
    source = CoalescingSourceCluster(inner)

    async def go():
        answers = await asyncio.gather(*(source.topic_id("t") for _ in range(30)), source.topic_id("gone"))
        assert answers == [TOPIC_ID] * 30 + [None]
        assert inner.asked == [["t", "gone"]]  # one request for the whole batch
        await source.topic_id("t")
        assert inner.asked == [["t", "gone"], ["t"]]  # a later lookup asks again
        await source.close()

    asyncio.run(go())
    assert inner.closed


def test_coalescing_source_asks_each_mirrors_last_mirrored_epochs_once_per_batch():
    class Source:
        def __init__(self):
            self.asked = []

        async def last_mirrored_epochs(self, mirror_name, tps):
            self.asked.append((mirror_name, sorted(tps)))
            return {tp: None if mirror_name == "old-source" else tp.partition for tp in tps}

    inner = Source()
    source = CoalescingSourceCluster(inner)
    tps = [TopicPartition(f"t{i}", p) for i in range(50) for p in range(2)]

    async def go():
        return await asyncio.gather(*(source.last_mirrored_epoch("dr", tp) for tp in tps),
                                    source.last_mirrored_epoch("old-source", tps[0]))

    assert asyncio.run(go()) == [tp.partition for tp in tps] + [None]
    assert inner.asked == [("dr", sorted(tps)), ("old-source", [tps[0]])]


def test_coalescing_source_asks_the_epoch_ends_of_partitions_asking_together_in_one_call():
    class Source:
        def __init__(self):
            self.asked = []

        async def epoch_end_offsets(self, queries):
            self.asked.append(len(queries))
            return {q.topic_partition: EpochEndOffset(q.leader_epoch, 10 * q.topic_partition.partition)
                    for q in queries}

    inner = Source()
    source = CoalescingSourceCluster(inner)
    queries = [EpochQuery(TopicPartition("t", p), TOPIC_ID, -1, 3) for p in range(40)]

    async def go():
        return await asyncio.gather(*(source.epoch_end_offset(q) for q in queries))

    assert asyncio.run(go()) == [EpochEndOffset(3, 10 * p) for p in range(40)]
    assert inner.asked == [40]
