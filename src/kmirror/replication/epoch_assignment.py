"""Whether a new leader assigns its epoch's start offset (Kafka `Partition.makeLeader` ->
`maybeAssignEpochStartOffset`), the KIP-1279 case where it must not, and how its followers
still truncate to that start."""

from __future__ import annotations

from kmirror.replication.log_port import PartitionLog
from kmirror.replication.outcomes import EpochEndOffset


def below_log_epochs(log: PartitionLog, leader_epoch: int) -> bool:
    """The log holds records of a greater epoch than this leader's: a mirror topic just
    removed, whose mirrored records carry the source's epochs, until BumpLeaderEpochs raises
    the local epoch above them (KIP-1279 failover). Assigning this epoch would cut the
    mirrored epochs from the cache; the bumped epoch is assigned instead."""
    latest = log.latest_epoch
    return latest is not None and latest > leader_epoch


def beyond_leader_start(fetch_offset: int, last_fetched_epoch: int, leader_start: int | None) -> EpochEndOffset | None:
    """The diverging epoch a leader whose epoch is not in its cache answers a follower's first
    fetch above `leader_start` (its log end offset when it became leader), None once the
    follower fetches at or below it.

    Kafka's follower finds what it holds beyond its new leader's log by epochs: the leader's
    cache ends the follower's epoch where the new epoch starts. A mirror topic's log keeps the
    source's epochs, so a follower's tail from an earlier destination leader shows the same
    epochs as the new leader's log, yet may differ from it: the source compacted those
    offsets away before the new leader fetched them, and the new leader fetched past them.
    Truncating every follower to the new leader's start keeps each replica a prefix of the
    leader's log, as the epoch would have; the follower fetches what it cut again. The answer
    names the follower's last fetched epoch (-1 without one), so the follower truncates to the
    lesser of the leader's start and its own end of that epoch (Kafka's
    `getOffsetTruncationState`)."""
    if leader_start is None or fetch_offset <= leader_start:
        return None
    return EpochEndOffset(last_fetched_epoch if last_fetched_epoch >= 0 else -1, leader_start)
