"""Moving a partition's log to another of the node's log dirs (AlterReplicaLogDirs, KIP-113),
as Kafka's future replicas move: a future log in the destination follows the current log as a
follower follows its leader, batch for batch with the same offsets, epochs and bytes
(`copy_step`), and takes its place once it ends where the current log ends
(`LogManager.replace_with_future`). Both steps run on the node's event loop, so nothing is
appended to the current log between the last copy and the replacement.

Following, like a follower's fetch: a current log truncated below the future log's end (a
new leader's divergence, an unclean election) truncates the future log where their leader
epochs part; a log start that moved past the future log's end (retention, DeleteRecords)
starts the future log again there. The copy reads at most `step_bytes` per step.
"""

from __future__ import annotations

from dataclasses import dataclass

from kmirror.config.definitions import LONG_MAX
from kmirror.log.log import Log
from kmirror.log.outcomes import AppendError, OffsetOutOfRange

COPY_STEP_BYTES = 1 << 20
FLUSH_BYTES = 4 << 20
"""A future log is flushed each time this much was copied into it (`FutureLog.copied`)."""
QUOTA_WINDOW_S = 1.0
"""The copy quota counts the bytes copied over windows of this length."""


class FutureLogError(RuntimeError):
    """The future log refused a batch of the current one."""


@dataclass(slots=True)
class FutureLog:
    """A move under way: the future log in the destination log dir."""

    log_dir: str
    log: Log
    unflushed: int = 0
    """Bytes copied since the future log was last flushed."""

    def copied(self, size: int) -> None:
        """`size` bytes were copied into the future log: it is flushed each `FLUSH_BYTES`, so
        that the flush of its replacement (one step of the node's loop) has little left to
        write, a few ms rather than the seconds a whole log's fsync can take."""
        self.unflushed += size
        if self.unflushed >= FLUSH_BYTES:
            self.log.flush()
            self.unflushed = 0


def offset_lag(current: Log, future: Log) -> int:
    """How far the future log is behind the current one (DescribeLogDirs' offset lag)."""
    return max(current.log_end_offset - future.log_end_offset, 0)


def _truncate_diverged(current: Log, future: Log) -> None:
    """Cut the future log where it leaves the current one (Kafka's follower truncation by
    leader epoch, with the current log as the leader)."""
    if future.log_end_offset > current.log_end_offset:
        future.truncate_to(max(current.log_end_offset, future.log_start_offset))
    epoch = future.latest_epoch
    if epoch is None or future.log_end_offset == future.log_start_offset:
        return
    found = current.end_offset_for_epoch(epoch)
    if found is None:
        future.truncate_fully_and_start_at(current.log_start_offset)
        return
    end = found[1] if found[0] == epoch else min(found[1], future.log_end_offset)
    if found[0] != epoch or end < future.log_end_offset:
        future.truncate_to(max(end, future.log_start_offset))


def copy_step(current: Log, future: Log, step_bytes: int = COPY_STEP_BYTES) -> bool:
    """Append the current log's next batches to the future log; True when the future log ends
    where the current one ends (nothing to copy)."""
    _truncate_diverged(current, future)
    if future.log_end_offset < current.log_start_offset:
        future.truncate_fully_and_start_at(current.log_start_offset)
    if future.log_end_offset == current.log_end_offset:
        return True
    read = current.read(future.log_end_offset, step_bytes)
    if isinstance(read, OffsetOutOfRange):  # the log start moved meanwhile
        future.truncate_fully_and_start_at(current.log_start_offset)
        return False
    records = read.records
    if not records:
        return future.log_end_offset == current.log_end_offset
    base = int.from_bytes(records[:8], "big", signed=True)  # every magic starts with its base offset
    if base < future.log_end_offset:  # the batch holding the log start, DeleteRecords'
        if base <= future.log_start_offset:
            future.truncate_fully_and_start_at(base)
        else:
            future.truncate_to(base)
    appended = future.append_as_follower(records)
    if isinstance(appended, AppendError):
        raise FutureLogError(f"{future.topic_partition}: {appended.message}")
    return future.log_end_offset == current.log_end_offset


@dataclass(slots=True)
class CopyQuota:
    """`replica.alter.log.dirs.io.max.bytes.per.second` over all of a broker's moves (Kafka's
    ReplicaAlterLogDirs quota): how long to pause after a step so that the bytes copied in the
    current window stay within the rate. No rate (LONG_MAX) pauses nothing."""

    window_start: float = 0.0
    copied: int = 0

    def pause_s(self, now: float, copied: int, rate: int) -> float:
        if now - self.window_start > QUOTA_WINDOW_S:
            self.window_start, self.copied = now, 0
        self.copied += copied
        if rate >= LONG_MAX:
            return 0.0
        return max(self.copied / rate - (now - self.window_start), 0.0)
