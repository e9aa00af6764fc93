"""What the mirror lifecycle reads and changes in the destination leader's log: the
MIRROR_PID_RESET that ends a detach, an empty log at an offset, the bumped leader epoch's
start. Plain functions over a `Partition` (sans-IO: the log's file system is its port)."""

from __future__ import annotations

from kmirror.log.outcomes import FetchDataInfo
from kmirror.records.batch import CorruptRecordError, read_header
from kmirror.records.control import ControlType, read_control_type
from kmirror.replication.partition import Partition
from kmirror.replication.replica_ports import HostedLog


def pid_reset_offset(p: Partition[HostedLog], last_mirrored_epoch: int) -> int | None:
    """The offset of the MIRROR_PID_RESET the detach steps appended, when it ends the log, or
    None. The last batch is that control record and it opened its leader epoch (the bump
    precedes it); that epoch is the leader's current one, or, after a leader change, above
    the stored LME (persisted before the bump): the new leader runs in a later epoch that
    starts at the log end without a record of its own."""
    log_ = p.log
    last_offset = log_.log_end_offset - 1
    if last_offset < log_.log_start_offset:
        return None
    read = log_.read(last_offset, 1 << 20, None, True)
    records = read.records if isinstance(read, FetchDataInfo) else b""
    if not records:
        return None
    header = read_header(records, 0)
    if header.base_offset != last_offset or not header.is_control:
        return None
    epoch = header.partition_leader_epoch
    if not any(e.epoch == epoch and e.start_offset == last_offset for e in log_.epoch_cache.entries):
        return None
    if epoch != p.leader_epoch and epoch <= last_mirrored_epoch:
        return None
    try:
        is_reset = read_control_type(records, 0) is ControlType.MIRROR_PID_RESET
    except CorruptRecordError:
        return None
    return last_offset if is_reset else None


def empty_at(p: Partition[HostedLog], offset: int) -> bool:
    """The log holds nothing at all and starts at `offset`: no record, no leader epoch, no
    producer (what `truncate_fully_and_start_at(offset)` would leave, without its segment
    swap and checkpoint writes)."""
    log_ = p.log
    return (log_.log_start_offset == log_.log_end_offset == offset and not len(log_.epoch_cache)
            and not log_.active_producers())


def assign_bumped_epoch(p: Partition[HostedLog], min_leader_epoch: int) -> None:
    """A topic still attached to its mirror (its source topic was deleted) keeps the source's
    epochs: becoming leader in the bumped epoch did not start it in the epoch cache, which
    a removed topic's leader does. Start it at the log end, as becoming leader would
    (Kafka `maybeAssignEpochStartOffset`), so MIRROR_PID_RESET opens that epoch."""
    latest = p.log.latest_epoch
    if p.leader_epoch >= min_leader_epoch and (latest is None or latest < p.leader_epoch):
        p.log.assign_epoch_start_offset(p.leader_epoch, p.log.log_end_offset)

