"""Loading a partition directory into a `Log` (Kafka `LogLoader`) and producer snapshots.

Recovery: a cleaner swap interrupted by a crash is completed (`cleaner.swap_recovery`),
then stray files are removed (`*.tmp`, `*.deleted`, `*.cleaned`, `*.swap`, indexes
without a `.log`); segments before the recovery point are trusted unless an index fails its
sanity check (then it is rebuilt); the segment containing the recovery point and every later
one are rescanned: batch CRCs checked, indexes rebuilt (the transaction index from the
producer state replayed over the whole log), the first torn or corrupt batch and
everything after it (including later segments) truncated away. The epoch cache is read
from `leader-epoch-checkpoint`, extended with the epochs of recovered batches and cut to
[log start, LEO).

Producer snapshots: on clean close the producer state is written to `<LEO>.snapshot`
(20-digit offset like Kafka's name; kmirror's own content: a version line `kmirror-1` then
one JSON object per producer). A snapshot is used only when its offset equals the LEO
after recovery; otherwise the state is rebuilt by scanning batch headers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from kmirror.log.checkpoint import LeaderEpochCheckpoint, write_atomically
from kmirror.log.cleaner.swap_recovery import complete_swaps
from kmirror.log.epoch_cache import EpochCache
from kmirror.log.fs import join
from kmirror.log.producer_state import (
    BatchMetadata,
    ProducerState,
    ProducerStateEntry,
    control_type_for_state,
    marker_coordinator_epoch,
)
from kmirror.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    filename_prefix,
)

if TYPE_CHECKING:
    from kmirror.log.log import Log
    from kmirror.records.batch import BatchHeader

_logger = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_VERSION = "kmirror-1"
_STRAY_SUFFIXES = (".tmp", ".deleted", ".cleaned", ".swap")


class InconsistentTopicIdError(Exception):
    """partition.metadata names another topic id (Kafka InconsistentTopicIdException)."""


def new_segment(log: Log, base_offset: int) -> LogSegment:
    return LogSegment(log.fs, log.directory, base_offset,
                      index_interval_bytes=log.config.index_interval_bytes,
                      max_index_size=log.config.segment_index_bytes,
                      created_ms=log.clock.now_ms())


def _base_of(name: str, suffix: str) -> int | None:
    stem = name[:-len(suffix)]
    return int(stem) if name.endswith(suffix) and stem.isdigit() else None


def load(log: Log, *, recovery_point: int, log_start_offset: int) -> None:
    fs, directory = log.fs, log.directory
    new_dir = not fs.exists(directory)
    fs.mkdirs(directory, durable=False)  # durable at `PartitionMetadataFile.maybe_flush`
    _check_topic_id(log, new_dir)
    if new_dir:  # nothing to recover, no file to look for: one empty segment
        _start_empty(log, log_start_offset)
        return
    complete_swaps(fs, directory)  # a cleaner swap a crash interrupted
    names = fs.listdir(directory)
    bases = sorted(b for b in (_base_of(n, LOG_SUFFIX) for n in names) if b is not None)
    for name in names:
        orphan = any(base is not None and base not in bases
                     for base in (_base_of(name, suffix) for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX,
                                                                        TXN_INDEX_SUFFIX)))
        if name.endswith(_STRAY_SUFFIXES) or orphan:
            fs.delete(join(directory, name))

    read_back = LeaderEpochCheckpoint(fs, directory).read_or_none()
    # A torn checkpoint (written unsynced, then a crash): every segment's epochs are re-read.
    cache = EpochCache() if read_back is None else read_back
    original_cache = None if read_back is None else cache.entries
    segments: list[LogSegment] = []
    recovered: set[int] = set()
    for i, base in enumerate(bases):
        segment = new_segment(log, base)
        trusted = segment.load()
        next_base = bases[i + 1] if i + 1 < len(bases) else None
        unflushed = next_base is None or next_base > recovery_point
        if trusted and not unflushed:
            if read_back is None:
                _assign_epochs(cache, (header for _, header in segment.batches()))
            segments.append(segment)
            continue
        headers, truncated = segment.recover()
        if truncated:
            _logger.warning("Found invalid batches in log segment %s: %d bytes truncated, the log ends at offset "
                            "%d (a write cut short by a crash or a failed disk)", segment.log_path, truncated,
                            segment.next_offset())
        recovered.add(base)
        _assign_epochs(cache, headers)
        segments.append(segment)
        if truncated:
            for later in bases[i + 1:]:
                new_segment(log, later).delete()
            break

    start = log_start_offset
    if not segments:
        segment = new_segment(log, start)
        segment.create()
        segments.append(segment)
    log.segments = segments
    log._log_end_offset = segments[-1].next_offset()
    log._log_start_offset = max(start, segments[0].base_offset)
    log.recovery_point = min(recovery_point, log._log_end_offset)
    cache.truncate_from_end(log._log_end_offset)
    cache.truncate_from_start(log._log_start_offset)
    log.epoch_cache = cache
    if log._log_start_offset > log._log_end_offset:
        log.truncate_fully_and_start_at(log._log_start_offset)
    elif cache.entries != original_cache:
        LeaderEpochCheckpoint(fs, directory).write(cache)
    if recovered & {s.base_offset for s in log.segments} or not _load_producer_snapshot(log):
        rebuild_producer_state(log, rebuild_txn_indexes=recovered)
    _delete_snapshots(log)


def _start_empty(log: Log, start: int) -> None:
    segment = new_segment(log, start)
    segment.create()
    log.segments = [segment]
    log._log_start_offset = log._log_end_offset = log.recovery_point = start


def _assign_epochs(cache: EpochCache, headers: Iterable[BatchHeader]) -> None:
    for header in headers:
        # Kafka LogSegment.recover: only epochs above the cached latest are added.
        latest = cache.latest_epoch
        if header.partition_leader_epoch >= 0 and (latest is None or header.partition_leader_epoch > latest):
            cache.assign(header.partition_leader_epoch, header.base_offset)


def _check_topic_id(log: Log, new_dir: bool) -> None:
    metadata = log.partition_metadata
    stored = None if new_dir else metadata.read()
    if stored is None:
        if log.topic_id is not None or new_dir:
            metadata.write_unsynced(log.topic_id, new_dir)
    elif log.topic_id is None:
        log.topic_id = stored
    elif stored != log.topic_id:
        raise InconsistentTopicIdError(
            f"{log.directory}: topic id {log.topic_id} does not match {stored} in partition.metadata")


def rebuild_producer_state(log: Log, rebuild_txn_indexes: set[int] | frozenset[int] = frozenset()) -> None:
    """Rebuild idempotence/transaction state from every batch header in the log; the
    transaction index of each segment whose base offset is in `rebuild_txn_indexes` (the
    recovered ones, emptied by `LogSegment.recover`) is refilled on the way, with the
    producer state as it was at each marker (Kafka `LogSegment.recover`)."""
    state = ProducerState()
    for segment in log.segments:
        rebuild = segment.base_offset in rebuild_txn_indexes
        for pos, header in segment.batches(0):
            control_type = coordinator_epoch = None
            if header.is_control:  # end-transaction markers and MIRROR_PID_RESET replay too
                batch = log.fs.read(segment.log_path, pos, header.size)
                control_type = control_type_for_state(batch, 0, header)
                coordinator_epoch = marker_coordinator_epoch(batch, 0, header)
            completed = state.update(header, control_type=control_type, coordinator_epoch=coordinator_epoch)
            if rebuild and completed is not None:
                segment.update_txn_index(completed, state.last_stable_offset_after(completed))
    state.verification_states = log.producer_state.verification_states  # in memory, not of the log
    log.producer_state = state


def write_producer_snapshot(log: Log) -> None:
    lines = [_SNAPSHOT_VERSION]
    for entry in log.producer_state.producers.values():
        lines.append(json.dumps({
            "producer_id": entry.producer_id, "producer_epoch": entry.producer_epoch,
            "current_txn_first_offset": entry.current_txn_first_offset,
            "last_timestamp": entry.last_timestamp, "last_offset": entry.last_offset,
            "batches": [[b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp]
                        for b in entry.batches],
        }, separators=(",", ":")))
    path = join(log.directory, filename_prefix(log.log_end_offset) + SNAPSHOT_SUFFIX)
    write_atomically(log.fs, path, ("\n".join(lines) + "\n").encode())


def _load_producer_snapshot(log: Log) -> bool:
    path = join(log.directory, filename_prefix(log.log_end_offset) + SNAPSHOT_SUFFIX)
    if not log.fs.exists(path):
        return False
    try:
        lines = log.fs.read(path, 0, log.fs.size(path)).decode().splitlines()
        if not lines or lines[0] != _SNAPSHOT_VERSION:
            return False
        state = ProducerState()
        for line in lines[1:]:
            raw = json.loads(line)
            state.producers[raw["producer_id"]] = ProducerStateEntry(
                raw["producer_id"], raw["producer_epoch"],
                [BatchMetadata(*b) for b in raw["batches"]],
                raw["current_txn_first_offset"], raw["last_timestamp"], raw.get("last_offset", -1))
    except (ValueError, KeyError, TypeError):
        return False
    log.producer_state = state
    return True


def _delete_snapshots(log: Log) -> None:
    for name in log.fs.listdir(log.directory):
        if _base_of(name, SNAPSHOT_SUFFIX) is not None:
            log.fs.delete(join(log.directory, name))
