"""Whether a new leader assigns its epoch's start offset (Kafka `Partition.makeLeader` ->
`maybeAssignEpochStartOffset`), and the KIP-1279 case where it must not."""

from __future__ import annotations

from kmirror.replication.log_port import PartitionLog


def below_log_epochs(log: PartitionLog, leader_epoch: int) -> bool:
    """The log holds records of a greater epoch than this leader's: a mirror topic just
    removed, whose mirrored records carry the source's epochs, until BumpLeaderEpochs raises
    the local epoch above them (KIP-1279 failover). Assigning this epoch would cut the
    mirrored epochs from the cache; the bumped epoch is assigned instead."""
    latest = log.latest_epoch
    return latest is not None and latest > leader_epoch
