"""`ReplicaManager.idle_consumer_read`: the offsets a consumer read answers with when it holds
nothing else, told without reading, only when `fetch` would answer that way (and whenever it
would, unless a rack-aware selector may send the consumer elsewhere)."""

from uuid import uuid4

import pytest

from kmirror.metadata.image import PartitionRegistration
from kmirror.records.builder import build_batch
from kmirror.replication.outcomes import READ_COMMITTED, READ_UNCOMMITTED, ReadOutcome
from kmirror.replication.replica_manager import FetchPartitionRequest
from kmirror.testing.replication import data_services, image_with, server_config
from kmirror.types import TopicPartition

T_ID = uuid4()
SOLO, PAIR = TopicPartition("t", 0), TopicPartition("t", 1)
EPOCH = 4


def batch(value: bytes, **fields: int | bool) -> bytes:
    return build_batch([(b"k", value, (), 1_700_000_000_000)], **fields)  # type: ignore[arg-type]


def services(**config: str):
    image = image_with({"t": (T_ID, {
        0: PartitionRegistration((1,), (1,), 1, EPOCH, 0),
        1: PartitionRegistration((1, 2), (1, 2), 1, EPOCH, 0),  # HW waits for broker 2
    })})
    svc = data_services(image)
    if config:
        svc.replica_manager.config = server_config(1, **config)
    rm = svc.replica_manager
    for value in (b"a", b"b", b"c"):
        rm.append_records({SOLO: batch(value), PAIR: batch(value)}, 1)
    # An open transaction on SOLO: its LSO stays below its HW.
    rm.append_records({SOLO: batch(b"txn", producer_id=7, producer_epoch=0, base_sequence=0,
                                   is_transactional=True)}, 1)
    rm.append_records({SOLO: batch(b"d")}, 1)
    rm.delete_records({SOLO: 1})
    return svc


def reads():
    for tp in (SOLO, PAIR, TopicPartition("t", 9), TopicPartition("other", 0)):
        for fetch_offset in range(-1, 8):
            for isolation_level in (READ_UNCOMMITTED, READ_COMMITTED):
                for epoch in (-1, EPOCH - 1, EPOCH, EPOCH + 1):
                    for rack in (None, "", "rack-a"):
                        yield tp, fetch_offset, isolation_level, epoch, rack


@pytest.mark.parametrize("config", [{}, {"replica_selector_class": "RackAwareReplicaSelector"}])
def test_idle_exactly_when_fetch_answers_offsets_only(config: dict[str, str]) -> None:
    rm = services(**config).replica_manager
    log = rm.get_partition(SOLO).log
    assert log.log_start_offset == 1 and log.last_stable_offset < log.high_watermark
    assert rm.get_partition(PAIR).log.high_watermark < rm.get_partition(PAIR).log.log_end_offset
    idle_seen = 0
    for tp, fetch_offset, isolation_level, epoch, rack in reads():
        told = rm.idle_consumer_read(tp, fetch_offset, isolation_level, epoch, rack)
        (result,) = rm.fetch([FetchPartitionRequest(tp, fetch_offset, 1 << 20, epoch)], 1 << 20, isolation_level,
                             client_rack=rack).values()
        offsets_only = (isinstance(result, ReadOutcome) and result.size == 0 and result.preferred_read_replica < 0
                        and result.diverging_epoch is None)
        case = (tp, fetch_offset, isolation_level, epoch, rack)
        if told is None:
            # With the rack-aware selector a consumer with a rack is always read (the
            # selector may name another replica).
            assert not offsets_only or (rack and config), case
        else:
            idle_seen += 1
            assert offsets_only, case
            assert told == (result.high_watermark, result.last_stable_offset, result.log_start_offset), case
    assert idle_seen > 0
