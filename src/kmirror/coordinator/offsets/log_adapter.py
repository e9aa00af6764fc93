"""`CoordinatorLog` on the node's ReplicaManager: a coordinator's records go through the
internal append path of its topic (`__consumer_offsets` for groups, `__mirror_state` for
the MirrorCoordinator; Kafka `CoordinatorPartitionWriter`) and are read back from the
partition's local log when it is loaded. A transactional batch (TxnOffsetCommit) is verified
with the transaction coordinator first and appended under its verification guard (KIP-890
part 1, `maybe_start_transaction_verification`)."""

from __future__ import annotations

from collections.abc import Iterator

from kmirror.coordinator.offsets import replay
from kmirror.coordinator.transaction.verification import TransactionVerifier, verify_transaction
from kmirror.log.producer_state import VerificationGuard
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import NO_SEQUENCE, iter_batches
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, build_end_txn_marker, read_control_type
from kmirror.records.record import decode_records
from kmirror.replication.outcomes import PartitionError
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.types import TopicPartition

READ_CHUNK_BYTES = 1 << 20


class CoordinatorAppendError(Exception):
    """An append to a coordinator topic failed with this Kafka error."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(f"{code.name}: {message or ''}")
        self.code = code


class ReplicaManagerCoordinatorLog:
    """`verifier`: the transaction coordinator, which KIP-890 part 1 verification asks about a
    transactional batch before it is appended (None: nothing is verified)."""

    def __init__(self, replica_manager: ReplicaManager, topic: str = "__consumer_offsets",
                 verifier: TransactionVerifier | None = None) -> None:
        self.replica_manager = replica_manager
        self.topic = topic
        self._verifier = verifier
        self._open: dict[int, dict[int, list[tuple[bytes, bytes | None]]]] = {}

    async def maybe_start_transaction_verification(self, partition: int, *, transactional_id: str,
                                                   producer_id: int,
                                                   producer_epoch: int) -> VerificationGuard | ErrorCode | None:
        """The batch a coordinator writes has no sequence (Kafka's NO_SEQUENCE)."""
        if self._verifier is None:
            return None
        tp = TopicPartition(self.topic, partition)
        verification = await verify_transaction(self.replica_manager, self._verifier,
                                                transactional_id=transactional_id, producer_id=producer_id,
                                                producer_epoch=producer_epoch, sequences={tp: NO_SEQUENCE})
        error = verification.error_for(tp)
        if error is not None:
            return error
        return verification.guards.get(tp, VerificationGuard.SENTINEL)

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
                     producer_epoch: int = -1, verification_guard: VerificationGuard | None = None) -> int:

        now_ms = self.replica_manager.clock.now_ms()
        tp = TopicPartition(self.topic, partition)
        if producer_id >= 0:
            # a transactional batch without a sequence (Kafka's NO_SEQUENCE), written as the
            # coordinator's own: its COMMIT/ABORT marker comes through WriteTxnMarkers, which
            # the runtime writes with `append_end_transaction_marker`
            batch = build_batch([(key, value, (), -1) for key, value in records], now_ms=now_ms,
                                producer_id=producer_id, producer_epoch=producer_epoch, is_transactional=True)
            result = self.replica_manager.append_coordinator_batches(tp, batch, verification_guard)
        else:
            batch = build_batch([(key, value, (), -1) for key, value in records], now_ms=now_ms)
            result = self.replica_manager.append_to_local_log(tp, batch)
        if isinstance(result, PartitionError):
            raise CoordinatorAppendError(result.code, result.message)
        return int(result.last_offset)

    async def append_end_transaction_marker(self, partition: int, *, producer_id: int, producer_epoch: int,
                                            coordinator_epoch: int, committed: bool) -> int:
        """A one-record COMMIT/ABORT control batch, origin COORDINATOR (as WriteTxnMarkers
        writes one on any partition)."""
        tp = TopicPartition(self.topic, partition)
        batch = build_end_txn_marker(committed, producer_id, producer_epoch, self.replica_manager.clock.now_ms(),
                                     coordinator_epoch)
        result = self.replica_manager.append_coordinator_batches(tp, batch)
        if isinstance(result, PartitionError):
            raise CoordinatorAppendError(result.code, result.message)
        return int(result.last_offset)

    def read_all(self, partition: int) -> Iterator[tuple[bytes, bytes | None]]:
        """Records from log start to log end, keyless records skipped. Records of a
        transactional batch are held per producer until its marker: yielded at a COMMIT,
        dropped at an ABORT, kept for `open_transactions` when the log ends first. A tombstone
        outside a transaction removes its key from the transactions open before it (Kafka's
        replay of an offset tombstone), so their COMMIT does not bring the key back."""

        open_txns: dict[int, list[tuple[bytes, bytes | None]]] = {}
        self._open[partition] = open_txns
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
                if header.is_control:
                    if header.is_transactional:
                        held = open_txns.pop(header.producer_id, [])
                        if read_control_type(data, pos) is ControlType.COMMIT:
                            yield from held
                elif header.is_transactional:
                    held = open_txns.setdefault(header.producer_id, [])
                    held.extend((r.key, r.value) for r in decode_records(data, pos)
                                if r.offset >= offset and r.key is not None)
                else:
                    for record in decode_records(data, pos):
                        if record.offset >= offset and record.key is not None:
                            if record.value is None and open_txns:
                                replay.remove_from_open_transactions(open_txns, record.key)
                            yield record.key, record.value
                offset = header.next_offset
                advanced = True
            if not advanced:
                return

    def open_transactions(self, partition: int) -> dict[int, list[tuple[bytes, bytes | None]]]:
        return self._open.pop(partition, {})

