"""PREPARING: Last Mirrored Epoch (LME) truncation and the MirrorLeaderEpoch rule
(KIP-1279 "Log Convergence", "Mirror Leader Epoch"; the KIP-1279 discussion thread).

Two-phase truncation:
1. LME truncation (here): the destination leader asks the source for the LME of this
   mirror partition (DescribeMirrors on the source). -1, or a source without the API,
   means the source knows nothing of this log: truncate everything and copy from offset 0.
   Otherwise every local record of an epoch > LME is one the source never had from us:
   truncate at the start offset of the first local epoch greater than the LME. After this,
   epoch histories agree up to the LME.
2. Divergence within the last epoch is left to the fetch protocol (the shared fetch
   engine: diverging epoch / OffsetsForLeaderEpoch, truncate to min(source end offset of
   the epoch, local end offset of the epoch)).

The partition moves PREPARING -> MIRRORING only when every ISR member (every replica when
`mirror.support.unclean.leader.election=true`) has truncated, and at least
min.insync.replicas replicas are in the ISR ("If less than min ISR are available, we will
skip and retry").
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from kmirror.kip1279.membership import MIRROR_NAME_CONFIG
from kmirror.log.epoch_cache import EpochCache
from kmirror.metadata.image import MetadataImage
from kmirror.replication.log_port import PartitionLog
from kmirror.replication.partition import Partition
from kmirror.types import TopicPartition

NO_LAST_MIRRORED_EPOCH = -1


@dataclass(frozen=True, slots=True)
class TruncateFully:
    """Delete the whole log and restart it empty at `start_offset` (copy from scratch)."""

    start_offset: int = 0


@dataclass(frozen=True, slots=True)
class TruncateTo:
    """Remove every record at or above `offset` (no-op when `offset` >= log end offset)."""

    offset: int


LmeTruncation = TruncateFully | TruncateTo


def lme_truncation(last_mirrored_epoch: int | None, epoch_cache: EpochCache, log_end_offset: int) -> LmeTruncation:
    """Where PREPARING truncates the local log.

    `last_mirrored_epoch` is the source's answer, None when the source does not support the
    request (UNSUPPORTED_VERSION: a source older than the KIP). KIP examples:
    A) first mirroring, the source answers -1: truncate fully, replicate from scratch;
    B) the source answers LME=1 while the local log has epochs 0, 1, 2: truncate at the
       start of epoch 2, keeping epochs 0 and 1 for the fetch protocol to verify.
    """
    if last_mirrored_epoch is None or last_mirrored_epoch < 0:
        return TruncateFully(0)
    for entry in epoch_cache.entries:
        if entry.epoch > last_mirrored_epoch:
            return TruncateTo(min(entry.start_offset, log_end_offset))
    return TruncateTo(log_end_offset)


def last_mirrored_epoch_of(epoch_cache: EpochCache, log_end_offset: int | None = None) -> int:
    """The LME persisted when mirroring stops: the greatest leader epoch of a record in the
    mirrored log (after truncation to the LSO). While mirroring, every batch carries its
    source epoch and the epoch cache follows the batches, so this is the greatest source
    epoch we hold. With `log_end_offset`, an epoch starting at the log end holds no record
    and is not counted: it is this cluster's own leader epoch (a leader change after the
    topic was removed, or a STOPPING step resumed after the local epoch bump, whose epoch is
    assigned at the log end before MIRROR_PID_RESET is written), never a mirrored one."""
    entries = epoch_cache.entries
    if log_end_offset is not None:
        entries = [e for e in entries if e.start_offset < log_end_offset]
    return entries[-1].epoch if entries else NO_LAST_MIRRORED_EPOCH


# ---- PREPARING -> MIRRORING ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaTruncation:
    """What the mirror leader knows of a follower since it truncated its own log:
    `fetched_since_truncation` when the follower sent a Fetch the leader accepted (no
    diverging epoch) after the leader's truncation, `log_end_offset` its offset then."""

    log_end_offset: int
    fetched_since_truncation: bool


@dataclass(frozen=True, slots=True)
class TruncationProgress:
    complete: bool
    pending_replicas: frozenset[int]
    """Replicas that still have to truncate."""
    below_min_isr: bool


def truncation_progress(
    *,
    leader_id: int,
    truncation_offset: int,
    replicas: Collection[int],
    isr: Collection[int],
    min_insync_replicas: int,
    followers: Mapping[int, ReplicaTruncation],
    support_unclean_leader_election: bool,
) -> TruncationProgress:
    """Whether PREPARING may complete. The leader has truncated (to `truncation_offset`,
    its log end while PREPARING, no fetcher runs). A follower has truncated once it fetched
    at exactly that offset after the truncation: it holds the leader's log prefix and
    nothing beyond. Followers not in the required set are ignored; a required follower
    the leader never heard from is pending."""
    required = set(replicas if support_unclean_leader_election else isr) - {leader_id}
    pending = frozenset(
        r for r in required
        if (p := followers.get(r)) is None or not p.fetched_since_truncation or p.log_end_offset != truncation_offset
    )
    below = len(set(isr)) < min_insync_replicas
    if support_unclean_leader_election and set(replicas) - set(isr):
        # Every replica must join the ISR and truncate (KIP "Unclean Leader Election").
        pending = pending | frozenset(set(replicas) - set(isr) - {leader_id})
    return TruncationProgress(not pending and not below, pending, below)


# ---- MirrorLeaderEpoch (destination-internal replication) ---------------------------------


def mirror_leader_epoch_for_response(is_mirror_partition: bool, leader_log_latest_epoch: int | None) -> int:
    """FetchResponse.MirrorLeaderEpoch from a destination leader: the latest leader epoch in
    its log (the source's epochs) for a mirror partition, -1 otherwise."""
    if not is_mirror_partition or leader_log_latest_epoch is None:
        return -1
    return leader_log_latest_epoch


class HostedPartitions(Protocol):
    """What the MirrorLeaderEpoch rule reads of the leader's `ReplicaManager`."""

    @property
    def image(self) -> MetadataImage | None: ...

    def get_partition(self, tp: TopicPartition) -> Partition[PartitionLog] | None: ...


def leader_mirror_leader_epoch(replica_manager: HostedPartitions, tp: TopicPartition) -> int:
    """FetchResponse.MirrorLeaderEpoch of `tp` on this leader: a partition of a topic with
    `mirror.name` (mirroring, paused or removed: its log holds source epochs) answers the
    latest epoch of its log, any other -1."""
    image = replica_manager.image
    is_mirror = image is not None and tp.topic in image.topics and MIRROR_NAME_CONFIG in image.topic_config(tp.topic)
    partition = replica_manager.get_partition(tp) if is_mirror else None
    return mirror_leader_epoch_for_response(partition is not None, None if partition is None else partition.log.latest_epoch)


def mirror_leader_epoch_for_request(known_mirror_leader_epoch: int) -> int:
    """FetchRequest.MirrorLeaderEpoch from a destination follower: the latest mirror leader
    epoch it learned from the leader's responses (-1 before any). CurrentLeaderEpoch stays
    the local leader epoch, used by the leader for fencing only."""
    return known_mirror_leader_epoch if known_mirror_leader_epoch >= 0 else -1


def max_batch_epoch(current_leader_epoch: int, mirror_leader_epoch: int) -> int:
    """The greatest partition leader epoch a fetcher may append from a response (KAFKA-18723:
    a late response must not append batches from a newer epoch than the request knew).
    Batches of a mirror partition carry source epochs, unrelated to the local leader epoch,
    so the bound is MirrorLeaderEpoch when the response carries one (>= 0), else the
    request's CurrentLeaderEpoch."""
    return mirror_leader_epoch if mirror_leader_epoch >= 0 else current_leader_epoch


def accepts_batch(batch_partition_leader_epoch: int, bound: int) -> bool:
    return bound < 0 or batch_partition_leader_epoch <= bound
