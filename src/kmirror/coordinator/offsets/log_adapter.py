"""`CoordinatorLog` on the node's ReplicaManager: a coordinator's records go through the
internal append path of its topic (`__consumer_offsets` for groups, `__mirror_state` for
the MirrorCoordinator; Kafka `CoordinatorPartitionWriter`) and are read back from the
partition's local log when it is loaded."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import iter_batches
from kmirror.records.builder import build_batch
from kmirror.records.record import decode_records
from kmirror.replication.outcomes import PartitionError
from kmirror.types import TopicPartition

READ_CHUNK_BYTES = 1 << 20


class CoordinatorAppendError(Exception):
    """An append to a coordinator topic failed with this Kafka error."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(f"{code.name}: {message or ''}")
        self.code = code


class ReplicaManagerCoordinatorLog:
    def __init__(self, replica_manager: Any, topic: str = "__consumer_offsets") -> None:
        self.replica_manager = replica_manager
        self.topic = topic

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> int:
        now_ms = self.replica_manager.clock.now_ms()
        batch = build_batch([(key, value, (), -1) for key, value in records], now_ms=now_ms)
        result = self.replica_manager.append_to_local_log(TopicPartition(self.topic, partition), batch)
        if isinstance(result, PartitionError):
            raise CoordinatorAppendError(result.code, result.message)
        return int(result.last_offset)

    def read_all(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        """Records from log start to log end; control batches and keyless records skipped."""
        part = self.replica_manager.get_partition(TopicPartition(self.topic, partition))
        if part is None:
            return
        log = part.log
        offset = log.log_start_offset
        end = log.log_end_offset
        while offset < end:
            info = log.read(offset, READ_CHUNK_BYTES, None, True)
            data = getattr(info, "records", b"")
            if not data:
                return
            advanced = False
            for pos, header in iter_batches(data, allow_truncated_tail=True):
                if header.next_offset <= offset:
                    continue
                if not header.is_control:
                    for record in decode_records(data, pos):
                        if record.offset >= offset and record.key is not None:
                            yield record.key, record.value
                offset = header.next_offset
                advanced = True
            if not advanced:
                return
