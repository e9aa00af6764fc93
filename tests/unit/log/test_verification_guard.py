"""KIP-890 part 1's verification guard on the real Log and its producer state (Kafka
`VerificationGuard`, `VerificationStateEntry`, `UnifiedLog.maybeStartTransactionVerification`
and `analyzeAndValidateProducerState`)."""

from kmirror.log.append_analysis import AppendOrigin
from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.log.outcomes import AppendError, LogAppendInfo
from kmirror.log.producer_state import (
    PRODUCER_ID_EXPIRATION_MS,
    ProducerState,
    VerificationGuard,
)
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import set_base_offset
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, build_control_batch
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

TP = TopicPartition("t", 0)
NOW = 1_700_000_000_000
PID = 42
SENTINEL = VerificationGuard.SENTINEL


def _log(clock: ManualClock | None = None) -> Log:
    return Log.open(MemoryFileSystem(), "/data/t-0", TP, LogConfig(), clock or ManualClock(NOW))


def _txn(seq: int, n: int = 1, epoch: int = 0, pid: int = PID) -> bytes:
    return build_batch([(None, b"v%d" % (seq + i), (), NOW) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=True)


def _marker(kind: ControlType, epoch: int = 0, pid: int = PID) -> bytes:
    return build_control_batch(kind, pid, epoch, NOW, coordinator_epoch=0)


def _write_marker(log: Log, kind: ControlType, epoch: int = 0) -> None:
    assert isinstance(log.append_as_leader(_marker(kind, epoch), 0, origin=AppendOrigin.COORDINATOR), LogAppendInfo)


def _start(log: Log, seq: int = 0, epoch: int = 0) -> VerificationGuard:
    guard = log.maybe_start_transaction_verification(PID, seq, epoch)
    assert isinstance(guard, VerificationGuard)
    return guard


def _refused(result: object, code: ErrorCode) -> bool:
    return isinstance(result, AppendError) and result.error_code == code


def test_a_guard_verifies_only_itself_and_the_sentinel_verifies_nothing() -> None:
    a, b = VerificationGuard(), VerificationGuard()
    assert a.verifies(a) and not a.verifies(b) and not b.verifies(a)
    assert not a.verifies(SENTINEL) and not SENTINEL.verifies(SENTINEL)
    assert a != SENTINEL and SENTINEL == VerificationGuard.SENTINEL


def test_verified_append_succeeds_and_ends_the_verification() -> None:
    log = _log()
    guard = _start(log)
    assert guard is not SENTINEL and log.producer_state.verification_guard(PID) == guard
    info = log.append_as_leader(_txn(0), 0, verification_guard=guard)
    assert isinstance(info, LogAppendInfo) and info.first_offset == 0
    # Kafka `updateProducers`: the transaction has a first offset now, the entry is gone
    assert log.producer_state.verification_state_entry(PID) is None
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 0  # the transaction is open


def test_abort_marker_between_verification_and_append_refuses_the_batch_and_lso_is_not_held() -> None:
    """The race the guard closes: the coordinator said yes, then aborted, and its ABORT marker
    reached the partition before the verified batch was appended."""
    log = _log()
    guard = _start(log)
    _write_marker(log, ControlType.ABORT)  # the marker ends the verification
    assert log.producer_state.verification_state_entry(PID) is None
    late = log.append_as_leader(_txn(0), 0, verification_guard=guard)
    assert _refused(late, ErrorCode.invalid_txn_state)
    log.update_high_watermark(log.log_end_offset)
    assert log.log_end_offset == 1 and log.last_stable_offset == log.high_watermark == 1
    assert log.producer_state.first_unstable_offset is None
    # Without the guard (the broker before it, or verification disabled) the same batch
    # opens a transaction after its own ABORT marker, and no marker will ever close it.
    unguarded = _log()
    _write_marker(unguarded, ControlType.ABORT)
    assert isinstance(unguarded.append_as_leader(_txn(0), 0), LogAppendInfo)
    unguarded.update_high_watermark(unguarded.log_end_offset)
    assert unguarded.last_stable_offset == 1 < unguarded.high_watermark == 2


def test_a_commit_marker_ends_the_verification_too() -> None:
    log = _log()
    assert isinstance(log.append_as_leader(_txn(0), 0, verification_guard=_start(log)), LogAppendInfo)
    guard = _start(log, seq=1)  # a second transaction is verified...
    assert guard is SENTINEL  # ...no: the first one is still open here
    _write_marker(log, ControlType.COMMIT)
    guard = _start(log, seq=1)
    _write_marker(log, ControlType.COMMIT)  # a marker lands while it is being verified
    assert _refused(log.append_as_leader(_txn(1), 0, verification_guard=guard), ErrorCode.invalid_txn_state)
    fresh = _start(log, seq=1)  # the producer retries: a new verification, a new guard
    assert fresh != guard
    assert isinstance(log.append_as_leader(_txn(1), 0, verification_guard=fresh), LogAppendInfo)


def test_a_second_verification_of_the_producer_reuses_its_guard_and_a_higher_epoch_updates_the_entry() -> None:
    log = _log()
    first = _start(log, seq=3, epoch=0)
    assert _start(log, seq=3, epoch=0) is first  # Kafka: computeIfAbsent, the entry is reused
    entry = log.producer_state.verification_state_entry(PID)
    assert entry is not None and (entry.lowest_sequence, entry.epoch) == (3, 0)
    _start(log, seq=1, epoch=0)  # a lower sequence of the same epoch lowers the bar
    assert (entry.lowest_sequence, entry.epoch) == (1, 0)
    assert _start(log, seq=0, epoch=2) is first  # a higher epoch replaces epoch and sequence, same guard
    assert (entry.lowest_sequence, entry.epoch) == (0, 2)
    _start(log, seq=0, epoch=1)  # a lower epoch is ignored
    assert (entry.lowest_sequence, entry.epoch) == (0, 2)
    # the guard handed to the earlier requests is the producer's, whichever answer comes first
    assert isinstance(log.append_as_leader(_txn(0, epoch=2), 0, verification_guard=first), LogAppendInfo)


def test_an_epoch_older_than_the_producers_is_refused_before_verifying() -> None:
    log = _log()
    assert isinstance(log.append_as_leader(_txn(0, epoch=3), 0, verification_guard=_start(log, epoch=3)),
                      LogAppendInfo)
    _write_marker(log, ControlType.ABORT, epoch=3)
    stale = log.maybe_start_transaction_verification(PID, 1, 2)
    assert _refused(stale, ErrorCode.invalid_producer_epoch)
    guard = _start(log, seq=1, epoch=3)  # a zombie of epoch 2 cannot use the current one's guard
    assert _refused(log.append_as_leader(_txn(1, epoch=2), 0, verification_guard=guard),
                    ErrorCode.invalid_producer_epoch)


def test_batches_of_an_open_transaction_need_no_guard() -> None:
    log = _log()
    assert isinstance(log.append_as_leader(_txn(0), 0, verification_guard=_start(log)), LogAppendInfo)
    assert log.maybe_start_transaction_verification(PID, 1, 0) is SENTINEL
    assert log.producer_state.verification_state_entry(PID) is None
    for seq in (1, 2):
        assert isinstance(log.append_as_leader(_txn(seq), 0, verification_guard=SENTINEL), LogAppendInfo)
    # a new epoch is a new transaction: it needs a verification of its own
    assert _refused(log.append_as_leader(_txn(0, epoch=1), 0, verification_guard=SENTINEL),
                    ErrorCode.invalid_txn_state)


def test_without_a_guard_a_transaction_cannot_start_but_other_writes_are_unaffected() -> None:
    log = _log()
    assert _refused(log.append_as_leader(_txn(0), 0, verification_guard=SENTINEL), ErrorCode.invalid_txn_state)
    idempotent = build_batch([(None, b"i", (), NOW)], producer_id=7, producer_epoch=0, base_sequence=0)
    plain = build_batch([(None, b"p", (), NOW)])
    for batch in (idempotent, plain):
        assert isinstance(log.append_as_leader(batch, 0, verification_guard=SENTINEL), LogAppendInfo)
    # verification_guard=None: the caller does not verify (coordinator writes, tests, Kafka's
    # transaction.partition.verification.enable=false)
    assert isinstance(log.append_as_leader(_txn(0), 0), LogAppendInfo)


def test_a_batch_above_the_lowest_sequence_being_verified_waits_for_the_lower_one() -> None:
    """Kafka `VerificationStateEntry.lowestSequence`: two requests of a new producer are
    verified at once and the later one's answer comes first; it must not be written before
    the earlier one, whose sequence would then be out of order for good."""
    log = _log()
    guard = _start(log, seq=0)
    assert _start(log, seq=1) is guard
    early = log.append_as_leader(_txn(1), 0, verification_guard=guard)
    assert _refused(early, ErrorCode.out_of_order_sequence_number)
    assert isinstance(log.append_as_leader(_txn(0), 0, verification_guard=guard), LogAppendInfo)
    assert isinstance(log.append_as_leader(_txn(1), 0, verification_guard=guard), LogAppendInfo)  # now open
    assert log.log_end_offset == 2


def test_a_verification_entry_expires_and_its_guard_with_it() -> None:
    clock = ManualClock(NOW)
    log = _log(clock)
    guard = _start(log)
    clock.advance(PRODUCER_ID_EXPIRATION_MS - 1)
    log.remove_expired_producers()
    assert log.producer_state.verification_state_entry(PID) is not None
    clock.advance(1)
    log.remove_expired_producers()
    assert log.producer_state.verification_state_entry(PID) is None
    assert _refused(log.append_as_leader(_txn(0), 0, verification_guard=guard), ErrorCode.invalid_txn_state)


def test_a_replicated_marker_ends_the_verification_and_truncation_keeps_it() -> None:
    log = _log()
    _start(log)
    log.truncate_fully_and_start_at(5)  # verification state is memory, not part of the log
    assert log.producer_state.verification_state_entry(PID) is not None
    follower_marker = bytearray(_marker(ControlType.ABORT))
    set_base_offset(follower_marker, 0, 5)  # as its leader assigned it
    assert isinstance(log.append_as_follower(bytes(follower_marker)), LogAppendInfo)
    assert log.producer_state.verification_state_entry(PID) is None


def test_a_failed_append_leaves_the_verification_in_place() -> None:
    log = _log()
    guard = _start(log, seq=0)
    assert _refused(log.append_as_leader(_txn(4), 0, verification_guard=guard),
                    ErrorCode.out_of_order_sequence_number)
    assert log.producer_state.verification_guard(PID) == guard
    assert isinstance(log.append_as_leader(_txn(0), 0, verification_guard=guard), LogAppendInfo)


def test_producer_state_equality_ignores_verifications() -> None:
    a, b = ProducerState(), ProducerState()
    a.maybe_create_verification_state_entry(PID, 0, 0, NOW)
    assert a == b
