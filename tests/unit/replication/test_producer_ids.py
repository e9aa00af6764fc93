import pytest

from kmirror.replication.producer_ids import ProducerIdBlock, ProducerIdManager, producer_id_block_from


def test_ids_come_from_the_block_in_order_until_exhausted() -> None:
    manager = ProducerIdManager()
    assert manager.next_producer_id() is None
    assert manager.add_block(ProducerIdBlock(1000, 2))
    assert [manager.next_producer_id() for _ in range(3)] == [1000, 1001, None]
    assert not manager.add_block(ProducerIdBlock(1001, 5))  # stale or overlapping
    assert manager.add_block(ProducerIdBlock(2000, 1))
    assert manager.next_producer_id() == 2000


def test_block_shapes() -> None:
    assert producer_id_block_from((5, 10)) == ProducerIdBlock(5, 10)

    class Answer:
        producer_id_start = 7
        producer_id_len = 3

    assert producer_id_block_from(Answer()) == ProducerIdBlock(7, 3)
    with pytest.raises(ValueError):
        ProducerIdManager().add_block(ProducerIdBlock(0, 0))
