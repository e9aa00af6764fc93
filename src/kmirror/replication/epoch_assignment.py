"""Assigning a leader epoch's start offset when this node becomes leader (Kafka
`Partition.makeLeader` -> `maybeAssignEpochStartOffset`), and the KIP-1279 case where it must not."""

from __future__ import annotations

from kmirror.log.checkpoint import LeaderEpochCheckpoint


def below_log_epochs(log: object, leader_epoch: int) -> bool:
    """The log holds records of a greater epoch than this leader's: a mirror topic just
    removed, whose mirrored records carry the source's epochs, until BumpLeaderEpochs raises
    the local epoch above them (KIP-1279 failover). Assigning this epoch would cut the
    mirrored epochs from the cache; the bumped epoch is assigned instead."""
    latest = getattr(log, "latest_epoch", None)
    return latest is not None and latest > leader_epoch


def assign_epoch_start_offset(log: object, leader_epoch: int, start_offset: int) -> None:
    """Record that `leader_epoch` starts at `start_offset` and persist `leader-epoch-checkpoint`
    (Kafka `maybeAssignEpochStartOffset` on becoming leader)."""
    assign = getattr(log, "assign_epoch_start_offset", None)
    if assign is not None:
        assign(leader_epoch, start_offset)
        return
    cache = getattr(log, "epoch_cache", None)
    if cache is not None and cache.assign(leader_epoch, start_offset) and hasattr(log, "fs") and hasattr(log, "directory"):
        LeaderEpochCheckpoint(log.fs, log.directory).write(cache)
