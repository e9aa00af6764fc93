"""Divergence inside the last mirrored epoch, resolved with the source before MIRRORING.

After LME truncation the local epochs are at most the LME; records of the LME epoch the
source does not hold (a tail written before the previous failover) are cut here, with the
fetch engine's rule (`truncation_for_leader_epoch_end`), before the partition may be
MIRRORING: a pause or failover right after PREPARING must not keep them.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from kmirror.mirror.fetcher.source_endpoint import SourceCluster
from kmirror.mirror.lifecycle_ports import StepPending
from kmirror.replication.fetcher.engine import EpochQuery, truncation_for_leader_epoch_end
from kmirror.replication.outcomes import EpochEndOffset
from kmirror.replication.partition import Partition
from kmirror.replication.replica_ports import HostedLog
from kmirror.types import TopicPartition


async def resolve_divergence(tp: TopicPartition, topic_id: UUID, leader: Callable[[], Partition[HostedLog]],
                             source: SourceCluster) -> None:
    """Ask the source's leader for the end of each local epoch from the latest down and cut
    what it does not hold. `leader()` answers the partition while this broker leads it and
    raises `StepPending` otherwise. Each round either completes or moves to an older local
    epoch, so the local epoch count bounds the rounds. The partitions asking together share
    one OffsetsForLeaderEpoch per source leader (`SourceCluster.epoch_end_offset`)."""
    for _ in range(len(leader().log.epoch_cache) + 1):
        latest = leader().log.latest_epoch
        if latest is None:
            return
        try:
            answer = await source.epoch_end_offset(EpochQuery(tp, topic_id, -1, latest))
        except Exception as exc:
            raise StepPending(f"OffsetsForLeaderEpoch: {exc!r}") from exc
        if not isinstance(answer, EpochEndOffset):
            raise StepPending(f"OffsetsForLeaderEpoch for {tp}: {answer!r}")
        p = leader()
        mine = p.log.end_offset_for_epoch(answer.leader_epoch) if answer.leader_epoch >= 0 else None
        offset, completed = truncation_for_leader_epoch_end(answer, p.log.log_end_offset,
                                                            p.log.high_watermark, mine)
        p.truncate_to(offset)
        if completed:
            return
    raise StepPending(f"divergence of {tp} not resolved yet")
