"""KIP-1279 MIRROR_PID_RESET: the control record expires every producer, on append (leader or
replicated) and when the producer state is rebuilt from the log."""

from kmirror.log.append_analysis import AppendOrigin
from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.log.outcomes import AppendError, LogAppendInfo
from kmirror.log.producer_state import ProducerState, control_type_for_state
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import read_header
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, build_control_batch
from kmirror.records.mirror_pid_reset import encode_mirror_pid_reset
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

TP = TopicPartition("t", 0)
NOW = 1_700_000_000_000


def _open(fs=None, **kw):
    return Log.open(fs or MemoryFileSystem(), "/data/t-0", TP, LogConfig(), ManualClock(NOW), **kw)


def _idempotent(seq, pid=9, epoch=0, n=1, **kw):
    return build_batch([(None, b"v", (), NOW) for _ in range(n)], producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, **kw)


def _pid_reset(**kw):
    return build_control_batch(ControlType.MIRROR_PID_RESET, -1, -1, NOW,
                               value=encode_mirror_pid_reset("source-cluster"), **kw)


def _leader_reset(log, epoch=1):
    info = log.append_as_leader(_pid_reset(), epoch, origin=AppendOrigin.COORDINATOR)
    assert isinstance(info, LogAppendInfo)
    return info


def test_control_type_is_read_for_every_control_batch_and_none_for_data():
    reset = _pid_reset()
    assert control_type_for_state(reset, 0, read_header(reset, 0)) is ControlType.MIRROR_PID_RESET
    data = _idempotent(0)
    assert control_type_for_state(data, 0, read_header(data, 0)) is None
    commit = build_control_batch(ControlType.COMMIT, 5, 0, NOW)
    assert control_type_for_state(commit, 0, read_header(commit, 0)) is ControlType.COMMIT
    abort = build_control_batch(ControlType.ABORT, 5, 0, NOW)
    assert control_type_for_state(abort, 0, read_header(abort, 0)) is ControlType.ABORT
    leader_change = build_control_batch(ControlType.LEADER_CHANGE, -1, -1, NOW, value=b"")
    assert control_type_for_state(leader_change, 0, read_header(leader_change, 0)) is ControlType.LEADER_CHANGE


def test_update_with_pid_reset_forgets_every_producer_and_other_controls_do_not():
    state = ProducerState()
    state.update(read_header(_idempotent(0, pid=1, base_offset=0), 0))
    state.update(read_header(_idempotent(0, pid=2, base_offset=1, is_transactional=True), 0))
    leader_change = read_header(build_control_batch(ControlType.LEADER_CHANGE, -1, -1, NOW, base_offset=2), 0)
    state.update(leader_change, control_type=ControlType.LEADER_CHANGE)
    assert set(state.producers) == {1, 2} and state.first_unstable_offset == 1
    state.update(read_header(_pid_reset(base_offset=3), 0), control_type=ControlType.MIRROR_PID_RESET)
    assert state.producers == {} and state.first_unstable_offset is None
    assert state.last_reset_offset == 3
    assert state.affected_by_truncation(3) and not state.affected_by_truncation(4)


def test_leader_append_of_pid_reset_expires_producers_so_old_sequences_are_not_checked():
    log = _open()
    log.append_as_leader(_idempotent(0, n=3), 0)
    assert log.append_as_leader(_idempotent(0, n=3), 0).duplicate
    info = _leader_reset(log)
    assert (info.first_offset, info.last_offset) == (3, 3)
    assert log.producer_state.producers == {}
    # The same producer id and sequence are no longer a duplicate, and a gap is accepted
    # (an unknown producer may start anywhere): the old sequences are never checked.
    again = log.append_as_leader(_idempotent(0, n=3), 1)
    assert isinstance(again, LogAppendInfo) and not again.duplicate and again.first_offset == 4
    gap = log.append_as_leader(_idempotent(50, pid=10), 1)
    assert isinstance(gap, LogAppendInfo)


def test_pid_reset_in_the_middle_of_one_leader_append_keeps_only_later_producers():
    log = _open()
    log.append_as_leader(_idempotent(0, pid=1), 0)
    log.append_as_leader(_idempotent(0, pid=2), 0)
    records = _idempotent(1, pid=1) + _pid_reset() + _idempotent(0, pid=3)
    info = log.append_as_leader(records, 1, origin=AppendOrigin.COORDINATOR)
    assert isinstance(info, LogAppendInfo) and log.log_end_offset == 5
    assert set(log.producer_state.producers) == {3}


def test_replicated_pid_reset_expires_producers_on_followers():
    log = _open()
    log.append_as_follower(_idempotent(0, n=2, base_offset=0, partition_leader_epoch=0))
    log.append_as_follower(_idempotent(0, pid=4, base_offset=2, partition_leader_epoch=0, is_transactional=True))
    assert log.producer_state.first_unstable_offset == 2
    result = log.append_as_follower(_pid_reset(base_offset=3, partition_leader_epoch=1))
    assert isinstance(result, LogAppendInfo)
    assert log.producer_state.producers == {} and log.producer_state.first_unstable_offset is None


def test_pid_reset_replays_on_rebuild_after_a_crash():
    fs = MemoryFileSystem()
    log = _open(fs)
    log.append_as_leader(_idempotent(0, n=2), 0)
    _leader_reset(log)
    log.append_as_leader(_idempotent(0, pid=5), 1)
    log.flush()
    # No clean close: no producer snapshot, the state is rebuilt by scanning the log.
    again = _open(fs)
    assert set(again.producer_state.producers) == {5}
    retried = again.append_as_leader(_idempotent(0, n=2), 1)
    assert isinstance(retried, LogAppendInfo) and not retried.duplicate


def test_pid_reset_state_survives_a_clean_restart():
    fs = MemoryFileSystem()
    log = _open(fs)
    log.append_as_leader(_idempotent(0, n=2), 0)
    _leader_reset(log)
    log.close()
    again = _open(fs, recovery_point=2)
    assert again.producer_state.producers == {}
    assert not again.append_as_leader(_idempotent(0, n=2), 1).duplicate


def test_truncating_the_pid_reset_away_restores_the_producers_before_it():
    log = _open()
    log.append_as_leader(_idempotent(0, n=2), 0)
    assert _leader_reset(log).first_offset == 2
    assert log.truncate_to(2)
    assert set(log.producer_state.producers) == {9}
    dup = log.append_as_leader(_idempotent(0, n=2), 0)
    assert dup.duplicate
    out_of_order = log.append_as_leader(_idempotent(5), 0)
    assert isinstance(out_of_order, AppendError) and out_of_order.error_code == ErrorCode.out_of_order_sequence_number


def test_client_cannot_write_a_pid_reset():
    log = _open()
    log.append_as_leader(_idempotent(0), 0)
    refused = log.append_as_leader(_pid_reset(), 0)
    assert isinstance(refused, AppendError)
    assert set(log.producer_state.producers) == {9}
