from kmirror.log.outcomes import AppendError
from kmirror.log.producer_state import PRODUCER_ID_EXPIRATION_MS, BatchMetadata, ProducerState
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import read_header
from kmirror.records.builder import build_batch

INT32_MAX = 2**31 - 1


def _header(base_offset=0, n=1, pid=1, epoch=0, seq=0, **kw):
    return read_header(build_batch([(None, b"v", (), 1000)] * n, base_offset=base_offset, producer_id=pid,
                                   producer_epoch=epoch, base_sequence=seq, **kw))


def test_sequence_wraps_from_int32_max_to_zero():
    state = ProducerState()
    state.update(_header(0, n=1, seq=INT32_MAX))
    assert state.check_client_batch(_header(seq=0)) is None
    assert isinstance(state.check_client_batch(_header(seq=1)), AppendError)


def test_only_last_five_batches_are_remembered_for_duplicates():
    state = ProducerState()
    for i in range(7):
        state.update(_header(i, seq=i))
    assert state.check_client_batch(_header(seq=6)) == BatchMetadata(6, 6, 6, 6, 1000)
    assert state.check_client_batch(_header(seq=2)) == BatchMetadata(2, 2, 2, 2, 1000)
    old = state.check_client_batch(_header(seq=1))
    assert isinstance(old, AppendError) and old.error_code == ErrorCode.out_of_order_sequence_number


def test_epoch_rules():
    state = ProducerState()
    state.update(_header(0, epoch=3, seq=0))
    stale = state.check_client_batch(_header(epoch=2, seq=1))
    assert isinstance(stale, AppendError) and stale.error_code == ErrorCode.invalid_producer_epoch
    assert state.check_client_batch(_header(epoch=4, seq=0)) is None
    bad = state.check_client_batch(_header(epoch=4, seq=9))
    assert isinstance(bad, AppendError) and bad.error_code == ErrorCode.out_of_order_sequence_number
    assert state.check_client_batch(_header(pid=2, seq=123)) is None  # unknown producer (KIP-360)


def test_transactions_bound_first_unstable_offset():
    state = ProducerState()
    state.update(_header(5, pid=1, is_transactional=True))
    state.update(_header(6, pid=2, is_transactional=True))
    assert state.first_unstable_offset == 5
    state.update(_header(7, pid=1, seq=-1, is_transactional=True, is_control=True))
    assert state.first_unstable_offset == 6
    assert state.affected_by_truncation(7) and not state.affected_by_truncation(8)


def test_a_producer_expires_after_its_last_batch_unless_its_transaction_is_open():
    state = ProducerState()  # every batch of _header is timestamped 1000
    state.update(_header(0, pid=1, seq=0))
    state.update(_header(1, pid=2, seq=0, is_transactional=True))
    state.maybe_create_verification_state_entry(3, 0, 0, now_ms=1000)
    assert state.remove_expired_producers(1000 + PRODUCER_ID_EXPIRATION_MS - 1) == 0
    assert set(state.producers) == {1, 2} and state.verification_state_entry(3) is not None
    assert state.remove_expired_producers(1000 + PRODUCER_ID_EXPIRATION_MS) == 1
    assert set(state.producers) == {2}  # its transaction is open
    assert state.verification_state_entry(3) is None
    assert state.check_client_batch(_header(pid=1, seq=7)) is None  # a new producer to the partition
    state.update(_header(2, pid=2, seq=-1, is_transactional=True, is_control=True))
    assert state.remove_expired_producers(1000 + PRODUCER_ID_EXPIRATION_MS) == 1
    assert state.producers == {}
